'use strict';
// A list of nodes (issue 25): `connect([url, ...])` in both APIs, without and with recovery,
// against scripted servers standing in for a cluster's nodes (and a port nobody listens on).

const { describe, it } = require('node:test');
const assert = require('node:assert');
const net = require('node:net');
const defs = require('../lib/defs');
const { fakeServer } = require('./fake_server');
const { describeNode } = require('../lib/nodes');

const amqp = require('..');
const amqpCallback = require('../callback_api');

const FORCED = "CONNECTION_FORCED - broker forced connection closure with reason 'shutdown'";

// A node that counts its connections, answers a client's close, and can be stopped as a
// broker node stops: connection.close(320), a reset, and no more listening.
async function node() {
  const peers = [];
  const server = await fakeServer(async (peer) => {
    peer.socket.setNoDelay(true);
    peers.push(peer);
    for (;;) {
      const frame = await peer.expect().catch(() => null);
      if (frame === null) return;
      if (frame.id === defs.ConnectionClose) peer.send(defs.ConnectionCloseOk, {});
      if (frame.id === defs.ChannelOpen) peer.send(defs.ChannelOpenOk, { channelId: Buffer.alloc(0) }, frame.channel);
      peer.conn.flush();
    }
  });
  return {
    url: server.url,
    peers,
    async stop() {
      for (const peer of peers) {
        if (peer.socket.destroyed) continue;
        peer.send(defs.ConnectionClose, { replyCode: 320, replyText: FORCED, classId: 0, methodId: 0 });
        peer.conn.flush();
        peer.socket.resetAndDestroy();
      }
      await server.close();
    },
  };
}

// A port with nobody listening on it.
async function deadUrl() {
  const server = net.createServer();
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return `amqp://127.0.0.1:${port}`;
}

// A node that accepts TCP connections and then says nothing.
async function silentNode() {
  const sockets = new Set();
  const server = net.createServer((s) => sockets.add(s));
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `amqp://127.0.0.1:${server.address().port}`,
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise((resolve) => server.close(resolve));
    },
  };
}

function recordEvents(model) {
  const log = [];
  model.on('connect', (m, which) => log.push(`connect ${which.index}`));
  model.on('disconnect', (err) => log.push(`disconnect ${err.code}`));
  model.on('connect-failed', () => log.push('connect-failed'));
  model.on('reconnect-scheduled', ({ attempt }) => log.push(`reconnect-scheduled ${attempt}`));
  model.on('reconnect-failed', () => log.push('reconnect-failed'));
  return log;
}

describe('a list of nodes, without recovery', () => {
  it('connects to the first node that completes the handshake, skipping a refused one', async () => {
    const dead = await deadUrl();
    const a = await node();
    const b = await node();
    try {
      const model = await amqp.connect([dead, a.url, b.url]);
      assert.strictEqual(a.peers.length, 1);
      assert.strictEqual(b.peers.length, 0);
      await model.close();
    } finally {
      await a.stop();
      await b.stop();
    }
  });

  it('skips a node that times out (each node has its own connect timeout) and one that hangs up in the handshake', async () => {
    const silent = await silentNode();
    const hangsUp = net.createServer((s) => s.destroy());
    await new Promise((resolve) => hangsUp.listen(0, '127.0.0.1', resolve));
    const a = await node();
    try {
      const started = Date.now();
      const model = await amqp.connect([silent.url, `amqp://127.0.0.1:${hangsUp.address().port}`, a.url], { timeout: 200 });
      assert.ok(Date.now() - started < 2000, 'the silent node held the connect up');
      assert.strictEqual(a.peers.length, 1);
      await model.close();
    } finally {
      await silent.close();
      await new Promise((resolve) => hangsUp.close(resolve));
      await a.stop();
    }
  });

  it('fails, when no node connects, with one error that names each node and its failure (credentials left out)', async () => {
    const one = await deadUrl();
    const two = await deadUrl();
    const withSecret = two.replace('amqp://', 'amqp://user:s3cret@');
    const err = await amqp.connect([one, withSecret]).then(
      () => assert.fail('connected'),
      (e) => e,
    );
    assert.ok(err instanceof AggregateError);
    assert.strictEqual(err.code, 'ECONNREFUSED');
    assert.strictEqual(err.errors.length, 2);
    assert.ok(err.errors.every((e) => e.code === 'ECONNREFUSED'));
    assert.strictEqual(
      err.message,
      `Could not connect to any of the 2 nodes (${one}/: ${err.errors[0].message}; ${two}/: ${err.errors[1].message})`,
    );
    assert.ok(!err.message.includes('s3cret'));
  });

  it('takes each URL with its own query options, and URL objects beside strings', async () => {
    const a = await node();
    try {
      const { port } = new URL(a.url);
      const model = await amqp.connect([await deadUrl(), { hostname: '127.0.0.1', port: Number(port), heartbeat: 7 }]);
      assert.strictEqual(model.connection.heartbeat, 7);
      await model.close();
      const other = await amqp.connect([await deadUrl(), `${a.url}?heartbeat=9`], { heartbeat: 3 });
      assert.strictEqual(other.connection.heartbeat, 9);
      await other.close();
    } finally {
      await a.stop();
    }
  });

  it('refuses an empty list, or one with anything but URLs, with a TypeError (both APIs)', async () => {
    await assert.rejects(amqp.connect([]), { name: 'TypeError', message: 'Expected at least one URL in the list of nodes' });
    await assert.rejects(amqp.connect(['amqp://localhost', 5]), { name: 'TypeError', message: 'Expected a URL string or object for node 1; got number' });
    await assert.rejects(amqp.connect([null], { recovery: true }), { name: 'TypeError' });
    // A sparse array: its holes are no URLs either (forEach would skip them).
    await assert.rejects(amqp.connect(new Array(2)), { name: 'TypeError', message: 'Expected a URL string or object for node 0; got undefined' });
    await assert.rejects(amqp.connect(['amqp://localhost', , 'amqp://localhost']), { name: 'TypeError', message: 'Expected a URL string or object for node 1; got undefined' });
    await assert.rejects(amqp.connect(new Array(2 ** 32 - 1), { recovery: true }), { name: 'TypeError' });
    assert.throws(() => amqpCallback.connect(new Array(2), () => {}), { name: 'TypeError' });
    assert.throws(() => amqpCallback.connect([], () => {}), { name: 'TypeError' });
  });

  it('works in the callback API', async () => {
    const a = await node();
    try {
      const model = await new Promise((resolve, reject) =>
        amqpCallback.connect([deadUrlSync(), a.url], {}, (err, m) => (err ? reject(err) : resolve(m))),
      );
      assert.strictEqual(a.peers.length, 1);
      await new Promise((resolve) => model.close(resolve));
    } finally {
      await a.stop();
    }
  });
});

