#!/usr/bin/env node
'use strict';
// Leak check (issue 7): a connect / publish / consume / close cycle repeated many times; RSS
// and external memory at the start, after warm-up and at the end (after a full GC each time)
// should stay flat. At the end, the handles still active; the process should exit by itself.
//
//   npx node benchmarks/leak.js [cycles=500] [--lib=amqplib] [--messages=20] [--size=4096]
//
// Needs a broker at AMQP_URL (default amqp://localhost).

const path = require('node:path');
const v8 = require('node:v8');
const vm = require('node:vm');

const { cliArgs } = require('./lib');

const { number, option } = cliArgs();
const CYCLES = number(500);
const LIB = option('lib', 'ours');
const MESSAGES = Number(option('messages', 20));
const SIZE = Number(option('size', 4096));
const WARMUP = Math.min(50, Math.floor(CYCLES / 5));
const URL = process.env.AMQP_URL || 'amqp://localhost';

const amqp = LIB === 'amqplib' ? require('amqplib') : require(path.join(__dirname, '..'));

v8.setFlagsFromString('--expose-gc');
const gc = global.gc || vm.runInNewContext('gc');

const mb = (n) => (n / 1048576).toFixed(2);

async function measure() {
  for (let i = 0; i < 3; i++) {
    gc();
    await new Promise((resolve) => setImmediate(resolve));
  }
  return process.memoryUsage();
}

async function cycle(i) {
  const conn = await amqp.connect(URL);
  const ch = await conn.createConfirmChannel();
  const { queue } = await ch.assertQueue('', { exclusive: true });
  let received = 0;
  const all = new Promise((resolve) => {
    ch.consume(queue, (msg) => {
      received++;
      ch.ack(msg);
      if (received === MESSAGES) resolve();
    });
  });
  const body = Buffer.alloc(SIZE, i & 0xff);
  for (let n = 0; n < MESSAGES; n++) ch.sendToQueue(queue, body, { headers: { n } });
  await ch.waitForConfirms();
  await all;
  await ch.close();
  await conn.close();
}

async function main() {
  console.log(`leak check: ${LIB}, ${CYCLES} cycles of connect / confirm channel / ${MESSAGES} x ${SIZE} B publish+consume / close, node ${process.version}`);
  const start = await measure();
  const t0 = Date.now();
  for (let i = 0; i < WARMUP; i++) await cycle(i);
  const warm = await measure();
  const every = Math.max(100, Math.ceil(CYCLES / 10));
  for (let i = WARMUP; i < CYCLES; i++) {
    await cycle(i);
    if ((i + 1) % every === 0 && i + 1 < CYCLES) {
      const m = process.memoryUsage();
      console.log(`  ${String(i + 1).padStart(6)} cycles: rss ${mb(m.rss)} MB, external ${mb(m.external)} MB, heap total ${mb(m.heapTotal)} MB, outside the heap ${mb(m.rss - m.heapTotal)} MB`);
    }
  }
  const end = await measure();
  const secs = (Date.now() - t0) / 1000;
  const row = (label, m) => `${label.padEnd(22)} rss ${mb(m.rss).padStart(7)} MB  external ${mb(m.external).padStart(6)} MB  heap ${mb(m.heapUsed).padStart(6)} MB (total ${mb(m.heapTotal).padStart(6)} MB)  rss outside the V8 heap ${mb(m.rss - m.heapTotal).padStart(7)} MB`;
  console.log(row('start', start));
  console.log(row(`after ${WARMUP} (warm-up)`, warm));
  console.log(row(`after ${CYCLES}`, end));
  console.log(
    `drift after warm-up over ${CYCLES - WARMUP} cycles: rss ${mb(end.rss - warm.rss)} MB, external ${mb(end.external - warm.external)} MB, ` +
      `heap ${mb(end.heapUsed - warm.heapUsed)} MB, rss outside the V8 heap ${mb(end.rss - end.heapTotal - (warm.rss - warm.heapTotal))} MB (${((CYCLES / secs) | 0)} cycles/s)`,
  );
  setImmediate(() => {
    console.log(`active after the last close: ${JSON.stringify(process.getActiveResourcesInfo())}`);
    const stuck = setTimeout(() => console.log(`still running 2 s later: ${JSON.stringify(process.getActiveResourcesInfo())}`), 2000);
    stuck.unref();
  });
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
