'use strict';
// A connection over a byte stream: the opening handshake, channel bookkeeping, heartbeats,
// the closing handshake and error handling, with the internal interface of amqplib's
// lib/connection.js (the compat suite drives it directly).
//
// Frames are parsed and encoded by the native session (src/connection.rs). Incoming bytes
// are handed over a read at a time; outgoing frames gather in the session's one output
// buffer and leave in one write per turn of the event loop (a microtask), or as soon as the
// handlers of a read have run, so a reply leaves before the read that caused it returns.

const EventEmitter = require('node:events');
const { Duplex } = require('node:stream');
const { format: fmt } = require('node:util');
const native = require('./native');
const { NativeSocket } = require('./native_socket');
const defs = require('./defs');
const { BitSet } = require('./bitset');
const { Heart } = require('./heartbeat');
const { HEARTBEAT, PROTOCOL_HEADER } = require('./frame');
const { closeMessage, methodName, inspect } = require('./format');
const { IllegalOperationError, stackCapture } = require('./error');
const { TapeReader, EVENT_ERROR, EVENT_METHOD, EVENT_HEADER, EVENT_BODY, EVENT_POOLED_BODY, EVENT_HEARTBEAT } = require('./tape');
const safeEmit = require('./safe_emit');

const { constants } = defs;
const presence = require('./spec').propertyPresence[defs.BasicProperties];
const PROPERTY_NAMES = defs.info(defs.BasicProperties).args.map((arg) => arg.name);

// The largest frame payload accepted from the server unless the user says otherwise
// (amqplib's maxFrameSize), or the negotiated frameMax if that is larger.
const DEFAULT_MAX_FRAME_SIZE = 64 * 1024 * 1024;

// publish and sendToQueue report false once this much is waiting to be written...
const WRITE_LIMIT = 4 * 1024 * 1024;
// ...or once a channel has more messages than this waiting, as amqplib's channels do (its
// default highWaterMark): a loop that publishes until false then stops as soon as there.
const DEFAULT_HIGH_WATER_MARK = 1024;

class Connection extends EventEmitter {
  constructor(underlying) {
    super();
    // A native socket parses as it reads and writes from the session; any other stream
    // hands us bytes and takes the session's output.
    this.native = underlying instanceof NativeSocket;
    this.stream = this.native ? underlying : wrapStream(underlying);
    this.session = this.native ? underlying.session : new native.Session();
    // The handle the per-message and per-read calls take (src/bindings/hot.rs).
    this.hot = this.native ? underlying.hot : this.session.hotHandle();
    this.reader = new TapeReader();
    // Frames decoded and not yet taken by recvFrame.
    this.incoming = [];
    this.incomingAt = 0;

    this._frameMax = constants.FRAME_MIN_SIZE;
    this._maxFrameSize = DEFAULT_MAX_FRAME_SIZE;
    this.sentSinceLastCheck = false;
    this.recvSinceLastCheck = false;
    this.bytesReadAtLastCheck = 0;

    this.expectSocketClose = false;
    this.closeWaiter = null;
    this.blocked = false;
    this.freeChannels = new BitSet();
    this.channels = [{ channel: { accept: channel0(this) } }];

    this.flushScheduled = false;
    this.writeStalled = false;
    this.drainOwed = false;
    this.flush = this.flush.bind(this);
    this.onStreamDrain = this.onStreamDrain.bind(this);
  }

  // Setting frameMax (tuning does, and so do tests) tells the native session too.
  get frameMax() {
    return this._frameMax;
  }

  set frameMax(value) {
    this._frameMax = value;
    this.session.setFrameMax(value);
  }

  // Frames from the server larger than this are refused from their header alone; 0 is no
  // limit.
  get maxFrameSize() {
    return this._maxFrameSize;
  }

  set maxFrameSize(value) {
    this._maxFrameSize = value;
    this.session.setMaxFrameSize(value);
  }

  // Written at once, not at the end of the turn: a peer may read it synchronously.
  sendProtocolHeader() {
    this.sendBytes(Buffer.from(PROTOCOL_HEADER, 'latin1'));
    this.flush();
  }

