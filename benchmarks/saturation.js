'use strict';
// Saturation (issue 16): how fast each client goes with nothing holding it back but the broker
// and the client's own flow control. 1 KB messages; the library under test runs in a child
// process of its own and measures itself (CPU, GC by kind, RSS sampled every 50 ms and VmHWM):
//
//   publish   `count` messages as fast as backpressure allows: amqplib and ours wait for
//             'drain' when publish returns false; cloudamqp and rabbitmq-client await each
//             publish's promise (fulfilled once its frames are written). Measured until the
//             broker holds them all (a passive declare every 5 ms).
//   confirm   `count` messages on a confirm channel, at most 1000 unconfirmed; measured until
//             the last confirm.
//   consume   a queue the driver filled beforehand with `count` messages (not measured),
//             consumed with prefetch 1000 and an ack per message; measured until the last
//             delivery.
//
// Counts: publish 100,000, confirm 50,000, consume 100,000 (run.js --quick: 10,000, 5,000,
// 10,000). The driver (amqplib) declares a queue of its own for the run and deletes it after.
//
//   node benchmarks/saturation.js <lib> <publish|confirm|consume> [count]

const { open, publishConfirmed, consumeCount } = require('./clients');
const {
  Meter, Child, cliArgs, childMain, driverMain, driverChannel, uniqueName, sleep,
} = require('./lib');

const SIZE = 1024;
const WINDOW = 1000; // unconfirmed publishes, confirm
const PREFETCH = 1000; // consume
const COUNTS = { publish: 100000, confirm: 50000, consume: 100000 };
const BODY = Buffer.alloc(SIZE, 0x73);

// ------------------------------------------------------------------ the measured process

async function publishAll(client, queue, count) {
  const pub = await client.publisher();
  return async () => {
    for (let i = 0; i < count; i++) {
      const wait = pub.send(queue, BODY);
      if (wait) await wait;
    }
    while (await client.count(queue) < count) await sleep(5);
  };
}

async function confirmAll(client, queue, count) {
  const pub = await client.publisher({ confirm: true });
  return () => publishConfirmed(pub, queue, count, WINDOW, () => [BODY]);
}

async function consumeAll(client, queue, count) {
  return async () => {
    const { consumer, all } = await consumeCount(client, queue, { count, prefetch: PREFETCH });
    await all;
    return consumer;
  };
}

// Each kind sets up, then returns the measured part; that resolves with the consumer, if any.
const KINDS = { publish: publishAll, confirm: confirmAll, consume: consumeAll };

async function child(lib, kind, count, queue) {
  const client = await open(lib);
  const run = await KINDS[kind](client, queue, count);
  const meter = new Meter({ sample: true });
  meter.start();
  const consumer = await run();
  const result = await meter.stop(count);
  if (consumer) await consumer.cancel();
  await client.close();
  return { ...result, msgsPerSec: count / result.seconds };
}

// ------------------------------------------------------------------ the driver

async function driver(lib, kind, count) {
  const broker = await driverChannel();
  const queue = uniqueName(`saturation.${kind}`);
  await broker.channel.assertQueue(queue, { durable: false });
  try {
    if (kind === 'consume') await broker.fill(queue, count, BODY);
    const proc = new Child('saturation.js', [lib, kind, String(count), queue]);
    const { result } = await proc.next('result');
    await proc.end();
    return { lib, scenario: kind, size: SIZE, ...result };
  } finally {
    await broker.channel.deleteQueue(queue);
    await broker.close();
  }
}

const args = process.argv.slice(2);
if (args[0] === '--child') {
  const [, lib, kind, count, queue] = args;
  childMain(`saturation child ${lib} ${kind}`, 150000, () => child(lib, kind, Number(count), queue));
} else {
  const [lib, kind] = args;
  if (!KINDS[kind]) throw new Error(`unknown scenario ${kind}; expected ${Object.keys(KINDS)}`);
  driverMain(`saturation ${lib} ${kind}`, 180000, () => driver(lib, kind, cliArgs(args.slice(2)).number(COUNTS[kind])));
}