// Port 1 on loopback: nobody listens there unprivileged.
function deadUrlSync() {
  return 'amqp://127.0.0.1:1';
}

describe('a list of nodes, with recovery', () => {
  it('after a node stops, connects to the next one at once (no delay), and on round the list', async () => {
    const nodes = [await node(), await node(), await node()];
    // A connection that lasted initialDelay is followed by the next node at once.
    const model = await amqp.connect(
      nodes.map((n) => n.url),
      { recovery: { initialDelay: 1000 } },
    );
    const log = recordEvents(model);
    try {
      for (const i of [0, 1]) {
        await new Promise((resolve) => setTimeout(resolve, 1100));
        const next = new Promise((resolve) => model.once('connect', resolve));
        const stopped = Date.now();
        await nodes[i].stop();
        await next;
        assert.ok(Date.now() - stopped < 500, `${Date.now() - stopped} ms to the next node`);
        assert.strictEqual(nodes[i + 1].peers.length, 1);
      }
      assert.deepStrictEqual(log, ['disconnect 320', 'reconnect-scheduled 1', 'connect 1', 'disconnect 320', 'reconnect-scheduled 1', 'connect 2']);
    } finally {
      await model.close();
      await nodes[2].stop();
    }
  });

  it('the backoff delay and maxRetries count whole rounds of the list', async () => {
    const urls = [await deadUrl(), await deadUrl(), await deadUrl()];
    const model = await amqp.connect(urls, { recovery: { initialDelay: 1, maxDelay: 1, jitter: 0, maxRetries: 2, waitForConnect: false } });
    const log = recordEvents(model);
    await new Promise((resolve) => model.once('reconnect-failed', resolve));
    const round = ['connect-failed', 'connect-failed', 'connect-failed'];
    assert.deepStrictEqual(log, [...round, 'reconnect-scheduled 1', ...round, 'reconnect-scheduled 2', ...round, 'reconnect-failed']);
  });

  it("starts from preferredNode; the 'connect' event says which node, without credentials", async () => {
    const nodes = [await node(), await node()];
    try {
      const urls = nodes.map((n) => n.url.replace('amqp://', 'amqp://guest:guest@'));
      const model = await amqp.connect(urls, { recovery: { preferredNode: 1, waitForConnect: false } });
      const [, which] = await new Promise((resolve) => model.once('connect', (...args) => resolve(args)));
      assert.deepStrictEqual(which, { index: 1, node: `${nodes[1].url}/` });
      assert.strictEqual(nodes[0].peers.length, 0);
      await model.close();
      await assert.rejects(amqp.connect(urls, { recovery: { preferredNode: 2 } }), { name: 'TypeError' });
    } finally {
      for (const n of nodes) await n.stop();
    }
  });

  it('shuffle spreads first connections over the nodes', async () => {
    const nodes = [await node(), await node(), await node()];
    try {
      for (let i = 0; i < 20; i++) {
        const model = await amqp.connect(nodes.map((n) => n.url), { recovery: { shuffle: true } });
        await model.close();
      }
      const used = nodes.filter((n) => n.peers.length > 0).length;
      assert.ok(used >= 2, `20 shuffled connections all went to one node`);
    } finally {
      for (const n of nodes) await n.stop();
    }
  });

  it('works in the callback API', async () => {
    const a = await node();
    try {
      const model = await new Promise((resolve, reject) =>
        amqpCallback.connect([deadUrlSync(), a.url], { recovery: { initialDelay: 1 } }, (err, m) => (err ? reject(err) : resolve(m))),
      );
      assert.strictEqual(a.peers.length, 1);
      await new Promise((resolve) => model.close(resolve));
    } finally {
      await a.stop();
    }
  });

  it('connections dropped as soon as made wait initialDelay before the next node, not a tight loop', async () => {
    const flapping = [await node(), await node()];
    // Each node closes every connection (320) just after it is open.
    for (const n of flapping) {
      const push = n.peers.push.bind(n.peers);
      n.peers.push = (peer) => {
        setTimeout(() => {
          peer.send(defs.ConnectionClose, { replyCode: 320, replyText: FORCED, classId: 0, methodId: 0 });
          peer.conn.flush();
        }, 10);
        return push(peer);
      };
    }
    const model = await amqp.connect(flapping.map((n) => n.url), { recovery: { initialDelay: 100, maxDelay: 100, jitter: 0 } });
    const log = recordEvents(model);
    await new Promise((resolve) => setTimeout(resolve, 600));
    await model.close();
    for (const n of flapping) await n.stop();
    const connections = flapping.reduce((sum, n) => sum + n.peers.length, 0);
    assert.ok(connections <= 8, `${connections} connections in 600 ms`);
    assert.ok(log.includes('reconnect-scheduled 1'), `the delay was scheduled: ${log}`);
  });

  it('a connection closed before it is adopted (as soon as opened, or during setup) is a failed attempt, and the next node is tried', async () => {
    const closing = await node();
    const push = closing.peers.push.bind(closing.peers);
    closing.peers.push = (peer) => {
      peer.send(defs.ConnectionClose, { replyCode: 320, replyText: FORCED, classId: 0, methodId: 0 });
      peer.conn.flush();
      return push(peer);
    };
    const good = await node();
    const setup = () => new Promise((resolve) => setTimeout(resolve, 50));
    const model = await amqp.connect([closing.url, good.url], { recovery: { setup, initialDelay: 1 } });
    try {
      assert.strictEqual(good.peers.length, 1, 'recovery went on to the good node');
      assert.strictEqual(typeof model.counters().framesSent, 'number');
    } finally {
      await model.close();
      await closing.stop();
      await good.stop();
    }
  });

  it('maxRetries means the same for a list as for one URL: the rounds after a disconnect, 0 giving up at once', async () => {
    for (const count of [1, 2]) {
      const nodes = [];
      for (let i = 0; i < count; i++) nodes.push(await node());
      const model = await amqp.connect(count === 1 ? nodes[0].url : nodes.map((n) => n.url), { recovery: { initialDelay: 1, maxRetries: 0 } });
      const log = recordEvents(model);
      const gaveUp = new Promise((resolve) => model.once('reconnect-failed', resolve));
      await new Promise((resolve) => setTimeout(resolve, 20)); // past initialDelay
      await nodes[0].stop();
      await gaveUp;
      assert.deepStrictEqual(log, ['disconnect 320', 'reconnect-failed'], `${count} node(s)`);
      if (count === 2) assert.strictEqual(nodes[1].peers.length, 0, 'the other node was not tried');
      for (const n of nodes.slice(1)) await n.stop();
    }
  });

  it('a node that accepts and never speaks is given up after the default handshake deadline, with a list and with recovery', { timeout: 60_000 }, async () => {
    const silent = await silentNode();
    const a = await node();
    try {
      const [listed, recovering] = await Promise.all([
        amqp.connect([silent.url, a.url]),
        amqp.connect([silent.url, a.url], { recovery: { maxRetries: 0 } }),
      ]);
      assert.strictEqual(a.peers.length, 2, 'both went on to the node that speaks');
      await listed.close();
      await recovering.close();
    } finally {
      await silent.close();
      await a.stop();
    }
  });

  it('a single URL keeps its delay before a retry, as amqplib 2.3.1', async () => {
    const model = await amqp.connect(deadUrlSync(), { recovery: { initialDelay: 1, jitter: 0, maxRetries: 1, waitForConnect: false } });
    const log = recordEvents(model);
    await new Promise((resolve) => model.once('reconnect-failed', resolve));
    assert.deepStrictEqual(log, ['connect-failed', 'reconnect-scheduled 1', 'connect-failed', 'reconnect-failed']);
  });
});

describe('describeNode', () => {
  it('names a node by protocol, host, port and vhost only', () => {
    assert.strictEqual(describeNode('amqps://u:p@host.example:5671/vh?heartbeat=1'), 'amqps://host.example:5671/vh');
    assert.strictEqual(describeNode({ protocol: 'amqp', hostname: 'h', username: 'u', password: 'p' }), 'amqp://h:5672/');
    assert.strictEqual(describeNode('not a url'), 'a URL that does not parse');
    assert.strictEqual(describeNode('amqp://localhost'), 'amqp://localhost:5672/');
    assert.strictEqual(describeNode('amqps://[::1]/v'), 'amqps://[::1]:5671/v');
    for (const none of [undefined, null, '']) assert.strictEqual(describeNode(none), 'amqp://localhost:5672/');
  });
});
