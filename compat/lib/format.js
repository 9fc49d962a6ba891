'use strict';
// Adapter: the original's lib/format, served by ours.
module.exports = require('../../lib/format');
