#!/usr/bin/env node
'use strict';
// `npm test` (the loop to run before each commit, a few minutes): the Rust tests, our JS tests
// on both transports (the generated-file check among them), the type checks and amqplib's own
// suite (compat/run.js).
// `npm run test:full` (`node scripts/test.js --full`, what CI runs): all of that, then
// amqplib's suite again on the stream path, our JS tests and amqplib's suite under Bun and
// Deno, the cluster
// scenarios against a three-node cluster of its own (npm run test:cluster), clippy with and without the native socket and for every
// target (scripts/check-targets.js), the other targets linked and checked (scripts/build-cross.js),
// our tests and amqplib's suite on Linux arm64 under qemu and on Windows under Wine
// (scripts/emulated.js), the product build, Miri over every test of the core crate, a quick API fuzz
// against amqplib, a short integrity soak, and the Rust tests, the JS tests and the compat
// suite again with the addon built with AddressSanitizer (scripts/sanitize.js), and last our JS
// tests over amqps:// to a RabbitMQ 4.3 node that refuses the deprecated features
// (scripts/rabbitmq4.js), amqplib's suite against 4.3 over TCP and over amqps://, our JS tests
// against 4.0, and the cluster scenarios on three 4.3 nodes.
// Stops at the first step that fails, with its exit code.

const { spawnSync } = require('node:child_process');
const path = require('node:path');

const root = path.join(__dirname, '..');
const node = process.execPath;
const full = process.argv.includes('--full');
const tsc = require.resolve('typescript/bin/tsc', { paths: [root] });

// A test file that never exits would hold the step (and CI) until its own limit: 20 minutes.
const RABBITMQ4_TIME_LIMIT = '1200';

const quick = [
  // First, as it is quick: the unsafe code per file and area, printed; fails if an area's
  // count rose above its ceiling (scripts/count-unsafe.js).
  ['unsafe code count', node, ['scripts/count-unsafe.js']],
  // Each platform package's crate list and license texts match Cargo.lock.
  ['third-party licenses', node, ['scripts/third-party-licenses.js', '--check']],
  ['Rust tests', 'cargo', ['test', '--release']],
  ['broker', node, ['scripts/broker.js']],
  // test:full has topology recovery's record churn through 5,000 queues, the quick loop 1,000.
  ['JS tests', node, ['--test', '--test-timeout=60000', '__test__/**/*.test.js'], full ? { TOPOLOGY_CHURN_QUEUES: '5000' } : {}],
  // amqp:// as platforms without the native socket (Windows) take it: Node's net.connect.
  ['JS tests, stream path', node, ['--test', '--test-timeout=60000', '__test__/**/*.test.js'], { AMQPLIB_RS_TRANSPORT: 'stream' }],
  ['type check', node, [tsc, '-p', 'tsconfig.json']],
  // lib/'s calls of the native entry points, against lib/native.d.ts.
  ['type check, the native calls', node, [tsc, '-p', 'tsconfig.lib.json']],
  ['compat suite', node, ['compat/run.js']],
];

