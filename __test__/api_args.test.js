'use strict';

// Our option translation (lib/api_args.js) against amqplib 2.0.1's, for
// hand-picked and generated inputs. Two comparisons:
//  - the field objects themselves (tables flattened, since amqplib builds
//    them with prototype chains and we build plain objects);
//  - what actually goes on the wire: both results encoded with amqplib's
//    own encoder and decoded again must be identical.
// No broker needed.

const { describe, it } = require('node:test');
const assert = require('node:assert');
const path = require('node:path');

const Args = require('../lib/api_args');
const { prng } = require('./helpers');

const amqplibDir = path.dirname(require.resolve('amqplib'));
const RefArgs = require(path.join(amqplibDir, 'lib/api_args.js'));
const refDefs = require(path.join(amqplibDir, 'lib/defs.js'));
const { parseFrame, decodeFrame } = require(path.join(amqplibDir, 'lib/frame.js'));

// --- helpers ---

function isTable(value) {
  return value !== null && typeof value === 'object' && !Array.isArray(value) && !Buffer.isBuffer(value);
}

// Every enumerable entry, inherited or own, into a plain object. At the
// top level undefined values are kept (they are part of the shape); in
// tables they are dropped, as the encoder drops them.
function flatten(obj, dropUndefined = false) {
  const out = {};
  for (const key in obj) {
    const value = obj[key];
    if (dropUndefined && value === undefined) continue;
    out[key] = isTable(value) ? flatten(value, true) : value;
  }
  return out;
}

function decodeMethod(id, fields) {
  return decodeFrame(parseFrame(refDefs.encodeMethod(id, 1, fields))).fields;
}

function decodeProperties(fields) {
  return decodeFrame(parseFrame(refDefs.encodeProperties(refDefs.BasicProperties, 1, 0, fields))).fields;
}

// Run `fn` and report its result or the error it threw, so that a case
// where amqplib throws can be checked to throw for us too.
function outcome(fn) {
  try {
    return { value: fn() };
  } catch (err) {
    return { error: err };
  }
}

function deepFreeze(value) {
  if (value !== null && typeof value === 'object' && !Buffer.isBuffer(value)) {
    Object.freeze(value);
    for (const key of Object.keys(value)) deepFreeze(value[key]);
  }
  return value;
}


// Build an options object choosing, for each key, either to leave it out
// or one of its candidate values. Sometimes no options object at all.
function optionsFrom(random, pools) {
  const r = random();
  if (r < 0.05) return undefined;
  if (r < 0.07) return null;
  const options = {};
  for (const [key, values] of Object.entries(pools)) {
    if (random() < 0.5) continue;
    options[key] = values[Math.floor(random() * values.length)];
  }
  return options;
}

const flags = [true, false, 0, 1, null, 'yes', ''];
const names = ['', 'q', 'some.name', 'ünïcode'];
const tables = [undefined, null, {}, { 'x-expires': 5 }, { 'x-queue-type': 'quorum', flag: true }, { 'x-max-priority': 3, 'alternate-exchange': 'ae', 'x-priority': 2 }];

const QUEUE_POOLS = {
  exclusive: flags,
  durable: [undefined, ...flags],
  autoDelete: flags,
  arguments: tables,
  expires: [undefined, 0, 1000, 3600000],
  messageTtl: [undefined, 0, 60000],
  deadLetterExchange: [undefined, '', 'dlx'],
  deadLetterRoutingKey: [undefined, 'dead'],
  maxLength: [undefined, 0, 10000],
  maxPriority: [undefined, 10],
  overflow: [undefined, 'reject-publish', 'drop-head'],
  queueMode: [undefined, 'lazy', 'default'],
};

const EXCHANGE_POOLS = {
  durable: [undefined, ...flags],
  autoDelete: flags,
  internal: flags,
  alternateExchange: [undefined, 'ae', ''],
  arguments: tables,
};