  // The opening handshake (spec 2.2.4): header; start/start-ok; tune/tune-ok; open/open-ok.
  open(allFields, openCallback0) {
    const openCallback = openCallback0 || (() => {});
    const tuned = Object.create(allFields);
    const bail = (err) => openCallback(err);

    const maxFrameSize = allFields.maxFrameSize;
    const maxFrameSizeDefaulted = maxFrameSize == null;
    if (maxFrameSizeDefaulted) {
      this.maxFrameSize = DEFAULT_MAX_FRAME_SIZE;
    } else if (!Number.isInteger(maxFrameSize) || (maxFrameSize !== 0 && maxFrameSize < constants.FRAME_MIN_SIZE)) {
      bail(new TypeError(fmt('maxFrameSize must be 0 (no limit) or an integer of at least %d; got %s', constants.FRAME_MIN_SIZE, maxFrameSize)));
      return;
    } else {
      this.maxFrameSize = maxFrameSize;
    }

    const next = (k) => {
      this.step((err, frame) => {
        if (err !== null) bail(err);
        else if (frame.channel !== 0) bail(new Error(fmt('Frame on channel != 0 during handshake: %s', inspect(frame, false))));
        else k(frame);
      });
    };
    const expect = (method, k) =>
      next((frame) => {
        if (frame.id === method) k(frame);
        else bail(new Error(fmt('Expected %s; got %s', methodName(method), inspect(frame, false))));
      });
    // Sending can throw on bad options (a string where a number goes, say).
    const trySend = (...methods) => {
      try {
        for (const method of methods) this.sendMethod(0, method, tuned);
        return true;
      } catch (err) {
        bail(err);
        return false;
      }
    };

    const onStart = (start) => {
      const mechanisms = start.fields.mechanisms.toString().split(' ');
      if (!mechanisms.includes(allFields.mechanism)) {
        bail(new Error(fmt('SASL mechanism %s is not provided by the server', allFields.mechanism)));
        return;
      }
      this.serverProperties = start.fields.serverProperties;
      if (trySend(defs.ConnectionStartOk)) next(afterStartOk);
    };

    const afterStartOk = (reply) => {
      switch (reply.id) {
        case defs.ConnectionSecure:
          bail(new Error("Wasn't expecting to have to go through secure"));
          break;
        case defs.ConnectionClose:
          bail(new Error(fmt('Handshake terminated by server: %s', closeMessage(reply))));
          break;
        case defs.ConnectionTune:
          // The spec allows 0 or at least frame-min-size (GHSA-37f9-7m79-6866).
          if (reply.fields.frameMax !== 0 && reply.fields.frameMax < constants.FRAME_MIN_SIZE) {
            bail(new Error(fmt('Server frameMax %d is below the protocol minimum %d', reply.fields.frameMax, constants.FRAME_MIN_SIZE)));
            break;
          }
          tune(tuned, reply.fields, allFields);
          if (trySend(defs.ConnectionTuneOk, defs.ConnectionOpen)) expect(defs.ConnectionOpenOk, onOpenOk);
          break;
        default:
          bail(new Error(fmt('Expected connection.secure, connection.close, or connection.tune during handshake; got %s', inspect(reply, false))));
      }
    };

    const onOpenOk = (openOk) => {
      // Zero means "no limit": take the largest value the field can carry.
      this.channelMax = tuned.channelMax || 0xffff;
      this.frameMax = tuned.frameMax || 0xffffffff;
      if (maxFrameSizeDefaulted && tuned.frameMax !== 0 && tuned.frameMax > this.maxFrameSize) {
        this.maxFrameSize = tuned.frameMax;
      }
      this.heartbeat = tuned.heartbeat;
      this.heartbeater = this.startHeartbeater();
      this.accept = mainAccept;
      this.stream.removeListener('end', endWhileOpening);
      this.stream.removeListener('error', endWhileOpening);
      this.stream.on('error', this.onSocketError.bind(this));
      this.stream.on('end', this.onSocketError.bind(this, new Error('Unexpected close')));
      this.on('frameError', this.onSocketError.bind(this));
      this.acceptLoop();
      openCallback(null, openOk);
    };

    const endWhileOpening = (err) => bail(err || new Error('Socket closed abruptly during opening handshake'));
    this.stream.on('end', endWhileOpening);
    this.stream.on('error', endWhileOpening);

    this.sendProtocolHeader();
    expect(defs.ConnectionStart, onStart);
  }

  close(closeCallback) {
    const k = closeCallback && ((err) => closeCallback(err || null));
    this.closeBecause('Cheers, thanks', constants.REPLY_SUCCESS, k);
  }

