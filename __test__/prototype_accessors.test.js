'use strict';
// Accessors a user defines on Array.prototype or Object.prototype run whenever something is
// *set* (not defined) on an array or object that lacks the property. Had the addon filled what
// a read hands over by setting, such an accessor would run in the middle of the read, with the
// connection's read buffer and tape borrowed, and could call back into the same connection
// (parse another read into them, or free them): the addon defines instead (see
// src/bindings/mod.rs). Here the accessors call back into the connection, and every message
// must still arrive whole. npm test runs this on both transports.

const { describe, it } = require('node:test');
const asyncHooks = require('node:async_hooks');
const assert = require('node:assert');
const native = require('../lib/native');
const defs = require('../lib/defs');
const { TapeReader } = require('../lib/tape');
const { nativeSocketWorks } = require('../lib/native_socket');
const { methods, properties } = require('../lib/spec');
const { EVENT_KIND, EVENT_ID, EVENT_LENGTH, EVENT_MESSAGE, TAPE_END, MESSAGE_ARGUMENTS, MESSAGE_PROPERTIES } = require('../lib/boundary');
const { ours, AMQP_URL, uniqueName, withTimeout, closeQuietly } = require('./helpers');

// Defines accessors for `names` on `proto` while `body` runs (to the end of the promise it
// returns, if it returns one), then deletes them, restoring any the prototype had. Each setter
// calls `onSet(name)`; with `store`, it first makes the value the object's own property, as a
// plain assignment would have, so that JS code setting these names keeps working.
function withAccessors(proto, names, { store, onSet }, body) {
  const saved = names.map((name) => [name, Object.getOwnPropertyDescriptor(proto, name)]);
  const restore = () => {
    for (const [name, descriptor] of saved) {
      if (descriptor) Object.defineProperty(proto, name, descriptor);
      else delete proto[name];
    }
  };
  for (const name of names) {
    Object.defineProperty(proto, name, {
      configurable: true,
      get() { return undefined; },
      set(value) {
        if (store && Object(this) === this) Reflect.defineProperty(this, name, { value, writable: true, enumerable: true, configurable: true });
        onSet(name);
      },
    });
  }
  let result;
  try {
    result = body();
  } catch (err) {
    restore();
    throw err;
  }
  if (typeof result?.then === 'function') return result.finally(restore);
  restore();
  return result;
}

const indices = (n) => Array.from({ length: n }, (_, i) => String(i));

// --- what one read hands over, without a broker --------------------------------------------

function frame(type, channel, payload) {
  const out = Buffer.alloc(8 + payload.length);
  out[0] = type;
  out.writeUInt16BE(channel, 1);
  out.writeUInt32BE(payload.length, 3);
  payload.copy(out, 7);
  out[7 + payload.length] = 0xce;
  return out;
}

// A delivery whose strings are all new to the connection and whose body is too large to
// share the read's slab: each gives the read an object of its own, copied from the read buffer
// or, for a body in two frames, assembled.
function delivery(n, body) {
  const bodies = n % 2 ? [body.subarray(0, 100), body.subarray(100)] : [body];
  return Buffer.concat([
    defs.encodeMethod(defs.BasicDeliver, 1, { consumerTag: `ctag-${n}`, deliveryTag: n, redelivered: false, exchange: `ex-${n}`, routingKey: `key-${n}` }),
    defs.encodeProperties(defs.BasicProperties, 1, body.length, { messageId: `id-${n}`, headers: { n } }),
    ...bodies.map((part) => frame(3, 1, part)),
  ]);
}

const bodyOf = (n) => Buffer.alloc(9000 + n, n);

// The deliveries of what `receive` returned, as amqplib would give them.
function deliveries(received) {
  const reader = new TapeReader();
  const tape = received[0];
  const out = [];
  for (let i = reader.load(...received); i < tape[TAPE_END]; i += tape[i + EVENT_LENGTH]) {
    assert.strictEqual(tape[i + EVENT_KIND], EVENT_MESSAGE);
    out.push({
      fields: reader.methodFields(tape[i + EVENT_ID], tape, i + MESSAGE_ARGUMENTS),
      properties: reader.properties(defs.BasicProperties, tape, i + tape[i + MESSAGE_PROPERTIES]),
      content: reader.messageContent(tape, i),
    });
  }
  return out;
}

