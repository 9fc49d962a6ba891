'use strict';
// The opening and closing handshakes of a channel crossing each other: our close before the
// open-ok, the server's close before the open-ok or crossing ours, in every order a server can
// send them (a scripted server, __test__/fake_server.js). What the user sees (each callback's
// outcome, the channel's and the connection's events, in order) and what the server is sent
// must be amqplib 2.3.1's, on both APIs, and the connection must live on (but where amqplib's
// promise API has no 'error' listener on a channel before its open-ok: the server's close then
// ends the whole connection, in both libraries).

const { describe, it } = require('node:test');
const assert = require('node:assert');
const defs = require('../lib/defs');
const { fakeServer } = require('./fake_server');
const { ours, oursCallback, latest, latestCallback } = require('./helpers');

const SERVER_CLOSE = { replyCode: 406, replyText: 'PRECONDITION_FAILED - refused by the script', classId: 0, methodId: 0 };

// Each scenario: whether the client closes the channel at once (before any reply: only the
// callback API hands out a channel before its open-ok) or once the open has settled, and what
// the server does: 'open-ok', 'close-ok', 'close' (its own close), or '<-Name' (wait for the
// client's method Name).
const scenarios = [
  { name: 'our close before the open-ok, then open-ok and close-ok', closeAtOnce: true, server: ['<-ChannelOpen', '<-ChannelClose', 'open-ok', 'close-ok'] },
  { name: 'our close before the open-ok, then open-ok, the server close crossing ours, close-ok', closeAtOnce: true, server: ['<-ChannelOpen', '<-ChannelClose', 'open-ok', 'close', '<-ChannelCloseOk', 'close-ok'] },
  { name: 'our close before the open-ok, then the server close crossing it, close-ok, no open-ok', closeAtOnce: true, server: ['<-ChannelOpen', '<-ChannelClose', 'close', '<-ChannelCloseOk', 'close-ok'] },
  { name: 'the server close before the open-ok', promiseConnectionEnds: true, server: ['<-ChannelOpen', 'close', '<-ChannelCloseOk'] },
  { name: 'open-ok, our close, close-ok', closeAfter: true, server: ['<-ChannelOpen', 'open-ok', '<-ChannelClose', 'close-ok'] },
  { name: 'open-ok, our close, the server close crossing ours, close-ok', closeAfter: true, server: ['<-ChannelOpen', 'open-ok', '<-ChannelClose', 'close', '<-ChannelCloseOk', 'close-ok'] },
  // The qos gives the promise API the turn it needs to listen for the channel's 'error'.
  { name: 'open-ok, a qos, the server close, then our close', qosAfterOpen: true, closeAfterClose: true, server: ['<-ChannelOpen', 'open-ok', '<-BasicQos', 'close', '<-ChannelCloseOk'] },
];

// The server: plays the scenario on channel 1, then answers whatever comes (another channel's
// open, a late close, the connection's close) until the connection's close. Resolves
// `finished` with the names of the methods it was sent.
function serve(scenario) {
  const received = [];
  let done;
  const finished = new Promise((resolve) => (done = resolve));
  const serving = fakeServer(async ({ send, expect, socket }) => {
    socket.on('close', () => done(received)); // the client gave up on the connection
    const take = async (name) => {
      const frame = await expect(name && defs[name]);
      received.push(defs.info(frame.id).name);
      return frame;
    };
    try {
      for (const step of scenario.server) {
        if (step === 'open-ok') send(defs.ChannelOpenOk, { channelId: Buffer.alloc(0) }, 1);
        else if (step === 'close-ok') send(defs.ChannelCloseOk, {}, 1);
        else if (step === 'close') send(defs.ChannelClose, SERVER_CLOSE, 1);
        else await take(step.slice(2));
      }
      for (;;) {
        const frame = await take();
        if (frame.id === defs.ChannelOpen) send(defs.ChannelOpenOk, { channelId: Buffer.alloc(0) }, frame.channel);
        else if (frame.id === defs.ChannelClose) send(defs.ChannelCloseOk, {}, frame.channel);
        else if (frame.id === defs.ConnectionClose) {
          send(defs.ConnectionCloseOk, {});
          break;
        }
      }
    } catch (err) {
      received.push(`script failed: ${err.message}`);
    }
    done(received);
  });
  return { serving, finished };
}

