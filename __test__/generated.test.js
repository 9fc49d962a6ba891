'use strict';
// The protocol tables, the boundary layout and the hot entry points are generated, for Rust and
// JS alike, by scripts/generate-defs.js; the committed files must be exactly what it generates
// now, what the native core hands over must read as lib/boundary.js says, and the addon must
// have the entry points scripts/hot-entry-points.js describes.

const { describe, it } = require('node:test');
const assert = require('node:assert');
const path = require('node:path');
const { spawnSync } = require('node:child_process');
const native = require('../lib/native');
const boundary = require('../lib/boundary');
const hotEntryPoints = require('../scripts/hot-entry-points');

describe('generated files', () => {
  it('are what scripts/generate-defs.js generates', () => {
    const run = spawnSync(process.execPath, [path.join(__dirname, '..', 'scripts', 'generate-defs.js'), '--check'], { encoding: 'utf8' });
    assert.strictEqual(run.status, 0, run.stderr);
  });

  it('register every hot entry point described, where its platform has it', () => {
    for (const { name, cfg } of hotEntryPoints) {
      const expected = cfg === 'native_socket' ? native.hasNativeSocket() : true;
      assert.strictEqual(typeof native[name] === 'function', expected, name);
    }
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
    assert.strictEqual(tape[boundary.TAPE_END], at + boundary.EVENT_HEAD_SLOTS);
    assert.strictEqual(tape[boundary.TAPE_HELD], 1);
    const bad = native.receive(session.handle(), Buffer.from([9, 0, 0, 0, 0, 0, 0, 0xce]));
    const error = bad[0];
    assert.strictEqual(error[at + boundary.EVENT_KIND], boundary.EVENT_CONNECTION_ERROR);
    assert.strictEqual(error[at + boundary.EVENT_ID], 501);
    assert.strictEqual(error[at + boundary.CONNECTION_ERROR_ERROR], boundary.ERROR_UNKNOWN_FRAME_TYPE);
    assert.strictEqual(error[at + boundary.CONNECTION_ERROR_PARAMS], 9);
    assert.deepStrictEqual(boundary.ERROR_PARAM_KINDS[boundary.ERROR_UNKNOWN_FRAME_TYPE], ['number']);
    assert.strictEqual(error[at + boundary.EVENT_LENGTH], boundary.CONNECTION_ERROR_PARAMS + boundary.ERROR_PARAMS);
  });

  it('write a read into the tape given back once JS has released it, and only then', () => {
    const handle = new native.NativeConnection().handle();
    const heartbeat = Buffer.from([8, 0, 0, 0, 0, 0, 0, 0xce]);
    const first = native.receive(handle, heartbeat)[0];
    const before = Array.from(first);
    assert.notStrictEqual(native.receive(handle, Buffer.concat([heartbeat, heartbeat]), first)[0], first);
    assert.deepStrictEqual(Array.from(first), before, 'a held tape is not written');
    first[boundary.TAPE_HELD] = 0;
    first.fill(-1, boundary.TAPE_END + 1);
    const again = native.receive(handle, Buffer.concat([heartbeat, heartbeat]), first)[0];
    assert.strictEqual(again, first);
    assert.strictEqual(again[boundary.TAPE_HELD], 1);
    const at = boundary.TAPE_STRING_PAIRS;
    assert.strictEqual(again[boundary.TAPE_END], at + 2 * boundary.EVENT_HEAD_SLOTS);
    assert.strictEqual(again[at + boundary.EVENT_HEAD_SLOTS + boundary.EVENT_KIND], boundary.EVENT_HEARTBEAT);
    // Too small, or not a tape at all: a new one.
    const small = new Float64Array(boundary.TAPE_END + 1);
    assert.notStrictEqual(native.receive(handle, heartbeat, small)[0], small);
    assert.ok(native.receive(handle, heartbeat, 'not a tape')[0] instanceof Float64Array);
  });
});
