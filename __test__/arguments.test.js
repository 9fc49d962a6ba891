'use strict';

// Bad arguments from users: each call in the table runs against amqplib and
// against us, both connected to the broker, each on a fresh channel. What
// must be the same: whether it throws, rejects or succeeds; the error's
// class (by constructor name) and message; what the channel then reports
// ('error' events) and whether the channel and connection are still usable.
// A native crash would take the whole process down and fail the file.
// Then: every operation on a closed channel and a closed connection.

const { describe, it, before, after } = require('node:test');
const assert = require('node:assert');

const {
  AMQP_URL,
  ours,
  original,
  oursCallback,
  originalCallback,
  uniqueName,
  openConnection,
  closeQuietly,
  outcomeOf,
  describeError,
  withTimeout,
  waitUntil,
  delay,
} = require('./helpers');

const queue = uniqueName('args'); // shared by both libraries, so broker messages match
const missing = uniqueName('args-missing');
const noop = () => {};
const buf = Buffer.from('x');
const long = (n) => 'k'.repeat(n);
// Exchanges some cases declare, named up front so both libraries use the
// same names (they show up in the broker's messages); deleted at the end.
const exchanges = { a: uniqueName('ex'), b: uniqueName('ex'), c: uniqueName('ex'), d: uniqueName('ex') };

