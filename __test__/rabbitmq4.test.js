'use strict';
// What RabbitMQ 4 does that 3.x did not, against the broker of AMQP_URL (test:full runs our
// tests against 4.3, 4.0 and a 4.3 node refusing the deprecated features), and what a client
// makes of it, compared with amqplib 2.3.1.
//
// A consumer timeout: RabbitMQ 4.3 cancels a consumer of a
// quorum queue that holds a delivery unsettled longer than the queue's x-consumer-timeout (a
// null delivery, as amqplib; 4.0.5 sent nothing within 15 s, its timeout closing the channel
// on a check that runs once a minute, so the test runs from 4.3). Then RabbitMQ 4.3.6 keeps the
// cancelled consumer and, once the channel settles anything, sends it what the queue holds.
// amqplib 2.3.1 takes such a delivery for an error and closes the channel; here the server is
// told to cancel the consumer, the message goes back to its queue and the channel warns.

const { describe, it, before } = require('node:test');
const assert = require('node:assert');
const { AMQP_URL, ours, latest, uniqueName, withTimeout, delay } = require('./helpers');

const CONSUMER_TIMEOUT = 5000;

// What happens to a consumer with two deliveries held past the timeout, then acked late: the
// consumer's deliveries (null for its cancel), the channel's warnings and errors, and the queue
// once it has settled.
async function holdPastTheTimeout(lib) {
  const conn = await lib.connect(AMQP_URL);
  const ch = await conn.createChannel();
  const seen = { deliveries: [], warnings: [], errors: [], queue: null };
  ch.on('warning', (w) => seen.warnings.push(w));
  ch.on('error', (e) => seen.errors.push(e));
  const queue = uniqueName('consumer-timeout');
  await ch.assertQueue(queue, { durable: true, arguments: { 'x-queue-type': 'quorum', 'x-consumer-timeout': CONSUMER_TIMEOUT } });
  ch.sendToQueue(queue, Buffer.from('first'));
  ch.sendToQueue(queue, Buffer.from('second'));
  await ch.prefetch(2);
  const held = [];
  let cancelled;
  const cancel = new Promise((resolve) => (cancelled = resolve));
  const { consumerTag } = await ch.consume(queue, (msg) => {
    seen.deliveries.push(msg && msg.content.toString());
    if (msg === null) cancelled();
    else held.push(msg);
  });
  await withTimeout(cancel, CONSUMER_TIMEOUT * 3, "the server's cancel");
  for (const msg of held) ch.ack(msg);
  // The queue, from another channel, once both messages are back and no consumer is left.
  const probe = await conn.createChannel();
  for (let i = 0; i < 50; i++) {
    seen.queue = await probe.checkQueue(queue);
    if (seen.queue.messageCount === 2 && seen.queue.consumerCount === 0) break;
    await delay(100);
  }
  await probe.deleteQueue(queue);
  await conn.close().catch(() => {});
  return { ...seen, consumerTag };
}

describe('a consumer timeout', () => {
  let version;
  before(async () => {
    const conn = await ours.connect(AMQP_URL);
    version = String(conn.connection.serverProperties.version);
    await conn.close();
  });
  const cancelsOnTimeout = () => {
    const [major, minor] = version.split('.').map(Number);
    return major > 4 || (major === 4 && minor >= 3);
  };

  it('cancels the consumer with a null delivery; a stray delivery after it goes back to the queue with a warning, the channel lives', async (t) => {
    if (!cancelsOnTimeout()) return t.skip(`RabbitMQ ${version} does not cancel a timed-out consumer (from 4.3)`);
    const result = await holdPastTheTimeout(ours);
    assert.deepStrictEqual(result.deliveries, ['first', 'second', null]);
    assert.deepStrictEqual(result.errors, []);
    assert.deepStrictEqual(result.queue && [result.queue.messageCount, result.queue.consumerCount], [2, 0]);
    for (const w of result.warnings) {
      assert.strictEqual(w.message, `Unknown consumer: ${result.consumerTag}; rejected back to its queue`);
    }
    if (version === '4.3.6') {
      // The server's fault, seen here: amqplib 2.3.1 closes the channel over it.
      assert.ok(result.warnings.length >= 1, 'RabbitMQ 4.3.6 sent the cancelled consumer a delivery');
      const amqplib = await holdPastTheTimeout(latest);
      assert.strictEqual(amqplib.errors[0]?.message, `Unknown consumer: ${amqplib.consumerTag}`);
    }
  });
});

// A node that refuses a deprecated feature (RabbitMQ 4's deprecated_features.permit.* = false)
// closes the whole connection with 541 when a client uses it: a transient non-exclusive queue
// is refused at its declare. The declare's rejection keeps amqplib's words and carries the
// server's close as its cause; amqplib 2.3.1 gives the close to the connection's 'error' only.
describe('a deprecated feature refused', () => {
  const declareTransient = async (lib) => {
    const conn = await lib.connect(AMQP_URL);
    const errors = [];
    conn.on('error', (e) => errors.push(e));
    const ch = await conn.createChannel();
    const queue = uniqueName('transient-non-exclusive');
    try {
      await ch.assertQueue(queue, { durable: false });
      await ch.deleteQueue(queue);
      await conn.close();
      return { refused: null, errors };
    } catch (refused) {
      return { refused, errors };
    }
  };

  it("a transient non-exclusive queue's declare rejects with the server's 541 as its cause", async (t) => {
    const mine = await declareTransient(ours);
    if (mine.refused === null) return t.skip('the broker takes transient non-exclusive queues');
    assert.strictEqual(mine.refused.message, 'Channel ended, no reply will be forthcoming');
    assert.strictEqual(mine.refused.cause?.code, 541);
    assert.match(mine.refused.cause.message, /transient_nonexcl_queues|deprecated/i);
    const amqplib = await declareTransient(latest);
    assert.strictEqual(amqplib.refused?.message, 'Channel ended, no reply will be forthcoming');
    assert.strictEqual(amqplib.refused.cause, undefined);
    assert.strictEqual(amqplib.errors[0]?.code, 541);
  });
});