const PUBLISH_POOLS = {
  expiration: [undefined, 0, 1000, '60000'],
  userId: [undefined, 'guest'],
  CC: [undefined, 'a', ['a', 'b'], [1, 2], 5, []],
  BCC: [undefined, 'b', ['c'], 7],
  priority: [undefined, 0, 9],
  persistent: [undefined, true, false, 0, 1],
  deliveryMode: [undefined, 1, 2, true, false, 'yes', 0],
  mandatory: flags,
  contentType: [undefined, 'application/json'],
  contentEncoding: [undefined, 'gzip'],
  headers: [undefined, null, {}, { a: 1 }, { CC: ['x'], b: 'two' }, { nested: { c: 'three' }, n: null }],
  correlationId: [undefined, 'corr-1'],
  replyTo: [undefined, 'amq.rabbitmq.reply-to'],
  messageId: [undefined, 'msg-1'],
  timestamp: [undefined, 1700000000],
  type: [undefined, 'event'],
  appId: [undefined, 'tests'],
};

const CONSUME_POOLS = {
  consumerTag: [undefined, '', 'ctag-1'],
  noLocal: flags,
  noAck: flags,
  exclusive: flags,
  priority: [undefined, 0, 10, -5],
  arguments: tables,
};

// Compare one call of ours with amqplib's, in shape and on the wire.
function assertSameAsAmqplib(name, args, methodId, { properties = false } = {}) {
  const label = `${name}(${args.map((a) => JSON.stringify(a)).join(', ')})`;
  const ours = outcome(() => Args[name](...args));
  const theirs = outcome(() => RefArgs[name](...args));
  assert.strictEqual(!!ours.error, !!theirs.error, `${label}: one threw and the other did not`);
  if (theirs.error) return;

  assert.deepStrictEqual(flatten(ours.value), flatten(theirs.value), `${label}: fields differ`);

  const ourWire = outcome(() => decodeMethod(methodId, ours.value));
  const theirWire = outcome(() => decodeMethod(methodId, theirs.value));
  assert.strictEqual(!!ourWire.error, !!theirWire.error, `${label}: encoding threw for only one`);
  if (!theirWire.error) assert.deepStrictEqual(ourWire.value, theirWire.value, `${label}: method on the wire differs`);

  if (properties) {
    const ourProps = outcome(() => decodeProperties(ours.value));
    const theirProps = outcome(() => decodeProperties(theirs.value));
    assert.strictEqual(!!ourProps.error, !!theirProps.error, `${label}: property encoding threw for only one`);
    if (!theirProps.error) assert.deepStrictEqual(ourProps.value, theirProps.value, `${label}: properties on the wire differ`);
  }
}

function generated(pools, count, seed, check) {
  const random = prng(seed);
  for (let i = 0; i < count; i++) check(optionsFrom(random, pools), random);
}

// --- tests ---

