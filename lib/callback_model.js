'use strict';

// The callback API: CallbackModel (what `connect()` from
// 'amqplib-rs/callback_api' yields), Channel and ConfirmChannel. Methods
// that wait for the server take a node-style callback as their last
// argument, always called as `cb(null, value)` or `cb(err)`; the
// callback is optional. Most methods return the channel, so calls can be
// chained.

const EventEmitter = require('node:events');
const defs = require('./defs');
const Args = require('./api_args');
const tracing = require('./tracing');
const { BaseChannel } = require('./channel');
const { getReplyHandler } = require('./channel_model');

const CONNECTION_EVENTS = ['error', 'close', 'blocked', 'unblocked', 'update-secret-ok'];

function noop() {}

// Normalise a user callback: never called with both an error and a value,
// and a missing callback becomes a no-op.
function nodeback(cb) {
  if (!cb) return noop;
  return (err, value) => {
    if (err === null) cb(null, value);
    else cb(err);
  };
}

// createChannel(cb) and createChannel(options, cb) are both accepted.
function optionsAndCallback(options, cb) {
  if (typeof options === 'function') return { options: undefined, cb: options };
  return { options, cb };
}

class CallbackModel extends EventEmitter {
  constructor(connection) {
    super();
    this.connection = connection;
    for (const name of CONNECTION_EVENTS) {
      connection.on(name, (...args) => this.emit(name, ...args));
    }
  }

  close(cb) {
    this.connection.close(cb);
  }

  // This connection's counters (lib/counters.js).
  counters() {
    return this.connection.counters();
  }

  updateSecret(newSecret, reason, cb) {
    this.connection._updateSecret(newSecret, reason, cb);
  }

  createChannel(options, cb) {
    const args = optionsAndCallback(options, cb);
    const done = nodeback(args.cb);
    const channel = new Channel(this.connection);
    channel.setOptions(args.options);
    channel.open((err) => (err === null ? done(null, channel) : done(err)));
    return channel;
  }

  createConfirmChannel(options, cb) {
    const args = optionsAndCallback(options, cb);
    const done = nodeback(args.cb);
    const channel = new ConfirmChannel(this.connection);
    channel.setOptions(args.options);
    channel.open((openErr) => {
      if (openErr !== null) return done(openErr);
      return channel.rpc(defs.ConfirmSelect, { nowait: false }, defs.ConfirmSelectOk, (err) =>
        err === null ? done(null, channel) : done(err),
      );
    });
    return channel;
  }
}

class Channel extends BaseChannel {
  constructor(connection) {
    super(connection);
  }

  // Send a method and call back with the fields of the expected reply.
  // For operations with side effects, or whose answer isn't simply the
  // reply's fields, use `_rpc` directly.
  rpc(method, fields, expect, cb) {
    const done = nodeback(cb);
    this._rpc(method, fields, expect, (err, reply) => done(err, reply && reply.fields));
    return this;
  }

  open(cb) {
    try {
      this.allocate();
    } catch (err) {
      return cb(err); // e.g. no free channel numbers
    }
    return this.rpc(defs.ChannelOpen, { outOfBand: '' }, defs.ChannelOpenOk, cb);
  }

  close(cb) {
    this.closeByUser(() => {
      if (cb) cb(null);
    });
  }

  // --- Queues ---

  assertQueue(queue, options, cb) {
    return this.rpc(defs.QueueDeclare, Args.assertQueue(queue, options), defs.QueueDeclareOk, cb);
  }

  checkQueue(queue, cb) {
    return this.rpc(defs.QueueDeclare, Args.checkQueue(queue), defs.QueueDeclareOk, cb);
  }

  deleteQueue(queue, options, cb) {
    return this.rpc(defs.QueueDelete, Args.deleteQueue(queue, options), defs.QueueDeleteOk, cb);
  }

  purgeQueue(queue, cb) {
    return this.rpc(defs.QueuePurge, Args.purgeQueue(queue), defs.QueuePurgeOk, cb);
  }

  bindQueue(queue, source, pattern, argt, cb) {
    return this.rpc(defs.QueueBind, Args.bindQueue(queue, source, pattern, argt), defs.QueueBindOk, cb);
  }

  unbindQueue(queue, source, pattern, argt, cb) {
    return this.rpc(defs.QueueUnbind, Args.unbindQueue(queue, source, pattern, argt), defs.QueueUnbindOk, cb);
  }

