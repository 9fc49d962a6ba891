'use strict';

// Publisher confirms with the callback API: one callback per publish, then
// waitForConfirms(cb); afterwards, a checkQueue on a missing queue shows the
// channel error arriving through the callback.

const amqp = require('amqplib/callback_api');

function run({ url, queue, count, missingQueue }, done) {
  amqp.connect(url, (err, connection) => {
    if (err) return done(err);
    const fail = (error) => connection.close(() => done(error));
    connection.createConfirmChannel((err, channel) => {
      if (err) return fail(err);
      const channelErrors = [];
      channel.on('error', (e) => channelErrors.push(e.message));
      channel.assertQueue(queue, { exclusive: true }, (err) => {
        if (err) return fail(err);
        const calls = new Array(count).fill(0);
        const errors = [];
        for (let i = 0; i < count; i++) {
          channel.sendToQueue(queue, Buffer.from(String(i)), {}, (err) => {
            calls[i] += 1;
            if (err) errors.push(err);
          });
        }
        channel.waitForConfirms((err) => {
          if (err) return fail(err);
          channel.checkQueue(queue, (err, ok) => {
            if (err) return fail(err);
            const messageCount = ok.messageCount;
            channel.get(queue, { noAck: true }, (err, first) => {
              if (err) return fail(err);
              channel.checkQueue(missingQueue, (missingErr) => {
                setImmediate(() => {
                  connection.close((closeErr) =>
                    done(closeErr || null, {
                      calls,
                      errors,
                      messageCount,
                      first: first && { content: first.content.toString(), messageCount: first.fields.messageCount },
                      missing: missingErr && { code: missingErr.code, message: missingErr.message },
                      channelErrors,
                    }),
                  );
                });
              });
            });
          });
        });
      });
    });
  });
}

module.exports = { run };
