'use strict';
// A consumer under a flood: while a publisher process sends 1 MB messages as fast as the
// broker takes them, a consumer (prefetch 100) hashes each message and acks it, and a 100 ms
// timer measures how late it fires. A client whose reads never yield starves the timer, and
// one whose memory follows the broker's pace rather than what the application holds shows a
// high peak RSS. Prints one JSON line: worst timer gap, ticks fired of those due, peak RSS,
// messages consumed.
//
//   node benchmarks/flood.js [ours|amqplib] [seconds=20] [size=1048576]
//
// The publisher always uses amqplib (the same load for both), in a child process.

const crypto = require('node:crypto');
const { fork } = require('node:child_process');
const { load } = require('./lib');

const AMQP_URL = process.env.AMQP_URL || 'amqp://localhost';
const TICK_MS = 100;
const PREFETCH = 100;

async function publish(queue, size) {
  const amqp = load('amqplib').api();
  const conn = await amqp.connect(AMQP_URL);
  const ch = await conn.createConfirmChannel();
  const body = crypto.randomBytes(size);
  process.on('message', () => conn.close().finally(() => process.exit(0)));
  const inFlight = new Set();
  for (;;) {
    // At most 50 unconfirmed: as fast as the broker confirms, no faster.
    while (inFlight.size < 50) {
      const sent = new Promise((resolve) => ch.sendToQueue(queue, body, {}, () => resolve()));
      inFlight.add(sent);
      sent.then(() => inFlight.delete(sent));
    }
    await Promise.race(inFlight);
  }
}

async function consume(lib, seconds, size) {
  const amqp = load(lib).api();
  const conn = await amqp.connect(AMQP_URL);
  const ch = await conn.createChannel();
  const queue = `amqplib-rs-bench.flood.${process.pid}`;
  await ch.assertQueue(queue, { exclusive: false, autoDelete: false });
  await ch.purgeQueue(queue);
  await ch.prefetch(PREFETCH);

  let consumed = 0;
  let checksum = 0;
  await ch.consume(queue, (msg) => {
    if (msg === null) return; // cancelled: the queue is deleted at the end
    const digest = crypto.createHash('sha256').update(msg.content).digest();
    checksum ^= digest[0];
    if (msg.content.length !== size) throw new Error(`got ${msg.content.length} bytes`);
    consumed += 1;
    ch.ack(msg);
  });

  const publisher = fork(__filename, ['--publish', queue, String(size)], { stdio: 'inherit' });
  let worstGap = 0;
  let ticks = 0;
  let last = performance.now();
  const timer = setInterval(() => {
    const now = performance.now();
    worstGap = Math.max(worstGap, now - last);
    last = now;
    ticks += 1;
  }, TICK_MS);

  await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
  clearInterval(timer);
  publisher.send('stop');
  await new Promise((resolve) => publisher.once('exit', resolve));
  await ch.deleteQueue(queue);
  await conn.close();
  const result = {
    lib,
    seconds,
    size,
    worstGapMs: Math.round(worstGap),
    ticks,
    ticksDue: Math.floor((seconds * 1000) / TICK_MS),
    peakRssMB: Math.round(process.resourceUsage().maxRSS / 1024),
    consumed,
    checksum,
  };
  console.log(JSON.stringify(result));
}

if (process.argv[2] === '--publish') {
  publish(process.argv[3], Number(process.argv[4]));
} else {
  const [lib = 'ours', seconds = '20', size = String(1024 * 1024)] = process.argv.slice(2);
  consume(lib, Number(seconds), Number(size)).catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
