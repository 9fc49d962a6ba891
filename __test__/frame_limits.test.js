'use strict';
// Frame sizes and table limits, as amqplib 2.3.1 has them (GHSA-37f9-7m79-6866 and the
// tables too large for a frame), and tables that no frame can hold (cyclic, or nested without
// end), and odd table values. Every case runs against this package and against amqplib 2.3.1, with the same
// expectations: fake servers for what a broker will not do, the broker for the rest.

const { describe, it } = require('node:test');
const assert = require('node:assert');
const defs = require('../lib/defs');
const { fakeServer } = require('./fake_server');
const { AMQP_URL, uniqueName, withTimeout } = require('./helpers');

const { constants } = defs;
const LIBRARIES = [
  ['amqplib-rs', require('../index')],
  ['amqplib 2.3.1', require('amqplib-latest')],
];

function frame(type, channel, payload) {
  const head = Buffer.alloc(7);
  head[0] = type;
  head.writeUInt16BE(channel, 1);
  head.writeUInt32BE(payload.length, 3);
  return Buffer.concat([head, payload, Buffer.from([constants.FRAME_END])]);
}

// A fake server that opens channel 1 when asked, then runs `script` with the peer; it records
// every frame the client sends after that.
function serverWithChannel(script, options) {
  const received = [];
  const serving = fakeServer(async (peer) => {
    await peer.expect(defs.ChannelOpen);
    peer.send(defs.ChannelOpenOk, { channelId: Buffer.alloc(0) }, 1);
    peer.conn.flush();
    peer.socket.on('data', (chunk) => received.push(chunk));
    script(peer);
  }, options);
  return serving.then((server) => Object.assign(server, { received }));
}

// Answers the client's connection.close, so that close() completes.
function answersClose({ send, expect }) {
  expect(defs.ConnectionClose).then(() => send(defs.ConnectionCloseOk, {}), () => {});
}

function connectionError(conn) {
  return new Promise((resolve) => conn.on('error', resolve));
}

