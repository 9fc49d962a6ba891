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

// Deno, as a worker ends, runs every Node-API finalizer (`run_napi_ref_finalizers`), those of
// objects JS still holds too: napi-rs frees each NativeConnection, and the handles' data with
// it. `deno test` then runs the event loop once more (`run_up_to_duration(0)`), where a read,
// a flush or a timer of a connection still open would call into freed memory: a SIGSEGV, or
// heap corruption, after the results are printed. Deno dispatches 'unload' just before: from
// then on, whatever would reach a connection's native state does nothing instead (a read
// decodes nothing, there is never output), as if the network had gone quiet.
function inertAfterUnload(addon) {
  const { TAPE_STRING_PAIRS } = require('./boundary');
  let unloaded = false;
  globalThis.addEventListener('unload', () => {
    unloaded = true;
  });
  // The tape of a read that decoded nothing (lib/boundary.js: held, its end, no reset, no strings).
  const emptyRead = () => [new Float64Array([1, TAPE_STRING_PAIRS, 0, 0]), undefined, undefined];
  const idle = {
    sendMethod: () => 0,
    sendMessage: () => 0,
    sendPublish: () => 0,
    sendPublishAgain: () => 0,
    sendAcknowledgement: () => 0,
    receive: emptyRead,
    takeOutput: () => null,
    flushSocket: () => 1,
  };
  const guarded = { ...addon };
  for (const [name, quiet] of Object.entries(idle)) {
    const call = addon[name];
    if (typeof call === 'function') guarded[name] = (...args) => (unloaded ? quiet() : call(...args));
  }
  // NativeConnection's methods and accessors, in place (the class stays the one napi-rs made):
  // numbers read 0, a socket ends at once, the rest returns nothing.
  const proto = addon.NativeConnection.prototype;
  for (const key of Object.getOwnPropertyNames(proto)) {
    if (key === 'constructor') continue;
    const d = Object.getOwnPropertyDescriptor(proto, key);
    if (typeof d.value === 'function') {
      const call = d.value;
      const quiet = key === 'endSocket' ? true : ['channelRefusal', 'openChannel', 'connectSocket', 'setKeepAlive', 'setNoDelay'].includes(key) ? 0 : key === 'channelUnsettled' ? -1 : undefined;
      d.value = function (...args) {
        return unloaded ? quiet : Reflect.apply(call, this, args);
      };
    }
    if (d.get) {
      const get = d.get;
      d.get = function () {
        return unloaded ? 0 : Reflect.apply(get, this, []);
      };
    }
    Object.defineProperty(proto, key, d);
  }
  return guarded;
}

const addon = load();
addon.setErrorWords(require('./core_errors').coreError);
const inDeno = typeof globalThis.Deno?.version?.deno === 'string' && typeof globalThis.addEventListener === 'function';
module.exports = inDeno ? inertAfterUnload(addon) : addon;
