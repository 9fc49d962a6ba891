'use strict';

// lib/connect.js without a broker:
//  - what we derive from URLs and socket options (socket settings and
//    handshake fields) compared with what amqplib 2.3.1's own connect
//    derives from the same input, captured by stubbing net/tls.connect and
//    amqplib's Connection#open;
//  - the open sequence (socket tweaks, timeout, error reporting) against
//    stub sockets and a stub Connection.

const { describe, it, before, after } = require('node:test');
const assert = require('node:assert');
const path = require('node:path');
const net = require('node:net');
const { NativeSocket } = require('../lib/native_socket');
const tls = require('node:tls');
const Module = require('node:module');
const { PassThrough } = require('node:stream');

const { connect, prepareConnect, credentialsFromUrl, CLIENT_PROPERTIES } = require('../lib/connect');
const credentials = require('../lib/credentials');

const amqplibDir = path.dirname(require.resolve('amqplib-latest'));
const refConnect = require(path.join(amqplibDir, 'lib/connect.js'));
const RefConnection = require(path.join(amqplibDir, 'lib/connection.js')).Connection;
const refCredentials = require(path.join(amqplibDir, 'lib/credentials.js'));

// Client properties that name the library itself, and so differ on purpose.
const IDENTITY_KEYS = ['product', 'version', 'information'];

// --- stubs ---

// A duplex stream standing in for a socket, recording the socket-specific
// calls made on it.
function fakeSocket() {
  const sock = new PassThrough();
  sock.calls = [];
  sock.setNoDelay = (v) => sock.calls.push(['setNoDelay', v]);
  sock.setKeepAlive = (on, delay) => sock.calls.push(['setKeepAlive', on, delay]);
  sock.setTimeout = (ms, handler) => {
    sock.calls.push(['setTimeout', ms]);
    if (handler) sock.timeoutHandler = handler;
  };
  const end = sock.end.bind(sock);
  sock.end = (...args) => {
    sock.calls.push(['end']);
    return end(...args);
  };
  const destroy = sock.destroy.bind(sock);
  sock.destroy = (...args) => {
    sock.calls.push(['destroy']);
    return destroy(...args);
  };
  return sock;
}

// Replace the plain TCP transports (net.connect for amqplib, our native
// socket's connect for us) and tls.connect for the duration of `fn`. Each
// call is recorded; `behaviour(sock, onConnect)` decides what the socket does.
async function withStubbedTransport(behaviour, fn) {
  const realNet = net.connect;
  const realNative = NativeSocket.connect;
  const realTls = tls.connect;
  const opened = [];
  const stub = (kind) => (options, onConnect) => {
    const sock = fakeSocket();
    opened.push({ kind, options, sock });
    behaviour(sock, onConnect);
    return sock;
  };
  net.connect = stub('net');
  // The native socket stands in for net.connect, and for tls.connect with amqps://.
  NativeSocket.connect = (options, onConnect, protocol = 'amqp:') => stub(protocol === 'amqps:' ? 'tls' : 'net')(options, onConnect);
  tls.connect = stub('tls');
  try {
    return await fn(opened);
  } finally {
    net.connect = realNet;
    NativeSocket.connect = realNative;
    tls.connect = realTls;
  }
}

const connectSoon = (sock, onConnect) => setImmediate(onConnect);

// What amqplib's connect does with (url, socketOptions): the transport,
// the socket options, and the fields handed to Connection#open.
async function amqplibPlan(url, socketOptions) {
  const realOpen = RefConnection.prototype.open;
  try {
    return await withStubbedTransport(connectSoon, (opened) => {
      return new Promise((resolve, reject) => {
        RefConnection.prototype.open = (fields) => {
          const { kind, options } = opened[0];
          resolve({ kind, options, fields });
        };
        try {
          refConnect.connect(url, socketOptions, () => {});
        } catch (err) {
          reject(err);
        }
      });
    });
  } finally {
    RefConnection.prototype.open = realOpen;
  }
}

