'use strict';

// Opt-in connection recovery: `connect(url, { recovery: {...} })`.
//
// A recovering model stands in for a ChannelModel (promise API) or a
// CallbackModel (callback API). It opens the underlying model, runs the
// user's `setup` on it, and whenever that model closes it opens a fresh
// one after a delay (exponential backoff with jitter, or the user's
// `calculateDelay`), giving up after `maxRetries` consecutive failed
// attempts (`initialMaxRetries` before the first success). Channels are
// created on whichever model is current; channels themselves are not
// recovered (that's what `setup` is for). The semantics are amqplib
// 2.3.1's.
//
// The first attempt starts on a later turn of the event loop, so that a
// caller given the model at once (`waitForConnect: false`) can listen
// for its events and can close() it before the attempt ends.
//
// With a list of nodes (lib/nodes.js), each attempt is a round of the list: after a
// disconnect the next node is tried at once, and the backoff delay applies to whole rounds
// that failed. `maxRetries` means one thing for one URL and for a list: how many rounds (of
// one node, or of the list) follow a disconnect before recovery gives up; 0 gives up at once.
// `shuffle` mixes the list once (so that a fleet of services does not pile onto its first
// node), and `preferredNode` (an index in the list as given) is where the first round starts. A single URL is a list of one, as amqplib 2.3.1 has it.
//
// Credentials (ours, not amqplib's): updateSecret also changes what later connections
// authenticate with (kept at once while disconnected), and `credentials`, an async hook asked
// before every attempt with { index, node }, supplies that attempt's ({ username, password },
// or credentials as amqp.credentials makes them); its failure, or its silence past the connect
// timeout, fails the attempt.
//
// Events: 'connect' (model, { index, node }: which node of the list, and its address),
// 'disconnect' (err), 'connect-failed' (err),
// 'reconnect-scheduled' ({ attempt, delay, error }), 'reconnect-failed'
// (err), plus 'blocked', 'unblocked', 'error', 'update-secret-ok' and
// 'handler-error' passed through from the current model.

const EventEmitter = require('node:events');
const { allNodesFailed, describeNode } = require('./nodes');
const credentials = require('./credentials');
const { MAX_TIMER, asError, fromCallback, settleWithin, toCallback, waitInLine } = require('./promises');

const DEFAULTS = Object.freeze({
  initialDelay: 100, // ms before the first retry
  maxDelay: 30000, // ms, cap on the backoff, jitter included
  factor: 2, // backoff multiplier per attempt
  jitter: 0.2, // +/- this fraction of the delay, at random
  maxRetries: Infinity,
  setup: null,
  waitForConnect: true, // connect() settles with the first connection, not before
  calculateDelay: null, // (attempt) => ms, in place of the backoff
  shuffle: false, // a list of nodes is tried in an order of its own, drawn once
  preferredNode: undefined, // the index of the node in the list as given that is tried first
  credentials: null, // async ({ index, node }) => the attempt's credentials, asked before each
  topology: null, // true or options: channels, topology and consumers recovered (lib/topology.js)
});

// How long a drained close waits for the callbacks, acks and confirms by default, ms.
const DRAIN_TIMEOUT = 10000;

// Events of the underlying model that are simply re-emitted.
const PASSTHROUGH_EVENTS = ['blocked', 'unblocked', 'error', 'update-secret-ok', 'handler-error'];

// Separate the `recovery` option from the options meant for the socket.
// The caller's object is left untouched.
function splitConnectionOptions(connOptions) {
  if (!connOptions || typeof connOptions !== 'object' || !Object.hasOwn(connOptions, 'recovery')) {
    return { connectionOptions: connOptions, recovery: null };
  }
  const { recovery, ...connectionOptions } = connOptions;
  return { connectionOptions, recovery };
}

// `recovery: true` or an options object turn it on, unless the object
// says `enabled: false`.
function recoveryEnabled(recovery) {
  if (!recovery) return false;
  if (recovery === true) return true;
  return recovery.enabled !== false;
}

function finiteOr(value, fallback) {
  const n = Number(value);
  return Number.isFinite(n) ? n : fallback;
}

function clamp(value, low, high) {
  return Math.min(high, Math.max(low, value));
}

