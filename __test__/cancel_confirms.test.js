'use strict';

// amqplib 2.2.1's changes to cancel and waitForConfirms, each scenario run against the
// broker with this package and with amqplib 2.3.1 (`amqplib-latest`), compared, and
// spelled out:
//  - promise `cancel` resolves with the server's reply, `{ consumerTag }` (the callback
//    API already called back with it);
//  - once a confirm channel has closed with publishes unconfirmed, `waitForConfirms`
//    fails with 'channel closed' on every call, whether or not those publishes had
//    callbacks (2.0.1 succeeded when each had its own callback, and on any call after
//    the first);
//  - the callback API's `waitForConfirms(cb)` returns nothing and needs its callback.
//    Without one, amqplib 2.3.1 fails by a rejection that nothing can catch (its
//    `k is not a function`, an unhandled rejection); ours throws a TypeError at the call.

const { describe, it } = require('node:test');
const assert = require('node:assert');
const { spawnSync } = require('node:child_process');
const path = require('node:path');

const { AMQP_URL, ROOT, ours, oursCallback, latest, latestCallback, uniqueName, withTimeout, describeError } =
  require('./helpers');

const TIMEOUT = 10000;
const noop = () => {};
const content = Buffer.from('x');

// How a promise settles, in a comparable form.
function settled(promise) {
  return promise.then(
    (value) => ({ outcome: 'resolved', value }),
    (err) => describeError('reject', err),
  );
}

// How a node-style call ends: the (err, value) it calls back with, described.
function calledBack(start) {
  return new Promise((resolve) => {
    start((err, value) => resolve(err ? describeError('callback', err) : { outcome: 'callback ok', value }));
  });
}

const closed = (ch) => new Promise((resolve) => ch.once('close', resolve));

// --- cancel ----------------------------------------------------------------------------

async function promiseCancel(lib) {
  const conn = await lib.connect(AMQP_URL);
  try {
    const ch = await conn.createChannel();
    const { queue } = await ch.assertQueue('', { exclusive: true });
    const { consumerTag } = await ch.consume(queue, noop);
    const named = await ch.consume(queue, noop, { consumerTag: 'mine' });
    return {
      generated: { reply: await ch.cancel(consumerTag), expected: { consumerTag } },
      named: await ch.cancel(named.consumerTag),
    };
  } finally {
    await conn.close();
  }
}

function callbackCancel(lib) {
  return new Promise((resolve, reject) => {
    lib.connect(AMQP_URL, (err, conn) => {
      if (err) return reject(err);
      conn.createChannel((err, ch) => {
        if (err) return reject(err);
        ch.assertQueue('', { exclusive: true }, (err, { queue }) => {
          if (err) return reject(err);
          ch.consume(queue, noop, { consumerTag: 'mine' }, (err) => {
            if (err) return reject(err);
            ch.cancel('mine', (err, ok) => {
              conn.close(() => (err ? reject(err) : resolve(ok)));
            });
          });
        });
      });
    });
  });
}

describe('cancel (amqplib 2.2.1)', () => {
  it('promise API: cancel resolves with { consumerTag }, as amqplib 2.3.1', async () => {
    const mine = await withTimeout(promiseCancel(ours), TIMEOUT, 'ours');
    const theirs = await withTimeout(promiseCancel(latest), TIMEOUT, 'amqplib 2.3.1');
    assert.deepStrictEqual(mine.generated.reply, mine.generated.expected);
    assert.deepStrictEqual(theirs.generated.reply, theirs.generated.expected);
    assert.deepStrictEqual(mine.named, { consumerTag: 'mine' });
    assert.deepStrictEqual(mine.named, theirs.named);
  });

  it('callback API: cancel calls back with { consumerTag }, as amqplib 2.3.1', async () => {
    const mine = await withTimeout(callbackCancel(oursCallback), TIMEOUT, 'ours');
    const theirs = await withTimeout(callbackCancel(latestCallback), TIMEOUT, 'amqplib 2.3.1');
    assert.deepStrictEqual(mine, { consumerTag: 'mine' });
    assert.deepStrictEqual(mine, theirs);
  });
});

// --- waitForConfirms --------------------------------------------------------------------

// A confirm channel that the broker will close: a publish to an exchange that does not
// exist is never confirmed, and the channel closes with a 404 (deterministically, unlike a
// close of our own, which may or may not overtake the broker's acks).
async function confirmChannel(lib) {
  const conn = await lib.connect(AMQP_URL);
  conn.on('error', noop);
  const ch = await conn.createConfirmChannel();
  ch.on('error', noop);
  return { conn, ch, missing: uniqueName('no-such-exchange') };
}

