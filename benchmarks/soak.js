#!/usr/bin/env node
'use strict';
// Soak (issue 7; a script, not CI): several connections, each with a confirm-mode publisher
// and a consumer, plus one consumer slower than its publisher, for a given time. Every 5 s it
// prints throughput, RSS and external memory; at the end it closes everything and prints the
// handles still active. The process should then exit by itself.
//
//   npx node benchmarks/soak.js [seconds=60] [--lib=amqplib] [--connections=4] [--size=1024]
//
// Needs a broker at AMQP_URL (default amqp://localhost).

const path = require('node:path');

const { cliArgs, sleep } = require('./lib');

const { number, option } = cliArgs();
const SECONDS = number(60);
const LIB = option('lib', 'ours');
const CONNECTIONS = Number(option('connections', 4));
const SIZE = Number(option('size', 1024));
const WINDOW = 500; // unconfirmed publishes per publisher
const SLOW_RATE = 200; // messages/s published to the slow consumer
const SLOW_ACK_MS = 10; // the slow consumer acks one message per this
const URL = process.env.AMQP_URL || 'amqp://localhost';

const amqp = LIB === 'amqplib' ? require('amqplib') : require(path.join(__dirname, '..'));

const mb = (n) => (n / 1048576).toFixed(1);

const counts = { published: 0, confirmed: 0, consumed: 0, slowConsumed: 0, errors: 0 };
let running = true;

async function pair(index) {
  const conn = await amqp.connect(URL);
  conn.on('error', () => counts.errors++);
  const pub = await conn.createConfirmChannel();
  const sub = await conn.createChannel();
  const q = `amqplib-rs-soak.${process.pid}.${index}`;
  await sub.assertQueue(q, { exclusive: true });
  await sub.prefetch(1000);
  await sub.consume(q, (msg) => {
    counts.consumed++;
    sub.ack(msg);
  });
  // As many channels again, open and idle, for the count.
  const idle = [];
  for (let i = 0; i < 2; i++) idle.push(await conn.createChannel());

  const body = Buffer.alloc(SIZE, index);
  let inflight = 0;
  let wake = null;
  const wakeUp = () => {
    if (wake) {
      const w = wake;
      wake = null;
      w();
    }
  };
  pub.on('drain', wakeUp);
  const done = (async () => {
    while (running) {
      if (inflight >= WINDOW) {
        await new Promise((resolve) => (wake = resolve));
        continue;
      }
      inflight++;
      counts.published++;
      const ok = pub.sendToQueue(q, body, {}, (err) => {
        inflight--;
        if (err) counts.errors++;
        else counts.confirmed++;
        wakeUp();
      });
      if (!ok) await new Promise((resolve) => (wake = resolve));
      else if (counts.published % 100 === 0) await new Promise((resolve) => setImmediate(resolve));
    }
    await pub.waitForConfirms();
  })();
  return { conn, done };
}

// A consumer slower than its publisher: the broker holds the backlog; the client holds at
// most the prefetch.
async function slowPair() {
  const conn = await amqp.connect(URL);
  conn.on('error', () => counts.errors++);
  const pub = await conn.createChannel();
  const sub = await conn.createChannel();
  const q = `amqplib-rs-soak.${process.pid}.slow`;
  await sub.assertQueue(q, { exclusive: true });
  await sub.prefetch(20);
  const toAck = [];
  await sub.consume(q, (msg) => toAck.push(msg));
  const acker = setInterval(() => {
    const msg = toAck.shift();
    if (msg) {
      sub.ack(msg);
      counts.slowConsumed++;
    }
  }, SLOW_ACK_MS);
  const body = Buffer.alloc(SIZE, 0xee);
  const publisher = setInterval(() => {
    for (let i = 0; i < SLOW_RATE / 10; i++) pub.sendToQueue(q, body);
  }, 100);
  return {
    conn,
    done: Promise.resolve(),
    stop() {
      clearInterval(acker);
      clearInterval(publisher);
    },
    held: () => toAck.length,
  };
}

async function main() {
  console.log(`soak: ${LIB}, ${CONNECTIONS} connections (+1 with a slow consumer), ${SIZE}-byte messages, ${SECONDS} s, node ${process.version}`);
  const pairs = [];
  for (let i = 0; i < CONNECTIONS; i++) pairs.push(await pair(i));
  const slow = await slowPair();
  const start = Date.now();
  let last = { ...counts, at: start };
  const samples = [];
  console.log('  time   publish/s  consume/s  slow/s  held  rss MB  external MB  heap MB  heap total MB');
  while (Date.now() - start < SECONDS * 1000) {
    await sleep(5000);
    const now = Date.now();
    const s = (now - last.at) / 1000;
    const mem = process.memoryUsage();
    samples.push({ t: (now - start) / 1000, rss: mem.rss, external: mem.external });
    console.log(
      `${String(Math.round((now - start) / 1000)).padStart(5)} s ${String(Math.round((counts.confirmed - last.confirmed) / s)).padStart(10)} ` +
        `${String(Math.round((counts.consumed - last.consumed) / s)).padStart(10)} ${String(Math.round((counts.slowConsumed - last.slowConsumed) / s)).padStart(7)} ` +
        `${String(slow.held()).padStart(5)} ${mb(mem.rss).padStart(7)} ${mb(mem.external).padStart(12)} ${mb(mem.heapUsed).padStart(8)} ${mb(mem.heapTotal).padStart(14)}`,
    );
    last = { ...counts, at: now };
  }
  running = false;
  slow.stop();
  await Promise.all(pairs.map((p) => p.done));
  const elapsed = (Date.now() - start) / 1000;
  for (const p of [...pairs, slow]) await p.conn.close();

  const warm = samples.find((x) => x.t >= 10) || samples[0];
  const end = samples[samples.length - 1];
  console.log(
    `total: ${counts.confirmed} confirmed (${Math.round(counts.confirmed / elapsed)}/s), ${counts.consumed} consumed, ` +
      `${counts.slowConsumed} by the slow consumer, ${counts.errors} errors`,
  );
  if (warm && end) {
    console.log(
      `memory after warm-up (${warm.t} s) to end (${end.t} s): rss ${mb(warm.rss)} -> ${mb(end.rss)} MB (${mb(end.rss - warm.rss)}), ` +
        `external ${mb(warm.external)} -> ${mb(end.external)} MB (${mb(end.external - warm.external)})`,
    );
  }
  setImmediate(() => {
    console.log(`active after close: ${JSON.stringify(process.getActiveResourcesInfo())}`);
    const stuck = setTimeout(() => console.log(`still running 2 s after close: ${JSON.stringify(process.getActiveResourcesInfo())}`), 2000);
    stuck.unref();
  });
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
  running = false;
});
