'use strict';

// Tracing under the npm alias: OpenTelemetry's @opentelemetry/instrumentation-amqplib patches
// `amqplib` by its internal files (lib/connect.js, lib/channel_model.js, lib/callback_model.js)
// and only for the versions it supports, which it reads from the package.json of the package
// installed as `amqplib`. Installed as `amqplib@npm:amqplib-rs`, that is our package.json: our
// version follows the amqplib version we match (2.3.1), so the instrumentation takes us for
// amqplib 2.3.1 and patches our files of the same names.
//
// Each run lays out a node_modules with the library under test as `amqplib` (a copy of what
// `npm pack` would ship, with our package.json as it is, name amqplib-rs, as an alias install
// leaves it), and runs, in a child process of its own, an application that turns the
// instrumentation on, then requires `amqplib` and publishes, consumes, acks and nacks with both
// APIs against the broker. The spans it reports are compared between us and amqplib 2.3.1
// itself (laid out the same way), and checked: a publish span per publish, a process span per
// delivery whose parent is the publish span of that message (the trace context travels in the
// headers), the attributes of the connection on both.

const { describe, it } = require('node:test');
const assert = require('node:assert');
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const { ROOT, pkg, AMQPLIB_LATEST, withOurs, withAmqplib } = require('./installed');
const AMQP_URL = process.env.AMQP_URL || 'amqp://localhost';
const readJson = (file) => JSON.parse(fs.readFileSync(file, 'utf8'));

const layOutOurs = (version) => withOurs({ 'app.js': APP }, version);
const layOutAmqplib = () => withAmqplib({ 'app.js': APP });

// The application. OpenTelemetry comes from this checkout's node_modules (DEPS_ROOT); `amqplib`
// from the project's own.
const APP = `'use strict';
const dep = (name) => require(require.resolve(name, { paths: [process.env.DEPS_ROOT] }));
const api = dep('@opentelemetry/api');
const { NodeTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } = dep('@opentelemetry/sdk-trace-node');
const { AmqplibInstrumentation } = dep('@opentelemetry/instrumentation-amqplib');

// As a Node application sets tracing up: the provider registered with its defaults (an
// AsyncLocalStorage context manager, W3C trace-context propagation).
const exporter = new InMemorySpanExporter();
const provider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
provider.register();
const versions = new Set();
const instrumentation = new AmqplibInstrumentation({
  publishHook: (span, info) => versions.add(info.moduleVersion),
});
instrumentation.setTracerProvider(provider);

// Only now, as the instrumentation's documentation says.
const amqp = require('amqplib');
const callbackApi = require('amqplib/callback_api');
const url = process.env.AMQP_URL;

async function promiseApi() {
  const conn = await amqp.connect(url);
  const ch = await conn.createChannel();
  const { queue } = await ch.assertQueue('', { exclusive: true });
  const delivered = [];
  const all = new Promise((resolve) => {
    ch.consume(queue, (msg) => {
      delivered.push(msg.properties.messageId);
      if (msg.properties.messageId === 'nacked') ch.nack(msg, false, false);
      else ch.ack(msg);
      if (delivered.length === 4) resolve();
    });
  });
  // One options object for two publishes: the instrumentation puts each one's trace context
  // into its headers.
  const reused = { messageId: 'reused', correlationId: 'c1', headers: { app: 'tracing' } };
  ch.sendToQueue(queue, Buffer.from('one'), reused);
  ch.sendToQueue(queue, Buffer.from('two'), reused);
  ch.publish('', queue, Buffer.from('three'), { messageId: 'nacked' });
  const cch = await conn.createConfirmChannel();
  await new Promise((resolve, reject) =>
    cch.sendToQueue(queue, Buffer.from('four'), { messageId: 'confirmed' }, (err) => (err ? reject(err) : resolve())),
  );
  await all;
  await conn.close();
  return { queue, delivered };
}

function callbackStyle() {
  return new Promise((resolve, reject) => {
    callbackApi.connect(url, (err, conn) => {
      if (err) return reject(err);
      conn.createChannel((err, ch) => {
        if (err) return reject(err);
        ch.assertQueue('', { exclusive: true }, (err, ok) => {
          if (err) return reject(err);
          ch.consume(ok.queue, (msg) => conn.close(() => resolve({ queue: ok.queue, delivered: [msg.properties.messageId] })), { noAck: true });
          ch.sendToQueue(ok.queue, Buffer.from('five'), { messageId: 'callback' });
        });
      });
    });
  });
}

(async () => {
  const promiseRun = await promiseApi();
  const callbackRun = await callbackStyle();
  const spans = exporter.getFinishedSpans();
  const ids = new Map(spans.map((s) => [s.spanContext().spanId, s]));
  const queues = [promiseRun.queue, callbackRun.queue];
  const hide = (v) => (typeof v === 'string' ? queues.reduce((s, q, i) => s.split(q).join('<queue ' + i + '>'), v) : v);
  const parentOf = (s) => {
    const parentId = s.parentSpanContext ? s.parentSpanContext.spanId : s.parentSpanId;
    const parent = parentId && ids.get(parentId);
    return parent ? hide(parent.name) + ' ' + parent.attributes['messaging.message_id'] : null;
  };
  const report = {
    versions: [...versions],
    delivered: [promiseRun.delivered, callbackRun.delivered],
    spans: spans.map((s) => ({
      name: hide(s.name),
      kind: api.SpanKind[s.kind],
      attributes: Object.fromEntries(Object.entries(s.attributes).map(([k, v]) => [k, hide(v)]).sort()),
      status: s.status.message ? api.SpanStatusCode[s.status.code] + ': ' + s.status.message : api.SpanStatusCode[s.status.code],
      parent: parentOf(s),
    })),
  };
  console.log(JSON.stringify(report));
})().catch((err) => {
  console.error(err);
  process.exit(1);
});
`;