// The callback API: the user's view of the scenario, as lines in the order they happened.
function playCallback(lib, url, scenario) {
  return new Promise((resolve, reject) => {
    const seen = [];
    const outcome = (what) => (err) => seen.push(`${what}: ${err ? err.message : 'ok'}`);
    lib.connect(url, (err, conn) => {
      if (err) return reject(err);
      conn.on('error', (e) => seen.push(`connection error: ${e.message}`));
      conn.on('close', (e) => seen.push(`connection close${e ? `: ${e.message}` : ''}`));
      const closeOpened = (ch) => {
        try {
          ch.close(outcome('close'));
        } catch (e) {
          seen.push(`close threw: ${e.message}`);
        }
      };
      const ch = conn.createChannel((openErr) => {
        outcome('open')(openErr);
        if (scenario.qosAfterOpen) ch.prefetch(1, false, outcome('qos'));
        if (scenario.closeAfter) closeOpened(ch);
      });
      ch.on('error', (e) => seen.push(`channel error: ${e.message}`));
      ch.on('close', () => {
        seen.push('channel close');
        if (scenario.closeAfterClose) closeOpened(ch);
        // The connection lives on: another channel opens, then the connection closes cleanly.
        setImmediate(() =>
          conn.createChannel((laterErr) => {
            outcome('another channel')(laterErr);
            conn.close((closeErr) => {
              outcome('connection closed')(closeErr);
              resolve(seen);
            });
          }),
        );
      });
      if (scenario.closeAtOnce) closeOpened(ch);
    });
  });
}

// The promise API: no channel object before its open-ok, so no close before it.
async function playPromise(lib, url, scenario) {
  const seen = [];
  const settle = (what, promise) => promise.then(() => seen.push(`${what}: ok`), (err) => seen.push(`${what}: ${err.message}`));
  const conn = await lib.connect(url);
  conn.on('error', (e) => seen.push(`connection error: ${e.message}`));
  conn.on('close', (e) => seen.push(`connection close${e ? `: ${e.message}` : ''}`));
  const opening = conn.createChannel();
  let ch = null;
  const closed = opening.then((opened) => {
    ch = opened;
    ch.on('error', (e) => seen.push(`channel error: ${e.message}`));
    return new Promise((resolve) => ch.on('close', resolve));
  }, () => null);
  await settle('open', opening);
  const qos = ch && scenario.qosAfterOpen && settle('qos', ch.prefetch(1));
  if (ch && scenario.closeAfter) await settle('close', ch.close());
  if (ch) await closed;
  await qos;
  seen.push(ch ? 'channel close' : 'no channel');
  if (ch && scenario.closeAfterClose) await settle('close', ch.close());
  await settle('another channel', conn.createChannel());
  await settle('connection closed', conn.close());
  return seen;
}

async function run(play, lib, scenario) {
  const { serving, finished } = serve(scenario);
  const server = await serving;
  try {
    const seen = await play(lib, server.url, scenario);
    return { seen, received: await finished };
  } finally {
    await server.close();
  }
}

describe('channel handshakes crossing', () => {
  for (const scenario of scenarios) {
    it(`callback API: ${scenario.name}, as amqplib 2.3.1`, async () => {
      const theirs = await run(playCallback, latestCallback, scenario);
      const mine = await run(playCallback, oursCallback, scenario);
      assert.deepStrictEqual(mine, theirs);
      assert.ok(mine.seen.includes('another channel: ok') && mine.seen.includes('connection closed: ok'), 'the connection lives on');
    });
    if (scenario.closeAtOnce) continue;
    it(`promise API: ${scenario.name}, as amqplib 2.3.1`, async () => {
      const theirs = await run(playPromise, latest, scenario);
      const mine = await run(playPromise, ours, scenario);
      // Where the connection ends, amqplib loses the close-ok it had queued; ours sends it.
      if (scenario.promiseConnectionEnds) assert.deepStrictEqual(mine.seen, theirs.seen);
      else assert.deepStrictEqual(mine, theirs);
      assert.strictEqual(mine.seen.includes('another channel: ok'), !scenario.promiseConnectionEnds, 'whether the connection lives on');
    });
  }

  it('our close before the open-ok: the close succeeds, the open hears the channel ended', async () => {
    const { seen } = await run(playCallback, oursCallback, scenarios[0]);
    assert.deepStrictEqual(seen.slice(0, 3), ['close: ok', 'open: Channel ended, no reply will be forthcoming', 'channel close']);
    assert.ok(!seen.some((line) => line.startsWith('connection error')), seen.join('\n'));
  });
});
