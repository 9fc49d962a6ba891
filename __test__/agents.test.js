'use strict';
// The APM agents services run amqplib under (dd-trace, newrelic, @sentry/node: devDependencies)
// see with us what they see with amqplib 2.3.1. They hook amqplib by its files, functions,
// arguments and call order (the README's table of hook points), so each agent runs the same
// workload (agents/workload.js: both APIs; publishes plain and confirmed; consumed and acked)
// over each library installed as `amqplib` (installed.js), in a child process of its own that
// captures what the agent reports in process (nothing leaves the machine), and the reports
// must be equal: spans or segments, their names, counts, attributes and parent links. The
// transport is this run's (the suite runs on both). Checked besides: the agent saw the
// publishes and linked each delivery to its publish.

const { describe, it } = require('node:test');
const assert = require('node:assert');
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const path = require('node:path');
const { ROOT, withOurs, withAmqplib } = require('./installed');
const { AMQP_URL } = require('./helpers');

const source = (name) => fs.readFileSync(path.join(__dirname, 'agents', name), 'utf8');
const nodeMajor = Number(process.versions.node.split('.')[0]);
// dd-trace 6 and newrelic 14 require Node 22 (npm scripts run the project's Node 24).
// Another build under test (emulated platforms, the sanitizer) meets the agents through the
// same JavaScript, which the main runs check on both transports.
const skip =
  ((process.versions.bun || process.versions.deno) && 'the agents are run, and supported, under Node') ||
  (nodeMajor < 22 && `the agent requires Node 22 or later (this is ${process.version})`) ||
  (process.env.AMQPLIB_RS_ADDON && 'another build is under test (AMQPLIB_RS_ADDON): the agents see our JavaScript, checked by the main runs');

const AGENTS = [
  { name: 'dd-trace', files: ['datadog.js'], args: ['datadog.js'], env: { DD_TRACE_AGENT_URL: 'http://127.0.0.1:9', DD_INSTRUMENTATION_TELEMETRY_ENABLED: 'false' } },
  {
    name: 'newrelic',
    files: ['newrelic.js'],
    args: ['newrelic.js'],
    env: {
      NEW_RELIC_SERVERLESS_MODE_ENABLED: 'true',
      NEW_RELIC_APP_NAME: 'amqplib-rs-test',
      NEW_RELIC_LICENSE_KEY: '0'.repeat(40),
      NEW_RELIC_ACCOUNT_ID: '1',
      NEW_RELIC_TRUSTED_ACCOUNT_KEY: '1',
      NEW_RELIC_PRIMARY_APPLICATION_ID: '1',
      NEW_RELIC_LOG_ENABLED: 'false',
      NEW_RELIC_HOME: '.',
    },
  },
  { name: '@sentry/node', files: ['sentry.js', 'sentry.mjs'], args: ['--import', './sentry.mjs', 'sentry.js'], env: {} },
];

function run(agent, layOut) {
  const files = Object.fromEntries(['workload.js', ...agent.files].map((name) => [name, source(name)]));
  const dir = layOut(files);
  const child = spawnSync(process.execPath, agent.args, {
    cwd: dir,
    env: { ...process.env, ...agent.env, DEPS_ROOT: ROOT, AMQP_URL },
    encoding: 'utf8',
    timeout: 60_000,
  });
  assert.strictEqual(child.status, 0, `${agent.name} with ${layOut.name}: exit ${child.status ?? child.signal}\n${child.stdout}\n${child.stderr}`);
  return JSON.parse(child.stdout.trim().split('\n').pop());
}

const RECEIVED = [['plain-0', 'plain-1', 'plain-2', 'confirmed-0', 'confirmed-1', 'confirmed-2'], ['callback']];

describe('APM agents see us as they see amqplib 2.3.1', () => {
  for (const agent of AGENTS) {
    it(agent.name, { skip, timeout: 180_000 }, () => {
      const ours = run(agent, withOurs);
      const theirs = run(agent, withAmqplib);
      assert.deepStrictEqual(ours, theirs);
      assert.deepStrictEqual(ours.received, RECEIVED);
      assert.strictEqual(ours.headerNames[0], 'app');
      checks[agent.name](ours);
    });
  }
});

// What makes the comparison worth something: the agent did trace the messages.
const checks = {
  'dd-trace'({ spans }) {
    const named = (prefix) => spans.filter((s) => s.span.startsWith(prefix));
    assert.strictEqual(named('amqp.command basic.publish').length, 7, JSON.stringify(spans, null, 1));
    assert.strictEqual(named('amqp.command basic.ack').length, 7);
    const deliveries = named('amqp.command basic.deliver');
    assert.strictEqual(deliveries.length, 7);
    for (const d of deliveries) assert.match(d.parent, /^amqp\.command basic\.publish/, 'each delivery is the child of its publish');
    // out.host is net.Socket's `_host`, which names a host looked up (not an IP address).
    const hostNamed = !net.isIP(new URL(AMQP_URL).hostname.replace(/^\[|\]$/g, ''));
    for (const s of spans.filter((x) => x.tags['span.kind'] === 'client')) {
      assert.ok(s.tags['network.destination.port'] && (s.tags['out.host'] || !hostNamed), `${s.span}: host and port`);
    }
  },
  newrelic({ transactions }) {
    const produce = transactions.flatMap((t) => t.segments.filter((s) => s.startsWith('MessageBroker/RabbitMQ/Exchange/Produce')));
    assert.strictEqual(produce.length, 6, JSON.stringify(transactions, null, 1));
    assert.ok(produce.every((s) => s.includes('"host"') && s.includes('"routing_key"')), JSON.stringify(produce, null, 1));
    const consumers = transactions.filter((t) => t.name.startsWith('OtherTransaction/Message/RabbitMQ'));
    assert.strictEqual(consumers.length, 7);
    assert.strictEqual(consumers.filter((t) => t.accepted).length, 6, 'each promise-API delivery continues its publish’s trace');
  },
  '@sentry/node'({ transactions }) {
    const processed = transactions.filter((t) => t.transaction.startsWith('queue.process'));
    assert.strictEqual(processed.length, 7, JSON.stringify(transactions, null, 1));
    const publishes = transactions.flatMap((t) => t.spans.filter((s) => s.startsWith('queue.publish')));
    assert.ok(publishes.length >= 6, JSON.stringify(transactions, null, 1));
    assert.ok(processed.filter((t) => t.parent !== null).length >= 6, 'deliveries continue their publishes’ traces');
  },
};
