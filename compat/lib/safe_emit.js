'use strict';
// Adapter: the original's lib/safe_emit, served by ours.
module.exports = require('../../lib/safe_emit');
