'use strict';
// The core reports an error as an id with its parameters; lib/core_errors.js alone words it.
// Each error the encoder throws must read as amqplib 2.0.1's own codec's (its class, message
// and code), and the stack must start where the user called, not in the words. The errors read
// from the wire are compared with amqplib's in hostile.test.js.

const { describe, it } = require('node:test');
const assert = require('node:assert');
const path = require('node:path');
const boundary = require('../lib/boundary');
const { errorWords, coreError } = require('../lib/core_errors');
const defs = require('../lib/defs');
const codec = require('../lib/codec');

const amqplibDir = path.dirname(require.resolve('amqplib'));
const refDefs = require(path.join(amqplibDir, 'lib/defs.js'));
const refCodec = require(path.join(amqplibDir, 'lib/codec.js'));

// What is compared of an error: enough to tell any two of ours apart, and what users test.
function caught(fn) {
  try {
    fn();
  } catch (e) {
    return { class: e.constructor.name, message: e.message, code: e.code };
  }
  return { class: 'none' };
}

const table = (value) => (c) => c.encodeTable(Buffer.alloc(1 << 16), { v: value }, 0);
const method = (id, fields) => (d) => d.encodeMethod(id, 1, fields);

// [what, call(codec, defs)]: each makes a different error of the core's.
const CASES = [
  ['a field of the wrong type', (c, d) => method(d.BasicPublish, { exchange: 1 })(d)],
  ['a mandatory field missing', (c, d) => method(d.BasicDeliver, {})(d)],
  ['an octet out of range', (c, d) => method(d.BasicQos, { prefetchSize: 0, prefetchCount: 70000, global: false })(d)],
  ['an int8 out of range', (c) => table({ '!': 'int8', value: 300 })(c)],
  ['an int32 far out of range (shown with separators)', (c) => table({ '!': 'int32', value: -5_000_000_000 })(c)],
  ['an int64 out of range', (c) => table({ '!': 'int64', value: 2 ** 64 })(c)],
  ['an int64 that is not an integer', (c) => table({ '!': 'int64', value: 1.5 })(c)],
  ['an unsigned 64-bit field below 0', (c, d) => method(d.BasicAck, { deliveryTag: -1, multiple: false })(d)],
  ['a value of no encodable type', (c) => table(() => {})(c)],
  ['a bad decimal', (c) => table({ '!': 'decimal', value: { places: 1 } })(c)],
  ['a bad decimal, not an object', (c) => table({ '!': 'decimal', value: 'x' })(c)],
  ['a bad decimal JSON cannot write: its own error', (c) => table({ '!': 'decimal', value: { places: 300n } })(c)],
  ['an unknown method id', (c, d) => d.encodeMethod(12345, 1, {})],
];

describe('the core error words', () => {
  it('word every error the core has, with the parameters it reports', () => {
    const ids = Object.keys(boundary).filter((name) => /^ERROR_[A-Z_0-9]+$/.test(name) && name !== 'ERROR_PARAMS' && name !== 'ERROR_PARAM_KINDS');
    assert.strictEqual(ids.length, boundary.ERROR_PARAM_KINDS.length);
    for (const name of ids) {
      const id = boundary[name];
      const [ErrorClass, words] = errorWords[id];
      assert.ok(ErrorClass === Error || ErrorClass.prototype instanceof Error, name);
      assert.strictEqual(words.length, boundary.ERROR_PARAM_KINDS[id].length, `${name} takes its parameters`);
      assert.ok(coreError(id, 1, 2, 3) instanceof ErrorClass, name);
    }
  });

  for (const [what, call] of CASES) {
    it(`${what}: as amqplib 2.0.1 throws it`, () => {
      const ours = caught(() => call(codec, defs));
      assert.notStrictEqual(ours.class, 'none', 'ours throws');
      assert.deepStrictEqual(ours, caught(() => call(refCodec, refDefs)));
    });
  }

  it('the stack starts at the call into the codec, not in the words', () => {
    let error;
    try {
      defs.encodeMethod(defs.BasicPublish, 1, { exchange: 1 });
    } catch (e) {
      error = e;
    }
    const frames = error.stack.split('\n').filter((line) => line.trim().startsWith('at '));
    assert.doesNotMatch(frames[0], /core_errors\.js/);
    assert.match(error.stack, /core_errors\.test\.js/);
  });
});
