// @ts-check: its calls of the native entry points are checked against lib/native.d.ts (see
// tsconfig.lib.json), so the JSDoc types below are those of the arguments they pass on.
'use strict';
// Frames out, and backpressure. Methods and messages are encoded by the native session into
// its one output buffer, which leaves in one write per turn of the event loop, or sooner when
// the connection flushes: once the handlers of a read have run, so a reply leaves before the
// read that caused it returns. The native socket writes at once (a microtask): it reads what
// the kernel holds before it reports a failed write. A stream over a socket of Node's (TLS,
// Windows, Bun, Deno) writes after the turn's poll phase (setImmediate), as amqplib does: a
// server that closes the connection and resets it (a node stopping) has its close read, and
// decrypted, before a write can fail on the reset and the stream report that instead. Any
// other stream (an in-memory pair, as tests use) has no reset to lose: it writes at once.
// Each send reports whether more may follow (publish and sendToQueue return it); once one has
// said no, every channel gets 'drain' when more may follow again.

// Buffer from node:buffer: the global one is a getter, run at each use (once per message here).
const { Buffer } = require('node:buffer');
const net = require('node:net');
const native = require('./native');
const { REFUSED_NO_REPEAT, REFUSED_CHANNEL_CLOSING } = require('./boundary');
const defs = require('./defs');
const spec = require('./spec');

const presence = spec.propertyPresence[defs.BasicProperties];
const propertyValues = spec.propertyValues[defs.BasicProperties];
const propertiesMatch = spec.propertiesMatch[defs.BasicProperties];

// publish and sendToQueue report false once this much is waiting to be written...
const WRITE_LIMIT = 4 * 1024 * 1024;
// ...or once a channel has more messages than this waiting, as amqplib's channels do (its
// default highWaterMark): a loop that publishes until false then stops as soon as there.
const DEFAULT_HIGH_WATER_MARK = 1024;

class Outgoing {
  // `handle` is the one the per-message native calls take (src/bindings/hot.rs); `channels`
  // the connection's channel records (see Connection#freshChannel), whose `waiting` and
  // `lastPublish` are kept here; `writesItself` says the stream is a native socket, which
  // writes from the session itself.
  // `onWriteFailed` is called when a write to the stream fails at once.
  /** @param {import('./native').Handle} handle */
  constructor(stream, session, handle, channels, writesItself, onWriteFailed) {
    this.stream = stream;
    this.session = session;
    this.handle = handle;
    this.channels = channels;
    this.writesItself = writesItself;
    this.writesAfterPoll = !writesItself && stream instanceof net.Socket;
    this.onWriteFailed = onWriteFailed;
    // For the counters (lib/counters.js): writes to a stream, publishes, acks.
    this.writes = 0;
    this.published = 0;
    this.acked = 0;
    this.sentSinceLastCheck = false;
    this.flushScheduled = false;
    this.writeStalled = false;
    this.drainOwed = false;
    this.flush = this.flush.bind(this);
    this.onStreamDrain = this.onStreamDrain.bind(this);
  }

  // Whether anything was sent since the last check, for the heartbeat.
  checkSend() {
    const sent = this.sentSinceLastCheck;
    this.sentSinceLastCheck = false;
    return sent;
  }

  // True while what waits to be written is under the limit; once it is not, the channels
  // get 'drain' when it is again.
  writable(record, pending) {
    const waiting = pending + this.stream.writableLength;
    if (record && record.highWaterMark > 0 ? record.waiting <= record.highWaterMark
      : waiting < WRITE_LIMIT && (!record || record.waiting <= DEFAULT_HIGH_WATER_MARK)) return true;
    this.drainOwed = true;
    return false;
  }

  scheduleFlush() {
    this.sentSinceLastCheck = true;
    if (!this.flushScheduled) {
      this.flushScheduled = true;
      if (this.writesAfterPoll) setImmediate(this.flush); // see the top of the file
      else queueMicrotask(this.flush);
    }
  }

  // Writes everything encoded so far, in one write, unless the stream asked us to wait.
  flush() {
    this.flushScheduled = false;
    if (this.writeStalled) return;
    if (this.writesItself ? this.stream.flushOutput() : this.writeOutput()) {
      this.forgetWaiting();
      this.releaseDrain();
    } else {
      this.writeStalled = true;
      this.stream.once('drain', this.onStreamDrain);
    }
  }

