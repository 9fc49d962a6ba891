'use strict';
// Tracing channels (issue 28, lib/tracing.js): a subscriber to each sees every field and the
// events in order, for both APIs, with errors, against the broker (and a scripted server for
// what a broker will not do on demand). npm test runs this on both transports.

const { describe, it, afterEach } = require('node:test');
const assert = require('node:assert');
const dc = require('node:diagnostics_channel');
const { AsyncLocalStorage } = require('node:async_hooks');
const defs = require('../lib/defs');
const tracing = require('../lib/tracing');
const { describeNode } = require('../lib/nodes');
const { fakeServer } = require('./fake_server');
const { AMQP_URL, ours, oursCallback, uniqueName } = require('./helpers');

const BROKER = new URL(AMQP_URL);
const PHASES = ['start', 'end', 'asyncStart', 'asyncEnd', 'error'];

// Subscribes to a tracing channel; records `phase` and a snapshot of the context's own fields
// at each event (the context object itself too, for identity checks).
const unsubscribers = [];
function watch(name) {
  const events = [];
  const handlers = Object.fromEntries(PHASES.map((phase) => [phase, (context) => events.push({ phase, context, fields: { ...context } })]));
  dc.tracingChannel(name).subscribe(handlers);
  unsubscribers.push(() => dc.tracingChannel(name).unsubscribe(handlers));
  return events;
}
function listen(name) {
  const messages = [];
  const handler = (message) => messages.push(message);
  dc.subscribe(name, handler);
  unsubscribers.push(() => dc.unsubscribe(name, handler));
  return messages;
}
afterEach(() => {
  for (const unsubscribe of unsubscribers.splice(0)) unsubscribe();
});

const phases = (events) => events.map((e) => e.phase);
const server = { system: 'rabbitmq', serverAddress: BROKER.hostname, serverPort: Number(BROKER.port) || 5672 };

