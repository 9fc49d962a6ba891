'use strict';
// Topology recovery (issue 37 items 1, 2, 3 and 5): a recovering model with `topology` on hands
// out channels that outlive their connection. Against the broker, through the fault proxy
// (./proxy.js), whose cuts drop the connection as a failing node does: the channels come back
// with their prefetch and consumers, exchanges, queues and bindings are declared again in the
// Java client's order, a server-named queue's new name is followed, acknowledgements of
// deliveries from a lost connection are dropped (never sent to the new one), and a consumer the
// server cancels consumes again once its queue is back.

const { describe, it, after } = require('node:test');
const assert = require('node:assert');
const { once } = require('node:events');
const { spawnSync } = require('node:child_process');
const { Proxy } = require('./proxy');
const { AMQP_URL, uniqueName, withTimeout, waitUntil, delay, openConnection, closeQuietly } = require('./helpers');

const amqp = require('..');
const amqpCallback = require('../callback_api');
const amqpLatest = require('amqplib-latest');

const FAST = { initialDelay: 20, maxDelay: 200 };

// What each test leaves, undone after the last (the observer's connection closed then).
const cleanup = [];

// A recovering model with topology recovery through a fresh proxy; events recorded in `log`.
// Both are closed after the tests.
async function recoveringThroughProxy(topology = true, extra = {}) {
  const proxy = new Proxy();
  await proxy.listen();
  const model = await amqp.connect(proxy.url(), { recovery: { ...FAST, topology, ...extra } });
  cleanup.push(async () => {
    await closeQuietly(model);
    await proxy.close();
  });
  const log = [];
  model.on('error', () => {});
  for (const name of ['disconnect', 'connect', 'queue-renamed', 'topology-error']) {
    model.on(name, (arg, more) => log.push([name, name === 'connect' ? undefined : arg, more]));
  }
  return { proxy, model, log };
}

async function cutAndRecover(proxy, channels) {
  const recovered = channels.map((ch) => once(ch, 'recovered'));
  proxy.cutNow();
  await withTimeout(Promise.all(recovered), 10000, 'the channels recovered');
}

// Messages handed to `consume`'s callback, with a way to wait for the nth.
function inbox() {
  const messages = [];
  const box = {
    messages,
    take: (message) => {
      messages.push(message);
    },
    async count(n, what = `${n} messages`) {
      await waitUntil(() => messages.length >= n, 5000, what);
    },
  };
  return box;
}