// [label, call(channel), options] -- options.confirm runs the call on a
// ConfirmChannel.
const cases = [
  // publish / sendToQueue: content
  ['publish: string content', (ch) => ch.publish('', queue, 'text')],
  ['publish: number content', (ch) => ch.publish('', queue, 42)],
  ['publish: null content', (ch) => ch.publish('', queue, null)],
  ['publish: undefined content', (ch) => ch.publish('', queue, undefined)],
  ['publish: object content', (ch) => ch.publish('', queue, { a: 1 })],
  ['publish: Uint8Array content', (ch) => ch.publish('', queue, new Uint8Array([1, 2, 3]))],
  ['publish: ArrayBuffer content', (ch) => ch.publish('', queue, new ArrayBuffer(4))],
  ['sendToQueue: string content', (ch) => ch.sendToQueue(queue, 'text')],
  // publish: exchange and routing key
  ['publish: number exchange', (ch) => ch.publish(5, queue, buf)],
  ['publish: object exchange', (ch) => ch.publish({}, queue, buf)],
  ['publish: undefined exchange', (ch) => ch.publish(undefined, queue, buf)],
  ['publish: number routing key', (ch) => ch.publish('', 300, buf)],
  ['publish: undefined routing key', (ch) => ch.publish('', undefined, buf)],
  ['publish: routing key of 300 chars', (ch) => ch.publish('', long(300), buf)],
  ['publish: routing key of 255 chars', (ch) => ch.publish('', long(255), buf)],
  ['publish: routing key of 256 multibyte bytes', (ch) => ch.publish('', 'é'.repeat(128), buf)],
  ['publish: exchange name of 300 chars', (ch) => ch.publish(long(300), 'rk', buf)],
  ['publish: missing exchange (404 from the broker)', (ch) => ch.publish(missing, 'rk', buf)],
  ['sendToQueue: number queue', (ch) => ch.sendToQueue(123, buf)],
  ['sendToQueue: object queue', (ch) => ch.sendToQueue({ q: 1 }, buf)],
  // publish: options and properties
  ['publish: options a string', (ch) => ch.publish('', queue, buf, 'persistent')],
  ['publish: options a number', (ch) => ch.publish('', queue, buf, 7)],
  ['publish: headers a string', (ch) => ch.publish('', queue, buf, { headers: 'abc' })],
  ['publish: headers a number', (ch) => ch.publish('', queue, buf, { headers: 5 })],
  ['publish: header with a function', (ch) => ch.publish('', queue, buf, { headers: { f: noop } })],
  ['publish: header with a symbol', (ch) => ch.publish('', queue, buf, { headers: { s: Symbol('s') } })],
  ['publish: header with a bigint', (ch) => ch.publish('', queue, buf, { headers: { b: 10n } })],
  ['publish: header undefined (dropped)', (ch) => ch.publish('', queue, buf, { headers: { u: undefined } })],
  ['publish: header with an unknown typed value', (ch) => ch.publish('', queue, buf, { headers: { t: { '!': 'nonsense', value: 1 } } })],
  ['publish: header int8 out of range', (ch) => ch.publish('', queue, buf, { headers: { t: { '!': 'int8', value: 300 } } })],
  ['publish: header key of 300 chars', (ch) => ch.publish('', queue, buf, { headers: { [long(300)]: 1 } })],
  ['publish: header long out of range', (ch) => ch.publish('', queue, buf, { headers: { t: { '!': 'long', value: 2 ** 64 } } })],
  ['publish: header timestamp negative', (ch) => ch.publish('', queue, buf, { headers: { t: { '!': 'timestamp', value: -5 } } })],
  ['publish: header NaN and Infinity', (ch) => ch.publish('', queue, buf, { headers: { n: NaN, i: Infinity } })],
  ['publish: priority 300', (ch) => ch.publish('', queue, buf, { priority: 300 })],
  ['publish: priority -1', (ch) => ch.publish('', queue, buf, { priority: -1 })],
  ['publish: priority 1.5', (ch) => ch.publish('', queue, buf, { priority: 1.5 })],
  ['publish: priority a string', (ch) => ch.publish('', queue, buf, { priority: 'high' })],
  ['publish: deliveryMode 3', (ch) => ch.publish('', queue, buf, { deliveryMode: 3 })],
  ['publish: deliveryMode 300', (ch) => ch.publish('', queue, buf, { deliveryMode: 300 })],
  ['publish: deliveryMode a string', (ch) => ch.publish('', queue, buf, { deliveryMode: 'yes' })],
  ['publish: expiration a number', (ch) => ch.publish('', queue, buf, { expiration: 60000 })],
  ['publish: expiration an object', (ch) => ch.publish('', queue, buf, { expiration: {} })],
  ['publish: expiration not numeric (broker)', (ch) => ch.publish('', queue, buf, { expiration: 'soon' })],
  ['publish: expiration null', (ch) => ch.publish('', queue, buf, { expiration: null })],
  ['publish: timestamp a string', (ch) => ch.publish('', queue, buf, { timestamp: 'now' })],
  ['publish: timestamp a Date', (ch) => ch.publish('', queue, buf, { timestamp: new Date(0) })],
  ['publish: timestamp negative', (ch) => ch.publish('', queue, buf, { timestamp: -1 })],
  ['publish: contentType a number', (ch) => ch.publish('', queue, buf, { contentType: 5 })],
  ['publish: contentType of 300 chars', (ch) => ch.publish('', queue, buf, { contentType: long(300) })],
  ['publish: messageId a number', (ch) => ch.publish('', queue, buf, { messageId: 12 })],
  ['publish: correlationId an object', (ch) => ch.publish('', queue, buf, { correlationId: {} })],
  ['publish: userId not the login (broker)', (ch) => ch.publish('', queue, buf, { userId: 'someone-else' })],
  ['publish: CC a number', (ch) => ch.publish('', queue, buf, { CC: 5 })],
  ['publish: CC with an object', (ch) => ch.publish('', queue, buf, { CC: [{}] })],
  // ConfirmChannel publish
  ['confirm publish: string content', (ch) => ch.publish('', queue, 'text', {}, noop), { confirm: true }],
  ['confirm sendToQueue: priority 300', (ch) => ch.sendToQueue(queue, buf, { priority: 300 }, noop), { confirm: true }],
  ['confirm publish: no callback', (ch) => ch.publish('', queue, buf, {}), { confirm: true }],
  // queues
  ['assertQueue: number name', (ch) => ch.assertQueue(123, { exclusive: true })],
  ['assertQueue: object name', (ch) => ch.assertQueue({}, { exclusive: true })],
  ['assertQueue: name of 300 chars', (ch) => ch.assertQueue(long(300))],
  ['assertQueue: options a string', (ch) => ch.assertQueue('', 'durable')],
  ['assertQueue: arguments a string', (ch) => ch.assertQueue('', { exclusive: true, arguments: 'x' })],
  ['assertQueue: messageTtl a string (broker)', (ch) => ch.assertQueue('', { exclusive: true, messageTtl: 'abc' })],
  ['assertQueue: maxPriority 300 (broker)', (ch) => ch.assertQueue('', { exclusive: true, maxPriority: 300 })],
  ['assertQueue: maxLength negative (broker)', (ch) => ch.assertQueue('', { exclusive: true, maxLength: -1 })],
  ['assertQueue: reserved amq. name (broker)', (ch) => ch.assertQueue('amq.not-allowed')],
  ['checkQueue: number', (ch) => ch.checkQueue(123)],
  ['checkQueue: missing (broker)', (ch) => ch.checkQueue(missing)],
  ['checkQueue: undefined', (ch) => ch.checkQueue(undefined)],
  ['deleteQueue: number', (ch) => ch.deleteQueue(5)],
  ['deleteQueue: options a string', (ch) => ch.deleteQueue(missing, 'ifEmpty')],
  ['purgeQueue: object', (ch) => ch.purgeQueue({})],
  ['purgeQueue: missing (broker)', (ch) => ch.purgeQueue(missing)],
  ['bindQueue: number pattern', (ch) => ch.bindQueue(queue, 'amq.direct', 123)],
  ['bindQueue: arguments with a function', (ch) => ch.bindQueue(queue, 'amq.direct', 'k', { f: noop })],
  ['bindQueue: missing exchange (broker)', (ch) => ch.bindQueue(queue, missing, 'k')],
  ['unbindQueue: number source', (ch) => ch.unbindQueue(queue, 7, 'k')],
  // exchanges
  ['assertExchange: number name', (ch) => ch.assertExchange(5, 'direct', { autoDelete: true })],
  ['assertExchange: number type', (ch) => ch.assertExchange(exchanges.a, 5)],
  ['assertExchange: options a string', (ch) => ch.assertExchange(exchanges.b, 'direct', 'durable')],
  ['assertExchange: reserved amq. name (broker)', (ch) => ch.assertExchange('amq.mine', 'direct')],
  ['assertExchange: alternateExchange a number', (ch) => ch.assertExchange(exchanges.c, 'direct', { autoDelete: true, alternateExchange: 5 })],
  ['checkExchange: missing (broker)', (ch) => ch.checkExchange(missing)],
  ['checkExchange: number', (ch) => ch.checkExchange(5)],
  ['deleteExchange: object', (ch) => ch.deleteExchange({})],
  ['bindExchange: number destination', (ch) => ch.bindExchange(5, 'amq.direct', 'k')],
  ['unbindExchange: object pattern', (ch) => ch.unbindExchange('amq.fanout', 'amq.direct', {})],
  // consumers and gets
  ['consume: callback a string', (ch) => ch.consume(queue, 'not a function')],
  ['consume: no callback', (ch) => ch.consume(queue)],
  ['consume: options a string', (ch) => ch.consume(queue, noop, 'noAck')],
  ['consume: number queue', (ch) => ch.consume(5, noop)],
  ['consume: consumerTag a number', (ch) => ch.consume(queue, noop, { consumerTag: 5 })],
  ['consume: priority a string (broker)', (ch) => ch.consume(queue, noop, { priority: 'high' })],
  ['consume: arguments a number', (ch) => ch.consume(queue, noop, { arguments: 5 })],
  ['consume: missing queue (broker)', (ch) => ch.consume(missing, noop)],
  ['cancel: undefined', (ch) => ch.cancel(undefined)],
  ['cancel: a number', (ch) => ch.cancel(5)],
  ['cancel: unknown tag', (ch) => ch.cancel('no-such-consumer')],
  ['get: number queue', (ch) => ch.get(5)],
  ['get: options a string', (ch) => ch.get(queue, 'noAck')],
  ['get: missing queue (broker)', (ch) => ch.get(missing)],
  // acks
  ['ack: undefined', (ch) => ch.ack(undefined)],
  ['ack: empty object', (ch) => ch.ack({})],
  ['ack: deliveryTag a string', (ch) => ch.ack({ fields: { deliveryTag: 'one' } })],
  ['ack: unknown delivery tag (broker)', (ch) => ch.ack({ fields: { deliveryTag: 999 } })],
  ['ack: negative delivery tag', (ch) => ch.ack({ fields: { deliveryTag: -1 } })],
  ['nack: null', (ch) => ch.nack(null)],
  ['nack: unknown delivery tag (broker)', (ch) => ch.nack({ fields: { deliveryTag: 12345 } }, 'yes', 'no')],
  ['reject: a string', (ch) => ch.reject('msg')],
  ['ackAll with nothing to ack', (ch) => ch.ackAll()],
  ['nackAll: requeue a string', (ch) => ch.nackAll('no')],
  // prefetch and friends
  ['prefetch: a string', (ch) => ch.prefetch('10')],
  ['prefetch: a non-numeric string', (ch) => ch.prefetch('ten')],
  ['prefetch: negative', (ch) => ch.prefetch(-1)],
  ['prefetch: 70000', (ch) => ch.prefetch(70000)],
  ['prefetch: 1.5', (ch) => ch.prefetch(1.5)],
  ['prefetch: null', (ch) => ch.prefetch(null)],
  ['prefetch: an object', (ch) => ch.prefetch({})],
  ['qos: global a string', (ch) => ch.qos(5, 'yes')],
  ['recover', (ch) => ch.recover()],
];

