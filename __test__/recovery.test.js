'use strict';

// lib/recovery.js with fake models (no broker): option handling, backoff,
// event order, and the behaviour around giving up and closing. The scenarios
// of 'recovering model' and 'recovery as amqplib 2.3.1' run against our
// module and against amqplib 2.3.1's lib/recovery.js (the devDependency
// amqplib-latest), which take the same arguments: both must pass, and where
// a scenario records what happened, both records must be the same.

const { describe, it } = require('node:test');
const assert = require('node:assert');
const EventEmitter = require('node:events');

const path = require('node:path');

const recovery = require('../lib/recovery');
const latestRecovery = require(path.join(path.dirname(require.resolve('amqplib-latest')), 'lib', 'recovery.js'));

const LIBS = [
  ['ours', recovery],
  ['amqplib 2.3.1', latestRecovery],
];

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

  createConfirmChannel(options) {
    return Promise.resolve({ id: this.id, options, confirm: true });
  }

  updateSecret() {
    return Promise.resolve();
  }
}

// The callback API's model: callbacks instead of promises.
class FakeCallbackModel extends FakeModel {
  close(cb) {
    this.closed = true;
    cb(null);
  }

  createChannel(options, cb) {
    const [opts, done] = typeof options === 'function' ? [undefined, options] : [options, cb];
    done(null, { id: this.id, options: opts });
  }

  createConfirmChannel(options, cb) {
    const [opts, done] = typeof options === 'function' ? [undefined, options] : [options, cb];
    done(null, { id: this.id, options: opts, confirm: true });
  }

  updateSecret(_secret, _reason, cb) {
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
    assert.deepStrictEqual(d, {
      initialDelay: 100,
      maxDelay: 30000,
      factor: 2,
      jitter: 0.2,
      maxRetries: Infinity,
      initialMaxRetries: Infinity,
      setup: null,
      waitForConnect: true,
      calculateDelay: null,
      shuffle: false,
      preferredNode: undefined,
      credentials: null,
      topology: null,
    });
    const n = recovery.normaliseRecoveryOptions({
      initialDelay: -5,
      maxDelay: 'x',
      factor: 0.5,
      jitter: 3,
      maxRetries: -1,
      waitForConnect: 0,
      calculateDelay: 5,
    });
    assert.deepStrictEqual(n, {
      initialDelay: 0,
      maxDelay: 30000,
      factor: 1,
      jitter: 1,
      maxRetries: 0,
      initialMaxRetries: 0,
      setup: null,
      waitForConnect: true, // only `false` turns it off
      calculateDelay: null,
      shuffle: false,
      preferredNode: undefined,
      credentials: null,
      topology: null,
    });
    assert.strictEqual(recovery.normaliseRecoveryOptions({ initialDelay: 500, maxDelay: 100 }).maxDelay, 500);
    assert.strictEqual(recovery.normaliseRecoveryOptions({ maxRetries: 'lots' }).maxRetries, Infinity);
    assert.strictEqual(recovery.normaliseRecoveryOptions({ waitForConnect: false }).waitForConnect, false);
    // initialMaxRetries defaults to maxRetries; when given, it is read as maxRetries is.
    const retries = (given) => {
      const { maxRetries, initialMaxRetries } = recovery.normaliseRecoveryOptions(given);
      return [maxRetries, initialMaxRetries];
    };
    assert.deepStrictEqual(retries({ maxRetries: 3 }), [3, 3]);
    assert.deepStrictEqual(retries({ maxRetries: 3, initialMaxRetries: 1 }), [3, 1]);
    assert.deepStrictEqual(retries({ initialMaxRetries: 2 }), [Infinity, 2]);
    assert.deepStrictEqual(retries({ maxRetries: 3, initialMaxRetries: 'x' }), [3, 3]);
    assert.deepStrictEqual(retries({ maxRetries: 3, initialMaxRetries: -2 }), [3, 0]);
    assert.deepStrictEqual(retries({ maxRetries: 2, initialMaxRetries: Infinity }), [2, Infinity]);
    assert.deepStrictEqual(retries({ maxRetries: 2, initialMaxRetries: null }), [2, 2]);
  });

  it('backoff grows by factor, jitter included stays under maxDelay', () => {
    const s = recovery.normaliseRecoveryOptions({ initialDelay: 100, maxDelay: 1000, factor: 2, jitter: 0 });
    assert.deepStrictEqual([1, 2, 3, 4, 5, 6].map((n) => recovery.backoffDelay(s, n)), [100, 200, 400, 800, 1000, 1000]);
    const j = recovery.normaliseRecoveryOptions({ initialDelay: 1000, factor: 1, jitter: 0.2 });
    for (let i = 0; i < 200; i++) {
      const delay = recovery.backoffDelay(j, 1);
      assert.ok(delay >= 800 && delay <= 1200, String(delay));
    }
    // Capped: the base stops at maxDelay / (1 + jitter), so the spread is [20000, 30000]
    // with the defaults, never over maxDelay.
    const d = recovery.normaliseRecoveryOptions(true);
    for (let i = 0; i < 200; i++) {
      const delay = recovery.backoffDelay(d, 30);
      assert.ok(delay >= 20000 && delay <= 30000, String(delay));
    }
  });

  it('reconnectDelay: calculateDelay in place of the backoff, checked', () => {
    const custom = (fn) => recovery.normaliseRecoveryOptions({ maxDelay: 10, calculateDelay: fn });
    assert.strictEqual(recovery.reconnectDelay(custom((n) => n * 100), 3), 300, 'maxDelay does not apply');
    assert.strictEqual(recovery.reconnectDelay(custom(() => 2.5), 1), 3, 'rounded');
    assert.strictEqual(recovery.reconnectDelay(custom(() => 0), 1), 0);
    for (const [value, shown] of [[-1, '-1'], [NaN, 'NaN'], [Infinity, 'Infinity'], ['5', '5'], [undefined, 'undefined'], [null, 'null']]) {
      assert.throws(() => recovery.reconnectDelay(custom(() => value), 1), {
        message: `calculateDelay must return a finite, non-negative number of milliseconds (got ${shown})`,
      });
    }
  });
});

