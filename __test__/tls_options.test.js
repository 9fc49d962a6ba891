'use strict';
// Node's TLS options on amqps://, on the path this run takes (TLS inside the native socket by
// default where it serves; tls.connect when npm test runs the JS tests again with
// AMQPLIB_RS_TRANSPORT=stream), each against amqplib 2.3.1's outcome for the same options: a
// scripted server with a certificate of the tests' local CA (__test__/tls_certificates.js).

const { describe, it, before, after } = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const tls = require('node:tls');
const { execFile } = require('node:child_process');
const { promisify } = require('node:util');
const defs = require('../lib/defs');
const { NativeSocket } = require('../lib/native_socket');
const { fakeServer } = require('./fake_server');
const { tlsCertificates } = require('./tls_certificates');

const ours = require('..');
const latest = require('amqplib-latest');

// Whether amqps:// takes the native socket in this run when its options allow.
const nativeTls = NativeSocket.serves({}, 'amqps:');

// A server that lets the client open and close, on TLS `options` over the tests' defaults.
function server(options = true) {
  return fakeServer(async (peer) => {
    for (;;) {
      const frame = await peer.expect().catch(() => null);
      if (frame === null) return;
      if (frame.id === defs.ConnectionClose) {
        peer.send(defs.ConnectionCloseOk, {});
        peer.conn.flush();
        return;
      }
    }
  }, { tls: options });
}

// How a connect with `options` ends: opened (with what the socket says of the server), or
// refused (the error's code and words).
async function outcome(amqp, url, options) {
  try {
    const conn = await amqp.connect(url, options);
    const { authorized } = conn.connection.stream;
    const native = conn.connection.native === true;
    await conn.close();
    return { opened: true, authorized, native };
  } catch (err) {
    return { refused: err.code || err.message, message: err.message };
  }
}

// Ours and amqplib's, with the transport ours took left aside.
async function both(url, options) {
  const mine = await outcome(ours, url, options);
  const theirs = await outcome(latest, url, options);
  const { native, ...compared } = mine;
  delete theirs.native;
  return { mine: compared, theirs, native };
}