// The libraries' connections, reopened if a case takes one down.
const conns = {};
const libs = { original, ours };

async function connectionFor(name) {
  const conn = conns[name];
  if (conn && !conn.closed) return conn;
  const fresh = await openConnection(libs[name]);
  fresh.closed = false;
  fresh.on('close', () => {
    fresh.closed = true;
  });
  conns[name] = fresh;
  return fresh;
}

async function runCase(name, call, { confirm = false } = {}) {
  const conn = await connectionFor(name);
  const ch = confirm ? await conn.createConfirmChannel() : await conn.createChannel();
  const channelErrors = [];
  let channelClosed = false;
  ch.on('error', (err) => channelErrors.push(describeError('event', err)));
  ch.on('close', () => {
    channelClosed = true;
  });
  ch.on('return', noop);

  const result = normalise(await withTimeout(outcomeOf(() => call(ch)), 3000, `call with ${name}`));
  // A round trip on the same channel: whatever the broker made of the call
  // has arrived when it answers (or the channel is gone). amqplib leaves a
  // channel whose RPC failed to encode waiting for a reply that never
  // comes: that is recorded as 'no answer'.
  let probe;
  try {
    const p = await withTimeout(outcomeOf(() => ch.checkExchange('amq.direct')), PROBE_MS, 'probe');
    probe = p.outcome === 'ok' ? 'ok' : `${p.name}: ${p.message}`;
  } catch (_) {
    probe = 'no answer';
  }
  // A channel the client is closing (e.g. after a consumer callback threw)
  // reports its error once the broker confirms the close.
  if (probe.endsWith('Channel closing')) await waitUntil(() => channelClosed, 1000, 'channel close');
  await delay(1);
  if (!channelClosed && probe !== 'no answer') await closeQuietly(ch);
  return {
    ...result,
    probe,
    channelErrors: channelErrors.map(normalise),
    connectionAlive: !conn.closed,
  };
}

