'use strict';
// Field tables, as amqplib's lib/codec.js exposes them; the work is done by the native core
// (in development builds only: lib/codec_exports.js).

const { codecExport } = require('./codec_exports');
const { TapeReader } = require('./tape');

// Writes `table` (length-prefixed) into `buffer` at `offset`; returns the bytes written.
function encodeTable(buffer, table, offset) {
  const encoded = codecExport('encodeTable')(table);
  if (offset + encoded.length > buffer.length) throw new RangeError('Table does not fit in the buffer');
  return encoded.copy(buffer, offset);
}

// Decodes a table body (without its length prefix).
function decodeFields(slice) {
  const reader = new TapeReader();
  const decoded = codecExport('decodeTable')(slice);
  return reader.table(decoded[0], reader.load(...decoded));
}

module.exports = { encodeTable, decodeFields };
