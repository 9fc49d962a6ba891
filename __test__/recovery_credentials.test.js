'use strict';
// Credentials that change under a recovering model (issue 37 item 6): updateSecret also changes
// what later connections authenticate with, and the `credentials` hook, asked before every
// connection attempt, supplies that attempt's. A scripted server (./fake_server.js) records
// each connection's PLAIN response, answers update-secret, and closes connections on demand
// (320, as a node that stops), so that the model reconnects.

const { describe, it, after } = require('node:test');
const assert = require('node:assert');
const defs = require('../lib/defs');
const { fakeServer } = require('./fake_server');

const amqp = require('..');
const amqpCallback = require('../callback_api');

// A server that keeps every client: `logins` in order ("user:password" from PLAIN), the secrets
// updated, and `closeAll()` to close the connections open now with 320.
async function recordingServer() {
  const logins = [];
  const updates = [];
  const open = new Set();
  const server = await fakeServer(async (peer) => {
    const [, user, password] = peer.startOk.response.toString().split('\u0000');
    logins.push(`${user}:${password}`);
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
  });
  const closeAll = () => {
    for (const peer of open) {
      peer.send(defs.ConnectionClose, { replyCode: 320, replyText: 'CONNECTION_FORCED - node stopping', classId: 0, methodId: 0 });
      peer.conn.flush();
    }
  };
  return { ...server, logins, updates, closeAll };
}

// Resolves with the next 'connect' of a recovering model.
const reconnected = (model) => new Promise((resolve) => model.once('connect', resolve));

const RECOVERY = { initialDelay: 10, maxDelay: 50 };

describe('a recovering model whose credentials change', () => {
  const servers = [];
  after(() => Promise.all(servers.map((s) => s.close())));
  const server = async () => {
    const s = await recordingServer();
    servers.push(s);
    return s;
  };
  const urlFor = (s, user, password) => s.url.replace('amqp://', `amqp://${user}:${password}@`);

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
    assert.match(failures[1], /^TypeError: recovery.credentials must resolve to \{ username, password \}/);
  });

  it('a credentials option that is no function is refused at connect', async () => {
    await assert.rejects(amqp.connect('amqp://127.0.0.1:1', { recovery: { credentials: 'secret' } }), {
      name: 'TypeError',
      message: 'recovery.credentials must be a function returning the credentials of each attempt; got string',
    });
  });
});
