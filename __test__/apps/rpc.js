'use strict';

// RPC: a server consumes requests from a queue and replies to
// msg.properties.replyTo with the request's correlationId. The client uses
// RabbitMQ's direct reply-to pseudo-queue (amq.rabbitmq.reply-to): it
// consumes from it with noAck before sending any request.

const amqp = require('amqplib');
const { randomUUID } = require('node:crypto');

function fib(n) {
  let a = 0;
  let b = 1;
  for (let i = 0; i < n; i++) [a, b] = [b, a + b];
  return a;
}

async function startServer(connection, queue) {
  const channel = await connection.createChannel();
  await channel.assertQueue(queue, { durable: true, autoDelete: true });
  await channel.prefetch(1);
  await channel.consume(queue, (msg) => {
    const n = parseInt(msg.content.toString(), 10);
    channel.sendToQueue(msg.properties.replyTo, Buffer.from(String(fib(n))), {
      correlationId: msg.properties.correlationId,
    });
    channel.ack(msg);
  });
  return channel;
}

async function createClient(connection, queue) {
  const channel = await connection.createChannel();
  const pending = new Map();
  const replies = [];
  await channel.consume(
    'amq.rabbitmq.reply-to',
    (msg) => {
      replies.push({ routingKey: msg.fields.routingKey, correlationId: msg.properties.correlationId });
      const resolve = pending.get(msg.properties.correlationId);
      if (resolve) {
        pending.delete(msg.properties.correlationId);
        resolve(parseInt(msg.content.toString(), 10));
      }
    },
    { noAck: true },
  );
  return {
    replies,
    call(n) {
      const correlationId = randomUUID();
      return new Promise((resolve) => {
        pending.set(correlationId, resolve);
        channel.sendToQueue(queue, Buffer.from(String(n)), {
          correlationId,
          replyTo: 'amq.rabbitmq.reply-to',
        });
      });
    },
  };
}

async function run({ url, queue, inputs }) {
  const connection = await amqp.connect(url);
  try {
    await startServer(connection, queue);
    const client = await createClient(connection, queue);
    const results = await Promise.all(inputs.map((n) => client.call(n)));
    return { results, expected: inputs.map(fib), replies: client.replies };
  } finally {
    await connection.close();
  }
}

module.exports = { run, fib };
