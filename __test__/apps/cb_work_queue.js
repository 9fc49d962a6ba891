'use strict';

// Work queue with the callback API: the producer and two workers (prefetch 1,
// manual acks) on one connection; done(err, result) when all tasks are acked.

const amqp = require('amqplib/callback_api');

function run({ url, queue, tasks }, done) {
  amqp.connect(url, (err, connection) => {
    if (err) return done(err);
    const log = [];
    let finished = false;
    const finish = (error, result) => {
      if (finished) return;
      finished = true;
      connection.close((closeErr) => done(error || closeErr || null, result));
    };

    const startWorker = (name, next) => {
      connection.createChannel((err, channel) => {
        if (err) return finish(err);
        channel.assertQueue(queue, { durable: true, autoDelete: false }, (err) => {
          if (err) return finish(err);
          channel.prefetch(1);
          channel.consume(
            queue,
            (msg) => {
              // null: the broker cancelled the consumer (the queue was deleted).
              if (msg === null) return;
              setTimeout(() => {
                log.push({ worker: name, task: msg.content.toString() });
                channel.ack(msg);
                if (log.length === tasks.length) cleanUp();
              }, 2);
            },
            { noAck: false },
            (err, ok) => {
              if (err) return finish(err);
              next(ok.consumerTag);
            },
          );
        });
      });
    };

    let producer;
    const cleanUp = () => {
      producer.checkQueue(queue, (err, ok) => {
        if (err) return finish(err);
        producer.deleteQueue(queue, {}, (err, deleted) => {
          if (err) return finish(err);
          finish(null, { log, remaining: ok.messageCount, deleted: deleted.messageCount });
        });
      });
    };

    startWorker('worker-0', (tag0) => {
      startWorker('worker-1', (tag1) => {
        connection.createChannel((err, channel) => {
          if (err) return finish(err);
          producer = channel;
          channel.assertQueue(queue, { durable: true }, (err, ok) => {
            if (err) return finish(err);
            if (ok.consumerCount !== 2) return finish(new Error(`expected 2 consumers, got ${ok.consumerCount} (${tag0}, ${tag1})`));
            for (const task of tasks) channel.sendToQueue(queue, Buffer.from(task), { persistent: true });
          });
        });
      });
    });
  });
}

module.exports = { run };
