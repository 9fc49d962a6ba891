'use strict';
// Channel errors for content frames out of turn: the core reports which rule was broken and its
// parameters (core/src/content.rs's Violation, numbered by the generated lib/boundary.js), and
// lib/format.js's one table words each as amqplib's channel does. hostile.test.js checks the
// errors end to end against amqplib itself; this checks the table and the tape's event.

const { describe, it } = require('node:test');
const assert = require('node:assert');
const native = require('../lib/native');
const boundary = require('../lib/boundary');
const defs = require('../lib/defs');
const { violationText, violationWords } = require('../lib/format');
const { ChannelViolation } = require('../lib/incoming');

const { UNEXPECTED_FRAME } = defs.constants;

// Every kind the boundary numbers (the generator lists the core's variants), by name.
const kinds = Object.entries(boundary).filter(([name]) => name.startsWith('VIOLATION_'));

describe('channel errors', () => {
  it('the table words every kind the core reports, and nothing else', () => {
    assert.ok(kinds.length > 0);
    assert.deepStrictEqual(Object.keys(violationWords).map(Number).sort(), kinds.map(([, kind]) => kind).sort());
  });

  it("each kind's words are amqplib's, with its parameters", () => {
    const deliver = defs.BasicDeliver;
    const cases = [
      [boundary.VIOLATION_HEADER_EXPECTED, 1, deliver, 0, 'Expected headers frame after delivery'],
      [boundary.VIOLATION_HEADER_EXPECTED, 1, 0, 0, 'Expected headers frame after delivery'],
      [boundary.VIOLATION_CONTENT_EXPECTED, 1, defs.BasicProperties, 0, 'Expected content frame after headers'],
      [boundary.VIOLATION_DELIVERY_EXPECTED, 3, defs.BasicProperties, 0, 'Expected BasicDeliver or BasicReturn; got <BasicProperties channel:3>'],
      [boundary.VIOLATION_DELIVERY_EXPECTED, 2, 0, 0, 'Expected BasicDeliver or BasicReturn; got <Content channel:2 size:NaN>'],
      [boundary.VIOLATION_TOO_MUCH_CONTENT, 1, 0, 5, 'Too much content sent! Expected 5 bytes'],
    ];
    for (const [kind, channel, blamed, bodySize, text] of cases) {
      assert.strictEqual(violationText(new ChannelViolation(channel, UNEXPECTED_FRAME, kind, blamed, bodySize)), text);
    }
    const covered = new Set(cases.map(([kind]) => kind));
    for (const [name, kind] of kinds) assert.ok(covered.has(kind), `${name} has a case here`);
  });

  it('reach JS as an event of their own, with the code and parameters the table takes', () => {
    const handle = new native.NativeConnection().handle();
    const openOk = defs.encodeMethod(defs.ChannelOpenOk, 2, { channelId: Buffer.alloc(0) });
    // A content header on channel 2 with no delivery before it, declaring 3 bytes.
    const header = Buffer.from([2, 0, 2, 0, 0, 0, 14, 0, 60, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0xce]);
    const [tape, objects] = native.receive(handle, Buffer.concat([openOk, header]));
    let at = boundary.TAPE_STRING_PAIRS + 2 * tape[boundary.TAPE_NEW_STRINGS];
    assert.strictEqual(tape[at + boundary.EVENT_KIND], boundary.EVENT_METHOD);
    at += tape[at + boundary.EVENT_LENGTH];
    assert.strictEqual(tape[at + boundary.EVENT_KIND], boundary.EVENT_CHANNEL_ERROR);
    assert.strictEqual(tape[at + boundary.EVENT_CHANNEL], 2);
    assert.strictEqual(tape[at + boundary.EVENT_ID], UNEXPECTED_FRAME);
    assert.strictEqual(tape[at + boundary.CHANNEL_ERROR_VIOLATION], boundary.VIOLATION_DELIVERY_EXPECTED);
    assert.strictEqual(tape[at + boundary.CHANNEL_ERROR_METHOD], defs.BasicProperties);
    assert.strictEqual(tape[at + boundary.CHANNEL_ERROR_BODY_SIZE], 0);
    assert.strictEqual(tape[boundary.TAPE_END], at + tape[at + boundary.EVENT_LENGTH]);
    assert.ok(!(objects ?? []).some((o) => typeof o === 'string' && o.startsWith('Expected')), "no text: the words are JS's");
  });
});