function assertDelivered(got, numbers) {
  assert.strictEqual(got.length, numbers.length);
  got.forEach((m, k) => {
    const n = numbers[k];
    assert.deepStrictEqual(
      [m.fields.consumerTag, m.fields.deliveryTag, m.fields.exchange, m.fields.routingKey, m.properties.messageId, m.properties.headers.n],
      [`ctag-${n}`, n, `ex-${n}`, `key-${n}`, `id-${n}`, n]);
    assert.ok(m.content.equals(bodyOf(n)), `the body of delivery ${n}`);
  });
}

describe('a read hands over what it parsed without running accessors on Array.prototype', () => {
  // The setters swallow the value (a set that stored nothing would leave a hole in what is
  // handed over) and, the first time, call back into the same connection, as a user's
  // accessor could.
  for (const [what, callBack] of [
    ['another read on the same connection', (c) => native.receive(c.handle, delivery(99, bodyOf(99)))],
    ['releasing the connection\'s buffers', (c) => c.session.release()],
  ]) {
    it(`with setters that try ${what}`, () => {
      const session = new native.NativeConnection();
      const c = { session, handle: session.handle() };
      native.receive(c.handle, defs.encodeMethod(defs.ChannelOpenOk, 1, {}));
      const numbers = [1, 2, 3, 4, 5, 6];
      const bytes = Buffer.concat(numbers.map((n) => delivery(n, bodyOf(n))));
      let sets = 0;
      const received = withAccessors(Array.prototype, indices(64), {
        store: false,
        onSet() {
          if (++sets === 1) callBack(c);
        },
      }, () => native.receive(c.handle, bytes));
      assert.strictEqual(sets, 0, 'no setter ran during the read');
      assert.ok(received[1].length >= numbers.length * 2, 'the read had objects of its own');
      assertDelivered(deliveries(received), numbers);
    });
  }

  it('nor does the codec\'s own decode', () => {
    const frame = defs.encodeMethod(defs.BasicDeliver, 1, { consumerTag: 'ct', deliveryTag: 7, redelivered: true, exchange: 'ex', routingKey: 'rk' });
    let sets = 0;
    const decoded = withAccessors(Array.prototype, indices(16), { store: false, onSet() { sets++; } },
      () => native.decodeMethod(defs.BasicDeliver, frame.subarray(11, frame.length - 1)));
    assert.strictEqual(sets, 0);
    const reader = new TapeReader();
    assert.deepStrictEqual({ ...reader.methodFields(defs.BasicDeliver, decoded[0], reader.load(...decoded)) },
      { consumerTag: 'ct', deliveryTag: 7, redelivered: true, exchange: 'ex', routingKey: 'rk' });
  });
});

// --- through the API, with a broker ---------------------------------------------------------

// Every name a message, its fields and properties, and the methods' replies have.
const NAMES = [...new Set([
  'content', 'fields', 'properties',
  ...Object.values(methods).flatMap((m) => m.args.map((a) => a.name)),
  ...Object.values(properties).flatMap((p) => p.args.map((a) => a.name)),
])];

