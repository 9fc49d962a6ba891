'use strict';
// The channel core under both API models: one RPC at a time with replies matched to their
// requests, the closing handshake, publisher confirms, and handing messages on. A message
// comes whole: the native core owns the content rules (core/src/content.rs), and reports frames
// out of turn as a channel error of their own (a ChannelViolation, lib/incoming.js), not a frame.
// Whether the channel is open is the native core's too (core/src/channels.rs): it refuses what
// may not be sent on a channel closing or closed (worded here as amqplib's IllegalOperationError,
// with the stack of the moment the state changed), and between our close and its close-ok it
// hands on nothing of the channel but that close-ok, and answers a close crossing ours.
// Its internal interface is that of amqplib's lib/channel.js.

const EventEmitter = require('node:events');
const { format: fmt } = require('node:util');
const defs = require('./defs');
const { closeMessage, methodName, inspect, violationText } = require('./format');
const { ChannelViolation, ChannelClosed } = require('./incoming');
const { IllegalOperationError, stackCapture } = require('./error');
const safeEmit = require('./safe_emit');
const Args = require('./api_args');
const { ChannelRefused } = require('./outgoing');
const tracing = require('./tracing');

const { constants } = defs;

class Channel extends EventEmitter {
  constructor(connection) {
    super();
    this.connection = connection;
    this.reply = null; // the continuation of the RPC in flight
    this.pending = []; // RPCs waiting for it
    this.closeWaiter = null; // the continuation of our close, called at its close-ok
    // Where the channel began closing, or closed: IllegalOperationError's stackAtStateChange.
    this.stackAtStateChange = undefined;
    // Publisher confirms: callbacks of unconfirmed publishes, the first one's tag is lwm.
    this.lwm = 1;
    this.unconfirmed = new ConfirmQueue();
    // Set when the channel closed with publishes unconfirmed: every waitForConfirms fails.
    this.closedWithUnconfirmed = false;
    // Set while a confirm channel's traced publish calls Channel#publish.
    this.publishTraced = false;
    this.on('ack', (fields) => this.handleConfirm(confirmOk, fields));
    this.on('nack', (fields) => this.handleConfirm(confirmNacked, fields));
    this.on('close', () => this.failUnconfirmed(new Error('channel closed')));
  }

  setOptions(options) {
    this.options = options;
  }

  // The channel's number, and the handle the native core knows it by (core/src/channels.rs).
  allocate() {
    this.ch = this.connection.freshChannel(this, this.options);
    this.handle = this.connection.openChannel(this.ch);
    return this;
  }

  sendImmediately(method, fields) {
    try {
      return this.connection.sendMethod(this.handle, method, fields);
    } catch (err) {
      throw this.refusal(err);
    }
  }

  // A send the native core refused (the channel closing or closed), as amqplib words it.
  refusal(err) {
    if (!(err instanceof ChannelRefused)) return err;
    return new IllegalOperationError(err.closing ? 'Channel closing' : 'Channel closed', this.stackAtStateChange);
  }

  // Sends now if no RPC is in flight, else queues behind it; traced on amqplib:rpc when
  // subscribed. An RPC whose arguments cannot be sent (a table too large for a frame, say)
  // throws and leaves the channel free for the next one (amqplib's would wait for a reply
  // that never comes).
  sendOrEnqueue(method, fields, reply) {
    if (!tracing.rpc.hasSubscribers) return this.enqueueRpc(method, fields, reply);
    const context = { ...tracing.serverOf(this.connection), method: tracing.rpcName(method), fields, channel: this.ch };
    // The reply comes as (null, frame), (Error) or (the server's close frame): the tracer is
    // told an Error, the reply what it always gets.
    return tracing.traceCallback(
      tracing.rpc,
      context,
      (traced) => this.enqueueRpc(method, fields, (err, f) => traced(rpcError(method, err), f, err)),
      (_, f, err) => reply(err, f),
    );
  }

  enqueueRpc(method, fields, reply) {
    if (this.reply === null) {
      this.reply = reply;
      try {
        this.sendImmediately(method, fields);
      } catch (err) {
        this.reply = null;
        throw err;
      }
    } else {
      // Queued RPCs are sent later: whether they may be is asked now.
      const refused = this.connection.channelRefusal(this.handle);
      if (refused !== null) throw this.refusal(refused);
      this.pending.push({ method, fields, reply });
    }
  }

