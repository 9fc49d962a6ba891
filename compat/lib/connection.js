'use strict';
// Adapter: the original's lib/connection, served by ours.
module.exports = require('../../lib/connection');
