'use strict';
// Reads the event tape the native core hands over for each read (see core/src/tape.rs): a
// Float64Array of slots and an array of objects (none: undefined), turned into frames by the generated
// readers of lib/spec.js. Interned strings arrive once and are kept here by id.

// Buffer from node:buffer: the global one is a getter, run at each use (once per message here).
const { Buffer } = require('node:buffer');
const { readers, propertyReaders } = require('./spec');

const {
  EVENT_KIND, EVENT_BODY, BODY_CONTENT, POOLED_BODY_OFFSET, POOLED_BODY_LENGTH, MESSAGE_CONTENT, MESSAGE_OFFSET, MESSAGE_LENGTH,
  TAPE_STRINGS_RESET, TAPE_NEW_STRINGS, TAPE_STRING_PAIRS,
} = require('./boundary');

const TAG = {
  b: 98, B: 66, s: 115, u: 117, I: 73, i: 105, l: 108, T: 84, d: 100, f: 102,
  t: 116, V: 86, D: 68, S: 83, x: 120, F: 70, A: 65,
};

class TapeReader {
  constructor() {
    this.strings = [];
    this.objects = null;
    // The read's content slab (see core/src/tape.rs): small bodies back to back, in an ArrayBuffer.
    this.slab = undefined;
    this.pos = 0;
    // Slots of the string-table header before the events: table positions count from here.
    this.base = 0;
  }

  // Takes what the native side handed over for one read (its objects undefined when there
  // are none); returns the index of the tape's first event. The tape's events end at
  // tape[TAPE_END].
  load(tape, objects, slab) {
    this.objects = objects;
    this.slab = slab;
    if (tape[TAPE_STRINGS_RESET] === 1) this.strings.length = 0;
    const fresh = tape[TAPE_NEW_STRINGS];
    let i = TAPE_STRING_PAIRS;
    for (let n = 0; n < fresh; n++, i += 2) this.strings[tape[i]] = objects[tape[i + 1]];
    this.base = i;
    return i;
  }

  str(slot) {
    return slot >= 0 ? this.strings[slot] : this.objects[-slot - 1];
  }

  obj(slot) {
    return this.objects[slot];
  }

  // The content of the body event at slot i: a Buffer of exactly its size, its own (EVENT_BODY)
  // or a view into the slab (EVENT_POOLED_BODY: offset, length).
  content(t, i) {
    if (t[i + EVENT_KIND] === EVENT_BODY) return this.objects[t[i + BODY_CONTENT]];
    return this.slabView(t[i + POOLED_BODY_OFFSET], t[i + POOLED_BODY_LENGTH]);
  }

  // The content of the message event at slot i: its own Buffer, a view into the slab, or an
  // empty Buffer for an empty body.
  messageContent(t, i) {
    const object = t[i + MESSAGE_CONTENT];
    if (object >= 0) return this.objects[object];
    const length = t[i + MESSAGE_LENGTH];
    return length === 0 ? Buffer.alloc(0) : this.slabView(t[i + MESSAGE_OFFSET], length);
  }

  slabView(offset, length) {
    return Buffer.from(this.slab, offset, length);
  }

  // A table argument: slot i holds the first slot of its entries (counted from the first
  // event), slot i + 1 their count.
  table(t, i) {
    this.pos = this.base + t[i];
    return this.entries(t, this.pos + t[i + 1]);
  }

  entries(t, end) {
    const table = {};
    while (this.pos < end) {
      const key = this.str(t[this.pos++]);
      table[key] = this.value(t);
    }
    return table;
  }

  value(t) {
    const tag = t[this.pos++];
    switch (tag) {
      case TAG.V:
        return null;
      case TAG.t:
        return t[this.pos++] !== 0;
      case TAG.S:
        return this.str(t[this.pos++]);
      case TAG.x:
        return this.obj(t[this.pos++]);
      case TAG.T:
        return { '!': 'timestamp', value: t[this.pos++] };
      case TAG.D: {
        const places = t[this.pos++];
        const digits = t[this.pos++];
        return { '!': 'decimal', value: { places, digits } };
      }
      case TAG.F: {
        const count = t[this.pos++];
        return this.entries(t, this.pos + count);
      }
      case TAG.A: {
        const count = t[this.pos++];
        const end = this.pos + count;
        const items = [];
        while (this.pos < end) items.push(this.value(t));
        return items;
      }
      default:
        return t[this.pos++];
    }
  }

  methodFields(id, t, i) {
    return readers[id](t, i, this);
  }

  // Properties as amqplib decodes them: {} when no flag is set, else every key, with
  // undefined for those absent.
  properties(classId, t, i) {
    const flags = t[i];
    return flags === 0 ? {} : propertyReaders[classId](t, i, this, flags);
  }
}

module.exports = { TapeReader };