describe('api_args matches amqplib 2.0.1', () => {
  it('exports the same operations', () => {
    assert.deepStrictEqual(Object.keys(Args).sort(), Object.keys(RefArgs).sort());
    assert.ok(Object.isFrozen(Args));
  });

  it('assertQueue, generated options', () => {
    generated(QUEUE_POOLS, 600, 1, (options, random) => {
      const queue = [undefined, null, '', 'q', 'named'][Math.floor(random() * 5)];
      assertSameAsAmqplib('assertQueue', [queue, options], refDefs.QueueDeclare);
    });
  });

  it('assertExchange, generated options', () => {
    generated(EXCHANGE_POOLS, 300, 2, (options, random) => {
      const type = ['direct', 'fanout', 'topic', 'headers'][Math.floor(random() * 4)];
      assertSameAsAmqplib('assertExchange', ['ex', type, options], refDefs.ExchangeDeclare);
    });
  });

  it('publish, generated options (method fields and properties)', () => {
    generated(PUBLISH_POOLS, 1000, 3, (options, random) => {
      const exchange = names[Math.floor(random() * names.length)];
      assertSameAsAmqplib('publish', [exchange, 'rk', options], refDefs.BasicPublish, { properties: true });
    });
  });

  it('consume, generated options', () => {
    generated(CONSUME_POOLS, 400, 4, (options) => {
      assertSameAsAmqplib('consume', ['q', options], refDefs.BasicConsume);
    });
  });

  it('the simple operations', () => {
    for (const q of names) {
      assertSameAsAmqplib('checkQueue', [q], refDefs.QueueDeclare);
      assertSameAsAmqplib('purgeQueue', [q], refDefs.QueuePurge);
      assertSameAsAmqplib('checkExchange', [q], refDefs.ExchangeDeclare);
      assertSameAsAmqplib('cancel', [q], refDefs.BasicCancel);
      for (const options of [undefined, null, {}, { ifUnused: true }, { ifEmpty: 1 }, { ifUnused: 0, ifEmpty: 'x' }]) {
        assertSameAsAmqplib('deleteQueue', [q, options], refDefs.QueueDelete);
        assertSameAsAmqplib('deleteExchange', [q, options], refDefs.ExchangeDelete);
      }
      for (const options of [undefined, null, {}, { noAck: true }, { noAck: 0 }]) {
        assertSameAsAmqplib('get', [q, options], refDefs.BasicGet);
      }
    }
    for (const argt of tables) {
      assertSameAsAmqplib('bindQueue', ['q', 'ex', 'a.#', argt], refDefs.QueueBind);
      assertSameAsAmqplib('unbindQueue', ['q', 'ex', 'a.#', argt], refDefs.QueueUnbind);
      assertSameAsAmqplib('bindExchange', ['dest', 'src', '', argt], refDefs.ExchangeBind);
      assertSameAsAmqplib('unbindExchange', ['dest', 'src', '', argt], refDefs.ExchangeUnbind);
    }
    for (const tag of [0, 1, 42]) {
      for (const allUpTo of [undefined, true, false, 0, 1]) {
        assertSameAsAmqplib('ack', [tag, allUpTo], refDefs.BasicAck);
        for (const requeue of [undefined, true, false]) {
          assertSameAsAmqplib('nack', [tag, allUpTo, requeue], refDefs.BasicNack);
          assertSameAsAmqplib('reject', [tag, requeue], refDefs.BasicReject);
        }
      }
    }
    for (const count of [undefined, null, 0, 1, 100]) {
      for (const global of [undefined, true, false]) {
        assertSameAsAmqplib('prefetch', [count, global], refDefs.BasicQos);
      }
    }
    assertSameAsAmqplib('recover', [], refDefs.BasicRecover);
  });

  it('rejects a non-object arguments table as amqplib does', () => {
    assert.throws(() => RefArgs.assertQueue('q', { arguments: 'nope' }), TypeError);
    assert.throws(() => Args.assertQueue('q', { arguments: 'nope' }), TypeError);
    assert.throws(() => Args.publish('', 'q', { headers: 'nope', CC: 'a' }), TypeError);
  });
});

