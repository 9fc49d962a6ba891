'use strict';
// Acknowledgements against the broker: ack, nack and reject take a shorter way to the wire
// (lib/connection.js, acknowledgementFlags); each flag must still mean what it says.

const { describe, it } = require('node:test');
const assert = require('node:assert');
const amqp = require('../index');

const BROKER_URL = process.env.AMQP_URL || 'amqp://localhost';

// A channel with a fresh queue holding `count` messages, and a way to get the next one.
async function queueWith(count) {
  const conn = await amqp.connect(BROKER_URL);
  const ch = await conn.createChannel();
  const { queue } = await ch.assertQueue('', { exclusive: true });
  for (let i = 0; i < count; i++) ch.sendToQueue(queue, Buffer.from(String(i)));
  const next = async () => {
    for (let tries = 0; tries < 100; tries++) {
      const msg = await ch.get(queue);
      if (msg) return msg;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    return false;
  };
  return { conn, ch, queue, next };
}

describe('acknowledgements', () => {
  it('nack requeues or drops as told, and reject likewise', async () => {
    const { conn, ch, queue, next } = await queueWith(1);
    const first = await next();
    ch.nack(first, false, true);
    const again = await next();
    assert.strictEqual(again.content.toString(), '0');
    assert.strictEqual(again.fields.redelivered, true, 'requeue: true puts it back');
    ch.reject(again, true);
    const third = await next();
    assert.strictEqual(third.fields.redelivered, true);
    ch.reject(third, false);
    ch.nack({ fields: { deliveryTag: 0 } }, true, false); // nothing left unacked: a no-op
    assert.strictEqual((await ch.checkQueue(queue)).messageCount, 0, 'requeue: false drops it');
    await conn.close();
  });

  it('ack with allUpTo settles every earlier delivery, and a plain ack only its own', async () => {
    const { conn, ch, queue, next } = await queueWith(4);
    const got = [await next(), await next(), await next(), await next()];
    ch.ack(got[2], true); // 0, 1 and 2
    ch.ack(got[3]);
    await ch.recover(); // would requeue anything left unacked
    assert.strictEqual((await ch.checkQueue(queue)).messageCount, 0);
    await conn.close();
  });

  it('unusual tags and flags take the general encoder, with its errors', async () => {
    const { conn, ch, next } = await queueWith(1);
    const msg = await next();
    assert.throws(() => ch.ack({ fields: { deliveryTag: 'x' } }), TypeError);
    ch.nack(msg, 0, 1); // numbers for flags: truthy and falsy, as amqplib reads them
    assert.strictEqual((await next()).fields.redelivered, true);
    await conn.close();
  });
});
