'use strict';
// Human-readable renderings of frames and close reasons, for error messages.

const { format } = require('node:util');
const defs = require('./defs');
const { HEARTBEAT } = require('./frame');
const { VIOLATION_HEADER_EXPECTED, VIOLATION_CONTENT_EXPECTED, VIOLATION_DELIVERY_EXPECTED, VIOLATION_TOO_MUCH_CONTENT } = require('./boundary');

function closeMessage(close) {
  const code = close.fields.replyCode;
  return format('%d (%s) with message "%s"', code, defs.constant_strs[code], close.fields.replyText);
}

function methodName(id) {
  return defs.info(id).name;
}

function inspect(frame, showFields) {
  if (frame === HEARTBEAT) return '<Heartbeat>';
  if (!frame.id) return format('<Content channel:%d size:%d>', frame.channel, frame.size);
  const fields = showFields ? ` ${JSON.stringify(frame.fields, undefined, 2)}` : '';
  return format('<%s channel:%d%s>', defs.info(frame.id).name, frame.channel, fields);
}

// The words of each content rule a channel can break (the core's `Violation`, numbered by
// lib/boundary.js), exactly as amqplib's channel words them: the core reports which rule and
// its parameters, and this is the one place they become text. Each takes the channel error
// event (lib/incoming.js's ChannelViolation).
const violationWords = {
  [VIOLATION_HEADER_EXPECTED]: () => 'Expected headers frame after delivery',
  [VIOLATION_CONTENT_EXPECTED]: () => 'Expected content frame after headers',
  // amqplib renders the frame it got: a header (blamed is its class) or, blamed on nothing, a
  // body frame, which has no size of its own, hence amqplib's "size:NaN".
  [VIOLATION_DELIVERY_EXPECTED]: (v) =>
    format('Expected BasicDeliver or BasicReturn; got %s', inspect(v.blamed ? { id: v.blamed, channel: v.channel } : { channel: v.channel })),
  [VIOLATION_TOO_MUCH_CONTENT]: (v) => format('Too much content sent! Expected %d bytes', v.bodySize),
};

function violationText(v) {
  return violationWords[v.kind](v);
}

module.exports = { closeMessage, methodName, inspect, violationText, violationWords };
