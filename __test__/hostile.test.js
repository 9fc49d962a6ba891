'use strict';
// A server that misbehaves: the client reports a connection or channel error with the
// spec's code, closes what must be closed, and the process carries on.

const { describe, it } = require('node:test');
const assert = require('node:assert');
const amqp = require('../index');
const defs = require('../lib/defs');
const { fakeServer } = require('./fake_server');
const { latest } = require('./helpers');

const { constants } = defs;
const FRAME_END = constants.FRAME_END;

function frame(type, channel, payload) {
  const head = Buffer.alloc(7);
  head[0] = type;
  head.writeUInt16BE(channel, 1);
  head.writeUInt32BE(payload.length, 3);
  return Buffer.concat([head, payload, Buffer.from([FRAME_END])]);
}

function methodPayload(id, args = Buffer.alloc(0)) {
  const idBytes = Buffer.alloc(4);
  idBytes.writeUInt32BE(id);
  return Buffer.concat([idBytes, args]);
}

// Connects to a server that sends `bytes` once the connection is open (and answers the
// client's connection.close, if it sends one); resolves to the connection error and whether
// 'close' followed.
async function connectionErrorFrom(bytes, options, query = '') {
  const server = await fakeServer(({ send, sendRaw, expect }) => {
    sendRaw(bytes);
    expect(defs.ConnectionClose).then(() => send(defs.ConnectionCloseOk, {}), () => {});
  }, options);
  try {
    const conn = await amqp.connect(server.url + query);
    return await new Promise((resolve) => {
      let error = null;
      conn.on('error', (err) => {
        error = err;
      });
      conn.on('close', () => resolve({ error, closed: true }));
    });
  } finally {
    await server.close();
  }
}

