'use strict';
// The codec on its own (src/bindings/codec_exports.rs) is in development builds only: the
// cargo feature `codec-exports`, which `npm run build` turns on and the published binaries
// leave out. Connections never use it; lib/defs.js and lib/codec.js expose it under
// amqplib's internal names, for amqplib's test suite and ours.

const native = require('./native');

function codecExport(name) {
  const entryPoint = native[name];
  if (typeof entryPoint !== 'function') {
    throw new Error(`amqplib-rs: ${name} is in development builds only (npm run build in a checkout)`);
  }
  return entryPoint;
}

module.exports = { codecExport };