  // Sends the next queued RPC; those that cannot be sent are returned with their errors,
  // for the caller to fail once the reply in hand has been handled.
  sendNextPending() {
    const failed = [];
    while (this.reply === null && this.pending.length > 0) {
      const next = this.pending.shift();
      this.reply = next.reply;
      try {
        this.sendImmediately(next.method, next.fields);
      } catch (err) {
        this.reply = null;
        failed.push([next.reply, err]);
      }
    }
    return failed;
  }

  sendMessage(fields, properties, content) {
    try {
      return this.connection.sendMessage(this.handle, defs.BasicPublish, fields, defs.BasicProperties, properties, content);
    } catch (err) {
      throw this.refusal(err);
    }
  }

  // Channel#publish of both APIs (and so sendToQueue, and a confirm channel's publish, which
  // call it as amqplib's do); traced on amqplib:publish when subscribed, the subscriber's
  // additions to the properties sent.
  publishMessage(exchange, routingKey, content, options) {
    if (!tracing.publish.hasSubscribers || this.publishTraced) return this.sendPublish(exchange, routingKey, content, options);
    const context = tracing.publishContext(this, exchange, routingKey, content, options, false);
    return tracing.publish.traceSync(this.sendPublish, context, this, exchange, routingKey, content, context.properties);
  }

  // A confirm channel's publish when traced: `publish(properties)` is its Channel#publish,
  // traced here through to the server's ack (null) or nack (an Error), which `cb` hears.
  tracePublishConfirmed(exchange, routingKey, content, options, cb, publish) {
    const context = tracing.publishContext(this, exchange, routingKey, content, options, true);
    const send = (confirmed) => {
      this.publishTraced = true; // traced here, not again by publishMessage
      let written;
      try {
        written = publish(context.properties);
      } finally {
        this.publishTraced = false;
      }
      this.pushConfirmCallback(confirmed);
      return written;
    };
    return tracing.traceCallback(tracing.publish, context, send, typeof cb === 'function' ? cb : noop);
  }

  sendPublish(exchange, routingKey, content, options) {
    const fieldsAndProps = Args.publish(exchange, routingKey, options);
    return this.sendMessage(fieldsAndProps, fieldsAndProps, content);
  }

  // close() of both APIs: traced on amqplib:rpc as channel.close.
  closeByUser(k) {
    if (!tracing.rpc.hasSubscribers) return this.closeBecause('Goodbye', constants.REPLY_SUCCESS, k);
    const fields = { replyCode: constants.REPLY_SUCCESS, replyText: 'Goodbye' };
    const context = { ...tracing.serverOf(this.connection), method: 'channel.close', fields, channel: this.ch };
    return tracing.traceCallback(tracing.rpc, context, (done) => this.closeBecause('Goodbye', constants.REPLY_SUCCESS, done), k);
  }

  _rpc(method, fields, expect, cb) {
    const reply = (err, f) => {
      if (err === null) {
        if (f.id === expect) return cb(null, f);
        const expected = methodName(expect);
        const e = new Error(fmt('Expected %s; got %s', expected, inspect(f, false)));
        this.closeWithError(f.id, fmt('Expected %s; got %s', expected, methodName(f.id)), constants.UNEXPECTED_FRAME, e);
        return cb(e);
      }
      // Either an Error (the channel ended) or the server's Close frame.
      if (err instanceof Error) return cb(err);
      return cb(convertCloseFrameToError(method, err));
    };
    this.sendOrEnqueue(method, fields, reply);
  }

  // `cause`, if any, is why the channel ended (the server's close of it or of the connection, a
  // socket error): the RPCs left without a reply carry it.
  toClosed(capturedStack, cause) {
    this._rejectPending(cause);
    this.stackAtStateChange = capturedStack;
    this.connection.releaseChannel(this.ch);
    safeEmit(this, 'close');
  }

  // Our close's close-ok: all the core hands on of the channel once we closed it.
  closeConfirmed() {
    const k = this.closeWaiter;
    this.closeWaiter = null;
    if (k) k();
    this.toClosed(stackCapture('ChannelCloseOk frame received'));
  }

  // amqplib's words, with the cause beside them (the server's reason, otherwise only in an
  // 'error' event).
  _rejectPending(cause) {
    const message = 'Channel ended, no reply will be forthcoming';
    const err = () => (cause ? new Error(message, { cause }) : new Error(message));
    if (this.reply !== null) this.reply(err());
    this.reply = null;
    for (const queued of this.pending) queued.reply(err());
    this.pending = null; // anything queued from now on is a bug, and should fail loudly
  }

