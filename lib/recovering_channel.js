'use strict';

// A channel that outlives its connection (topology recovery, lib/topology.js): the object a
// service holds from a recovering model's createChannel or createConfirmChannel. It stands
// over a channel of the connection open now, and over a fresh one after each recovery, with
// its prefetch, confirm mode and consumers as they were.
//
// - While the connection is lost, its methods that wait for the server wait for the recovery
//   (up to `waitTimeout`, then they fail); a publish throws amqplib's 'Channel closed', as a
//   closed channel's does.
// - Delivery tags keep growing across recoveries: a new channel's count from where the last
//   left off. An ack, nack or reject of a delivery that came before the connection was lost
//   is never sent (on the new channel it would name another delivery, or close the channel
//   with 406 "unknown delivery tag"): it is dropped and counted (`droppedAcks`).
// - A consumer the server cancels (its queue deleted, a quorum queue's member lost, a
//   consumer timeout) consumes again once its queue exists: 'consumer-cancelled', then
//   'consumer-recovered' ({ consumerTag, queue }), in place of amqplib's null delivery.
// - Events: 'lost' (err) when the connection went, 'recovered' when it is back; 'close' only
//   when the channel is closed for good (close(), a channel error, or the end of recovery);
//   'error', 'return', 'drain' and 'warning' from the channel underneath.
// A channel error (the server closing this channel alone) closes it for good, as the Java
// client does: the service asked for something the server refuses.

const EventEmitter = require('node:events');
const { IllegalOperationError } = require('./error');
const { openChannel } = require('./channel_model');
const { delay, settleWithin, toCallback, waitInLine } = require('./promises');
const { emitSafely, reportThrow } = require('./safe_emit');

const FORWARDED_EVENTS = ['return', 'drain', 'warning'];

class RecoveringChannel extends EventEmitter {
  #topology;
  #confirm;
  #options;
  #channel = null; // the channel of the connection open now; null while lost
  #next = null; // the channel a recovery made, until the recovery is over
  #last = null; // the last channel underneath: a closed one's methods fail as it does
  #state = 'opening'; // then 'open', 'lost' (and back) and 'closed'
  #waiters = [];
  #tagBase = 0; // what this channel's delivery tags are offset by, to go on from the last's
  #lastTag = 0; // the highest delivery tag handed out so far
  #prefetch = new Map(); // global flag -> the count last set
  #consumers = new Map(); // consumer tag -> { queue, callback, options, deliver, active }
  #unrecorded = new Set(); // tags of consumers the filter left out (not recovered; a drain cancels them)
  #callbacksInFlight = 0; // consumer callbacks whose promise has not settled
  // Republishing (a confirm channel's, when asked for): the bounds; the publishes not settled
  // yet; those waiting for the connection (never sent, or sent and unconfirmed when it went),
  // oldest first, with their bytes and the timer of the oldest's deadline.
  #republish;
  #unsettled = new Set();
  #held = [];
  #heldBytes = 0;
  #heldTimer = null;
  #drainOwed = false; // a publish returned false: 'drain' follows, at the latest on recovery
  #closing = false; // close() was called
  #nextInUse = false; // the recovery's channel takes publishes and acks: its consumers are coming back
  #resubscribingOn = null; // the channel a consume of this one's (not the service's) is on its way on
  #consumeRefusedOn = null; // the channel the server closed for refusing that consume
  #consumeRefusal = null; // and why
  #lossTold = false; // 'lost' was emitted for the connection lost now
  #unconfirmedLost = false; // publishes were unconfirmed on the channel lost now
  #closedWithUnconfirmed = false; // closed for good with publishes unsettled: waits fail
  droppedAcks = 0; // acks, nacks and rejects of deliveries from a lost connection

  constructor(topology, confirm, options) {
    super();
    this.#topology = topology;
    this.#confirm = confirm;
    this.#options = options;
    this.#republish = confirm ? topology.republish : null;
  }

  // --- the lifecycle (lib/topology.js drives it) ---

  async open() {
    for (;;) {
      const model = await this.#topology.currentModel('createChannel');
      let channel;
      try {
        channel = await this.#create(model);
      } catch (err) {
        if (model.connection.isClosed) continue; // lost meanwhile: on the next connection
        throw err;
      }
      this.#topology.channels.add(this);
      this.#channel = channel;
      this.#state = 'open';
      if (channel.connection.isClosed) this.#detach(channel);
      return;
    }
  }