  closeBecause(reason, code, k) {
    this.sendMethod(0, defs.ConnectionClose, { replyText: reason, replyCode: code, methodId: 0, classId: 0 });
    this.toClosing(stackCapture(`closeBecause called: ${reason}`), k);
  }

  closeWithError(reason, code, error) {
    safeEmit(this, 'error', error);
    this.closeBecause(reason, code);
  }

  onSocketError(err) {
    // Registered for both 'error' and 'end': only the first counts.
    if (this.expectSocketClose) return;
    this.expectSocketClose = true;
    safeEmit(this, 'error', err);
    this.toClosed(stackCapture('Socket error'), err);
  }

  // We sent Close: only CloseOk (or a Close crossing ours) matters now.
  // If the connection ends before CloseOk (the heartbeat finds the peer gone, the socket
  // fails), `k` gets that error: a close on a stalled link settles (amqplib's waits forever).
  toClosing(capturedStack, k) {
    if (this.blocked) {
      // A blocked server reads nothing, so it will never answer: close at once.
      if (k) k();
      this.toClosed(stackCapture('Connection blocked: closing immediately'), undefined);
      return;
    }
    const sendMethod = this.sendMethod.bind(this);
    this.closeWaiter = k || null;
    this.accept = function (f) {
      if (f.id === defs.ConnectionCloseOk) {
        this.closeWaiter = null;
        if (k) k();
        this.toClosed(stackCapture('ConnectionCloseOk received'), undefined);
      } else if (f.id === defs.ConnectionClose) {
        sendMethod(0, defs.ConnectionCloseOk, {});
      }
    };
    invalidateSend(this, 'Connection closing', capturedStack);
  }

  _closeChannels(capturedStack) {
    for (let i = 1; i < this.channels.length; i++) {
      const record = this.channels[i];
      if (record) record.channel.toClosed(capturedStack);
    }
  }

  // Fully closed: nothing more is sent or accepted.
  toClosed(capturedStack, maybeErr) {
    const closeWaiter = this.closeWaiter;
    this.closeWaiter = null;
    this._closeChannels(capturedStack);
    const info = fmt('Connection closed (%s)', maybeErr ? maybeErr.toString() : 'by client');
    invalidateSend(this, info, capturedStack);
    this.accept = invalidOp(info, capturedStack);
    this.close = (cb) => {
      if (cb) cb(new IllegalOperationError(info, capturedStack));
    };
    if (this.heartbeater) this.heartbeater.clear();
    this.expectSocketClose = true;
    this.flush();
    this.stream.end();
    // A stream has taken its copy of the output; a native socket releases the session itself
    // once what it still has to write is written.
    if (!this.native) this.session.release();
    safeEmit(this, 'close', maybeErr);
    if (closeWaiter) closeWaiter(maybeErr || new Error('Connection closed before the server confirmed the close'));
  }

  _updateSecret(newSecret, reason, cb) {
    this.sendMethod(0, defs.ConnectionUpdateSecret, { newSecret, reason });
    this.once('update-secret-ok', cb);
  }

  startHeartbeater() {
    if (this.heartbeat === 0) return null;
    const heart = new Heart(this.heartbeat, this.checkSend.bind(this), this.checkRecv.bind(this));
    heart.on('timeout', () => {
      const err = new Error('Heartbeat timeout');
      safeEmit(this, 'error', err);
      this.toClosed(stackCapture('Heartbeat timeout'), err);
    });
    heart.on('beat', () => this.sendHeartbeat());
    return heart;
  }

  // Channel numbers are allocated lowest-first so the array stays dense. A channel's
  // highWaterMark option (a number of messages) lets that many wait to be written before
  // its publishes report false, where the default is DEFAULT_HIGH_WATER_MARK messages or
  // WRITE_LIMIT bytes in all, whichever comes first.
  freshChannel(channel, options) {
    const next = this.freeChannels.nextClearBit(1);
    if (next < 0 || next > this.channelMax) throw new Error('No channels left to allocate');
    this.freeChannels.set(next);
    this.channels[next] = { channel, highWaterMark: options?.highWaterMark || 0, waiting: 0, lastPublish: null };
    return next;
  }

  releaseChannel(channel) {
    this.freeChannels.clear(channel);
    this.channels[channel] = null;
  }

