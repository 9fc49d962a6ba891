'use strict';
// Frames in: what the native side hands over for one read, the event tape of src/tape.rs,
// becomes frames in amqplib's shapes, queued until the connection takes them one by one.
//
// A native socket parses as it reads and hands over each read's tape itself; any other stream
// hands over bytes, which the session parses here.

const native = require('./native');
const defs = require('./defs');
const { HEARTBEAT } = require('./frame');
const { TapeReader } = require('./tape');
const {
  EVENT_CONNECTION_ERROR, EVENT_METHOD, EVENT_HEADER, EVENT_BODY, EVENT_POOLED_BODY, EVENT_HEARTBEAT,
  EVENT_KIND, EVENT_CHANNEL, EVENT_ID, EVENT_LENGTH, METHOD_ARGUMENTS, HEADER_BODY_SIZE, HEADER_PROPERTIES,
  CONNECTION_ERROR_TEXT,
} = require('./boundary');

class Incoming {
  // `handle` is the one the per-read native call takes (src/bindings/hot.rs); `parsedAsRead`
  // says the stream is a native socket.
  constructor(stream, handle, parsedAsRead) {
    this.stream = stream;
    this.handle = handle;
    this.parsedAsRead = parsedAsRead;
    this.reader = new TapeReader();
    // Frames decoded and not yet taken by nextFrame.
    this.frames = [];
    this.taken = 0;
    this.readSinceLastCheck = false;
    this.bytesReadAtLastCheck = 0;
  }

  // The next decoded frame, reading from the stream as needed; false when none is complete.
  // A frame error is thrown when its turn comes.
  nextFrame() {
    while (this.taken === this.frames.length) {
      const input = this.stream.read();
      if (input === null) return false;
      this.readSinceLastCheck = true;
      this.frames.length = 0;
      this.taken = 0;
      this.decode(this.parsedAsRead ? input : native.receive(this.handle, input));
    }
    const frame = this.frames[this.taken];
    this.frames[this.taken++] = undefined;
    if (frame instanceof Error) throw frame;
    return frame;
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

  // Turns the events of one read, `[tape, objects, slab]`, into frames.
  decode(received) {
    const reader = this.reader;
    const t = received[0];
    let i = reader.load(received);
    while (i < t.length) {
      const kind = t[i + EVENT_KIND];
      const channel = t[i + EVENT_CHANNEL];
      const id = t[i + EVENT_ID];
      switch (kind) {
        case EVENT_METHOD: {
          const next = id === defs.BasicDeliver || id === defs.BasicReturn ? this.decodeWholeMessage(t, i, channel, id) : -1;
          if (next > 0) {
            i = next;
            continue;
          }
          this.frames.push({ id, channel, fields: reader.methodFields(id, t, i + METHOD_ARGUMENTS) });
          break;
        }
        case EVENT_HEADER:
          this.frames.push({ id, channel, size: t[i + HEADER_BODY_SIZE], fields: reader.properties(id, t, i + HEADER_PROPERTIES) });
          break;
        case EVENT_POOLED_BODY:
        case EVENT_BODY:
          this.frames.push({ channel, content: reader.content(t, i) });
          break;
        case EVENT_HEARTBEAT:
          this.frames.push(HEARTBEAT);
          break;
        case EVENT_CONNECTION_ERROR: {
          const err = new Error(reader.obj(t[i + CONNECTION_ERROR_TEXT]));
          err.code = id;
          this.frames.push(err);
          break;
        }
      }
      i += t[i + EVENT_LENGTH];
    }
  }

  // A delivery or return whose header and body follow it in the same read, on its channel,
  // becomes one frame carrying all three (fields, size, properties, content), which the
  // channel takes in one step (see Channel#accept). Returns the tape index after the body,
  // or -1 when the message is not whole here.
  decodeWholeMessage(t, i, channel, id) {
    const header = i + t[i + EVENT_LENGTH];
    // (A header declaring no body completes the message itself: what follows is not its body.)
    if (header >= t.length || t[header + EVENT_KIND] !== EVENT_HEADER || t[header + EVENT_CHANNEL] !== channel || t[header + HEADER_BODY_SIZE] === 0) return -1;
    const body = header + t[header + EVENT_LENGTH];
    if (body >= t.length || t[body + EVENT_CHANNEL] !== channel) return -1;
    const kind = t[body + EVENT_KIND];
    if (kind !== EVENT_POOLED_BODY && kind !== EVENT_BODY) return -1;
    const reader = this.reader;
    this.frames.push({
      id,
      channel,
      fields: reader.methodFields(id, t, i + METHOD_ARGUMENTS),
      size: t[header + HEADER_BODY_SIZE],
      properties: reader.properties(t[header + EVENT_ID], t, header + HEADER_PROPERTIES),
      content: reader.content(t, body),
    });
    return body + t[body + EVENT_LENGTH];
  }
}

module.exports = { Incoming };
