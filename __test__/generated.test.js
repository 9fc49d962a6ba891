'use strict';
// The protocol tables and the boundary layout are generated, for Rust and JS alike, by
// scripts/generate-defs.js; the committed files must be exactly what it generates now, and
// what the native core hands over must read as lib/boundary.js says.

const { describe, it } = require('node:test');
const assert = require('node:assert');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const native = require('../lib/native');
const boundary = require('../lib/boundary');

describe('generated files', () => {
  it('are what scripts/generate-defs.js generates', () => {
    const run = spawnSync(process.execPath, [path.join(__dirname, '..', 'scripts', 'generate-defs.js'), '--check'], { encoding: 'utf8' });
    assert.strictEqual(run.status, 0, run.stderr);
  });

  it('lay out a read as the native core writes it', () => {
    const session = new native.NativeConnection();
    const heartbeat = Buffer.from([8, 0, 0, 0, 0, 0, 0, 0xce]);
    const received = native.receive(session.handle(), heartbeat);
    const tape = received[0];
    assert.strictEqual(tape[boundary.TAPE_NEW_STRINGS], 0);
    const at = boundary.TAPE_STRING_PAIRS;
    assert.strictEqual(tape[at + boundary.EVENT_KIND], boundary.EVENT_HEARTBEAT);
    assert.strictEqual(tape[at + boundary.EVENT_LENGTH], boundary.EVENT_HEAD_SLOTS);
    assert.strictEqual(tape.length, at + boundary.EVENT_HEAD_SLOTS);
    const bad = native.receive(session.handle(), Buffer.from([9, 0, 0, 0, 0, 0, 0, 0xce]));
    const error = bad[0];
    assert.strictEqual(error[at + boundary.EVENT_KIND], boundary.EVENT_CONNECTION_ERROR);
    assert.strictEqual(error[at + boundary.EVENT_ID], 501);
    assert.match(bad[1][error[at + boundary.CONNECTION_ERROR_TEXT]], /Unknown frame type 9/);
  });

  it('reuses one buffer for the tapes of a connection, growing it when a read needs more', () => {
    const session = new native.NativeConnection();
    const handle = session.handle();
    const heartbeats = (n) => Buffer.concat(Array.from({ length: n }, () => Buffer.from([8, 0, 0, 0, 0, 0, 0, 0xce])));
    const kinds = (tape) => {
      const out = [];
      for (let i = boundary.TAPE_STRING_PAIRS; i < tape.length; i += tape[i + boundary.EVENT_LENGTH]) out.push(tape[i + boundary.EVENT_KIND]);
      return out;
    };
    const small = native.receive(handle, heartbeats(2))[0];
    const again = native.receive(handle, heartbeats(3))[0];
    assert.strictEqual(again.buffer, small.buffer, 'the same buffer, read after read');
    assert.deepStrictEqual(kinds(again), [boundary.EVENT_HEARTBEAT, boundary.EVENT_HEARTBEAT, boundary.EVENT_HEARTBEAT]);
    const large = native.receive(handle, heartbeats(5000))[0];
    assert.notStrictEqual(large.buffer, small.buffer, 'a larger one for a read that needs more');
    assert.strictEqual(kinds(large).length, 5000);
    assert.ok(kinds(large).every((k) => k === boundary.EVENT_HEARTBEAT));
    const after = native.receive(handle, heartbeats(1))[0];
    assert.strictEqual(after.buffer, large.buffer);
    assert.deepStrictEqual(kinds(after), [boundary.EVENT_HEARTBEAT]);
  });
});