  closeBecause(reason, code, k) {
    this.sendImmediately(defs.ChannelClose, { replyText: reason, replyCode: code, methodId: 0, classId: 0 });
    this.connection.noteChannelClosing();
    this.stackAtStateChange = stackCapture(`closeBecause called: ${reason}`);
    this.closeWaiter = k || null;
  }

  // Closes the channel, then reports `error` (tagged with the code and the method at fault).
  closeWithError(id, reason, code, error) {
    this.closeBecause(reason, code, () => {
      error.code = code;
      if (id) {
        const info = defs.info(id);
        error.classId = info.classId;
        error.methodId = info.methodId;
      }
      this.reportError(error);
    });
  }

  reportError(error) {
    if (tracing.channelError.hasSubscribers) tracing.channelError.publish({ channel: this, error });
    safeEmit(this, 'error', error);
  }

  // A whole message (a delivery, a return, or a get's) goes to `deliver`; whatever that
  // throws closes the channel, as amqplib's does, blamed on the frame that completed the
  // message (the header of an empty one, else a body frame, which has no id).
  handOver(f, deliver) {
    try {
      deliver.call(this, { fields: f.fields, properties: f.properties, content: f.content });
    } catch (problem) {
      const blamed = f.size === 0 ? defs.BasicProperties : undefined;
      if (typeof problem === 'string') {
        this.closeWithError(blamed, problem, constants.UNEXPECTED_FRAME, new Error(problem));
      } else if (problem instanceof Error) {
        this.closeWithError(blamed, 'Error while processing message', constants.INTERNAL_ERROR, problem);
      } else {
        this.closeWithError(blamed, 'Internal error while processing message', constants.INTERNAL_ERROR, new Error(String(problem)));
      }
    }
  }

  // An ack or nack for one tag, or for every tag up to it when `multiple`. A tag never
  // published, or confirmed already, confirms nothing more: amqplib 2.3.1 moves its window to
  // it (or, for one past the window, leaves a gap there), which puts every later publish's
  // tag off by as much, and a tag far past the window gives an array as long as the tag.
  handleConfirm(handle, fields) {
    const unconfirmed = this.unconfirmed;
    const index = fields.deliveryTag - this.lwm;
    if (fields.multiple) {
      if (!(index >= 0)) return;
      const count = Math.min(index + 1, unconfirmed.length);
      this.lwm += count;
      unconfirmed.takeFirst(count, handle);
      return;
    }
    if (!(index >= 0 && index < unconfirmed.length)) return;
    let cb;
    if (index === 0) {
      cb = unconfirmed.shift();
      this.lwm++;
      // Skip over those already confirmed out of order.
      while (unconfirmed.length > 0 && unconfirmed.at(0) === null) {
        unconfirmed.shift();
        this.lwm++;
      }
    } else {
      cb = unconfirmed.at(index);
      unconfirmed.set(index, null);
    }
    handle(cb);
  }

  pushConfirmCallback(cb) {
    this.unconfirmed.push(cb || false);
  }

  // Every publish still unconfirmed when the channel closes gets `err`, once; whether any
  // was left (with a callback or without) is remembered for waitForConfirms.
  failUnconfirmed(err) {
    const waiting = [];
    this.unconfirmed.takeFirst(this.unconfirmed.length, (cb) => waiting.push(cb));
    this.unconfirmed = new ConfirmQueue();
    this.closedWithUnconfirmed = waiting.some((cb) => cb !== null);
    for (const cb of waiting) if (cb) cb(err);
  }

  // Resolves once every publish so far is acked; rejects with the first nack, or with
  // 'channel closed' if the channel closes (or has closed) with any of them unconfirmed.
  // Each publish's own callback still runs. Shared by both APIs' waitForConfirms.
  _waitForConfirms() {
    if (this.closedWithUnconfirmed) return Promise.reject(new Error('channel closed'));
    const unconfirmed = this.unconfirmed;
    const waiting = [];
    for (let i = 0; i < unconfirmed.length; i++) {
      const own = unconfirmed.at(i);
      if (own === null) continue; // confirmed out of order already
      waiting.push(
        new Promise((resolve, reject) => {
          // Take over the slot: handleConfirm or failUnconfirmed calls it with null (ack) or
          // an error (nack, or the channel closing).
          unconfirmed.set(i, (err) => {
            if (own) own(err);
            if (err === null) resolve();
            else reject(err);
          });
        }),
      );
    }
    return Promise.all(waiting);
  }

