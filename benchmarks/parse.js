'use strict';
// Micro-benchmark: bytes to message objects. The same pre-encoded run of basic.deliver +
// header + body frames (1 KB bodies, some with headers tables), cut into 64 KB chunks, is
// read by a library's Connection (its own parser: `recvFrame`) and the frames put together
// into { fields, properties, content } by the same few lines for both libraries. The channel
// is opened first (channel.open-ok), as a client's is before deliveries. Given a chunk size,
// the run is cut into chunks of that many bytes instead: 1200 gives about one message per
// read, as a consumer at a broker's pace reads them, so that what each read costs shows.
//
//   node benchmarks/parse.js <amqplib|ours> [chunk bytes]     one library, in this process

const { Duplex } = require('node:stream');
const { load, deliveryTemplates, DeliveryStream, Meter, report, deadline, M, method } = require('./lib');

const MESSAGES = 20000; // per pass
const WARMUP_PASSES = 3;
const PASSES = 5;

function chunks(chunkBytes) {
  const source = new DeliveryStream(deliveryTemplates(1024), MESSAGES);
  const out = [];
  for (let c = source.nextChunk(); c !== null; c = source.nextChunk()) out.push(c);
  if (!chunkBytes) return out;
  const run = Buffer.concat(out);
  const cut = [];
  for (let at = 0; at < run.length; at += chunkBytes) cut.push(Buffer.from(run.subarray(at, at + chunkBytes)));
  return cut;
}

// Feeds every chunk as one read and assembles the messages; returns how many it made.
function pass(connection, stream, input) {
  let made = 0;
  let message = null;
  let bytes = 0;
  for (const chunk of input) {
    stream.push(chunk);
    let f = connection.recvFrame();
    while (f) {
      if (f.id === M.BasicDeliver) {
        message = { fields: f.fields, properties: null, content: null };
        // Ours hands over a delivery that came whole as one frame.
        if (f.content !== undefined) {
          message.properties = f.properties;
          message.content = f.content;
          bytes += message.content.length;
          made++;
        }
      } else if (f.content !== undefined) {
        message.content = f.content;
        bytes += message.content.length;
        made++;
      } else message.properties = f.fields;
      f = connection.recvFrame();
    }
  }
  if (bytes !== made * 1024) throw new Error('short bodies');
  return made;
}

async function main() {
  const lib = load(process.argv[2]);
  deadline(60000, `parse ${lib.name}`);
  const input = chunks(Number(process.argv[3]) || 0);
  const stream = new Duplex({ read() {}, write: (_c, _e, cb) => cb() });
  const connection = new (lib.Connection())(stream);
  connection.frameMax = 131072;
  stream.push(method(1, M.ChannelOpenOk, (w) => w.longstr('')));
  if (connection.recvFrame().id !== M.ChannelOpenOk) throw new Error('expected channel.open-ok');
  for (let i = 0; i < WARMUP_PASSES; i++) pass(connection, stream, input);
  global.gc?.();
  const meter = new Meter({ heap: true });
  meter.start();
  const t0 = process.hrtime.bigint();
  let made = 0;
  for (let i = 0; i < PASSES; i++) made += pass(connection, stream, input);
  const ns = Number(process.hrtime.bigint() - t0) / made;
  report({ lib: lib.name, ...(await meter.stop(made, { nsPerMessage: ns })) });
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