describe('topology recovery', () => {
  // Another connection, straight to the broker, to look at and change what the model left;
  // closed last.
  let observer;
  after(async () => {
    for (const step of cleanup.reverse()) {
      try {
        await step();
      } catch {
        // gone already
      }
    }
    await closeQuietly(observer);
  });

  async function observe() {
    observer ??= await openConnection(amqp, AMQP_URL);
    const ch = await observer.createChannel();
    ch.on('error', () => {});
    return ch;
  }

  // Deletes what a test declared, after the last test (by the observer, which outlives it).
  const deleteQueueAfter = (queue) => cleanup.push(async () => (await observe()).deleteQueue(queue));
  const deleteExchangeAfter = (exchange) => cleanup.push(async () => (await observe()).deleteExchange(exchange));

  it('a channel keeps its exchange, server-named queue, binding, prefetch and consumer across a cut', async () => {
    const { proxy, model, log } = await recoveringThroughProxy();
    const ch = await model.createConfirmChannel();
    const exchange = uniqueName('topology-x');
    await ch.assertExchange(exchange, 'direct', { autoDelete: true });
    const { queue } = await ch.assertQueue('', { exclusive: true });
    await ch.bindQueue(queue, exchange, 'k');
    await ch.prefetch(3);
    const box = inbox();
    const { consumerTag } = await ch.consume(queue, box.take);

    ch.publish(exchange, 'k', Buffer.from('before'));
    await box.count(1);
    await cutAndRecover(proxy, [ch]);

    const renamed = log.find(([name]) => name === 'queue-renamed');
    assert.ok(renamed, 'the server-named queue got a new name');
    assert.strictEqual(renamed[1].from, queue);
    assert.notStrictEqual(renamed[1].to, queue);
    const now = renamed[1].to;
    // Exclusive: only its own connection may look at it.
    assert.strictEqual((await ch.checkQueue(now)).consumerCount, 1, 'the consumer is back on the new queue');

    // Through the binding, and by the old name (the model maps it to the new one); five
    // unacked deliveries stop at the prefetch of 3.
    for (let i = 0; i < 3; i++) ch.publish(exchange, 'k', Buffer.from(`after ${i}`));
    ch.sendToQueue(queue, Buffer.from('by the old name'));
    ch.sendToQueue(queue, Buffer.from('by the old name, again'));
    await ch.waitForConfirms();
    await box.count(4);
    await delay(100);
    assert.strictEqual(box.messages.length, 4, 'prefetch 3 holds back the rest');
    const tags = box.messages.map((m) => m.fields.deliveryTag);
    assert.deepStrictEqual(tags, [1, 2, 3, 4], 'the new channel counts on from the last');
    assert.strictEqual(box.messages[3].fields.consumerTag, consumerTag, 'the consumer keeps its tag');
    ch.ack(box.messages[3], true);
    await box.count(6);
    assert.deepStrictEqual(box.messages.slice(1).map((m) => m.content.toString()), ['after 0', 'after 1', 'after 2', 'by the old name', 'by the old name, again']);
    assert.strictEqual(ch.droppedAcks, 0);
    await model.close();
  });

  it('acknowledgements of deliveries from a lost connection are dropped and counted; the channel stays open', async () => {
    const { proxy, model } = await recoveringThroughProxy();
    const ch = await model.createChannel();
    const q = uniqueName('topology-acks');
    await ch.assertQueue(q); // durable: RabbitMQ 4.x may refuse transient shared queues
    deleteQueueAfter(q);
    const box = inbox();
    await ch.consume(q, box.take);
    ch.sendToQueue(q, Buffer.from('1'));
    ch.sendToQueue(q, Buffer.from('2'));
    await box.count(2);
    const old = box.messages.slice(0);
    await cutAndRecover(proxy, [ch]);
    // The two come again (never acked), under tags past the old ones.
    await box.count(4);
    const again = box.messages.slice(2);
    assert.deepStrictEqual(again.map((m) => m.content.toString()).sort(), ['1', '2']);
    assert.ok(again.every((m) => m.fields.deliveryTag > 2 && m.fields.redelivered));

    let closed = false;
    ch.on('close', () => {
      closed = true;
    });
    ch.ack(old[0]);
    ch.nack(old[1], false, true);
    ch.reject(old[0]);
    assert.strictEqual(ch.droppedAcks, 3);
    for (const m of again) ch.ack(m);
    // Were an old tag sent, the server would close the channel (406 unknown delivery tag).
    const look = await observe();
    await delay(100);
    assert.strictEqual(closed, false);
    const { messageCount } = await look.checkQueue(q);
    assert.strictEqual(messageCount, 0, 'the new deliveries were acked on the new channel');
    await model.close();
    assert.strictEqual(closed, true, "'close' once the model closes");
  });

  it('methods called while disconnected wait for the recovery, or fail after waitTimeout', async () => {
    const { proxy, model } = await recoveringThroughProxy({ waitTimeout: 300 });
    const ch = await model.createChannel();
    const lost = once(ch, 'lost');
    proxy.stall();
    proxy.cutNow();
    await lost;
    assert.throws(() => ch.publish('', 'nowhere', Buffer.from('x')), { name: 'IllegalOperationError', message: 'Channel closed' });
    // The proxy lets links through again after the deadline: the first call fails, the
    // second waits and succeeds.
    const first = ch.checkExchange('amq.direct');
    await assert.rejects(first, /checkExchange: the connection was not recovered within 300 ms/);
    const recovered = once(ch, 'recovered');
    proxy.resume();
    const second = ch.assertQueue('', { exclusive: true });
    await withTimeout(recovered, 10000, 'recovered');
    assert.match((await second).queue, /^amq\.gen-/);
    await model.close();
    await assert.rejects(ch.checkExchange('amq.direct'), { name: 'IllegalOperationError' });
  });

  it('a consumer the server cancels consumes again once its queue is back', async () => {
    const { proxy, model } = await recoveringThroughProxy();
    const ch = await model.createChannel();
    const q = uniqueName('topology-cancelled');
    await ch.assertQueue(q);
    const box = inbox();
    const { consumerTag } = await ch.consume(q, box.take, { noAck: true });
    const cancelled = once(ch, 'consumer-cancelled');
    const look = await observe();
    await look.deleteQueue(q);
    assert.deepStrictEqual((await cancelled)[0], { consumerTag, queue: q });
    assert.deepStrictEqual(box.messages, [], 'no null delivery');
    const recovered = once(ch, 'consumer-recovered');
    await delay(300);
    await look.assertQueue(q);
    deleteQueueAfter(q);
    assert.deepStrictEqual((await withTimeout(recovered, 10000, 'consumer-recovered'))[0], { consumerTag, queue: q });
    look.sendToQueue(q, Buffer.from('back'));
    await box.count(1);
    assert.strictEqual(box.messages[0].fields.consumerTag, consumerTag);
    await model.close();
  });

  it('a refused entity is reported and skipped, and the replay goes on', async () => {
    const errors = [];
    const { proxy, model } = await recoveringThroughProxy({ onError: (err, entity) => errors.push([err.code, entity.kind, entity.name]) });
    const ch = await model.createChannel();
    const changed = uniqueName('topology-changed');
    const kept = uniqueName('topology-kept');
    await ch.assertQueue(changed);
    await ch.assertQueue(kept, { exclusive: true });
    deleteQueueAfter(changed);
    const look = await observe();
    // While the model is away, the queue is declared again with other arguments: its replay is
    // refused (406), and the exclusive queue after it is declared all the same.
    proxy.stall();
    proxy.cutNow();
    await once(ch, 'lost');
    await look.deleteQueue(changed);
    await look.assertQueue(changed, { arguments: { 'x-max-length': 5 } });
    const recovered = once(ch, 'recovered');
    proxy.resume();
    await withTimeout(recovered, 10000, 'recovered');
    assert.deepStrictEqual(errors, [[406, 'queue', changed]]);
    assert.strictEqual((await ch.checkQueue(kept)).queue, kept, 'the exclusive queue was declared again');
    await model.close();
  });

  it('a filter leaves entities out of the record; a channel error closes the channel for good', async () => {
    const { proxy, model } = await recoveringThroughProxy({ filter: (entity) => !(entity.kind === 'queue' && entity.name.includes('left-out')) });
    const ch = await model.createChannel();
    const leftOut = uniqueName('topology-left-out');
    await ch.assertQueue(leftOut, { exclusive: true });
    assert.strictEqual(model._topology.size.queues, 0);
    await cutAndRecover(proxy, [ch]);
    const errors = [];
    ch.on('error', (err) => errors.push(err.code));
    const closed = new Promise((resolve) => ch.once('close', resolve)); // once() would reject at 'error'
    await assert.rejects(ch.checkQueue(leftOut), { code: 404 });
    await closed;
    assert.deepStrictEqual(errors, [404]);
    assert.throws(() => ch.publish('', 'x', Buffer.from('x')), { name: 'IllegalOperationError' });
    await assert.rejects(ch.assertQueue(''), { name: 'IllegalOperationError' });
    await model.close();
  });

  // 5,000 in test:full (the figure), fewer in the quick loop: the broker takes a few ms
  // a queue.
  const CHURN = Number(process.env.TOPOLOGY_CHURN_QUEUES) || 1000;
  it(`the record does not grow over ${CHURN} auto-delete queues declared and dropped`, async () => {
    const { proxy, model } = await recoveringThroughProxy();
    // Eight channels at a time: the broker takes a few ms a queue.
    const channels = await Promise.all(Array.from({ length: 8 }, () => model.createChannel()));
    const exchange = uniqueName('topology-churn');
    await channels[0].assertExchange(exchange, 'fanout', { autoDelete: false, durable: false });
    deleteExchangeAfter(exchange);
    const before = model._topology.size;
    const churn = async (ch) => {
      for (let i = 0; i < CHURN / channels.length; i++) {
        const { queue } = await ch.assertQueue('', { autoDelete: true });
        await ch.bindQueue(queue, exchange, '');
        const { consumerTag } = await ch.consume(queue, () => {}, { noAck: true });
        // Gone with its last consumer (auto-delete), or deleted.
        if (i % 2 === 0) await ch.cancel(consumerTag);
        else await ch.deleteQueue(queue);
      }
    };
    await Promise.all(channels.map(churn));
    assert.deepStrictEqual(model._topology.size, before);
    assert.deepStrictEqual(before, { exchanges: 1, queues: 0, bindings: 0, aliases: 0, consumers: 0, channels: 8 });
    await model.close();
  });

  it("a consumer's callback acks and publishes while the recovery is still setting up: nothing dropped, the channel stays", async () => {
    const { proxy, model } = await recoveringThroughProxy();
    const ch = await model.createChannel();
    const q = uniqueName('topology-gap-in');
    const out = uniqueName('topology-gap-out');
    await ch.assertQueue(q);
    await ch.assertQueue(out);
    deleteQueueAfter(q);
    deleteQueueAfter(out);
    await ch.prefetch(5);
    let handled = 0;
    // Forward, then ack: the first deliveries of the new channel come with its consume-ok,
    // before the recovery hands the channel back.
    await ch.consume(q, (msg) => {
      ch.sendToQueue(out, msg.content);
      ch.ack(msg);
      handled++;
    });
    let closed = false;
    ch.on('close', () => {
      closed = true;
    });
    proxy.stall();
    proxy.cutNow();
    await once(ch, 'lost');
    const look = await observe();
    for (let i = 0; i < 30; i++) look.sendToQueue(q, Buffer.from(String(i)));
    const recovered = once(ch, 'recovered');
    proxy.resume();
    await withTimeout(recovered, 10000, 'recovered');
    await waitUntil(() => handled === 30, 5000, '30 handled');
    await delay(100);
    assert.strictEqual(ch.droppedAcks, 0);
    assert.strictEqual(closed, false);
    assert.strictEqual((await look.checkQueue(q)).messageCount, 0, 'every delivery acked');
    assert.strictEqual((await look.checkQueue(out)).messageCount, 30, 'every forward sent');
    await model.close();
  });

  it('a consume refused while recovering (an exclusive consumer elsewhere) is reported and left out; the rest recover', async () => {
    const errors = [];
    const { proxy, model } = await recoveringThroughProxy({ onError: (err, entity) => errors.push([err.code, entity.kind]) });
    const connects = [];
    model.on('connect', () => connects.push(Date.now()));
    const ch = await model.createChannel();
    const taken = uniqueName('topology-taken');
    const kept = uniqueName('topology-kept-consumer');
    await ch.assertQueue(taken);
    await ch.assertQueue(kept);
    deleteQueueAfter(taken);
    deleteQueueAfter(kept);
    // One consumer before the refused one (consumed on the channel the refusal closes), one after.
    const box = inbox();
    const before = inbox();
    const keptBefore = uniqueName('topology-kept-before');
    await ch.assertQueue(keptBefore);
    deleteQueueAfter(keptBefore);
    await ch.consume(keptBefore, before.take, { noAck: true });
    await ch.consume(taken, () => {}, { noAck: true, exclusive: true });
    await ch.consume(kept, box.take, { noAck: true });
    proxy.stall();
    proxy.cutNow();
    await once(ch, 'lost');
    const look = await observe();
    await delay(100); // the broker lets go of the lost connection's consumers
    await look.consume(taken, () => {}, { noAck: true, exclusive: true });
    const recovered = once(ch, 'recovered');
    proxy.resume();
    await withTimeout(recovered, 10000, 'recovered');
    assert.deepStrictEqual(errors, [[403, 'consumer']]);
    assert.strictEqual(connects.length, 1, 'one attempt was enough');
    look.sendToQueue(kept, Buffer.from('still here'));
    look.sendToQueue(keptBefore, Buffer.from('here too'));
    await box.count(1);
    await before.count(1);
    assert.strictEqual(model._topology.size.consumers, 2);
    assert.strictEqual((await look.checkQueue(keptBefore)).consumerCount, 1);
    await model.close();
  });

  it('close() while the connection goes settles, and the channel does not come back', async () => {
    const { proxy, model } = await recoveringThroughProxy();
    const ch = await model.createChannel();
    const other = await model.createChannel();
    const events = [];
    for (const name of ['close', 'recovered']) ch.on(name, () => events.push(name));
    proxy.stall(); // the close-ok never comes
    const closing = ch.close();
    await delay(50);
    proxy.cutNow();
    await withTimeout(closing, 5000, 'close() settled');
    const recovered = once(other, 'recovered');
    proxy.resume();
    await withTimeout(recovered, 10000, 'the other channel recovered');
    assert.deepStrictEqual(events, ['close']);
    assert.strictEqual(model._topology.size.channels, 1);
    await model.close();
  });

  it('waitForConfirms while disconnected, with publishes unconfirmed on the lost connection, rejects', async () => {
    const { proxy, model } = await recoveringThroughProxy();
    const ch = await model.createConfirmChannel();
    const outcomes = [];
    proxy.stall();
    for (let i = 0; i < 3; i++) ch.sendToQueue('amq.nowhere', Buffer.from('x'), {}, (err) => outcomes.push(err ? err.message : 'ok'));
    const lost = once(ch, 'lost');
    proxy.cutNow();
    await lost;
    assert.deepStrictEqual(outcomes, ['channel closed', 'channel closed', 'channel closed']);
    await assert.rejects(ch.waitForConfirms(), /publishes were unconfirmed when the connection was lost/);
    const recovered = once(ch, 'recovered');
    proxy.resume();
    await withTimeout(recovered, 10000, 'recovered');
    await assert.doesNotReject(ch.waitForConfirms(), 'a new wait, on the new channel');
    await model.close();
  });

  it('the record: an unbind forgets its bind whatever the arguments look like; a closed channel lets go of auto-delete queues', async () => {
    const { proxy, model } = await recoveringThroughProxy();
    const ch = await model.createChannel();
    const exchange = uniqueName('topology-headers');
    await ch.assertExchange(exchange, 'headers', { autoDelete: false, durable: false });
    deleteExchangeAfter(exchange);
    const { queue } = await ch.assertQueue('', { exclusive: true });
    await ch.bindQueue(queue, exchange, '', {});
    await ch.bindQueue(queue, exchange, '', { a: 1, 'x-match': 'any' });
    await ch.unbindQueue(queue, exchange, '');
    await ch.unbindQueue(queue, exchange, '', { 'x-match': 'any', a: 1 });
    assert.strictEqual(model._topology.size.bindings, 0);
    // Auto-delete queues consumed on channels that are then closed: gone from the server and
    // from the record.
    const before = model._topology.size.queues;
    for (let i = 0; i < 5; i++) {
      const rpc = await model.createChannel();
      const reply = await rpc.assertQueue('', { autoDelete: true });
      await rpc.consume(reply.queue, () => {}, { noAck: true });
      await rpc.close();
    }
    assert.strictEqual(model._topology.size.queues, before);
    await model.close();
  });

  it('cuts in every phase of a recovery (the handshake, the channels, the record, the consumers): it gets there, each publish settled once', async () => {
    const { proxy, model, log } = await recoveringThroughProxy({ republish: true });
    const pub = await model.createConfirmChannel();
    const sub = await model.createChannel();
    const exchange = uniqueName('topology-phases');
    const q = uniqueName('topology-phases-q');
    await pub.assertExchange(exchange, 'direct', { autoDelete: false, durable: false });
    await pub.assertQueue(q);
    const { queue: reply } = await pub.assertQueue('', { exclusive: true });
    await pub.bindQueue(q, exchange, 'k');
    await pub.bindQueue(reply, exchange, 'reply');
    deleteQueueAfter(q);
    deleteExchangeAfter(exchange);
    await sub.prefetch(20);
    const received = new Map();
    await sub.consume(q, (msg) => {
      const n = Number(msg.content.toString());
      received.set(n, (received.get(n) ?? 0) + 1);
      sub.ack(msg);
    });
    const outcomes = new Map();
    let sent = 0;
    const publishSome = (count) => {
      for (let i = 0; i < count; i++) {
        const n = sent++;
        pub.publish(exchange, 'k', Buffer.from(String(n)), {}, (err) => outcomes.set(n, [...(outcomes.get(n) ?? []), err ? err.message : 'ok']));
      }
    };
    const failedAttempts = [];
    model.on('connect-failed', (err) => failedAttempts.push(err.message));
    const before = model._topology.size;
    // What a whole recovery reads from the broker, from its handshake to its last consumer.
    const measured = new Promise((resolve) => proxy.once('link', resolve));
    const first = Promise.all([once(pub, 'recovered'), once(sub, 'recovered')]);
    proxy.cutNow();
    await withTimeout(first, 15000, 'recovered');
    const whole = (await measured).stats.down;
    // Then the first link after each cut is itself cut after a share of that many bytes from
    // the broker: inside the handshake, the channels' opening, the record's replay or the
    // consumers'. Publishes go on meanwhile.
    const shares = [0, 0.05, 0.3, 0.5, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9];
    for (const share of shares) {
      proxy.once('link', (link) => {
        link.cutAt.down = Math.floor(whole * share);
      });
      publishSome(20);
      const recovered = Promise.all([once(pub, 'recovered'), once(sub, 'recovered')]);
      proxy.cutNow();
      publishSome(20);
      await withTimeout(recovered, 15000, `recovered after a cut at ${share} of ${whole} bytes`);
    }
    assert.ok(failedAttempts.length >= shares.length - 1, `${failedAttempts.length} attempts cut of ${shares.length}: ${failedAttempts}`);
    publishSome(100);
    await withTimeout(pub.waitForConfirms(), 10000, 'every publish confirmed');
    await waitUntil(() => received.size === sent, 10000, 'every message consumed');
    assert.strictEqual(outcomes.size, sent);
    for (const [n, seen] of outcomes) assert.deepStrictEqual(seen, ['ok'], `publish ${n}`);
    const renames = log.filter(([name]) => name === 'queue-renamed').length;
    assert.ok(renames >= shares.length, `the reply queue renamed at each recovery (${renames})`);
    const after = model._topology.size;
    assert.deepStrictEqual({ ...after, aliases: 0 }, { ...before, aliases: 0 }, 'the record holds what it held');
    assert.ok(after.aliases <= 9, `${after.aliases} old names kept`);
    const { consumerCount } = await (await observe()).checkQueue(q);
    assert.strictEqual(consumerCount, 1);
    await model.close();
  });

  // A confirm channel with republish: publishes in flight when the connection goes, and those
  // made while it is away, are sent once it is back; each callback is called once.
  async function republishing(republish) {
    const fixture = await recoveringThroughProxy({ republish });
    const ch = await fixture.model.createConfirmChannel();
    const q = uniqueName('topology-republish');
    await ch.assertQueue(q);
    deleteQueueAfter(q);
    const outcomes = new Map(); // n -> [outcomes]
    const publish = (n) =>
      ch.sendToQueue(q, Buffer.from(String(n)), { messageId: String(n) }, (err) => {
        if (!outcomes.has(n)) outcomes.set(n, []);
        outcomes.get(n).push(err ? err.message : 'ok');
      });
    return { ...fixture, ch, q, outcomes, publish };
  }

  // Every message in the queue, read off by another connection: [n, marked as republished].
  async function drain(q) {
    const look = await observe();
    const seen = [];
    for (let m = await look.get(q, { noAck: true }); m; m = await look.get(q, { noAck: true })) {
      seen.push([Number(m.content.toString()), m.properties.headers?.['x-republished'] === true]);
    }
    return seen;
  }

  it('republish: what was unconfirmed at the cut and what was published while away arrive; each publish settles once', async () => {
    const { proxy, ch, q, outcomes, publish } = await republishing(true);
    for (let n = 0; n < 50; n++) publish(n);
    await ch.waitForConfirms();
    // Confirms stop coming (the broker's answers are held), then the connection goes.
    proxy.stall();
    for (let n = 50; n < 100; n++) publish(n);
    await delay(50);
    const lost = once(ch, 'lost');
    proxy.cutNow();
    await lost;
    for (let n = 100; n < 150; n++) assert.strictEqual(publish(n), true, 'held, with room');
    const recovered = once(ch, 'recovered');
    proxy.resume();
    await withTimeout(recovered, 10000, 'recovered');
    for (let n = 150; n < 200; n++) publish(n);
    await withTimeout(ch.waitForConfirms(), 10000, 'every publish confirmed');
    assert.strictEqual(outcomes.size, 200);
    for (const [n, seen] of outcomes) assert.deepStrictEqual(seen, ['ok'], `publish ${n} settled once, confirmed`);
    const seen = await drain(q);
    const numbers = new Set(seen.map(([n]) => n));
    assert.strictEqual(numbers.size, 200, 'every message arrived');
    // Duplicates only among those unconfirmed at the cut, and those sent again are marked.
    const counts = new Map();
    for (const [n] of seen) counts.set(n, (counts.get(n) ?? 0) + 1);
    for (const [n, count] of counts) if (count > 1) assert.ok(n >= 50 && n < 100, `${n} twice`);
    for (const [n, marked] of seen) if (marked) assert.ok(n >= 50 && n < 100, `${n} marked`);
    assert.ok(seen.some(([n, marked]) => n >= 50 && n < 100 && marked), 'the unconfirmed were sent again, marked');
    assert.ok(seen.every(([n, marked]) => n < 50 || n >= 100 || marked || counts.get(n) === 1));
  });

  it('republish: beyond its bound publish returns false and drain follows; past its deadline a held publish fails once', async () => {
    const { proxy, ch, outcomes, publish } = await republishing({ maxMessages: 3, timeout: 300 });
    proxy.stall();
    proxy.cutNow();
    await once(ch, 'lost');
    assert.deepStrictEqual([publish(0), publish(1), publish(2), publish(3)], [true, true, false, false]);
    await delay(400);
    assert.deepStrictEqual([...outcomes.values()].flat(), Array(4).fill('publish not confirmed: the connection was not recovered within 300 ms'));
    await assert.doesNotReject(ch.waitForConfirms(), 'nothing left unsettled');
    publish(4);
    publish(5);
    publish(6);
    const drained = once(ch, 'drain');
    const recovered = once(ch, 'recovered');
    proxy.resume();
    await withTimeout(Promise.all([recovered, drained]), 10000, "recovered, then 'drain'");
    await withTimeout(ch.waitForConfirms(), 10000, 'confirms');
    assert.deepStrictEqual(outcomes.get(6), ['ok']);
    assert.deepStrictEqual([...outcomes.values()].flat().length, 7);
  });

  describe('a drained close', () => {
    it("cancels the consumers, waits for the callbacks in flight and their acks, and for the confirms", async () => {
      const model = await amqp.connect(AMQP_URL, { recovery: { ...FAST, topology: true } });
      cleanup.push(() => closeQuietly(model));
      const ch = await model.createChannel();
      const pub = await model.createConfirmChannel();
      const q = uniqueName('topology-drain');
      await ch.assertQueue(q);
      deleteQueueAfter(q);
      await ch.prefetch(10);
      let handled = 0;
      let first;
      const started = new Promise((resolve) => {
        first = resolve;
      });
      // Half the callbacks return a promise; the other half ack later from a timer (only the
      // native core's count of unacked deliveries tells those apart from done).
      await ch.consume(q, (msg) => {
        first();
        const n = Number(msg.content.toString());
        if (n % 2 === 0) {
          return delay(150).then(() => {
            handled++;
            ch.ack(msg);
          });
        }
        setTimeout(() => {
          handled++;
          ch.ack(msg);
        }, 200);
        return undefined;
      });
      for (let n = 0; n < 10; n++) pub.sendToQueue(q, Buffer.from(String(n)));
      await started;
      const confirms = [];
      for (let n = 10; n < 15; n++) pub.sendToQueue(q, Buffer.from(String(n)), {}, (err) => confirms.push(err ? err.message : 'ok'));
      const outcome = await model.close({ drain: { timeout: 5000 } });
      assert.deepStrictEqual(outcome, { drained: true });
      assert.strictEqual(handled, 10, 'the ten in flight were handled');
      assert.deepStrictEqual(confirms, Array(5).fill('ok'), 'the late publishes were confirmed before the close');
      const { messageCount, consumerCount } = await (await observe()).checkQueue(q);
      assert.deepStrictEqual({ messageCount, consumerCount }, { messageCount: 5, consumerCount: 0 }, 'the ten acked, the five after the cancel left in the queue');
    });

    it('closes all the same at its deadline, saying it did not drain', async () => {
      const model = await amqp.connect(AMQP_URL, { recovery: { ...FAST, topology: true } });
      cleanup.push(() => closeQuietly(model));
      const ch = await model.createChannel();
      const q = uniqueName('topology-drain-late');
      await ch.assertQueue(q);
      deleteQueueAfter(q);
      const got = new Promise((resolve) => ch.consume(q, resolve)); // never acked
      ch.sendToQueue(q, Buffer.from('held'));
      await got;
      const closed = once(ch, 'close');
      const began = Date.now();
      assert.deepStrictEqual(await model.close({ drain: { timeout: 200 } }), { drained: false });
      assert.ok(Date.now() - began >= 200);
      await closed;
      await assert.rejects(model.close({ drain: { timeout: -1 } }), TypeError);
    });
  });

  it('republish: a publish keeps its own content and options; a throwing callback stops no other; past twice the bound, refused', async () => {
    const { proxy, ch, q, outcomes } = await republishing({ maxMessages: 5 });
    const thrown = [];
    ch.on('handler-error', (err) => thrown.push(err.message));
    proxy.stall();
    proxy.cutNow();
    await once(ch, 'lost');
    // One options object and one buffer, changed between publishes, as a loop does.
    const options = { messageId: '', headers: { n: -1 } };
    const body = Buffer.alloc(1);
    const results = [];
    for (let n = 0; n < 11; n++) {
      options.messageId = String(n);
      options.headers.n = n;
      body[0] = n;
      results.push(
        ch.sendToQueue(q, body, options, (err) => {
          outcomes.set(n, [...(outcomes.get(n) ?? []), err ? err.message : 'ok']);
          if (n === 0) throw new Error('a callback that throws');
        }),
      );
    }
    assert.deepStrictEqual(results, [true, true, true, true, false, false, false, false, false, false, false]);
    // Its callback is told after publish returned, never inside it (as amqplib's callbacks).
    assert.strictEqual(outcomes.get(10), undefined);
    await new Promise((resolve) => process.nextTick(resolve));
    assert.deepStrictEqual(outcomes.get(10), ['publish refused: too many publishes wait for the connection to be recovered'], 'the eleventh, past twice the bound');
    const recovered = once(ch, 'recovered');
    proxy.resume();
    await withTimeout(recovered, 10000, 'recovered');
    await withTimeout(ch.waitForConfirms(), 10000, 'confirms');
    for (let n = 0; n < 10; n++) assert.deepStrictEqual(outcomes.get(n), ['ok'], `publish ${n}`);
    await new Promise((resolve) => setImmediate(resolve)); // 'handler-error' comes on the next turn
    assert.deepStrictEqual(thrown, ['a callback that throws']);
    const look = await observe();
    const seen = [];
    for (let m = await look.get(q, { noAck: true }); m; m = await look.get(q, { noAck: true })) {
      seen.push([m.properties.messageId, m.properties.headers.n, m.content[0]]);
    }
    assert.deepStrictEqual(seen, Array.from({ length: 10 }, (_, n) => [String(n), n, n]));
  });

  it('the callback API: the same recovery, with callbacks', async () => {
    const proxy = new Proxy();
    await proxy.listen();
    cleanup.push(() => proxy.close());
    const call = (fn) => new Promise((resolve, reject) => fn((err, value) => (err ? reject(err) : resolve(value))));
    const model = await call((cb) => amqpCallback.connect(proxy.url(), { recovery: { ...FAST, topology: { republish: true } } }, cb));
    model.on('error', () => {});
    cleanup.push(() => call((cb) => model.close(cb)).catch(() => {}));
    const ch = await call((cb) => model.createConfirmChannel(cb));
    const renamed = new Promise((resolve) => model.once('queue-renamed', resolve)); // once() would reject at the cut's 'error'
    const { queue } = await call((cb) => ch.assertQueue('', { exclusive: true }, cb));
    assert.strictEqual(ch.prefetch(5, false, () => {}), ch, 'a callback method returns the channel');
    const box = inbox();
    const { consumerTag } = await call((cb) => ch.consume(queue, box.take, {}, cb));
    await cutAndRecover(proxy, [ch]);
    assert.strictEqual((await renamed).from, queue);
    const outcomes = [];
    ch.sendToQueue(queue, Buffer.from('after'), {}, (err) => outcomes.push(err ? err.message : 'ok'));
    await call((cb) => ch.waitForConfirms(cb));
    await box.count(1);
    assert.strictEqual(box.messages[0].fields.consumerTag, consumerTag);
    assert.deepStrictEqual(outcomes, ['ok']);
    ch.ack(box.messages[0]);
    const closedWith = await call((cb) => model.close({ drain: { timeout: 2000 } }, cb));
    assert.deepStrictEqual(closedWith, { drained: true });
    await assert.rejects(call((cb) => ch.checkQueue(queue, cb)), { name: 'IllegalOperationError' });
  });

  it("a bind of a server-named queue made while disconnected goes to the queue's name after the recovery", async () => {
    const { proxy, model, log } = await recoveringThroughProxy();
    const ch = await model.createChannel();
    const exchange = uniqueName('topology-rebind');
    await ch.assertExchange(exchange, 'direct');
    deleteExchangeAfter(exchange);
    const { queue } = await ch.assertQueue('', { exclusive: true });
    const renames = () => log.filter(([name]) => name === 'queue-renamed').map(([, names]) => names);
    const lost = once(ch, 'lost');
    proxy.stall();
    proxy.cutNow();
    await lost;
    const bound = ch.bindQueue(queue, exchange, 'k'); // by the first name, while away
    const recovered = once(ch, 'recovered');
    proxy.resume();
    await withTimeout(recovered, 10000, 'recovered');
    await bound;
    assert.strictEqual(renames().length, 1);
    assert.deepStrictEqual(log.filter(([name]) => name === 'topology-error'), []);
    ch.publish(exchange, 'k', Buffer.from('through the bind'));
    let got = false;
    for (let i = 0; i < 50 && !got; i++) got = !!(await ch.get(queue, { noAck: true })) || (await delay(20), false);
    assert.ok(got, 'the message came through the binding made while away');
    await model.close();
  });

  it("a channel error the service causes while its consumers come back closes the channel for good, with 'error', as outside recovery", async () => {
    const { proxy, model } = await recoveringThroughProxy();
    const ch = await model.createChannel();
    const q = uniqueName('topology-own-error');
    await ch.assertQueue(q);
    deleteQueueAfter(q);
    let recovering = false;
    const delivered = [];
    await ch.consume(q, (msg) => {
      delivered.push(msg.content.toString());
      // A publish to an exchange that does not exist: the server closes the channel (404).
      if (recovering) ch.publish(uniqueName('no-such-exchange'), '', Buffer.from('x'));
    });
    // A second consumer: its queue is looked for while the first's delivery comes, so the
    // recovery is still bringing consumers back.
    const other = uniqueName('topology-own-error-2');
    await ch.assertQueue(other);
    deleteQueueAfter(other);
    await ch.consume(other, () => {});
    const errors = [];
    ch.on('error', (err) => errors.push(err.code));
    const lost = once(ch, 'lost');
    proxy.stall();
    proxy.cutNow();
    await lost;
    recovering = true;
    // Waiting in the queue: it comes as soon as the consumer is back, before the recovery is over.
    (await observe()).sendToQueue(q, Buffer.from('waiting'));
    const closed = new Promise((resolve) => ch.once('close', resolve)); // once() rejects at 'error'
    const reconnected = once(model, 'connect');
    proxy.resume();
    await withTimeout(closed, 10000, "the channel's close");
    await withTimeout(reconnected, 10000, 'the model reconnected');
    assert.deepStrictEqual(errors, [404]);
    await delay(200);
    assert.deepStrictEqual(delivered, ['waiting'], 'consumed once: not again on another channel');
    await assert.rejects(ch.checkQueue(q), { name: 'IllegalOperationError' });
    await model.close();
  });

  it('waitForConfirms of a closed confirm channel (no republish) resolves with nothing pending, as amqplib', async () => {
    const { model } = await recoveringThroughProxy();
    const ch = await model.createConfirmChannel();
    await ch.close();
    await ch.waitForConfirms();
    const latest = await openConnection(amqpLatest, AMQP_URL);
    const theirs = await latest.createConfirmChannel();
    await theirs.close();
    await theirs.waitForConfirms();
    await latest.close();
    await model.close();
  });

  it("a consumer the server cancelled, whose consume again is refused (its queue taken by an exclusive consumer once looked for): reported, and the channel comes back with its other consumers", async () => {
    const errors = [];
    const { proxy, model } = await recoveringThroughProxy({ onError: (err, entity) => errors.push([err.code, entity.kind]) });
    const ch = await model.createChannel();
    const taken = uniqueName('topology-taken');
    const other = uniqueName('topology-other');
    await ch.assertQueue(taken);
    await ch.assertQueue(other);
    deleteQueueAfter(taken);
    deleteQueueAfter(other);
    await ch.consume(taken, () => {});
    const box = inbox();
    await ch.consume(other, box.take);
    let closed = false;
    ch.on('close', () => {
      closed = true;
    });
    const look = await observe();
    const cancelled = once(ch, 'consumer-cancelled');
    await look.deleteQueue(taken);
    await cancelled;
    // Declared again and consumed exclusively elsewhere while the model's link is held (so that
    // its looks for the queue wait): then its look finds the queue, and its consume is refused
    // (403).
    proxy.stall();
    const recovered = once(ch, 'recovered');
    await look.assertQueue(taken);
    await look.consume(taken, () => {}, { exclusive: true });
    proxy.resume();
    await withTimeout(recovered, 10000, "the channel's recovery");
    assert.deepStrictEqual(errors, [[403, 'consumer']]);
    assert.strictEqual(closed, false);
    look.sendToQueue(other, Buffer.from('still consumed'));
    await box.count(1);
    await model.close();
  });

  it("the callback API: a callback's throw is an uncaught exception, as in any callback API, not an unhandled rejection", () => {
    const script = `
      const amqp = require(${JSON.stringify(require.resolve('../callback_api'))});
      process.on('unhandledRejection', (err) => { console.log('unhandled rejection: ' + err.message); process.exit(0); });
      process.on('uncaughtException', (err) => { console.log('uncaught exception: ' + err.message); process.exit(0); });
      amqp.connect(${JSON.stringify(AMQP_URL)}, { recovery: { topology: true } }, (err, model) => {
        if (err) throw err;
        model.createChannel((err) => { throw new Error('thrown by the callback'); });
      });`;
    const run = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 20000 });
    assert.strictEqual(run.stdout.trim(), 'uncaught exception: thrown by the callback', run.stderr);
  });

  it('options are checked', async () => {
    await assert.rejects(amqp.connect(AMQP_URL, { recovery: { topology: { filter: 'yes' } } }), /recovery.topology.filter must be a function/);
    await assert.rejects(amqp.connect(AMQP_URL, { recovery: { topology: { waitTimeout: -1 } } }), /waitTimeout/);
    await assert.rejects(amqp.connect(AMQP_URL, { recovery: { topology: { republish: { maxBytes: 0 } } } }), /republish.maxBytes must be a number > 0/);
  });
});