// The promise API's scenarios, each on a channel of its own.
async function promiseConfirmOutcomes(lib) {
  const results = {};

  // Publishes without callbacks; waited for after the close, twice.
  {
    const { conn, ch, missing } = await confirmChannel(lib);
    for (let i = 0; i < 3; i++) ch.publish(missing, '', content);
    await closed(ch);
    results.noCallbacks = [await settled(ch.waitForConfirms()), await settled(ch.waitForConfirms())];
    await conn.close();
  }

  // Every publish with its own callback; waited for after the close, twice.
  {
    const { conn, ch, missing } = await confirmChannel(lib);
    const callbacks = [];
    for (let i = 0; i < 3; i++) ch.publish(missing, '', content, {}, (err) => callbacks.push(err ? err.message : 'ok'));
    await closed(ch);
    results.withCallbacks = {
      callbacks,
      waits: [await settled(ch.waitForConfirms()), await settled(ch.waitForConfirms())],
    };
    await conn.close();
  }

  // Waiting when the channel closes (one publish with a callback, one without), then again.
  {
    const { conn, ch, missing } = await confirmChannel(lib);
    const callbacks = [];
    ch.publish(missing, '', content, {}, (err) => callbacks.push(err ? err.message : 'ok'));
    ch.publish(missing, '', content);
    const waiting = settled(ch.waitForConfirms());
    await closed(ch);
    results.waitingAtClose = { callbacks, wait: await waiting, again: await settled(ch.waitForConfirms()) };
    await conn.close();
  }

  // Everything confirmed before the channel closes: nothing was lost, so it succeeds.
  {
    const { conn, ch } = await confirmChannel(lib);
    const { queue } = await ch.assertQueue('', { exclusive: true });
    for (let i = 0; i < 3; i++) ch.sendToQueue(queue, content);
    const before = await settled(ch.waitForConfirms());
    await ch.close();
    results.allConfirmed = { before, after: await settled(ch.waitForConfirms()) };
    await conn.close();
  }
  return results;
}

// The callback API's, the same scenarios, plus what waitForConfirms(cb) returns.
function callbackConfirmOutcomes(lib) {
  const open = () =>
    new Promise((resolve, reject) => {
      lib.connect(AMQP_URL, (err, conn) => {
        if (err) return reject(err);
        conn.on('error', noop);
        conn.createConfirmChannel((err, ch) => {
          if (err) return reject(err);
          ch.on('error', noop);
          resolve({ conn, ch, missing: uniqueName('no-such-exchange') });
        });
      });
    });
  const closeConnection = (conn) => new Promise((resolve) => conn.close(() => resolve()));
  const wait = (ch) => calledBack((cb) => ch.waitForConfirms(cb));

  return (async () => {
    const results = {};
    {
      const { conn, ch, missing } = await open();
      for (let i = 0; i < 3; i++) ch.publish(missing, '', content);
      await closed(ch);
      results.noCallbacks = [await wait(ch), await wait(ch)];
      await closeConnection(conn);
    }
    {
      const { conn, ch, missing } = await open();
      const callbacks = [];
      for (let i = 0; i < 3; i++) ch.publish(missing, '', content, {}, (err) => callbacks.push(err ? err.message : 'ok'));
      await closed(ch);
      results.withCallbacks = { callbacks, waits: [await wait(ch), await wait(ch)] };
      await closeConnection(conn);
    }
    {
      const { conn, ch, missing } = await open();
      const callbacks = [];
      ch.publish(missing, '', content, {}, (err) => callbacks.push(err ? err.message : 'ok'));
      ch.publish(missing, '', content);
      const waiting = wait(ch);
      await closed(ch);
      results.waitingAtClose = { callbacks, wait: await waiting, again: await wait(ch) };
      await closeConnection(conn);
    }
    {
      const { conn, ch } = await open();
      const queue = await new Promise((resolve, reject) =>
        ch.assertQueue('', { exclusive: true }, (err, ok) => (err ? reject(err) : resolve(ok.queue))),
      );
      for (let i = 0; i < 3; i++) ch.sendToQueue(queue, content);
      let returned;
      const before = await calledBack((cb) => {
        returned = ch.waitForConfirms(cb);
      });
      await new Promise((resolve) => ch.close(resolve));
      results.allConfirmed = { before, after: await wait(ch), returned: typeof returned };
      await closeConnection(conn);
    }
    return results;
  })();
}

const CHANNEL_CLOSED = { outcome: 'reject', name: 'Error', message: 'channel closed' };
const CALLED_BACK_CLOSED = { outcome: 'callback', name: 'Error', message: 'channel closed' };