// A retry limit: absent means `fallback`, Infinity stays, anything else
// not a finite number means `fallback` too, and negatives mean 0.
function retryLimit(value, fallback) {
  if (value === undefined || value === null) return fallback;
  if (value === Infinity) return Infinity;
  return Math.max(0, finiteOr(value, fallback));
}

// Fill in defaults and bring out-of-range values back into range.
function normaliseRecoveryOptions(recovery) {
  const given = recovery === true ? {} : recovery || {};
  const initialDelay = Math.max(0, finiteOr(given.initialDelay, DEFAULTS.initialDelay));
  const maxRetries = retryLimit(given.maxRetries, DEFAULTS.maxRetries);
  return {
    initialDelay,
    maxDelay: Math.max(initialDelay, finiteOr(given.maxDelay, DEFAULTS.maxDelay)),
    factor: Math.max(1, finiteOr(given.factor, DEFAULTS.factor)),
    jitter: clamp(finiteOr(given.jitter, DEFAULTS.jitter), 0, 1),
    maxRetries,
    initialMaxRetries: retryLimit(given.initialMaxRetries, maxRetries),
    setup: typeof given.setup === 'function' ? given.setup : null,
    waitForConnect: given.waitForConnect !== false,
    calculateDelay: typeof given.calculateDelay === 'function' ? given.calculateDelay : null,
    shuffle: !!given.shuffle,
    preferredNode: given.preferredNode ?? DEFAULTS.preferredNode,
    credentials: credentialsHook(given.credentials),
    topology: given.topology || null,
  };
}

// Ours, not amqplib's: a hook given that is no function is refused, not ignored (a service
// would otherwise connect with its URL's password and never know).
function credentialsHook(hook) {
  if (hook === undefined || hook === null) return null;
  if (typeof hook !== 'function') throw new TypeError(`recovery.credentials must be a function returning the credentials of each attempt; got ${typeof hook}`);
  return hook;
}

// The order in which a round goes through the nodes (indices into the list as given), and
// where the first round starts: at the preferred node, else at the order's first. Throws a
// TypeError on a preferredNode that is no index.
function nodeOrder(count, settings) {
  const { preferredNode } = settings;
  if (preferredNode !== undefined && (!Number.isInteger(preferredNode) || preferredNode < 0 || preferredNode >= count)) {
    throw new TypeError(`recovery.preferredNode must be the index of a node in the list (0 to ${count - 1}); got ${String(preferredNode)}`);
  }
  const order = Array.from({ length: count }, (_, i) => i);
  if (settings.shuffle) {
    for (let i = count - 1; i > 0; i--) {
      const j = Math.floor(Math.random() * (i + 1));
      [order[i], order[j]] = [order[j], order[i]];
    }
  }
  return { order, start: preferredNode === undefined ? 0 : order.indexOf(preferredNode) };
}

// The built-in delay before retry number `attempt` (1, 2, ...):
// initialDelay growing by `factor` each time, moved by a uniformly random
// amount within +/- jitter of itself, rounded to whole milliseconds. The
// growth stops at maxDelay / (1 + jitter), so that the largest jitter
// still lands on maxDelay at most, and the spread stays even up to it.
function backoffDelay(settings, attempt) {
  const ceiling = settings.maxDelay / (1 + settings.jitter);
  const base = Math.min(ceiling, settings.initialDelay * settings.factor ** (attempt - 1));
  const spread = base * settings.jitter;
  const offset = spread > 0 ? (Math.random() * 2 - 1) * spread : 0;
  return Math.max(0, Math.round(base + offset));
}

// The delay before retry number `attempt`: the user's `calculateDelay`
// if given (maxDelay does not apply to it), else the built-in one. A
// `calculateDelay` that throws, or returns anything but a finite number
// of milliseconds >= 0, throws here: recovery then gives up.
function reconnectDelay(settings, attempt) {
  if (!settings.calculateDelay) return backoffDelay(settings, attempt);
  const delay = settings.calculateDelay(attempt);
  if (typeof delay !== 'number' || !Number.isFinite(delay) || delay < 0) {
    throw new Error(`calculateDelay must return a finite, non-negative number of milliseconds (got ${String(delay)})`);
  }
  return Math.round(delay);
}

