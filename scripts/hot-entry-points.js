'use strict';
// The hot entry points (src/bindings/hot.rs), described once: scripts/generate-defs.js makes
// from this their registration and the decoding of their arguments by name
// (src/bindings/hot_generated.rs) and their TypeScript signatures (lib/native.d.ts), against
// which the JS that calls them is type-checked. They take their arguments by position, so an
// argument out of place would otherwise go unnoticed until it misbehaved.
//
// Each has its JS name, the Rust function in hot.rs that does its work (given the decoded
// arguments), a doc line, its arguments in order and what it returns. An argument is
// [name, kind] or [name, kind, TypeScript type]; the kinds:
//   handle  the connection handle (`NativeConnection#handle()`), taken once per call;
//   u8, u16, u32  an integer (Node-API's uint32, cut to the width); f64  a number;
//   channel  a channel's handle (core/src/channels.rs): its number, its generation above it;
//   bool  a boolean;
//   bytes  a Buffer, whose bytes are read when the handler asks, so that they are not held
//          while JS may run (a getter could detach them);
//   value  a user's value, read by the encoder (which may run JS);
//   raw  the value as it came (a `Js` handle, see src/bindings/env.rs).
// Integers, numbers and booleans are read before the handler runs, in argument order, which
// runs no JS. A handler returns `f64` for `returns: 'number'`, else the `Js` value to return.

module.exports = [
  {
    name: 'sendMethod',
    handler: 'send_method',
    doc: 'A method frame. The bytes waiting afterwards.',
    args: [['handle', 'handle'], ['channel', 'channel'], ['methodId', 'u32'], ['fields', 'value', 'object']],
    returns: 'number',
  },
  {
    name: 'sendMessage',
    handler: 'send_message',
    doc: 'A method with content (method, header and body frames). The bytes waiting afterwards.',
    args: [
      ['handle', 'handle'], ['channel', 'channel'], ['methodId', 'u32'], ['fields', 'value', 'object'],
      ['classId', 'u16'], ['properties', 'value', 'object'], ['content', 'bytes'],
    ],
    returns: 'number',
  },
  {
    name: 'sendPublish',
    handler: 'send_publish',
    doc: 'A basic.publish with its content; `present` flags the properties that are neither undefined nor null, as lib/spec.js computes them. The bytes waiting afterwards.',
    args: [
      ['handle', 'handle'], ['channel', 'channel'], ['exchange', 'value', 'string'], ['routingKey', 'value', 'string'],
      ['mandatory', 'bool'], ['immediate', 'bool'], ['properties', 'value', 'object'], ['present', 'u16'], ['content', 'bytes'],
    ],
    returns: 'number',
  },
  {
    name: 'sendPublishAgain',
    handler: 'send_publish_again',
    doc: "The channel's last publish again, with this content. The bytes waiting afterwards, or -1 when the channel has no publish to repeat.",
    args: [['handle', 'handle'], ['channel', 'channel'], ['content', 'bytes']],
    returns: 'number',
  },
  {
    name: 'sendAcknowledgement',
    handler: 'send_acknowledgement',
    doc: 'basic.ack, nack or reject with a safe-integer tag, `flags` packed bit by bit in the order of its arguments; an ack is made one with the ack before it when together they settle what one `multiple` ack does (core/src/unsettled.rs). The bytes waiting afterwards.',
    args: [['handle', 'handle'], ['channel', 'channel'], ['methodId', 'u32'], ['deliveryTag', 'f64'], ['flags', 'u8']],
    returns: 'number',
  },
  {
    name: 'receive',
    handler: 'receive',
    doc: 'Parses what a stream transport read: the tape, its objects and its content slab for every complete frame, the tape written into `spare` (the last tape this returned) when JS is done with it.',
    args: [['handle', 'handle'], ['chunk', 'bytes'], ['spare', 'raw', 'Float64Array | undefined']],
    returns: '[tape: Float64Array, objects: unknown[] | undefined, slab: ArrayBuffer]',
  },
  {
    name: 'takeOutput',
    handler: 'take_output',
    doc: 'Everything encoded since the last call, as one Buffer, or null.',
    args: [['handle', 'handle']],
    returns: 'Buffer | null',
  },
  {
    name: 'flushSocket',
    handler: 'flush_socket',
    doc: 'Writes what is queued to the native socket: 1 all written, 0 the rest waits (a drain event follows), or a negative errno. Only where the platform has the native socket (`hasNativeSocket()`).',
    cfg: 'native_socket',
    args: [['handle', 'handle']],
    returns: 'number',
  },
];