describe('waitForConfirms after a close with unconfirmed publishes (amqplib 2.2.1)', () => {
  it('promise API: fails with "channel closed" on every call, callbacks or not, as amqplib 2.3.1', async () => {
    const mine = await withTimeout(promiseConfirmOutcomes(ours), TIMEOUT, 'ours');
    const theirs = await withTimeout(promiseConfirmOutcomes(latest), TIMEOUT, 'amqplib 2.3.1');
    assert.deepStrictEqual(mine, theirs);
    assert.deepStrictEqual(mine.noCallbacks, [CHANNEL_CLOSED, CHANNEL_CLOSED]);
    assert.deepStrictEqual(mine.withCallbacks, {
      callbacks: ['channel closed', 'channel closed', 'channel closed'],
      waits: [CHANNEL_CLOSED, CHANNEL_CLOSED],
    });
    assert.deepStrictEqual(mine.waitingAtClose, { callbacks: ['channel closed'], wait: CHANNEL_CLOSED, again: CHANNEL_CLOSED });
    const allAcked = { outcome: 'resolved', value: [undefined, undefined, undefined] };
    assert.deepStrictEqual(mine.allConfirmed, { before: allAcked, after: { outcome: 'resolved', value: [] } });
  });

  it('callback API: calls back with "channel closed" on every call, and returns nothing, as amqplib 2.3.1', async () => {
    const mine = await withTimeout(callbackConfirmOutcomes(oursCallback), TIMEOUT, 'ours');
    const theirs = await withTimeout(callbackConfirmOutcomes(latestCallback), TIMEOUT, 'amqplib 2.3.1');
    assert.deepStrictEqual(mine, theirs);
    assert.deepStrictEqual(mine.noCallbacks, [CALLED_BACK_CLOSED, CALLED_BACK_CLOSED]);
    assert.deepStrictEqual(mine.withCallbacks.waits, [CALLED_BACK_CLOSED, CALLED_BACK_CLOSED]);
    assert.deepStrictEqual(mine.withCallbacks.callbacks, ['channel closed', 'channel closed', 'channel closed']);
    assert.deepStrictEqual(mine.waitingAtClose, { callbacks: ['channel closed'], wait: CALLED_BACK_CLOSED, again: CALLED_BACK_CLOSED });
    const ok = { outcome: 'callback ok', value: undefined };
    assert.deepStrictEqual(mine.allConfirmed, { before: ok, after: ok, returned: 'undefined' });
  });

  // No broker needed: a confirm channel with nothing outstanding, on a stand-in connection.
  // amqplib 2.3.1 runs in a child process, since its failure is an unhandled rejection.
  it('callback API without a callback: a TypeError, thrown here where amqplib 2.3.1 leaves it unhandled', () => {
    const script = (modelPath) => `
      const { ConfirmChannel } = require(${JSON.stringify(modelPath)});
      const seen = {};
      process.on('unhandledRejection', (err) => { seen.unhandled = err.constructor.name; });
      try { seen.returned = typeof new ConfirmChannel({}).waitForConfirms(); }
      catch (err) { seen.thrown = err.constructor.name + ': ' + err.message; }
      setTimeout(() => console.log(JSON.stringify(seen)), 20);
    `;
    const run = (modelPath) => {
      const child = spawnSync(process.execPath, ['-e', script(modelPath)], { encoding: 'utf8', timeout: 10000 });
      assert.strictEqual(child.status, 0, child.stderr);
      return JSON.parse(child.stdout);
    };
    const theirs = run(path.join(path.dirname(require.resolve('amqplib-latest')), 'lib', 'callback_model.js'));
    assert.deepStrictEqual(theirs, { returned: 'undefined', unhandled: 'TypeError' });
    const mine = run(path.join(ROOT, 'lib', 'callback_model.js'));
    assert.deepStrictEqual(mine, { thrown: 'TypeError: waitForConfirms requires a callback function; got undefined' });

    // And in this process: catchable, and nothing is left waiting.
    const { ConfirmChannel } = require(path.join(ROOT, 'lib', 'callback_model.js'));
    const ch = new ConfirmChannel({});
    for (const notAFunction of [undefined, null, 'cb', {}]) assert.throws(() => ch.waitForConfirms(notAFunction), TypeError);
  });
});

