'use strict';

// The promise API: ChannelModel (what `connect()` resolves to), Channel
// and ConfirmChannel. Operations that wait for the server return promises
// of the reply's fields; fire-and-forget operations (publish, ack, ...)
// return immediately. The protocol machinery lives in BaseChannel
// (./channel); the option handling in ./api_args.

const EventEmitter = require('node:events');
const defs = require('./defs');
const Args = require('./api_args');
const tracing = require('./tracing');
const { BaseChannel, convertCloseFrameToError } = require('./channel');

// Connection events that the model re-emits as its own.
const CONNECTION_EVENTS = ['error', 'close', 'blocked', 'unblocked', 'update-secret-ok'];

function forwardEvents(source, target, names) {
  for (const name of names) {
    source.on(name, (...args) => target.emit(name, ...args));
  }
}

// A short description of a frame for error messages.
function describeFrame(frame) {
  if (!frame.id) return `<Content channel:${frame.channel} size:${frame.size}>`;
  return `<${defs.info(frame.id).name} channel:${frame.channel}>`;
}

// The reply handler for BasicGet, shared by both APIs: BasicGetEmpty gives
// `false`; BasicGetOk comes with its message whole, which is handed on as a
// delivery is. `done(err, messageOrFalse)`.
function getReplyHandler(channel, done) {
  return (err, frame) => {
    if (err instanceof Error) return done(err);
    // A close frame: the channel was closed by the server, quite
    // possibly because of this very get (e.g. no such queue).
    if (err) return done(convertCloseFrameToError(defs.BasicGet, err));
    if (frame.id === defs.BasicGetEmpty) return done(null, false);
    if (frame.id === defs.BasicGetOk) return channel.handOver(frame, (message) => done(null, message));
    return done(new Error(`Unexpected response to BasicGet: ${describeFrame(frame)}`));
  };
}

class ChannelModel extends EventEmitter {
  constructor(connection) {
    super();
    this.connection = connection;
    forwardEvents(connection, this, CONNECTION_EVENTS);
  }

  close() {
    return new Promise((resolve, reject) => {
      this.connection.close((err) => (err ? reject(err) : resolve()));
    });
  }

  // This connection's counters (lib/counters.js).
  counters() {
    return this.connection.counters();
  }

  updateSecret(newSecret, reason) {
    return new Promise((resolve, reject) => {
      this.connection._updateSecret(newSecret, reason, (err, ok) => (err ? reject(err) : resolve(ok)));
    });
  }

  createChannel(options) {
    return openChannel(this.connection, false, options);
  }

  createConfirmChannel(options) {
    return openChannel(this.connection, true, options);
  }
}

// A promise-API channel opened on `connection` (in confirm mode if `confirm`): the model's, and
// topology recovery's under either API (lib/topology.js).
async function openChannel(connection, confirm, options) {
  const channel = confirm ? new ConfirmChannel(connection) : new Channel(connection);
  channel.setOptions(options);
  await channel.open();
  if (confirm) await channel.rpc(defs.ConfirmSelect, { nowait: false }, defs.ConfirmSelectOk);
  return channel;
}

class Channel extends BaseChannel {
  constructor(connection) {
    super(connection);
  }

  // Send a method and resolve with the fields of the expected reply.
  rpc(method, fields, expect) {
    return new Promise((resolve, reject) => {
      this._rpc(method, fields, expect, (err, reply) => (err ? reject(err) : resolve(reply.fields)));
    });
  }

  async open() {
    this.allocate();
    return this.rpc(defs.ChannelOpen, { outOfBand: '' }, defs.ChannelOpenOk);
  }

  close() {
    return new Promise((resolve) => {
      this.closeByUser(() => resolve());
    });
  }

  // --- Queues ---

  assertQueue(queue, options) {
    return this.rpc(defs.QueueDeclare, Args.assertQueue(queue, options), defs.QueueDeclareOk);
  }

  checkQueue(queue) {
    return this.rpc(defs.QueueDeclare, Args.checkQueue(queue), defs.QueueDeclareOk);
  }

  deleteQueue(queue, options) {
    return this.rpc(defs.QueueDelete, Args.deleteQueue(queue, options), defs.QueueDeleteOk);
  }

  purgeQueue(queue) {
    return this.rpc(defs.QueuePurge, Args.purgeQueue(queue), defs.QueuePurgeOk);
  }

  bindQueue(queue, source, pattern, argt) {
    return this.rpc(defs.QueueBind, Args.bindQueue(queue, source, pattern, argt), defs.QueueBindOk);
  }

  unbindQueue(queue, source, pattern, argt) {
    return this.rpc(defs.QueueUnbind, Args.unbindQueue(queue, source, pattern, argt), defs.QueueUnbindOk);
  }

  // --- Exchanges ---

