'use strict';
// Reading a user's arguments may run JS (getters, valueOf), and that JS may send on any
// connection, the one being encoded for included. Every frame must still leave whole, and
// in an order that makes sense: what a getter sends goes first. (Before the encoders wrote
// into scratch memory with no connection borrowed, an acknowledgement sent from a getter
// two connections deep landed in the middle of the outer method's frame.)

const { describe, it } = require('node:test');
const assert = require('node:assert');
const native = require('../lib/native');
const defs = require('../lib/defs');
const { TapeReader } = require('../lib/tape');
const { EVENT_METHOD, EVENT_KIND, EVENT_ID, EVENT_LENGTH, EVENT_CONNECTION_ERROR, TAPE_END } = require('../lib/boundary');

function connection() {
  const session = new native.NativeConnection();
  return { session, handle: session.handle() };
}

// The method ids of the frames in `bytes`, as a peer would read them.
function methodsIn(bytes) {
  const peer = connection();
  const received = native.receive(peer.handle, bytes);
  const tape = received[0];
  const ids = [];
  for (let i = new TapeReader().load(...received); i < tape[TAPE_END]; i += tape[i + EVENT_LENGTH]) {
    if (tape[i + EVENT_KIND] === EVENT_CONNECTION_ERROR) assert.fail(received[1][tape[i + 4]]);
    if (tape[i + EVENT_KIND] === EVENT_METHOD) ids.push(tape[i + EVENT_ID]);
  }
  return ids;
}

const QOS = { prefetchSize: 0, prefetchCount: 1, global: false };
const DECLARE = { queue: 'q', passive: false, durable: false, exclusive: false, autoDelete: false, nowait: false, arguments: {} };

describe('sending from inside a getter', () => {
  it('an ack on the outer connection, from a getter of a second one, leaves before the outer frame, whole', () => {
    const a = connection();
    const b = connection();
    const qos = { ...QOS, get prefetchCount() { native.sendAcknowledgement(a.handle, 1, defs.BasicAck, 7, 0, 0); return 1; } };
    const declare = { ...DECLARE, get queue() { native.sendMethod(b.handle, 1, defs.BasicQos, qos); return 'q'; } };
    native.sendMethod(a.handle, 1, defs.QueueDeclare, declare);
    assert.deepStrictEqual(methodsIn(native.takeOutput(a.handle)), [defs.BasicAck, defs.QueueDeclare]);
    assert.deepStrictEqual(methodsIn(native.takeOutput(b.handle)), [defs.BasicQos]);
  });

  it('a publish on the same connection, from a property getter of a message, leaves first', () => {
    const a = connection();
    const props = { get contentType() { native.sendMethod(a.handle, 1, defs.BasicQos, QOS); return 'text/plain'; } };
    native.sendMessage(a.handle, 1, defs.BasicPublish, { exchange: '', routingKey: 'k', mandatory: false, immediate: false }, defs.BasicProperties, props, Buffer.from('body'));
    assert.deepStrictEqual(methodsIn(native.takeOutput(a.handle)), [defs.BasicQos, defs.BasicPublish]);
  });

  it('content detached by a getter is refused, and nothing of the message is sent', () => {
    const a = connection();
    const content = new Uint8Array(new ArrayBuffer(16));
    const buffer = Buffer.from(content.buffer);
    const props = { get contentType() { structuredClone(content.buffer, { transfer: [content.buffer] }); return 'x'; } };
    assert.throws(() => native.sendPublish(a.handle, 1, '', 'k', false, false, props, 1 << 15, buffer), /content changed/);
    assert.strictEqual(native.takeOutput(a.handle), null);
  });
});