const PROBE_MS = 300;

// Names the broker makes up differ from run to run.
function normalise(outcome) {
  if (typeof outcome.message !== 'string') return outcome;
  return {
    ...outcome,
    message: outcome.message.replace(/amq\.gen-[\w-]+/g, 'amq.gen-*').replace(/amq\.ctag-[\w-]+/g, 'amq.ctag-*'),
  };
}

// Where amqplib's channel hangs, ours may answer: then only the call's own
// outcome and what the channel reported are compared.
function assertSameOutcome(mine, theirs) {
  if (theirs.probe === 'no answer') {
    const { probe: _mine, ...mineRest } = mine;
    const { probe: _theirs, ...theirsRest } = theirs;
    assert.deepStrictEqual(mineRest, theirsRest);
  } else {
    assert.deepStrictEqual(mine, theirs);
  }
}

describe('bad arguments: the same errors as amqplib', () => {
  before(async () => {
    const conn = await connectionFor('original');
    const ch = await conn.createChannel();
    await ch.assertQueue(queue, { durable: true });
    await ch.close();
  });

  after(async () => {
    const conn = await connectionFor('original');
    const ch = await conn.createChannel();
    await ch.deleteQueue(queue);
    for (const ex of Object.values(exchanges)) await ch.deleteExchange(ex);
    await ch.close();
    for (const c of Object.values(conns)) await closeQuietly(c);
  });

  for (const [label, call, options = {}] of cases) {
    it(label, async () => {
      const theirs = await runCase('original', call, options);
      const mine = await runCase('ours', call, options);
      assertSameOutcome(mine, theirs);
    });
  }
});