  // ExchangeDeclareOk has no fields; answer with the exchange name, which
  // is what callers want to chain on.
  async assertExchange(exchange, type, options) {
    await this.rpc(defs.ExchangeDeclare, Args.assertExchange(exchange, type, options), defs.ExchangeDeclareOk);
    return { exchange };
  }

  checkExchange(exchange) {
    return this.rpc(defs.ExchangeDeclare, Args.checkExchange(exchange), defs.ExchangeDeclareOk);
  }

  deleteExchange(exchange, options) {
    return this.rpc(defs.ExchangeDelete, Args.deleteExchange(exchange, options), defs.ExchangeDeleteOk);
  }

  bindExchange(dest, source, pattern, argt) {
    return this.rpc(defs.ExchangeBind, Args.bindExchange(dest, source, pattern, argt), defs.ExchangeBindOk);
  }

  unbindExchange(dest, source, pattern, argt) {
    return this.rpc(defs.ExchangeUnbind, Args.unbindExchange(dest, source, pattern, argt), defs.ExchangeUnbindOk);
  }

  // --- Messages ---

  // Returns false when the channel's write buffer is full: wait for
  // 'drain' before publishing more.
  publish(exchange, routingKey, content, options) {
    return this.publishMessage(exchange, routingKey, content, options);
  }

  sendToQueue(queue, content, options) {
    return this.publish('', queue, content, options);
  }

  consume(queue, callback, options) {
    const fields = Args.consume(queue, options);
    return new Promise((resolve, reject) => {
      this._rpc(defs.BasicConsume, fields, defs.BasicConsumeOk, (err, reply) => {
        if (err) return reject(err);
        // Register synchronously, before any delivery for the new
        // consumer can be processed.
        this.registerConsumer(reply.fields.consumerTag, callback, fields.queue);
        return resolve(reply.fields);
      });
    });
  }

  // Resolves with the server's acknowledgement, `{ consumerTag }` (amqplib 2.2.1 on).
  cancel(consumerTag) {
    return new Promise((resolve, reject) => {
      this._rpc(defs.BasicCancel, Args.cancel(consumerTag), defs.BasicCancelOk, (err, reply) => {
        if (err) return reject(err);
        this.unregisterConsumer(consumerTag);
        return resolve(reply.fields);
      });
    });
  }

  // Resolves with the message, or `false` if the queue was empty.
  get(queue, options) {
    const fields = Args.get(queue, options);
    return new Promise((resolve, reject) => {
      this.sendOrEnqueue(
        defs.BasicGet,
        fields,
        getReplyHandler(this, (err, message) => (err ? reject(err) : resolve(message))),
      );
    });
  }

  ack(message, allUpTo) {
    this.sendImmediately(defs.BasicAck, Args.ack(message.fields.deliveryTag, allUpTo));
  }

  ackAll() {
    this.sendImmediately(defs.BasicAck, Args.ack(0, true));
  }

  nack(message, allUpTo, requeue) {
    this.sendImmediately(defs.BasicNack, Args.nack(message.fields.deliveryTag, allUpTo, requeue));
  }

  nackAll(requeue) {
    this.sendImmediately(defs.BasicNack, Args.nack(0, true, requeue));
  }

  // Basic.Reject predates Basic.Nack (a RabbitMQ extension) and handles
  // one message at a time: the same as nack(message, false, requeue).
  reject(message, requeue) {
    this.sendImmediately(defs.BasicReject, Args.reject(message.fields.deliveryTag, requeue));
  }

  recover() {
    return this.rpc(defs.BasicRecover, Args.recover(), defs.BasicRecoverOk);
  }

  qos(count, global) {
    return this.rpc(defs.BasicQos, Args.prefetch(count, global), defs.BasicQosOk);
  }

  prefetch(count, global) {
    return this.qos(count, global);
  }
}

// A channel in confirm mode: the server acks or nacks every published
// message, and publish/sendToQueue take a callback for that outcome
// (`null` for an ack, an Error for a nack).
class ConfirmChannel extends Channel {
  publish(exchange, routingKey, content, options, cb) {
    if (tracing.publish.hasSubscribers) {
      return this.tracePublishConfirmed(exchange, routingKey, content, options, cb, (properties) => super.publish(exchange, routingKey, content, properties));
    }
    // As amqplib's: Channel#publish (which instrumentation hooks), then the callback queued
    // (not if the publish throws).
    const written = super.publish(exchange, routingKey, content, options);
    this.pushConfirmCallback(cb);
    return written;
  }

  sendToQueue(queue, content, options, cb) {
    return this.publish('', queue, content, options, cb);
  }

  waitForConfirms() {
    return this._waitForConfirms();
  }
}

module.exports = {
  ChannelModel,
  Channel,
  ConfirmChannel,
  // shared with the callback API
  getReplyHandler,
  openChannel,
};
