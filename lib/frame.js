'use strict';
// Frame-level constants as amqplib's lib/frame.js exports them. Frames themselves are
// parsed and written by the native core (core/src/frame.rs).

const { constants } = require('./spec');

// The frame a heartbeat decodes to: one shared object, compared by identity.
const HEARTBEAT = { channel: 0 };

const HEARTBEAT_BUF = Buffer.from([constants.FRAME_HEARTBEAT, 0, 0, 0, 0, 0, 0, constants.FRAME_END]);

const PROTOCOL_HEADER = `AMQP${String.fromCharCode(0, 0, 9, 1)}`;

module.exports = { HEARTBEAT, HEARTBEAT_BUF, PROTOCOL_HEADER };
