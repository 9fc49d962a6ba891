'use strict';
// Adapter: the original's lib/channel_model, served by ours.
module.exports = require('../../lib/channel_model');
