'use strict';
// Adapter: the original's lib/frame, served by ours.
module.exports = require('../../lib/frame');
