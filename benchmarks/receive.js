'use strict';
// Brokerless receive: a fake broker answers the handshake, channel.open and basic.consume
// over a fake socket, then hands the library deliveries back to back in fresh 64 KB chunks,
// one read per turn of the event loop, as a Node socket would; frames fall across reads.
// The consumer does nothing, or acks each message through the channel API.
//
//   node benchmarks/receive.js <amqplib|ours|none> <size> <ack|noack>
// `none` runs the fake broker's side alone (making the chunks), to show its share.

const { load, SIZES, deliveryTemplates, DeliveryStream, fakeChannel, Meter, report, deadline, turn } = require('./lib');

// Messages per run (a fifth of them warm up first), so that each run takes well under a second.
const COUNT = { '100': 300000, '1k': 200000, '16k': 30000, '64k': 8000, '448k': 1200 };

async function main() {
  const [name, sizeName, mode] = process.argv.slice(2);
  const size = SIZES[sizeName];
  const ack = mode === 'ack';
  deadline(60000, `receive ${name} ${sizeName} ${mode}`);
  const total = COUNT[sizeName];
  const warm = Math.floor(total / 5);
  const source = new DeliveryStream(deliveryTemplates(size), total);
  const meter = new Meter();

  if (name === 'none') {
    for (let i = 0; source.nextChunk() !== null; i++) if (i === 0) meter.start();
    report({ lib: name, size: sizeName, mode, ...(await meter.stop(total)) });
    return;
  }

  const { sock, channel } = await fakeChannel(load(name));
  let received = 0;
  let finished;
  const done = new Promise((resolve) => { finished = resolve; });
  await channel.consume('bench', (msg) => {
    received++;
    if (ack) channel.ack(msg);
    if (received === total) finished();
  }, { noAck: !ack, consumerTag: 'bench' });

  let from = -1;
  let writes0 = 0;
  const step = () => {
    if (from < 0 && received >= warm) {
      from = received;
      writes0 = sock.stats.writes;
      meter.start();
    }
    const chunk = source.nextChunk();
    if (chunk === null) return;
    sock.deliver(chunk);
    setImmediate(step);
  };
  step();
  await done;
  await turn(); // acks written at the end of the turn
  await turn();
  const measured = total - from;
  report({ lib: name, size: sizeName, mode, ...(await meter.stop(measured, { writes: (sock.stats.writes - writes0) / measured })) });
  process.exit(0);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