  // --- Exchanges ---

  // ExchangeDeclareOk has no fields; answer with the exchange name.
  assertExchange(exchange, type, options, cb) {
    const done = nodeback(cb);
    const fields = Args.assertExchange(exchange, type, options);
    this._rpc(defs.ExchangeDeclare, fields, defs.ExchangeDeclareOk, (err) => done(err, { exchange }));
    return this;
  }

  checkExchange(exchange, cb) {
    return this.rpc(defs.ExchangeDeclare, Args.checkExchange(exchange), defs.ExchangeDeclareOk, cb);
  }

  deleteExchange(exchange, options, cb) {
    return this.rpc(defs.ExchangeDelete, Args.deleteExchange(exchange, options), defs.ExchangeDeleteOk, cb);
  }

  bindExchange(dest, source, pattern, argt, cb) {
    return this.rpc(defs.ExchangeBind, Args.bindExchange(dest, source, pattern, argt), defs.ExchangeBindOk, cb);
  }

  unbindExchange(dest, source, pattern, argt, cb) {
    return this.rpc(defs.ExchangeUnbind, Args.unbindExchange(dest, source, pattern, argt), defs.ExchangeUnbindOk, cb);
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

  consume(queue, callback, options, cb) {
    const done = nodeback(cb);
    const fields = Args.consume(queue, options);
    this._rpc(defs.BasicConsume, fields, defs.BasicConsumeOk, (err, reply) => {
      if (err !== null) return done(err);
      // Register before any delivery for the new consumer is processed.
      this.registerConsumer(reply.fields.consumerTag, callback, fields.queue);
      return done(null, reply.fields);
    });
    return this;
  }

  cancel(consumerTag, cb) {
    const done = nodeback(cb);
    this._rpc(defs.BasicCancel, Args.cancel(consumerTag), defs.BasicCancelOk, (err, reply) => {
      if (err !== null) return done(err);
      this.unregisterConsumer(consumerTag);
      return done(null, reply.fields);
    });
    return this;
  }

  // Calls back with the message, or `false` if the queue was empty.
  get(queue, options, cb) {
    const fields = Args.get(queue, options);
    this.sendOrEnqueue(defs.BasicGet, fields, getReplyHandler(this, nodeback(cb)));
    return this;
  }

  ack(message, allUpTo) {
    this.sendImmediately(defs.BasicAck, Args.ack(message.fields.deliveryTag, allUpTo));
    return this;
  }

  ackAll() {
    this.sendImmediately(defs.BasicAck, Args.ack(0, true));
    return this;
  }

  nack(message, allUpTo, requeue) {
    this.sendImmediately(defs.BasicNack, Args.nack(message.fields.deliveryTag, allUpTo, requeue));
    return this;
  }

  nackAll(requeue) {
    this.sendImmediately(defs.BasicNack, Args.nack(0, true, requeue));
    return this;
  }

  // One message at a time; the same as nack(message, false, requeue).
  reject(message, requeue) {
    this.sendImmediately(defs.BasicReject, Args.reject(message.fields.deliveryTag, requeue));
    return this;
  }

  prefetch(count, global, cb) {
    return this.rpc(defs.BasicQos, Args.prefetch(count, global), defs.BasicQosOk, cb);
  }

  recover(cb) {
    return this.rpc(defs.BasicRecover, Args.recover(), defs.BasicRecoverOk, cb);
  }
}

// A channel in confirm mode: publish/sendToQueue take a callback that is
// called with `null` when the server acks the message, or an Error when it
// nacks it (or the channel closes first).
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

  // `cb()` once everything published so far is acked, `cb(err)` otherwise ('channel closed'
  // if the channel closed with any of it unconfirmed). Returns nothing, as amqplib 2.2.1 on.
  // The callback is required: amqplib fails without one by a rejection nothing can catch;
  // here it is a TypeError thrown at the call.
  waitForConfirms(cb) {
    if (typeof cb !== 'function') {
      throw new TypeError(`waitForConfirms requires a callback function; got ${cb === null ? 'null' : typeof cb}`);
    }
    this._waitForConfirms().then(
      () => cb(),
      (err) => cb(err),
    );
  }
}

module.exports = { CallbackModel, Channel, ConfirmChannel };
