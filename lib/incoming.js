// @ts-check: its call of the native entry point is checked against lib/native.d.ts (see
// tsconfig.lib.json).
'use strict';
// Frames in: what the native side hands over for one read, the event tape of core/src/tape.rs,
// becomes frames in amqplib's shapes, each decoded when the connection takes it (so a frame
// is garbage as soon as it has been dispatched, not kept alive with the rest of its read).
//
// A native socket parses as it reads and hands over each read's tape itself; any other stream
// hands over bytes, which the session parses here.

const fs = require('node:fs');
const native = require('./native');
const defs = require('./defs');
const { HEARTBEAT } = require('./frame');
const { TapeReader } = require('./tape');
const { coreErrorMessage } = require('./core_errors');
const {
  EVENT_CONNECTION_ERROR, EVENT_METHOD, EVENT_HEADER, EVENT_BODY, EVENT_POOLED_BODY, EVENT_MESSAGE, EVENT_CHANNEL_ERROR, EVENT_CHANNEL_CLOSED,
  EVENT_HEARTBEAT, EVENT_KIND, READ_BUDGET, TAPE_HELD, TAPE_END, EVENT_CHANNEL, EVENT_ID, EVENT_LENGTH, METHOD_ARGUMENTS, HEADER_BODY_SIZE, HEADER_PROPERTIES,
  MESSAGE_BODY_SIZE, MESSAGE_PROPERTIES, MESSAGE_ARGUMENTS, CHANNEL_ERROR_VIOLATION, CHANNEL_ERROR_METHOD, CHANNEL_ERROR_BODY_SIZE, CONNECTION_ERROR_ERROR, CONNECTION_ERROR_PARAMS, ERROR_PARAM_KINDS,
} = require('./boundary');

class Incoming {
  // `handle` is the one the per-read native call takes (src/bindings/hot.rs); `parsedAsRead`
  // says the stream is a native socket.
  /** @param {import('./native').Handle} handle */
  constructor(stream, handle, parsedAsRead) {
    this.stream = stream;
    this.handle = handle;
    this.parsedAsRead = parsedAsRead;
    this.reader = new TapeReader();
    // The tape being read (EMPTY_TAPE once read to its end), and the slot of its next event to
    // decode; its events end at tape[TAPE_END].
    this.tape = EMPTY_TAPE;
    this.next = 0;
    // The last tape the native side handed over for a stream chunk, given back with the next
    // one to be written again once released (the native socket keeps its own). Like the
    // socket's, it is as long as the longest read has needed, and kept while the connection is.
    this.spare = undefined;
    // The one frame object the connection's dispatch is given for every whole message (see
    // nextFrame).
    this.dispatched = messageFrame();
    this.readSinceLastCheck = false;
    this.bytesReadAtLastCheck = 0;
    // What keepLeftovers read from a failing stream's descriptor, taken after the stream's own.
    this.leftovers = null;
    // For the counters (lib/counters.js): a stream's chunks, and deliveries and gets' messages.
    this.reads = 0;
    this.delivered = 0;
    // A stream's bytes taken since the event loop last had a turn (see budgetSpent).
    this.takenSinceYield = 0;
    this.resumePending = false;
    // Set once the stream has failed: its last bytes are then read whatever the budget.
    this.streamFailed = false;
    // Set when a channel sends its close while this read's frames are dispatched: the rest of
    // them are then checked against the core's state of their channel (Connection#isClosing).
    this.channelClosedInRead = false;
  }

  // Whether a stream (not the native socket, whose driver keeps its own budget) has given
  // READ_BUDGET bytes since the event loop last had a turn. libuv on Windows reads a socket
  // again for as long as each read fills its buffer, and Node starts the reading again as
  // soon as the stream is drained: with a peer that sends faster than the frames are
  // dispatched, that loop would never end, and timers would starve. Leaving the rest in the
  // stream (whose full buffer stops libuv's reading) until the next turn ends it.
  budgetSpent() {
    return !this.parsedAsRead && !this.streamFailed && this.takenSinceYield >= READ_BUDGET;
  }

