'use strict';

// Topology recovery (ours, not amqplib's; opt-in: `recovery: { topology: true }`): the record
// of what a recovering model's channels declared, bound and consumed, and its replay on each
// new connection, in the Java client's order: the channels (with their prefetch and confirm
// mode), then exchanges, queues and bindings, then consumers.
//
// The record changes only when the topology does (a declare, delete, bind, unbind, consume or
// cancel through a recovering channel), never per message. Passive checks are not recorded.
// As the Java client documents it: an exclusive queue is recorded (it dies with its
// connection, and is declared again); an auto-delete queue leaves the record when its last
// consumer is cancelled, an auto-delete exchange when its last binding as a source goes; a
// server-named queue is declared afresh, gets a new name, and its bindings and consumers
// follow it ('queue-renamed'); the old name stays an alias of the new one for the channels'
// methods and a publish's replyTo, so that a service holding the old name needs no code of
// its own.
//
// The entities are replayed on a channel of their own, so that one refused (406 on other
// arguments, 404 on a missing source) closes only that channel: it is reported (the
// `onError` option, else a 'topology-error' event of the model) and skipped, and the replay
// goes on with a fresh channel; a binding of an entity refused so is skipped with it. 404
// while binding (a source another service is still declaring) is tried again a few times
// first. A 541 (a RabbitMQ 4.x metadata store without a quorum) closes the connection: the
// attempt fails, and the recovery's next attempt replays the record again.

const { RecoveringChannel, RecoveringCallbackChannel } = require('./recovering_channel');
const { openChannel } = require('./channel_model');
const { emitSafely } = require('./safe_emit');
const { MAX_TIMER, delay } = require('./promises');

// How often, and after how long, a binding's 404 is tried again during a replay.
const REPLAY_RETRIES = 3;
const REPLAY_RETRY_DELAY = 100; // ms
// Old names kept per server-named queue, besides the first (a service most often keeps the
// name of its first declare): one more per recovery otherwise.
const MOST_ALIASES = 8;
// A consumer the server cancelled: how soon its queue is looked for again, at most.
const CONSUMER_RETRY_CAP = 5000; // ms

const DEFAULTS = Object.freeze({
  filter: null, // (entity) => false leaves the entity out of the record
  onError: null, // (err, entity): a replay of that entity failed, and it was skipped
  waitTimeout: 30000, // ms a recovering channel's method waits for the connection to be back
  republish: null, // true or bounds: a confirm channel's publishes survive a lost connection
});

// What a confirm channel holds while disconnected, by default: beyond either bound `publish`
// returns false ('drain' follows once they are sent), and each fails past its deadline.
const REPUBLISH_DEFAULTS = Object.freeze({ maxMessages: 10000, maxBytes: 64 * 1024 * 1024 });

function topologyOptions(given) {
  const options = given === true ? {} : given;
  const check = (name) => {
    const value = options[name];
    if (value !== undefined && value !== null && typeof value !== 'function') {
      throw new TypeError(`recovery.topology.${name} must be a function; got ${typeof value}`);
    }
    return value ?? DEFAULTS[name];
  };
  const wait = Number(options.waitTimeout ?? DEFAULTS.waitTimeout);
  if (!(wait >= 0)) throw new TypeError(`recovery.topology.waitTimeout must be a number of milliseconds >= 0; got ${String(options.waitTimeout)}`);
  // 0 and Infinity: no limit (as the connect timeout's 0); setTimeout fires at once past MAX_TIMER.
  const waitTimeout = wait === Infinity ? 0 : Math.min(wait, MAX_TIMER);
  return { filter: check('filter'), onError: check('onError'), waitTimeout, republish: republishOptions(options.republish, waitTimeout) };
}

// `republish`: true, or { maxMessages, maxBytes, timeout } (timeout: how long a publish may wait
// for the connection, by default waitTimeout).
function republishOptions(given, waitTimeout) {
  if (!given) return null;
  const options = given === true ? {} : given;
  const bound = (name, fallback) => {
    const value = Number(options[name] ?? fallback);
    if (!(value > 0)) throw new TypeError(`recovery.topology.republish.${name} must be a number > 0; got ${String(options[name])}`);
    return value;
  };
  return { maxMessages: bound('maxMessages', REPUBLISH_DEFAULTS.maxMessages), maxBytes: bound('maxBytes', REPUBLISH_DEFAULTS.maxBytes), timeout: Math.min(bound('timeout', waitTimeout > 0 ? waitTimeout : DEFAULTS.waitTimeout), MAX_TIMER) };
}

