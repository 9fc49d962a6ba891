'use strict';

// Drop-in use: applications written against amqplib's documented API
// (__test__/apps/*.js, each saying `require('amqplib')` or
// `require('amqplib/callback_api')`) run unchanged against this package,
// with the require resolved here by helpers.loadApp, against the real
// broker. Each asserts what arrives: counts, contents, order where AMQP
// guarantees it.

const { describe, it, after } = require('node:test');
const assert = require('node:assert');
const path = require('node:path');
const { promisify } = require('node:util');

const { AMQP_URL, ROOT, REFERENCE, uniqueName, loadApp, resolutions, withTimeout } = require('./helpers');

const TIMEOUT = 10000;
const run = (promise, what) => withTimeout(promise, TIMEOUT, what);

describe('drop-in applications', () => {
  after(() => {
    if (REFERENCE) return;
    // Every `require('amqplib...')` made by an app landed in this package,
    // never in node_modules/amqplib.
    assert.ok(resolutions.length >= 2, 'the apps were loaded through the alias');
    for (const { request, target } of resolutions) {
      assert.ok(target.startsWith(ROOT + path.sep), `${request} -> ${target}`);
      assert.ok(!target.includes(`${path.sep}node_modules${path.sep}`), `${request} -> ${target}`);
    }
    const targets = new Set(resolutions.map((r) => path.relative(ROOT, r.target)));
    assert.ok(targets.has('index.js'), [...targets].join(', '));
    assert.ok(targets.has('callback_api.js'), [...targets].join(', '));
  });

  it('resolves amqplib to this package for the apps only', { skip: REFERENCE && 'reference run' }, () => {
    const app = loadApp('work_queue');
    const child = require.cache[path.join(ROOT, 'index.js')];
    assert.ok(child, 'our index.js is loaded');
    assert.strictEqual(typeof app.run, 'function');
    // This file's own require('amqplib') is still the original.
    assert.ok(require.resolve('amqplib').includes(`${path.sep}node_modules${path.sep}amqplib${path.sep}`));
  });

  it('work queue: prefetch(1), acks, requeue on nack, fair dispatch', async () => {
    const { run: workQueue } = loadApp('work_queue');
    const tasks = Array.from({ length: 40 }, (_, i) => (i % 10 === 3 ? `task-${i}:retry` : `task-${i}`));
    const result = await run(workQueue({ url: AMQP_URL, queue: uniqueName('work'), tasks, workerCount: 3 }), 'work queue');

    // Every task processed exactly once (the nacked ones after a redelivery).
    const done = result.log.map((e) => e.task).sort();
    assert.deepStrictEqual(done, [...tasks].sort());
    for (const entry of result.log) {
      assert.strictEqual(entry.persistent, true, 'deliveryMode 2 from { persistent: true }');
      assert.strictEqual(entry.redelivered, entry.task.endsWith(':retry'), entry.task);
    }
    // prefetch(1): never more than one unacked message per worker, and the
    // tasks are spread over all the workers.
    for (const w of result.workers) assert.strictEqual(w.maxInFlight, 1, w.name);
    const perWorker = new Map();
    for (const e of result.log) perWorker.set(e.worker, (perWorker.get(e.worker) || 0) + 1);
    assert.strictEqual(perWorker.size, 3, JSON.stringify([...perWorker]));
    for (const [worker, n] of perWorker) assert.ok(n >= 5, `${worker} did ${n} tasks`);
    assert.strictEqual(result.remaining, 0);
  });

  it('publish/subscribe: every subscriber of a fanout gets every message, in order', async () => {
    const { run: pubsub } = loadApp('pubsub');
    const messages = Array.from({ length: 50 }, (_, i) => `log line ${i} ${'é'.repeat(i % 4)}`);
    const { inboxes, queues } = await run(pubsub({ url: AMQP_URL, exchange: uniqueName('logs'), messages, subscribers: 3 }), 'pubsub');
    assert.strictEqual(inboxes.length, 3);
    for (const inbox of inboxes) assert.deepStrictEqual(inbox, messages);
    assert.strictEqual(new Set(queues).size, 3);
    for (const q of queues) assert.match(q, /^amq\.gen-/);
  });

  it('routing: a direct exchange delivers by exact routing key', async () => {
    const { run: routing } = loadApp('routing');
    const logs = [
      ['info', 'starting'],
      ['warning', 'disk 80%'],
      ['error', 'disk full'],
      ['debug', 'nobody listens'],
      ['info', 'retrying'],
      ['error', 'gave up'],
    ];
    const received = await run(
      routing({
        url: AMQP_URL,
        exchange: uniqueName('direct'),
        subscribers: { errorsOnly: ['error'], everything: ['info', 'warning', 'error'] },
        logs,
      }),
      'routing',
    );
    assert.deepStrictEqual(received.errorsOnly, ['error:disk full', 'error:gave up']);
    assert.deepStrictEqual(received.everything, [
      'info:starting',
      'warning:disk 80%',
      'error:disk full',
      'info:retrying',
      'error:gave up',
    ]);
  });

  it('topics: * matches one word, # zero or more', async () => {
    const { run: topics } = loadApp('topics');
    const keys = ['kern.critical', 'app.critical', 'kern.info', 'kern', 'a.b.critical', 'lazy.orange.rabbit', 'quick.orange.fox'];
    const received = await run(
      topics({
        url: AMQP_URL,
        exchange: uniqueName('topic'),
        bindings: {
          critical: ['*.critical'],
          kernel: ['kern.#'],
          orange: ['*.orange.*', 'lazy.#'],
          all: ['#'],
        },
        keys,
      }),
      'topics',
    );
    assert.deepStrictEqual(received.critical, ['kern.critical', 'app.critical']);
    assert.deepStrictEqual(received.kernel, ['kern.critical', 'kern.info', 'kern']);
    // A message matching two bindings of one queue is delivered once.
    assert.deepStrictEqual(received.orange, ['lazy.orange.rabbit', 'quick.orange.fox']);
    assert.deepStrictEqual(received.all, keys);
  });

  it('RPC over direct reply-to: every call answered, matched by correlationId', async () => {
    const { run: rpc } = loadApp('rpc');
    const inputs = [0, 1, 2, 10, 20, 30, 40, 5, 5, 7];
    const { results, expected, replies } = await run(rpc({ url: AMQP_URL, queue: uniqueName('rpc'), inputs }), 'rpc');
    assert.deepStrictEqual(results, expected);
    assert.deepStrictEqual(expected.slice(0, 4), [0, 1, 1, 55]);
    assert.strictEqual(replies.length, inputs.length);
    for (const r of replies) {
      // Replies come to the pseudo-queue with a generated routing key.
      assert.match(r.routingKey, /^amq\.rabbitmq\.reply-to\./);
      assert.strictEqual(typeof r.correlationId, 'string');
    }
    assert.strictEqual(new Set(replies.map((r) => r.correlationId)).size, inputs.length);
  });

  it('publisher confirms: one callback per publish, waitForConfirms', async () => {
    const { publishAll } = loadApp('confirms');
    const count = 500;
    const result = await run(publishAll({ url: AMQP_URL, queue: uniqueName('confirm'), count }), 'confirms');
    assert.deepStrictEqual(result.errors, []);
    assert.ok(
      result.callbacks.every((n) => n === 1),
      `each callback called once: ${result.callbacks.filter((n) => n !== 1).length} were not`,
    );
    assert.strictEqual(result.messageCount, count);
  });

  it('publisher confirms: nacks from a full queue reach the callbacks and waitForConfirms', async () => {
    const { publishOverflow } = loadApp('confirms');
    const result = await run(
      publishOverflow({ url: AMQP_URL, queue: uniqueName('overflow'), maxLength: 3, count: 8 }),
      'confirm nacks',
    );
    assert.deepStrictEqual(result.calls, new Array(8).fill(1));
    assert.deepStrictEqual(result.outcomes, [
      'ack',
      'ack',
      'ack',
      ...new Array(5).fill('nack: message nacked'),
    ]);
    assert.ok(result.waitError instanceof Error, 'waitForConfirms rejects');
    assert.strictEqual(result.waitError.message, 'message nacked');
    assert.strictEqual(result.messageCount, 3);
  });

  it('mandatory: unroutable messages come back in a return event before their confirm', async () => {
    const { run: returns } = loadApp('returns');
    const exchange = uniqueName('mandatory');
    const { events, messageCount } = await run(returns({ url: AMQP_URL, exchange, queue: uniqueName('routed') }), 'returns');
    const returned = events.filter((e) => e.event === 'return');
    assert.deepStrictEqual(returned, [
      {
        event: 'return',
        fields: { replyCode: 312, replyText: 'NO_ROUTE', exchange, routingKey: 'nowhere' },
        content: 'bounced',
        messageId: 'm2',
        headers: { why: 'test' },
      },
    ]);
    // Every publish confirmed once, all acks (a returned message is still
    // acked). The broker may confirm out of publish order (an unroutable
    // message is acked at once, a routed one once the queue has it).
    const confirms = events.filter((e) => e.event === 'confirm');
    assert.deepStrictEqual(
      confirms.map((e) => [e.label, e.err]).sort(),
      [
        ['m1', null],
        ['m2', null],
        ['m3', null],
      ],
    );
    // basic.return precedes the basic.ack for the same message.
    const returnAt = events.findIndex((e) => e.event === 'return');
    const m2At = events.findIndex((e) => e.event === 'confirm' && e.label === 'm2');
    assert.ok(returnAt < m2At, JSON.stringify(events));
    assert.strictEqual(messageCount, 1);
  });

  it('channel errors: 404 on checkQueue closes the channel, not the connection', async () => {
    const { run: channelErrors } = loadApp('channel_errors');
    const missingQueue = uniqueName('missing');
    const exchange = uniqueName('mismatch');
    const report = await run(channelErrors({ url: AMQP_URL, missingQueue, exchange }), 'channel errors');

    const reason = `404 (NOT-FOUND) with message "NOT_FOUND - no queue '${missingQueue}' in vhost '/'"`;
    assert.deepStrictEqual(report.checkQueue, {
      name: 'Error',
      code: 404,
      classId: 50,
      methodId: 10,
      message: `Operation failed: QueueDeclare; ${reason}`,
    });
    assert.deepStrictEqual(report.channelEvents, [
      { event: 'error', code: 404, message: `Channel closed by server: ${reason}` },
      { event: 'close' },
    ]);
    assert.deepStrictEqual(report.afterClose, { name: 'IllegalOperationError', message: 'Channel closed', isIllegal: true });
    assert.strictEqual(report.stillAlive, 'still alive');
    assert.strictEqual(report.redeclare.code, 406);
    assert.match(report.redeclare.message, /^Operation failed: ExchangeDeclare; 406 \(PRECONDITION-FAILED\) with message "PRECONDITION_FAILED - inequivalent arg 'type'/);
    // The connection only closed when the app closed it, without an error.
    assert.deepStrictEqual(report.connectionEvents, ['close']);
  });

  it('callback API: work queue with prefetch and acks', async () => {
    const { run: cbWorkQueue } = loadApp('cb_work_queue');
    const tasks = Array.from({ length: 30 }, (_, i) => `cb-task-${i}`);
    const result = await run(promisify(cbWorkQueue)({ url: AMQP_URL, queue: uniqueName('cbwork'), tasks }), 'cb work queue');
    assert.deepStrictEqual(result.log.map((e) => e.task).sort(), [...tasks].sort());
    const workers = new Set(result.log.map((e) => e.worker));
    assert.deepStrictEqual([...workers].sort(), ['worker-0', 'worker-1']);
    assert.strictEqual(result.remaining, 0);
    assert.strictEqual(result.deleted, 0);
  });

  it('callback API: confirms, get, and a channel error through the callback', async () => {
    const { run: cbConfirms } = loadApp('cb_confirms');
    const missingQueue = uniqueName('cbmissing');
    const count = 200;
    const result = await run(promisify(cbConfirms)({ url: AMQP_URL, queue: uniqueName('cbconfirm'), count, missingQueue }), 'cb confirms');
    assert.deepStrictEqual(result.calls, new Array(count).fill(1));
    assert.deepStrictEqual(result.errors, []);
    assert.strictEqual(result.messageCount, count);
    assert.deepStrictEqual(result.first, { content: '0', messageCount: count - 1 });
    const reason = `404 (NOT-FOUND) with message "NOT_FOUND - no queue '${missingQueue}' in vhost '/'"`;
    assert.deepStrictEqual(result.missing, { code: 404, message: `Operation failed: QueueDeclare; ${reason}` });
    assert.deepStrictEqual(result.channelErrors, [`Channel closed by server: ${reason}`]);
  });
});