describe('hostile servers', () => {
  it('garbage after the handshake is a frame error', async () => {
    const { error, closed } = await connectionErrorFrom(Buffer.from('HTTP/1.1 400 Bad Request\r\n\r\n'));
    assert.ok(closed);
    assert.match(error.message, /Unknown frame type|Invalid frame|exceeds maxFrameSize/);
  });

  it('a frame over maxFrameSize is refused before its bytes arrive', async () => {
    const head = Buffer.from([constants.FRAME_BODY, 0, 1, 0, 1, 0, 0]); // 65536 bytes declared
    const { error } = await connectionErrorFrom(head, {}, '?maxFrameSize=16384');
    assert.strictEqual(error.message, 'Frame size 65536 exceeds maxFrameSize 16384');
    assert.strictEqual(error.code, constants.FRAME_ERROR);
  });

  it('a bad frame-end octet', async () => {
    const bad = frame(constants.FRAME_HEARTBEAT, 0, Buffer.alloc(0));
    bad[bad.length - 1] = 0;
    const { error } = await connectionErrorFrom(bad);
    assert.match(error.message, /Invalid frame/);
  });

  it('an unknown method id', async () => {
    const { error } = await connectionErrorFrom(frame(constants.FRAME_METHOD, 0, methodPayload(0x00ff00ff)));
    assert.match(error.message, /Unknown class\/method ID/);
  });

  it('an unknown frame type', async () => {
    const { error } = await connectionErrorFrom(frame(9, 0, Buffer.alloc(0)));
    assert.match(error.message, /Unknown frame type 9/);
  });

  it('truncated method arguments', async () => {
    // connection.close needs a reply code, text, class and method: give it two bytes.
    const { error } = await connectionErrorFrom(frame(constants.FRAME_METHOD, 0, methodPayload(defs.ConnectionClose, Buffer.from([1, 2]))));
    assert.ok(error, 'an error was reported');
  });

  it('a lying table length', async () => {
    // channel.open-ok's longstr claims 1000 bytes but carries 3.
    const args = Buffer.from([0, 0, 3, 232, 1, 2, 3]);
    const { error } = await connectionErrorFrom(frame(constants.FRAME_METHOD, 1, methodPayload(defs.ChannelOpenOk, args)));
    assert.ok(error);
  });

  it('tables nested without bound', async () => {
    // A content header whose headers table nests 10,000 deep: refused, not recursed into.
    const depth = 10000;
    let table = Buffer.alloc(0);
    for (let i = 0; i < depth; i++) table = Buffer.concat([Buffer.from([1, 107, 70]), lenOf(table), table]);
    const flags = Buffer.from([0x20, 0x00]); // headers present
    const header = Buffer.concat([Buffer.from([0, 60, 0, 0]), Buffer.alloc(8), flags, lenOf(table), table]);
    const { error } = await connectionErrorFrom(frame(constants.FRAME_HEADER, 1, header), { frameMax: 131072 });
    assert.match(error.message, /nested more than/);
  });

  it('frames for a channel never opened', async () => {
    const { error } = await connectionErrorFrom(frame(constants.FRAME_METHOD, 7, methodPayload(defs.BasicQosOk)));
    assert.match(error.message, /Frame on unknown channel/);
  });

  it('a body longer than its header declared: the same channel error as amqplib', async () => {
    for (const frames of [
      ({ deliver, header, body }) => [deliver(1), header(3), body('abcd')],
      ({ deliver, header, body }) => [deliver(1), header(5), body('abc'), body('def')],
    ]) {
      const seen = await deliveriesInBothLibraries(frames);
      assert.strictEqual(seen.ours.code, constants.UNEXPECTED_FRAME);
      assert.match(seen.ours.message, /Too much content sent! Expected \d bytes/);
      assert.deepStrictEqual(seen.ours, seen.amqplib);
    }
  });

  it('a reply nothing asked for: a frame error that names it, where amqplib fails with a TypeError; the connection closes in both', async () => {
    const outcome = async (library) => {
      const server = await fakeServer(async ({ send, expect }) => {
        const open = await expect(defs.ChannelOpen);
        send(defs.ChannelOpenOk, { channelId: Buffer.alloc(0) }, open.channel);
        send(defs.BasicQosOk, {}, open.channel);
        expect(defs.ConnectionClose).then(() => send(defs.ConnectionCloseOk, {}), () => {});
      });
      try {
        const conn = await library.connect(server.url);
        const closed = new Promise((resolve) => conn.once('close', resolve));
        let error = null;
        conn.on('error', (err) => {
          error = err;
        });
        await conn.createChannel().catch(() => {});
        await closed;
        return error;
      } finally {
        await server.close();
      }
    };
    const [ours, theirs] = [await outcome(amqp), await outcome(latest)];
    assert.strictEqual(ours.message, 'Unexpected BasicQosOk on channel 1: no request waits for a reply');
    assert.strictEqual(theirs.name, 'TypeError');
  });

  it('a header declaring an enormous body, then nothing: memory stays bounded', async () => {
    const before = process.memoryUsage().rss;
    const props = Buffer.concat([Buffer.from([0, 60, 0, 0]), u64(2 ** 50), Buffer.from([0, 0])]);
    const server = await fakeServer(async ({ send, sendRaw, expect }) => {
      const open = await expect(defs.ChannelOpen);
      send(defs.ChannelOpenOk, { channelId: Buffer.alloc(0) }, open.channel);
      await expect(defs.BasicConsume);
      send(defs.BasicConsumeOk, { consumerTag: 'c' }, open.channel);
      send(defs.BasicDeliver, { consumerTag: 'c', deliveryTag: 1, exchange: '', routingKey: 'q' }, open.channel);
      sendRaw(frame(constants.FRAME_HEADER, open.channel, props));
      sendRaw(frame(constants.FRAME_BODY, open.channel, Buffer.alloc(1000)));
    });
    const conn = await amqp.connect(server.url);
    const ch = await conn.createChannel();
    let delivered = false;
    await ch.consume('q', () => {
      delivered = true;
    });
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.strictEqual(delivered, false);
    assert.ok(process.memoryUsage().rss - before < 64 * 1024 * 1024, 'no allocation for the declared size');
    conn.connection.stream.destroy();
    await server.close();
  });

  // Deliveries whose frames arrive together (ours takes a whole one in one step) must fail as
  // they do in amqplib, frame by frame.
  it('a delivery cut short by the next, in one read: the same channel error as amqplib', async () => {
    const seen = await deliveriesInBothLibraries(({ deliver, header, body }) => [deliver(1), header(5), deliver(2), header(5), body('hello')]);
    assert.strictEqual(seen.ours.code, constants.UNEXPECTED_FRAME);
    assert.deepStrictEqual(seen.ours, seen.amqplib);
  });

  it('an empty message followed by a body, in one read: as amqplib', async () => {
    const seen = await deliveriesInBothLibraries(({ deliver, header, body }) => [deliver(1), header(0), body('stray')]);
    assert.deepStrictEqual(seen.ours.delivered, [1], 'the empty message is delivered');
    assert.deepStrictEqual(seen.ours, seen.amqplib);
  });

  // The core owns these rules (core/src/content.rs); each error must read as amqplib's does.
  for (const [name, frames] of [
    ['a header with no delivery before it', ({ header, body }) => [header(3), body('abc')]],
    ['a body with no delivery before it', ({ body }) => [body('abc')]],
    ['a body where a header is due', ({ deliver, body }) => [deliver(1), body('abc')]],
    ['a second header where the body is due', ({ deliver, header }) => [deliver(1), header(3), header(3)]],
    ['a delivery, then a delivery whose header never comes, then a whole one', ({ deliver, header, body }) => [deliver(1), header(1), body('a'), deliver(2), deliver(3), header(1), body('b')]],
  ]) {
    it(`${name}: the same channel error as amqplib`, async () => {
      const seen = await deliveriesInBothLibraries(frames);
      assert.strictEqual(seen.ours.code, constants.UNEXPECTED_FRAME);
      assert.deepStrictEqual(seen.ours, seen.amqplib);
    });
  }

  // What a channel does with a delivery, or the server's cancel, for a consumer it no longer
  // has (RabbitMQ 4.3.6 sends both after its consumer timeout), against amqplib 2.3.1 with the
  // same server. Resolves to the events the channel emitted, in order, and the methods the
  // server was sent after it sent the stray.
  async function strayIn(lib, sendStray) {
    const received = [];
    const server = await fakeServer(async ({ send, sendRaw, expect }) => {
      const open = await expect(defs.ChannelOpen);
      send(defs.ChannelOpenOk, { channelId: Buffer.alloc(0) }, open.channel);
      // Only once the client's listeners are on (it asks with basic.qos): sent with the
      // open-ok, the stray could come in the same read, before them.
      await expect(defs.BasicQos);
      send(defs.BasicQosOk, {}, open.channel);
      sendStray(send, sendRaw, open.channel);
      for (;;) {
        const f = await expect();
        received.push({ method: defs.info(f.id).name, fields: f.fields });
        if (f.id === defs.BasicQos) send(defs.BasicQosOk, {}, open.channel);
        if (f.id === defs.ChannelClose) send(defs.ChannelCloseOk, {}, open.channel);
        if (f.id === defs.ConnectionClose) return send(defs.ConnectionCloseOk, {});
      }
    });
    const conn = await lib.connect(server.url);
    const ch = await conn.createChannel();
    const events = [];
    ch.on('warning', (w) => events.push(['warning', w.name, w.message]));
    ch.on('error', (e) => events.push(['error', e.message]));
    const closed = new Promise((resolve) => ch.on('close', resolve));
    const heard = new Promise((resolve) => (ch.once('warning', resolve), ch.once('error', resolve)));
    await ch.prefetch(1);
    await heard;
    // A second RPC answered shows the channel still works; a closed one refuses it.
    await ch.prefetch(2).then(() => events.push(['qos-ok']), (e) => events.push(['refused', e.message]));
    await ch.close().catch(() => {});
    await closed;
    await conn.close();
    await server.close();
    const closing = ['ChannelClose', 'ConnectionClose'];
    return { events, received: received.filter((r) => !closing.includes(r.method)) };
  }

  const strayDelivery = (send, sendRaw, channel) => {
    send(defs.BasicDeliver, { consumerTag: 'nobody', deliveryTag: 7, exchange: '', routingKey: 'q' }, channel);
    const props = Buffer.concat([Buffer.from([0, 60, 0, 0]), u64(0), Buffer.from([0, 0])]);
    sendRaw(frame(constants.FRAME_HEADER, channel, props));
  };

  it('a delivery for a consumer the channel no longer has: the server cancels that consumer and takes the message back, the channel warns and lives (amqplib 2.3.1 closes it)', async () => {
    const ours = await strayIn(amqp, strayDelivery);
    assert.deepStrictEqual(ours.events, [
      ['warning', 'UnknownConsumerWarning', 'Unknown consumer: nobody; rejected back to its queue'],
      ['qos-ok'],
    ]);
    assert.deepStrictEqual(ours.received.map((r) => r.method), ['BasicCancel', 'BasicReject', 'BasicQos']);
    assert.deepStrictEqual(ours.received[0].fields, { consumerTag: 'nobody', nowait: true });
    assert.deepStrictEqual(ours.received[1].fields, { deliveryTag: 7, requeue: true });

    const amqplib = await strayIn(latest, strayDelivery);
    assert.deepStrictEqual(amqplib.events.slice(0, 2), [['error', 'Unknown consumer: nobody'], ['refused', 'Channel closed']]);
  });

  it("the server's cancel of a consumer the channel no longer has: ignored with a warning, the channel lives (amqplib 2.3.1 closes it)", async () => {
    const strayCancel = (send, _sendRaw, channel) => send(defs.BasicCancel, { consumerTag: 'gone', nowait: true }, channel);
    const ours = await strayIn(amqp, strayCancel);
    assert.deepStrictEqual(ours.events, [
      ['warning', 'UnknownConsumerWarning', 'Unknown consumer: gone; its cancel ignored'],
      ['qos-ok'],
    ]);
    assert.deepStrictEqual(ours.received.map((r) => r.method), ['BasicQos']);
    // amqplib 2.3.1 makes "Unknown consumer: gone" an 'error' of the whole connection, which
    // kills the process without a listener on the connection (so it is not run here).
  });
});