  onBufferDrain() {
    safeEmit(this, 'drain');
  }

  accept(f) {
    switch (f.id) {
      case defs.BasicDeliver:
        return this.handOver(f, emitDelivery);
      case defs.BasicReturn:
        return this.handOver(f, emitReturn);
      case defs.BasicAck:
        return safeEmit(this, 'ack', f.fields);
      case defs.BasicNack:
        return safeEmit(this, 'nack', f.fields);
      case defs.BasicCancel:
        return safeEmit(this, 'cancel', f.fields);
      case defs.ChannelClose:
        return this.closedByServer(f);
      case defs.ChannelFlow:
        return this.closeWithError(f.id, 'Flow not implemented', constants.NOT_IMPLEMENTED, new Error('Flow not implemented'));
      default:
        // Not a frame: content frames out of turn (see core/src/content.rs). Replies come
        // here too, never deliveries, so the check costs the hot path nothing.
        if (f instanceof ChannelViolation) return this.violated(f);
        if (f instanceof ChannelClosed) return this.closeConfirmed();
        return this.acceptReply(f);
    }
  }

  // The core found the channel breaking the content rules: it closes, as amqplib's does, with
  // amqplib's words for the rule.
  violated(v) {
    const text = violationText(v);
    return this.closeWithError(v.blamed, text, v.code, new Error(text));
  }

  closedByServer(f) {
    const message = `Channel closed by server: ${closeMessage(f)}`;
    // The core refuses any send but the close-ok from here (core/src/channels.rs).
    this.stackAtStateChange = stackCapture(message);
    if (this.reply) {
      const reply = this.reply;
      this.reply = null;
      reply(f);
    }
    this.sendImmediately(defs.ChannelCloseOk, {});
    const error = new Error(message);
    error.code = f.fields.replyCode;
    error.classId = f.fields.classId;
    error.methodId = f.fields.methodId;
    this.reportError(error);
    this.toClosed(this.stackAtStateChange, error);
  }

  // The reply to the RPC in flight; the next queued RPC goes out before it is handled.
  // One with no request waiting is a frame error, as in amqplib (whose TypeError names
  // nothing): named here, method and channel, for whoever has to find where it came from.
  acceptReply(f) {
    const reply = this.reply;
    if (reply === null) throw new Error(fmt('Unexpected %s on channel %d: no request waits for a reply', methodName(f.id), this.ch));
    this.reply = null;
    const failed = this.sendNextPending();
    reply(null, f);
    for (const [failedReply, err] of failed) failedReply(err);
  }
}

// The callbacks of a channel's unconfirmed publishes, in the order of their tags: `false` for
// a publish without one, null once confirmed out of order. Taking from the front moves a start
// index, not the callbacks behind it (with a thousand in flight, Array#splice(0, n) moved them
// all at every multiple ack); the slots taken are cut off once they are half the array.
class ConfirmQueue {
  constructor() {
    this.items = [];
    this.start = 0;
  }

  get length() {
    return this.items.length - this.start;
  }

  // Publishes still waiting for the server's answer: the slots not confirmed out of order
  // (null). Counted when asked (the counters), so that confirms keep no count of their own.
  get outstanding() {
    let waiting = 0;
    for (let i = this.start; i < this.items.length; i++) if (this.items[i] !== null) waiting++;
    return waiting;
  }

  at(i) {
    return this.items[this.start + i];
  }

  set(i, cb) {
    this.items[this.start + i] = cb;
  }

  push(cb) {
    this.items.push(cb);
  }

  shift() {
    if (this.start >= this.items.length) return undefined;
    const cb = this.items[this.start];
    this.items[this.start++] = undefined; // let go of the callback
    this.cutTaken();
    return cb;
  }

  // Takes out the first n (0 <= n <= length) and calls each(cb) on them in order. They are
  // out before the first call, so a callback that publishes or closes the channel finds the
  // queue as it is after this.
  takeFirst(n, each) {
    const items = this.items;
    const begin = this.start;
    const end = begin + n;
    this.start = end;
    this.cutTaken();
    let i = begin;
    try {
      for (; i < end; i++) {
        const cb = items[i];
        items[i] = undefined; // let go of the callback
        each(cb);
      }
    } finally {
      items.fill(undefined, i, end); // a callback threw: let go of those not called
    }
  }

