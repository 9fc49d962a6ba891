'use strict';
// A connection over a byte stream: the opening handshake and tuning, heartbeats, channel
// bookkeeping, the closing handshake and error handling, and the methods of channel 0, with
// the internal interface of amqplib's lib/connection.js (the compat suite drives it directly).
//
// Frames are parsed and encoded by the native session (core/src/connection.rs); two layers beneath
// this one carry them: lib/incoming.js turns each read into frames, lib/outgoing.js writes
// what is sent and reports backpressure.

const EventEmitter = require('node:events');
const { Duplex } = require('node:stream');
const { format: fmt } = require('node:util');
const native = require('./native');
const { NativeSocket } = require('./native_socket');
const { Incoming } = require('./incoming');
const { Outgoing, ChannelRefused } = require('./outgoing');
const { REFUSED_CHANNEL_CLOSING } = require('./boundary');
const defs = require('./defs');
const { BitSet } = require('./bitset');
const { Heart } = require('./heartbeat');
const { HEARTBEAT, PROTOCOL_HEADER } = require('./frame');
const { closeMessage, methodName, inspect } = require('./format');
const { IllegalOperationError, stackCapture } = require('./error');
const safeEmit = require('./safe_emit');
const tracing = require('./tracing');
const counters = require('./counters');

const { constants } = defs;

// The largest frame payload accepted from the server unless the user says otherwise
// (amqplib's maxFrameSize), or the negotiated frameMax if that is larger.
const DEFAULT_MAX_FRAME_SIZE = 64 * 1024 * 1024;

