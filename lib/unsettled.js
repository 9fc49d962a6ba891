'use strict';
// A channel's record of the deliveries that wait for an ack is kept in Rust, fed by what the
// connection reads and writes (core/src/unsettled.rs); the connection uses it to write
// consecutive acks as one. This is that record on its own, for the tests that check it
// against a plain set of tags (the development build only: lib/codec_exports.js).

const { codecExport } = require('./codec_exports');

module.exports = { UnsettledTags: codecExport('UnsettledTags') };
