'use strict';
// Credentials that change under a recovering model (issue 37 item 6): updateSecret also changes
// what later connections authenticate with, and the `credentials` hook, asked before every
// connection attempt, supplies that attempt's. A scripted server (./fake_server.js) records
// each connection's PLAIN response, answers update-secret, and closes connections on demand
// (320, as a node that stops), so that the model reconnects.

const { describe, it, after } = require('node:test');
const assert = require('node:assert');
const util = require('node:util');
const { once } = require('node:events');
const defs = require('../lib/defs');
const { fakeServer } = require('./fake_server');
const { NativeSocket } = require('../lib/native_socket');

const amqp = require('..');
const amqpCallback = require('../callback_api');

// A server that keeps every client: `logins` in order ("user:password" from PLAIN), the secrets
// updated, and `closeAll()` to close the connections open now with 320. A login whose password
// `state.refuse(password)` says is no longer good is refused (403), as a broker refuses an
// expired token. `tls` as fakeServer's.
async function recordingServer({ tls = false } = {}) {
  const logins = [];
  const updates = [];
  const open = new Set();
  const state = { refuse: () => false };
  const refuseLogin = (startOk) => {
    const [, user, password] = startOk.response.toString().split('\u0000');
    logins.push(`${user}:${password}`);
    return state.refuse(password);
  };
  const server = await fakeServer(async (peer) => {
    open.add(peer);
    for (;;) {
      const frame = await peer.expect().catch(() => null);
      if (frame === null) break;
      if (frame.id === defs.ConnectionUpdateSecret) {
        updates.push(`${frame.fields.newSecret.toString()} (${frame.fields.reason})`);
        peer.send(defs.ConnectionUpdateSecretOk, {});
        peer.conn.flush();
      } else if (frame.id === defs.ConnectionClose) {
        peer.send(defs.ConnectionCloseOk, {});
        peer.conn.flush();
        break;
      } else if (frame.id === defs.ConnectionCloseOk) {
        peer.socket.end();
        break;
      }
    }
    open.delete(peer);
  }, { tls, refuseLogin });
  const closeAll = () => {
    for (const peer of open) {
      peer.send(defs.ConnectionClose, { replyCode: 320, replyText: 'CONNECTION_FORCED - node stopping', classId: 0, methodId: 0 });
      peer.conn.flush();
    }
  };
  return { ...server, logins, updates, closeAll, state };
}

// Resolves with the next 'connect' of a recovering model: [model, which].
const reconnected = (model) => once(model, 'connect');

const RECOVERY = { initialDelay: 10, maxDelay: 50 };

