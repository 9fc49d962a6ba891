'use strict';
// Adapter: the original's lib/credentials, served by ours.
module.exports = require('../../lib/credentials');
