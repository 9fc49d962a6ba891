'use strict';
// A channel's state is the native core's (core/src/channels.rs): what may be sent on a channel
// closing or closed, and what is handed on of it between our close and its close-ok. These
// check what a user sees of that, against the broker, with amqplib 2.3.1 beside us where it
// behaves the same.

const { describe, it } = require('node:test');
const assert = require('node:assert');
const { AMQP_URL, ours, latest } = require('./helpers');

const closedError = { name: 'IllegalOperationError', message: 'Channel closed' };

describe('channel state', () => {
  it('a channel closed keeps refusing after a new channel takes its number, which goes on unharmed', async () => {
    const conn = await ours.connect(AMQP_URL);
    try {
      const first = await conn.createChannel();
      await first.close();
      const second = await conn.createChannel();
      assert.strictEqual(second.ch, first.ch, 'the number is given again');
      assert.throws(() => first.publish('', 'nowhere', Buffer.from('x')), closedError);
      assert.throws(() => first.ack({ fields: { deliveryTag: 1 } }), closedError);
      await assert.rejects(first.checkExchange('amq.direct'), closedError);
      // Had the old channel's publish or ack gone out on the number, the broker would have
      // closed the new channel (an unknown delivery tag is a 406).
      const { queue } = await second.assertQueue('', { exclusive: true });
      second.sendToQueue(queue, Buffer.from('still here'));
      const message = await getOne(second, queue);
      assert.strictEqual(message.content.toString(), 'still here');
      second.ack(message);
      await second.close();
    } finally {
      await conn.close();
    }
  });

  for (const [name, lib] of [['ours', ours], ['amqplib 2.3.1', latest]]) {
    it(`deliveries already read when the consumer closes its channel are not handed on (${name})`, async () => {
      const conn = await lib.connect(AMQP_URL);
      try {
        const setup = await conn.createChannel();
        const { queue } = await setup.assertQueue('', { exclusive: true });
        for (let i = 0; i < 20; i++) setup.sendToQueue(queue, Buffer.from(`m${i}`));
        await setup.checkQueue(queue); // all 20 are in the queue
        const ch = await conn.createChannel();
        const seen = [];
        const closed = new Promise((resolve) => ch.on('close', resolve));
        await ch.consume(queue, (message) => {
          seen.push(message.content.toString());
          ch.close().catch(() => {});
        });
        await closed;
        assert.deepStrictEqual(seen, ['m0']);
        // The rest went back to the queue unacked.
        const left = await setup.checkQueue(queue);
        assert.strictEqual(left.messageCount, 20);
        await setup.close();
      } finally {
        await conn.close();
      }
    });
  }
});

async function getOne(ch, queue) {
  for (;;) {
    const message = await ch.get(queue);
    if (message) return message;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
