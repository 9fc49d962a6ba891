'use strict';
// The repeat cache of the publish path (lib/outgoing.js): a publish with the same arguments
// as its channel's last one sends that one's frames again, with only the body size changed.
// Property: whatever changes between publishes (to the arguments, or in place to a headers
// object reused from publish to publish), the bytes sent are exactly those of a fresh
// encoding. Random sequences from a fixed seed, so a failure replays.

const { describe, it } = require('node:test');
const assert = require('node:assert');
const native = require('../lib/native');
const defs = require('../lib/defs');
const { Outgoing } = require('../lib/outgoing');
const { prng } = require('./helpers');

// A stream that takes nothing: the test reads the session's output itself.
const STREAM = { writableLength: 0, write: () => true, once: () => {} };

// Channel 1 of a new session: with its records (JS's, and the core's, which keeps the last
// publish's frames), or a bare number, which has no cache.
function outgoing(withRecord) {
  const session = new native.NativeConnection();
  const handle = session.handle();
  const channels = withRecord ? [undefined, { waiting: 0, lastPublish: null, highWaterMark: 0 }] : [];
  const channel = withRecord ? session.openChannel(1) : 1;
  return { out: new Outgoing(STREAM, session, handle, channels, false), handle, channel };
}


describe('the publish repeat cache', () => {
  it('sends exactly the bytes of a fresh encoding, whatever changes between publishes', () => {
    const next = prng(20261203);
    const pick = (list) => list[Math.floor(next() * list.length)];
    const headers = { a: 1 };
    const nested = { list: [1] };
    let fields = { exchange: '', routingKey: 'q', mandatory: false, immediate: false };
    let props = { contentType: 'text/plain', headers };
    // Each step changes something, or nothing (so that repeats are common, as in use).
    const changes = [
      () => {},
      () => {},
      () => {},
      () => { fields = { ...fields, routingKey: pick(['q', 'r', 'q']) }; },
      () => { fields = { ...fields, exchange: pick(['', 'amq.direct']) }; },
      () => { fields = { ...fields, mandatory: !fields.mandatory }; },
      () => { props = { ...props, contentType: pick(['text/plain', 'application/json', undefined]) }; },
      () => { props = { ...props, priority: pick([undefined, 0, 5]) }; },
      () => { props = { ...props, headers: pick([headers, nested, undefined, { fresh: 1 }]) }; },
      () => { headers[pick(['a', 'b', 'c'])] = pick([1, 2, -0, 0, 'x', true, null, 1.5, 2 ** 40]); },
      () => { delete headers[pick(['a', 'b', 'c'])]; },
      () => { nested.list.push(nested.list.length); },
      () => { props = { ...props, timestamp: pick([undefined, 1700000000, 1700000001]) }; },
      () => { props = { ...props, expiration: pick([undefined, '1000', '2000']) }; },
      () => { props = { ...props, deliveryMode: pick([undefined, 1, 2]) }; },
    ];
    const cached = outgoing(true);
    let repeats = 0;
    for (let step = 0; step < 3000; step++) {
      pick(changes)();
      const content = Buffer.alloc(Math.floor(next() * 300), step & 0xff);
      const hadSnapshot = cached.out.channels[1].lastPublish;
      cached.out.sendMessage(cached.channel, defs.BasicPublish, fields, defs.BasicProperties, props, content);
      if (hadSnapshot && cached.out.channels[1].lastPublish === hadSnapshot) repeats++;
      const fresh = outgoing(false);
      fresh.out.sendMessage(1, defs.BasicPublish, fields, defs.BasicProperties, props, content);
      assert.deepStrictEqual(native.takeOutput(cached.handle), native.takeOutput(fresh.handle), `step ${step}`);
    }
    assert.ok(repeats > 500, `the cache was used (${repeats} repeats)`);
  });
});
