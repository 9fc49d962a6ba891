'use strict';

// Channel errors: a failed operation (here, checking a queue that does not
// exist, or redeclaring an exchange with another type) makes the broker close
// the channel. The promise rejects with the error, the channel emits 'error'
// and 'close', later operations on it throw, and the connection carries on.

const amqp = require('amqplib');

async function run({ url, missingQueue, exchange }) {
  const connection = await amqp.connect(url);
  const report = { connectionEvents: [] };
  connection.on('error', (err) => report.connectionEvents.push(`error: ${err.message}`));
  connection.on('close', () => report.connectionEvents.push('close'));
  try {
    // 1. checkQueue of a missing queue
    const channel = await connection.createChannel();
    const channelEvents = [];
    channel.on('error', (err) => channelEvents.push({ event: 'error', code: err.code, message: err.message }));
    channel.on('close', () => channelEvents.push({ event: 'close' }));
    try {
      await channel.checkQueue(missingQueue);
      report.checkQueue = 'resolved';
    } catch (err) {
      report.checkQueue = { name: err.constructor.name, code: err.code, classId: err.classId, methodId: err.methodId, message: err.message };
    }
    await new Promise((resolve) => setImmediate(resolve));
    report.channelEvents = channelEvents;

    // 2. using the closed channel
    try {
      channel.sendToQueue(missingQueue, Buffer.from('x'));
      report.afterClose = 'no error';
    } catch (err) {
      report.afterClose = { name: err.constructor.name, message: err.message, isIllegal: err instanceof amqp.IllegalOperationError };
    }

    // 3. the connection still works
    const second = await connection.createChannel();
    second.on('error', () => {});
    const { queue } = await second.assertQueue('', { exclusive: true });
    second.sendToQueue(queue, Buffer.from('still alive'));
    const msg = await new Promise((resolve) => {
      const poll = async () => {
        const m = await second.get(queue, { noAck: true });
        if (m) resolve(m);
        else setTimeout(poll, 5);
      };
      poll();
    });
    report.stillAlive = msg.content.toString();

    // 4. exchange type mismatch: 406 PRECONDITION_FAILED
    await second.assertExchange(exchange, 'fanout', { durable: false, autoDelete: true });
    try {
      await second.assertExchange(exchange, 'topic', { durable: false, autoDelete: true });
      report.redeclare = 'resolved';
    } catch (err) {
      report.redeclare = { code: err.code, message: err.message };
    }

    // 5. and again, a fresh channel can clean up
    const third = await connection.createChannel();
    await third.deleteExchange(exchange);
    await third.close();
  } finally {
    await connection.close();
  }
  return report;
}

module.exports = { run };