describe('accessors on Array.prototype and Object.prototype that call back into the connection', () => {
  it('leave deliveries, basic.get replies and returns whole', async () => {
    const conn = await ours.connect(AMQP_URL);
    try {
      const ch = await conn.createChannel();
      const side = await conn.createChannel();
      const queue = uniqueName('accessors');
      const elsewhere = uniqueName('accessors-side');
      await ch.assertQueue(queue, { exclusive: true });
      const spare = await conn.createChannel();
      let spareClosed = null;
      await side.assertQueue(elsewhere, { exclusive: true });
      const body = (n) => Buffer.from(`message ${n} `.repeat(n * 50));
      const count = 20;
      let last = null;
      // What the setters do: acknowledge the last delivery, publish elsewhere, ask for a
      // message (a read to come on the same connection), and once, close a channel.
      // Not for ever, though: a get's reply runs them again.
      let calls = 0;
      const callBack = () => {
        if (++calls > 50) return;
        spareClosed ??= spare.close();
        if (last) {
          ch.ack(last);
          last = null;
        }
        side.publish('', elsewhere, Buffer.from('from a setter'));
        side.get(elsewhere, { noAck: true }).catch(() => {});
      };
      const arm = { on: false };
      const onSet = () => { if (arm.on) callBack(); };
      const got = await withAccessors(Array.prototype, indices(256), { store: true, onSet }, () =>
        withAccessors(Object.prototype, NAMES, { store: true, onSet }, async () => {
          arm.on = true;
          const delivered = [];
          const done = new Promise((resolve) => {
            ch.consume(queue, (m) => {
              delivered.push(m);
              last = m;
              if (delivered.length === count) resolve();
            });
          });
          for (let n = 1; n <= count; n++) ch.sendToQueue(queue, body(n), { messageId: `m${n}`, headers: { n } });
          await withTimeout(done, 20000, 'the deliveries');
          if (last) ch.ack(last);
          await ch.cancel(delivered[0].fields.consumerTag);

          ch.sendToQueue(queue, body(3), { messageId: 'got' });
          let fetched = false;
          for (let tries = 0; !fetched && tries < 100; tries++) {
            fetched = await ch.get(queue, { noAck: true });
            if (!fetched) await new Promise((resolve) => setTimeout(resolve, 20));
          }

          const returned = new Promise((resolve) => ch.once('return', resolve));
          ch.publish('', uniqueName('nobody'), body(4), { mandatory: true, messageId: 'returned' });
          const back = await withTimeout(returned, 20000, 'the return');
          arm.on = false;
          return { delivered, fetched, back };
        }));
      assert.deepStrictEqual(got.delivered.map((m) => [m.properties.messageId, m.properties.headers.n, m.content.toString()]),
        Array.from({ length: count }, (_, k) => [`m${k + 1}`, k + 1, body(k + 1).toString()]));
      assert.deepStrictEqual(got.delivered.map((m) => m.fields.routingKey), Array(count).fill(queue));
      assert.ok(got.fetched, 'basic.get had its message');
      assert.deepStrictEqual([got.fetched.properties.messageId, got.fetched.fields.routingKey, got.fetched.content.toString()], ['got', queue, body(3).toString()]);
      assert.deepStrictEqual([got.back.fields.replyCode, got.back.fields.replyText, got.back.properties.messageId, got.back.content.toString()],
        [312, 'NO_ROUTE', 'returned', body(4).toString()]);
      assert.ok(calls > 0, "the setters ran, called by the library's own JS as it took the messages in");
      await spareClosed;
      await side.close();
      await ch.close();
    } finally {
      await closeQuietly(conn);
    }
  });
});

// Making a native socket's async context runs async_hooks' init hooks, the user's JS, which may
// call into the connection: it is made in a call of its own, before connectSocket takes the
// connection.
describe('async_hooks\' init hook of a native socket', { skip: !nativeSocketWorks() && 'no native socket on this platform or runtime' }, () => {
  it('runs before connectSocket, and what it sends on the connection is kept', () => {
    const session = new native.NativeConnection();
    const handle = session.handle();
    const calls = [];
    const hook = asyncHooks.createHook({
      init(id, type) {
        if (type !== 'amqplib-rs:socket') return;
        calls.push('init');
        native.sendAcknowledgement(handle, 1, defs.BasicAck, 7, 0, 0);
      },
    }).enable();
    let errno;
    try {
      const context = native.socketAsyncContext();
      calls.push('made');
      errno = session.connectSocket('127.0.0.1', 5672, () => {}, context);
    } finally {
      hook.disable();
      session.destroySocket();
    }
    assert.strictEqual(errno, 0);
    assert.deepStrictEqual(calls, ['init', 'made']);
    assert.strictEqual(session.pendingOutput, 21, 'the ack sent from the hook');
  });

  it('takes a context once, and only one of its own', () => {
    const session = new native.NativeConnection();
    assert.throws(() => session.connectSocket('127.0.0.1', 5672, () => {}, {}), /Not a socket async context/);
    const context = native.socketAsyncContext();
    assert.throws(() => session.connectSocket('not an address', 5672, () => {}, context), /Not an IP address/);
    assert.throws(() => session.connectSocket('127.0.0.1', 5672, () => {}, context), /already used/);
    assert.strictEqual(session.socketWrites, 0);
  });
});
