'use strict';
// Brokerless send: over a fake socket (the fake broker answers the handshake and
// channel.open), publish in bursts of 64 per turn of the event loop, waiting for 'drain'
// when publish returns false; measured until every body byte has been handed to the stream.
//
//   node benchmarks/send.js <amqplib|ours> <size>

const { once } = require('node:events');
const { load, SIZES, fakeChannel, Meter, report, deadline, turn } = require('./lib');

const COUNT = { '100': 300000, '1k': 200000, '16k': 60000, '64k': 20000, '448k': 3000 };
const BURST = 64;

async function publish(channel, content, count) {
  for (let sent = 0; sent < count;) {
    let ok = true;
    for (let i = 0; i < BURST && sent < count; i++, sent++) ok = channel.publish('amq.direct', 'nowhere', content);
    if (ok) await turn();
    else await once(channel, 'drain');
  }
}

// Resolves once the stream has been handed `bytes` body bytes in all.
async function written(sock, bytes) {
  while (sock.scanner.bodyBytes < bytes) await turn();
}

async function main() {
  const [name, sizeName] = process.argv.slice(2);
  const size = SIZES[sizeName];
  deadline(60000, `send ${name} ${sizeName}`);
  const total = COUNT[sizeName];
  const warm = Math.floor(total / 5);
  const content = Buffer.alloc(size, 0x62);
  const { sock, channel } = await fakeChannel(load(name));

  await publish(channel, content, warm);
  await written(sock, warm * size);
  const meter = new Meter();
  const writes0 = sock.stats.writes;
  meter.start();
  await publish(channel, content, total - warm);
  await written(sock, total * size);
  const measured = total - warm;
  report({ lib: name, size: sizeName, ...(await meter.stop(measured, { writes: (sock.stats.writes - writes0) / measured })) });
  process.exit(0);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
