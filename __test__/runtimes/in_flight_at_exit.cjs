'use strict';
// A test file (for `deno test`) that ends with connections' I/O in flight: each test starts a
// connect and a publish without waiting for them. `deno test` then frees the addon's objects
// while JS still holds them and runs the event loop once more (lib/native.js says how), where
// a connection's read would reach freed memory.
const { it } = require('node:test');
const amqp = require('../..');

const url = process.env.AMQP_URL || 'amqp://localhost';

for (let i = 0; i < 3; i++) {
  it(`connection ${i} still in flight as the file ends`, () => {
    amqp.connect(url).then(
      (conn) => conn.createChannel().then((ch) => ch.sendToQueue('amq.in-flight', Buffer.from('x'))),
      () => {},
    );
  });
}
