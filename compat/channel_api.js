'use strict';
// Adapter: the original's promise entry point, served by ours.
module.exports = require('../index');
