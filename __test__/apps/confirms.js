'use strict';

// Publisher confirms: a ConfirmChannel calls each publish's callback once
// the broker has taken responsibility for the message (err === null), or
// with an error if the broker nacks it. waitForConfirms resolves when all
// outstanding publishes are confirmed, and rejects if any was nacked.

const amqp = require('amqplib');

async function publishAll({ url, queue, count }) {
  const connection = await amqp.connect(url);
  try {
    const channel = await connection.createConfirmChannel();
    await channel.assertQueue(queue, { durable: true });
    const callbacks = new Array(count).fill(0);
    const errors = [];
    for (let i = 0; i < count; i++) {
      channel.sendToQueue(queue, Buffer.from(`job ${i}`), { persistent: true }, (err) => {
        callbacks[i] += 1;
        if (err) errors.push(err);
      });
    }
    await channel.waitForConfirms();
    const { messageCount } = await channel.checkQueue(queue);
    await channel.deleteQueue(queue);
    await channel.close();
    return { callbacks, errors, messageCount };
  } finally {
    await connection.close();
  }
}

// A queue limited to `maxLength` messages that rejects publishes beyond
// that: the overflow publishes are nacked.
async function publishOverflow({ url, queue, maxLength, count }) {
  const connection = await amqp.connect(url);
  try {
    const channel = await connection.createConfirmChannel();
    await channel.assertQueue(queue, { durable: true, maxLength, overflow: 'reject-publish' });
    const outcomes = new Array(count).fill(null);
    const calls = new Array(count).fill(0);
    for (let i = 0; i < count; i++) {
      channel.sendToQueue(queue, Buffer.from(`job ${i}`), {}, (err) => {
        calls[i] += 1;
        outcomes[i] = err ? `nack: ${err.message}` : 'ack';
      });
    }
    let waitError = null;
    try {
      await channel.waitForConfirms();
    } catch (err) {
      waitError = err;
    }
    const { messageCount } = await channel.checkQueue(queue);
    await channel.deleteQueue(queue);
    return { outcomes, calls, waitError, messageCount };
  } finally {
    await connection.close();
  }
}

module.exports = { publishAll, publishOverflow };
