'use strict';

// Routing: logs published to a direct exchange with the severity as the
// routing key; each subscriber binds its queue once per severity it wants.

const amqp = require('amqplib');

async function run({ url, exchange, subscribers, logs }) {
  const connection = await amqp.connect(url);
  try {
    const channel = await connection.createChannel();
    await channel.assertExchange(exchange, 'direct', { durable: false, autoDelete: true });

    const received = {};
    for (const [name, severities] of Object.entries(subscribers)) {
      received[name] = [];
      const q = await channel.assertQueue('', { exclusive: true });
      for (const severity of severities) await channel.bindQueue(q.queue, exchange, severity);
      await channel.consume(
        q.queue,
        (msg) => received[name].push(`${msg.fields.routingKey}:${msg.content.toString()}`),
        { noAck: true },
      );
    }

    for (const [severity, text] of logs) channel.publish(exchange, severity, Buffer.from(text));

    // Wait until the broker has nothing left for us: a round trip after the
    // publishes, then let the deliveries drain.
    const expected = (name) => logs.filter(([s]) => subscribers[name].includes(s)).length;
    await new Promise((resolve) => {
      const check = setInterval(() => {
        if (Object.keys(received).every((n) => received[n].length >= expected(n))) {
          clearInterval(check);
          resolve();
        }
      }, 5);
    });
    return received;
  } finally {
    await connection.close();
  }
}

module.exports = { run };