  cutTaken() {
    if (this.start > 64 && this.start * 2 > this.items.length) {
      this.items = this.items.slice(this.start);
      this.start = 0;
    }
  }
}

function confirmOk(cb) {
  if (cb) cb(null);
}

function confirmNacked(cb) {
  if (cb) cb(new Error('message nacked'));
}

function noop() {}

// What an RPC's tracer is told of its failure: the error, or the server's close as one.
function rpcError(method, err) {
  if (err === null || err instanceof Error) return err;
  return convertCloseFrameToError(method, err);
}

function emitDelivery(message) {
  safeEmit(this, 'delivery', message);
}

function emitReturn(message) {
  safeEmit(this, 'return', message);
}

// The error an RPC gets when the server closes the channel instead of replying.
function convertCloseFrameToError(method, closeFrame) {
  const { classId, methodId, replyCode } = closeFrame.fields;
  const message =
    method === (classId << 16) + methodId
      ? fmt('Operation failed: %s; %s', methodName(method), closeMessage(closeFrame))
      : fmt('Channel closed by server: %s', closeMessage(closeFrame));
  const error = new Error(message);
  error.code = replyCode;
  error.classId = classId;
  error.methodId = methodId;
  return error;
}

// A channel with consumers: deliveries and server-side cancellations are dispatched to
// them by consumer tag.
class BaseChannel extends Channel {
  constructor(connection) {
    super(connection);
    this.consumers = new Map();
    this.consumerQueues = new Map(); // tag -> queue, for the deliveries' tracing
    this.on('delivery', this.handleDelivery.bind(this));
    this.on('cancel', this.handleCancel.bind(this));
  }

  registerConsumer(tag, callback, queue) {
    this.consumers.set(tag, callback);
    this.consumerQueues.set(tag, queue);
  }

  unregisterConsumer(tag) {
    this.consumers.delete(tag);
    this.consumerQueues.delete(tag);
  }

  // A delivery (or, as null, the server's cancel) to its consumer; one lookup per message.
  dispatchMessage(fields, message) {
    const consumer = this.consumers.get(fields.consumerTag);
    if (consumer) return consumer(message);
    // A consumer registered without a callback: amqplib's error, which closes the channel.
    if (this.consumers.has(fields.consumerTag)) throw new Error(`Unknown consumer: ${fields.consumerTag}`);
    if (message === null) return this.warnOfStray(fields, 'its cancel ignored');
    return this.requeueStray(fields);
  }

  handleDelivery(message) {
    const fields = message.fields;
    if (!tracing.deliver.hasSubscribers) return this.dispatchMessage(fields, message);
    // A stray is no delivery to trace.
    if (!this.consumers.has(fields.consumerTag)) return this.requeueStray(fields);
    const context = tracing.deliverContext(this, this.consumerQueues.get(fields.consumerTag), message);
    return tracing.deliver.traceSync(this.dispatchMessage, context, this, fields, message);
  }

  handleCancel(fields) {
    const result = this.dispatchMessage(fields, null);
    this.unregisterConsumer(fields.consumerTag);
    return result;
  }

  // A delivery for a consumer this channel no longer has: RabbitMQ 4.3.6 keeps a consumer its
  // consumer timeout cancelled, and sends it what the queue holds once the consumer's channel
  // settles a delivery. amqplib throws "Unknown consumer", which closes the channel or the
  // whole connection. Here the server is told to cancel that consumer (a tag it has no longer
  // is no error), then the message goes back to its queue, for the queue's other consumers (a
  // closing channel's go back by themselves), and the channel warns.
  requeueStray(fields) {
    if (this.connection.channelRefusal(this.handle) === null) {
      this.sendImmediately(defs.BasicCancel, { consumerTag: fields.consumerTag, nowait: true });
      this.sendImmediately(defs.BasicReject, { deliveryTag: fields.deliveryTag, requeue: true });
    }
    this.warnOfStray(fields, 'rejected back to its queue');
  }

  warnOfStray(fields, outcome) {
    const warning = new Error(fmt('Unknown consumer: %s; %s', fields.consumerTag, outcome));
    warning.name = 'UnknownConsumerWarning';
    warning.fields = fields;
    safeEmit(this, 'warning', warning);
  }
}

module.exports = { Channel, BaseChannel, convertCloseFrameToError };
