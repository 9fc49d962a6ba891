'use strict';
// Large messages (issue 16): a publisher process and a consumer process, both running the
// library under test, through one queue of the driver's (amqplib; declared and deleted per run).
//
//   publisher   16 confirm-mode publishers at once (amqplib, ours, cloudamqp: a channel each
//               on one connection; rabbitmq-client: a createPublisher({confirm: true}) each),
//               each publishing its share one at a time, waiting for each confirm
//   consumer    prefetch as below, an ack per message; checks each message's length and CRC-32
//               against its header (`x-check: <length>:<crc32>`)
//
// Bodies are random bytes: slices at 64 offsets of one random pool, so that consecutive
// messages differ and the CRC-32s are worked out before the clock starts.
//
//   1m     16 x 100 messages of 1 MB, prefetch 10: enough to keep a loopback connection busy,
//          so that the consumer's memory shows the client (its buffers, how soon a body is
//          freed) more than the prefetch window
//   448k   16 x 100 deliveries of 448 KB, prefetch 100: up to 45 MB in flight to the consumer
//
// Both children measure themselves (CPU, GC by kind, RSS sampled every 50 ms, VmHWM) from the
// driver's 'go' (sent once both are connected and the consumer is consuming): the publisher
// until its last confirm, the consumer until its last delivery (the wall time). run.js
// --quick: 16 x 5 messages.
//
//   node benchmarks/large.js <lib> <1m|448k> [messages per publisher]

const crypto = require('node:crypto');
const { crc32 } = require('node:zlib');
const { open, publishConfirmed, consumeCount } = require('./clients');
const {
  Meter, Child, cliArgs, childMain, fromDriver, driverMain, driverChannel, uniqueName,
} = require('./lib');

const SCENARIOS = {
  '1m': { size: 1024 * 1024, prefetch: 10 },
  '448k': { size: 448 * 1024, prefetch: 100 },
};
const PUBLISHERS = 16;
const PER_PUBLISHER = 100;
const BODIES = 64;

// ------------------------------------------------------------------ the two measured processes

// The bodies and their check headers: slices of a random pool, each at its own offset.
function bodies(size) {
  const pool = crypto.randomBytes(size + BODIES * 4099);
  return Array.from({ length: BODIES }, (_, i) => {
    const body = pool.subarray(i * 4099, i * 4099 + size);
    return [body, { 'x-check': `${size}:${crc32(body)}` }];
  });
}

async function publisher(lib, queue, size, perPublisher) {
  const client = await open(lib);
  const messages = bodies(size);
  const pubs = [];
  for (let i = 0; i < PUBLISHERS; i++) pubs.push(await client.publisher({ confirm: true }));
  process.send({ ready: true });
  await fromDriver('go');
  const meter = new Meter({ sample: true });
  meter.start();
  await Promise.all(pubs.map((pub, p) => publishConfirmed(pub, queue, perPublisher, 1, (i) => messages[(p * 7 + i) % BODIES])));
  const result = await meter.stop(PUBLISHERS * perPublisher);
  await client.close();
  return result;
}

// Counts the messages whose length or CRC-32 differs from what their header says.
function checker() {
  const state = { bad: 0 };
  state.check = (body, headers) => {
    const check = headers && headers['x-check'];
    if (check !== `${body.length}:${crc32(body)}`) state.bad++;
  };
  return state;
}

async function consumer(lib, queue, total, prefetch) {
  const client = await open(lib);
  const checks = checker();
  const meter = new Meter({ sample: true });
  const { consumer: sub, all } = await consumeCount(client, queue, { count: total, prefetch, onMessage: checks.check });
  process.send({ ready: true });
  await fromDriver('go'); // nothing is published before
  meter.start();
  await all;
  const result = await meter.stop(total, { bad: checks.bad });
  await sub.cancel();
  await client.close();
  return result;
}

// ------------------------------------------------------------------ the driver

async function driver(lib, scenario, perPublisher) {
  const { size, prefetch } = SCENARIOS[scenario];
  const total = PUBLISHERS * perPublisher;
  const broker = await driverChannel();
  const queue = uniqueName(`large.${scenario}`);
  await broker.channel.assertQueue(queue, { durable: false });
  const children = [];
  try {
    const sub = new Child('large.js', ['consume', lib, queue, String(total), String(prefetch)]);
    const pub = new Child('large.js', ['publish', lib, queue, String(size), String(perPublisher)]);
    children.push(sub, pub);
    await Promise.all([sub.next('ready'), pub.next('ready')]);
    sub.send({ go: true });
    pub.send({ go: true });
    const [{ result: c }, { result: p }] = await Promise.all([sub.next('result'), pub.next('result')]);
    if (c.bad > 0) throw new Error(`${c.bad} of ${total} messages failed the length and CRC-32 check`);
    return {
      lib, scenario, size, prefetch, messages: total, seconds: c.seconds, MBps: (total * size) / 1048576 / c.seconds,
      consumerCpuUs: c.cpuUs, consumerGcPer1k: c.gcPer1k, consumerGcMs: c.gcMs, consumerGcKinds: c.gcKinds,
      consumerPeakMB: c.hwmMB, consumerSampledMB: c.rssSampledMB,
      publisherSeconds: p.seconds, publisherCpuUs: p.cpuUs, publisherGcPer1k: p.gcPer1k,
      publisherPeakMB: p.hwmMB, publisherSampledMB: p.rssSampledMB,
    };
  } finally {
    await Promise.all(children.map((c) => c.end()));
    await broker.channel.deleteQueue(queue);
    await broker.close();
  }
}

const args = process.argv.slice(2);
if (args[0] === '--child') {
  const [, role, lib, queue, a, b] = args;
  childMain(`large ${role} ${lib}`, 120000, () => (role === 'publish'
    ? publisher(lib, queue, Number(a), Number(b))
    : consumer(lib, queue, Number(a), Number(b))));
} else {
  const [lib, scenario] = args;
  if (!SCENARIOS[scenario]) throw new Error(`unknown scenario ${scenario}; expected ${Object.keys(SCENARIOS)}`);
  driverMain(`large ${lib} ${scenario}`, 150000, () => driver(lib, scenario, cliArgs(args.slice(2)).number(PER_PUBLISHER)));
}
