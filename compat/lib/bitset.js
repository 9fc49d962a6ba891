'use strict';
// Adapter: the original's lib/bitset, served by ours.
module.exports = require('../../lib/bitset');
