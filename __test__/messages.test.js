'use strict';

// Our message objects against amqplib's for the same deliveries. A fanout
// exchange copies every message to several queues; amqplib consumes (and
// gets) from one copy, we from another, and the `{ fields, properties,
// content }` objects must be deep-equal, keys in the same order, except
// the consumer tag. Each set of messages is published once by amqplib and
// once by us, so the comparison also covers our encoding of every property
// and header type (decoded by amqplib, and by us).

const { describe, it, before, after } = require('node:test');
const assert = require('node:assert');

const { ours, original, uniqueName, openConnection, closeQuietly, withTimeout, waitUntil } = require('./helpers');

const TIMESTAMP = 1700000000;

// The messages: a spread of properties and header value types.
function messageSet() {
  const nested = {
    level1: { level2: { level3: 'deep', n: 7 }, list: [1, 'two', { three: 3 }] },
    emptyTable: {},
    emptyArray: [],
  };
  return [
    { content: Buffer.from('plain, no properties'), options: {} },
    { content: Buffer.alloc(0), options: { contentType: 'application/octet-stream' } },
    {
      content: Buffer.from(JSON.stringify({ hello: 'world' })),
      options: {
        contentType: 'application/json',
        contentEncoding: 'utf-8',
        headers: {
          string: 'text',
          unicode: 'héllo wörld ✓ 日本',
          emptyString: '',
          smallInt: 5,
          negative: -100,
          short: 1000,
          int: 100000,
          negInt: -2000000,
          long: 2 ** 40,
          negLong: -(2 ** 40),
          double: 3.25,
          negDouble: -0.5,
          bigDouble: 1.5e300,
          zero: 0,
          yes: true,
          no: false,
          nothing: null,
          bytes: Buffer.from([0, 1, 2, 254, 255]),
          emptyBytes: Buffer.alloc(0),
          array: [1, 'a', true, null, 2.5, [3, [4]], { k: 'v' }, Buffer.from('x')],
          table: nested,
          typedLong: { '!': 'long', value: 42 },
          typedTimestamp: { '!': 'timestamp', value: TIMESTAMP },
          typedDecimal: { '!': 'decimal', value: { places: 2, digits: 12345 } },
          typedFloat: { '!': 'float', value: 1.5 },
          typedDouble: { '!': 'double', value: 2 },
          typedShort: { '!': 'int16', value: -3 },
          typedInt: { '!': 'int32', value: 7 },
        },
        deliveryMode: 2,
        priority: 5,
        correlationId: 'corr-123',
        replyTo: 'reply-queue',
        expiration: '600000',
        messageId: 'msg-1',
        timestamp: TIMESTAMP,
        type: 'order.created',
        userId: 'guest',
        appId: 'the-app',
      },
    },
    { content: Buffer.from('persistent'), options: { persistent: true, priority: 0 } },
    { content: Buffer.from('transient'), options: { persistent: false, deliveryMode: 1, headers: {} } },
    { content: Buffer.from('cc'), options: { CC: ['elsewhere'], headers: { a: 1 } } },
    { content: Buffer.from('bcc'), options: { BCC: 'hidden', headers: { b: 2 } } },
    { content: Buffer.from('only-timestamp'), options: { timestamp: 0, messageId: '' } },
    // Larger than any frame size: spans several body frames.
    { content: Buffer.alloc(300 * 1024, 'abcdefghij'), options: { contentType: 'text/plain', headers: { size: 'big' } } },
    { content: Buffer.from([0, 255, 128, 10, 13]), options: { type: 'binary', appId: 'x'.repeat(255) } },
  ];
}

// The consumer tag differs by construction (the broker makes one per
// consumer); anything else must be the same.
function comparable(msg) {
  assert.ok(msg && typeof msg === 'object', 'a message');
  const fields = { ...msg.fields };
  if ('consumerTag' in fields) {
    assert.match(fields.consumerTag, /^amq\.ctag-/);
    fields.consumerTag = '<tag>';
  }
  return { fields, properties: msg.properties, content: msg.content };
}

