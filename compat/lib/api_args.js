'use strict';
// Adapter: the original's lib/api_args, served by ours.
module.exports = require('../../lib/api_args');
