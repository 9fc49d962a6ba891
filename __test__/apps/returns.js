'use strict';

// Mandatory publishing: a message that no queue takes comes back in a
// 'return' event on the channel. On a confirm channel the return arrives
// before the publish is confirmed.

const amqp = require('amqplib');

async function run({ url, exchange, queue }) {
  const connection = await amqp.connect(url);
  try {
    const channel = await connection.createConfirmChannel();
    await channel.assertExchange(exchange, 'direct', { durable: false, autoDelete: true });
    const { queue: q } = await channel.assertQueue(queue, { exclusive: true });
    await channel.bindQueue(q, exchange, 'routed');

    const events = [];
    channel.on('return', (msg) => {
      events.push({
        event: 'return',
        fields: msg.fields,
        content: msg.content.toString(),
        messageId: msg.properties.messageId,
        headers: msg.properties.headers,
      });
    });

    const confirm = (label) => (err) => events.push({ event: 'confirm', label, err: err ? err.message : null });

    channel.publish(exchange, 'routed', Buffer.from('delivered'), { mandatory: true, messageId: 'm1' }, confirm('m1'));
    channel.publish(exchange, 'nowhere', Buffer.from('bounced'), { mandatory: true, messageId: 'm2', headers: { why: 'test' } }, confirm('m2'));
    // Without mandatory, an unroutable message is silently dropped.
    channel.publish(exchange, 'nowhere', Buffer.from('dropped'), { messageId: 'm3' }, confirm('m3'));
    await channel.waitForConfirms();

    const { messageCount } = await channel.checkQueue(q);
    return { events, messageCount };
  } finally {
    await connection.close();
  }
}

module.exports = { run };