describe('TLS options: the outcome amqplib 2.3.1 has', () => {
  let plain;
  let certs;
  before(async () => {
    plain = await server();
    certs = tlsCertificates();
  });
  after(() => plain.close());

  it('the CA given as `ca`: opened, authorized, on the native socket where it serves', async () => {
    const { mine, theirs, native } = await both(plain.url, { ca: certs.ca });
    assert.deepStrictEqual(mine, { opened: true, authorized: true });
    assert.deepStrictEqual(mine, theirs);
    assert.strictEqual(native, nativeTls);
  });

  it('Node’s own roots, which lack the local CA: refused with Node’s code and words', async () => {
    const { mine, theirs } = await both(plain.url, {});
    assert.ok(mine.refused, JSON.stringify(mine));
    assert.deepStrictEqual(mine, theirs);
  });

  it('a CA of the same name as the server’s but another key: refused as amqplib is', async () => {
    const { mine, theirs } = await both(plain.url, { ca: certs.otherCa });
    assert.ok(mine.refused, JSON.stringify(mine));
    assert.deepStrictEqual(mine, theirs);
  });

  it('a servername the certificate does not name: ERR_TLS_CERT_ALTNAME_INVALID, Node’s words', async () => {
    const { mine, theirs } = await both(plain.url, { ca: certs.ca, servername: 'example.com' });
    assert.strictEqual(mine.refused, 'ERR_TLS_CERT_ALTNAME_INVALID');
    assert.deepStrictEqual(mine, theirs);
  });

  it('a server that hangs up during the TLS handshake (a node going down as the client connects): refused at once, Node’s code and words', async () => {
    const net = require('node:net');
    const hangUp = net.createServer((socket) => socket.once('data', () => socket.end()));
    await new Promise((resolve) => hangUp.listen(0, '127.0.0.1', resolve));
    try {
      const url = `amqps://guest:guest@127.0.0.1:${hangUp.address().port}`;
      // Within the connect timeout: the native socket waited for ever, the timeout with it.
      const { mine, theirs } = await both(url, { ca: certs.ca, servername: 'localhost', timeout: 5000 });
      assert.deepStrictEqual(mine, { refused: 'ECONNRESET', message: 'Client network socket disconnected before secure TLS connection was established' });
      assert.deepStrictEqual(mine, theirs);
    } finally {
      hangUp.close();
    }
  });

  it('rejectUnauthorized: false: opened with an unverified server, not authorized', async () => {
    const { mine, theirs } = await both(plain.url, { rejectUnauthorized: false, servername: 'example.com' });
    assert.deepStrictEqual(mine, { opened: true, authorized: false });
    assert.deepStrictEqual(mine, theirs);
  });

  it('rejectUnauthorized: false, a chain that does not verify and the right name: opened, not authorized, Node’s authorizationError', async () => {
    const seen = [];
    for (const amqp of [ours, latest]) {
      const conn = await amqp.connect(plain.url, { rejectUnauthorized: false });
      const { authorized, authorizationError } = conn.connection.stream;
      seen.push({ authorized, authorizationError });
      await conn.close();
    }
    assert.strictEqual(seen[0].authorized, false, JSON.stringify(seen));
    assert.deepStrictEqual(seen[0], seen[1]);
  });

  it('checkServerIdentity: called with the name and the certificate; its error refuses, its silence accepts', async () => {
    const calls = new Map([[ours, []], [latest, []]]);
    for (const amqp of [ours, latest]) {
      const checkServerIdentity = (host, cert) => {
        calls.get(amqp).push([host, cert.subjectaltname, cert.subject.CN, cert.issuer.CN, Buffer.isBuffer(cert.raw)]);
        return host === 'refused.example' ? new Error('not this one') : undefined;
      };
      const refused = await outcome(amqp, plain.url, { ca: certs.ca, servername: 'refused.example', checkServerIdentity });
      assert.deepStrictEqual(refused, { refused: 'not this one', message: 'not this one' });
      const accepted = await outcome(amqp, plain.url, { ca: certs.ca, servername: 'accepted.example', checkServerIdentity });
      assert.strictEqual(accepted.opened, true);
    }
    assert.deepStrictEqual(calls.get(ours), calls.get(latest));
    assert.deepStrictEqual(calls.get(ours)[0].slice(0, 4), ['refused.example', 'DNS:localhost, IP Address:127.0.0.1', 'localhost', 'amqplib-rs test CA']);
  });

  it('minVersion and maxVersion: a server of TLS 1.2 only is refused at TLSv1.3 and taken at TLSv1.2', async () => {
    const old = await server({ maxVersion: 'TLSv1.2' });
    try {
      const refused = await both(old.url, { ca: certs.ca, minVersion: 'TLSv1.3' });
      assert.ok(refused.mine.refused && refused.theirs.refused, JSON.stringify(refused));
      const taken = await both(old.url, { ca: certs.ca, maxVersion: 'TLSv1.2' });
      assert.deepStrictEqual(taken.mine, { opened: true, authorized: true });
      assert.deepStrictEqual(taken.mine, taken.theirs);
      assert.strictEqual(taken.native, nativeTls);
    } finally {
      await old.close();
    }
  });

  it('a client certificate (cert and key) for a server that asks for one; without it, refused', async () => {
    const asking = await server({ requestCert: true, rejectUnauthorized: true, ca: certs.ca });
    try {
      const taken = await both(asking.url, { ca: certs.ca, cert: certs.clientCert, key: certs.clientKey });
      assert.deepStrictEqual(taken.mine, { opened: true, authorized: true });
      assert.deepStrictEqual(taken.mine, taken.theirs);
      assert.strictEqual(taken.native, nativeTls);
      const refused = await both(asking.url, { ca: certs.ca });
      assert.ok(refused.mine.refused && refused.theirs.refused, JSON.stringify(refused));
    } finally {
      await asking.close();
    }
  });

  it('a key that cannot be read: refused, as by amqplib', async () => {
    const { mine, theirs } = await both(plain.url, { ca: certs.ca, cert: certs.clientCert, key: 'not a key' });
    assert.strictEqual(Boolean(mine.refused), Boolean(theirs.refused), JSON.stringify({ mine, theirs }));
  });

  it('an option only tls.connect honours (ciphers, pfx, passphrase...) takes tls.connect', async () => {
    const { mine, native } = await both(plain.url, { ca: certs.ca, ciphers: tls.DEFAULT_CIPHERS });
    assert.deepStrictEqual(mine, { opened: true, authorized: true });
    assert.strictEqual(native, false);
    for (const options of [{ pfx: Buffer.alloc(1) }, { passphrase: 'x' }, { maxVersion: 'TLSv1.1' }, { key: [{ pem: 'k' }], cert: 'c' }]) {
      assert.strictEqual(NativeSocket.serves(options, 'amqps:'), false, JSON.stringify(options));
    }
  });

  it('NODE_EXTRA_CA_CERTS: the CA trusted as Node trusts an extra CA, without `ca`', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'amqplib-rs-extra-ca-'));
    try {
      const caFile = path.join(dir, 'ca.pem');
      fs.writeFileSync(caFile, certs.ca);
      const script = `
        const report = (amqp) => amqp.connect(process.argv[1]).then(async (c) => {
          const r = { opened: true, authorized: c.connection.stream.authorized };
          await c.close();
          return r;
        }, (e) => ({ refused: e.code }));
        Promise.all([report(require(${JSON.stringify(path.join(__dirname, '..'))})), report(require('amqplib-latest'))])
          .then((r) => console.log(JSON.stringify(r)));`;
      // Not spawnSync: the server is this process's.
      const run = await promisify(execFile)(process.execPath, ['-e', script, plain.url], {
        cwd: path.join(__dirname, '..'), timeout: 30_000, env: { ...process.env, NODE_EXTRA_CA_CERTS: caFile },
      });
      const [mine, theirs] = JSON.parse(run.stdout.trim());
      assert.deepStrictEqual(mine, { opened: true, authorized: true });
      assert.deepStrictEqual(mine, theirs);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
