'use strict';
// Tiny messages (issue 16): a queue the driver (amqplib) has filled beforehand with `count`
// messages of 10 bytes (not measured) is consumed by the library under test, in a child
// process started with `--max-heap-size=<heap MB>`: prefetch 1000 (rabbitmq-client: qos
// prefetchCount 1000), an ack per message. The child reports GC count and time by kind
// (minor = scavenge, major = mark-sweep-compact, incremental marking, weak callbacks), CPU and
// wall time from the consume call to the last delivery, and its peak RSS. A small heap shows
// what a client allocates per message: more scavenges, and major GCs sooner.
//
// Count: 1,000,000 by default; run.js passes 200,000 (so that the whole issue-16 set fits in
// about 10 minutes on two cores: filling runs at ~55,000/s here, consuming at 20,000-50,000/s,
// and each library runs twice per round) and 20,000 with --quick. Heap: run.js runs 128 and
// 2048.
//
//   node benchmarks/tiny.js <lib> <heap MB> [count]

const { open, consumeCount } = require('./clients');
const { Meter, Child, cliArgs, childMain, driverMain, driverChannel, uniqueName } = require('./lib');

const SIZE = 10;
const PREFETCH = 1000;
const COUNT = 1000000;

async function child(lib, count, queue) {
  const client = await open(lib);
  const meter = new Meter({ sample: true });
  meter.start();
  const { consumer, all } = await consumeCount(client, queue, { count, prefetch: PREFETCH });
  await all;
  const result = await meter.stop(count);
  await consumer.cancel();
  await client.close();
  return { ...result, cpuS: (result.cpuUs * count) / 1e6, msgsPerSec: count / result.seconds };
}

async function driver(lib, heap, count) {
  const broker = await driverChannel();
  const queue = uniqueName('tiny');
  await broker.channel.assertQueue(queue, { durable: false });
  try {
    await broker.fill(queue, count, Buffer.alloc(SIZE, 0x74));
    const proc = new Child('tiny.js', [lib, String(count), queue], [`--max-heap-size=${heap}`]);
    const { result } = await proc.next('result');
    await proc.end();
    return { lib, scenario: `heap.${heap}`, heapMB: heap, size: SIZE, ...result };
  } finally {
    await broker.channel.deleteQueue(queue);
    await broker.close();
  }
}

const args = process.argv.slice(2);
if (args[0] === '--child') {
  const [, lib, count, queue] = args;
  childMain(`tiny child ${lib}`, 600000, () => child(lib, Number(count), queue));
} else {
  const [lib, heap] = args;
  if (!/^\d+$/.test(heap || '')) throw new Error('usage: node benchmarks/tiny.js <lib> <heap MB> [count]');
  driverMain(`tiny ${lib} ${heap}`, 900000, () => driver(lib, Number(heap), cliArgs(args.slice(2)).number(COUNT)));
}