// Run the user's setup against a freshly opened model. A setup declared
// with two parameters is callback-style, `setup(model, done)`; otherwise
// it may return a promise (or nothing).
function runSetup(setup, model) {
  if (!setup) return Promise.resolve();
  return new Promise((resolve, reject) => {
    let settled = false;
    const done = (err) => {
      if (settled) return;
      settled = true;
      if (err) reject(asError(err, 'Recovery setup failed'));
      else resolve();
    };
    try {
      if (setup.length >= 2) setup(model, done);
      else Promise.resolve(setup(model)).then(() => done(), done);
    } catch (err) {
      done(err);
    }
  });
}

function connectionClosedError() {
  return new Error('Connection closed');
}

// The reconnecting state machine, shared by both APIs. Subclasses say how
// to close a model, create a channel on it and update its secret, each
// returning a promise.
class RecoveringModel extends EventEmitter {
  #openModel;
  #settings;
  #nodes; // the URLs, as given
  #order; // the indices of #nodes in the order rounds take them
  #next; // the position in #order the next round starts from
  #connectedAt = 0; // when the current model connected (ms since the epoch)
  #model = null; // the current, connected model
  #detachModel = null; // undoes the listeners put on #model
  #waiters = []; // callers waiting for a model
  #connecting = false;
  #stopped = false; // close() was called, or recovery gave up
  #failure = null; // why recovery gave up; nothing more will happen
  #connectedOnce = false; // from then on maxRetries applies, before it initialMaxRetries
  #timer = null;
  #attempt = 0; // consecutive failed attempts so far
  #secret = undefined; // the last updateSecret's, for later connections (without the hook)
  #attemptTimeout; // ms the credentials hook has per attempt; 0 for no limit
  #topology = null; // the record of what the recovering channels made (lib/topology.js)
  #firstConnect;
  #firstSettled = false;
  #resolveFirst;
  #rejectFirst;