  // Calls `dispatch` on the next turn of the event loop, the budget renewed.
  resumeNextTurn(dispatch) {
    if (this.resumePending) return;
    this.resumePending = true;
    setImmediate(() => {
      this.resumePending = false;
      this.takenSinceYield = 0;
      dispatch();
    });
  }

  // The stream has failed while what it had received waits to be read (the read budget spent,
  // or its error reported before its data): that is the server's last words, to be taken now
  // and whole, whatever the budget (it holds no more than it has). Lifts the budget for the
  // rest of the stream's life and says whether there is anything to take.
  takeLastWords() {
    if (this.parsedAsRead || this.streamFailed || this.stream.readableLength === 0) return false;
    this.streamFailed = true;
    return true;
  }

  // A write to the stream has just failed (the server has gone): Node will close the socket on
  // the next tick, dropping what the kernel still holds for it, which may be the server's last
  // words (the connection.close it sent just before resetting the connection). Reads that now,
  // straight from the descriptor, to be taken as the stream's last data. Only a plain TCP
  // socket on a platform with descriptors can: a TLS socket's bytes would need decrypting, and
  // Windows sockets have none. True when something was read.
  keepLeftovers() {
    const fd = this.stream.encrypted ? -1 : this.stream._handle?.fd;
    if (!Number.isInteger(fd) || fd < 0) return false;
    const chunks = [];
    for (;;) {
      const chunk = Buffer.allocUnsafe(64 * 1024);
      let n = 0;
      try {
        n = fs.readSync(fd, chunk, 0, chunk.length, null);
      } catch {
        break; // EAGAIN: nothing more; any other error: the socket has no more to give
      }
      if (n === 0) break;
      chunks.push(chunk.subarray(0, n));
    }
    if (chunks.length === 0) return false;
    this.leftovers = Buffer.concat([...(this.leftovers ? [this.leftovers] : []), ...chunks]);
    return true;
  }

  takeLeftovers() {
    const leftovers = this.leftovers;
    this.leftovers = null;
    return leftovers;
  }

  // The next decoded frame, reading from the stream as needed; false when none is complete.
  // A frame error is thrown when its turn comes. With `forDispatch`, a whole message comes in
  // one frame object refilled each time: the connection's dispatch (Connection#acceptLoop)
  // is done with a frame when accept returns (Channel#handOver keeps a message object of its
  // own), so it need not make one per message.
  // When dispatching, a stream that has given its budget gives nothing more this turn.
  nextFrame(forDispatch = false) {
    while (this.next >= this.tape[TAPE_END]) {
      this.releaseTape();
      if (forDispatch && this.budgetSpent()) return false;
      const input = this.stream.read() ?? this.takeLeftovers();
      if (input === null) return false;
      this.readSinceLastCheck = true;
      this.reads++;
      if (this.parsedAsRead) {
        this.loadTape(input, this.stream.objects, this.stream.slab);
      } else {
        this.takenSinceYield += input.length;
        const received = native.receive(this.handle, input, this.spare);
        this.spare = received[0];
        this.loadTape(received[0], received[1], received[2]);
      }
    }
    const i = this.next;
    this.next += this.tape[i + EVENT_LENGTH];
    const frame = this.decode(this.tape, i, forDispatch);
    if (frame instanceof Error) throw frame;
    return frame;
  }

  loadTape(tape, objects, slab) {
    this.channelClosedInRead = false;
    this.tape = tape;
    this.next = this.reader.load(tape, objects, slab);
  }

  // Every event of the tape has been decoded (frames keep nothing of it): the native side may
  // write a later read into it. Only this once: the tape is let go of, since it may be written
  // again straight away.
  releaseTape() {
    this.tape[TAPE_HELD] = 0;
    this.tape = EMPTY_TAPE;
  }

  // Whether anything arrived since the last check, for the heartbeat. Any byte counts, not
  // only whole frames: a large body frame can take longer than two heartbeat intervals on a
  // slow link. A native socket parses as it reads, so it is asked how much it has read; a
  // stream's chunks are counted by nextFrame.
  checkRecv() {
    let received = this.readSinceLastCheck;
    this.readSinceLastCheck = false;
    if (this.parsedAsRead) {
      const bytesRead = this.stream.bytesRead;
      if (bytesRead !== this.bytesReadAtLastCheck) received = true;
      this.bytesReadAtLastCheck = bytesRead;
    }
    return received;
  }

