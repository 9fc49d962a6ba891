'use strict';
// Adapter: the original's lib/defs, served by ours.
module.exports = require('../../lib/defs');
