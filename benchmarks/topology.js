'use strict';
// What topology recovery (issue 37) costs per message, against the broker (AMQP_URL): a confirm
// channel publishes MESSAGES messages of 100 bytes to a queue, in windows of WINDOW (then
// waitForConfirms), while a channel of the same connection consumes them with prefetch 200 and
// acks each. Four ways, each in a process of its own, taken in turn over ROUNDS rounds: a plain
// model; a recovering model (amqplib 2.3.1's recovery); with `topology` (its channels stand over
// the real ones, and offset delivery tags); with `topology: { republish: true }` (each publish
// kept until confirmed). Medians of CPU µs per message, messages per second, scavenges per
// 1,000 messages and peak RSS.
//
//   node benchmarks/topology.js [messages]

const { fork } = require('node:child_process');
const { PerformanceObserver, constants } = require('node:perf_hooks');

const AMQP_URL = process.env.AMQP_URL || 'amqp://127.0.0.1';
const MESSAGES = Number(process.argv[2] === '--child' ? process.argv[4] : process.argv[2]) || 50000;
const WINDOW = 1000;
const ROUNDS = 5;
const MODES = {
  plain: undefined,
  recovery: { recovery: true },
  topology: { recovery: { topology: true } },
  republish: { recovery: { topology: { republish: true } } },
};

async function measure(mode) {
  const amqp = require('..');
  let scavenges = 0;
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) if (entry.detail?.kind === constants.NODE_PERFORMANCE_GC_MINOR) scavenges++;
  }).observe({ entryTypes: ['gc'] });
  const model = await amqp.connect(AMQP_URL, MODES[mode]);
  const pub = await model.createConfirmChannel();
  const sub = await model.createChannel();
  const { queue } = await pub.assertQueue('', { exclusive: true });
  await sub.prefetch(200);
  const body = Buffer.alloc(100, 'x');
  let consumed = 0;
  let done;
  const allConsumed = new Promise((resolve) => {
    done = resolve;
  });
  await sub.consume(queue, (msg) => {
    sub.ack(msg);
    if (++consumed === MESSAGES) done();
  });
  const cpu = process.cpuUsage();
  const start = process.hrtime.bigint();
  scavenges = 0;
  for (let sent = 0; sent < MESSAGES; sent += WINDOW) {
    for (let i = 0; i < WINDOW; i++) pub.sendToQueue(queue, body);
    await pub.waitForConfirms();
  }
  await allConsumed;
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  const used = process.cpuUsage(cpu);
  await new Promise((resolve) => setImmediate(resolve));
  const figures = {
    cpuUs: (used.user + used.system) / MESSAGES,
    perSecond: MESSAGES / seconds,
    gcPer1k: (scavenges * 1000) / MESSAGES,
    peakMB: process.resourceUsage().maxRSS / 1024,
  };
  await model.close();
  return figures;
}

function runChild(mode) {
  return new Promise((resolve, reject) => {
    const child = fork(__filename, ['--child', mode, String(MESSAGES)]);
    child.once('message', resolve);
    child.once('exit', (code) => code !== 0 && reject(new Error(`${mode} exited with ${code}`)));
  });
}

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

async function main() {
  const results = Object.fromEntries(Object.keys(MODES).map((mode) => [mode, []]));
  for (let round = 0; round < ROUNDS; round++) {
    for (const mode of Object.keys(MODES)) results[mode].push(await runChild(mode));
  }
  console.log(`${MESSAGES} messages of 100 B, published with confirms (windows of ${WINDOW}) and consumed with acks, one connection; medians of ${ROUNDS} rounds`);
  console.log('| model | CPU µs/msg | msg/s | scavenges per 1k msgs | peak RSS MB |');
  console.log('|---|---|---|---|---|');
  for (const [mode, runs] of Object.entries(results)) {
    const m = (key) => median(runs.map((r) => r[key]));
    console.log(`| ${mode} | ${m('cpuUs').toFixed(2)} | ${Math.round(m('perSecond'))} | ${m('gcPer1k').toFixed(2)} | ${m('peakMB').toFixed(0)} |`);
  }
}

if (process.argv[2] === '--child') {
  measure(process.argv[3]).then(
    (figures) => process.send(figures, () => process.exit(0)),
    (err) => {
      console.error(err);
      process.exit(1);
    },
  );
} else {
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
