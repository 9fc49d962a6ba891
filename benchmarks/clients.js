'use strict';
// One small interface over the four clients the broker scenarios compare, each used the way
// its own documentation shows:
//
//   amqplib, ours      amqp.connect(url, socketOptions); a channel per publisher or consumer;
//                      publish returns false → wait for the channel's 'drain'; a confirm
//                      channel's publish takes a callback; ch.prefetch + ch.consume + ch.ack;
//                      request/reply by hand over direct reply-to (amqplib has no RPC helper)
//   cloudamqp          @cloudamqp/amqp-client's low-level API: new AMQPClient(url).connect(),
//                      conn.channel(), ch.basicPublish (a promise, fulfilled once the frames are
//                      written, or confirmed after ch.confirmSelect()), ch.prefetch +
//                      ch.basicConsume with msg.ack(); RPC with AMQPSession's rpcClient()
//   rabbitmq-client    new Connection({url}), createPublisher({confirm}) and pub.send (a promise,
//                      fulfilled once written, or confirmed), createConsumer({queue, qos}) (acks
//                      when the handler returns), createRPCClient().send
//
// The queues are declared and deleted by the scenario's driver, so the clients only use them
// (rabbitmq-client's consumer declares its queue, passively). What each client keeps from its
// defaults is its own: frameMax (amqplib and ours 128 KB, the other two 8 KB), heartbeats, and
// Nagle's algorithm, which every one leaves on unless asked (`noDelay`).
//
//   const client = await open(lib, { noDelay });
//   client.noDelay                        how noDelay was set, or 'default'
//   await client.count(queue)             messages ready in a queue (a passive declare)
//   const pub = await client.publisher({ confirm })
//     const wait = pub.send(queue, body, headers)   as fast as the client's flow control
//     if (wait) await wait;                          allows: await what it returns
//     pub.sendConfirmed(queue, body, headers, done)  done(err) once confirmed (confirm mode)
//   const sub = await client.consume(queue, { prefetch }, (body, headers) => {})  acks each
//     await sub.cancel()
//   const rpc = await client.rpcClient(); const reply = await rpc.call(queue, body); rpc.close()
//   await client.close()
//
// and two loops the scenarios share on top of it: `publishConfirmed` and `consumeCount`.

const { once } = require('node:events');
const { load, AMQP_URL, sleep } = require('./lib');

const LIBRARIES = ['amqplib', 'ours', 'cloudamqp', 'rabbitmq-client'];
const DIRECT_REPLY_TO = 'amq.rabbitmq.reply-to';

// Closing is not measured, and must not hang a run: at most `ms`, whatever the outcome.
const settle = (promise, ms = 2000) => Promise.race([promise.catch(() => {}), sleep(ms)]);
// Errors a client reports as events go to stderr (a scenario then fails by its deadline or
// by a rejected publish, with this as the reason).
const fail = (what) => (err) => process.stderr.write(`${what}: ${err && err.message}\n`);

// ------------------------------------------------------------------ amqplib and ours

async function openAmqplib(lib, { noDelay }) {
  const amqp = load(lib).api();
  const model = await amqp.connect(AMQP_URL, noDelay ? { noDelay: true } : {});
  model.on('error', fail(`${lib} connection`));
  const control = await model.createChannel();
  return {
    lib,
    noDelay: noDelay ? 'socket option noDelay' : 'default',
    count: async (queue) => (await control.checkQueue(queue)).messageCount,

    async publisher({ confirm = false } = {}) {
      const ch = confirm ? await model.createConfirmChannel() : await model.createChannel();
      return {
        send: (queue, body, headers) => (ch.sendToQueue(queue, body, headers && { headers }) ? undefined : once(ch, 'drain')),
        // The scenarios bound what is unconfirmed, and so what is buffered: `false` is not
        // waited for here.
        sendConfirmed: (queue, body, headers, done) => {
          ch.sendToQueue(queue, body, headers && { headers }, done);
        },
      };
    },

    async consume(queue, { prefetch }, onMessage) {
      const ch = await model.createChannel();
      await ch.prefetch(prefetch);
      const { consumerTag } = await ch.consume(queue, (msg) => {
        if (msg === null) return; // cancelled by the broker
        onMessage(msg.content, msg.properties.headers);
        ch.ack(msg);
      }, { noAck: false });
      return { cancel: () => ch.cancel(consumerTag) };
    },

    async rpcClient() {
      const ch = await model.createChannel();
      const pending = new Map();
      let id = 0;
      await ch.consume(DIRECT_REPLY_TO, (msg) => {
        const resolve = msg && pending.get(msg.properties.correlationId);
        if (!resolve) return;
        pending.delete(msg.properties.correlationId);
        resolve(msg.content);
      }, { noAck: true });
      return {
        call: (queue, body) => new Promise((resolve) => {
          const correlationId = String(++id);
          pending.set(correlationId, resolve);
          ch.sendToQueue(queue, body, { replyTo: DIRECT_REPLY_TO, correlationId });
        }),
        close: () => ch.close(),
      };
    },

    close: () => settle(model.close()),
  };
}

// ------------------------------------------------------------------ @cloudamqp/amqp-client

