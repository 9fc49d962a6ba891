'use strict';

// Topics: a topic exchange with binding patterns using * (exactly one word)
// and # (zero or more words). After the logs, an "end" marker is sent
// straight to each queue (default exchange) from the same channel, so each
// subscriber knows it has seen everything routed to it.

const amqp = require('amqplib');

async function run({ url, exchange, bindings, keys }) {
  const connection = await amqp.connect(url);
  try {
    const channel = await connection.createChannel();
    await channel.assertExchange(exchange, 'topic', { durable: false, autoDelete: true });

    const received = {};
    const done = [];
    const queues = [];
    for (const [name, patterns] of Object.entries(bindings)) {
      received[name] = [];
      const { queue } = await channel.assertQueue('', { exclusive: true });
      queues.push(queue);
      for (const pattern of patterns) await channel.bindQueue(queue, exchange, pattern);
      done.push(
        new Promise((resolve) => {
          channel.consume(
            queue,
            (msg) => {
              if (msg.properties.type === 'end') resolve();
              else received[name].push(msg.fields.routingKey);
            },
            { noAck: true },
          );
        }),
      );
    }

    for (const key of keys) channel.publish(exchange, key, Buffer.from(`msg for ${key}`));
    for (const queue of queues) channel.sendToQueue(queue, Buffer.alloc(0), { type: 'end' });

    await Promise.all(done);
    return received;
  } finally {
    await connection.close();
  }
}

module.exports = { run };