  // A promise-API channel on the model's connection, whichever API the model is of.
  #create(model) {
    return openChannel(model.connection, this.#confirm, this.#options).then((channel) => this.#watch(channel));
  }

  #watch(channel) {
    this.#last = channel;
    channel.on('close', () => this.#underlyingClosed(channel));
    // A channel error is the service's when it comes from the channel in use or the
    // recovery's (its consumers' callbacks use it); unheard, it is thrown, as amqplib's. One
    // that refuses a consume this channel made again is the recovery's (reported).
    channel.on('error', (err) => {
      if (channel === this.#resubscribingOn && isConsumeRefusal(err)) {
        this.#consumeRefusedOn = channel;
        this.#consumeRefusal = err;
      } else if (channel === this.#channel || channel === this.#next) this.emit('error', err);
    });
    for (const name of FORWARDED_EVENTS) {
      channel.on(name, (arg) => {
        if (channel !== this.#channel && channel !== this.#next) return;
        if (name === 'drain') this.#drainOwed = false;
        this.emit(name, arg);
      });
    }
    return channel;
  }

  #underlyingClosed(channel) {
    if (channel !== this.#channel && channel !== this.#next) return;
    if (this.#topology.ended) this.end(this.#topology.ended);
    else if (this.#closing) this.#closeForGood();
    else if (channel.connection.isClosed) this.#detach(channel);
    // A consume this channel made again by itself, refused (an exclusive consumer elsewhere,
    // or its queue gone again since it was looked for): a recovery opens another and consumes
    // again what was consumed on it; on the channel in use, the channel is lost and comes back
    // so on the same connection. Anything else that closes a channel (the service's own doing,
    // an ack twice) closes it for good, as outside recovery.
    else if (channel === this.#consumeRefusedOn && channel === this.#next) this.#dropNext();
    else if (channel === this.#consumeRefusedOn && channel === this.#channel) {
      this.lose(this.#consumeRefusal);
      this.#topology.restoreChannel(this);
    } else this.#closeForGood();
  }

  #dropNext() {
    this.#next = null;
    this.#nextInUse = false;
    for (const consumer of this.#consumers.values()) consumer.active = false;
  }

  // The connection went: no channel until the recovery's (lose() tells 'lost', with the cause).
  #detach(channel) {
    if (this.#state !== 'open' && this.#state !== 'lost') return;
    if (channel?.closedWithUnconfirmed) this.#unconfirmedLost = true;
    this.#channel = null;
    this.#dropNext();
    this.#unrecorded.clear();
    this.#state = 'lost';
  }

  lose(err) {
    if (this.#state !== 'open' && this.#state !== 'lost') return;
    if (this.#closing) return this.#closeForGood();
    this.#detach(this.#channel ?? this.#next);
    if (this.#lossTold) return;
    this.#lossTold = true;
    emitSafely(this, 'lost', err);
  }

  // A channel on the recovery's new connection, with the prefetch it had; its delivery tags
  // go on from the last channel's. A prefetch the server refuses (a global one, on a RabbitMQ
  // 4.x that refuses deprecated features) is reported and left out, on a fresh channel.
  async reopen(model) {
    while (this.#state === 'lost' && !this.#closing) {
      const channel = await this.#create(model);
      const refused = await this.#applyPrefetch(channel);
      if (refused === null && !this.#closing && this.#state === 'lost') {
        this.#tagBase = this.#lastTag;
        this.#next = channel;
        return;
      }
      if (refused === null) channel.close().catch(() => {}); // close() came meanwhile
    }
  }

  // The recorded prefetch on `channel`: null once set, else the global flag of the one refused
  // (it is dropped from the record). The connection's end is thrown.
  async #applyPrefetch(channel) {
    for (const [global, count] of this.#prefetch) {
      try {
        await channel.prefetch(count, global);
      } catch (err) {
        if (channel.connection.isClosed) throw err;
        this.#prefetch.delete(global);
        this.#topology.reportError(err, { kind: 'prefetch', count, global });
        return global;
      }
    }
    return null;
  }

  // Its consumers again, each once its queue is known to be there (asked on the replay's
  // channel: a consume of a missing queue would close this one). A consume the server refuses
  // (an exclusive consumer elsewhere) is reported and left out, and the channel it closed is
  // opened again for the rest.
  // From here the recovery's channel takes the acks and publishes of its consumers' callbacks
  // (the entities they use are declared again by now).
  async restoreConsumers(replay, model) {
    while (this.#state === 'lost' && !this.#closing) {
      if (this.#next === null) await this.reopen(model);
      this.#nextInUse = this.#next !== null;
      await this.#consumeAgain(replay, model);
      if (this.#next !== null) break; // else a consume was refused and closed it: again on another
    }
  }

  // One pass over the consumers not consuming, until the recovery's channel closes under it.
  async #consumeAgain(replay, model) {
    const going = () => this.#next !== null && !this.#closing && this.#state === 'lost';
    for (const [tag, consumer] of [...this.#consumers]) {
      if (!going()) return;
      if (consumer.active || this.#consumers.get(tag) !== consumer) continue;
      try {
        await replay.run((ch) => ch.checkQueue(this.#topology.currentName(consumer.queue)));
      } catch (err) {
        if (replay.connectionLost) throw err;
        this.#topology.reportError(err, { kind: 'consumer', queue: consumer.queue, consumerTag: tag });
        this.#awaitQueue(tag, consumer);
        continue;
      }
      if (!going()) return;
      try {
        await this.#resubscribeOn(this.#next, consumer);
      } catch (err) {
        if (this.#closing || this.#state !== 'lost') return;
        if (model.connection.isClosed) throw err;
        this.#consumers.delete(tag);
        this.#topology.reportError(err, { kind: 'consumer', queue: consumer.queue, consumerTag: tag });
      }
    }
  }

  resume() {
    if (this.#state !== 'lost' || this.#next === null || this.#closing) return;
    this.#channel = this.#next;
    this.#next = null;
    this.#nextInUse = false;
    this.#state = 'open';
    this.#lossTold = false;
    this.#unconfirmedLost = false;
    // What waited goes first, in its order, before anything published from here on.
    const roomy = this.#sendHeld();
    for (const waiter of this.#waiters.splice(0)) waiter.resolve(this.#channel);
    emitSafely(this, 'recovered');
    // A 'drain' owed is told once there is room; if what was held filled the socket, the
    // channel's own 'drain' tells it later.
    if (this.#drainOwed && roomy) {
      this.#drainOwed = false;
      emitSafely(this, 'drain');
    }
  }

  end(err) {
    if (this.#state === 'closed') return;
    this.#state = 'closed';
    this.#channel = null;
    this.#next = null;
    this.#topology.channels.delete(this);
    for (const waiter of this.#waiters.splice(0)) waiter.reject(err);
    this.#failHeld(err);
    emitSafely(this, 'close');
  }

  #closeForGood() {
    const queues = [...this.#consumers.values()].map((consumer) => consumer.queue);
    this.#consumers.clear();
    this.#unrecorded.clear();
    this.end(new IllegalOperationError('Channel closed'));
    for (const queue of queues) this.#topology.consumerCancelled(queue);
  }

  // The channel to use now, or a promise of it once the connection is back.
  #ready(what) {
    if (this.#state === 'open') return this.#channel;
    if (this.#state === 'closed') throw new IllegalOperationError('Channel closed', this.#last?.stackAtStateChange);
    const ms = this.#topology.waitTimeout;
    return waitInLine(this.#waiters, ms, `${what}: the connection was not recovered within ${ms} ms`);
  }

  // --- what the record needs of it ---

  get consumerCount() {
    return this.#consumers.size;
  }

  consumes(queue) {
    for (const consumer of this.#consumers.values()) if (consumer.queue === queue) return true;
    return false;
  }

  forgetConsumersOf(queue) {
    for (const [tag, consumer] of this.#consumers) if (consumer.queue === queue) this.#consumers.delete(tag);
  }

  renameQueue(from, to) {
    for (const consumer of this.#consumers.values()) if (consumer.queue === from) consumer.queue = to;
  }

  // --- deliveries and their tags ---

  // A delivery's tag as the service sees it: offset to go on from the last channel's.
  #handOut(message) {
    const fields = message.fields;
    if (this.#tagBase !== 0) fields.deliveryTag += this.#tagBase;
    this.#lastTag = fields.deliveryTag;
    return message;
  }

  // The channel a delivery's acknowledgement or a publish goes to: the one in use, or the one a
  // recovery is bringing the consumers back on (their callbacks run before the recovery is
  // over); null while there is none.
  #usable() {
    return this.#channel ?? (this.#nextInUse ? this.#next : null);
  }

  // The same, or the last one, which refuses, once closed.
  #current() {
    return this.#usable() ?? (this.#state === 'closed' ? this.#last : null);
  }

  // The channel an acknowledgement of `message` goes to, or null when it is dropped: the
  // delivery came on a connection since lost.
  #settling(message) {
    const channel = this.#usable();
    if (channel === null) {
      if (this.#state === 'closed') return this.#last;
      this.droppedAcks++;
      return null;
    }
    if (message.fields.deliveryTag <= this.#tagBase) {
      this.droppedAcks++;
      return null;
    }
    return channel;
  }

  // The message as the channel underneath knows it.
  #own(message) {
    if (this.#tagBase === 0) return message;
    return { fields: { deliveryTag: message.fields.deliveryTag - this.#tagBase } };
  }

  // A callback that returns a promise is in flight until it settles (a drain waits for it).
  #deliverTo(consumer) {
    const settled = () => {
      this.#callbacksInFlight--;
    };
    // A rejection stays unhandled, as without the count.
    const failed = (err) => {
      settled();
      throw err;
    };
    return (message) => {
      if (message === null) return this.#cancelledByServer(consumer);
      const result = consumer.callback(this.#handOut(message));
      if (result !== null && typeof result === 'object' && typeof result.then === 'function') {
        this.#callbacksInFlight++;
        result.then(settled, failed);
      }
      return result;
    };
  }

  // The server's cancel: unless the service itself is deleting the queue (then amqplib's null
  // delivery), the consumer waits for its queue and consumes again.
  #cancelledByServer(consumer) {
    const tag = consumer.options.consumerTag;
    if (this.#consumers.get(tag) !== consumer) {
      this.#unrecorded.delete(tag); // a drained close has no cancel to send for it
      return consumer.callback(null);
    }
    consumer.active = false;
    if (this.#topology.isBeingDeleted(consumer.queue)) {
      this.#consumers.delete(tag);
      return consumer.callback(null);
    }
    emitSafely(this, 'consumer-cancelled', { consumerTag: tag, queue: consumer.queue });
    this.#awaitQueue(tag, consumer);
    return undefined;
  }

  // One wait at a time per consumer; it consumes on the channel in use (a recovery consumes
  // on its own), and ends once the consumer is active again, cancelled or closed.
  #awaitQueue(tag, consumer) {
    if (consumer.awaiting) return;
    consumer.awaiting = true;
    const wanted = () => this.#state !== 'closed' && !consumer.active && this.#consumers.get(tag) === consumer;
    const resubscribe = async () => {
      if (this.#state !== 'open') return false;
      if (await this.#resubscribeOn(this.#channel, consumer)) emitSafely(this, 'consumer-recovered', { consumerTag: tag, queue: consumer.queue });
      return true;
    };
    this.#topology.awaitQueue(consumer.queue, wanted, resubscribe).finally(() => {
      consumer.awaiting = false;
    });
  }

  // #resubscribe, its refusal told from the service's own channel errors (see #watch).
  async #resubscribeOn(channel, consumer) {
    this.#resubscribingOn = channel;
    try {
      return await this.#resubscribe(channel, consumer);
    } finally {
      if (this.#resubscribingOn === channel) this.#resubscribingOn = null;
    }
  }

  // Consumes again, unless it is active or a consume of it is on its way: true if it did.
  async #resubscribe(channel, consumer) {
    if (consumer.active || consumer.subscribing) return false;
    consumer.subscribing = true;
    try {
      await channel.consume(this.#topology.currentName(consumer.queue), consumer.deliver, consumer.options);
      consumer.active = this.#onCurrent(channel);
      return true;
    } finally {
      consumer.subscribing = false;
    }
  }

  // Whether `channel` is still this one's underneath (the connection was not lost since).
  #onCurrent(channel) {
    return channel === this.#channel || channel === this.#next;
  }

  // --- the channel's methods ---

  get connection() {
    return (this.#channel ?? this.#last).connection;
  }

  get ch() {
    return (this.#channel ?? this.#last).ch;
  }

  // Settles once the channel is closed for good: at the server's close-ok, or at once if the
  // connection goes meanwhile (the recovery does not bring it back).
  async close() {
    if (this.#state === 'closed') return this.#last.close();
    this.#closing = true;
    const channel = this.#channel ?? this.#next;
    if (channel === null) return this.#closeForGood();
    const closed = new Promise((resolve) => this.once('close', resolve));
    channel.close().catch(() => {}); // its 'close' closes this one, whatever ends it
    await closed;
    return undefined;
  }

  async assertQueue(queue, options) {
    const channel = await this.#ready('assertQueue');
    const ok = await channel.assertQueue(this.#topology.currentName(queue), options);
    this.#topology.recordQueue(queue || '', ok.queue, options);
    return ok;
  }

  async checkQueue(queue) {
    return (await this.#ready('checkQueue')).checkQueue(this.#topology.currentName(queue));
  }

  // A queue's name is looked up once the channel is ready: a recovery meanwhile may rename it.
  async deleteQueue(queue, options) {
    const channel = await this.#ready('deleteQueue');
    const name = this.#topology.currentName(queue);
    const ok = await this.#topology.deletingQueue(name, () => channel.deleteQueue(name, options));
    this.#topology.forgetQueue(name);
    return ok;
  }

  async purgeQueue(queue) {
    return (await this.#ready('purgeQueue')).purgeQueue(this.#topology.currentName(queue));
  }

  async bindQueue(queue, source, pattern, args) {
    const channel = await this.#ready('bindQueue');
    const name = this.#topology.currentName(queue);
    const ok = await channel.bindQueue(name, source, pattern, args);
    this.#topology.recordBinding('queue', name, source, pattern, args);
    return ok;
  }

  async unbindQueue(queue, source, pattern, args) {
    const channel = await this.#ready('unbindQueue');
    const name = this.#topology.currentName(queue);
    const ok = await channel.unbindQueue(name, source, pattern, args);
    this.#topology.forgetBinding('queue', name, source, pattern, args);
    return ok;
  }

  async assertExchange(exchange, type, options) {
    const ok = await (await this.#ready('assertExchange')).assertExchange(exchange, type, options);
    this.#topology.recordExchange(exchange, type, options);
    return ok;
  }

  async checkExchange(exchange) {
    return (await this.#ready('checkExchange')).checkExchange(exchange);
  }

  async deleteExchange(exchange, options) {
    const ok = await (await this.#ready('deleteExchange')).deleteExchange(exchange, options);
    this.#topology.forgetExchange(exchange);
    return ok;
  }

  async bindExchange(destination, source, pattern, args) {
    const ok = await (await this.#ready('bindExchange')).bindExchange(destination, source, pattern, args);
    this.#topology.recordBinding('exchange', destination, source, pattern, args);
    return ok;
  }

  async unbindExchange(destination, source, pattern, args) {
    const ok = await (await this.#ready('unbindExchange')).unbindExchange(destination, source, pattern, args);
    this.#topology.forgetBinding('exchange', destination, source, pattern, args);
    return ok;
  }

  // `cb` is a confirm channel's, ignored by a plain channel's publish.
  publish(exchange, routingKey, content, options, cb) {
    if (this.#republish !== null && this.#state !== 'closed') return this.#publishKept(exchange, routingKey, content, options, cb);
    const channel = this.#current();
    if (channel === null) throw new IllegalOperationError('Channel closed', this.#last.stackAtStateChange);
    const key = exchange === '' ? this.#topology.currentName(routingKey) : routingKey;
    const written = channel.publish(exchange, key, content, this.#topology.publishOptions(options), cb);
    if (!written) this.#drainOwed = true;
    return written;
  }

  sendToQueue(queue, content, options, cb) {
    return this.publish('', queue, content, options, cb);
  }

  async consume(queue, callback, options) {
    const channel = await this.#ready('consume');
    const consumer = { queue: this.#topology.currentName(queue), callback, options: { ...options }, deliver: null, active: false };
    consumer.deliver = this.#deliverTo(consumer);
    const ok = await channel.consume(consumer.queue, consumer.deliver, options);
    consumer.options.consumerTag = ok.consumerTag;
    // The consume-ok and the connection's end may come in one read: a consumer of a channel
    // lost meanwhile is not active, and the recovery consumes again.
    consumer.active = this.#onCurrent(channel);
    if (this.#topology.admitsConsumer(consumer.queue, ok.consumerTag, consumer.options)) this.#consumers.set(ok.consumerTag, consumer);
    else this.#unrecorded.add(ok.consumerTag);
    return ok;
  }

  cancel(consumerTag) {
    return this.#cancel(consumerTag);
  }

  // (The methods the channel itself calls are private: the callback API's overrides the public.)
  async #cancel(consumerTag) {
    const ok = await (await this.#ready('cancel')).cancel(consumerTag);
    this.#unrecorded.delete(consumerTag);
    const consumer = this.#consumers.get(consumerTag);
    if (consumer) {
      this.#consumers.delete(consumerTag);
      this.#topology.consumerCancelled(consumer.queue);
    }
    return ok;
  }

  async get(queue, options) {
    const message = await (await this.#ready('get')).get(this.#topology.currentName(queue), options);
    return message ? this.#handOut(message) : message;
  }

  ack(message, allUpTo) {
    const channel = this.#settling(message);
    if (channel !== null) channel.ack(this.#own(message), allUpTo);
  }

  nack(message, allUpTo, requeue) {
    const channel = this.#settling(message);
    if (channel !== null) channel.nack(this.#own(message), allUpTo, requeue);
  }

  reject(message, requeue) {
    const channel = this.#settling(message);
    if (channel !== null) channel.reject(this.#own(message), requeue);
  }

  ackAll() {
    const channel = this.#current();
    if (channel === null) this.droppedAcks++;
    else channel.ackAll();
  }

  nackAll(requeue) {
    const channel = this.#current();
    if (channel === null) this.droppedAcks++;
    else channel.nackAll(requeue);
  }

  async recover() {
    return (await this.#ready('recover')).recover();
  }

  prefetch(count, global) {
    return this.#setPrefetch(count, global);
  }

  qos(count, global) {
    return this.#setPrefetch(count, global);
  }

  async #setPrefetch(count, global) {
    const ok = await (await this.#ready('prefetch')).prefetch(count, global);
    this.#prefetch.set(!!global, count);
    return ok;
  }

  // With republishing: once every publish so far is settled (rejected at the first nacked or
  // failed, as amqplib's at a nack).
  waitForConfirms() {
    return this.#confirmsSettled();
  }

  async #confirmsSettled() {
    if (this.#republish === null) {
      // Those of the lost connection failed: a wait that began before is rejected by its
      // channel, one that begins now is told so.
      if (this.#state === 'lost' && this.#unconfirmedLost) throw new Error('channel closed: publishes were unconfirmed when the connection was lost');
      // Closed: as amqplib's closed channel (resolves with nothing pending).
      if (this.#state === 'closed') return this.#last.waitForConfirms();
      return (await this.#ready('waitForConfirms')).waitForConfirms();
    }
    if (this.#state === 'closed' && this.#closedWithUnconfirmed) throw new Error('channel closed');
    const settled = [...this.#unsettled].map((publish) => new Promise((resolve, reject) => (publish.waiters ??= []).push((err) => (err ? reject(err) : resolve()))));
    await Promise.all(settled);
    return undefined;
  }

  // --- a drained close (lib/topology.js drain) ---

  // Cancels the consumers, then waits until `deadline` (ms since the epoch) for the callbacks
  // in flight to finish and for what was delivered to be acked (the native core's count:
  // core/src/unsettled.rs; after ackAll or a recover it cannot tell, and nothing is waited for),
  // then for the confirms; true if it got there.
  async drain(deadline) {
    const tags = [...this.#consumers.keys(), ...this.#unrecorded];
    if (this.#state !== 'open') {
      // Nothing comes from a lost connection: the server took its deliveries back.
      this.#consumers.clear();
      this.#unrecorded.clear();
    }
    const left = () => Math.max(1, deadline - Date.now());
    for (const tag of tags) {
      if (this.#state !== 'open' || Date.now() >= deadline) break;
      await settleWithin(this.#cancel(tag), left(), 'late').catch(() => {});
    }
    // While the connection is away, what it must send waits for the recovery, as long as the
    // deadline allows.
    while (!this.#settledAll()) {
      if (Date.now() >= deadline) return false;
      await delay(DRAIN_POLL);
    }
    if (this.#state === 'closed') return !this.#closedWithUnconfirmed;
    if (!this.#confirm) return true;
    return settleWithin(this.#confirmsSettled(), left(), 'late').then(
      () => true,
      () => false,
    );
  }

  #settledAll() {
    if (this.#callbacksInFlight > 0) return false;
    if (this.#state === 'lost') return this.#held.length === 0 && this.#unsettled.size === 0;
    const channel = this.#channel;
    return channel === null || !channel.connection.unsettledDeliveries(channel.handle);
  }

  // --- publishes that survive a lost connection (republish) ---

  // A confirm channel's publish kept until it settles: sent now if connected, else held for the
  // recovery. Its callback is called once: confirmed, nacked, or failed past its deadline.
  // The publish keeps its own copy of the content and options (with its headers): a caller
  // may reuse its buffer or options object for the next publish, as amqplib, which encodes at
  // once, allows.
  #publishKept(exchange, routingKey, content, options, cb) {
    if (!Buffer.isBuffer(content)) throw new TypeError('content is not a buffer');
    const kept = options ? { ...options, headers: isTable(options.headers) ? { ...options.headers } : options.headers } : options;
    const publish = { exchange, routingKey, content: Buffer.from(content), options: kept, cb, settled: false, again: false, heldSince: 0, waiters: null };
    if (this.#state === 'open') {
      this.#unsettled.add(publish);
      return this.#send(publish, false);
    }
    // Past twice the bounds, refused at once: a publisher that does not heed `false` cannot
    // make it hold without end.
    if (this.#held.length >= 2 * this.#republish.maxMessages || this.#heldBytes >= 2 * this.#republish.maxBytes) {
      this.#drainOwed = true;
      const refused = new Error('publish refused: too many publishes wait for the connection to be recovered');
      // Never within publish() itself, as amqplib's callbacks.
      process.nextTick(() => callBack(this, cb, refused));
      return false;
    }
    this.#unsettled.add(publish);
    return this.#hold(publish);
  }

  // Sends a kept publish. One refused by the channel (arguments it cannot encode) is settled
  // with the error: thrown to the caller of publish (`held` false), or, sent after a recovery,
  // told to its callback.
  #send(publish, held) {
    const channel = this.#channel;
    const { exchange, routingKey } = publish;
    const key = exchange === '' ? this.#topology.currentName(routingKey) : routingKey;
    const options = this.#topology.publishOptions(publish.again ? republished(publish.options) : publish.options);
    let written;
    try {
      written = channel.publish(exchange, key, publish.content, options, (err) => this.#confirmed(publish, channel, err));
    } catch (err) {
      this.#settle(publish, err, held);
      if (held) return true;
      throw err;
    }
    if (!written) this.#drainOwed = true;
    return written;
  }

  // A publish's confirm, or its failure: one that failed because the connection went is held
  // to be sent again, marked, once the connection is back.
  #confirmed(publish, channel, err) {
    if (err && channel.connection.isClosed && !this.#topology.ended && this.#state !== 'closed') {
      publish.again = true;
      this.#hold(publish);
      return;
    }
    if (err && channel.closedWithUnconfirmed) this.#closedWithUnconfirmed = true;
    this.#settle(publish, err, true);
  }

  #hold(publish) {
    publish.heldSince = Date.now();
    this.#held.push(publish);
    this.#heldBytes += publish.content.length;
    if (this.#heldTimer === null) this.#armHeldTimer();
    const room = this.#held.length < this.#republish.maxMessages && this.#heldBytes < this.#republish.maxBytes;
    if (!room) this.#drainOwed = true;
    return room;
  }

  #armHeldTimer() {
    const wait = Math.max(0, this.#held[0].heldSince + this.#republish.timeout - Date.now());
    this.#heldTimer = setTimeout(() => this.#expireHeld(), wait);
  }

  // Fails the held publishes past their deadline.
  #expireHeld() {
    this.#heldTimer = null;
    const { timeout } = this.#republish;
    const now = Date.now();
    let expired = 0;
    while (expired < this.#held.length && this.#held[expired].heldSince + timeout <= now) expired++;
    const err = new Error(`publish not confirmed: the connection was not recovered within ${timeout} ms`);
    for (const publish of this.#takeHeld(expired)) this.#settle(publish, err, true);
    if (this.#held.length > 0) this.#armHeldTimer();
  }

  #takeHeld(count) {
    const taken = this.#held.splice(0, count);
    for (const publish of taken) this.#heldBytes -= publish.content.length;
    if (this.#held.length === 0 && this.#heldTimer !== null) {
      clearTimeout(this.#heldTimer);
      this.#heldTimer = null;
    }
    return taken;
  }

  // Sends what was held: true if the socket took it all without asking to wait.
  #sendHeld() {
    let roomy = true;
    for (const publish of this.#takeHeld(this.#held.length)) if (!this.#send(publish, true)) roomy = false;
    return roomy;
  }

  #failHeld(err) {
    if (this.#held.length > 0) this.#closedWithUnconfirmed = true;
    for (const publish of this.#takeHeld(this.#held.length)) this.#settle(publish, err, true);
  }

  // `report`: the publish's callback is told (not when publish threw: the throw told). A
  // callback's throw leaves the channel's work whole (see callBack).
  #settle(publish, err, report = false) {
    if (publish.settled) return;
    publish.settled = true;
    this.#unsettled.delete(publish);
    if (publish.waiters) for (const waiter of publish.waiters) waiter(err ?? null);
    if (report) callBack(this, publish.cb, err ?? null);
  }

  // For the callback API: amqplib's close of a closed channel throws.
  _throwIfClosed() {
    if (this.#state === 'closed') throw new IllegalOperationError('Channel closed', this.#last?.stackAtStateChange);
  }
}

// A publish's callback, told its outcome; its throw never goes into the work that settles it
// (a close failing the rest, a timer not armed again): see reportThrow.
function callBack(channel, cb, err) {
  if (typeof cb !== 'function') return;
  try {
    cb(err);
  } catch (thrown) {
    reportThrow(channel, thrown, 'publish callback');
  }
}

// The server's channel.close names the method it refuses: basic.consume is class 60, method 20.
function isConsumeRefusal(err) {
  return err.classId === 60 && err.methodId === 20;
}

function isTable(value) {
  return value !== null && typeof value === 'object' && !Array.isArray(value) && !Buffer.isBuffer(value);
}

// How often a drain looks whether the deliveries are settled.
const DRAIN_POLL = 10; // ms

// The header that tells a consumer a message may have reached the queue before: it was sent,
// and the connection went before its confirm came.
const REPUBLISHED_HEADER = 'x-republished';

function republished(options) {
  return { ...options, headers: { ...options?.headers, [REPUBLISHED_HEADER]: true } };
}

// The callback API's recovering channel: the same, with amqplib's callback signatures (the
// callback after the arguments, each method returning the channel) where the promise API's
// return promises. How many arguments come before the callback, by method.
const CALLBACK_METHODS = {
  assertQueue: 2,
  checkQueue: 1,
  deleteQueue: 2,
  purgeQueue: 1,
  bindQueue: 4,
  unbindQueue: 4,
  assertExchange: 3,
  checkExchange: 1,
  deleteExchange: 2,
  bindExchange: 4,
  unbindExchange: 4,
  consume: 3,
  cancel: 1,
  get: 2,
  recover: 0,
  prefetch: 2,
  qos: 2,
};

// What differs besides: acknowledgements return the channel; close() of a closed channel
// throws; waitForConfirms takes a callback, required, and calls it with the error alone.
class RecoveringCallbackChannel extends RecoveringChannel {
  close(cb) {
    this._throwIfClosed();
    toCallback(super.close(), (err) => (typeof cb === 'function' ? cb(err) : undefined));
    return this;
  }

  waitForConfirms(cb) {
    if (typeof cb !== 'function') throw new TypeError(`waitForConfirms requires a callback function; got ${cb === null ? 'null' : typeof cb}`);
    super.waitForConfirms().then(
      () => cb(),
      (err) => cb(err),
    );
  }

  ack(message, allUpTo) {
    super.ack(message, allUpTo);
    return this;
  }

  ackAll() {
    super.ackAll();
    return this;
  }

  nack(message, allUpTo, requeue) {
    super.nack(message, allUpTo, requeue);
    return this;
  }

  nackAll(requeue) {
    super.nackAll(requeue);
    return this;
  }

  reject(message, requeue) {
    super.reject(message, requeue);
    return this;
  }
}

for (const [name, arity] of Object.entries(CALLBACK_METHODS)) {
  const promised = RecoveringChannel.prototype[name];
  Object.defineProperty(RecoveringCallbackChannel.prototype, name, {
    value: function (...args) {
      toCallback(promised.apply(this, args.slice(0, arity)), args[arity]);
      return this;
    },
    writable: true,
    configurable: true,
  });
}

module.exports = { RecoveringChannel, RecoveringCallbackChannel };
