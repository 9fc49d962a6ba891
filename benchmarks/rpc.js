'use strict';
// Request/reply (issue 16), one at a time: the library under test (a child process) sends a
// 100-byte request to a server queue with replyTo and correlationId and waits for the reply
// before sending the next; the server, in the driver process, is amqplib for every library
// (consume with noAck, answer each request with its content to its replyTo). Each client
// uses its own way of doing RPC over direct reply-to (amq.rabbitmq.reply-to): amqplib and ours
// by hand (a consumer on the reply-to pseudo-queue and a map of correlation ids),
// cloudamqp's AMQPSession rpcClient().call, rabbitmq-client's createRPCClient().send; each with
// its default socket options (the server has noDelay, so that it adds no Nagle delay of its
// own).
//
// After 500 round trips of warm-up, `count` round trips are measured: round trips per second,
// p50 and p99 of the round trip, and the child's CPU and GC per round trip. Count: 5,000
// (run.js --quick: 1,000, after 100 of warm-up).
//
//   node benchmarks/rpc.js <lib> [count] [--warm=500]

const { performance } = require('node:perf_hooks');
const { open } = require('./clients');
const {
  Meter, Child, cliArgs, childMain, driverMain, uniqueName, percentile, load, AMQP_URL, sleep,
} = require('./lib');

const COUNT = 5000;
const WARM = 500;
const BODY = Buffer.alloc(100, 0x72);

async function child(lib, queue, count, warm) {
  const client = await open(lib);
  const rpc = await client.rpcClient();
  for (let i = 0; i < warm; i++) await rpc.call(queue, BODY);
  const rtt = new Float64Array(count);
  const meter = new Meter({ sample: true });
  meter.start();
  for (let i = 0; i < count; i++) {
    const t0 = performance.now();
    const reply = await rpc.call(queue, BODY);
    rtt[i] = performance.now() - t0;
    if (reply.length !== BODY.length) throw new Error(`a reply of ${reply.length} bytes`);
  }
  const result = await meter.stop(count);
  await rpc.close();
  await client.close();
  const sorted = Array.from(rtt).sort((a, b) => a - b);
  return { ...result, perSec: count / result.seconds, p50Ms: percentile(sorted, 50), p99Ms: percentile(sorted, 99) };
}

// The server: answers every request on `queue` with its content.
async function serve(queue) {
  const model = await load('amqplib').api().connect(AMQP_URL, { noDelay: true });
  const channel = await model.createChannel();
  await channel.assertQueue(queue, { durable: false, exclusive: true });
  await channel.consume(queue, (msg) => {
    channel.sendToQueue(msg.properties.replyTo, msg.content, { correlationId: msg.properties.correlationId });
  }, { noAck: true });
  return { close: () => Promise.race([model.close().catch(() => {}), sleep(2000)]) };
}

async function driver(lib, count, warm) {
  const queue = uniqueName('rpc');
  const server = await serve(queue);
  try {
    const proc = new Child('rpc.js', [lib, queue, String(count), String(warm)]);
    const { result } = await proc.next('result');
    await proc.end();
    return { lib, scenario: 'rpc', size: BODY.length, ...result };
  } finally {
    await server.close(); // the queue is exclusive: it goes with the connection
  }
}

const args = process.argv.slice(2);
if (args[0] === '--child') {
  const [, lib, queue, count, warm] = args;
  childMain(`rpc child ${lib}`, 120000, () => child(lib, queue, Number(count), Number(warm)));
} else {
  const cli = cliArgs(args.slice(1));
  driverMain(`rpc ${args[0]}`, 150000, () => driver(args[0], cli.number(COUNT), Number(cli.option('warm', WARM))));
}