function runApp(dir) {
  const run = spawnSync(process.execPath, ['app.js'], {
    cwd: dir,
    env: { ...process.env, DEPS_ROOT: ROOT, AMQP_URL },
    encoding: 'utf8',
    timeout: 30000,
  });
  assert.strictEqual(run.status, 0, `the application failed:\n${run.stdout}\n${run.stderr}`);
  const report = JSON.parse(run.stdout.trim().split('\n').pop());
  // Finishing order is not the point; compare them in a fixed order.
  const key = (s) => `${s.kind} ${s.name} ${s.attributes['messaging.message_id']}`;
  report.spans.sort((a, b) => key(a).localeCompare(key(b)));
  return report;
}

describe('OpenTelemetry instrumentation-amqplib under the alias', () => {
  it('our version is the amqplib version we match', () => {
    assert.strictEqual(pkg.version, readJson(path.join(AMQPLIB_LATEST, 'package.json')).version);
  });

  // What the instrumentation wraps, file by file: these must stay where amqplib has them.
  it('the files and functions it patches are where amqplib 2.3.1 has them', () => {
    const shape = (dir) => {
      const load = (file) => require(path.join(dir, 'lib', file));
      const methods = ['publish', 'consume', 'get', 'cancel', 'ack', 'nack', 'reject', 'ackAll', 'nackAll', 'emit', 'assertQueue', 'assertExchange', 'bindQueue', 'qos', 'prefetch', 'close', 'open'];
      const models = {};
      for (const file of ['channel_model.js', 'callback_model.js']) {
        const { Channel, ConfirmChannel } = load(file);
        models[file] = {
          channel: methods.filter((m) => typeof Channel.prototype[m] === 'function'),
          confirmPublish: typeof ConfirmChannel.prototype.publish,
          confirmExtendsChannel: ConfirmChannel.prototype instanceof Channel,
        };
      }
      // The agents' hook points (the README's table), as own methods of the same classes, so
      // that those which rewrite a class's methods at load (orchestrion) find them there.
      const own = (proto, names) => names.filter((m) => Object.hasOwn(proto, m) && typeof proto[m] === 'function');
      const channel = load('channel.js');
      const core = {
        channel: own(channel.Channel.prototype, ['sendImmediately', 'sendMessage', 'sendOrEnqueue']),
        baseChannel: own(channel.BaseChannel.prototype, ['registerConsumer', 'dispatchMessage']),
      };
      const { connect } = load('connect.js');
      return { models, core, connect: [typeof connect, connect.length] };
    };
    assert.deepStrictEqual(shape(ROOT), shape(AMQPLIB_LATEST));
  });

  it('publish and consume spans come out as with amqplib 2.3.1', { timeout: 60000 }, () => {
    const mine = runApp(layOutOurs());
    const theirs = runApp(layOutAmqplib());
    assert.deepStrictEqual(mine, theirs);

    assert.deepStrictEqual(mine.versions, [pkg.version], 'the instrumentation read our version');
    assert.deepStrictEqual(mine.delivered, [['reused', 'reused', 'nacked', 'confirmed'], ['callback']]);
    const byKind = (kind) => mine.spans.filter((s) => s.kind === kind);
    const producers = byKind('PRODUCER');
    const consumers = byKind('CONSUMER');
    assert.strictEqual(producers.length, 5, JSON.stringify(mine.spans, null, 1));
    assert.strictEqual(consumers.length, 5, JSON.stringify(mine.spans, null, 1));
    for (const span of producers) {
      assert.strictEqual(span.name, 'publish <default>');
      assert.strictEqual(span.attributes['messaging.system'], 'rabbitmq');
      // The instrumentation names the URL's scheme: AMQPS over TLS.
      assert.strictEqual(span.attributes['messaging.protocol'], new URL(AMQP_URL).protocol.slice(0, -1).toUpperCase());
      assert.strictEqual(span.attributes['messaging.rabbitmq.routing_key'].startsWith('<queue '), true);
      assert.strictEqual(span.parent, null);
    }
    for (const span of consumers) {
      assert.match(span.name, /^<queue [01]> process$/);
      assert.strictEqual(span.attributes['messaging.operation'], 'process');
      assert.strictEqual(span.attributes['messaging.system'], 'rabbitmq');
      // The publish span of the very message is its parent: the trace context was carried.
      assert.strictEqual(span.parent, `publish <default> ${span.attributes['messaging.message_id']}`);
    }
    const statuses = consumers.map((s) => `${s.attributes['messaging.message_id']}: ${s.status}`).sort();
    assert.deepStrictEqual(statuses, [
      'callback: UNSET',
      'confirmed: UNSET',
      'nacked: ERROR: nack called on message without requeue',
      'reused: UNSET',
      'reused: UNSET',
    ]);
  });

  it('our next fix number (scripts/version.js) still matches our amqplib version and is still traced', { timeout: 60000 }, () => {
    const { matchedAmqplib, nextFix } = require('../scripts/version');
    const next = nextFix(pkg.version);
    assert.strictEqual(matchedAmqplib(next), matchedAmqplib(pkg.version));
    assert.deepStrictEqual([nextFix('2.3.1'), nextFix('2.3.101'), matchedAmqplib('2.3.200')], ['2.3.101', '2.3.102', '2.3.2']);
    assert.throws(() => nextFix('2.3.199'), /no number is left/);
    const report = runApp(layOutOurs(next));
    assert.deepStrictEqual(report.versions, [next], 'the instrumentation read the next fix number');
    assert.strictEqual(report.spans.length, 10);
  });

  it('with a version outside what it supports (as 0.1.0 was), nothing is traced', { timeout: 60000 }, () => {
    const report = runApp(layOutOurs('0.1.0'));
    assert.deepStrictEqual(report.spans, []);
    assert.deepStrictEqual(report.delivered, [['reused', 'reused', 'nacked', 'confirmed'], ['callback']]);
  });
});
