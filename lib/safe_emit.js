'use strict';
// Emits an event; a listener that throws is reported through 'handler-error' (on the next
// turn) when someone listens for that, else the throw propagates as before.

function safeEmit(emitter, event, ...args) {
  try {
    emitter.emit(event, ...args);
  } catch (err) {
    if (emitter.listenerCount('handler-error') === 0) throw err;
    setImmediate(() => emitter.emit('handler-error', err, event));
  }
}

module.exports = safeEmit;