const more = [
  ['compat suite, stream path', node, ['compat/run.js'], { AMQPLIB_RS_TRANSPORT: 'stream' }],
  // Our JS tests under Bun and under Deno (their own test runners, their default transport),
  // less what __test__/runtimes/exemptions.json lists with its reason (scripts/runtimes.js).
  ['JS tests under Bun', node, ['scripts/runtimes.js', 'bun']],
  ['JS tests under Deno', node, ['scripts/runtimes.js', 'deno']],
  // amqplib's own suite under Bun and Deno, as compat/run.js runs it on Node (same copy,
  // relay, URL).
  ['compat suite under Bun', node, ['scripts/runtimes.js', 'bun', '--compat']],
  ['compat suite under Deno', node, ['scripts/runtimes.js', 'deno', '--compat']],
  // A three-node cluster on loopback (scripts/cluster.js), started and stopped by the script;
  // 10 graceful stops of each kind where `npm run test:cluster` has 20 (CI's time).
  ['cluster scenarios', 'npm', ['run', 'test:cluster'], { CLUSTER_GRACEFUL_STOPS: '10' }],
  ['crate without the native socket', 'cargo', ['clippy', '--release', '--all-targets', '--target-dir', 'target/stream-only', '--', '-D', 'warnings'], { AMQPLIB_RS_STREAM_ONLY: '1' }],
  ['clippy', 'cargo', ['clippy', '--release', '--all-targets', '--features', 'codec-exports', '--', '-D', 'warnings']],
  ['clippy for every target', node, ['scripts/check-targets.js']],
  ['cross links, checked', node, ['scripts/build-cross.js']],
  // Our JS tests and amqplib's suite on Linux arm64 (qemu-user) and Windows x64 (Wine, the
  // stream path), against the local broker (scripts/emulated.js).
  ['Linux arm64 under qemu', node, ['scripts/emulated.js', 'arm64']],
  ['Windows x64 under Wine', node, ['scripts/emulated.js', 'windows']],
  ['product build, without the codec exports', node, ['scripts/check-product.js']],
  ['Miri, the whole core crate', node, ['scripts/miri.js']],
  ['API fuzz, quick', node, ['benchmarks/api_fuzz.js', '--quick']],
  ['integrity soak, short', node, ['benchmarks/integrity_soak.js', '--seconds=10']],
  ['sanitizer', node, ['scripts/sanitize.js']],
  // RabbitMQ 4.x (Debian sid's, the newest) beside the system broker: a single node from
  // scripts/rabbitmq4.js's cached root (made by debootstrap at the first run), started from empty
  // data before the step's command and stopped after it (`run`). Our JS tests over amqps:// (the
  // node's TLS listener, a certificate of the tests' local CA trusted through
  // NODE_EXTRA_CA_CERTS: the native socket's TLS) against a node that refuses the deprecated
  // features a client sees (transient non-exclusive queues, global QoS), as 4.x will by default;
  // plain TCP against 4.x is the 4.0 step's.
  [
    'JS tests over TLS, RabbitMQ 4 refusing deprecated features',
    node,
    ['scripts/rabbitmq4.js', 'run', '--release', 'sid', '--tls', '--refuse-deprecated', '--time-limit', RABBITMQ4_TIME_LIMIT, '--', node, '--test', '--test-timeout=60000', '__test__/**/*.test.js'],
  ],
  // amqplib's suite, over TCP and over amqps://: its channel tests connect to URL.
  ['compat suite, RabbitMQ 4', node, ['scripts/rabbitmq4.js', 'run', '--release', 'sid', '--time-limit', RABBITMQ4_TIME_LIMIT, '--', node, 'compat/run.js']],
  ['compat suite over TLS, RabbitMQ 4', node, ['scripts/rabbitmq4.js', 'run', '--release', 'sid', '--tls', '--time-limit', RABBITMQ4_TIME_LIMIT, '--', node, 'compat/run.js']],
  // RabbitMQ 4.0 (Debian 13's), the oldest 4.x in support: our JS tests over TCP.
  [
    'JS tests, RabbitMQ 4.0',
    node,
    ['scripts/rabbitmq4.js', 'run', '--release', 'trixie', '--time-limit', RABBITMQ4_TIME_LIMIT, '--', node, '--test', '--test-timeout=60000', '__test__/**/*.test.js'],
  ],
  // The cluster scenarios again, on three RabbitMQ 4.3 nodes (Khepri) of the same root, with 5
  // graceful stops of each kind where the first pass has 10 (CI's time).
  ['cluster scenarios, RabbitMQ 4', 'npm', ['run', 'test:cluster'], { AMQPLIB_RS_CLUSTER_RELEASE: 'sid', CLUSTER_GRACEFUL_STOPS: '5' }],
];

const steps = full ? [...quick, ...more] : quick;
console.log(`${full ? 'npm run test:full' : 'npm test'} on Node ${process.version}`);
// Each step's wall time, printed at the end: CI's budget is what they add up to.
const timings = [];
const minutes = (ms) => `${(ms / 60000).toFixed(1)} min`;
const printTimings = () => console.log(`\nsteps' times:\n${timings.map(([name, ms]) => `  ${minutes(ms).padStart(9)}  ${name}`).join('\n')}`);
for (const [name, command, args, env = {}] of steps) {
  const vars = Object.entries(env).map(([k, v]) => `${k}=${v} `).join('');
  console.log(`\n=== ${name}: ${vars}${[path.basename(command), ...args].join(' ')}`);
  const started = Date.now();
  const run = spawnSync(command, args, { cwd: root, stdio: 'inherit', env: { ...process.env, ...env } });
  timings.push([name, Date.now() - started]);
  if (run.status !== 0) {
    printTimings();
    console.error(`\n${name} failed (exit ${run.status ?? run.signal})`);
    process.exit(run.status || 1);
  }
}
printTimings();
console.log(`\nall steps passed in ${minutes(timings.reduce((sum, [, ms]) => sum + ms, 0))}`);
