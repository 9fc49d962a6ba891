'use strict';

// lib/recovery.js with fake models (no broker): option handling, backoff,
// event order, and the behaviour around giving up and closing.

const { describe, it } = require('node:test');
const assert = require('node:assert');
const EventEmitter = require('node:events');

const recovery = require('../lib/recovery');

class FakeModel extends EventEmitter {
  constructor(id) {
    super();
    this.id = id;
    this.closed = false;
  }

  close() {
    this.closed = true;
    return Promise.resolve();
  }

  createChannel(options) {
    return Promise.resolve({ id: this.id, options });
  }
}

// The callback API's model closes with a callback.
class FakeCallbackModel extends FakeModel {
  close(cb) {
    this.closed = true;
    cb(null);
  }
}

const FAST = { initialDelay: 1, maxDelay: 1, jitter: 0 };

describe('recovery options', () => {
  it('splitConnectionOptions takes out `recovery` without touching the input', () => {
    const input = { recovery: { maxRetries: 2 }, timeout: 10 };
    const { connectionOptions, recovery: r } = recovery.splitConnectionOptions(input);
    assert.deepStrictEqual(connectionOptions, { timeout: 10 });
    assert.deepStrictEqual(r, { maxRetries: 2 });
    assert.ok('recovery' in input);
    for (const plain of [undefined, null, false, 'x', { timeout: 1 }]) {
      assert.deepStrictEqual(recovery.splitConnectionOptions(plain), { connectionOptions: plain, recovery: null });
    }
  });

  it('recoveryEnabled', () => {
    assert.strictEqual(recovery.recoveryEnabled(undefined), false);
    assert.strictEqual(recovery.recoveryEnabled(null), false);
    assert.strictEqual(recovery.recoveryEnabled(false), false);
    assert.strictEqual(recovery.recoveryEnabled(true), true);
    assert.strictEqual(recovery.recoveryEnabled({}), true);
    assert.strictEqual(recovery.recoveryEnabled({ enabled: false }), false);
  });

  it('defaults and clamping', () => {
    const d = recovery.normaliseRecoveryOptions(true);
    assert.deepStrictEqual(d, { initialDelay: 100, maxDelay: 30000, factor: 2, jitter: 0.2, maxRetries: Infinity, setup: null });
    const n = recovery.normaliseRecoveryOptions({ initialDelay: -5, maxDelay: 'x', factor: 0.5, jitter: 3, maxRetries: -1 });
    assert.deepStrictEqual(n, { initialDelay: 0, maxDelay: 30000, factor: 1, jitter: 1, maxRetries: 0, setup: null });
    assert.strictEqual(recovery.normaliseRecoveryOptions({ initialDelay: 500, maxDelay: 100 }).maxDelay, 500);
    assert.strictEqual(recovery.normaliseRecoveryOptions({ maxRetries: 'lots' }).maxRetries, Infinity);
  });

  it('backoff grows by factor up to maxDelay, jitter stays within bounds', () => {
    const s = recovery.normaliseRecoveryOptions({ initialDelay: 100, maxDelay: 1000, factor: 2, jitter: 0 });
    assert.deepStrictEqual([1, 2, 3, 4, 5, 6].map((n) => recovery.backoffDelay(s, n)), [100, 200, 400, 800, 1000, 1000]);
    const j = recovery.normaliseRecoveryOptions({ initialDelay: 1000, factor: 1, jitter: 0.2 });
    for (let i = 0; i < 200; i++) {
      const delay = recovery.backoffDelay(j, 1);
      assert.ok(delay >= 800 && delay <= 1200, String(delay));
    }
  });
});

