'use strict';
// Adapter: the original's lib/error, served by ours.
module.exports = require('../../lib/error');
