'use strict';
// Adapter: the original's lib/codec, served by ours.
module.exports = require('../../lib/codec');
