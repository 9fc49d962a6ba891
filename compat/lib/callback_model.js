'use strict';
// Adapter: the original's lib/callback_model, served by ours.
module.exports = require('../../lib/callback_model');
