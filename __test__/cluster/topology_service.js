'use strict';
// A service with no recovery code of its own, for the cluster scenarios of topology recovery
// (issue 37): it declares a quorum queue, an exchange bound to it and a server-named reply queue
// for RPC, publishes with confirms, consumes with prefetch and acks, and replies to requests;
// everything after a lost connection is the recovering model's (`recovery.topology`, with
// `republish`). What it sees is counted: every publish's outcomes (each must come once), what
// was consumed (and twice: a redelivery, or a republished copy), the replies, and how soon
// deliveries come again after the consumer's model reconnects.

const { QUORUM, sleep } = require('./service');

const RECOVERY = { initialDelay: 50, maxDelay: 500, topology: { republish: true } };
// One request in this many asks for a reply.
const REQUEST_EVERY = 50;

async function startTopologyService(amqp, urls, queue, { perTick = 10, socketOptions = {} } = {}) {
  const exchange = `${queue}.x`;
  const state = {
    sent: 0,
    outcomes: new Map(), // n -> outcomes of its publish ('ok' or the error's message)
    received: new Set(),
    duplicates: { redelivered: 0, republished: 0, other: 0 },
    replies: 0,
    recoveredAt: [], // when the consumer's channel was recovered
    // From the start of the consumer's reconnect that succeeded to its first delivery after,
    // per recovery; Infinity for one lost again before any delivery came.
    firstDeliveryLagMs: [],
    errors: [],
    topologyErrors: [],
    lastConfirm: Date.now(),
    longestGap: 0,
  };
  const connect = (preferredNode) => amqp.connect(urls, { ...socketOptions, recovery: { ...RECOVERY, preferredNode } });

  // The publisher, on node 0 first.
  const publisherModel = await connect(0);
  const models = [publisherModel];
  const pub = await publisherModel.createConfirmChannel();
  await pub.assertExchange(exchange, 'direct', { durable: true });
  await pub.assertQueue(queue, QUORUM);
  await pub.bindQueue(queue, exchange, 'work');
  const { queue: replyQueue } = await pub.assertQueue('', { exclusive: true });
  const replies = await publisherModel.createChannel();
  await replies.consume(
    replyQueue,
    () => {
      state.replies++;
    },
    { noAck: true },
  );

  // The consumer, on node 1 first.
  const consumerModel = await connect(1);
  models.push(consumerModel);
  const sub = await consumerModel.createChannel();
  await sub.assertQueue(queue, QUORUM);
  await sub.prefetch(200);
  // Deliveries may come before 'recovered' (as soon as the consumer is back, while the
  // recovery finishes): the lag is counted from when the attempt that reconnected began.
  const lag = { lost: false, recovered: false, attemptBegan: 0, firstDeliveryAt: 0 };
  const measured = () => {
    state.firstDeliveryLagMs.push(lag.firstDeliveryAt - lag.attemptBegan);
    lag.lost = false;
  };
  consumerModel.on('reconnect-scheduled', ({ delay }) => {
    lag.attemptBegan = Date.now() + delay;
    lag.firstDeliveryAt = 0; // one during an attempt that failed is not this one's
  });
  sub.on('lost', () => {
    if (lag.lost && lag.recovered) state.firstDeliveryLagMs.push(Infinity);
    Object.assign(lag, { lost: true, recovered: false, firstDeliveryAt: 0 });
  });
  sub.on('recovered', () => {
    state.recoveredAt.push(Date.now());
    lag.recovered = true;
    if (lag.lost && lag.firstDeliveryAt !== 0) measured();
  });
  await sub.consume(queue, (msg) => {
    if (lag.lost && lag.firstDeliveryAt === 0) {
      lag.firstDeliveryAt = Date.now();
      if (lag.recovered) measured();
    }
    const n = Number(msg.content.toString());
    if (state.received.has(n)) {
      if (msg.properties.headers?.['x-republished']) state.duplicates.republished++;
      else if (msg.fields.redelivered) state.duplicates.redelivered++;
      else state.duplicates.other++;
    }
    state.received.add(n);
    if (msg.properties.replyTo) sub.sendToQueue(msg.properties.replyTo, msg.content);
    sub.ack(msg);
  });

  for (const model of models) {
    // A service keeps an 'error' listener (a broker's 541 is one); recovery does the rest.
    model.on('error', (err) => state.errors.push(err.message));
    model.on('topology-error', (err, entity) => state.topologyErrors.push(`${entity.kind}: ${err.message}`));
  }

  const confirmed = (n) => (err) => {
    if (!state.outcomes.has(n)) state.outcomes.set(n, []);
    state.outcomes.get(n).push(err ? err.message : 'ok');
    if (err) return;
    const now = Date.now();
    state.longestGap = Math.max(state.longestGap, now - state.lastConfirm);
    state.lastConfirm = now;
  };
  const timer = setInterval(() => {
    for (let i = 0; i < perTick; i++) {
      const n = state.sent++;
      const replyTo = n % REQUEST_EVERY === 0 ? replyQueue : undefined;
      pub.publish(exchange, 'work', Buffer.from(String(n)), { messageId: String(n), persistent: true, replyTo }, confirmed(n));
    }
  }, 10);

  return {
    state,
    // Stops publishing, waits for every publish to settle, and closes.
    async stop(ms = 30000) {
      clearInterval(timer);
      const deadline = Date.now() + ms;
      while (state.outcomes.size < state.sent && Date.now() < deadline) await sleep(100);
      await sleep(500);
      for (const model of models) await model.close().catch(() => {});
    },
  };
}

// The counts, once the consumer has every confirmed message (or `ms` has passed).
async function settleTopology(service, ms = 30000) {
  const { state } = service;
  const confirmed = () => [...state.outcomes].filter(([, outcomes]) => outcomes[0] === 'ok').map(([n]) => n);
  const missing = () => confirmed().filter((n) => !state.received.has(n));
  const deadline = Date.now() + ms;
  while (missing().length > 0 && Date.now() < deadline) await sleep(200);
  let settledTwice = 0;
  let failed = 0;
  const failures = {}; // why, and how many
  for (const outcomes of state.outcomes.values()) {
    if (outcomes.length > 1) settledTwice++;
    if (outcomes[0] === 'ok') continue;
    failed++;
    failures[outcomes[0]] = (failures[outcomes[0]] ?? 0) + 1;
  }
  return {
    published: state.sent,
    settled: state.outcomes.size,
    settledTwice,
    failed,
    failures,
    confirmed: confirmed().length,
    consumed: state.received.size,
    lost: missing().length,
    duplicates: state.duplicates,
    replies: state.replies,
    recoveries: state.recoveredAt.length,
    firstDeliveryLagMs: state.firstDeliveryLagMs,
    longestGapMs: state.longestGap,
    errors: state.errors,
    topologyErrors: state.topologyErrors,
  };
}

module.exports = { startTopologyService, settleTopology };
