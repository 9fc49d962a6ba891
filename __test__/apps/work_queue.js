'use strict';

// Work queue: a producer sends persistent tasks to a queue; several workers,
// each on its own channel with prefetch(1), take one task at a time and ack
// it when done. A task marked "retry" is rejected once and requeued.

const amqp = require('amqplib');

async function startWorker(connection, queue, name, log) {
  const channel = await connection.createChannel();
  await channel.assertQueue(queue, { durable: true });
  await channel.prefetch(1);
  let inFlight = 0;
  let maxInFlight = 0;
  const { consumerTag } = await channel.consume(
    queue,
    (msg) => {
      inFlight += 1;
      maxInFlight = Math.max(maxInFlight, inFlight);
      const task = msg.content.toString();
      if (task.endsWith(':retry') && !msg.fields.redelivered) {
        inFlight -= 1;
        channel.nack(msg, false, true);
        return;
      }
      // Pretend to work for a little while, then acknowledge.
      setTimeout(() => {
        log.push({ worker: name, task, redelivered: msg.fields.redelivered, persistent: msg.properties.deliveryMode === 2 });
        inFlight -= 1;
        channel.ack(msg);
      }, 3);
    },
    { noAck: false },
  );
  return { channel, consumerTag, stats: () => ({ maxInFlight }) };
}

// Returns { log, workers: [{ name, maxInFlight }] } once every task is done.
async function run({ url, queue, tasks, workerCount = 2 }) {
  const connection = await amqp.connect(url);
  try {
    const log = [];
    const workers = [];
    for (let i = 0; i < workerCount; i++) {
      workers.push(await startWorker(connection, queue, `worker-${i}`, log));
    }

    const producer = await connection.createChannel();
    await producer.assertQueue(queue, { durable: true });
    for (const task of tasks) {
      producer.sendToQueue(queue, Buffer.from(task), { persistent: true });
    }

    await new Promise((resolve) => {
      const check = setInterval(() => {
        if (log.length >= tasks.length) {
          clearInterval(check);
          resolve();
        }
      }, 5);
    });

    for (const w of workers) await w.channel.cancel(w.consumerTag);
    const { messageCount } = await producer.checkQueue(queue);
    await producer.deleteQueue(queue);
    return {
      log,
      remaining: messageCount,
      workers: workers.map((w, i) => ({ name: `worker-${i}`, ...w.stats() })),
    };
  } finally {
    await connection.close();
  }
}

module.exports = { run };
