'use strict';
// The publish path against the broker: a publish with the same arguments as the one before
// sends the same frames again (only the body differs); anything else is encoded afresh. What
// arrives must be exactly what was published, in order, whichever path each took.

const { describe, it } = require('node:test');
const assert = require('node:assert');
const amqp = require('../index');

const BROKER_URL = process.env.AMQP_URL || 'amqp://localhost';

describe('publish', () => {
  it('repeated and changing arguments all arrive as published', async () => {
    const conn = await amqp.connect(BROKER_URL);
    const ch = await conn.createChannel();
    const { queue } = await ch.assertQueue('', { exclusive: true });
    const headers = { n: 1 };
    const nested = { list: [1] };
    // Between publishes, a reused headers object is changed (after the named message).
    const changes = {
      f: () => { headers.n = 2; },
      g: () => { headers.m = 'x'; },
      k: () => { delete headers.n; },
      l: () => { headers.m = 1.5; },
      n: () => { nested.list.push(2); },
    };
    const plan = [
      ['a', { contentType: 'text/a' }],
      ['b', { contentType: 'text/a' }],
      ['c', { contentType: 'text/a' }],
      ['d', { contentType: 'text/b' }],
      ['e', { contentType: 'text/b', priority: 3 }],
      ['f', { headers }],
      ['g', { headers }], // the same object, changed in between: must not be sent stale
      ['h', { headers }], // a key added
      ['i', { headers }], // unchanged: a repeat
      ['j', { contentType: 'text/a' }],
      ['k', { headers }],
      ['l', { headers }], // a key deleted
      ['m', { headers, contentType: 'text/a' }], // 'x' became 1.5
      ['n', { headers: nested }],
      ['o', { headers: nested }], // nested values are not compared: encoded afresh
      ['p', {}],
      ['q', {}],
    ];
    const expectedHeaders = {
      f: { n: 1 }, g: { n: 2 }, h: { n: 2, m: 'x' }, i: { n: 2, m: 'x' }, k: { n: 2, m: 'x' }, l: { m: 'x' },
      m: { m: 1.5 }, n: { list: [1] }, o: { list: [1, 2] },
    };
    const received = [];
    const all = new Promise((resolve) => {
      ch.consume(queue, (msg) => {
        received.push(msg);
        if (received.length === plan.length) resolve();
      }, { noAck: true });
    });
    for (const [body, options] of plan) {
      ch.sendToQueue(queue, Buffer.from(body.repeat(body.charCodeAt(0) - 96)), options);
      if (changes[body]) changes[body]();
    }
    await all;
    received.forEach((msg, i) => {
      const [body, options] = plan[i];
      assert.strictEqual(msg.content.toString(), body.repeat(body.charCodeAt(0) - 96));
      assert.strictEqual(msg.properties.contentType, options.contentType);
      assert.strictEqual(msg.properties.priority, options.priority);
      assert.deepStrictEqual(msg.properties.headers, expectedHeaders[body] || {});
    });
    await conn.close();
  });

  it('a repeat on one channel does not leak into another', async () => {
    const conn = await amqp.connect(BROKER_URL);
    const [one, two] = [await conn.createChannel(), await conn.createChannel()];
    const { queue } = await one.assertQueue('', { exclusive: true });
    const got = [];
    const done = new Promise((resolve) => {
      one.consume(queue, (msg) => {
        got.push(msg.properties.type);
        if (got.length === 4) resolve();
      }, { noAck: true });
    });
    one.sendToQueue(queue, Buffer.from('1'), { type: 'one' });
    two.sendToQueue(queue, Buffer.from('2'), { type: 'two' });
    one.sendToQueue(queue, Buffer.from('3'), { type: 'one' });
    two.sendToQueue(queue, Buffer.from('4'), { type: 'two' });
    await done;
    assert.deepStrictEqual(got.sort(), ['one', 'one', 'two', 'two']);
    await conn.close();
  });

  it('publish reports false once 1024 messages or 4 MB wait, or a channel\'s own highWaterMark', async () => {
    const conn = await amqp.connect(BROKER_URL);
    const falseAfter = async (options, size) => {
      const ch = await conn.createChannel(options);
      const { queue } = await ch.assertQueue('', { exclusive: true });
      const body = Buffer.alloc(size);
      let sent = 1;
      while (ch.sendToQueue(queue, body)) sent++;
      await new Promise((resolve) => ch.once('drain', resolve));
      await ch.close();
      return sent;
    };
    assert.strictEqual(await falseAfter(undefined, 10), 1025, 'small messages: amqplib\'s count');
    assert.strictEqual(await falseAfter(undefined, 64 * 1024), 64, 'large ones: the byte limit');
    assert.strictEqual(await falseAfter({ highWaterMark: 3000 }, 10), 3001, 'a highWaterMark of its own');
    await conn.close();
  });

  it('a publish made by a getter while another is encoded: both arrive intact, the inner first', async () => {
    const conn = await amqp.connect(BROKER_URL);
    const ch = await conn.createChannel();
    const { queue } = await ch.assertQueue('', { exclusive: true });
    let published = false;
    const headers = {
      get x() {
        if (!published) {
          published = true;
          ch.sendToQueue(queue, Buffer.from('inner'), { messageId: 'inner' });
        }
        return 1;
      },
    };
    ch.sendToQueue(queue, Buffer.from('outer'), { messageId: 'outer', headers });
    const got = [];
    await new Promise((resolve) => {
      ch.consume(queue, (msg) => {
        got.push([msg.content.toString(), msg.properties.messageId, msg.properties.headers]);
        if (got.length === 2) resolve();
      }, { noAck: true });
    });
    assert.deepStrictEqual(got, [['inner', 'inner', {}], ['outer', 'outer', { x: 1 }]]);
    await conn.close();
  });

  it('a getter that detaches the content while the message is encoded: an Error, and nothing is sent', async () => {
    const conn = await amqp.connect(BROKER_URL);
    const ch = await conn.createChannel();
    const { queue } = await ch.assertQueue('', { exclusive: true });
    const content = Buffer.alloc(2000, 1);
    const headers = {
      get x() {
        structuredClone(content.buffer, { transfer: [content.buffer] });
        return 1;
      },
    };
    assert.throws(() => ch.sendToQueue(queue, content, { headers }), /content changed while the message was encoded/);
    ch.sendToQueue(queue, Buffer.from('after'));
    const msg = await new Promise((resolve) => ch.consume(queue, resolve, { noAck: true }));
    assert.strictEqual(msg.content.toString(), 'after', 'only the message after it arrives');
    await conn.close();
  });
});