class Connection extends EventEmitter {
  constructor(underlying) {
    super();
    // A native socket parses as it reads and writes from the session; any other stream
    // hands us bytes and takes the session's output.
    this.native = underlying instanceof NativeSocket;
    this.stream = this.native ? underlying : wrapStream(underlying);
    this.session = this.native ? underlying.session : new native.NativeConnection();
    // The handle the per-message and per-read native calls take (src/bindings/hot.rs).
    const handle = this.native ? underlying.handle : this.session.handle();

    this._frameMax = constants.FRAME_MIN_SIZE;
    this._maxFrameSize = DEFAULT_MAX_FRAME_SIZE;

    this.expectSocketClose = false;
    this.closeWaiter = null;
    // When the last heartbeat frame came (ms since the epoch), for the counters.
    this.lastHeartbeatAt = null;
    // Set once fully closed (toClosed), for whoever took the connection after its 'close'.
    this.isClosed = false;
    this.blocked = false;
    this.freeChannels = new BitSet();
    this.channels = [{ channel: { accept: channel0(this) } }];

    this.incoming = new Incoming(this.stream, handle, this.native);
    this.outgoing = new Outgoing(this.stream, this.session, handle, this.channels, this.native, () => this.onWriteFailed());
    // Set by acceptLoop: reads every complete frame and hands each to `accept`.
    this.dispatchFrames = null;
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
          const least = leastFrameMaxOf(this.serverProperties);
          if (tuned.frameMax !== 0 && tuned.frameMax < least) {
            bail(new Error(fmt('frameMax %d is below %d, the least RabbitMQ %s accepts (it would drop the connection)',
              tuned.frameMax, least, this.serverProperties.version)));
            break;
          }
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
      this.stream.on('error', this.onStreamFailed.bind(this));
      this.stream.on('end', this.onStreamFailed.bind(this, new Error('Unexpected close')));
      this.on('frameError', this.onSocketError.bind(this));
      this.acceptLoop();
      counters.opened(this);
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

  // A write to the stream failed, the server having gone (the native socket looks after this
  // itself). What the server sent before it went, its connection.close say, is read and
  // handled before the stream's error, which follows on a later tick, is reported.
  onWriteFailed() {
    if (this.dispatchFrames && !this.expectSocketClose && this.incoming.keepLeftovers()) {
      process.nextTick(this.dispatchFrames);
    }
  }

  // The stream failed or ended: what it had received before comes first, so that a close in
  // it wins (onSocketError then finds the connection closed).
  onStreamFailed(err) {
    if (!this.expectSocketClose && this.incoming.takeLastWords()) this.dispatchFrames();
    this.onSocketError(err);
  }

  onSocketError(err) {
    // Registered for 'error', 'end' and frame errors: only the first counts.
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

  _closeChannels(capturedStack, cause) {
    for (let i = 1; i < this.channels.length; i++) {
      const record = this.channels[i];
      if (record) record.channel.toClosed(capturedStack, cause);
    }
  }

  // Its counters (lib/counters.js): frames, bytes, reads and writes, messages, confirms
  // outstanding, the write buffer, the last heartbeat.
  counters() {
    return counters.countersOf(this);
  }

  // Fully closed: nothing more is sent or accepted.
  toClosed(capturedStack, maybeErr) {
    this.isClosed = true;
    const closeWaiter = this.closeWaiter;
    this.closeWaiter = null;
    this.session.closeChannels();
    this._closeChannels(capturedStack, maybeErr);
    const info = fmt('Connection closed (%s)', maybeErr ? maybeErr.toString() : 'by client');
    // A channel's sends go on to the native core, which refuses them as the channel's own:
    // amqplib's closed channels say 'Channel closed'.
    invalidateSend(this, info, capturedStack, true);
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
    counters.closed(this); // after the last write
    if (tracing.connectionClose.hasSubscribers) tracing.connectionClose.publish({ connection: this, error: maybeErr });
    safeEmit(this, 'close', maybeErr);
    if (closeWaiter) closeWaiter(maybeErr || new Error('Connection closed before the server confirmed the close'));
  }

  _updateSecret(newSecret, reason, cb) {
    this.sendMethod(0, defs.ConnectionUpdateSecret, { newSecret, reason });
    this.once('update-secret-ok', cb);
  }

  startHeartbeater() {
    if (this.heartbeat === 0) return null;
    const heart = new Heart(this.heartbeat, () => this.outgoing.checkSend(), () => this.incoming.checkRecv());
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
  // its publishes report false, in place of the defaults of lib/outgoing.js; `waiting` and
  // `lastPublish` are kept there.
  freshChannel(channel, options) {
    const next = this.freeChannels.nextClearBit(1);
    if (next < 0 || next > this.channelMax) throw new Error('No channels left to allocate');
    this.freeChannels.set(next);
    this.channels[next] = { channel, highWaterMark: options?.highWaterMark || 0, waiting: 0, lastPublish: null };
    return next;
  }

  // A channel about to open on `number`: the native core keeps its state from here
  // (core/src/channels.rs), under the handle returned, which the channel sends with. A closed
  // connection gives channel 0's instead, whose sends it refuses with its own words, as
  // amqplib's refuses a channel made after its close.
  openChannel(number) {
    return this.isClosed ? 0 : this.session.openChannel(number);
  }

  // Whether our close of `channel` is on its way. The core hands on nothing of a channel read
  // after that close was written; what a read brought before it, and is still being dispatched,
  // is dropped here (see Incoming#channelClosedInRead).
  isClosing(channel) {
    return channel !== null && this.session.channelRefusal(channel.handle) === REFUSED_CHANNEL_CLOSING;
  }

  // A channel is sending its close (Channel#closeBecause).
  noteChannelClosing() {
    this.incoming.channelClosedInRead = true;
  }

  // Why nothing may be sent on the channel `handle` names now (a ChannelRefused), or null.
  channelRefusal(handle) {
    const refusal = this.session.channelRefusal(handle);
    return refusal === 0 ? null : new ChannelRefused(refusal);
  }

  // How many deliveries of the channel `handle` names wait for an ack, or null when the native
  // core's record cannot tell (after ackAll or a recover: core/src/unsettled.rs).
  unsettledDeliveries(handle) {
    const count = this.session.channelUnsettled(handle);
    return count < 0 ? null : count;
  }

  releaseChannel(channel) {
    this.freeChannels.clear(channel);
    this.channels[channel] = null;
  }

  // Dispatches every frame as reads arrive; frame errors close the connection.
  acceptLoop() {
    const incoming = this.incoming;
    const go = (this.dispatchFrames = () => {
      try {
        let frame = incoming.nextFrame(true);
        while (frame) {
          this.accept(frame);
          frame = incoming.nextFrame(true);
        }
        if (incoming.budgetSpent()) incoming.resumeNextTurn(go);
      } catch (e) {
        this.emit('frameError', e);
      }
      this.flush();
    });
    this.stream.on('readable', go);
    go();
  }

  // Calls back with the next frame, waiting for the stream if none has arrived.
  step(cb) {
    const recv = () => {
      let frame;
      try {
        frame = this.incoming.nextFrame();
      } catch (e) {
        cb(e, null);
        return;
      }
      if (frame) cb(null, frame);
      else this.stream.once('readable', recv);
    };
    recv();
  }

  // amqplib's own names for the layers' work, which its tests (and ours) call; channels send
  // through sendMethod and sendMessage, which closing replaces (see invalidateSend).

  // The next frame received, or false when none is complete.
  recvFrame() {
    return this.incoming.nextFrame();
  }

  // Writes what has been sent so far, now rather than at the end of the turn.
  flush() {
    this.outgoing.flush();
  }

  sendBytes(bytes) {
    this.outgoing.sendBytes(bytes);
  }

  sendHeartbeat() {
    this.outgoing.sendHeartbeat();
  }

  // These return false once the caller should wait for 'drain' before sending more.
  sendMethod(channel, method, fields) {
    return this.outgoing.sendMethod(channel, method, fields);
  }

  sendMessage(channel, method, fields, properties, props, content) {
    return this.outgoing.sendMessage(channel, method, fields, properties, props, content);
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

// RabbitMQ 4.1 and later take no frame_max below this in tune-ok (their frame size before
// login, made room for JWTs): they say nothing, wait 3 s and drop the socket, which the client
// would report as a reset.
const RABBITMQ_4_1_FRAME_MIN = 8192;

// The least frame size the server is known to accept, as its connection.start tells; 0 when
// none is known (a frameMax that no body fits then fails at the publish, as in amqplib).
function leastFrameMaxOf(serverProperties) {
  const { product, version } = serverProperties || {};
  const [major, minor] = String(version).split('.').map(Number);
  const from4_1 = major > 4 || (major === 4 && minor >= 1);
  return String(product) === 'RabbitMQ' && from4_1 ? RABBITMQ_4_1_FRAME_MIN : 0;
}

// 0 means "no limit": whichever side sets a limit wins, else the lower of the two.
function negotiate(server, desired) {
  if (server === 0 || desired === 0) return Math.max(server, desired);
  return Math.min(server, desired);
}

// Frame dispatch once open: to the channel the frame is for.
function mainAccept(frame) {
  const record = this.channels[frame.channel];
  if (record) {
    if (this.incoming.channelClosedInRead && this.isClosing(record.channel)) return;
    return record.channel.accept(frame);
  }
  this.closeWithError(
    fmt('Frame on unknown channel %d', frame.channel),
    constants.CHANNEL_ERROR,
    new Error(fmt('Frame on unknown channel: %s', inspect(frame, false))),
  );
}

// Channel 0 carries the connection's own methods.
function channel0(connection) {
  return (f) => {
    if (f === HEARTBEAT) {
      connection.lastHeartbeatAt = Date.now(); // already counted as activity
      return;
    }
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
        if (tracing.connectionBlocked.hasSubscribers) tracing.connectionBlocked.publish({ connection, reason: f.fields.reason });
        safeEmit(connection, 'blocked', f.fields.reason);
        break;
      case defs.ConnectionUnblocked:
        connection.blocked = false;
        if (tracing.connectionUnblocked.hasSubscribers) tracing.connectionUnblocked.publish({ connection });
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

// Refuses the connection's sends; with `channel0Only`, those on channel 0 only.
function invalidateSend(conn, msg, stack, channel0Only = false) {
  const refuse = invalidOp(msg, stack);
  if (!channel0Only) {
    conn.sendMethod = conn.sendMessage = refuse;
    return;
  }
  const outgoing = conn.outgoing;
  conn.sendMethod = (channel, ...rest) => (channel === 0 ? refuse() : outgoing.sendMethod(channel, ...rest));
  conn.sendMessage = (channel, ...rest) => (channel === 0 ? refuse() : outgoing.sendMessage(channel, ...rest));
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