describe('a recovering model whose credentials change', () => {
  const servers = [];
  after(() => Promise.all(servers.map((s) => s.close())));
  const server = async (options) => {
    const s = await recordingServer(options);
    servers.push(s);
    return s;
  };
  const urlFor = (s, user, password) => s.url.replace('://', `://${user}:${password}@`);

  it('updateSecret: the connection takes it, and the reconnects after authenticate with it (promise API)', async () => {
    const s = await server();
    const model = await amqp.connect(urlFor(s, 'app', 'token-1'), { recovery: RECOVERY });
    await model.updateSecret(Buffer.from('token-2'), 'rotated');
    const again = reconnected(model);
    s.closeAll();
    await again;
    await model.close();
    assert.deepStrictEqual(s.updates, ['token-2 (rotated)']);
    assert.deepStrictEqual(s.logins, ['app:token-1', 'app:token-2']);
  });

  it('updateSecret through the callback API, with credentials given in the socket options', async () => {
    const s = await server();
    const model = await new Promise((resolve, reject) => {
      amqpCallback.connect(s.url, { credentials: amqp.credentials.plain('svc', 'first'), recovery: RECOVERY }, (err, m) => (err ? reject(err) : resolve(m)));
    });
    await new Promise((resolve, reject) => model.updateSecret(Buffer.from('second'), 'rotated', (err) => (err ? reject(err) : resolve())));
    const again = reconnected(model);
    s.closeAll();
    await again;
    await new Promise((resolve) => model.close(resolve));
    assert.deepStrictEqual(s.logins, ['svc:first', 'svc:second']);
  });

  it('without updateSecret, reconnects authenticate as the URL says', async () => {
    const s = await server();
    const model = await amqp.connect(urlFor(s, 'app', 'same'), { recovery: RECOVERY });
    const again = reconnected(model);
    s.closeAll();
    await again;
    await model.close();
    assert.deepStrictEqual(s.logins, ['app:same', 'app:same']);
  });

  it('the credentials hook is asked before every attempt, with the node, and its answer is the login', async () => {
    const s = await server();
    const asked = [];
    let token = 0;
    const hook = async (which) => {
      asked.push(which);
      await new Promise((resolve) => setTimeout(resolve, 5)); // a token fetch
      return { username: 'oauth', password: `jwt-${++token}` };
    };
    const model = await amqp.connect([urlFor(s, 'ignored', 'ignored')], { recovery: { ...RECOVERY, credentials: hook } });
    const again = reconnected(model);
    s.closeAll();
    await again;
    await model.close();
    assert.deepStrictEqual(s.logins, ['oauth:jwt-1', 'oauth:jwt-2']);
    assert.deepStrictEqual(asked.map((w) => w.index), [0, 0]);
    assert.strictEqual(asked[0].node, asked[1].node);
    assert.match(asked[0].node, /^amqp:\/\/127\.0\.0\.1:\d+\/$/, 'the node as connect events name it, without its credentials');
  });

  it("a hook that fails fails that attempt ('connect-failed' with its error) and the next attempt asks again", async () => {
    const s = await server();
    let calls = 0;
    const hook = async () => {
      calls++;
      if (calls === 2) throw new Error('token service down');
      if (calls === 3) return 'not credentials';
      return amqp.credentials.plain('oauth', `jwt-${calls}`);
    };
    const model = await amqp.connect(s.url, { recovery: { ...RECOVERY, credentials: hook } });
    const failures = [];
    model.on('connect-failed', (err) => failures.push(`${err.name}: ${err.message}`));
    const again = reconnected(model);
    s.closeAll();
    await again;
    await model.close();
    assert.deepStrictEqual(s.logins, ['oauth:jwt-1', 'oauth:jwt-4']);
    assert.strictEqual(failures.length, 2);
    assert.strictEqual(failures[0], 'Error: token service down');
    // What came is named by its kind, never shown: a bare token must not reach a log.
    assert.strictEqual(failures[1], 'TypeError: recovery.credentials must resolve to { username, password } (strings) or credentials (amqp.credentials.plain, ...); got a string');
  });

  it('a hook that answers a user without a password, or never answers within the connect timeout, fails that attempt', async () => {
    const s = await server();
    let calls = 0;
    const hook = () => {
      calls++;
      if (calls === 2) return { username: 'oauth' };
      if (calls === 3) return new Promise(() => {}); // a token service that hangs
      return { username: 'oauth', password: Buffer.from(`jwt-${calls}`) };
    };
    const model = await amqp.connect(s.url, { timeout: 300, recovery: { ...RECOVERY, credentials: hook } });
    const failures = [];
    model.on('connect-failed', (err) => failures.push(err.message));
    const again = reconnected(model);
    s.closeAll();
    await again;
    await model.close();
    assert.deepStrictEqual(s.logins, ['oauth:jwt-1', 'oauth:jwt-4']);
    assert.match(failures[0], /got an object with keys username$/);
    assert.strictEqual(failures[1], 'recovery.credentials did not settle within 300 ms');
  });

  it("updateSecret while disconnected (the broker refusing the expired token) is kept for the next attempt at once, nothing sent", async () => {
    const s = await server();
    const model = await amqp.connect(urlFor(s, 'app', 'token-1'), { recovery: RECOVERY });
    s.state.refuse = (password) => password === 'token-1';
    // The service learns of the expiry from the refused reconnect, and fetches a new token.
    let updatedWhileDown = null;
    model.once('connect-failed', () => {
      updatedWhileDown = model.updateSecret(Buffer.from('token-2'), 'expired');
    });
    const again = reconnected(model);
    s.closeAll();
    await again;
    assert.strictEqual(await updatedWhileDown, undefined);
    await model.close();
    assert.deepStrictEqual(s.logins, ['app:token-1', 'app:token-1', 'app:token-2']);
    assert.deepStrictEqual(s.updates, [], 'no update-secret without a connection');
  });

  it('after updateSecret each node of a list logs in as its own user with the new secret', async () => {
    const first = await server();
    const second = await server();
    const model = await amqp.connect([urlFor(first, 'alice', 'old'), urlFor(second, 'bob', 'old')], { recovery: RECOVERY });
    await model.updateSecret(Buffer.from('new'), 'rotated');
    const again = reconnected(model);
    first.closeAll();
    const [, which] = await again;
    await model.close();
    assert.strictEqual(which.index, 1);
    assert.deepStrictEqual(first.logins, ['alice:old']);
    assert.deepStrictEqual(second.logins, ['bob:new']);
  });

  it("amqps:// (on the native socket where it serves): the hook's credentials are left nowhere on the connection", async () => {
    const s = await server({ tls: true });
    const hook = async () => ({ username: 'oauth', password: 'jwt-very-secret' });
    const model = await amqp.connect(s.url, { ca: [s.ca], recovery: { ...RECOVERY, waitForConnect: false, credentials: hook } });
    const [{ connection }] = await reconnected(model);
    assert.strictEqual(connection.native, NativeSocket.serves({ ca: [s.ca] }, 'amqps:'));
    const seen = util.inspect(connection.stream, { depth: 6, showHidden: true }) + util.inspect(connection, { depth: 2 });
    await model.close();
    assert.deepStrictEqual(s.logins, ['oauth:jwt-very-secret']);
    assert.ok(!seen.includes('jwt-very-secret'), 'the token is not kept by the connection or its socket');
  });

  it('a credentials option that is no function is refused at connect', async () => {
    await assert.rejects(amqp.connect('amqp://127.0.0.1:1', { recovery: { credentials: 'secret' } }), {
      name: 'TypeError',
      message: 'recovery.credentials must be a function returning the credentials of each attempt; got string',
    });
  });
});