describe('api_args behaviour', () => {
  it('assertQueue: durable defaults to true, server-named queue for a missing name', () => {
    const fields = Args.assertQueue();
    assert.strictEqual(fields.queue, '');
    assert.strictEqual(fields.durable, true);
    assert.strictEqual(fields.exclusive, false);
    assert.strictEqual(fields.autoDelete, false);
    assert.deepStrictEqual(fields.arguments, {});
    assert.strictEqual(Args.assertQueue('q', { durable: false }).durable, false);
  });

  it('assertQueue: promoted options override `arguments`; absent ones leave it alone', () => {
    const options = { messageTtl: 1000, arguments: { 'x-message-ttl': 5, 'x-expires': 9, other: 'kept' } };
    assert.deepStrictEqual(Args.assertQueue('q', options).arguments, {
      'x-message-ttl': 1000,
      'x-expires': 9,
      other: 'kept',
    });
    // the caller's table is left as it was
    assert.deepStrictEqual(options.arguments, { 'x-message-ttl': 5, 'x-expires': 9, other: 'kept' });
  });

  it('assertQueue: every promoted option maps to its x-argument', () => {
    const fields = Args.assertQueue('q', {
      expires: 1,
      messageTtl: 2,
      deadLetterExchange: 'dlx',
      deadLetterRoutingKey: 'dlk',
      maxLength: 3,
      maxPriority: 4,
      overflow: 'reject-publish',
      queueMode: 'lazy',
    });
    assert.deepStrictEqual(fields.arguments, {
      'x-expires': 1,
      'x-message-ttl': 2,
      'x-dead-letter-exchange': 'dlx',
      'x-dead-letter-routing-key': 'dlk',
      'x-max-length': 3,
      'x-max-priority': 4,
      'x-overflow': 'reject-publish',
      'x-queue-mode': 'lazy',
    });
  });

  it('publish: persistent wins over deliveryMode; deliveryMode may be a number or truthy', () => {
    assert.strictEqual(Args.publish('', 'q', { persistent: true, deliveryMode: 1 }).deliveryMode, 2);
    assert.strictEqual(Args.publish('', 'q', { persistent: false, deliveryMode: 2 }).deliveryMode, 1);
    assert.strictEqual(Args.publish('', 'q', { deliveryMode: 1 }).deliveryMode, 1);
    assert.strictEqual(Args.publish('', 'q', { deliveryMode: true }).deliveryMode, 2);
    assert.strictEqual(Args.publish('', 'q', { deliveryMode: false }).deliveryMode, undefined);
    assert.strictEqual(Args.publish('', 'q', {}).deliveryMode, undefined);
  });

  it('publish: expiration becomes a string; CC and BCC become lists of strings in headers', () => {
    const fields = Args.publish('ex', 'rk', { expiration: 60000, CC: 'one', BCC: [1, 'two'], headers: { h: 1 } });
    assert.strictEqual(fields.expiration, '60000');
    assert.deepStrictEqual(decodeProperties(fields).headers, { CC: ['one'], BCC: ['1', 'two'], h: 1 });
    assert.strictEqual(fields.exchange, 'ex');
    assert.strictEqual(fields.routingKey, 'rk');
    assert.strictEqual(fields.mandatory, false);
    assert.strictEqual(fields.immediate, false);
  });

  it('publish: always sends a headers table, so consumers see {}', () => {
    const props = decodeProperties(Args.publish('', 'q'));
    assert.deepStrictEqual(props.headers, {});
  });

  it('publish: never mutates the caller’s options or headers', () => {
    const options = deepFreeze({ headers: { a: 1 }, CC: ['x'], BCC: 'y', expiration: 5, persistent: true });
    assert.doesNotThrow(() => Args.publish('', 'q', options));
    assert.deepStrictEqual(options.headers, { a: 1 });
  });

  it('publish: one object shape whatever the options (hot path)', () => {
    const shapes = new Set();
    generated(PUBLISH_POOLS, 200, 5, (options) => {
      shapes.add(Object.keys(Args.publish('', 'q', options)).join(','));
    });
    assert.strictEqual(shapes.size, 1);
  });

  // As amqplib's: agents add their trace headers to a publish's own (dd-trace and New Relic
  // with `headers ||= {}` then assignment, in sendMessage and publish).
  it('publish: headers of its own per publish over the caller’s, which additions never reach', () => {
    const headers = { a: 1 };
    const fields = Args.publish('', 'q', { headers });
    assert.notStrictEqual(fields.headers, headers);
    assert.strictEqual(Object.getPrototypeOf(fields.headers), headers);
    fields.headers['x-trace'] = 't';
    assert.deepStrictEqual(headers, { a: 1 });
    assert.deepStrictEqual(decodeProperties(fields).headers, { 'x-trace': 't', a: 1 });
    const bare = Args.publish('', 'q');
    const refBare = RefArgs.publish('', 'q', {});
    for (const name of ['toString', 'hasOwnProperty', 'constructor']) {
      assert.strictEqual(name in bare.headers, name in refBare.headers, name);
    }
    assert.notStrictEqual(Args.publish('', 'q').headers, bare.headers);
    bare.headers.added = 1;
    assert.deepStrictEqual(decodeProperties(bare).headers, { added: 1 });
    assert.deepStrictEqual(decodeProperties(Args.publish('', 'q')).headers, {});
  });

  it('consume: server-chosen tag by default, priority as x-priority', () => {
    const fields = Args.consume('q', { priority: 5, arguments: { 'x-stream-offset': 'first' } });
    assert.strictEqual(fields.consumerTag, '');
    assert.deepStrictEqual(fields.arguments, { 'x-stream-offset': 'first', 'x-priority': 5 });
  });

  it('nack and reject requeue unless told not to', () => {
    assert.strictEqual(Args.nack(1).requeue, true);
    assert.strictEqual(Args.nack(1, false, false).requeue, false);
    assert.strictEqual(Args.reject(1).requeue, true);
    assert.strictEqual(Args.reject(1, false).requeue, false);
  });

  it('prefetch: count defaults to 0, size is always 0', () => {
    assert.deepStrictEqual(Args.prefetch(), { prefetchCount: 0, prefetchSize: 0, global: false });
    assert.deepStrictEqual(Args.prefetch(10, true), { prefetchCount: 10, prefetchSize: 0, global: true });
  });
});