// --- closed channels and connections -------------------------------------

const channelOps = [
  ['publish', (ch) => ch.publish('', queue, buf)],
  ['sendToQueue', (ch) => ch.sendToQueue(queue, buf)],
  ['assertQueue', (ch) => ch.assertQueue('')],
  ['checkQueue', (ch) => ch.checkQueue(queue)],
  ['deleteQueue', (ch) => ch.deleteQueue(missing)],
  ['purgeQueue', (ch) => ch.purgeQueue(queue)],
  ['bindQueue', (ch) => ch.bindQueue(queue, 'amq.direct', 'k')],
  ['unbindQueue', (ch) => ch.unbindQueue(queue, 'amq.direct', 'k')],
  ['assertExchange', (ch) => ch.assertExchange('amq.direct', 'direct')],
  ['checkExchange', (ch) => ch.checkExchange('amq.direct')],
  ['deleteExchange', (ch) => ch.deleteExchange(missing)],
  ['bindExchange', (ch) => ch.bindExchange('amq.fanout', 'amq.direct', 'k')],
  ['unbindExchange', (ch) => ch.unbindExchange('amq.fanout', 'amq.direct', 'k')],
  ['consume', (ch) => ch.consume(queue, noop)],
  ['cancel', (ch) => ch.cancel('tag')],
  ['get', (ch) => ch.get(queue)],
  ['ack', (ch) => ch.ack({ fields: { deliveryTag: 1 } })],
  ['ackAll', (ch) => ch.ackAll()],
  ['nack', (ch) => ch.nack({ fields: { deliveryTag: 1 } })],
  ['nackAll', (ch) => ch.nackAll()],
  ['reject', (ch) => ch.reject({ fields: { deliveryTag: 1 } })],
  ['prefetch', (ch) => ch.prefetch(1)],
  ['recover', (ch) => ch.recover()],
  ['close', (ch) => ch.close()],
];

const connectionOps = [
  ['createChannel', (conn) => conn.createChannel()],
  ['createConfirmChannel', (conn) => conn.createConfirmChannel()],
  ['close', (conn) => conn.close()],
  ['updateSecret', (conn) => conn.updateSecret(Buffer.from('guest'), 'rotation')],
];

// How each of channelOps fails on a channel that `kill` has closed.
async function closedChannelOutcomes(lib, kill) {
  const conn = await openConnection(lib);
  const results = {};
  try {
    for (const [op, call] of channelOps) {
      const ch = await conn.createChannel();
      ch.on('error', noop);
      await kill(ch, conn);
      results[op] = await withTimeout(outcomeOf(() => call(ch)), 3000, op);
    }
  } finally {
    await closeQuietly(conn);
  }
  return results;
}