// Whether an error only a later try may mend: 404 for a binding whose source or queue another
// service is still declaring.
function worthRetrying(err, entity) {
  return err.code === 404 && entity.kind === 'binding';
}

// A binding's identity: its arguments the same whatever their order, and none the same as {}
// (what an unbind must match to forget a bind).
function bindingKey(type, destination, source, pattern, args) {
  const entries = args && typeof args === 'object' ? Object.entries(args).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)) : [];
  return JSON.stringify([type, destination, source, pattern, entries]);
}

class Topology {
  #model; // the recovering model, for its current connection and its events
  #options;
  #ended = null; // why the recovering channels are closed for good
  channels = new Set(); // the recovering channels open now
  #exchanges = new Map(); // name -> { kind, name, type, options }
  #queues = new Map(); // name -> { kind, name, options, serverNamed, aliases: Set }
  #bindings = new Map(); // bindingKey -> { kind, type, destination, source, pattern, args }
  #aliases = new Map(); // an old server-named queue's name -> its name now
  #deleting = new Set(); // queues being deleted through a recovering channel now
  #ending = new AbortController(); // cuts the record's waits short once recovery is over

  constructor(model, given) {
    this.#model = model;
    this.#options = topologyOptions(given);
  }

  get waitTimeout() {
    return this.#options.waitTimeout;
  }

  get republish() {
    return this.#options.republish;
  }

  get ended() {
    return this.#ended;
  }

  // How many entities the record holds (for tests and counters).
  get size() {
    let consumers = 0;
    for (const channel of this.channels) consumers += channel.consumerCount;
    return { exchanges: this.#exchanges.size, queues: this.#queues.size, bindings: this.#bindings.size, aliases: this.#aliases.size, consumers, channels: this.channels.size };
  }

  // --- recovering channels ---

  // A recovering channel over a fresh channel of the current connection (waiting for one, as
  // long as waitTimeout allows): the promise API's, or the callback API's.
  async createChannel(confirm, options, callbackApi = false) {
    const channel = new (callbackApi ? RecoveringCallbackChannel : RecoveringChannel)(this, confirm, options);
    await channel.open();
    return channel;
  }

  // The current connection's model; while there is none, the next one, within waitTimeout.
  currentModel(what) {
    return this.#model._modelWithin(this.#options.waitTimeout, what);
  }

  // --- the record ---

  #admits(entity) {
    return !this.#options.filter || this.#options.filter({ ...entity }) !== false;
  }

