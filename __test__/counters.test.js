'use strict';
// Counters (issue 28, lib/counters.js): what a connection has sent and received, counted as it
// happens, read from model.counters(); the process's sums from counters(). Both APIs; npm test
// runs this on both transports.

const { describe, it } = require('node:test');
const assert = require('node:assert');
const defs = require('../lib/defs');
const { fakeServer } = require('./fake_server');
const { AMQP_URL, ours, oursCallback, uniqueName } = require('./helpers');

// What `after` counted more than `before`, for the totals that only grow.
function grown(before, after) {
  const names = ['framesReceived', 'framesSent', 'bytesReceived', 'bytesSent', 'reads', 'writes', 'messagesPublished', 'messagesDelivered', 'messagesAcked'];
  return Object.fromEntries(names.map((name) => [name, after[name] - before[name]]));
}

describe('counters', () => {
  it('count frames, messages and acks exactly; bytes, reads and writes as they happen; confirms outstanding and the write buffer now', async () => {
    const model = await ours.connect(AMQP_URL);
    const ch = await model.createConfirmChannel();
    const { queue } = await ch.assertQueue(uniqueName('counters'), { exclusive: true });
    const before = model.counters();
    for (let i = 0; i < 3; i++) ch.sendToQueue(queue, Buffer.from('hello'));
    const waiting = model.counters();
    assert.strictEqual(waiting.confirmsOutstanding, 3);
    assert.ok(waiting.writeBufferSize > 0, 'the publishes wait to be written until the turn ends');
    await ch.waitForConfirms();
    const confirmed = model.counters();
    assert.strictEqual(confirmed.confirmsOutstanding, 0);
    assert.strictEqual(confirmed.writeBufferSize, 0);

    const consumer = await model.createChannel();
    const received = [];
    await consumer.consume(queue, (msg) => {
      received.push(msg);
      if (received.length === 3) for (const m of received) consumer.ack(m);
    });
    while (received.length < 3) await new Promise((resolve) => setTimeout(resolve, 10));
    await consumer.cancel(received[0].fields.consumerTag);
    const after = model.counters();
    const diff = grown(before, after);
    // Sent: 3 publishes of 3 frames each, channel.open, basic.consume, the 3 acks (leaving as
    // one frame, consecutive), basic.cancel.
    assert.strictEqual(diff.messagesPublished, 3);
    assert.strictEqual(diff.messagesDelivered, 3);
    assert.strictEqual(diff.messagesAcked, 3);
    assert.strictEqual(diff.framesSent, 9 + 1 + 1 + 1 + 1);
    // Received: the confirms (one to three), open-ok, consume-ok, 3 deliveries of 3 frames, cancel-ok.
    assert.ok(diff.framesReceived >= 1 + 1 + 9 + 1 + 1 && diff.framesReceived <= 3 + 1 + 9 + 1 + 1, `${diff.framesReceived} frames received`);
    assert.ok(diff.bytesSent > 3 * 5 && diff.bytesReceived > 3 * 5);
    assert.ok(diff.writes >= 1 && diff.reads >= 1);
    assert.strictEqual(after.lastHeartbeatAt, null);
    await model.close();
    const closed = model.counters();
    assert.ok(closed.framesSent > after.framesSent, 'the close counts, and the counters outlive the connection');
    assert.deepStrictEqual(model.counters(), closed);
  });

  it("the process's counters sum every connection's, the closed ones' included (callback API)", async () => {
    const start = ours.counters();
    const models = [];
    for (let i = 0; i < 2; i++) {
      models.push(await new Promise((resolve, reject) => oursCallback.connect(AMQP_URL, (err, m) => (err ? reject(err) : resolve(m)))));
    }
    assert.strictEqual(ours.counters().connections, start.connections + 2);
    assert.strictEqual(oursCallback.counters, ours.counters);
    const ch = await new Promise((resolve, reject) => models[0].createChannel((err, c) => (err ? reject(err) : resolve(c))));
    ch.sendToQueue(uniqueName('nowhere'), Buffer.from('x'));
    await new Promise((resolve) => models[1].close(resolve));
    const middle = ours.counters();
    const open = models[0].counters();
    const gone = models[1].counters();
    assert.strictEqual(middle.connections, start.connections + 1);
    assert.strictEqual(middle.messagesPublished - start.messagesPublished, 1);
    assert.strictEqual(middle.framesSent - start.framesSent, open.framesSent + gone.framesSent);
    await new Promise((resolve) => models[0].close(resolve));
  });

  it('note when the last heartbeat arrived', async () => {
    const served = await fakeServer(async (peer) => {
      peer.sendRaw([defs.constants.FRAME_HEARTBEAT, 0, 0, 0, 0, 0, 0, defs.constants.FRAME_END]);
    });
    const model = await ours.connect(served.url);
    model.on('error', () => {});
    const sent = Date.now();
    while (model.counters().lastHeartbeatAt === null) await new Promise((resolve) => setTimeout(resolve, 5));
    assert.ok(Math.abs(model.counters().lastHeartbeatAt - sent) < 2000);
    await served.close();
  });

  it('confirms outstanding leave out publishes confirmed out of order', async () => {
    let ackSecond;
    const acked = new Promise((resolve) => (ackSecond = resolve));
    const served = await fakeServer(async (peer) => {
      const open = await peer.expect(defs.ChannelOpen);
      peer.send(defs.ChannelOpenOk, { channelId: Buffer.alloc(0) }, open.channel);
      await peer.expect(defs.ConfirmSelect);
      peer.send(defs.ConfirmSelectOk, {}, open.channel);
      await acked;
      peer.send(defs.BasicAck, { deliveryTag: 2, multiple: false }, open.channel);
      peer.send(defs.BasicAck, { deliveryTag: 2, multiple: false }, open.channel); // again: no more
    });
    try {
      const model = await ours.connect(served.url);
      model.on('error', () => {});
      const ch = await model.createConfirmChannel();
      const confirmed = [];
      for (const n of [1, 2, 3]) ch.sendToQueue('q', Buffer.from(`m${n}`), {}, (err) => confirmed.push([n, err]));
      assert.strictEqual(model.counters().confirmsOutstanding, 3);
      ackSecond();
      while (confirmed.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
      assert.deepStrictEqual(confirmed, [[2, null]]);
      assert.strictEqual(model.counters().confirmsOutstanding, 2);
    } finally {
      await served.close();
    }
  });

  it('the socket counts outlive a socket that failed', async () => {
    const served = await fakeServer(async (peer) => {
      await new Promise((resolve) => setTimeout(resolve, 20));
      peer.socket.resetAndDestroy();
    });
    const model = await ours.connect(served.url);
    const failed = new Promise((resolve) => model.on('error', resolve));
    await failed;
    const after = model.counters();
    assert.ok(after.bytesReceived > 0 && after.bytesSent > 0 && after.reads > 0 && after.writes > 0, JSON.stringify(after));
    await served.close();
  });

  it('a recovering model gives the counters of the connection it has', async () => {
    const model = await ours.connect(AMQP_URL, { recovery: true });
    assert.strictEqual(typeof model.counters().framesSent, 'number');
    await model.close();
    assert.strictEqual(model.counters(), null);
  });
});
