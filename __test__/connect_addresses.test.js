'use strict';
// Connecting as net.connect does: a host name with several addresses (localhost is ::1 and
// 127.0.0.1 on most machines) connects when only one of them answers, and socket options
// that only net.connect implements are honoured. The broker listens on IPv4 only here, so
// ::1 is refused and 127.0.0.1 answers. Against this package and amqplib 2.3.1.

const { describe, it, after } = require('node:test');
const assert = require('node:assert');
const dns = require('node:dns');
const net = require('node:net');
const { AMQP_URL } = require('./helpers');
const { defaultPort } = require('../lib/nodes');

const broker = new URL(AMQP_URL);
// The broker's own scheme and port, with made-up host names. Over TLS (amqps://) the
// certificate names the broker's host, which is then the name checked.
const BROKER_PORT = broker.port || defaultPort(broker.protocol);
const brokerAt = (host) => `${broker.protocol}//guest:guest@${host}:${BROKER_PORT}`;
const TLS_NAME = broker.protocol === 'amqps:' ? { servername: broker.hostname } : {};
const LIBRARIES = [
  ['amqplib-rs', require('../index')],
  ['amqplib 2.3.1', require('amqplib-latest')],
];

// A lookup that answers ::1 first, then 127.0.0.1, in either of dns.lookup's two shapes.
function ipv6First(hostname, options, callback) {
  const cb = typeof options === 'function' ? options : callback;
  const all = [
    { address: '::1', family: 6 },
    { address: '127.0.0.1', family: 4 },
  ];
  if (options && options.all) process.nextTick(cb, null, all);
  else process.nextTick(cb, null, all[0].address, all[0].family);
}

// A port on loopback where nothing listens.
async function closedPort() {
  const server = net.createServer();
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return port;
}

for (const [name, amqp] of LIBRARIES) {
  describe(`connecting to a host with several addresses: ${name}`, () => {
    it('a lookup option answering ::1 first: connects to the address that answers', async () => {
      const conn = await amqp.connect(brokerAt('somewhere.invalid'), { lookup: ipv6First, ...TLS_NAME });
      await conn.close();
    });

    it('when no address answers, the error says so (code ECONNREFUSED)', async () => {
      const port = await closedPort();
      await assert.rejects(amqp.connect(`amqp://somewhere.invalid:${port}`, { lookup: ipv6First }), (err) => {
        assert.strictEqual(err.code, 'ECONNREFUSED');
        assert.ok(err instanceof AggregateError, `an AggregateError of both attempts, got ${err.constructor.name}`);
        assert.strictEqual(err.errors.length, 2);
        return true;
      });
    });
  });
}

describe('the native socket tries each address of a host in turn', () => {
  const amqp = require('../index');
  const { NativeSocket } = require('../lib/native_socket');
  const realLookup = dns.lookup;
  after(() => {
    dns.lookup = realLookup;
  });

  it('a name that resolves to ::1 then 127.0.0.1 connects through the native socket', { skip: !NativeSocket.serves({}) && 'no native socket on this platform, or AMQPLIB_RS_TRANSPORT=stream' }, async () => {
    dns.lookup = (hostname, options, callback) => (hostname === 'two-addresses.test' ? ipv6First(hostname, options, callback) : realLookup(hostname, options, callback));
    const conn = await amqp.connect(brokerAt('two-addresses.test'), TLS_NAME);
    assert.strictEqual(conn.connection.native, true);
    assert.strictEqual(conn.connection.stream.address, '127.0.0.1');
    await conn.close();
    const port = await closedPort();
    await assert.rejects(amqp.connect(`amqp://two-addresses.test:${port}`), (err) => {
      assert.ok(err instanceof AggregateError);
      assert.strictEqual(err.code, 'ECONNREFUSED');
      assert.deepStrictEqual(
        err.errors.map((e) => e.message),
        [`connect ECONNREFUSED ::1:${port}`, `connect ECONNREFUSED 127.0.0.1:${port}`],
      );
      return true;
    });
  });

  it('a port given as a string connects, and odd ports and timeouts are refused as amqplib refuses them', async () => {
    const original = require('amqplib-latest');
    const conn = await amqp.connect({ protocol: broker.protocol.slice(0, -1), hostname: broker.hostname, port: String(BROKER_PORT) });
    await conn.close();
    for (const target of [
      [{ protocol: 'amqp', hostname: '127.0.0.1', port: 2 ** 32 + 5672 }, undefined],
      [{ protocol: 'amqp', hostname: '127.0.0.1', port: Symbol('p') }, undefined],
      [AMQP_URL, { timeout: Symbol('t') }],
      [AMQP_URL, { timeout: 1n }],
    ]) {
      const outcome = (lib) => lib.connect(...target).then((c) => c.close().then(() => 'connected'), (err) => `${err.name} ${err.code}`);
      assert.strictEqual(await outcome(amqp), await outcome(original), String(target[0].port ?? target[1].timeout?.toString()));
    }
  });

  it('options only net.connect implements take net.connect', () => {
    assert.strictEqual(NativeSocket.serves({ lookup: ipv6First }), false);
    assert.strictEqual(NativeSocket.serves({ localAddress: '127.0.0.1' }), false);
    assert.strictEqual(NativeSocket.serves({ noDelay: true, keepAlive: true, family: 4 }), NativeSocket.serves({}));
    // Ports and timeouts net.connect would refuse: it refuses them, as amqplib reports them.
    for (const port of ['x', 70000, -1, 1.5, 2 ** 32 + 5672, Symbol('p'), {}]) assert.strictEqual(NativeSocket.serves({ port }), false);
    for (const timeout of [Symbol('t'), 1n, '1.5', Infinity, 2 ** 32, {}]) assert.strictEqual(NativeSocket.serves({ timeout }), false);
  });
});