  // The frame of the event at slot i of tape t (a connection error as an Error).
  decode(t, i, forDispatch) {
    const reader = this.reader;
    const channel = t[i + EVENT_CHANNEL];
    const id = t[i + EVENT_ID];
    switch (t[i + EVENT_KIND]) {
      case EVENT_METHOD:
        return { id, channel, fields: reader.methodFields(id, t, i + METHOD_ARGUMENTS) };
      // A whole delivery, return or get-ok: the core has checked its frames' order and sizes.
      case EVENT_MESSAGE: {
        if (id !== defs.BasicReturn) this.delivered++;
        const f = forDispatch ? this.dispatched : messageFrame();
        f.id = id;
        f.channel = channel;
        f.fields = reader.methodFields(id, t, i + MESSAGE_ARGUMENTS);
        f.size = t[i + MESSAGE_BODY_SIZE];
        f.properties = reader.properties(defs.BasicProperties, t, i + t[i + MESSAGE_PROPERTIES]);
        f.content = reader.messageContent(t, i);
        return f;
      }
      // Content frames out of turn: the channel is to close with this error.
      case EVENT_CHANNEL_ERROR:
        return new ChannelViolation(channel, id, t[i + CHANNEL_ERROR_VIOLATION], t[i + CHANNEL_ERROR_METHOD], t[i + CHANNEL_ERROR_BODY_SIZE]);
      case EVENT_CHANNEL_CLOSED:
        return new ChannelClosed(channel);
      case EVENT_HEADER:
        return { id, channel, size: t[i + HEADER_BODY_SIZE], fields: reader.properties(id, t, i + HEADER_PROPERTIES) };
      case EVENT_POOLED_BODY:
      case EVENT_BODY:
        return { channel, content: reader.content(t, i) };
      case EVENT_HEARTBEAT:
        return HEARTBEAT;
      case EVENT_CONNECTION_ERROR:
        return connectionError(reader, t, i, id);
      default:
        throw new Error(`amqplib-rs: unknown event kind ${t[i + EVENT_KIND]} on the tape`);
    }
  }
}

// The stream can no longer be trusted: the core's error at slot `i`, worded with its
// parameters, with `code` its reply code. A function of its own: a closure in the event
// switch would cost every event a context allocation.
function connectionError(reader, t, i, code) {
  const error = t[i + CONNECTION_ERROR_ERROR];
  const params = ERROR_PARAM_KINDS[error].map((kind, n) => {
    const slot = t[i + CONNECTION_ERROR_PARAMS + n];
    return kind === 'text' ? reader.obj(slot) : slot;
  });
  const err = /** @type {Error & { code?: number }} */ (new Error(coreErrorMessage(error, params)));
  err.code = code;
  return err;
}

// A channel error the core found (a content rule broken, core/src/content.rs): not a frame, so
// that no frame's id need stand for it; the channel it names closes with it. `kind` is which
// rule (lib/boundary.js's VIOLATION_*), worded with its parameters by lib/format.js; `code` is
// the reply code; `blamed` the method or properties class at fault, 0 for a body frame.
class ChannelViolation {
  constructor(channel, code, kind, blamed, bodySize) {
    this.channel = channel;
    this.code = code;
    this.kind = kind;
    this.blamed = blamed;
    this.bodySize = bodySize;
  }
}

// Our close of a channel is confirmed (its close-ok): the core has ended the channel
// (core/src/channels.rs). Not a frame: a close-ok the core hands on as a frame is the reply to
// something else, which the channel refuses as amqplib's does.
class ChannelClosed {
  constructor(channel) {
    this.channel = channel;
  }
}

// Before the first read, and once a read's tape is released: no events (its end is 0).
const EMPTY_TAPE = new Float64Array(TAPE_END + 1);

// A frame for a whole message, filled in by decode (one shape for all of them).
function messageFrame() {
  return { id: 0, channel: 0, fields: null, size: 0, properties: null, content: null };
}

module.exports = { Incoming, ChannelViolation, ChannelClosed };