  // Hands the session's output to the stream; false when the stream asks us to wait.
  writeOutput() {
    const out = native.takeOutput(this.handle);
    if (out === null) return true;
    this.writes++;
    const more = this.stream.write(out);
    // A write that fails at once marks the stream errored now, and destroys it a tick later.
    if (this.stream.errored) this.onWriteFailed();
    return more;
  }

  // Everything has been handed to the stream: no channel has messages waiting.
  forgetWaiting() {
    for (let i = 1; i < this.channels.length; i++) {
      const record = this.channels[i];
      if (record) record.waiting = 0;
    }
  }

  onStreamDrain() {
    this.writeStalled = false;
    this.forgetWaiting();
    this.flush();
  }

  // Publishes reported false: once what waits is under the limit again, say so on every
  // channel (a flush that wrote everything at once counts too).
  releaseDrain() {
    if (!this.drainOwed || this.session.pendingOutput >= WRITE_LIMIT) return;
    this.drainOwed = false;
    for (let i = 1; i < this.channels.length; i++) {
      const record = this.channels[i];
      if (record?.channel?.onBufferDrain) record.channel.onBufferDrain();
    }
  }

  sendBytes(bytes) {
    this.session.sendBytes(bytes);
    this.scheduleFlush();
  }

  sendHeartbeat() {
    this.session.sendHeartbeat();
    this.scheduleFlush();
  }

  // `channel` is a channel's handle (core/src/channels.rs), or 0 for the connection's own.
  /**
   * @param {number} channel
   * @param {number} method
   * @param {Record<string, any>} fields
   */
  sendMethod(channel, method, fields) {
    const flags = acknowledgementFlags(method, fields);
    if (flags >= 0) return this.sendAcknowledgement(channel, method, fields.deliveryTag, flags);
    const pending = native.sendMethod(this.handle, channel, method, fields);
    if (pending < 0) throw new ChannelRefused(pending);
    this.scheduleFlush();
    return this.writable(undefined, pending);
  }

  // `tag` one isEncodableTag takes, `flags` as acknowledgementFlags makes them.
  /**
   * @param {number} channel
   * @param {number} method
   * @param {number} tag
   * @param {number} flags
   */
  sendAcknowledgement(channel, method, tag, flags) {
    if (method === defs.BasicAck) this.acked++;
    const pending = native.sendAcknowledgement(this.handle, channel, method, tag, flags);
    if (pending < 0) throw new ChannelRefused(pending);
    this.scheduleFlush();
    return this.writable(undefined, pending);
  }

  /**
   * @param {number} channel
   * @param {number} method
   * @param {Record<string, any>} fields
   * @param {number} properties
   * @param {Record<string, unknown>} props
   * @param {Buffer} content
   */
  sendMessage(channel, method, fields, properties, props, content) {
    if (!Buffer.isBuffer(content)) throw new TypeError('content is not a buffer');
    let pending;
    // A handle's number is its low 16 bits (a stale handle's record may be a later channel's:
    // the native side refuses the send before that record is touched).
    const record = this.channels[channel % 0x10000];
    if (method === defs.BasicPublish && properties === defs.BasicProperties && (fields.ticket === undefined || fields.ticket === 0)) {
      // The hot path: the same arguments as the channel's last publish send its frames again;
      // otherwise the arguments go one by one, and only the properties that are there.
      pending = record && samePublish(record.lastPublish, fields, props) ? native.sendPublishAgain(this.handle, channel, content) : REFUSED_NO_REPEAT;
      if (pending === REFUSED_NO_REPEAT) {
        const present = presence(props);
        pending = native.sendPublish(this.handle, channel, fields.exchange, fields.routingKey, !!fields.mandatory, !!fields.immediate, props, present, content);
        if (record) record.lastPublish = publishSnapshot(fields, props);
      }
    } else {
      pending = native.sendMessage(this.handle, channel, method, fields, properties, props, content);
    }
    if (pending < 0) throw new ChannelRefused(pending);
    this.scheduleFlush();
    this.published++;
    if (record) record.waiting++;
    return this.writable(record, pending);
  }
}

// The native core refused a send: the channel is closing or closed (core/src/channels.rs).
// The channel words it, as amqplib's IllegalOperationError with the stack of that change.
class ChannelRefused extends Error {
  constructor(refusal) {
    super('The channel refused the send');
    this.closing = refusal === REFUSED_CHANNEL_CLOSING;
  }
}