function ourPlan(url, socketOptions) {
  const plan = prepareConnect(url, socketOptions);
  const kind = { 'amqp:': 'net', 'amqps:': 'tls' }[plan.protocol];
  if (!kind) throw new Error(`Expected amqp: or amqps: as the protocol; got ${plan.protocol}`);
  return { kind, options: plan.sockopts, fields: plan.fields };
}

// Flatten inherited entries (amqplib layers client properties with a
// prototype) and drop the library's own identity.
function comparableClientProperties(props) {
  const out = {};
  for (const key in props) if (!IDENTITY_KEYS.includes(key)) out[key] = props[key];
  return out;
}

function withoutClientProperties(fields) {
  const { clientProperties, ...rest } = fields;
  return rest;
}

function sameNumber(a, b) {
  return Number.isNaN(a) ? Number.isNaN(b) : a === b;
}

async function assertSamePlan(url, socketOptions) {
  const label = `connect(${JSON.stringify(url)}, ${JSON.stringify(socketOptions)})`;
  let theirs;
  let theirError;
  try {
    theirs = await amqplibPlan(url, socketOptions);
  } catch (err) {
    theirError = err;
  }
  if (theirError) {
    assert.throws(() => ourPlan(url, socketOptions), { message: theirError.message }, label);
    return;
  }
  const ours = ourPlan(url, socketOptions);
  assert.strictEqual(ours.kind, theirs.kind, `${label}: transport`);
  assert.deepStrictEqual(ours.options, theirs.options, `${label}: socket options`);

  const a = withoutClientProperties(ours.fields);
  const b = withoutClientProperties(theirs.fields);
  for (const key of ['channelMax', 'frameMax', 'heartbeat']) {
    assert.ok(sameNumber(a[key], b[key]), `${label}: ${key} ${a[key]} vs ${b[key]}`);
    delete a[key];
    delete b[key];
  }
  assert.deepStrictEqual(a, b, `${label}: handshake fields`);
  assert.deepStrictEqual(
    comparableClientProperties(ours.fields.clientProperties),
    comparableClientProperties(theirs.fields.clientProperties),
    `${label}: client properties`,
  );
}

// --- tests ---

const STRING_URLS = [
  undefined,
  '',
  'amqp://localhost',
  'amqp://localhost/',
  'amqp://localhost:5673',
  'amqp://localhost:0',
  'amqp://localhost:notaport',
  'amqps://broker.example.com',
  'amqps://broker.example.com:10000/vhost',
  'amqps://10.1.2.3',
  'amqps://[::1]:5671',
  'amqp://[fe80::1]',
  'amqp://user:pass@localhost',
  'amqp://:password@localhost',
  'amqp://username:@localhost',
  'amqp://user%3Aname:pass%3Aword@localhost',
  'amqp://user:p%40ssword@localhost',
  'amqp://user:passw%23rd@localhost',
  'amqp://user:pass%25word@localhost',
  'amqp://user%61:%61pass@localhost',
  'amqp://us%C3%A9r:p%C3%A4ss@localhost', // non-ASCII, decoded as amqplib does
  'amqp://localhost/%2F',
  'amqp://localhost/%2f',
  'amqp://localhost/v%2Fhost',
  'amqp://localhost/my%20vhost',
  'amqp://localhost/a+b',
  'amqp://localhost//double',
  'amqp://localhost?heartbeat=30',
  'amqp://localhost?heartbeat=0',
  'amqp://localhost?heartbeat=',
  'amqp://localhost?heartbeat=NOT_A_NUMBER',
  'amqp://localhost?frameMax=NOT_A_NUMBER',
  'amqp://localhost?frameMax=4096&channelMax=10&locale=de_DE',
  'amqp://localhost?frameMax=0x1000',
  'amqp://localhost?heartbeat=10&heartbeat=20',
  'amqp://localhost?locale=',
  'amqp://localhost/vh?frameMax=8192&unknown=1#fragment',
  'blurble',
  'http://localhost',
  'amqp:localhost',
  'AMQP://LOCALHOST',
];

