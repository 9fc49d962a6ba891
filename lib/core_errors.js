'use strict';
// The words of the errors the native core reports. It requires nothing of ours but the
// boundary's numbers, since lib/native.js hands coreError to the addon as it loads.

const { inspect } = require('node:util');
const boundary = require('./boundary');

// The words of each error the core reports (lib/boundary.js's ERROR_*, with its
// parameters), with the class and code amqplib's error has: the core says which error and
// with what, and this is the one place it becomes text. The codec's errors read as amqplib's
// encoder and decoder raise them, Node's own among them (its Buffer writers' range errors, and
// BigInt's); the frame errors as amqplib's connection words them.
const TYPE = TypeError;
const RANGE = RangeError;
const PLAIN = Error;
const errorWords = {
  [boundary.ERROR_WRONG_TYPE]: [TYPE, (field, expected) => `Field '${field}' is the wrong type; must be ${expected}`],
  [boundary.ERROR_MISSING]: [PLAIN, (field) => `Missing value for mandatory field '${field}'`],
  [boundary.ERROR_OUT_OF_RANGE]: [RANGE, (min, max, got) => outOfRange(`>= ${min} and <= ${max}`, got), 'ERR_OUT_OF_RANGE'],
  [boundary.ERROR_OUT_OF_RANGE_64]: [
    RANGE,
    (signed, got) => outOfRange(signed ? '>= -(2n ** 63n) and < 2n ** 63n' : '>= 0n and < 2n ** 64n', Number.isInteger(got) ? BigInt(got) : got),
    'ERR_OUT_OF_RANGE',
  ],
  [boundary.ERROR_NOT_AN_INTEGER]: [RANGE, (n) => `The number ${n} cannot be converted to a BigInt because it is not an integer`],
  [boundary.ERROR_UNKNOWN_ENCODE_TYPE]: [TYPE, (type) => `Unknown type to encode: ${type}`],
  [boundary.ERROR_BAD_DECIMAL]: [TYPE, (json) => `Decimal value must be {'places': 0..255, 'digits': uint32}, got ${json}`],
  [boundary.ERROR_UNEXPECTED_TAG]: [TYPE, (tag) => `Unexpected type tag "${String.fromCharCode(tag)}"`],
  [boundary.ERROR_TRUNCATED]: [RANGE, () => 'Attempt to access memory outside buffer bounds'],
  [boundary.ERROR_TOO_DEEP]: [PLAIN, (depth) => `Field table nested more than ${depth} deep`],
  [boundary.ERROR_TOO_DEEP_TO_ENCODE]: [RANGE, (depth) => `Field table nested more than ${depth} deep (or containing itself); not sent`],
  [boundary.ERROR_UNKNOWN_METHOD]: [PLAIN, () => 'Unknown class/method ID'],
  [boundary.ERROR_UNKNOWN_PROPERTIES]: [PLAIN, () => 'Unknown class/properties ID'],
  [boundary.ERROR_TABLE_TOO_LARGE]: [RANGE, (bytes) => `Encoded field table (headers or arguments) exceeds ${bytes} bytes`],
  [boundary.ERROR_FRAME_TOO_LARGE]: [
    RANGE,
    (size, max) => `Encoded frame of ${size} bytes exceeds the frame max ${max} (headers or arguments too large); nothing was sent`,
  ],
  [boundary.ERROR_NO_ROOM_FOR_BODY]: [PLAIN, (max) => `Cannot send content: frameMax ${max} leaves no room for a body frame`],
  [boundary.ERROR_SOURCE]: [PLAIN, (message) => message],
  [boundary.ERROR_BAD_FRAME_END]: [PLAIN, () => 'Invalid frame'],
  [boundary.ERROR_FRAME_SIZE]: [PLAIN, (size, max) => `Frame size ${size} exceeds maxFrameSize ${max}`],
  [boundary.ERROR_UNKNOWN_FRAME_TYPE]: [PLAIN, (type) => `Unknown frame type ${type}`],
};

// Node's ERR_OUT_OF_RANGE message, the value shown as Node shows it: a BigInt with its `n`,
// an integer beyond 2^32 either way with `_` between groups of three digits.
function outOfRange(range, got) {
  const big = typeof got === 'bigint' ? got > 2n ** 32n || got < -(2n ** 32n) : Number.isInteger(got) && Math.abs(got) > 2 ** 32;
  const text = typeof got === 'bigint' || big ? String(got) : inspect(got);
  const shown = big ? text.replace(/\B(?=(\d{3})+$)/g, '_') : text;
  return `The value of "value" is out of range. It must be ${range}. Received ${shown}${typeof got === 'bigint' ? 'n' : ''}`;
}

// The message of a core error.
function coreErrorMessage(id, params) {
  return errorWords[id][1](...params);
}

// The Error the core's error `id` is thrown as (the native side calls this, src/bindings/errors.rs),
// its stack starting at the caller of the native function.
function coreError(id, a, b, c) {
  const [ErrorClass, words, code] = errorWords[id];
  const error = new ErrorClass(words(a, b, c));
  if (code) error.code = code;
  Error.captureStackTrace(error, coreError);
  return error;
}

module.exports = { errorWords, coreError, coreErrorMessage };