for (const [name, amqp] of LIBRARIES) {
  describe(`frame limits: ${name}`, () => {
    it('a tune with frameMax below 4096 (and not 0) is refused', async () => {
      const server = await fakeServer(() => {}, { frameMax: 1024 });
      try {
        await assert.rejects(amqp.connect(server.url), { message: 'Server frameMax 1024 is below the protocol minimum 4096' });
      } finally {
        await server.close();
      }
    });

    it('maxFrameSize is 0 or an integer of at least 4096, else a TypeError', async () => {
      const server = await fakeServer(() => {});
      const url = new URL(server.url);
      const asObject = { protocol: 'amqp', hostname: url.hostname, port: Number(url.port) };
      try {
        for (const [target, got] of [
          [`${server.url}?maxFrameSize=100`, '100'],
          [`${server.url}?maxFrameSize=abc`, 'NaN'],
          [`${server.url}?maxFrameSize=-4096`, 'NaN'],
          [{ ...asObject, maxFrameSize: 4096.5 }, 'NaN'],
          [{ ...asObject, maxFrameSize: 4095 }, '4095'],
        ]) {
          await assert.rejects(amqp.connect(target), {
            name: 'TypeError',
            message: `maxFrameSize must be 0 (no limit) or an integer of at least 4096; got ${got}`,
          });
        }
      } finally {
        await server.close();
      }
    });

    it('connection.maxFrameSize: 64 MiB, or the negotiated frameMax when larger; 0 lifts it', async () => {
      const server = await fakeServer(answersClose, { frameMax: 0 });
      const url = new URL(server.url);
      const asObject = { protocol: 'amqp', hostname: url.hostname, port: Number(url.port) };
      try {
        for (const [target, expected] of [
          [server.url, 64 * 1024 * 1024],
          [{ ...asObject, frameMax: 2 ** 27 }, 2 ** 27],
          [{ ...asObject, frameMax: 2 ** 27, maxFrameSize: 8192 }, 8192],
          [`${server.url}?maxFrameSize=0`, 0],
        ]) {
          const conn = await amqp.connect(target);
          assert.strictEqual(conn.connection.maxFrameSize, expected, JSON.stringify(target));
          await conn.close();
        }
      } finally {
        await server.close();
      }
    });

    it('a frame over maxFrameSize is refused from its header alone', async () => {
      const head = Buffer.from([constants.FRAME_BODY, 0, 1, 0, 1, 0, 0]); // 65536 bytes declared
      const server = await fakeServer(({ sendRaw }) => sendRaw(head));
      try {
        const conn = await amqp.connect(`${server.url}?maxFrameSize=16384`);
        const err = await withTimeout(connectionError(conn), 5000, 'the connection error');
        assert.strictEqual(err.message, 'Frame size 65536 exceeds maxFrameSize 16384');
      } finally {
        await server.close();
      }
    });

    it('a frame over the negotiated frameMax but under maxFrameSize is accepted (unsplit bodies)', async () => {
      const body = Buffer.alloc(10_000, 7);
      // The return goes out only once the client asks (basic.qos), after its listener is on:
      // sent at once, it could share a read with the open-ok and be emitted before the
      // listener (it did, for amqplib, on a slow emulated machine).
      const raw = await serverWithChannel(async (peer) => {
        const { send, sendRaw, expect } = peer;
        await expect(defs.BasicQos);
        send(defs.BasicQosOk, {}, 1);
        const returned = defs.encodeMethod(defs.BasicReturn, 1, { replyCode: 312, replyText: 'NO_ROUTE', exchange: '', routingKey: 'nowhere' });
        const header = defs.encodeProperties(defs.BasicProperties, 1, body.length, {});
        sendRaw(Buffer.concat([returned, header, frame(constants.FRAME_BODY, 1, body)]));
        answersClose(peer);
      });
      try {
        const conn = await amqp.connect(raw.url);
        assert.strictEqual(conn.connection.frameMax, 4096);
        const ch = await conn.createChannel();
        const returning = new Promise((resolve) => ch.on('return', resolve));
        await ch.prefetch(1);
        const returned = await withTimeout(returning, 5000, 'the return');
        assert.strictEqual(returned.content.length, 10_000);
        assert.ok(returned.content.equals(body));
        await conn.close();
      } finally {
        await raw.close();
      }
    });

    it('a frameMax that leaves no room for a body frame makes publish throw', async () => {
      const server = await serverWithChannel(() => {}, { frameMax: 0 });
      try {
        const conn = await amqp.connect(`${server.url}?frameMax=8`);
        const ch = await conn.createChannel();
        // amqplib sends a small message (under 2 KB in all) as one buffer without looking at
        // frameMax; from 2 KB it throws, as we do for every size.
        const sizes = name === 'amqplib-rs' ? [0, 5, 4096] : [4096];
        for (const size of sizes) {
          assert.throws(() => ch.publish('', 'q', Buffer.alloc(size)), {
            message: 'Cannot send content: frameMax 8 leaves no room for a body frame',
          });
        }
        if (name === 'amqplib-rs') {
          await new Promise((resolve) => setTimeout(resolve, 50));
          assert.strictEqual(Buffer.concat(server.received).length, 0, 'nothing is sent');
        }
        conn.connection.stream.destroy();
      } finally {
        await server.close();
      }
    });
  });

  describe(`tables no frame can hold: ${name}`, () => {
    // One connection for the lot: each refusal must leave it, and the channel, usable.
    let conn;
    let ch;
    let queue;

    // After an RPC that could not be sent, amqplib's channel waits for a reply that never
    // comes (so later RPCs on it hang): it goes on with a new channel, ours with the same one.
    async function afterFailedRpc() {
      if (name !== 'amqplib-rs') ch = await conn.createChannel();
      await stillUsable();
    }

    async function stillUsable() {
      const body = Buffer.from(`still usable ${Math.random()}`);
      ch.sendToQueue(queue, body);
      let msg = false;
      for (let i = 0; i < 50 && !msg; i++) {
        msg = await ch.get(queue, { noAck: true });
        if (!msg) await new Promise((r) => setTimeout(r, 20));
      }
      assert.ok(msg && msg.content.equals(body), 'the next message goes through');
    }

    it('opens', async () => {
      conn = await amqp.connect(AMQP_URL);
      conn.on('error', (err) => assert.fail(`connection error: ${err.message}`));
      ch = await conn.createChannel();
      queue = (await ch.assertQueue(uniqueName('frame-limits'), { exclusive: true })).queue;
    });

    it('headers too large for a frame: publish throws a RangeError, nothing is sent', async () => {
      assert.throws(() => ch.publish('', queue, Buffer.from('x'), { headers: { big: 'x'.repeat(200_000) } }), RangeError);
      const cc = Array.from({ length: 100_000 }, (_, i) => `q${i}`);
      assert.throws(() => ch.sendToQueue(queue, Buffer.from('x'), { CC: cc }), RangeError);
      await stillUsable();
    });

    it('arguments too large for a frame: the RPC fails with a RangeError', async () => {
      const big = { 'x-big': 'x'.repeat(200_000) };
      await assert.rejects(
        (async () => ch.assertQueue(uniqueName('too-big'), { exclusive: true, arguments: big }))(),
        RangeError,
      );
      await afterFailedRpc();
    });

    it('cyclic or deeply nested tables: a RangeError, the connection untouched', async () => {
      const cyclic = {};
      cyclic.self = cyclic;
      const cyclicArray = [];
      cyclicArray.push(cyclicArray);
      let deepObject = {};
      for (let i = 0; i < 10_000; i++) deepObject = { a: deepObject };
      let deepArray = [];
      for (let i = 0; i < 20_000; i++) deepArray = [deepArray];
      for (const headers of [cyclic, { list: cyclicArray }, deepObject, { list: deepArray }]) {
        assert.throws(() => ch.publish('', queue, Buffer.from('x'), { headers }), RangeError);
      }
      await stillUsable();
      await assert.rejects((async () => ch.assertQueue(uniqueName('cyclic'), { exclusive: true, arguments: cyclic }))(), RangeError);
      await afterFailedRpc();
      await assert.rejects((async () => ch.consume(queue, () => {}, { arguments: { list: deepArray } }))(), RangeError);
      await afterFailedRpc();
    });

    it('an array longer than any frame is read no further than a table may be', async () => {
      // Holes read as undefined, which no table holds: a TypeError at the first.
      assert.throws(() => ch.publish('', queue, Buffer.from('x'), { headers: { a: new Array(2 ** 32 - 1) } }), {
        name: 'TypeError',
        message: 'Unknown type to encode: undefined',
      });
      // 20,000 items of 1 KiB, then a length of 2 ** 32 - 1: the frame (128 KiB) is full long
      // before the item that counts its reads (amqplib's 64 KiB encoding buffer, too).
      const long = [];
      long.length = 2 ** 32 - 1;
      const item = 'x'.repeat(1024);
      for (let i = 0; i < 20_000; i++) long[i] = item;
      let readsPast = 0;
      Object.defineProperty(long, 200, { get: () => (readsPast++, item) });
      assert.throws(() => ch.publish('', queue, Buffer.from('x'), { headers: { long } }), RangeError);
      assert.strictEqual(readsPast, 0);
      if (name === 'amqplib-rs') {
        // amqplib maps the whole list to strings first, and so never returns.
        const cc = [];
        cc.length = 2 ** 32 - 1;
        assert.throws(() => ch.publish('', queue, Buffer.from('x'), { CC: cc }), RangeError);
      }
      await stillUsable();
    });

    it('odd table values are encoded as amqplib encodes them', async () => {
      const headers = {
        u8: Uint8Array.of(1, 2), // not a Buffer: a table of its indices
        dv: new DataView(new ArrayBuffer(2)), // no enumerable properties: an empty table
        n: { '!': 'int', value: '42' }, // coerced as Node's writers do (a float of 'abc' is NaN,
        // which RabbitMQ answers by closing the connection, for amqplib as for us)
      };
      ch.sendToQueue(queue, Buffer.from('odd'), { headers });
      let msg = false;
      for (let i = 0; i < 50 && !msg; i++) {
        msg = await ch.get(queue, { noAck: true });
        if (!msg) await new Promise((r) => setTimeout(r, 20));
      }
      const got = msg.properties.headers;
      assert.deepStrictEqual(got.u8, { 0: 1, 1: 2 });
      assert.deepStrictEqual(got.dv, {});
      assert.strictEqual(got.n, 42);
      assert.throws(() => ch.sendToQueue(queue, Buffer.from('x'), { headers: { b: { '!': 'byte', value: 300 } } }), {
        name: 'RangeError',
        code: 'ERR_OUT_OF_RANGE',
        message: 'The value of "value" is out of range. It must be >= -128 and <= 127. Received 300',
      });
      await stillUsable();
    });

    it('cyclic client properties: connect fails with a RangeError', async () => {
      const props = {};
      props.me = props;
      await assert.rejects(amqp.connect(AMQP_URL, { clientProperties: props }), RangeError);
    });

    it('closes', async () => {
      await conn.close();
    });
  });
}

