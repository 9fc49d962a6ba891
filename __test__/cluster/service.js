'use strict';
// A service as people write one against a cluster, for the cluster scenarios: a confirm
// publisher and a consumer, each a recovering model (amqplib 2.3.1's `recovery` option) with
// a 'disconnect' listener. Its 'error' events are counted rather than thrown: a service that
// listens only for 'disconnect' dies of the first one, so where nodes stop gracefully there
// must be none (a killed node's reset is an 'error' in amqplib too). Counts what was
// published, confirmed, consumed, lost and duplicated, and the longest wait between two
// confirms.

const QUORUM = { durable: true, arguments: { 'x-queue-type': 'quorum' } };

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// `target` is what the library's connect takes: a list of nodes for ours, one URL for amqplib;
// `socketOptions` go with the recovery's (a TLS `ca`, say).
function connectOptions(setup, preferredNode, socketOptions = {}) {
  return { ...socketOptions, recovery: { initialDelay: 50, maxDelay: 500, setup, ...(preferredNode === undefined ? {} : { preferredNode }) } };
}

// Publishes `perTick` messages every 10 ms while running, each numbered in its messageId. With
// `replyQueue`, its setup also declares a server-named exclusive queue, as an RPC client's
// does: a metadata write on every (re)connect, where asserting an existing queue is a read.
async function startPublisher(amqp, target, queue, { perTick = 10, preferredNode, replyQueue = false, socketOptions } = {}) {
  // `node`: the index of the node it is connected to (ours says in 'connect'; a single URL is 0).
  const state = { sent: 0, confirmed: new Set(), refused: 0, disconnects: [], errors: [], connectFailures: [], longestGap: 0, lastConfirm: 0, channel: null, node: preferredNode ?? 0 };
  const setup = async (model) => {
    const ch = await model.createConfirmChannel();
    ch.on('error', () => {}); // channel errors are a service's business; the connection's are ours
    await ch.assertQueue(queue, QUORUM);
    if (replyQueue) await ch.assertQueue('', { exclusive: true });
    state.channel = ch;
    ch.on('close', () => {
      if (state.channel === ch) state.channel = null;
    });
  };
  const model = await amqp.connect(target, connectOptions(setup, preferredNode, socketOptions));
  model.on('disconnect', (err) => state.disconnects.push(err.message));
  model.on('error', (err) => state.errors.push(err.message));
  // A reconnect that failed (its setup's declare refused, say), with the server's close that
  // ended it, where there was one.
  model.on('connect-failed', (err) => state.connectFailures.push(err.cause ? `${err.message} (${err.cause.message})` : err.message));
  model.on('connect', (m, which) => {
    if (which) state.node = which.index;
  });
  state.lastConfirm = Date.now();
  const confirmed = (n) => (err) => {
    if (err) {
      state.refused++;
      return;
    }
    const now = Date.now();
    state.longestGap = Math.max(state.longestGap, now - state.lastConfirm);
    state.lastConfirm = now;
    state.confirmed.add(n);
  };
  const timer = setInterval(() => {
    const ch = state.channel;
    if (!ch) return;
    try {
      for (let i = 0; i < perTick; i++) {
        const n = state.sent++;
        ch.publish('', queue, Buffer.from(String(n)), { messageId: String(n), persistent: true }, confirmed(n));
      }
    } catch {
      // the channel closed in this turn: the next tick finds the new one
    }
  }, 10);
  return {
    state,
    async stop() {
      clearInterval(timer);
      await sleep(1000); // the last confirms
      await model.close().catch(() => {});
    },
  };
}

async function startConsumer(amqp, target, queue, { preferredNode, socketOptions } = {}) {
  const state = { received: new Set(), duplicates: 0, disconnects: [], errors: [], deliveries: 0 };
  const setup = async (model) => {
    const ch = await model.createChannel();
    ch.on('error', () => {});
    await ch.assertQueue(queue, QUORUM);
    await ch.prefetch(200);
    await ch.consume(queue, (msg) => {
      if (!msg) return;
      state.deliveries++;
      const n = Number(msg.content.toString());
      if (state.received.has(n)) state.duplicates++;
      state.received.add(n);
      ch.ack(msg);
    });
  };
  const model = await amqp.connect(target, connectOptions(setup, preferredNode, socketOptions));
  model.on('disconnect', (err) => state.disconnects.push(err.message));
  model.on('error', (err) => state.errors.push(err.message));
  return {
    state,
    stop: () => model.close().catch(() => {}),
  };
}

// Waits (up to `ms`) for the consumer to have every confirmed message; returns the counts.
async function settle(publisher, consumer, ms = 30000) {
  const deadline = Date.now() + ms;
  const missing = () => [...publisher.state.confirmed].filter((n) => !consumer.state.received.has(n));
  while (missing().length > 0 && Date.now() < deadline) await sleep(200);
  return {
    published: publisher.state.sent,
    confirmed: publisher.state.confirmed.size,
    refused: publisher.state.refused,
    consumed: consumer.state.received.size,
    lost: missing().length,
    duplicated: consumer.state.duplicates,
    longestGapMs: publisher.state.longestGap,
    disconnects: publisher.state.disconnects.length + consumer.state.disconnects.length,
    errors: [...publisher.state.errors, ...consumer.state.errors],
    connectFailures: publisher.state.connectFailures,
  };
}

module.exports = { startPublisher, startConsumer, settle, sleep, QUORUM };