  // `openModel(url, index, auth)` opens a model on one node of `nodes` (lib/nodes.js nodesOf),
  // with `auth` (lib/nodes.js atNode) when this model has its say on the credentials;
  // `attemptTimeout` bounds the credentials hook (the connect `timeout`). Throws a TypeError on
  // a bad preferredNode or credentials hook.
  constructor(openModel, recovery, nodes = [undefined], attemptTimeout = 0) {
    super();
    this.#openModel = openModel;
    this.#attemptTimeout = attemptTimeout;
    this.#settings = normaliseRecoveryOptions(recovery);
    this.#nodes = nodes;
    ({ order: this.#order, start: this.#next } = nodeOrder(nodes.length, this.#settings));
    // Loaded only when asked for: a model without it carries none of its code.
    if (this.#settings.topology) this.#topology = new (require('./topology').Topology)(this, this.#settings.topology);
    this.#firstConnect = new Promise((resolve, reject) => {
      this.#resolveFirst = resolve;
      this.#rejectFirst = reject;
    });
    // The outcome is also reported through events; don't let an unobserved
    // failure of the first connection become an unhandled rejection.
    this.#firstConnect.catch(() => {});
    setImmediate(() => this.#connect());
  }

  get _settings() {
    return this.#settings;
  }

  // --- for subclasses ---

  _whenConnected() {
    return this.#firstConnect;
  }

  async _withModel(operation) {
    return operation(await this.#currentModel());
  }

  // The topology record, when the recovering model keeps one (lib/topology.js).
  get _topology() {
    return this.#topology;
  }

  // For the recovering channels: the connected model, or the next one within `ms`, else an
  // Error naming `what` waited.
  _modelWithin(ms, what) {
    return this.#currentModel(ms, what);
  }

  // The connected model, or null between connections.
  currentModelNow() {
    return this.#model;
  }

  async _shutdown() {
    if (this.#stopped) return;
    this.#stopped = true;
    if (this.#timer) {
      clearTimeout(this.#timer);
      this.#timer = null;
    }
    const err = connectionClosedError();
    this.#rejectWaiters(err);
    this.#settleFirst(err);
    if (this.#topology) this.#topology.end(err);
    const model = this.#model;
    if (model) {
      this.#forgetModel();
      await this.#closeQuietly(model);
    }
  }

  // updateSecret of both APIs; `send(model)` sends it on a connected model. Without the
  // credentials hook, later connections authenticate with the new secret too (each node as its
  // own user), and while disconnected it is kept for them at once, with nothing sent: an
  // expired token is why a broker drops a connection, and the reconnects must not go on with
  // it. With the hook, the hook says, and the secret goes to the connection open now only.
  async _updateSecret(newSecret, send) {
    if (this.#settings.credentials) return this._withModel(send);
    if (!this.#model && !this.#stopped) {
      this.#secret = newSecret;
      return undefined;
    }
    const ok = await this._withModel(send);
    this.#secret = newSecret;
    return ok;
  }

  // close() of both APIs; close({ drain }) with topology recovery (ours): the channels'
  // consumers cancelled, their callbacks in flight finished and acks sent, outstanding
  // confirms had, then the close; `drain: true` or { timeout } (ms, default 10 s) bounds the
  // wait. Resolves with { drained }: false when the wait ran out (it closes all the same).
  async _close(options) {
    const drain = options?.drain;
    if (!drain || !this.#topology) return this._shutdown();
    const timeout = drain === true || drain.timeout === undefined ? DRAIN_TIMEOUT : Number(drain.timeout);
    if (!(timeout >= 0)) throw new TypeError(`close's drain.timeout must be a number of milliseconds >= 0; got ${String(drain.timeout)}`);
    const drained = await this.#topology.drain(Math.min(timeout, MAX_TIMER));
    await this._shutdown();
    return { drained };
  }

  // The counters of the connection open now (lib/counters.js), or null between connections.
  counters() {
    return this.#model ? this.#model.counters() : null;
  }

  // --- internals ---

  // The connected model, or the next one; within `ms` (0: no limit), else an Error naming `what`
  // waited.
  #currentModel(ms = 0, what = '') {
    if (this.#model) return Promise.resolve(this.#model);
    if (this.#failure) return Promise.reject(this.#failure);
    if (this.#stopped) return Promise.reject(connectionClosedError());
    return waitInLine(this.#waiters, ms, `${what}: the connection was not recovered within ${ms} ms`);
  }

  #settleFirst(err) {
    if (this.#firstSettled) return;
    this.#firstSettled = true;
    if (err) this.#rejectFirst(err);
    else this.#resolveFirst();
  }

  #rejectWaiters(err) {
    for (const waiter of this.#waiters.splice(0)) waiter.reject(err);
  }

  #resolveWaiters(model) {
    for (const waiter of this.#waiters.splice(0)) waiter.resolve(model);
  }

  #closeQuietly(model) {
    return this._closeModel(model).catch(() => {});
  }

  #adoptModel(model) {
    const onClose = (maybeErr) => this.#onModelClose(model, maybeErr);
    const forwarders = PASSTHROUGH_EVENTS.map((name) => [name, (...args) => this.emit(name, ...args)]);
    model.on('close', onClose);
    for (const [name, listener] of forwarders) model.on(name, listener);

    this.#model = model;
    this.#detachModel = () => {
      model.removeListener('close', onClose);
      for (const [name, listener] of forwarders) model.removeListener(name, listener);
      // A model we've let go of may still report a late error; with no
      // listener at all that would be thrown.
      model.on('error', () => {});
    };
  }

  #forgetModel() {
    this.#model = null;
    if (this.#detachModel) this.#detachModel();
    this.#detachModel = null;
  }

  #onModelClose(model, maybeErr) {
    if (this.#model !== model) return;
    this.#forgetModel();
    if (this.#stopped) return;
    const err = asError(maybeErr, 'Connection closed');
    if (this.#topology) this.#topology.lost(err);
    this.emit('disconnect', err);
    // Another node may well be up: the next round starts at once. A connection that did not
    // last initialDelay waits for it, as a node of its own is retried after a delay (amqplib's),
    // so that connections dropped as soon as made do not reconnect in a tight loop. Either way
    // the round is a retry, counted against maxRetries as one URL's is.
    const lasted = Date.now() - this.#connectedAt >= this.#settings.initialDelay;
    this.#scheduleReconnect(err, this.#nodes.length > 1 && lasted ? 0 : undefined);
  }

  // One round: each node in turn, from #next, until one connects; if none does, the next
  // round is scheduled.
  async #connect() {
    if (this.#stopped || this.#connecting) return;
    this.#connecting = true;
    const tried = [];
    const errors = [];
    try {
      for (let k = 0; k < this.#order.length && !this.#stopped; k++) {
        const position = (this.#next + k) % this.#order.length;
        const err = await this.#connectTo(position);
        if (err === null) return;
        tried.push(this.#nodes[this.#order[position]]);
        errors.push(err);
      }
      this.#scheduleReconnect(errors.length === 1 ? errors[0] : allNodesFailed(tried, errors));
    } finally {
      this.#connecting = false;
    }
  }

  // Opens and sets up a model on the node at `position` of #order: null once it is the
  // current model (or close() came meanwhile), else the error.
  async #connectTo(position) {
    const index = this.#order[position];
    const which = { index, node: describeNode(this.#nodes[index]) };
    let model = null;
    let closedEarly = null;
    const onEarlyClose = (err) => {
      closedEarly = asError(err, 'Connection closed');
    };
    try {
      const auth = await this.#attemptAuth(which);
      // close() came while the hook fetched: no connection at all.
      if (this.#stopped) return null;
      model = await this.#openModel(this.#nodes[index], index, auth);
      // A model that closes before it is adopted (during setup, or as soon as it opened) is a
      // failed attempt: adopted, it would never report its close, and recovery would stop.
      // amqplib 2.3.1 adopts it.
      if (model.connection?.isClosed) onEarlyClose();
      model.once('close', onEarlyClose);
      model.on('error', onEarlyClose);
      // close() may have been called while the model opened: then no setup.
      if (!this.#stopped) await runSetup(this.#settings.setup, model);
      // The recovering channels, the topology and the consumers, before anyone else uses it.
      if (this.#topology && !this.#stopped) await this.#topology.restore(model);
      model.removeListener('close', onEarlyClose);
      model.removeListener('error', onEarlyClose);
      if (closedEarly) throw closedEarly;
      if (this.#stopped) {
        await this.#closeQuietly(model);
        return null;
      }
      this.#attempt = 0;
      this.#connectedOnce = true;
      // Should this node go, the round after starts from the next one.
      this.#next = (position + 1) % this.#order.length;
      this.#connectedAt = Date.now();
      this.#adoptModel(model);
      this.#settleFirst(null);
      if (this.#topology) this.#topology.resumed();
      this.#resolveWaiters(model);
      this.emit('connect', model, which);
      return null;
    } catch (caught) {
      const err = asError(caught, 'Connection recovery failed');
      if (model) {
        if (this.#model === model) this.#forgetModel();
        // Not awaited: a model that never confirms its close must not
        // stall recovery.
        this.#closeQuietly(model);
      }
      this.emit('connect-failed', err);
      return err;
    }
  }

  // This model's say on an attempt's credentials (lib/nodes.js atNode): the `credentials`
  // hook's answer (asked before every attempt, so that a token is fetched afresh, within the
  // connect timeout), else the secret updateSecret set last, else none (the node's own).
  async #attemptAuth(which) {
    const hook = this.#settings.credentials;
    if (!hook) return this.#secret === undefined ? null : { secret: this.#secret };
    const answer = await settleWithin(hook({ ...which }), this.#attemptTimeout, `recovery.credentials did not settle within ${this.#attemptTimeout} ms`);
    return { credentials: credentials.fromAnswer(answer) };
  }

  // Schedules the next round (retry number #attempt + 1) after `delay` ms, by default the
  // backoff's; gives up instead once maxRetries rounds have failed.
  #scheduleReconnect(err, delay = undefined) {
    if (this.#stopped || this.#timer) return;

    const limit = this.#connectedOnce ? this.#settings.maxRetries : this.#settings.initialMaxRetries;
    if (this.#attempt >= limit) {
      this.#giveUp(err);
      return;
    }

    const attempt = this.#attempt + 1;
    try {
      delay ??= reconnectDelay(this.#settings, attempt);
    } catch (delayErr) {
      // The user's calculateDelay failed: give up, with its error.
      this.#giveUp(asError(delayErr, 'calculateDelay failed'));
      return;
    }
    this.#attempt = attempt;
    this.emit('reconnect-scheduled', { attempt, delay, error: err });
    this.#timer = setTimeout(() => {
      this.#timer = null;
      this.#connect();
    }, delay);
  }

  // Recovery is over for good: what waits for a model, and whatever asks
  // for one later, fails with `err`; close() has nothing left to do.
  #giveUp(err) {
    this.#stopped = true;
    this.#failure = err;
    this.#settleFirst(err);
    this.#rejectWaiters(err);
    if (this.#topology) this.#topology.end(err);
    this.emit('reconnect-failed', err);
  }
}

// Recovering stand-in for a ChannelModel (promise API).
class RecoveringPromiseModel extends RecoveringModel {
  async waitForConnect() {
    await this._whenConnected();
    return this;
  }

  close(options) {
    return this._close(options);
  }

  // With topology recovery, a channel that outlives its connection (lib/recovering_channel.js).
  createChannel(options) {
    if (this._topology) return this._topology.createChannel(false, options);
    return this._withModel((model) => model.createChannel(options));
  }

  createConfirmChannel(options) {
    if (this._topology) return this._topology.createChannel(true, options);
    return this._withModel((model) => model.createConfirmChannel(options));
  }

  updateSecret(newSecret, reason) {
    return this._updateSecret(newSecret, (model) => model.updateSecret(newSecret, reason));
  }

  _closeModel(model) {
    return model.close();
  }
}

// Recovering stand-in for a CallbackModel (callback API).
class RecoveringCallbackModel extends RecoveringModel {
  waitForConnect(cb) {
    toCallback(
      this._whenConnected().then(() => this),
      cb,
    );
    return this;
  }

  // close(cb), or close({ drain }, cb) as the promise API's close({ drain }).
  close(options, cb) {
    const [opts, callback] = typeof options === 'function' ? [undefined, options] : [options, cb];
    toCallback(this._close(opts), callback);
    return this;
  }

  updateSecret(newSecret, reason, cb) {
    toCallback(
      this._updateSecret(newSecret, (model) => fromCallback((done) => model.updateSecret(newSecret, reason, done))),
      cb,
    );
    return this;
  }

  createChannel(options, cb) {
    return this.#create('createChannel', options, cb);
  }

  createConfirmChannel(options, cb) {
    return this.#create('createConfirmChannel', options, cb);
  }

  #create(method, options, cb) {
    const [opts, callback] = typeof options === 'function' ? [undefined, options] : [options, cb];
    if (this._topology) {
      toCallback(this._topology.createChannel(method === 'createConfirmChannel', opts, true), callback);
      return this;
    }
    const channel = this._withModel((model) =>
      fromCallback((done) => (opts === undefined ? model[method](done) : model[method](opts, done))),
    );
    toCallback(channel, callback);
    return this;
  }

  _closeModel(model) {
    return fromCallback((done) => model.close(done));
  }
}

// With `waitForConnect: false` the model is handed over at once (the
// callback on the next tick), before its first attempt has started.
// `openModel(url)` opens a model on one of `nodes` (a single URL when not given). The
// arguments before `nodes` are amqplib 2.3.1's.
function connectWithRecoveryPromise(openModel, recovery, nodes, attemptTimeout) {
  let model;
  try {
    model = new RecoveringPromiseModel(openModel, recovery, nodes, attemptTimeout);
  } catch (err) {
    return Promise.reject(err);
  }
  if (!model._settings.waitForConnect) return Promise.resolve(model);
  return model.waitForConnect();
}

function connectWithRecoveryCallback(openModel, recovery, cb, nodes, attemptTimeout) {
  const model = new RecoveringCallbackModel(openModel, recovery, nodes, attemptTimeout);
  if (model._settings.waitForConnect) model.waitForConnect(cb);
  else if (typeof cb === 'function') process.nextTick(cb, null, model);
  return model;
}

module.exports = {
  splitConnectionOptions,
  recoveryEnabled,
  connectWithRecoveryPromise,
  connectWithRecoveryCallback,
  RecoveringPromiseModel,
  RecoveringCallbackModel,
  // exposed for tests
  normaliseRecoveryOptions,
  backoffDelay,
  reconnectDelay,
};