// Keys (in order) of the message, its fields and properties, and of every
// table inside the headers.
function shapeOf(msg) {
  const tables = [];
  const walk = (value, where) => {
    if (value && typeof value === 'object' && !Buffer.isBuffer(value)) {
      tables.push([where, Object.keys(value)]);
      for (const [k, v] of Object.entries(value)) walk(v, `${where}.${k}`);
    }
  };
  walk(msg.properties && msg.properties.headers, 'headers');
  return {
    message: Object.keys(msg),
    fields: Object.keys(msg.fields),
    properties: Object.keys(msg.properties),
    tables,
  };
}

describe('message objects: ours vs amqplib', () => {
  const libs = { original, ours };
  const conns = {};
  const channels = {};
  const exchange = uniqueName('msgs');
  const queues = {
    consumeOriginal: uniqueName('consume-orig'),
    consumeOurs: uniqueName('consume-ours'),
    getOriginal: uniqueName('get-orig'),
    getOurs: uniqueName('get-ours'),
  };
  const messages = messageSet();
  const total = messages.length * 2;

  before(async () => {
    for (const [name, lib] of Object.entries(libs)) {
      conns[name] = await openConnection(lib);
      channels[name] = await conns[name].createConfirmChannel();
    }
    const ch = channels.original;
    await ch.assertExchange(exchange, 'fanout', { durable: false, autoDelete: true });
    for (const q of Object.values(queues)) {
      await ch.assertQueue(q, { durable: true, autoDelete: false });
      await ch.bindQueue(q, exchange, '');
    }
    // The same messages, first through amqplib, then through us; both
    // waited for, so every queue holds 2N messages in this order.
    for (const name of ['original', 'ours']) {
      for (const { content, options } of messages) {
        channels[name].publish(exchange, 'the.key', content, options);
      }
      await withTimeout(channels[name].waitForConfirms(), 5000, `${name} confirms`);
    }
  });

  after(async () => {
    const ch = await conns.original.createChannel();
    for (const q of Object.values(queues)) await ch.deleteQueue(q);
    await ch.deleteExchange(exchange);
    for (const c of Object.values(conns)) await closeQuietly(c);
  });

  it('the queues hold every message', async () => {
    for (const q of Object.values(queues)) {
      const { messageCount } = await channels.original.checkQueue(q);
      assert.strictEqual(messageCount, total, q);
    }
  });

  describe('consume', () => {
    const received = { original: [], ours: [] };

    before(async () => {
      for (const [name, queue] of [
        ['original', queues.consumeOriginal],
        ['ours', queues.consumeOurs],
      ]) {
        const ch = await conns[name].createChannel();
        await ch.consume(queue, (msg) => received[name].push(msg), { noAck: true });
      }
      await waitUntil(() => received.original.length === total && received.ours.length === total, 5000, 'deliveries');
    });

    it('the same message objects as amqplib, delivery by delivery', () => {
      assert.strictEqual(received.ours.length, received.original.length);
      for (let i = 0; i < total; i++) {
        assert.deepStrictEqual(comparable(received.ours[i]), comparable(received.original[i]), `delivery ${i}`);
      }
    });

    it('the same keys in the same order (message, fields, properties, header tables)', () => {
      for (let i = 0; i < total; i++) {
        assert.deepStrictEqual(shapeOf(received.ours[i]), shapeOf(received.original[i]), `delivery ${i}`);
      }
      assert.deepStrictEqual(Object.keys(received.ours[0].fields), [
        'consumerTag',
        'deliveryTag',
        'redelivered',
        'exchange',
        'routingKey',
      ]);
    });

    it('content is a Buffer with the bytes published', () => {
      for (let i = 0; i < total; i++) {
        const msg = received.ours[i];
        assert.ok(Buffer.isBuffer(msg.content), `delivery ${i}`);
        assert.ok(msg.content.equals(messages[i % messages.length].content), `delivery ${i}`);
      }
    });

    it('what we publish arrives as what amqplib publishes (decoded by amqplib)', () => {
      const n = messages.length;
      for (let i = 0; i < n; i++) {
        const byOriginal = comparable(received.original[i]);
        const byOurs = comparable(received.original[n + i]);
        delete byOriginal.fields.deliveryTag;
        delete byOurs.fields.deliveryTag;
        assert.deepStrictEqual(byOurs, byOriginal, `message ${i}`);
      }
    });

    // amqplib puts CC/BCC in a table whose prototype is the user's headers,
    // and encodes own keys first: CC goes on the wire before the user's
    // headers. Consumers see that key order.
    it(
      'what we publish has the same header key order as what amqplib publishes',
      () => {
        const n = messages.length;
        for (let i = 0; i < n; i++) {
          assert.deepStrictEqual(shapeOf(received.original[n + i]), shapeOf(received.original[i]), `message ${i}`);
        }
      },
    );

    it('header values decode to the documented JS values', () => {
      const { headers } = received.ours[2].properties;
      assert.strictEqual(headers.long, 2 ** 40);
      assert.strictEqual(headers.double, 3.25);
      assert.strictEqual(headers.nothing, null);
      assert.deepStrictEqual(headers.bytes, Buffer.from([0, 1, 2, 254, 255]));
      assert.deepStrictEqual(headers.typedTimestamp, { '!': 'timestamp', value: TIMESTAMP });
      assert.deepStrictEqual(headers.typedDecimal, { '!': 'decimal', value: { places: 2, digits: 12345 } });
      assert.strictEqual(headers.typedLong, 42);
      assert.strictEqual(headers.typedFloat, 1.5);
      assert.deepStrictEqual(headers.table, messages[2].options.headers.table);
      // CC stays in the headers, BCC is removed by the broker.
      assert.deepStrictEqual(received.ours[5].properties.headers, { a: 1, CC: ['elsewhere'] });
      assert.deepStrictEqual(received.ours[6].properties.headers, { b: 2 });
    });
  });

  describe('get', () => {
    const got = { original: [], ours: [] };

    before(async () => {
      for (const [name, queue] of [
        ['original', queues.getOriginal],
        ['ours', queues.getOurs],
      ]) {
        const ch = await conns[name].createChannel();
        for (;;) {
          const msg = await ch.get(queue, { noAck: true });
          if (msg === false) break;
          got[name].push(msg);
        }
        got[name].empty = await ch.get(queue);
        await ch.close();
      }
    });

    it('the same GetMessage objects, with messageCount', () => {
      assert.strictEqual(got.ours.length, total);
      assert.strictEqual(got.original.length, total);
      for (let i = 0; i < total; i++) {
        assert.deepStrictEqual(comparable(got.ours[i]), comparable(got.original[i]), `get ${i}`);
        assert.deepStrictEqual(shapeOf(got.ours[i]), shapeOf(got.original[i]), `get ${i}`);
        assert.strictEqual(got.ours[i].fields.messageCount, total - i - 1);
      }
      assert.deepStrictEqual(Object.keys(got.ours[0].fields), [
        'deliveryTag',
        'redelivered',
        'exchange',
        'routingKey',
        'messageCount',
      ]);
    });

    it('an empty queue gives false', () => {
      assert.strictEqual(got.ours.empty, false);
      assert.strictEqual(got.original.empty, false);
    });
  });

  describe('return', () => {
    it('the same returned message objects', async () => {
      const returned = {};
      const unroutable = uniqueName('unroutable');
      for (const [name, conn] of Object.entries(conns)) {
        const ch = await conn.createChannel();
        await ch.assertExchange(unroutable, 'direct', { durable: false, autoDelete: true });
        returned[name] = [];
        ch.on('return', (msg) => returned[name].push(msg));
        for (const { content, options } of messages) {
          ch.publish(unroutable, 'nobody', content, { ...options, mandatory: true });
        }
        await waitUntil(() => returned[name].length === messages.length, 5000, `${name} returns`);
        await ch.deleteExchange(unroutable);
        await ch.close();
      }
      for (let i = 0; i < messages.length; i++) {
        assert.deepStrictEqual(comparable(returned.ours[i]), comparable(returned.original[i]), `return ${i}`);
        const ourShape = shapeOf(returned.ours[i]);
        const theirShape = shapeOf(returned.original[i]);
        assert.deepStrictEqual(ourShape, theirShape, `return ${i}`);
      }
      assert.deepStrictEqual(returned.ours[0].fields, {
        replyCode: 312,
        replyText: 'NO_ROUTE',
        exchange: unroutable,
        routingKey: 'nobody',
      });
    });
  });
});