// RabbitMQ 4.1 and later drop a connection whose tune-ok asks for frames under 8192 bytes, 3 s
// later and without a word (amqplib 2.3.1 then reports `read ECONNRESET`): ours refuses such a
// frameMax at the tune, naming the limit and the server's version.
describe('a frameMax under what the server takes: amqplib-rs', () => {
  const amqp = require('../index');
  const REFUSED = /^frameMax 4096 is below 8192, the least RabbitMQ (\S+) accepts \(it would drop the connection\)$/;
  const fakeRabbitMQ = (version) => fakeServer(answersClose, { frameMax: 131072, serverProperties: { product: 'RabbitMQ', version } });

  for (const version of ['4.1.0', '4.3.6', '5.0.0']) {
    it(`RabbitMQ ${version}: frameMax 4096 is refused at the tune; 8192 connects`, async () => {
      const server = await fakeRabbitMQ(version);
      try {
        await assert.rejects(amqp.connect(`${server.url}?frameMax=4096`), (err) => {
          assert.match(err.message, REFUSED);
          assert.strictEqual(REFUSED.exec(err.message)[1], version);
          return true;
        });
        const conn = await amqp.connect(`${server.url}?frameMax=8192`);
        assert.strictEqual(conn.connection.frameMax, 8192);
        await conn.close();
      } finally {
        await server.close();
      }
    });
  }

  for (const version of ['4.0.5', '3.13.7']) {
    it(`RabbitMQ ${version} takes frameMax 4096`, async () => {
      const server = await fakeRabbitMQ(version);
      try {
        const conn = await amqp.connect(`${server.url}?frameMax=4096`);
        assert.strictEqual(conn.connection.frameMax, 4096);
        await conn.close();
      } finally {
        await server.close();
      }
    });
  }

  it("the broker's own answer to frameMax 4096: refused at once from RabbitMQ 4.1, taken before", async () => {
    const probe = await amqp.connect(AMQP_URL);
    const { version } = probe.connection.serverProperties;
    await probe.close();
    const [major, minor] = String(version).split('.').map(Number);
    const url = `${AMQP_URL}${AMQP_URL.includes('?') ? '&' : '?'}frameMax=4096`;
    if (major > 4 || (major === 4 && minor >= 1)) {
      await assert.rejects(withTimeout(amqp.connect(url), 2000, 'the refusal'), { message: REFUSED });
    } else {
      const conn = await amqp.connect(url);
      const ch = await conn.createChannel();
      const { queue } = await ch.assertQueue('', { exclusive: true });
      assert.ok(queue);
      await conn.close();
    }
  });
});