const OBJECT_URLS = [
  {},
  { protocol: 'amqp', hostname: 'localhost' },
  { protocol: 'amqps', hostname: 'broker.example.com' },
  { protocol: 'amqps', hostname: '127.0.0.1', port: 10000 },
  { protocol: 'amqps:' },
  { protocol: 'http', hostname: 'localhost' },
  { hostname: 'localhost', port: '5673' },
  { username: 'u' },
  { password: 'p' },
  { username: 'u', password: 'p' },
  { username: '', password: '' },
  { vhost: 'v%2Fhost' },
  { vhost: '' },
  { heartbeat: 20 },
  { heartbeat: 0 },
  { heartbeat: null },
  { heartbeat: '15' },
  { frameMax: 8192, channelMax: 5, locale: 'fr_FR' },
  { frameMax: 'big' },
];

const SOCKET_OPTIONS = [
  undefined,
  null,
  {},
  { noDelay: true, keepAlive: true, keepAliveDelay: 1000, timeout: 500 },
  { servername: 'explicit.example.com' },
  { credentials: credentials.external() },
  { credentials: credentials.amqplain('guest', 'guest') },
  { clientProperties: { connection_name: 'my-app' } },
  { clientProperties: { product: 'mine', capabilities: { publisher_confirms: false } } },
  { cert: 'CERT', key: 'KEY', ca: ['CA'], passphrase: 'x', rejectUnauthorized: false },
];

describe('connect: URL and option handling matches amqplib 2.3.1', () => {
  it('string URLs', async () => {
    for (const url of STRING_URLS) await assertSamePlan(url, {});
  });

  it('object URLs', async () => {
    for (const url of OBJECT_URLS) await assertSamePlan(url, {});
  });

  it('socket options, with string and object URLs', async () => {
    for (const socketOptions of SOCKET_OPTIONS) {
      for (const url of ['amqp://localhost', 'amqps://host.example.com:1234/vh', { protocol: 'amqps', hostname: 'h' }]) {
        await assertSamePlan(url, socketOptions);
      }
    }
  });

  it('credentialsFromUrl', () => {
    for (const url of STRING_URLS) {
      let parts;
      try {
        parts = new URL(url);
      } catch {
        parts = {};
      }
      const ours = credentialsFromUrl(parts);
      const theirs = refConnect.credentialsFromUrl(parts);
      assert.strictEqual(ours.mechanism, theirs.mechanism);
      assert.strictEqual(ours.username, theirs.username, url);
      assert.strictEqual(ours.password, theirs.password, url);
      assert.deepStrictEqual(ours.response(), theirs.response(), url);
    }
  });

  it('credentials factories have amqplib’s shapes and responses', () => {
    for (const name of ['plain', 'amqplain']) {
      for (const [user, pass] of [['guest', 'guest'], ['', ''], ['ü', 'p:w@#'], [undefined, undefined]]) {
        const ours = credentials[name](user, pass);
        const theirs = refCredentials[name](user, pass);
        assert.deepStrictEqual(Object.keys(ours), Object.keys(theirs));
        assert.strictEqual(ours.mechanism, theirs.mechanism);
        assert.deepStrictEqual(ours.response(), theirs.response(), `${name}(${user}, ${pass})`);
      }
    }
    assert.deepStrictEqual(credentials.external().response(), refCredentials.external().response());
    assert.strictEqual(credentials.external().mechanism, 'EXTERNAL');
  });
});

