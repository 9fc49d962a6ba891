'use strict';
// Adapter: the original's lib/heartbeat, served by ours.
module.exports = require('../../lib/heartbeat');
