'use strict';
// Loads the native addon built for this platform (by `npm install`, or `npm run build`).

const path = require('node:path');

function platformSuffix() {
  const { platform, arch } = process;
  if (platform !== 'linux') return `${platform}-${arch}`;
  const glibc = process.report?.getReport?.().header?.glibcVersionRuntime;
  return `linux-${arch}-${glibc ? 'gnu' : 'musl'}`;
}

function load() {
  const file = path.join(__dirname, '..', 'native', `amqplib_rs.${platformSuffix()}.node`);
  try {
    return require(file);
  } catch (err) {
    err.message = `amqplib-rs: cannot load the native addon ${file}: ${err.message}\n` +
      'Build it with `npm run build` (needs a Rust toolchain: https://rustup.rs).';
    throw err;
  }
}

module.exports = load();
