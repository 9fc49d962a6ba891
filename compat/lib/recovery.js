'use strict';
// Adapter: the original's lib/recovery, served by ours.
module.exports = require('../../lib/recovery');
