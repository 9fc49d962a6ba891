'use strict';
// Adapter: the original's lib/connect, served by ours.
module.exports = require('../../lib/connect');
