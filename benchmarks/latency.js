'use strict';
// Open-loop latency (issue 16): the library under test (a child process) publishes 1 KB
// messages at a fixed 2000/s on a schedule (message i is due at t0 + i / rate; a 1 ms timer
// publishes whatever is due, however late it fires, never waiting for the client's flow
// control) and consumes them back itself on the same connection (prefetch 1000, an ack per
// message). Each message's latency is its delivery time less its *scheduled* time, so that
// time spent waiting for a late timer, in a send buffer or behind the consumer shows.
//
//   default   each client's default socket options (Nagle's algorithm on, in all four)
//   nodelay   noDelay: true, as each client allows it: amqplib and ours, the socket option
//             of connect; rabbitmq-client, its connection option; cloudamqp has no option, so
//             its public `socket` is set after connecting (the result says which)
//
// 1 s of warm-up (not in the percentiles), then 5 s measured (10,000 messages; run.js
// --quick: 0.5 s and 2 s). Reports p50, p99, p99.9 and the maximum, and the child's CPU and
// GC per message over the whole run.
//
//   node benchmarks/latency.js <lib> <default|nodelay> [seconds measured]

const { performance } = require('node:perf_hooks');
const { open } = require('./clients');
const {
  Meter, Child, cliArgs, childMain, driverMain, driverChannel, uniqueName, percentile,
} = require('./lib');

const RATE = 2000;
const SIZE = 1024;
const PREFETCH = 1000;
const MODES = { default: {}, nodelay: { noDelay: true } };

// The message index is in the body's first four bytes (little-endian); peers give bodies as
// plain Uint8Arrays, so no Buffer methods here.
function stamp(i) {
  const body = Buffer.alloc(SIZE);
  body[0] = i & 0xff;
  body[1] = (i >>> 8) & 0xff;
  body[2] = (i >>> 16) & 0xff;
  body[3] = i >>> 24;
  return body;
}
const indexOf = (body) => (body[0] | (body[1] << 8) | (body[2] << 16) | (body[3] << 24)) >>> 0;

async function child(lib, mode, queue, warm, measured) {
  const client = await open(lib, MODES[mode]);
  const pub = await client.publisher();
  const total = warm + measured;
  const latency = new Float64Array(measured);
  let t0 = 0;
  let received = 0;
  let finish;
  const all = new Promise((resolve) => { finish = resolve; });
  const sub = await client.consume(queue, { prefetch: PREFETCH }, (body) => {
    const i = indexOf(body);
    if (i >= warm) latency[i - warm] = performance.now() - (t0 + (i * 1000) / RATE);
    if (++received === total) finish();
  });

  const meter = new Meter({ sample: true });
  meter.start();
  t0 = performance.now();
  let next = 0;
  const timer = setInterval(() => {
    const due = Math.min(total, Math.floor(((performance.now() - t0) * RATE) / 1000) + 1);
    while (next < due) {
      const pending = pub.send(queue, stamp(next++));
      if (pending) pending.catch((err) => process.stderr.write(`publish: ${err.message}\n`));
    }
    if (next === total) clearInterval(timer);
  }, 1);
  await all;
  const result = await meter.stop(total);
  await sub.cancel();
  await client.close();
  const sorted = Array.from(latency).sort((a, b) => a - b);
  return {
    ...result,
    noDelay: client.noDelay,
    p50Ms: percentile(sorted, 50),
    p99Ms: percentile(sorted, 99),
    p999Ms: percentile(sorted, 99.9),
    maxMs: sorted[sorted.length - 1],
  };
}

async function driver(lib, mode, seconds) {
  const broker = await driverChannel();
  const queue = uniqueName(`latency.${mode}`);
  await broker.channel.assertQueue(queue, { durable: false });
  try {
    const warm = Math.round(RATE * Math.min(1, seconds / 4));
    const proc = new Child('latency.js', [lib, mode, queue, String(warm), String(RATE * seconds)]);
    const { result } = await proc.next('result');
    await proc.end();
    return { lib, scenario: mode, rate: RATE, size: SIZE, ...result };
  } finally {
    await broker.channel.deleteQueue(queue);
    await broker.close();
  }
}

const args = process.argv.slice(2);
if (args[0] === '--child') {
  const [, lib, mode, queue, warm, measured] = args;
  childMain(`latency child ${lib} ${mode}`, 120000, () => child(lib, mode, queue, Number(warm), Number(measured)));
} else {
  const [lib, mode] = args;
  if (!MODES[mode]) throw new Error(`unknown mode ${mode}; expected ${Object.keys(MODES)}`);
  driverMain(`latency ${lib} ${mode}`, 150000, () => driver(lib, mode, cliArgs(args.slice(2)).number(5)));
}