  // Dispatches every frame as reads arrive; frame errors close the connection.
  acceptLoop() {
    const go = () => {
      try {
        let frame = this.recvFrame();
        while (frame) {
          this.accept(frame);
          frame = this.recvFrame();
        }
      } catch (e) {
        this.emit('frameError', e);
      }
      this.flush();
    };
    this.stream.on('readable', go);
    go();
  }

  // Calls back with the next frame, waiting for the stream if none has arrived.
  step(cb) {
    const recv = () => {
      let frame;
      try {
        frame = this.recvFrame();
      } catch (e) {
        cb(e, null);
        return;
      }
      if (frame) cb(null, frame);
      else this.stream.once('readable', recv);
    };
    recv();
  }

  checkSend() {
    const sent = this.sentSinceLastCheck;
    this.sentSinceLastCheck = false;
    return sent;
  }

  // Any byte that arrived counts, not only whole frames: a large body frame can take longer
  // than two heartbeat intervals on a slow link. A native socket parses as it reads, so it
  // is asked how much it has read; a stream's chunks are counted by recvFrame.
  checkRecv() {
    let received = this.recvSinceLastCheck;
    this.recvSinceLastCheck = false;
    if (this.native) {
      const bytesRead = this.stream.bytesRead;
      if (bytesRead !== this.bytesReadAtLastCheck) received = true;
      this.bytesReadAtLastCheck = bytesRead;
    }
    return received;
  }

  // The next decoded frame, reading from the stream as needed; false when none is complete.
  recvFrame() {
    while (this.incomingAt === this.incoming.length) {
      const input = this.stream.read();
      if (input === null) return false;
      this.recvSinceLastCheck = true;
      this.incoming.length = 0;
      this.incomingAt = 0;
      this.decode(this.native ? input : native.receive(this.hot, input));
    }
    const frame = this.incoming[this.incomingAt];
    this.incoming[this.incomingAt++] = undefined;
    if (frame instanceof Error) throw frame;
    return frame;
  }

  // Turns the events of one read into frames, amqplib's shapes.
  decode(pair) {
    const reader = this.reader;
    const t = pair[0];
    let i = reader.load(pair);
    while (i < t.length) {
      const kind = t[i];
      const channel = t[i + 1];
      const id = t[i + 2];
      const at = i + 4;
      switch (kind) {
        case EVENT_METHOD: {
          const next = id === defs.BasicDeliver || id === defs.BasicReturn ? this.decodeWholeMessage(t, i, channel, id) : -1;
          if (next > 0) {
            i = next;
            continue;
          }
          this.incoming.push({ id, channel, fields: reader.methodFields(id, t, at) });
          break;
        }
        case EVENT_HEADER:
          this.incoming.push({ id, channel, size: t[at], fields: reader.properties(id, t, at + 1) });
          break;
        case EVENT_POOLED_BODY:
        case EVENT_BODY:
          this.incoming.push({ channel, content: reader.content(t, i) });
          break;
        case EVENT_HEARTBEAT:
          this.incoming.push(HEARTBEAT);
          break;
        case EVENT_ERROR: {
          const err = new Error(reader.obj(t[at]));
          err.code = id;
          this.incoming.push(err);
          break;
        }
      }
      i += t[i + 3];
    }
  }

  // A delivery or return whose header and body follow it in the same read, on its channel,
  // becomes one frame carrying all three (fields, size, properties, content), which the
  // channel takes in one step (see Channel#accept). Returns the tape index after the body,
  // or -1 when the message is not whole here.
  decodeWholeMessage(t, i, channel, id) {
    const header = i + t[i + 3];
    // (A header declaring no body completes the message itself: what follows is not its body.)
    if (header >= t.length || t[header] !== EVENT_HEADER || t[header + 1] !== channel || t[header + 4] === 0) return -1;
    const body = header + t[header + 3];
    if (body >= t.length || t[body + 1] !== channel) return -1;
    const kind = t[body];
    if (kind !== EVENT_POOLED_BODY && kind !== EVENT_BODY) return -1;
    const reader = this.reader;
    this.incoming.push({
      id,
      channel,
      fields: reader.methodFields(id, t, i + 4),
      size: t[header + 4],
      properties: reader.properties(t[header + 2], t, header + 5),
      content: reader.content(t, body),
    });
    return body + t[body + 3];
  }

