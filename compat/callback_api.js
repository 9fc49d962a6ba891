'use strict';
// Adapter: the original's callback entry point, served by ours.
module.exports = require('../callback_api');