for (const [name, recovery] of LIBS) describe(`recovering model (${name})`, () => {
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

// --- amqplib 2.1.0 to 2.3.1: each scenario records what happened, with each library ----

const RECORDED = ['connect', 'disconnect', 'connect-failed', 'reconnect-scheduled', 'reconnect-failed'];

function describeEvent(name, arg) {
  if (name === 'connect') return `connect ${arg.id}`;
  if (name === 'reconnect-scheduled') return `reconnect-scheduled ${arg.attempt} ${arg.delay} ${arg.error.message}`;
  return `${name} ${arg.message}`;
}

function record(client, log) {
  for (const name of RECORDED) client.on(name, (arg) => log.push(describeEvent(name, arg)));
}

// An openModel whose attempts go as `plan` says, one entry each: 'ok' opens a model (numbered
// from 1), anything else fails with that message; past the plan's end, every attempt fails.
function opener(plan, Model = FakeModel) {
  const state = { attempts: 0, models: [] };
  state.open = () => {
    const step = plan[state.attempts++] ?? 'refused';
    if (step !== 'ok') return Promise.reject(new Error(step));
    const model = new Model(state.models.length + 1);
    state.models.push(model);
    return Promise.resolve(model);
  };
  return state;
}

const once = (emitter, event) => new Promise((resolve) => emitter.once(event, resolve));
const settle = (promise) => promise.then(() => 'ok', (err) => `rejected: ${err.message}`);
const later = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// Runs the scenario with our module, then with amqplib 2.3.1's; the records must be the same.
async function sameAsLatest(scenario) {
  const mine = await scenario(recovery);
  const theirs = await scenario(latestRecovery);
  assert.deepStrictEqual(mine, theirs, 'ours and amqplib 2.3.1 differ');
  return mine;
}

describe('recovery as amqplib 2.3.1', () => {
  it('waitForConnect: false hands over the model before the first attempt; waitForConnect() awaits it (promise API)', async () => {
    const log = await sameAsLatest(async (lib) => {
      const log = [];
      const o = opener(['refused', 'ok']);
      const client = await lib.connectWithRecoveryPromise(o.open, { ...FAST, waitForConnect: false });
      log.push(`handed over after ${o.attempts} attempts`);
      record(client, log);
      const connected = await client.waitForConnect();
      log.push(`waitForConnect() gives ${connected === client ? 'the model' : 'something else'}`);
      log.push(`channel on model ${(await client.createChannel()).id}`);
      await client.close();
      return log;
    });
    assert.deepStrictEqual(log, [
      'handed over after 0 attempts',
      'connect-failed refused',
      'reconnect-scheduled 1 1 refused',
      'connect 1',
      'waitForConnect() gives the model',
      'channel on model 1',
    ]);
  });

  it('waitForConnect: false calls back at once; waitForConnect(cb) calls back on connection (callback API)', async () => {
    const log = await sameAsLatest(
      (lib) =>
        new Promise((resolve) => {
          const log = [];
          const o = opener(['refused', 'ok'], FakeCallbackModel);
          const returned = lib.connectWithRecoveryCallback(o.open, { ...FAST, waitForConnect: false }, (err, client) => {
            log.push(`called back with ${err} and ${client === returned ? 'the model' : 'something else'} after ${o.attempts} attempts`);
            record(client, log);
            const chained = client.waitForConnect((err, connected) => {
              log.push(`waitForConnect: ${err} and ${connected === client ? 'the model' : 'something else'}`);
              client.createChannel((err, ch) => {
                log.push(`channel on model ${ch.id}`);
                client.close((err) => {
                  log.push(`closed: ${err}`);
                  resolve(log);
                });
              });
            });
            log.push(`waitForConnect returns ${chained === client ? 'the model' : typeof chained}`);
          });
          log.push(`connect returns ${returned instanceof EventEmitter ? 'the model' : typeof returned}`);
        }),
    );
    assert.deepStrictEqual(log, [
      'connect returns the model',
      'called back with null and the model after 0 attempts',
      'waitForConnect returns the model',
      'connect-failed refused',
      'reconnect-scheduled 1 1 refused',
      'connect 1',
      'waitForConnect: null and the model',
      'channel on model 1',
      'closed: null',
    ]);
  });

  it('close() while the first attempt is in flight: no setup, no connect, the opened model is closed', async () => {
    const scenario = (waitForConnect) => async (lib) => {
      const log = [];
      const model = new FakeModel(1);
      let release;
      const opening = new Promise((started) => {
        const open = () => {
          log.push('opening');
          started();
          return new Promise((resolve) => {
            release = () => resolve(model);
          });
        };
        const options = { ...FAST, waitForConnect, setup: () => log.push('setup ran') };
        const client = new lib.RecoveringPromiseModel(open, options);
        record(client, log);
        log.client = client;
      });
      const client = log.client;
      delete log.client;
      const first = settle(client.waitForConnect());
      await opening;
      await client.close();
      log.push(`waitForConnect: ${await first}`);
      release();
      await later(10);
      log.push(`opened model closed: ${model.closed}`);
      log.push(`createChannel: ${await settle(client.createChannel())}`);
      return log;
    };
    const expected = [
      'opening',
      'waitForConnect: rejected: Connection closed',
      'opened model closed: true',
      'createChannel: rejected: Connection closed',
    ];
    assert.deepStrictEqual(await sameAsLatest(scenario(true)), expected);
    assert.deepStrictEqual(await sameAsLatest(scenario(false)), expected);
  });

  it('close() right after connect() with waitForConnect: false: no attempt at all', async () => {
    const log = await sameAsLatest(async (lib) => {
      const o = opener(['ok']);
      const client = await lib.connectWithRecoveryPromise(o.open, { ...FAST, waitForConnect: false });
      const log = [];
      record(client, log);
      await client.close();
      await later(10);
      log.push(`attempts: ${o.attempts}`, `waitForConnect: ${await settle(client.waitForConnect())}`);
      return log;
    });
    assert.deepStrictEqual(log, ['attempts: 0', 'waitForConnect: rejected: Connection closed']);
  });

  it('calculateDelay gives every delay, attempt by attempt, rounded, with no maxDelay cap', async () => {
    const log = await sameAsLatest(async (lib) => {
      const log = [];
      const o = opener(['a', 'b', 'c', 'ok', 'd', 'ok']);
      const calculateDelay = (attempt) => {
        log.push(`calculateDelay(${attempt})`);
        return attempt * 2 + 0.4;
      };
      const client = await lib.connectWithRecoveryPromise(o.open, { initialDelay: 1, maxDelay: 1, calculateDelay, waitForConnect: false });
      record(client, log);
      await client.waitForConnect();
      const again = once(client, 'connect');
      o.models[0].emit('close', new Error('gone'));
      await again;
      await client.close();
      return log;
    });
    assert.deepStrictEqual(log, [
      'connect-failed a',
      'calculateDelay(1)',
      'reconnect-scheduled 1 2 a',
      'connect-failed b',
      'calculateDelay(2)',
      'reconnect-scheduled 2 4 b',
      'connect-failed c',
      'calculateDelay(3)',
      'reconnect-scheduled 3 6 c',
      'connect 1',
      // counted from 1 again after a connection
      'disconnect gone',
      'calculateDelay(1)',
      'reconnect-scheduled 1 2 gone',
      'connect-failed d',
      'calculateDelay(2)',
      'reconnect-scheduled 2 4 d',
      'connect 2',
    ]);
  });

  it('calculateDelay returning no valid delay ends recovery with a reconnect-failed', async () => {
    for (const [value, shown] of [[-1, '-1'], [NaN, 'NaN'], [Infinity, 'Infinity'], ['10', '10'], [undefined, 'undefined'], [null, 'null']]) {
      const log = await sameAsLatest(async (lib) => {
        const log = [];
        const o = opener(['refused']);
        const client = new lib.RecoveringPromiseModel(o.open, { calculateDelay: () => value });
        record(client, log);
        log.push(`waitForConnect: ${await settle(client.waitForConnect())}`);
        log.push(`createChannel: ${await settle(client.createChannel())}`);
        log.push(`close: ${await settle(client.close())}`, `attempts: ${o.attempts}`);
        return log;
      });
      const message = `calculateDelay must return a finite, non-negative number of milliseconds (got ${shown})`;
      assert.deepStrictEqual(log, [
        'connect-failed refused',
        `reconnect-failed ${message}`,
        `waitForConnect: rejected: ${message}`,
        `createChannel: rejected: ${message}`,
        'close: ok',
        'attempts: 1',
      ]);
    }
  });

  it('calculateDelay throwing ends recovery with its error, also after a connection', async () => {
    const thrown = new Error('no schedule');
    for (const [toThrow, message] of [[thrown, 'no schedule'], ['boom', 'boom'], [undefined, 'calculateDelay failed']]) {
      const log = await sameAsLatest(async (lib) => {
        const log = [];
        const o = opener(['ok']);
        const client = await lib.connectWithRecoveryPromise(o.open, {
          calculateDelay: () => {
            throw toThrow;
          },
        });
        record(client, log);
        client.on('reconnect-failed', (err) => log.push(`the error thrown: ${err === thrown}`));
        o.models[0].emit('close', new Error('gone'));
        log.push(`createChannel: ${await settle(client.createChannel())}`);
        log.push(`waitForConnect: ${await settle(client.waitForConnect())}`);
        return log;
      });
      assert.deepStrictEqual(log, [
        'disconnect gone',
        `reconnect-failed ${message}`,
        `the error thrown: ${toThrow === thrown}`,
        `createChannel: rejected: ${message}`,
        'waitForConnect: ok', // the first connection was made
      ]);
    }
  });

  it('initialMaxRetries bounds the attempts before the first connection, maxRetries those after', async () => {
    const run = (options, plan) => async (lib) => {
      const log = [];
      const o = opener(plan);
      const client = await lib.connectWithRecoveryPromise(o.open, { ...FAST, ...options, waitForConnect: false });
      record(client, log);
      const first = await settle(client.waitForConnect());
      log.push(`waitForConnect: ${first}`);
      if (first === 'ok') {
        const gaveUp = once(client, 'reconnect-failed');
        o.models[0].emit('close', new Error('gone'));
        await gaveUp;
      }
      log.push(`attempts: ${o.attempts}`);
      await client.close();
      return log;
    };
    // Startup fails fast ...
    assert.deepStrictEqual(await sameAsLatest(run({ initialMaxRetries: 1, maxRetries: 5 }, [])), [
      'connect-failed refused',
      'reconnect-scheduled 1 1 refused',
      'connect-failed refused',
      'reconnect-failed refused',
      'waitForConnect: rejected: refused',
      'attempts: 2',
    ]);
    // ... while recovery once connected retries as maxRetries says.
    assert.deepStrictEqual(await sameAsLatest(run({ initialMaxRetries: 0, maxRetries: 2 }, ['ok'])), [
      'connect 1',
      'waitForConnect: ok',
      'disconnect gone',
      'reconnect-scheduled 1 1 gone',
      'connect-failed refused',
      'reconnect-scheduled 2 1 refused',
      'connect-failed refused',
      'reconnect-failed refused',
      'attempts: 3',
    ]);
    // And the other way round; without initialMaxRetries, maxRetries bounds startup too.
    assert.deepStrictEqual(await sameAsLatest(run({ initialMaxRetries: 2, maxRetries: 0 }, ['a', 'b', 'ok'])), [
      'connect-failed a',
      'reconnect-scheduled 1 1 a',
      'connect-failed b',
      'reconnect-scheduled 2 1 b',
      'connect 1',
      'waitForConnect: ok',
      'disconnect gone',
      'reconnect-failed gone',
      'attempts: 3',
    ]);
    assert.deepStrictEqual(await sameAsLatest(run({ maxRetries: 0 }, [])), [
      'connect-failed refused',
      'reconnect-failed refused',
      'waitForConnect: rejected: refused',
      'attempts: 1',
    ]);
  });

  it('the built-in delay never exceeds maxDelay, jitter included', async (t) => {
    // The first two delays, for a given draw of Math.random: the first from initialDelay, the
    // second from a base grown far past the cap.
    const delays = (draw) => async (lib) => {
      t.mock.method(Math, 'random', () => draw);
      try {
        const o = opener([]);
        const client = new lib.RecoveringPromiseModel(o.open, { initialDelay: 1000, factor: 1000, maxDelay: 1500, jitter: 0.5 });
        const first = (await once(client, 'reconnect-scheduled')).delay;
        await client.close();
        const fast = new lib.RecoveringPromiseModel(o.open, { initialDelay: 1, factor: 1e6, maxDelay: 3000, jitter: 0.2 });
        await once(fast, 'reconnect-scheduled');
        const second = (await once(fast, 'reconnect-scheduled')).delay;
        await fast.close();
        return [first, second];
      } finally {
        Math.random.mock.restore();
      }
    };
    // Highest draw: maxDelay itself (2.0.1 went over: 1500 and 3600).
    assert.deepStrictEqual(await sameAsLatest(delays(1 - 2 ** -53)), [1500, 3000]);
    // Lowest: the capped base, maxDelay / (1 + jitter), less its jitter.
    assert.deepStrictEqual(await sameAsLatest(delays(0)), [500, 2000]);
    assert.deepStrictEqual(await sameAsLatest(delays(0.5)), [1000, 2500]);

    // And with real draws: the defaults' steady state is spread over 20 to 30 s.
    for (const [, lib] of LIBS) {
      const clients = Array.from({ length: 50 }, () => new lib.RecoveringPromiseModel(opener([]).open, { initialDelay: 30000 }));
      const seen = await Promise.all(clients.map((c) => once(c, 'reconnect-scheduled')));
      await Promise.all(clients.map((c) => c.close()));
      for (const { delay } of seen) assert.ok(delay >= 20000 && delay <= 30000, String(delay));
    }
  });

  it('after reconnect-failed every operation fails with the failure, in both APIs', async () => {
    const promiseApi = async (lib) => {
      const log = [];
      const o = opener(['ok', 'down']);
      const client = await lib.connectWithRecoveryPromise(o.open, { ...FAST, maxRetries: 1 });
      record(client, log);
      o.models[0].emit('close', new Error('gone'));
      const waiting = settle(client.createChannel()); // asked for while reconnecting
      await once(client, 'reconnect-failed');
      log.push(`waiting createChannel: ${await waiting}`);
      log.push(`createChannel: ${await settle(client.createChannel())}`);
      log.push(`createConfirmChannel: ${await settle(client.createConfirmChannel())}`);
      log.push(`updateSecret: ${await settle(client.updateSecret(Buffer.from('s'), 'r'))}`);
      log.push(`close: ${await settle(client.close())}`);
      log.push(`createChannel after close: ${await settle(client.createChannel())}`);
      return log;
    };
    const callbackApi = async (lib) => {
      const log = [];
      const o = opener(['ok', 'down'], FakeCallbackModel);
      const client = await new Promise((resolve) =>
        lib.connectWithRecoveryCallback(o.open, { ...FAST, maxRetries: 1 }, (err, c) => resolve(c)),
      );
      record(client, log);
      const outcome = (call) => new Promise((resolve) => call((err) => resolve(err ? `failed: ${err.message}` : 'ok')));
      o.models[0].emit('close', new Error('gone'));
      const waiting = outcome((cb) => client.createChannel(cb));
      await once(client, 'reconnect-failed');
      log.push(`waiting createChannel: ${await waiting}`);
      log.push(`createChannel: ${await outcome((cb) => client.createChannel({}, cb))}`);
      log.push(`createConfirmChannel: ${await outcome((cb) => client.createConfirmChannel(cb))}`);
      log.push(`updateSecret: ${await outcome((cb) => client.updateSecret(Buffer.from('s'), 'r', cb))}`);
      log.push(`waitForConnect: ${await outcome((cb) => client.waitForConnect(cb))}`);
      log.push(`close: ${await outcome((cb) => client.close(cb))}`);
      return log;
    };
    const events = ['disconnect gone', 'reconnect-scheduled 1 1 gone', 'connect-failed down', 'reconnect-failed down'];
    assert.deepStrictEqual(await sameAsLatest(promiseApi), [
      ...events,
      'waiting createChannel: rejected: down',
      'createChannel: rejected: down',
      'createConfirmChannel: rejected: down',
      'updateSecret: rejected: down',
      'close: ok',
      'createChannel after close: rejected: down',
    ]);
    assert.deepStrictEqual(await sameAsLatest(callbackApi), [
      ...events,
      'waiting createChannel: failed: down',
      'createChannel: failed: down',
      'createConfirmChannel: failed: down',
      'updateSecret: failed: down',
      'waitForConnect: ok', // the first connection was made
      'close: ok',
    ]);
  });
});

// Through the entry points, against the broker: the option reaches lib/recovery.js.
describe('recovery through connect() (broker)', () => {
  const { AMQP_URL, ours, oursCallback, latest, latestCallback } = require('./helpers');

  it('no URL at all (null, as amqplib takes it) means amqp://localhost, and the connect event says so', async (t) => {
    const broker = new URL(AMQP_URL);
    if (broker.hostname !== 'localhost' || (broker.port && broker.port !== '5672')) return t.skip(`the broker is at ${broker.host}`);
    const client = await ours.connect(null, { recovery: { waitForConnect: false } });
    const [, which] = await new Promise((resolve) => client.once('connect', (...args) => resolve(args)));
    assert.deepStrictEqual(which, { index: 0, node: 'amqp://localhost:5672/' });
    await client.close();
  });

  it('waitForConnect: false, both APIs, as amqplib 2.3.1', async () => {
    const promiseApi = async (lib) => {
      const log = [];
      const client = await lib.connect(AMQP_URL, { recovery: { waitForConnect: false } });
      client.on('connect', () => log.push('connect'));
      log.push('handed over');
      const same = (await client.waitForConnect()) === client;
      const ch = await client.createChannel();
      log.push(`waitForConnect gives the model: ${same}`, `queue: ${(await ch.assertQueue('', { exclusive: true })).queue.slice(0, 7)}`);
      await client.close();
      return log;
    };
    const callbackApi = (lib) =>
      new Promise((resolve, reject) => {
        const log = [];
        const returned = lib.connect(AMQP_URL, { recovery: { waitForConnect: false } }, (err, client) => {
          if (err) return reject(err);
          log.push(`called back with the model returned: ${client === returned}`);
          client.on('connect', () => log.push('connect'));
          client.waitForConnect((err) => {
            if (err) return reject(err);
            client.createChannel((err) => {
              if (err) return reject(err);
              log.push('channel');
              client.close(() => resolve(log));
            });
          });
        });
      });
    const expectedPromise = ['handed over', 'connect', 'waitForConnect gives the model: true', 'queue: amq.gen'];
    assert.deepStrictEqual(await promiseApi(ours), expectedPromise);
    assert.deepStrictEqual(await promiseApi(latest), expectedPromise);
    const expectedCallback = ['called back with the model returned: true', 'connect', 'channel'];
    assert.deepStrictEqual(await callbackApi(oursCallback), expectedCallback);
    assert.deepStrictEqual(await callbackApi(latestCallback), expectedCallback);
  });
});
