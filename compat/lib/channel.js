'use strict';
// Adapter: the original's lib/channel, served by ours.
module.exports = require('../../lib/channel');
