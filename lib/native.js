'use strict';
// Loads the native addon for this platform: a local build in native/ (made by `npm install` in a
// git clone, or `npm run build`) if there is one, else the prebuilt binary from this platform's
// package (amqplib-rs-linux-x64-gnu and so on, an optional dependency of the published package).
// The local build comes first so that a checkout always runs the code it was built from.
// AMQPLIB_RS_ADDON names another build to load instead (the sanitizer run uses it).

const path = require('node:path');

const { ownPlatformSuffix } = require('./platform');

function load() {
  const suffix = ownPlatformSuffix();
  const chosen = process.env.AMQPLIB_RS_ADDON;
  const candidates = chosen ? [path.resolve(chosen)] : [
    path.join(__dirname, '..', 'native', `amqplib_rs.${suffix}.node`),
    `amqplib-rs-${suffix}`,
  ];
  const failures = [];
  for (const candidate of candidates) {
    try {
      return require(candidate);
    } catch (err) {
      // Not there at all: try the next one. There but unloadable: say so.
      const missing = err.code === 'MODULE_NOT_FOUND' && String(err.message).includes(candidate);
      failures.push(missing ? `${candidate}: not found` : `${candidate}: ${err.message}`);
    }
  }
  throw new Error(
    `amqplib-rs: no native addon for ${suffix} could be loaded.\n` +
    failures.map((line) => `  ${line}\n`).join('') +
    `Install the prebuilt binary (\`npm install amqplib-rs-${suffix}\`; npm does this by itself unless ` +
    'optional dependencies are omitted), or build from source with `npm run build` in a git checkout ' +
    '(needs a Rust toolchain: https://rustup.rs).');
}

const addon = load();
addon.setErrorWords(require('./core_errors').coreError);
module.exports = addon;