describe('connect: details', () => {
  it('defaults: localhost, 5672, vhost /, guest/guest, frameMax 131072, no heartbeat preference', () => {
    const plan = prepareConnect();
    assert.strictEqual(plan.protocol, 'amqp:');
    assert.strictEqual(plan.sockopts.host, 'localhost');
    assert.strictEqual(plan.sockopts.port, 5672);
    assert.strictEqual(plan.fields.virtualHost, '/');
    assert.strictEqual(plan.fields.mechanism, 'PLAIN');
    assert.deepStrictEqual(plan.fields.response, Buffer.from('\0guest\0guest'));
    assert.strictEqual(plan.fields.frameMax, 131072);
    assert.strictEqual(plan.fields.channelMax, 0);
    assert.strictEqual(plan.fields.heartbeat, null);
    assert.strictEqual(plan.fields.locale, 'en_US');
  });

  it('noDelay is on unless asked off (amqplib leaves Nagle on: see the README)', () => {
    assert.strictEqual(prepareConnect().noDelay, true);
    assert.strictEqual(prepareConnect('amqp://localhost', { noDelay: false }).noDelay, false);
    assert.strictEqual(prepareConnect('amqp://localhost', { noDelay: null }).noDelay, false);
    assert.strictEqual(prepareConnect('amqp://localhost', { noDelay: 1 }).noDelay, true);
  });

  it('client properties: ours, with the user’s laid over them key by key', () => {
    const props = prepareConnect('amqp://localhost', { clientProperties: { connection_name: 'app' } }).fields
      .clientProperties;
    assert.strictEqual(props.connection_name, 'app');
    assert.strictEqual(props.product, CLIENT_PROPERTIES.product);
    assert.deepStrictEqual(props.capabilities, CLIENT_PROPERTIES.capabilities);
    assert.strictEqual(props.capabilities['basic.nack'], true);
    // own properties only, so any encoder sees them all
    assert.deepStrictEqual(Object.keys(props).sort(), [...Object.keys(CLIENT_PROPERTIES), 'connection_name'].sort());
  });

  it('does not modify the caller’s socket options', () => {
    const socketOptions = Object.freeze({ noDelay: true, clientProperties: Object.freeze({ a: 1 }) });
    const plan = prepareConnect('amqps://host.example.com', socketOptions);
    assert.notStrictEqual(plan.sockopts, socketOptions);
    assert.strictEqual(plan.sockopts.servername, 'host.example.com');
  });

  it('throws synchronously for a protocol other than amqp: or amqps:', () => {
    assert.throws(() => connect('blurble', {}, () => {}), /Expected amqp: or amqps: as the protocol; got $/);
    assert.throws(() => connect('http://localhost', {}, () => {}), /Expected amqp: or amqps: as the protocol; got http:/);
  });

  it('reports a refused connection through the callback', async () => {
    const server = net.createServer();
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address();
    await new Promise((resolve) => server.close(resolve)); // nothing listens there now
    const err = await new Promise((resolve) => connect(`amqp://127.0.0.1:${port}`, {}, resolve));
    assert.strictEqual(err.code, 'ECONNREFUSED');
  });
});

