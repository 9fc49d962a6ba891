'use strict';
// The transports against the real broker: the native TCP socket (write coalescing, replies
// within the read, backpressure through a slow link) and TLS, inside the native socket where
// it serves and through tls.connect otherwise.

const { describe, it, before, after } = require('node:test');
const assert = require('node:assert');
const net = require('node:net');
const tls = require('node:tls');
const amqp = require('../index');
const { tlsCertificates } = require('./tls_certificates');
const { defaultPort } = require('../lib/nodes');

const BROKER_URL = process.env.AMQP_URL || 'amqp://localhost';
const BROKER = new globalThis.URL(BROKER_URL);
const BROKER_HOST = BROKER.hostname === 'localhost' ? '127.0.0.1' : BROKER.hostname;
// A broker reached over amqps:// (its CA trusted through NODE_EXTRA_CA_CERTS) is reached so
// throughout: the native socket's tests then run over TLS, and the relays speak it upstream.
const BROKER_TLS = BROKER.protocol === 'amqps:';
const BROKER_PORT = Number(BROKER.port) || defaultPort(BROKER.protocol);


const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

// The broker counts a queue's messages a little after taking them: ask until they are all in.
async function queuedCount(ch, queue, expected) {
  let count = 0;
  for (let i = 0; i < 100 && count < expected; i++) {
    count = (await ch.checkQueue(queue)).messageCount;
    if (count < expected) await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return count;
}

// A relay to the broker on 127.0.0.1 whose broker side can be paused (a slow reader). It
// passes bytes as they come, or with `terminate`, a TLS server socket around the client's,
// it ends the client's TLS and speaks to the broker as the broker's URL does.
function relay(terminate) {
  return new Promise((resolve) => {
    const pairs = new Set();
    const server = net.createServer((client) => {
      const upstream = terminate && BROKER_TLS ? tls.connect({ port: BROKER_PORT, host: BROKER_HOST, servername: BROKER.hostname }) : net.connect(BROKER_PORT, BROKER_HOST);
      const front = terminate ? terminate(client) : client;
      front.pipe(upstream).pipe(front);
      const pair = { front, upstream };
      pairs.add(pair);
      const end = () => {
        front.destroy();
        upstream.destroy();
        pairs.delete(pair);
      };
      front.on('error', end).on('close', end);
      upstream.on('error', end).on('close', end);
    });
    server.listen(0, '127.0.0.1', () =>
      resolve({ port: server.address().port, pairs, close: () => new Promise((done) => server.close(done)) }),
    );
  });
}

// These look at the native socket itself: on the stream path (AMQPLIB_RS_TRANSPORT=stream, or
// a platform without it) there is none to look at.
const { NativeSocket } = require('../lib/native_socket');
const nativeSocketServes = NativeSocket.serves({});

describe('native TCP transport', { skip: !NativeSocket.serves({}, BROKER.protocol) && `${BROKER.protocol}// takes the stream path here` }, () => {
  it("names its peer as net.Socket does while connected (remoteAddress, remotePort, remoteFamily)", async () => {
    const conn = await amqp.connect(BROKER_URL);
    const { stream } = conn.connection;
    const peer = { address: stream.remoteAddress, port: stream.remotePort, family: stream.remoteFamily };
    await conn.close();
    const plain = await new Promise((resolve, reject) => {
      const socket = net.connect(BROKER_PORT, BROKER_HOST, () => {
        resolve({ address: socket.remoteAddress, port: socket.remotePort, family: socket.remoteFamily });
        socket.destroy();
      }).on('error', reject);
    });
    assert.deepStrictEqual(peer, plain);
    assert.strictEqual(stream.remotePort, undefined, 'none once closed');
  });

  it('publishes made in one turn leave in one socket write', async () => {
    const conn = await amqp.connect(BROKER_URL);
    const ch = await conn.createChannel();
    const { queue } = await ch.assertQueue('', { exclusive: true });
    await nextTurn();
    const session = conn.connection.session;
    const before = session.socketWrites;
    for (let i = 0; i < 500; i++) ch.sendToQueue(queue, Buffer.from(`message ${i}`));
    await nextTurn();
    assert.strictEqual(session.socketWrites - before, 1);
    assert.strictEqual(await queuedCount(ch, queue, 500), 500);
    await conn.close();
  });

  it("writes each read into the tape JS released, while every message arrives whole", async () => {
    const { SOCKET_DATA, TAPE_HELD } = require('../lib/boundary');
    const tapes = new Map(); // tape -> reads it carried
    let heldAtHandOver = 0;
    const onEvent = NativeSocket.prototype.onEvent;
    NativeSocket.prototype.onEvent = function spy(kind, tape, objects, slab) {
      if (kind === SOCKET_DATA) {
        tapes.set(tape, (tapes.get(tape) || 0) + 1);
        heldAtHandOver += tape[TAPE_HELD];
      }
      return onEvent.call(this, kind, tape, objects, slab);
    };
    let conn;
    try {
      conn = await amqp.connect(BROKER_URL);
    } finally {
      NativeSocket.prototype.onEvent = onEvent; // bound by the socket when it was made
    }
    const ch = await conn.createChannel();
    const { queue } = await ch.assertQueue('', { exclusive: true });
    await ch.prefetch(1);
    const bodies = Array.from({ length: 60 }, (_, i) => Buffer.from(`body ${i} `.repeat(i + 1)));
    const received = [];
    const all = new Promise((resolve) => {
      ch.consume(queue, (msg) => {
        received.push(msg);
        ch.ack(msg);
        if (received.length === bodies.length) resolve();
      });
    });
    for (const body of bodies) ch.sendToQueue(queue, body, { headers: { n: received.length } });
    await all;
    received.forEach((msg, i) => assert.ok(msg.content.equals(bodies[i]), `message ${i} intact`));
    const reads = [...tapes.values()].reduce((a, b) => a + b, 0);
    assert.ok(reads >= bodies.length, `${reads} reads: with prefetch 1, a delivery or more per read`);
    assert.ok(tapes.size <= 3, `${tapes.size} tapes for ${reads} reads`);
    assert.strictEqual(heldAtHandOver, reads, 'every tape is held by JS when handed over');
    await conn.close();
  });

  it('an ack leaves before the read that brought the delivery returns', async () => {
    const conn = await amqp.connect(BROKER_URL);
    const ch = await conn.createChannel();
    const { queue } = await ch.assertQueue('', { exclusive: true });
    const session = conn.connection.session;
    const seen = new Promise((resolve) => {
      ch.consume(queue, (msg) => {
        const writesBefore = session.socketWrites;
        ch.ack(msg);
        // Nothing may wait for a later turn: by the time the loop moves on it is written.
        setImmediate(() => resolve({ writesBefore, writesAfter: session.socketWrites, pending: session.pendingOutput }));
      });
    });
    ch.sendToQueue(queue, Buffer.from('ping'));
    const { writesBefore, writesAfter, pending } = await seen;
    assert.strictEqual(pending, 0);
    assert.ok(writesAfter > writesBefore);
    await conn.close();
  });

  it("a delivery's content is copied at most once, whether it came in one frame or many", async () => {
    const conn = await amqp.connect(BROKER_URL);
    const ch = await conn.createChannel();
    const { queue } = await ch.assertQueue('', { exclusive: true });
    const session = conn.connection.session;
    // [size, count]: small bodies arrive several to a read; a large one in many frames.
    for (const [size, count] of [[1024, 40], [448 * 1024, 1]]) {
      const bodies = Array.from({ length: count }, (_, i) => Buffer.alloc(size, i + 1));
      const messages = [];
      let delivered;
      const got = new Promise((resolve) => {
        delivered = resolve;
      });
      const { consumerTag } = await ch.consume(queue, (msg) => {
        messages.push(msg);
        if (messages.length === count) delivered();
      }, { noAck: true });
      const before = session.bytesCopied;
      for (const body of bodies) ch.sendToQueue(queue, body);
      await got;
      const copied = session.bytesCopied - before;
      messages.forEach((msg, i) => assert.ok(msg.content.equals(bodies[i]), `message ${i} intact`));
      assert.ok(copied <= size * count, `${size * count} bytes of content, ${copied} copied: at most once`);
      if (size > 8 * 1024) assert.ok(copied < size / 2, `${copied} copied: most of a large body is read straight into it`);
      // Each content is a Buffer of exactly its size; those that share a backing store (the
      // small bodies of one read) fill it exactly, with nothing else kept alive.
      const stores = new Map();
      for (const { content } of messages) {
        assert.strictEqual(content.length, size);
        stores.set(content.buffer, (stores.get(content.buffer) || 0) + content.length);
      }
      for (const [store, used] of stores) assert.strictEqual(store.byteLength, used, 'the store holds contents only');
      if (size > 8 * 1024) assert.strictEqual(messages[0].content.buffer.byteLength, size, 'a large body owns its Buffer');
      await ch.cancel(consumerTag);
    }
    await conn.close();
  });

  it('a slow reader forces partial writes; publish reports false, then drain, nothing lost', async () => {
    const link = await relay();
    const conn = await amqp.connect(`${BROKER.protocol}//127.0.0.1:${link.port}`);
    const ch = await conn.createChannel();
    const { queue } = await ch.assertQueue('', { exclusive: true });
    for (const { upstream } of link.pairs) upstream.pause(); // stop reading what we send
    const body = Buffer.alloc(64 * 1024, 7);
    let sent = 0;
    while (ch.sendToQueue(queue, body)) sent++;
    sent++; // the one that returned false was queued too
    assert.ok(sent * body.length >= 4 * 1024 * 1024, `false only after 4 MB (${sent} messages)`);
    await nextTurn();
    assert.ok(conn.connection.session.pendingOutput > 0, 'the socket could not take it all');
    const drained = new Promise((resolve) => ch.once('drain', resolve));
    for (const { upstream } of link.pairs) upstream.resume();
    await drained;
    assert.strictEqual(await queuedCount(ch, queue, sent), sent);
    await conn.close();
    await link.close();
  });
});

// A certificate of the tests' local CA (__test__/tls_certificates.js).
describe('TLS', () => {
  let link;

  before(async () => {
    const { key, cert } = tlsCertificates();
    link = await relay((client) => new tls.TLSSocket(client, { isServer: true, key, cert }));
  });

  after(() => link.close());

  // The native socket where it serves amqp:// (an option only tls.connect honours, such as
  // `ciphers`, sends amqps:// there); tls.connect otherwise.
  const paths = [
    ['the native socket', {}, nativeSocketServes],
    ['tls.connect', { ciphers: tls.DEFAULT_CIPHERS }, false],
  ];
  for (const [path, options, native] of paths) {
    it(`connects with the CA given in socketOptions, and messages flow: ${path}`, async () => {
      const conn = await amqp.connect(`amqps://localhost:${link.port}`, { ca: [tlsCertificates().ca], ...options });
      try {
        assert.strictEqual(conn.connection.native, native);
        assert.strictEqual(conn.connection.stream.authorized, true);
        const ch = await conn.createChannel();
        const { queue } = await ch.assertQueue('', { exclusive: true });
        const got = new Promise((resolve) => ch.consume(queue, (msg) => resolve(msg.content.toString()), { noAck: true }));
        ch.sendToQueue(queue, Buffer.from('over tls'));
        assert.strictEqual(await got, 'over tls');
      } finally {
        await conn.close();
      }
    });
  }

  it('refuses a server it cannot verify', async () => {
    await assert.rejects(amqp.connect(`amqps://localhost:${link.port}`), (err) => {
      assert.match(err.code, /SELF_SIGNED|UNABLE_TO_VERIFY|DEPTH_ZERO/);
      return true;
    });
  });
});