async function openCloudamqp({ noDelay }) {
  const { AMQPClient, AMQPSession } = load('cloudamqp').api();
  const conn = await new AMQPClient(AMQP_URL).connect();
  conn.onerror = fail('cloudamqp connection');
  // It has no socket option; its `socket` is public (typed) and set here after connecting.
  if (noDelay) conn.socket.setNoDelay(true);
  const control = await conn.channel();
  return {
    lib: 'cloudamqp',
    noDelay: noDelay ? 'no option: socket.setNoDelay(true) after connect' : 'default',
    count: async (queue) => (await control.queueDeclare(queue, { passive: true })).messageCount,

    async publisher({ confirm = false } = {}) {
      const ch = await conn.channel();
      if (confirm) await ch.confirmSelect();
      return {
        send: (queue, body, headers) => ch.basicPublish('', queue, body, headers && { headers }),
        sendConfirmed: (queue, body, headers, done) => {
          ch.basicPublish('', queue, body, headers && { headers }).then(() => done(), done);
        },
      };
    },

    async consume(queue, { prefetch }, onMessage) {
      const ch = await conn.channel();
      await ch.prefetch(prefetch);
      const consumer = await ch.basicConsume(queue, { noAck: false }, async (msg) => {
        onMessage(msg.body, msg.properties.headers);
        await msg.ack();
      });
      return { cancel: () => consumer.cancel() };
    },

    // Its RPC client belongs to the high-level session API (direct reply-to), on a
    // connection of its own; default socket options there.
    async rpcClient() {
      const session = await AMQPSession.connect(AMQP_URL);
      const rpc = await session.rpcClient();
      return {
        call: async (queue, body) => (await rpc.call(queue, body)).body,
        close: async () => {
          await rpc.close();
          await settle(session.stop());
        },
      };
    },

    close: () => settle(conn.close()),
  };
}

// ------------------------------------------------------------------ rabbitmq-client

async function openRabbitmqClient({ noDelay }) {
  const { Connection } = load('rabbitmq-client').api();
  const rabbit = new Connection({ url: AMQP_URL, noDelay: !!noDelay });
  rabbit.on('error', fail('rabbitmq-client connection'));
  await rabbit.onConnect();
  return {
    lib: 'rabbitmq-client',
    noDelay: noDelay ? 'connection option noDelay' : 'default',
    count: async (queue) => (await rabbit.queueDeclare({ queue, passive: true })).messageCount,

    async publisher({ confirm = false } = {}) {
      const pub = rabbit.createPublisher({ confirm });
      return {
        send: (queue, body, headers) => pub.send({ routingKey: queue, headers }, body),
        sendConfirmed: (queue, body, headers, done) => {
          pub.send({ routingKey: queue, headers }, body).then(() => done(), done);
        },
      };
    },

    async consume(queue, { prefetch }, onMessage) {
      const sub = rabbit.createConsumer({ queue, queueOptions: { passive: true }, qos: { prefetchCount: prefetch } }, (msg) => {
        onMessage(msg.body, msg.headers);
      });
      sub.on('error', fail('rabbitmq-client consumer'));
      await once(sub, 'ready');
      return { cancel: () => sub.close() };
    },

    async rpcClient() {
      const rpc = rabbit.createRPCClient();
      return {
        call: async (queue, body) => (await rpc.send(queue, body)).body,
        close: () => rpc.close(),
      };
    },

    close: () => settle(rabbit.close()),
  };
}

// ------------------------------------------------------------------ shared loops

// Publishes `count` messages (`message(i)` gives [body, headers]) on a confirm-mode publisher
// with at most `window` unconfirmed; resolves once all are confirmed, rejects on a nack, and
// when no confirm has come for `stallMs` (a lost confirm would otherwise hang the run until
// its deadline, with nothing said).
function publishConfirmed(pub, queue, count, window, message, stallMs = 10000) {
  return new Promise((resolve, reject) => {
    let sent = 0;
    let confirmed = 0;
    let seen = 0;
    const watchdog = setInterval(() => {
      if (confirmed === seen) {
        finish(new Error(`no confirm for ${stallMs / 1000} s: ${confirmed} of ${count} confirmed, ${sent - confirmed} waiting`));
      }
      seen = confirmed;
    }, stallMs);
    const finish = (err) => {
      clearInterval(watchdog);
      if (err) reject(err);
      else resolve();
    };
    const pump = () => {
      while (sent < count && sent - confirmed < window) {
        const [body, headers] = message(sent++);
        pub.sendConfirmed(queue, body, headers, done);
      }
    };
    const done = (err) => {
      if (err) finish(err);
      else if (++confirmed === count) finish();
      else pump();
    };
    pump();
  });
}

// Starts consuming (acking each), calling `onMessage(body, headers)` for each message; once
// the consumer is in place, resolves with it (to cancel) and `all`, a promise fulfilled by
// the `count`-th message.
async function consumeCount(client, queue, { count, prefetch, onMessage = () => {} }) {
  let n = 0;
  let finish;
  const all = new Promise((resolve) => { finish = resolve; });
  const consumer = await client.consume(queue, { prefetch }, (body, headers) => {
    onMessage(body, headers);
    if (++n === count) finish();
  });
  return { consumer, all };
}

// ------------------------------------------------------------------

function open(lib, options = {}) {
  switch (lib) {
    case 'amqplib':
    case 'ours':
      return openAmqplib(lib, options);
    case 'cloudamqp':
      return openCloudamqp(options);
    case 'rabbitmq-client':
      return openRabbitmqClient(options);
    default:
      throw new Error(`unknown library ${lib}; expected one of ${LIBRARIES.join(', ')}`);
  }
}

module.exports = { LIBRARIES, open, publishConfirmed, consumeCount };