describe('connect: open sequence (stub socket and Connection)', () => {
  // Make `require('./connection')` inside lib/connect.js load a stub,
  // whether or not the real lib/connection.js exists.
  const connectPath = require.resolve('../lib/connect');
  const stubPath = path.join(__dirname, '__stub_connection__.js');
  const realResolve = Module._resolveFilename;
  let openBehaviour = null;

  class StubConnection {
    constructor(sock) {
      this.sock = sock;
    }

    open(fields, cb) {
      this.fields = fields;
      openBehaviour(this, cb);
    }
  }

  before(() => {
    Module._resolveFilename = function (request, parent, ...rest) {
      if (request === './connection' && parent && parent.filename === connectPath) return stubPath;
      return realResolve.call(this, request, parent, ...rest);
    };
    const stub = new Module(stubPath, module);
    stub.filename = stubPath;
    stub.loaded = true;
    stub.exports = { Connection: StubConnection };
    require.cache[stubPath] = stub;
  });

  after(() => {
    Module._resolveFilename = realResolve;
    delete require.cache[stubPath];
  });

  // The stubs act in setImmediate callbacks, a few deep: the results are in after that many
  // turns of the event loop however slow the machine (a wall-clock wait is not, under qemu).
  function run(url, socketOptions, behaviour, { connectBehaviour = connectSoon, turns = 10 } = {}) {
    openBehaviour = behaviour;
    return withStubbedTransport(connectBehaviour, async (opened) => {
      const results = [];
      connect(url, socketOptions, (...args) => results.push(args));
      for (let turn = 0; turn < turns; turn++) await new Promise(setImmediate);
      return { results, opened };
    });
  }

  it('hands the socket and handshake fields to Connection#open, then calls back once', async () => {
    const { results, opened } = await run(
      'amqp://u:p@h:1/v?heartbeat=5',
      { noDelay: true, keepAlive: true, keepAliveDelay: 7 },
      (conn, cb) => setImmediate(() => cb(null, {})),
    );
    assert.strictEqual(opened.length, 1);
    assert.strictEqual(opened[0].kind, 'net');
    assert.strictEqual(results.length, 1);
    const [err, conn] = results[0];
    assert.strictEqual(err, null);
    assert.ok(conn instanceof StubConnection);
    assert.strictEqual(conn.sock, opened[0].sock);
    assert.deepStrictEqual(conn.fields, prepareConnect('amqp://u:p@h:1/v?heartbeat=5', {}).fields);
    assert.deepStrictEqual(opened[0].sock.calls, [
      ['setNoDelay', true],
      ['setKeepAlive', true, 7],
    ]);
  });

  it('uses tls for amqps:', async () => {
    const { results, opened } = await run('amqps://h.example.com', { ca: 'x' }, (conn, cb) => cb(null, {}));
    assert.strictEqual(opened[0].kind, 'tls');
    assert.strictEqual(opened[0].options.servername, 'h.example.com');
    assert.strictEqual(opened[0].options.port, 5671);
    assert.strictEqual(opened[0].options.ca, 'x');
    assert.strictEqual(results[0][0], null);
  });

  it('closes the socket when the handshake fails', async () => {
    const failure = new Error('Handshake terminated by server: 403 (ACCESS-REFUSED)');
    const { results, opened } = await run('amqp://h', {}, (conn, cb) => cb(failure));
    assert.deepStrictEqual(results, [[failure]]);
    const calls = opened[0].sock.calls.map((c) => c[0]);
    assert.ok(calls.includes('end') && calls.includes('destroy'));
  });

  it('with a timeout: cancels it once open', async () => {
    const { results, opened } = await run('amqp://h', { timeout: 1000 }, (conn, cb) => cb(null, {}));
    assert.strictEqual(results[0][0], null);
    assert.deepStrictEqual(
      opened[0].sock.calls.filter((c) => c[0] === 'setTimeout'),
      [
        ['setTimeout', 1000],
        ['setTimeout', 0],
      ],
    );
  });

  it('with a timeout: reports ETIMEDOUT once, even if the handshake fails afterwards', async () => {
    let openCb;
    const { results, opened } = await run('amqp://h', { timeout: 50 }, (conn, cb) => {
      openCb = cb;
      setImmediate(() => conn.sock.timeoutHandler());
    });
    openCb(new Error('socket closed'));
    assert.strictEqual(results.length, 1);
    assert.match(results[0][0].message, /connect ETIMEDOUT/);
    const calls = opened[0].sock.calls.map((c) => c[0]);
    assert.ok(calls.includes('end') && calls.includes('destroy'));
  });

  it('reports socket errors only until connected', async () => {
    const early = new Error('boom');
    const before = await run('amqp://h', {}, () => {}, {
      connectBehaviour: (sock) => setImmediate(() => sock.emit('error', early)),
    });
    assert.deepStrictEqual(before.results, [[early]]);

    const later = await run('amqp://h', {}, (conn) => {
      conn.sock.on('error', () => {}); // the Connection's business now
      setImmediate(() => conn.sock.emit('error', new Error('late')));
    });
    assert.deepStrictEqual(later.results, []);
  });
});
