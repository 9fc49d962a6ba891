'use strict';
// A RabbitMQ cluster of three nodes on loopback (scripts/cluster.js), under a service's load
// (./service.js), its nodes stopped, killed and restarted (issue 25). Run by `npm run
// test:cluster`, which starts the cluster first. Each scenario prints its counts as a
// `CLUSTER {json}` line; where amqplib 2.3.1 applies, it runs the same with one URL (it takes
// no list), for the comparison in benchmarks/RESULTS.md.

const { describe, it, before } = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const cluster = require('../../scripts/cluster');
const { startPublisher, startConsumer, settle, sleep, QUORUM } = require('./service');
const { startTopologyService, settleTopology } = require('./topology_service');

const ours = require('../..');
const latest = require('amqplib-latest');

const URLS = cluster.NODES.map((n) => n.url);
const TLS_URLS = cluster.NODES.map((n) => n.tlsUrl);
const GRACEFUL_STOPS = Number(process.env.CLUSTER_GRACEFUL_STOPS || 20);
const ROLLING_RESTARTS = Number(process.env.CLUSTER_ROLLING_RESTARTS || 10);
// A graceful stop closes with 320, which is no 'error'. But a publish that reaches a quorum
// queue whose leader is shutting down can crash the broker's channel process (seen here: a
// case_clause on register_enqueuer in rabbit_channel:deliver_to_queues), and the broker then
// closes the connection with 541 INTERNAL_ERROR: an 'error' in amqplib too. Those are the
// broker's own.
const BROKER_CRASH = /^Connection closed: 541 \(INTERNAL-ERROR\)/;

let counter = 0;
const queueName = (what) => `amqplib-rs.cluster.${what}.${process.pid}.${++counter}`;

function report(scenario, library, counts) {
  process.stdout.write(`CLUSTER ${JSON.stringify({ scenario, library, ...counts })}\n`);
}

async function deleteQueue(queue) {
  const model = await ours.connect(URLS);
  const ch = await model.createChannel();
  await ch.deleteQueue(queue).catch(() => {});
  await model.close();
}

// Stops the service, waits for the consumer to have every confirmed message, cleans up, and
// reports the counts (with `extra`) as the scenario's.
async function finish(scenario, library, { publisher, consumer, queue }, extra = {}) {
  await publisher.stop();
  const counts = { ...(await settle(publisher, consumer)), ...extra };
  await consumer.stop();
  await deleteQueue(queue);
  report(scenario, library, counts);
  return counts;
}

// Declares a quorum queue from node `i`, which makes that node its leader (3.10's default
// leader locator is the client's node).
async function declareOn(i, queue) {
  const model = await ours.connect(URLS[i]);
  const ch = await model.createChannel();
  await ch.assertQueue(queue, QUORUM);
  await model.close();
  assert.strictEqual(await cluster.queueLeader(queue), cluster.NODES[i].name);
}

// The queue's leader on node 2, the publisher on node 0, the consumer on node 1; the
// publisher's node stopped and started, then the node it is on by then killed and restarted,
// under load. `target(i)` is what the library connects to, preferring node i. (A killed
// leader stops confirms for its election, seconds, whatever the client: not this test's.)
async function publisherNodeDown(library, amqp, target) {
  const queue = queueName('publisher-node');
  await declareOn(2, queue);
  const consumer = await startConsumer(amqp, target(1), queue, { preferredNode: 1 });
  const publisher = await startPublisher(amqp, target(0), queue, { preferredNode: 0 });
  await sleep(2000);
  const stopped = publisher.state.node;
  await cluster.stopApp(stopped);
  await sleep(3000);
  await cluster.startApp(stopped);
  await sleep(2000);
  const killed = publisher.state.node;
  await cluster.kill(killed);
  await sleep(3000);
  await cluster.restart(killed);
  await sleep(2000);
  return finish('publisher node stopped, started, killed, restarted', library, { publisher, consumer, queue });
}