// Whether the native acknowledgement encoder takes `tag` (others go through the general
// encoder, which refuses them as amqplib's does).
function isEncodableTag(tag) {
  return Number.isSafeInteger(tag) && tag >= 0;
}

// basic.ack, nack and reject go out once per message consumed: with a safe-integer tag and
// boolean flags (as the channel APIs make them), their flags are packed here, bit by bit in
// the order of their arguments, and the native side needs no fields object. -1 otherwise:
// the general encoder then reads the fields and reports what is wrong with them.
function acknowledgementFlags(method, fields) {
  if (method !== defs.BasicAck && method !== defs.BasicNack && method !== defs.BasicReject) return -1;
  if (!isEncodableTag(fields.deliveryTag)) return -1;
  const { multiple, requeue } = fields;
  switch (method) {
    case defs.BasicAck:
      return typeof multiple === 'boolean' ? +multiple : -1;
    case defs.BasicNack:
      return typeof multiple === 'boolean' && typeof requeue === 'boolean' ? +multiple | (+requeue << 1) : -1;
    default:
      return typeof requeue === 'boolean' ? +requeue : -1;
  }
}

// A publish's arguments, kept so the next publish can be checked against them; null when they
// hold an object whose encoding cannot be checked cheaply (only tables of primitive values
// can, such as a headers object reused from publish to publish).
function publishSnapshot(fields, props) {
  const values = propertyValues(props);
  for (let i = 0; i < values.length; i++) {
    const value = values[i];
    if (value === null || typeof value !== 'object') continue;
    values[i] = TableSnapshot.of(value);
    if (values[i] === null) return null;
  }
  return { exchange: fields.exchange, routingKey: fields.routingKey, mandatory: !!fields.mandatory, immediate: !!fields.immediate, values };
}

function samePublish(last, fields, props) {
  if (last === null || last === undefined) return false;
  if (fields.exchange !== last.exchange || fields.routingKey !== last.routingKey) return false;
  if (!!fields.mandatory !== last.mandatory || !!fields.immediate !== last.immediate) return false;
  return propertiesMatch(props, last.values, sameProperty);
}

// Whether a property encodes as it did when kept: the same value, or a table its snapshot matches.
function sameProperty(value, kept) {
  return value === kept || (kept instanceof TableSnapshot && kept.matches(value));
}

// What a table's encoding depends on: the same keys in the same order (its own, then those of
// its prototypes, as the encoder and for-in read them) with the same primitive values
// (Object.is: -0 and NaN encode differently). Any object that enumerates so encodes the same,
// so a publish's headers, a fresh object each time (lib/api_args.js), match the last ones'.
class TableSnapshot {
  static MAX_ENTRIES = 32;
  // How far up a table's prototypes may go: a publish's headers over the caller's, over
  // Object.prototype (or null), with a traced publish's copy between them (lib/tracing.js).
  static MAX_DEPTH = 3;

  // A snapshot of a table of primitive values made of plain objects, or null.
  static of(table) {
    if (!TableSnapshot.isPlain(table)) return null;
    const keys = [];
    const values = [];
    for (const key in table) {
      const value = table[key];
      if ((value !== null && typeof value === 'object') || typeof value === 'function') return null;
      if (keys.length === TableSnapshot.MAX_ENTRIES) return null;
      keys.push(key);
      values.push(value);
    }
    return new TableSnapshot(keys, values);
  }

  // Whether the table and its prototypes are plain objects, as tables usually are; any other
  // is left to the encoder.
  static isPlain(table) {
    let proto = Object.getPrototypeOf(table);
    for (let depth = 0; depth < TableSnapshot.MAX_DEPTH; depth++) {
      if (proto === Object.prototype || proto === null) return true;
      proto = Object.getPrototypeOf(proto);
    }
    return false;
  }

  constructor(keys, values) {
    this.keys = keys;
    this.values = values;
  }

  matches(table) {
    if (typeof table !== 'object' || table === null) return false;
    const { keys, values } = this;
    let i = 0;
    for (const key in table) {
      if (i === keys.length || key !== keys[i] || !Object.is(table[key], values[i])) return false;
      i++;
    }
    return i === keys.length;
  }
}

module.exports = { Outgoing, ChannelRefused };
