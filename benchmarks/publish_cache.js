'use strict';
// Does the publish repeat cache pay? (lib/outgoing.js: a publish with the same arguments as
// its channel's last one sends that one's frames again, only the body size changed; checking
// that costs a comparison of the arguments in JS.) Publishes through the connection's
// Outgoing with a channel record (the cache in use) and without one (every publish encoded
// afresh), the same arguments each time, taking the output every 64 publishes as a turn of
// the event loop would; best of five rounds, ns per publish.
//
//   node benchmarks/publish_cache.js

const native = require('../lib/native');
const defs = require('../lib/defs');
const { Outgoing } = require('../lib/outgoing');

const PUBLISHES = 200_000;
const ROUNDS = 5;
const STREAM = { writableLength: 0, write: () => true, once: () => {} };
const FIELDS = { exchange: 'amq.direct', routingKey: 'orders.created', mandatory: false, immediate: false };
const PROPS = {
  contentType: 'application/json', deliveryMode: 2, timestamp: 1700000000,
  headers: { 'x-source': 'bench', 'x-attempt': 1, 'x-trace': 'abc123' },
};

function nsPerPublish(withCache, size) {
  const session = new native.NativeConnection();
  const handle = session.handle();
  const channels = withCache ? [undefined, { waiting: 0, lastPublish: null, highWaterMark: 0 }] : [];
  const out = new Outgoing(STREAM, session, handle, channels, false);
  const content = Buffer.alloc(size, 1);
  let best = Infinity;
  for (let round = 0; round < ROUNDS; round++) {
    const start = process.hrtime.bigint();
    for (let i = 0; i < PUBLISHES; i++) {
      out.sendMessage(1, defs.BasicPublish, FIELDS, defs.BasicProperties, PROPS, content);
      if ((i & 63) === 63) native.takeOutput(handle);
    }
    native.takeOutput(handle);
    best = Math.min(best, Number(process.hrtime.bigint() - start) / PUBLISHES);
  }
  return best;
}

console.log('| body | encoded afresh, ns | repeat cache, ns | cache ÷ afresh |');
console.log('|---|---|---|---|');
for (const size of [100, 1024, 16 * 1024]) {
  const fresh = nsPerPublish(false, size);
  const cached = nsPerPublish(true, size);
  console.log(`| ${size} B | ${fresh.toFixed(0)} | ${cached.toFixed(0)} | ${(cached / fresh).toFixed(2)} |`);
}
