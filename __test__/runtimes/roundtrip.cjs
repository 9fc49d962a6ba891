'use strict';
// 1000 confirmed round trips with the package's default transport, run by
// __test__/runtimes.test.js under Node, Bun and Deno: publish under confirms, consume,
// ack, close. Prints one line of JSON: what was confirmed and received, and the transport.

const amqp = require('../..');

async function main() {
  const conn = await amqp.connect(process.env.AMQP_URL || 'amqp://localhost');
  const transport = conn.connection.stream.constructor.name;
  const ch = await conn.createConfirmChannel();
  const { queue } = await ch.assertQueue('', { exclusive: true });
  const received = [];
  const all = new Promise((resolve) =>
    ch.consume(queue, (message) => {
      received.push(message.content.toString());
      ch.ack(message);
      if (received.length === 1000) resolve();
    }),
  );
  let confirmed = 0;
  for (let i = 0; i < 1000; i++) {
    await new Promise((resolve, reject) => ch.sendToQueue(queue, Buffer.from(`m${i}`), {}, (err) => (err ? reject(err) : resolve())));
    confirmed++;
  }
  await all;
  await conn.close();
  const inOrder = received.every((body, i) => body === `m${i}`);
  console.log(JSON.stringify({ confirmed, received: received.length, inOrder, transport }));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