describe('a three-node cluster', { timeout: 45 * 60 * 1000 }, () => {
  before(() => cluster.start());

  it('a quorum queue, its publisher node stopped then killed: nothing confirmed lost; with a list of nodes, confirms go on within 1 s', async () => {
    const mine = await publisherNodeDown('amqplib-rs, three nodes', ours, () => URLS);
    assert.strictEqual(mine.lost, 0);
    assert.ok(mine.confirmed > 1000, `only ${mine.confirmed} confirmed`);
    assert.ok(mine.longestGapMs < 1000, `the longest wait between confirms was ${mine.longestGapMs} ms`);
    const theirs = await publisherNodeDown('amqplib 2.3.1, one URL', latest, (i) => URLS[i]);
    assert.strictEqual(theirs.lost, 0);
  });

  it("the queue leader's node stopped: deliveries go on", async () => {
    const queue = queueName('leader');
    const leaderIndex = 0;
    await declareOn(leaderIndex, queue);
    const others = [1, 2];
    const consumer = await startConsumer(ours, URLS, queue, { preferredNode: others[0] });
    const publisher = await startPublisher(ours, URLS, queue, { preferredNode: others[1] });
    await sleep(2000);
    await cluster.stopApp(leaderIndex);
    const before = consumer.state.deliveries;
    await sleep(4000);
    const during = consumer.state.deliveries - before;
    await cluster.startApp(leaderIndex);
    const counts = await finish("leader's node stopped", 'amqplib-rs, three nodes', { publisher, consumer, queue }, { deliveredWhileLeaderDown: during });
    assert.ok(during > 0, 'no delivery while the leader was down');
    assert.strictEqual(counts.lost, 0);
  });

  it('a stream queue read from first, an offset and last', async () => {
    for (const [library, amqp] of [['amqplib-rs', ours], ['amqplib 2.3.1', latest]]) {
      const queue = queueName('stream');
      const model = await amqp.connect(URLS[0]);
      const ch = await model.createConfirmChannel();
      await ch.assertQueue(queue, { durable: true, arguments: { 'x-queue-type': 'stream' } });
      for (let i = 0; i < 100; i++) ch.sendToQueue(queue, Buffer.from(String(i)));
      await ch.waitForConfirms();
      const read = async (offset) => {
        const reader = await model.createChannel();
        await reader.prefetch(10);
        const seen = [];
        await reader.consume(
          queue,
          (msg) => {
            seen.push(Number(msg.content.toString()));
            reader.ack(msg);
          },
          { arguments: { 'x-stream-offset': offset } },
        );
        await sleep(1500);
        await reader.close();
        return seen;
      };
      const first = await read('first');
      const fromOffset = await read(50);
      const last = await read('last');
      await ch.deleteQueue(queue);
      await model.close();
      report('stream offsets', library, { first: first.length, fromOffset: fromOffset.length, last: last.length });
      assert.deepStrictEqual(first, Array.from({ length: 100 }, (_, i) => i), library);
      assert.deepStrictEqual(fromOffset, Array.from({ length: 50 }, (_, i) => 50 + i), library);
      assert.ok(last.length >= 1 && last[last.length - 1] === 99, `${library}: 'last' gave ${last}`);
    }
  });

  it("a memory alarm on one node: 'blocked' then 'unblocked', as amqplib", async () => {
    for (const [library, amqp] of [['amqplib-rs', ours], ['amqplib 2.3.1', latest]]) {
      const model = await amqp.connect(URLS[2]);
      const events = [];
      model.on('blocked', (reason) => events.push(`blocked: ${reason}`));
      model.on('unblocked', () => events.push('unblocked'));
      const ch = await model.createChannel();
      await cluster.setMemoryAlarm(2, true);
      ch.sendToQueue('amq.nonexistent-but-harmless', Buffer.from('x')); // the broker blocks on a publish
      for (let i = 0; i < 100 && events.length === 0; i++) await sleep(100);
      await cluster.setMemoryAlarm(2, false);
      for (let i = 0; i < 100 && events.length < 2; i++) await sleep(100);
      await model.close();
      report('memory alarm', library, { events });
      assert.deepStrictEqual(events, ['blocked: low on memory', 'unblocked'], library);
    }
  });

  it('a rolling restart of all three nodes under load: the service lives, nothing confirmed is lost', async () => {
    const queue = queueName('rolling');
    const consumer = await startConsumer(ours, URLS, queue, { preferredNode: 1 });
    const publisher = await startPublisher(ours, URLS, queue, { preferredNode: 0 });
    await sleep(2000);
    for (const i of [0, 1, 2]) {
      await cluster.stopApp(i);
      await sleep(2000);
      await cluster.startApp(i);
      await sleep(3000);
    }
    const counts = await finish('rolling restart', 'amqplib-rs, three nodes', { publisher, consumer, queue });
    // A rolling restart is three graceful stops: the broker's own 541 (see BROKER_CRASH) may
    // close a connection then too; any other error is ours.
    assert.deepStrictEqual(counts.errors.filter((e) => !BROKER_CRASH.test(e)), []);
    assert.strictEqual(counts.lost, 0);
    assert.ok(counts.longestGapMs < 1000, `the longest wait between confirms was ${counts.longestGapMs} ms`);
  });

  // Issue 37: the service writes no recovery code (./topology_service.js); the model's
  // topology recovery and republish do it all. Each round stops and starts the three nodes in
  // turn; it passes when confirms and RPC replies flow again. Then a node is killed.
  it(`a service with no recovery code of its own: ${ROLLING_RESTARTS} rolling restarts and a node killed, nothing confirmed lost, every publish settled once`, async () => {
    const queue = queueName('topology');
    const service = await startTopologyService(ours, URLS, queue);
    const { state } = service;
    const confirmedCount = () => [...state.outcomes.values()].filter((outcomes) => outcomes[0] === 'ok').length;
    await sleep(2000);
    let passed = 0;
    for (let round = 0; round < ROLLING_RESTARTS; round++) {
      for (const i of [0, 1, 2]) {
        await cluster.stopApp(i);
        await sleep(1500);
        await cluster.startApp(i);
        await sleep(1500);
      }
      const [confirmed, replies] = [confirmedCount(), state.replies];
      for (let i = 0; i < 100 && (confirmedCount() === confirmed || state.replies === replies); i++) await sleep(100);
      if (confirmedCount() > confirmed && state.replies > replies) passed++;
    }
    const errorsBeforeKill = [...state.errors];
    const lagsBeforeKill = [...state.firstDeliveryLagMs];
    const settledBeforeKill = [...state.outcomes.values()];
    await cluster.kill(0);
    await sleep(3000);
    await cluster.restart(0);
    const repliesAtRestart = state.replies;
    await sleep(3000);
    await service.stop();
    const counts = await settleTopology(service);
    const model = await ours.connect(URLS);
    const ch = await model.createChannel();
    await ch.deleteQueue(queue).catch(() => {});
    await ch.deleteExchange(`${queue}.x`).catch(() => {});
    await model.close();
    const nackedBeforeKill = settledBeforeKill.filter((outcomes) => outcomes[0] === 'message nacked').length;
    report('no recovery code: rolling restarts and a kill', 'amqplib-rs, three nodes', { rounds: ROLLING_RESTARTS, passed, nackedBeforeKill, lagsBeforeKill, ...counts });
    assert.strictEqual(passed, ROLLING_RESTARTS);
    assert.strictEqual(counts.lost, 0);
    assert.strictEqual(counts.settled, counts.published, 'every publish settled');
    assert.strictEqual(counts.settledTwice, 0, 'none settled twice');
    // Each settled: confirmed, or nacked by the broker (a quorum queue whose leader was killed
    // refuses publishes until its election is over); none failed otherwise.
    assert.deepStrictEqual(Object.keys(counts.failures).filter((why) => why !== 'message nacked'), []);
    // Through the rolling restarts (each stops the consumer's node once), the consumer
    // delivers again within 1 s of each reconnect.
    assert.ok(lagsBeforeKill.length >= ROLLING_RESTARTS, `${lagsBeforeKill.length} recoveries of the consumer measured`);
    assert.ok(lagsBeforeKill.every((ms) => ms < 1000), `first deliveries after each reconnect: ${lagsBeforeKill} ms`);
    // Each round above passed only with RPC replies after it (the reply queue renamed each
    // round: its connection went); so too after the kill.
    assert.ok(counts.replies > repliesAtRestart, 'RPC replies after the killed node came back');
    // A message seen twice was redelivered (the consumer's connection lost it unacked) or
    // republished (unconfirmed at a cut), and says so.
    assert.strictEqual(counts.duplicates.other, 0);
    // Graceful stops close with 320, no 'error' (the broker's own 541 aside); the kill's reset is one.
    assert.deepStrictEqual(errorsBeforeKill.filter((e) => !BROKER_CRASH.test(e)), []);
  });

  // Two nodes of three down leave no majority: a quorum queue confirms nothing, and on
  // RabbitMQ 4 (Khepri) the metadata store has no quorum either, so a declare that writes (the
  // service's reply queue) on the node left waits 30 s, then the server closes the connection
  // with 541. The service is made to reconnect to that node once the others are down (its
  // connections closed there): a reconnect as the second node stops can still find a majority.
  it('two nodes down for 40 s, then back: the service comes back by itself, nothing confirmed is lost', async () => {
    const queue = queueName('no-majority');
    await declareOn(0, queue);
    const consumer = await startConsumer(ours, URLS, queue, { preferredNode: 1 });
    const publisher = await startPublisher(ours, URLS, queue, { preferredNode: 2, replyQueue: true });
    await sleep(2000);
    await cluster.stopApp(1);
    await cluster.stopApp(2);
    await sleep(2000);
    await cluster.closeConnections(0);
    await sleep(38000);
    await cluster.startApp(1);
    await cluster.startApp(2);
    const confirmedBefore = publisher.state.confirmed.size;
    for (let i = 0; i < 600 && publisher.state.confirmed.size < confirmedBefore + 100; i++) await sleep(100);
    const confirmedAfter = publisher.state.confirmed.size - confirmedBefore;
    const counts = await finish('two nodes down and back', 'amqplib-rs, three nodes', { publisher, consumer, queue }, { confirmedAfter });
    assert.ok(confirmedAfter >= 100, `${confirmedAfter} confirmed once the nodes were back`);
    assert.strictEqual(counts.lost, 0);
    if (cluster.RELEASE) {
      // The 541 reached the service as the cause of a failed reconnect, not as a bare
      // "Channel ended".
      assert.ok(counts.connectFailures.some((f) => /541/.test(f)), `no 541 among ${JSON.stringify(counts.connectFailures)}`);
    }
  });

  // As services are deployed: over TCP, and over TLS (the nodes' amqps:// listeners, their CA
  // trusted through `ca`) at 1000 and 4000 msg/s, where a node's close must win over the reset
  // that follows it (issue 34).
  const gracefulCases = [
    { over: 'TCP', perTick: 10 },
    { over: 'TLS', perTick: 10 },
    { over: 'TLS', perTick: 40 },
  ];
  for (const { over, perTick } of gracefulCases) {
    const rate = perTick * 100;
    it(`${GRACEFUL_STOPS} graceful node stops over ${over} at ${rate} msg/s, the service with only a 'disconnect' listener`, async () => {
      const queue = queueName('graceful');
      const [urls, socketOptions] = over === 'TLS' ? [TLS_URLS, { ca: [fs.readFileSync(cluster.caFile())] }] : [URLS, {}];
      const consumer = await startConsumer(ours, urls, queue, { preferredNode: 2, socketOptions });
      const publisher = await startPublisher(ours, urls, queue, { preferredNode: 0, perTick, socketOptions });
      await sleep(1000);
      // Each stop must hit the publisher (its node is the one stopped) and be recovered from
      // (confirms flowing again) before the next.
      let recovered = 0;
      for (let stop = 0; stop < GRACEFUL_STOPS; stop++) {
        const node = publisher.state.node;
        const disconnects = publisher.state.disconnects.length;
        await cluster.stopApp(node);
        for (let i = 0; i < 50 && publisher.state.disconnects.length === disconnects; i++) await sleep(100);
        const confirmedBefore = publisher.state.confirmed.size;
        for (let i = 0; i < 50 && publisher.state.confirmed.size === confirmedBefore; i++) await sleep(100);
        if (publisher.state.disconnects.length > disconnects && publisher.state.confirmed.size > confirmedBefore) recovered++;
        await cluster.startApp(node);
      }
      const counts = await finish(`graceful stops over ${over} at ${rate} msg/s`, 'amqplib-rs, three nodes', { publisher, consumer, queue }, { stops: GRACEFUL_STOPS, recovered });
      assert.strictEqual(recovered, GRACEFUL_STOPS);
      assert.ok(counts.disconnects >= GRACEFUL_STOPS, `${counts.disconnects} disconnects for ${GRACEFUL_STOPS} stops`);
      // A graceful stop closes with 320, which is no 'error'; the broker's own 541 (see
      // BROKER_CRASH) may; any other error (a write's ECONNRESET before the close) is ours.
      assert.deepStrictEqual(counts.errors.filter((e) => !BROKER_CRASH.test(e)), []);
      assert.strictEqual(counts.lost, 0);
    });
  }
});
