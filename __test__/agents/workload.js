'use strict';
// What a service does with amqplib, under an agent (agents.test.js): with the promise API, 3
// plain publishes and 3 on a confirm channel (waitForConfirms), each in a unit of work of the
// agent's (`wrap`), all consumed and acked, the consumer cancelled, the queue deleted; then with
// the callback API one publish, consumed and acked. `amqplib` is whichever the project has.
// Resolves with what was received, and the names in a caller's headers object afterwards.

const amqp = require('amqplib');
const callbackApi = require('amqplib/callback_api');

async function promiseApi(url, wrap) {
  const conn = await amqp.connect(url);
  const ch = await conn.createChannel();
  const { queue } = await ch.assertQueue('', { exclusive: true });
  const received = [];
  let allReceived;
  const all = new Promise((resolve) => (allReceived = resolve));
  const { consumerTag } = await ch.consume(queue, (msg) => {
    received.push(msg.properties.messageId);
    ch.ack(msg);
    if (received.length === 6) allReceived();
  });
  const headers = { app: 'agents' };
  await wrap('plain', async () => {
    for (let i = 0; i < 3; i++) ch.sendToQueue(queue, Buffer.from(`plain ${i}`), { messageId: `plain-${i}`, headers });
  });
  const cch = await conn.createConfirmChannel();
  await wrap('confirmed', async () => {
    for (let i = 0; i < 3; i++) cch.sendToQueue(queue, Buffer.from(`confirmed ${i}`), { messageId: `confirmed-${i}` });
    await cch.waitForConfirms();
  });
  await all;
  await ch.cancel(consumerTag);
  await ch.deleteQueue(queue);
  await conn.close();
  return { queue, received, headerNames: Object.keys(headers) };
}

function callbackStyle(url) {
  return new Promise((resolve, reject) => {
    callbackApi.connect(url, (err, conn) => {
      if (err) return reject(err);
      conn.createChannel((err, ch) => {
        if (err) return reject(err);
        ch.assertQueue('', { exclusive: true }, (err, ok) => {
          if (err) return reject(err);
          ch.consume(ok.queue, (msg) => {
            ch.ack(msg);
            conn.close(() => resolve({ queue: ok.queue, received: [msg.properties.messageId] }));
          });
          ch.sendToQueue(ok.queue, Buffer.from('callback'), { messageId: 'callback' });
        });
      });
    });
  });
}

// Runs both; `hide(value)` puts <queue 0>, <queue 1> and <tag> for the server-made names.
async function workload(url, wrap) {
  const promiseRun = await promiseApi(url, wrap);
  const callbackRun = await callbackStyle(url);
  const queues = [promiseRun.queue, callbackRun.queue];
  const hide = (value) =>
    typeof value === 'string' ? queues.reduce((s, q, i) => s.split(q).join(`<queue ${i}>`), value).replace(/amq\.ctag-[\w-]+/g, '<tag>') : value;
  return { received: [promiseRun.received, callbackRun.received], headerNames: promiseRun.headerNames, hide };
}

module.exports = workload;
