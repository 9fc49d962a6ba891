'use strict';
// The addon keeps its state per env (src/bindings/instance.rs), not per thread: loaded in the
// main thread and in workers at once, each env encodes with its own, and a worker's state goes
// with it.

const { describe, it } = require('node:test');
const assert = require('node:assert');
const path = require('node:path');
const { Worker } = require('node:worker_threads');
const native = require('../lib/native');
const defs = require('../lib/defs');

const root = path.join(__dirname, '..');

// The same methods encoded twice, through the codec and through a connection: the second
// time, the env's cached property names are read back.
function encodeAll(native, defs, queue) {
  const session = new native.NativeConnection();
  const handle = session.handle();
  // No element is set here: the worker's setters on Array.prototype would swallow it.
  const round = () => {
    native.sendMethod(handle, 1, defs.BasicQos, { prefetchSize: 0, prefetchCount: 7, global: false });
    return defs.encodeMethod(defs.QueueDeclare, 1, { queue, durable: true, arguments: { 'x-max-length': 5 } });
  };
  const first = round();
  const second = round();
  return Buffer.concat([first, second, native.takeOutput(handle)]);
}

// In a fresh env, with setters on Array.prototype that store nothing: the env's cache of
// property names must not depend on setting elements (a name lost so would be read back as
// undefined the second time).
const WORKER = `
  const { parentPort, workerData } = require('node:worker_threads');
  const native = require(${JSON.stringify(path.join(root, 'lib/native'))});
  const defs = require(${JSON.stringify(path.join(root, 'lib/defs'))});
  const encodeAll = ${encodeAll.toString()};
  const names = Array.from({ length: 64 }, (_, i) => String(i));
  for (const name of names) Object.defineProperty(Array.prototype, name, { configurable: true, get() {}, set() {} });
  let encoded;
  try {
    encoded = encodeAll(native, defs, workerData.queue);
  } finally {
    for (const name of names) delete Array.prototype[name];
  }
  parentPort.postMessage(encoded);
`;

function inWorker(queue) {
  return new Promise((resolve, reject) => {
    const worker = new Worker(WORKER, { eval: true, workerData: { queue } });
    worker.once('message', (bytes) => resolve(Buffer.from(bytes)));
    worker.once('error', reject);
    worker.once('exit', (code) => reject(new Error(`the worker exited (${code}) without an answer`)));
  });
}

describe('one addon, several envs', () => {
  it('encodes alike in the main thread and in two workers at once', async () => {
    const [a, b] = await Promise.all([inWorker('q-a'), inWorker('q-b'), encodeAll(native, defs, 'q-main')]);
    assert.ok(encodeAll(native, defs, 'q-a').equals(a), 'worker a');
    assert.ok(encodeAll(native, defs, 'q-b').equals(b), 'worker b');
    assert.notDeepStrictEqual(a, b);
    // And the main env still encodes after the workers' envs are gone.
    const declare = defs.encodeMethod(defs.QueueDeclare, 1, { queue: 'q', durable: true });
    assert.strictEqual(defs.decode(defs.QueueDeclare, declare.subarray(11, declare.length - 1)).queue, 'q');
  });
});
