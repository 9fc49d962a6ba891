'use strict';

// Publish/subscribe: a logger publishes to a fanout exchange; every
// subscriber has its own exclusive, server-named queue bound to it and
// receives every message.

const amqp = require('amqplib');

async function subscribe(connection, exchange, received) {
  const channel = await connection.createChannel();
  await channel.assertExchange(exchange, 'fanout', { durable: false, autoDelete: true });
  const q = await channel.assertQueue('', { exclusive: true });
  await channel.bindQueue(q.queue, exchange, '');
  await channel.consume(q.queue, (msg) => received.push(msg.content.toString()), { noAck: true });
  return q.queue;
}

async function run({ url, exchange, messages, subscribers = 3 }) {
  const connection = await amqp.connect(url);
  try {
    const inboxes = [];
    const queues = [];
    for (let i = 0; i < subscribers; i++) {
      const inbox = [];
      inboxes.push(inbox);
      queues.push(await subscribe(connection, exchange, inbox));
    }

    const channel = await connection.createChannel();
    await channel.assertExchange(exchange, 'fanout', { durable: false, autoDelete: true });
    for (const m of messages) channel.publish(exchange, '', Buffer.from(m));

    await new Promise((resolve) => {
      const check = setInterval(() => {
        if (inboxes.every((inbox) => inbox.length >= messages.length)) {
          clearInterval(check);
          resolve();
        }
      }, 5);
    });
    // A message published with no subscribers bound is simply dropped.
    return { inboxes, queues };
  } finally {
    await connection.close();
  }
}

module.exports = { run };