function lenOf(buffer) {
  const len = Buffer.alloc(4);
  len.writeUInt32BE(buffer.length);
  return len;
}

function u64(n) {
  const b = Buffer.alloc(8);
  b.writeBigUInt64BE(BigInt(n));
  return b;
}

// Runs a consumer against a server that sends, in one write, the frames `frames(make)`
// returns (make: deliver(tag), header(size), body(text)), with ours and with amqplib; resolves
// to each one's channel error and the tags delivered before it.
async function deliveriesInBothLibraries(frames) {
  const seen = {};
  for (const [name, lib] of [['ours', amqp], ['amqplib', require('amqplib')]]) {
    const server = await fakeServer(async ({ conn, send, sendRaw, expect }) => {
      const open = await expect(defs.ChannelOpen);
      send(defs.ChannelOpenOk, { channelId: Buffer.alloc(0) }, open.channel);
      await expect(defs.BasicConsume);
      send(defs.BasicConsumeOk, { consumerTag: 'c' }, open.channel);
      const ch = open.channel;
      const make = {
        deliver: (tag) => defs.encodeMethod(defs.BasicDeliver, ch, { consumerTag: 'c', deliveryTag: tag, exchange: '', routingKey: 'q' }),
        header: (size) => frame(constants.FRAME_HEADER, ch, Buffer.concat([Buffer.from([0, 60, 0, 0]), u64(size), Buffer.from([0, 0])])),
        body: (text) => frame(constants.FRAME_BODY, ch, Buffer.from(text)),
      };
      sendRaw(Buffer.concat(frames(make)));
      await expect(defs.ChannelClose);
      send(defs.ChannelCloseOk, {}, ch);
    });
    const conn = await lib.connect(server.url);
    const ch = await conn.createChannel();
    const delivered = [];
    const error = new Promise((resolve) => ch.on('error', resolve));
    const closed = new Promise((resolve) => ch.on('close', resolve));
    await ch.consume('q', (msg) => delivered.push(msg.fields.deliveryTag));
    const { message, code, classId, methodId } = await error;
    await closed;
    seen[name] = { message, code, classId, methodId, delivered };
    conn.connection.stream.destroy();
    await server.close();
  }
  return seen;
}