describe('closed channels and connections: IllegalOperationError as amqplib', () => {
  it('after channel.close()', async () => {
    const kill = (ch) => ch.close();
    const theirs = await closedChannelOutcomes(original, kill);
    const mine = await closedChannelOutcomes(ours, kill);
    assert.deepStrictEqual(mine, theirs);
    // What amqplib does, spelled out for the ones that matter most.
    assert.deepStrictEqual(mine.publish, { outcome: 'throw', name: 'IllegalOperationError', message: 'Channel closed' });
    // close() is async in amqplib: the same error arrives as a rejection.
    assert.deepStrictEqual(mine.close, { outcome: 'reject', name: 'IllegalOperationError', message: 'Channel closed' });
  });

  it('after the broker closed the channel (404)', async () => {
    const kill = (ch) => ch.checkQueue(missing).catch(noop);
    const theirs = await closedChannelOutcomes(original, kill);
    const mine = await closedChannelOutcomes(ours, kill);
    assert.deepStrictEqual(mine, theirs);
    assert.strictEqual(mine.assertQueue.name, 'IllegalOperationError');
  });

  it('while the channel is closing', async () => {
    // close() not awaited: the operation is attempted before CloseOk.
    const kill = (ch) => {
      ch.close().catch(noop);
    };
    const theirs = await closedChannelOutcomes(original, kill);
    const mine = await closedChannelOutcomes(ours, kill);
    assert.deepStrictEqual(mine, theirs);
  });

  it('channels of a closed connection', async () => {
    const outcomes = async (lib) => {
      const conn = await openConnection(lib);
      const chans = [];
      for (let i = 0; i < channelOps.length; i++) {
        const ch = await conn.createChannel();
        ch.on('error', noop);
        chans.push(ch);
      }
      await conn.close();
      const results = {};
      for (let i = 0; i < channelOps.length; i++) {
        const [op, call] = channelOps[i];
        results[op] = await withTimeout(outcomeOf(() => call(chans[i])), 3000, op);
      }
      return results;
    };
    const theirs = await outcomes(original);
    const mine = await outcomes(ours);
    assert.deepStrictEqual(mine, theirs);
    assert.strictEqual(mine.publish.name, 'IllegalOperationError');
  });

  it('a closed connection', async () => {
    const outcomes = async (lib) => {
      const results = {};
      for (const [op, call] of connectionOps) {
        const conn = await openConnection(lib);
        await conn.close();
        results[op] = await withTimeout(outcomeOf(() => call(conn)), 3000, op);
      }
      return results;
    };
    const theirs = await outcomes(original);
    const mine = await outcomes(ours);
    assert.deepStrictEqual(mine, theirs);
    assert.strictEqual(mine.createChannel.name, 'IllegalOperationError');
  });

  it('callback API: a closed channel and a closed connection', async () => {
    const cbOutcome = (fn) =>
      new Promise((resolve) => {
        let settled = false;
        const done = (value) => {
          if (!settled) {
            settled = true;
            resolve(value);
          }
        };
        try {
          fn((err) => done(err ? describeError('callback', err) : { outcome: 'callback ok' }));
        } catch (err) {
          done(describeError('throw', err));
        }
        setTimeout(() => done({ outcome: 'no callback' }), 500);
      });
    const outcomes = (lib) =>
      new Promise((resolve, reject) => {
        lib.connect(AMQP_URL, (err, conn) => {
          if (err) return reject(err);
          conn.on('error', noop);
          conn.createChannel(async (err, ch) => {
            if (err) return reject(err);
            ch.on('error', noop);
            await new Promise((r) => ch.close(r));
            const results = {};
            results.publish = await cbOutcome(() => ch.publish('', queue, buf));
            results.assertQueue = await cbOutcome((cb) => ch.assertQueue('', {}, cb));
            results.get = await cbOutcome((cb) => ch.get(queue, {}, cb));
            results.close = await cbOutcome((cb) => ch.close(cb));
            await new Promise((r) => conn.close(r));
            results.createChannel = await cbOutcome((cb) => conn.createChannel(cb));
            results.connClose = await cbOutcome((cb) => conn.close(cb));
            resolve(results);
          });
        });
      });
    const theirs = await withTimeout(outcomes(originalCallback), 10000, 'amqplib callback');
    const mine = await withTimeout(outcomes(oursCallback), 10000, 'ours callback');
    assert.deepStrictEqual(mine, theirs);
  });
});