  // The name a queue has now: an old server-named queue's is its new one.
  currentName(name) {
    if (this.#aliases.size === 0) return name;
    return this.#aliases.get(name) ?? name;
  }

  // A publish's options with a replyTo that names an old server-named queue: the same options
  // with its name now (a copy; the caller's are left alone).
  publishOptions(options) {
    if (this.#aliases.size === 0 || !options || typeof options.replyTo !== 'string') return options;
    const now = this.#aliases.get(options.replyTo);
    return now === undefined ? options : { ...options, replyTo: now };
  }

  recordExchange(name, type, options) {
    if (name === '' || name.startsWith('amq.')) return; // the server's own
    const entity = { kind: 'exchange', name, type, options: { ...options } };
    if (this.#admits(entity)) this.#exchanges.set(name, entity);
  }

  recordQueue(requested, declared, options) {
    const earlier = this.#queues.get(declared);
    const entity = { kind: 'queue', name: declared, options: { ...options }, serverNamed: requested === '', aliases: earlier?.aliases ?? new Set() };
    if (!this.#admits({ kind: 'queue', name: declared, options: entity.options, serverNamed: entity.serverNamed })) return;
    this.#queues.set(declared, entity);
  }

  recordBinding(type, destination, source, pattern, args) {
    const entity = { kind: 'binding', type, destination, source, pattern, args };
    if (this.#admits(entity)) this.#bindings.set(bindingKey(type, destination, source, pattern, args), entity);
  }

  forgetBinding(type, destination, source, pattern, args) {
    const binding = this.#bindings.get(bindingKey(type, destination, source, pattern, args));
    if (!binding) return;
    this.#bindings.delete(bindingKey(type, destination, source, pattern, args));
    this.#forgetUnboundAutoDeleteExchange(binding.source);
  }

  forgetExchange(name) {
    this.#exchanges.delete(name);
    const sources = new Set();
    for (const [key, binding] of this.#bindings) {
      if (binding.source === name || (binding.type === 'exchange' && binding.destination === name)) {
        this.#bindings.delete(key);
        sources.add(binding.source);
      }
    }
    for (const source of sources) this.#forgetUnboundAutoDeleteExchange(source);
  }

  // A queue deleted through a recovering channel: its consumers' cancels are no loss.
  async deletingQueue(name, deletion) {
    this.#deleting.add(name);
    try {
      return await deletion();
    } finally {
      this.#deleting.delete(name);
    }
  }

  isBeingDeleted(name) {
    return this.#deleting.has(name);
  }

  forgetQueue(name) {
    const queue = this.#queues.get(name);
    this.#queues.delete(name);
    if (queue) for (const alias of queue.aliases) this.#aliases.delete(alias);
    for (const [key, binding] of this.#bindings) {
      if (binding.type === 'queue' && binding.destination === name) {
        this.#bindings.delete(key);
        this.#forgetUnboundAutoDeleteExchange(binding.source);
      }
    }
    for (const channel of this.channels) channel.forgetConsumersOf(name);
  }

  admitsConsumer(queue, consumerTag, options) {
    return this.#admits({ kind: 'consumer', queue, consumerTag, options: { ...options } });
  }

  // A consumer was cancelled by its channel: an auto-delete queue without consumers left is
  // gone from the server, and so from the record.
  consumerCancelled(queue) {
    const recorded = this.#queues.get(queue);
    if (!recorded || !recorded.options.autoDelete) return;
    for (const channel of this.channels) if (channel.consumes(queue)) return;
    this.forgetQueue(queue);
  }

  #forgetUnboundAutoDeleteExchange(name) {
    const exchange = this.#exchanges.get(name);
    if (!exchange || !exchange.options.autoDelete) return;
    for (const binding of this.#bindings.values()) if (binding.source === name) return;
    this.#exchanges.delete(name);
  }

  // A server-named queue declared again under `to`: its record, bindings and consumers follow.
  #rename(from, to) {
    const queue = this.#queues.get(from);
    this.#queues.delete(from);
    queue.name = to;
    queue.aliases.add(from);
    if (queue.aliases.size > MOST_ALIASES + 1) {
      const [, secondOldest] = queue.aliases;
      queue.aliases.delete(secondOldest);
      this.#aliases.delete(secondOldest);
    }
    for (const alias of queue.aliases) this.#aliases.set(alias, to);
    this.#aliases.delete(to);
    queue.aliases.delete(to);
    this.#queues.set(to, queue);
    for (const [key, binding] of this.#bindings) {
      if (binding.type === 'queue' && binding.destination === from) {
        this.#bindings.delete(key);
        binding.destination = to;
        this.#bindings.set(bindingKey(binding.type, to, binding.source, binding.pattern, binding.args), binding);
      }
    }
    for (const channel of this.channels) channel.renameQueue(from, to);
    emitSafely(this.#model, 'queue-renamed', { from, to });
  }

  // --- the lifecycle, driven by the recovering model ---

  // The connection went: every recovering channel waits for the next.
  lost(err) {
    for (const channel of this.channels) channel.lose(err);
  }

  // Replays the record on a new connection's model, before anyone else may use it. Throws
  // when the connection itself fails meanwhile (the attempt fails); an entity refused is
  // reported and skipped.
  async restore(model) {
    for (const channel of this.channels) await channel.reopen(model);
    const replay = new ReplayChannel(model);
    // Exchanges and queues refused in this replay: their bindings are skipped with them.
    const refused = { exchange: new Set(), queue: new Set() };
    try {
      for (const exchange of [...this.#exchanges.values()]) {
        const ok = await this.#replay(replay, exchange, (ch) => ch.assertExchange(exchange.name, exchange.type, exchange.options));
        if (!ok) refused.exchange.add(exchange.name);
      }
      for (const queue of [...this.#queues.values()]) {
        const ok = await this.#replay(replay, queue, async (ch) => {
          const declared = await ch.assertQueue(queue.serverNamed ? '' : queue.name, queue.options);
          if (declared.queue !== queue.name) this.#rename(queue.name, declared.queue);
        });
        if (!ok) refused.queue.add(queue.name);
      }
      for (const binding of [...this.#bindings.values()]) {
        const bind = binding.type === 'queue' ? 'bindQueue' : 'bindExchange';
        if (refused.exchange.has(binding.source) || refused[binding.type].has(binding.destination)) {
          this.reportError(new Error(`binding skipped: its ${refused.exchange.has(binding.source) ? 'source' : 'destination'} was refused`), binding);
          continue;
        }
        await this.#replay(replay, binding, (ch) => ch[bind](binding.destination, binding.source, binding.pattern, binding.args));
      }
      for (const channel of [...this.channels]) await channel.restoreConsumers(replay, model);
    } finally {
      replay.close();
    }
  }

  // A recovering channel whose own consume (of a consumer the server had cancelled) was
  // refused, which closed its channel: opened again on the same connection, with the rest of
  // its consumers (the refused one reported and left out as in a replay). Should the
  // connection go meanwhile, the recovery brings the channel back instead.
  async restoreChannel(channel) {
    const model = this.#model.currentModelNow();
    if (!model) return;
    const replay = new ReplayChannel(model);
    try {
      await channel.reopen(model);
      await channel.restoreConsumers(replay, model);
      if (this.#model.currentModelNow() === model && !model.connection.isClosed) channel.resume();
    } catch {
      // the connection went: the recovery's
    } finally {
      replay.close();
    }
  }

  // The new connection is the current one: the recovering channels go on.
  resumed() {
    for (const channel of this.channels) channel.resume();
  }

  // A drained close's first part: each channel cancels its consumers and waits, within `ms`,
  // for its callbacks and acks, then its confirms. True if all got there.
  async drain(ms) {
    const deadline = Date.now() + ms;
    const drained = await Promise.all([...this.channels].map((channel) => channel.drain(deadline)));
    return drained.every(Boolean);
  }

  // Recovery is over (close(), or it gave up): every recovering channel closes.
  end(err) {
    this.#ended = err;
    this.#ending.abort();
    for (const channel of [...this.channels]) channel.end(err);
  }

  // One entity's replay: tried again on 404 while binding, reported and skipped when refused
  // (false). The connection's end is thrown.
  async #replay(replay, entity, declare) {
    for (let attempt = 0; ; attempt++) {
      try {
        await replay.run(declare);
        return true;
      } catch (err) {
        if (replay.connectionLost) throw err;
        if (attempt < REPLAY_RETRIES && worthRetrying(err, entity)) {
          await delay(REPLAY_RETRY_DELAY, this.#ending.signal);
          continue;
        }
        this.reportError(err, entity);
        return false;
      }
    }
  }

  reportError(err, entity) {
    const { onError } = this.#options;
    const copy = { ...entity };
    delete copy.aliases;
    if (!onError) {
      emitSafely(this.#model, 'topology-error', err, copy);
      return;
    }
    try {
      onError(err, copy);
    } catch (thrown) {
      emitSafely(this.#model, 'topology-error', thrown, copy);
    }
  }

  // A consumer the server cancelled: its queue is looked for on a channel of its own
  // (checkQueue on a missing queue closes the channel it is asked on), now and then again
  // with a growing wait, until it exists and `resubscribe()` (true once done) consumes again.
  // Stops when `stillWanted()` says no.
  async awaitQueue(queue, stillWanted, resubscribe) {
    for (let wait = 100; stillWanted(); wait = Math.min(wait * 2, CONSUMER_RETRY_CAP)) {
      try {
        const model = this.#model.currentModelNow();
        if (model) {
          const probe = new ReplayChannel(model);
          try {
            await probe.run((ch) => ch.checkQueue(this.currentName(queue)));
          } finally {
            probe.close();
          }
          if (!stillWanted() || (await resubscribe())) return;
        }
      } catch {
        // not there yet (or the connection went: the recovery consumes again)
      }
      await delay(wait, this.#ending.signal);
    }
  }
}

// The channel a replay declares on: opened when first needed, and opened afresh after an
// entity closed it.
class ReplayChannel {
  #model;
  #channel = null;
  connectionLost = false;

  constructor(model) {
    this.#model = model;
  }

  async run(operation) {
    if (this.#channel === null) this.#channel = await this.#open();
    try {
      return await operation(this.#channel);
    } catch (err) {
      this.close(); // closed by the server already, most likely
      if (this.#model.connection.isClosed) this.connectionLost = true;
      throw err;
    }
  }

  async #open() {
    try {
      const channel = await openChannel(this.#model.connection, false);
      channel.on('error', () => {}); // the refusal is the operation's error
      return channel;
    } catch (err) {
      this.connectionLost = true;
      throw err;
    }
  }

  close() {
    const channel = this.#channel;
    this.#channel = null;
    if (channel) channel.close().catch(() => {});
  }
}

module.exports = { Topology, topologyOptions };