  // ---------------------------------------------------------------- sending

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
      queueMicrotask(this.flush);
    }
  }

  // Writes everything encoded so far, in one write, unless the stream asked us to wait.
  flush() {
    this.flushScheduled = false;
    if (this.writeStalled) return;
    if (this.native ? this.stream.flushOutput() : this.writeOutput()) {
      this.forgetWaiting();
      this.releaseDrain();
    } else {
      this.writeStalled = true;
      this.stream.once('drain', this.onStreamDrain);
    }
  }

  // Hands the session's output to the stream; false when the stream asks us to wait.
  writeOutput() {
    const out = native.takeOutput(this.hot);
    return out === null || this.stream.write(out);
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

  sendMethod(channel, method, fields) {
    const flags = acknowledgementFlags(method, fields);
    const pending = flags < 0
      ? this.session.sendMethod(channel, method, fields)
      : native.sendAcknowledgement(this.hot, channel, method, fields.deliveryTag, flags);
    this.scheduleFlush();
    return this.writable(undefined, pending);
  }

  sendMessage(channel, method, fields, properties, props, content) {
    if (!Buffer.isBuffer(content)) throw new TypeError('content is not a buffer');
    let pending;
    const record = this.channels[channel];
    if (method === defs.BasicPublish && properties === defs.BasicProperties && (fields.ticket === undefined || fields.ticket === 0)) {
      // The hot path: the same arguments as the channel's last publish send its frames again;
      // otherwise the arguments go one by one, and only the properties that are there.
      pending = record && samePublish(record.lastPublish, fields, props) ? native.sendPublishAgain(this.hot, channel, content) : -1;
      if (pending < 0) {
        const present = presence(props);
        pending = native.sendPublish(this.hot, channel, fields.exchange, fields.routingKey, !!fields.mandatory, !!fields.immediate, props, present, content);
        if (record) record.lastPublish = publishSnapshot(fields, props);
      }
    } else {
      pending = this.session.sendMessage(channel, method, fields, properties, props, content);
    }
    this.scheduleFlush();
    if (record) record.waiting++;
    return this.writable(record, pending);
  }
}

// basic.ack, nack and reject go out once per message consumed: with a safe-integer tag and
// boolean flags (as the channel APIs make them), their flags are packed here, bit by bit in
// the order of their arguments, and the native side needs no fields object. -1 otherwise:
// the general encoder then reads the fields and reports what is wrong with them.
function acknowledgementFlags(method, fields) {
  if (method !== defs.BasicAck && method !== defs.BasicNack && method !== defs.BasicReject) return -1;
  const tag = fields.deliveryTag;
  if (!Number.isSafeInteger(tag) || tag < 0) return -1;
  const { multiple, requeue } = fields;
  switch (method) {
    case defs.BasicAck:
      return typeof multiple === 'boolean' ? +multiple : -1;
    case defs.BasicNack:
      return typeof multiple === 'boolean' && typeof requeue === 'boolean' ? multiple | (requeue << 1) : -1;
    default:
      return typeof requeue === 'boolean' ? +requeue : -1;
  }
}

// A publish's arguments, kept so the next publish can be checked against them; null when they
// hold an object whose encoding cannot be checked cheaply (only tables of primitive values
// can, such as a headers object reused from publish to publish).
function publishSnapshot(fields, props) {
  const values = new Array(PROPERTY_NAMES.length);
  for (let i = 0; i < PROPERTY_NAMES.length; i++) {
    const value = props[PROPERTY_NAMES[i]];
    values[i] = value !== null && typeof value === 'object' ? TableSnapshot.of(value) : value;
    if (values[i] === null && value !== null) return null;
  }
  return { exchange: fields.exchange, routingKey: fields.routingKey, mandatory: !!fields.mandatory, immediate: !!fields.immediate, values };
}

function samePublish(last, fields, props) {
  if (last === null || last === undefined) return false;
  if (fields.exchange !== last.exchange || fields.routingKey !== last.routingKey) return false;
  if (!!fields.mandatory !== last.mandatory || !!fields.immediate !== last.immediate) return false;
  const values = last.values;
  for (let i = 0; i < PROPERTY_NAMES.length; i++) {
    const value = props[PROPERTY_NAMES[i]];
    const was = values[i];
    if (value !== was && !(was instanceof TableSnapshot && was.matches(value))) return false;
  }
  return true;
}