describe('recovering model', () => {
  it('emits connect, disconnect, reconnect-scheduled, connect in that order', async () => {
    const models = [];
    const client = await recovery.connectWithRecoveryPromise(() => {
      const m = new FakeModel(models.length + 1);
      models.push(m);
      return Promise.resolve(m);
    }, FAST);
    const events = [];
    for (const name of ['connect', 'disconnect', 'reconnect-scheduled', 'connect-failed']) {
      client.on(name, (arg) => events.push([name, arg]));
    }
    const reconnected = new Promise((resolve) => client.once('connect', resolve));
    const cause = new Error('gone');
    models[0].emit('close', cause);
    await reconnected;
    assert.deepStrictEqual(
      events.map((e) => e[0]),
      ['disconnect', 'reconnect-scheduled', 'connect'],
    );
    assert.strictEqual(events[0][1], cause);
    assert.deepStrictEqual(events[1][1], { attempt: 1, delay: 1, error: cause });
    assert.strictEqual(events[2][1], models[1]);
    assert.strictEqual((await client.createChannel({ a: 1 })).id, 2);
    await client.close();
    assert.ok(models[1].closed);
  });

  it('a close without an error still reconnects, reporting "Connection closed"', async () => {
    const models = [];
    const client = await recovery.connectWithRecoveryPromise(() => {
      const m = new FakeModel(models.length + 1);
      models.push(m);
      return Promise.resolve(m);
    }, FAST);
    const disconnected = new Promise((resolve) => client.once('disconnect', resolve));
    models[0].emit('close');
    assert.strictEqual((await disconnected).message, 'Connection closed');
    await new Promise((resolve) => client.once('connect', resolve));
    await client.close();
  });

  it('passes through blocked, unblocked, error and update-secret-ok', async () => {
    const model = new FakeModel(1);
    const client = await recovery.connectWithRecoveryPromise(() => Promise.resolve(model), FAST);
    const seen = [];
    for (const name of ['blocked', 'unblocked', 'error', 'update-secret-ok']) {
      client.on(name, (...args) => seen.push([name, ...args]));
    }
    const err = new Error('x');
    model.emit('blocked', 'low on memory');
    model.emit('unblocked');
    model.emit('error', err);
    model.emit('update-secret-ok');
    assert.deepStrictEqual(seen, [['blocked', 'low on memory'], ['unblocked'], ['error', err], ['update-secret-ok']]);
    await client.close();
    // a model let go of may still emit errors without crashing anything
    model.emit('error', new Error('late'));
  });

  it('setup failures count as failed attempts; callback-style setup is supported', async () => {
    let calls = 0;
    const failures = [];
    const client = recovery.connectWithRecoveryCallback(
      () => Promise.resolve(new FakeCallbackModel(++calls)),
      {
        ...FAST,
        setup(model, done) {
          if (model.id === 1) done(new Error('setup broke'));
          else done();
        },
      },
      () => {},
    );
    client.on('connect-failed', (err) => failures.push(err.message));
    await new Promise((resolve) => client.once('connect', resolve));
    assert.deepStrictEqual(failures, ['setup broke']);
    assert.strictEqual(calls, 2);
    await new Promise((resolve) => client.close(resolve));
  });

  it('after giving up, waiting operations and new ones fail instead of hanging', async () => {
    const client = new recovery.RecoveringPromiseModel(() => Promise.reject(new Error('nope')), {
      ...FAST,
      maxRetries: 1,
    });
    const pending = client.createChannel();
    const gaveUp = new Promise((resolve) => client.once('reconnect-failed', resolve));
    await assert.rejects(pending, /nope/);
    assert.strictEqual((await gaveUp).message, 'nope');
    await assert.rejects(client.createChannel(), /nope/);
    await assert.rejects(client.waitForConnect(), /nope/);
    await client.close();
  });

  it('close() stops reconnecting and fails later operations', async () => {
    let opened = 0;
    const client = new recovery.RecoveringPromiseModel(() => {
      opened++;
      return Promise.reject(new Error('down'));
    }, { initialDelay: 50, jitter: 0 });
    const waiting = client.createChannel();
    await new Promise((resolve) => setTimeout(resolve, 10));
    await client.close();
    await assert.rejects(waiting, /Connection closed/);
    await assert.rejects(client.createChannel(), /Connection closed/);
    await new Promise((resolve) => setTimeout(resolve, 80));
    assert.strictEqual(opened, 1);
  });
});