// The channel's record of unconfirmed publishes, driven by the same acks and nacks as amqplib
// 2.3.1's: single ones in and out of order, repeated, multiple ones over gaps, and the close.
describe('confirm bookkeeping against amqplib 2.3.1', () => {
  const { Channel: OurChannel } = require(path.join(ROOT, 'lib', 'channel.js'));
  const { Channel: TheirChannel } = require(path.join(path.dirname(require.resolve('amqplib-latest')), 'lib', 'channel.js'));

  // A seeded generator, so that a failing sequence can be run again.
  function generator(seed) {
    let s = seed;
    return (n) => {
      s = (s * 1103515245 + 12345) % 2147483648;
      return s % n;
    };
  }

  // Runs one random sequence on a channel; returns what each step left and what was called.
  function run(ChannelClass, seed) {
    const random = generator(seed);
    const ch = new ChannelClass({});
    const calls = [];
    const trace = [];
    let published = 0;
    for (let step = 0; step < 400; step++) {
      const choice = random(10);
      if (choice < 4) {
        for (let k = random(120); k > 0; k--) {
          const id = ++published;
          ch.pushConfirmCallback(id % 5 === 0 ? undefined : (err) => calls.push([id, err ? err.message : null]));
        }
      } else {
        // Tags in the window, and for single ones repeats from just below it (those past it
        // are where amqplib 2.3.1 goes wrong: the next test).
        const multiple = random(3) === 0;
        const below = multiple ? 0 : 2;
        const span = ch.unconfirmed.length + below;
        if (span > 0) ch.emit(choice < 8 ? 'ack' : 'nack', { deliveryTag: ch.lwm - below + random(span), multiple });
      }
      trace.push([ch.lwm, ch.unconfirmed.length, calls.length]);
    }
    ch.emit('close');
    trace.push([ch.unconfirmed.length, ch.closedWithUnconfirmed]);
    return { calls, trace, published };
  }

  it('calls the same callbacks in the same order, with the same window after every step', () => {
    for (let seed = 1; seed <= 40; seed++) {
      const ours = run(OurChannel, seed);
      const theirs = run(TheirChannel, seed);
      assert.ok(ours.published > 1000 && ours.calls.length > 500, `seed ${seed} exercised the window`);
      assert.deepStrictEqual(ours.trace, theirs.trace, `seed ${seed}: the window`);
      assert.deepStrictEqual(ours.calls, theirs.calls, `seed ${seed}: the callbacks`);
    }
  });

  it('confirms nothing for a tag never published, and later tags still find their publishes', () => {
    const ch = new OurChannel({});
    const calls = [];
    const publish = (n) => {
      for (let k = 0; k < n; k++) {
        const id = ch.lwm + ch.unconfirmed.length;
        ch.pushConfirmCallback((err) => calls.push([id, err ? err.message : null]));
      }
    };
    publish(3); // tags 1-3
    ch.emit('ack', { deliveryTag: 2, multiple: false });
    for (const [tag, multiple] of [[4, false], [5, false], [2 ** 31, false], [2 ** 53, false], [2, false], [0, true], [-1, false]]) {
      ch.emit('ack', { deliveryTag: tag, multiple });
      ch.emit('nack', { deliveryTag: tag, multiple });
    }
    assert.deepStrictEqual([ch.lwm, ch.unconfirmed.length], [1, 3], 'the window is as it was');
    publish(2); // tags 4 and 5
    ch.emit('nack', { deliveryTag: 4, multiple: false });
    ch.emit('ack', { deliveryTag: 2 ** 40, multiple: true }); // all of them, and no further
    assert.deepStrictEqual([ch.lwm, ch.unconfirmed.length], [6, 0]);
    publish(1); // tag 6
    ch.emit('ack', { deliveryTag: 6, multiple: false });
    assert.deepStrictEqual(calls, [[2, null], [4, 'message nacked'], [1, null], [3, null], [5, null], [6, null]]);
    ch.emit('close');
    assert.strictEqual(ch.closedWithUnconfirmed, false, 'none was left at the close');
  });

  it('calls every callback left at the close, and lets go of them even when one throws', () => {
    const ch = new OurChannel({});
    const called = [];
    for (let id = 1; id <= 100; id++) {
      ch.pushConfirmCallback(() => {
        called.push(id);
        if (id === 10) throw new Error('a callback that throws');
      });
    }
    assert.throws(() => ch.emit('ack', { deliveryTag: 50, multiple: true }), /a callback that throws/);
    assert.deepStrictEqual(called, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    const { items, start } = ch.unconfirmed;
    assert.ok(items.slice(0, start).every((cb) => cb === undefined), 'nothing taken is still held');
    assert.deepStrictEqual([ch.lwm, ch.unconfirmed.length], [51, 50]);
    ch.pushConfirmCallback(undefined); // tag 101, without a callback
    ch.emit('ack', { deliveryTag: 51, multiple: false });
    ch.emit('close');
    assert.deepStrictEqual(called.slice(10), [51, ...Array.from({ length: 49 }, (_, k) => k + 52)]);
    assert.strictEqual(ch.closedWithUnconfirmed, true);
    return assert.rejects(ch._waitForConfirms(), /channel closed/);
  });
});