// What a table's encoding depends on: the same object, with the same keys in the same order
// and the same primitive values (Object.is: -0 and NaN encode differently). Its entries are
// read again at each check, so a table changed in between is noticed.
class TableSnapshot {
  static MAX_ENTRIES = 32;

  // A snapshot of a plain object of primitive values, or null.
  static of(table) {
    const proto = Object.getPrototypeOf(table);
    if (proto !== Object.prototype && proto !== null) return null;
    const keys = [];
    const values = [];
    for (const key in table) {
      const value = table[key];
      if ((value !== null && typeof value === 'object') || typeof value === 'function') return null;
      if (keys.length === TableSnapshot.MAX_ENTRIES) return null;
      keys.push(key);
      values.push(value);
    }
    return new TableSnapshot(table, keys, values);
  }

  constructor(table, keys, values) {
    this.table = table;
    this.keys = keys;
    this.values = values;
  }

  matches(table) {
    if (table !== this.table) return false;
    const { keys, values } = this;
    let i = 0;
    for (const key in table) {
      if (i === keys.length || key !== keys[i] || !Object.is(table[key], values[i])) return false;
      i++;
    }
    return i === keys.length;
  }
}

// Negotiates frameMax, channelMax and heartbeat from the server's tune and our wishes.
function tune(tuned, server, wanted) {
  tuned.frameMax = negotiate(server.frameMax, wanted.frameMax);
  tuned.channelMax = negotiate(server.channelMax, wanted.channelMax);
  if (wanted.heartbeat == null) tuned.heartbeat = server.heartbeat;
  else if (wanted.heartbeat === 0) tuned.heartbeat = 0;
  else tuned.heartbeat = negotiate(server.heartbeat, wanted.heartbeat);
}

// 0 means "no limit": whichever side sets a limit wins, else the lower of the two.
function negotiate(server, desired) {
  if (server === 0 || desired === 0) return Math.max(server, desired);
  return Math.min(server, desired);
}

// Frame dispatch once open: to the channel the frame is for.
function mainAccept(frame) {
  const record = this.channels[frame.channel];
  if (record) return record.channel.accept(frame);
  this.closeWithError(
    fmt('Frame on unknown channel %d', frame.channel),
    constants.CHANNEL_ERROR,
    new Error(fmt('Frame on unknown channel: %s', inspect(frame, false))),
  );
}

// Channel 0 carries the connection's own methods.
function channel0(connection) {
  return (f) => {
    if (f === HEARTBEAT) return; // already counted as activity
    switch (f.id) {
      case defs.ConnectionClose: {
        connection.sendMethod(0, defs.ConnectionCloseOk, {});
        const message = fmt('Connection closed: %s', closeMessage(f));
        const stack = stackCapture(message);
        const err = new Error(message);
        err.code = f.fields.replyCode;
        if (isFatalError(err)) safeEmit(connection, 'error', err);
        connection.toClosed(stack, err);
        break;
      }
      case defs.ConnectionBlocked:
        connection.blocked = true;
        safeEmit(connection, 'blocked', f.fields.reason);
        break;
      case defs.ConnectionUnblocked:
        connection.blocked = false;
        safeEmit(connection, 'unblocked');
        break;
      case defs.ConnectionUpdateSecretOk:
        safeEmit(connection, 'update-secret-ok');
        break;
      default:
        connection.closeWithError(
          'Unexpected frame on channel 0',
          constants.UNEXPECTED_FRAME,
          new Error(fmt('Unexpected frame on channel 0: %s', inspect(f, false))),
        );
    }
  };
}

function invalidOp(msg, stack) {
  return () => {
    throw new IllegalOperationError(msg, stack);
  };
}

function invalidateSend(conn, msg, stack) {
  conn.sendMethod = conn.sendMessage = invalidOp(msg, stack);
}

// Streams that are not Duplexes (old-style) get a Duplex around them.
function wrapStream(s) {
  if (s instanceof Duplex) return s;
  const ws = new Duplex();
  ws.wrap(s);
  ws._write = (chunk, encoding, callback) => s.write(chunk, encoding, callback);
  return ws;
}

// Closes with these codes are not errors: a forced close by an operator, or a clean one.
function isFatalError(error) {
  switch (error?.code) {
    case constants.CONNECTION_FORCED:
    case constants.REPLY_SUCCESS:
      return false;
    default:
      return true;
  }
}

module.exports = { Connection, isFatalError, DEFAULT_MAX_FRAME_SIZE };