async function deadUrl() {
  const probe = require('node:net').createServer();
  await new Promise((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address();
  await new Promise((resolve) => probe.close(resolve));
  return `amqp://127.0.0.1:${port}`;
}

describe('amqplib:connect', () => {
  it('traces an attempt that opens: start, end, then asyncStart and asyncEnd around the callback, with what was negotiated', async () => {
    const events = watch('amqplib:connect');
    const model = await ours.connect(AMQP_URL);
    await model.close();
    assert.deepStrictEqual(phases(events), ['start', 'end', 'asyncStart', 'asyncEnd']);
    const { fields } = events[2];
    assert.deepStrictEqual(
      { ...fields, result: undefined },
      {
        ...server,
        vhost: '/',
        node: describeNode(AMQP_URL),
        nodeIndex: 0,
        frameMax: model.connection.frameMax,
        channelMax: model.connection.channelMax,
        heartbeat: model.connection.heartbeat,
        result: undefined,
      },
    );
    assert.strictEqual(fields.result, model.connection);
  });

  it('traces each node of a list, the failures with their errors', async () => {
    const events = watch('amqplib:connect');
    const dead = await deadUrl();
    const model = await ours.connect([dead, AMQP_URL]);
    await model.close();
    assert.deepStrictEqual(phases(events), ['start', 'end', 'error', 'asyncStart', 'asyncEnd', 'start', 'end', 'asyncStart', 'asyncEnd']);
    assert.strictEqual(events[2].fields.error.code, 'ECONNREFUSED');
    assert.strictEqual(events[2].fields.nodeIndex, 0);
    assert.strictEqual(events[2].fields.serverPort, Number(new URL(dead).port));
    assert.strictEqual(events[7].fields.nodeIndex, 1);
    assert.ok(events[7].fields.result);
  });

  it("traces recovery's attempts, saying which node (callback API)", async () => {
    const events = watch('amqplib:connect');
    const dead = await deadUrl();
    const model = await new Promise((resolve, reject) => {
      oursCallback.connect([dead, AMQP_URL], { recovery: { initialDelay: 1 } }, (err, m) => (err ? reject(err) : resolve(m)));
    });
    await new Promise((resolve) => model.close(resolve));
    const attempts = events.filter((e) => e.phase === 'asyncEnd').map((e) => [e.fields.nodeIndex, e.fields.error ? e.fields.error.code : 'ok']);
    assert.deepStrictEqual(attempts, [
      [0, 'ECONNREFUSED'],
      [1, 'ok'],
    ]);
  });
});

describe('amqplib:publish and amqplib:deliver', () => {
  for (const [api, open] of [
    ['promise API', () => ours.connect(AMQP_URL)],
    ['callback API', () => new Promise((resolve, reject) => oursCallback.connect(AMQP_URL, (err, m) => (err ? reject(err) : resolve(m))))],
  ]) {
    it(`${api}: a publish's fields, headers a subscriber adds are sent, and the consumer callback runs inside its delivery's trace`, async () => {
      const model = await open();
      const promised = (fn) => new Promise((resolve, reject) => {
        const r = fn((err, v) => (err ? reject(err) : resolve(v)));
        if (r && typeof r.then === 'function') r.then(resolve, reject);
      });
      const ch = await promised((cb) => (api === 'promise API' ? model.createChannel() : model.createChannel(cb)));
      const queue = uniqueName('diagnostics');
      await promised((cb) => (api === 'promise API' ? ch.assertQueue(queue, { exclusive: true }) : ch.assertQueue(queue, { exclusive: true }, cb)));

      const published = watch('amqplib:publish');
      const addTraceparent = (context) => {
        context.properties.headers.traceparent = `00-${context.messageId}`;
      };
      dc.tracingChannel('amqplib:publish').start.subscribe(addTraceparent);
      unsubscribers.push(() => dc.tracingChannel('amqplib:publish').start.unsubscribe(addTraceparent));
      const userOptions = { messageId: 'm-1', correlationId: 'c-1', headers: { app: 'x' } };
      ch.sendToQueue(queue, Buffer.from('hello'), userOptions);
      assert.deepStrictEqual(userOptions.headers, { app: 'x' }, "the caller's headers are left as they were");
      assert.deepStrictEqual(phases(published), ['start', 'end']);
      const p = published[0].fields;
      assert.deepStrictEqual(
        { ...p, properties: undefined },
        { ...server, destination: '', routingKey: queue, properties: undefined, messageId: 'm-1', conversationId: 'c-1', bodySize: 5, channel: ch.ch, confirm: false },
      );

      const store = new AsyncLocalStorage();
      const delivered = watch('amqplib:deliver');
      dc.tracingChannel('amqplib:deliver').start.bindStore(store, (context) => context);
      unsubscribers.push(() => dc.tracingChannel('amqplib:deliver').start.unbindStore(store));
      const seen = await new Promise((resolve) => {
        const onMessage = (msg) => {
          resolve({ msg, store: store.getStore(), phasesInside: phases(delivered) });
          ch.ack(msg);
        };
        if (api === 'promise API') ch.consume(queue, onMessage);
        else ch.consume(queue, onMessage, {}, () => {});
      });
      assert.strictEqual(seen.msg.properties.headers.traceparent, '00-m-1', 'what the subscriber added was sent');
      assert.strictEqual(seen.msg.properties.headers.app, 'x');
      assert.deepStrictEqual(seen.phasesInside, ['start'], 'the callback runs between start and end');
      assert.strictEqual(seen.store, delivered[0].context, "inside the callback, the delivery's context is the store");
      assert.deepStrictEqual(phases(delivered), ['start', 'end']);
      const d = delivered[0].fields;
      assert.deepStrictEqual(
        { ...d, message: undefined },
        {
          ...server,
          queue,
          consumerTag: seen.msg.fields.consumerTag,
          destination: '',
          routingKey: queue,
          redelivered: false,
          deliveryTag: seen.msg.fields.deliveryTag,
          messageId: 'm-1',
          conversationId: 'c-1',
          bodySize: 5,
          channel: ch.ch,
          message: undefined,
        },
      );
      assert.strictEqual(d.message, seen.msg);
      await promised((cb) => (api === 'promise API' ? model.close() : model.close(cb)));
    });
  }

  // An agent's wrapper of Channel#publish (OpenTelemetry's, Sentry's) and our tracing at once:
  // a confirm channel's publish calls the wrapper once, as amqplib's does, and is traced once,
  // through to its confirm.
  for (const [api, file, open] of [
    ['promise API', 'channel_model', () => ours.connect(AMQP_URL)],
    ['callback API', 'callback_model', () => new Promise((resolve, reject) => oursCallback.connect(AMQP_URL, (err, m) => (err ? reject(err) : resolve(m))))],
  ]) {
    it(`${api}: a traced confirm publish goes through Channel#publish once, and is traced once to its confirm`, async () => {
      const { Channel } = require(`../lib/${file}`);
      const original = Channel.prototype.publish;
      const hooked = [];
      Channel.prototype.publish = function publish(...args) {
        hooked.push(args[1]);
        return original.apply(this, args);
      };
      unsubscribers.push(() => {
        Channel.prototype.publish = original;
      });
      const model = await open();
      const ch = await (api === 'promise API' ? model.createConfirmChannel() : new Promise((resolve, reject) => model.createConfirmChannel((err, c) => (err ? reject(err) : resolve(c)))));
      const published = watch('amqplib:publish');
      const confirmed = await new Promise((resolve) => ch.publish('amq.direct', 'nowhere', Buffer.from('x'), {}, (err) => resolve(err)));
      assert.strictEqual(confirmed, null);
      assert.deepStrictEqual(hooked, ['nowhere']);
      assert.deepStrictEqual(phases(published), ['start', 'end', 'asyncStart', 'asyncEnd']);
      assert.strictEqual(published[0].fields.confirm, true);
      await (api === 'promise API' ? model.close() : new Promise((resolve) => model.close(resolve)));
    });
  }

  it('a subscriber changes nothing of what is published: inherited options and headers go out as untraced', async () => {
    const model = await ours.connect(AMQP_URL);
    const ch = await model.createChannel();
    const { queue } = await ch.assertQueue(uniqueName('diagnostics-inherited'), { exclusive: true });
    const inheritedOptions = () => {
      const options = Object.create({ persistent: true, messageId: 'inherited-id', headers: Object.create({ from: 'prototype' }) });
      options.contentType = 'text/plain';
      return options;
    };
    const receiveOne = async () => {
      for (;;) {
        const message = await ch.get(queue, { noAck: true });
        if (message) return message.properties;
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    };
    ch.sendToQueue(queue, Buffer.from('untraced'), inheritedOptions());
    const untraced = await receiveOne();
    watch('amqplib:publish');
    const options = inheritedOptions();
    ch.sendToQueue(queue, Buffer.from('traced'), options);
    const traced = await receiveOne();
    assert.deepStrictEqual(traced, untraced);
    assert.strictEqual(traced.deliveryMode, 2, 'still persistent');
    assert.strictEqual(traced.messageId, 'inherited-id');
    assert.deepStrictEqual(traced.headers, { from: 'prototype' });
    assert.deepStrictEqual(Object.keys(options), ['contentType'], "the caller's options are left as they were");
    await model.close();
  });

  it('a consumer callback that throws: its error is the trace\'s, then the channel closes as amqplib\'s does', async () => {
    const model = await ours.connect(AMQP_URL);
    const ch = await model.createChannel();
    const channelError = new Promise((resolve) => ch.on('error', resolve));
    const { queue } = await ch.assertQueue(uniqueName('diagnostics-throw'), { exclusive: true });
    const events = watch('amqplib:deliver');
    const thrown = new Error('the consumer failed');
    await ch.consume(queue, () => {
      throw thrown;
    });
    ch.sendToQueue(queue, Buffer.from('x'));
    const err = await channelError;
    assert.deepStrictEqual(phases(events), ['start', 'error', 'end']);
    assert.strictEqual(events[1].fields.error, thrown);
    assert.strictEqual(err, thrown);
    await model.close();
  });

  it('a confirm channel: the ack ends the trace asynchronously; a nack is its error', async () => {
    const model = await ours.connect(AMQP_URL);
    const ch = await model.createConfirmChannel();
    const queue = uniqueName('diagnostics-nack');
    // A queue that holds nothing and refuses what overflows: every publish to it is nacked.
    await ch.assertQueue(queue, { exclusive: true, arguments: { 'x-max-length': 0, 'x-overflow': 'reject-publish' } });
    const events = watch('amqplib:publish');
    await new Promise((resolve) => ch.sendToQueue(uniqueName('nowhere'), Buffer.from('a'), {}, resolve));
    assert.deepStrictEqual(phases(events), ['start', 'end', 'asyncStart', 'asyncEnd']);
    assert.strictEqual(events[0].fields.confirm, true);
    events.length = 0;
    const nacked = await new Promise((resolve) => ch.sendToQueue(queue, Buffer.from('b'), {}, resolve));
    assert.ok(nacked instanceof Error);
    assert.deepStrictEqual(phases(events), ['start', 'end', 'error', 'asyncStart', 'asyncEnd']);
    assert.strictEqual(events[2].fields.error, nacked);
    events.length = 0;
    ch.sendToQueue(queue, Buffer.from('c')); // no callback: still traced to its outcome
    await ch.waitForConfirms().catch(() => {});
    assert.deepStrictEqual(phases(events), ['start', 'end', 'error', 'asyncStart', 'asyncEnd']);
    await model.close();
  });
});

describe('amqplib:rpc and the plain channels', () => {
  it('traces each RPC with its method and reply, a refusal as its error, and close; the channel error and the close are published', async () => {
    const model = await ours.connect(AMQP_URL);
    const ch = await model.createChannel();
    ch.on('error', () => {}); // the checkQueue below closes it: published, checked below
    const rpcs = watch('amqplib:rpc');
    const channelErrors = listen('amqplib:channel:error');
    const closes = listen('amqplib:connection:close');
    const queue = uniqueName('diagnostics-rpc');
    const declared = await ch.assertQueue(queue, { exclusive: true });
    assert.deepStrictEqual(phases(rpcs), ['start', 'end', 'asyncStart', 'asyncEnd']);
    assert.deepStrictEqual({ ...rpcs[0].fields, fields: undefined, result: undefined }, { ...server, method: 'queue.declare', fields: undefined, channel: ch.ch, result: undefined });
    assert.strictEqual(rpcs[0].fields.fields.queue, queue);
    assert.deepStrictEqual(rpcs[2].fields.result.fields, declared);
    await ch.get(queue);
    assert.strictEqual(rpcs[4].fields.method, 'basic.get');
    rpcs.length = 0;
    const missing = await ch.checkQueue(uniqueName('missing')).catch((err) => err);
    assert.deepStrictEqual(phases(rpcs), ['start', 'end', 'error', 'asyncStart', 'asyncEnd']);
    assert.strictEqual(rpcs[2].fields.error.code, 404);
    assert.strictEqual(channelErrors.length, 1);
    assert.strictEqual(channelErrors[0].channel, ch);
    assert.strictEqual(channelErrors[0].error.code, 404);
    assert.strictEqual(missing.code, 404);
    const other = await model.createChannel();
    rpcs.length = 0;
    await other.close();
    assert.deepStrictEqual(phases(rpcs), ['start', 'end', 'asyncStart', 'asyncEnd']);
    assert.strictEqual(rpcs[0].fields.method, 'channel.close');
    await model.close();
    assert.deepStrictEqual(closes, [{ connection: model.connection, error: undefined }]);
  });

  it("publishes the server's blocked and unblocked", async () => {
    // Both once the client is listening: it opens a channel to say so.
    const served = await fakeServer(async (peer) => {
      const open = await peer.expect(defs.ChannelOpen);
      peer.send(defs.ChannelOpenOk, { channelId: Buffer.alloc(0) }, open.channel);
      peer.send(defs.ConnectionBlocked, { reason: 'low on memory' });
      peer.send(defs.ConnectionUnblocked, {});
      peer.conn.flush();
    });
    const blocked = listen('amqplib:connection:blocked');
    const unblocked = listen('amqplib:connection:unblocked');
    const model = await ours.connect(served.url);
    model.on('error', () => {}); // the server goes with the test
    const unblocking = new Promise((resolve) => model.once('unblocked', resolve));
    await model.createChannel();
    await unblocking;
    assert.deepStrictEqual(blocked, [{ connection: model.connection, reason: 'low on memory' }]);
    assert.deepStrictEqual(unblocked, [{ connection: model.connection }]);
    await served.close();
  });
});

describe('nobody listening', () => {
  it('builds no context: publish, deliver and RPCs never ask for one', async () => {
    const saved = { publishContext: tracing.publishContext, deliverContext: tracing.deliverContext, serverOf: tracing.serverOf };
    const refuse = () => {
      throw new Error('a context was built with nobody subscribed');
    };
    Object.assign(tracing, { publishContext: refuse, deliverContext: refuse, serverOf: refuse });
    try {
      const model = await ours.connect(AMQP_URL);
      const ch = await model.createConfirmChannel();
      const queue = uniqueName('diagnostics-idle');
      await ch.assertQueue(queue, { exclusive: true });
      ch.sendToQueue(queue, Buffer.from('x'));
      await ch.waitForConfirms();
      const msg = await new Promise((resolve) => ch.consume(queue, resolve));
      ch.ack(msg);
      await model.close();
    } finally {
      Object.assign(tracing, saved);
    }
  });
});
