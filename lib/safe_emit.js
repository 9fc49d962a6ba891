'use strict';
// Emits an event; a listener that throws is reported through 'handler-error' (on the next
// turn) when someone listens for that, else the throw propagates as before.

// Events here carry at most one argument; taking it as a parameter (not `...args`) spares an
// array per event, deliveries included.
function safeEmit(emitter, event, arg) {
  try {
    if (arguments.length > 2) emitter.emit(event, arg);
    else emitter.emit(event);
  } catch (err) {
    if (emitter.listenerCount('handler-error') === 0) throw err;
    setImmediate(() => emitter.emit('handler-error', err, event));
  }
}

// An event whose emitter must go on whatever its listeners do (the recovery's): a listener's
// throw goes to 'handler-error' when someone listens for that, else it is thrown on its own on
// the next tick (uncaught, as any listener's throw is), never into the emitter's work.
function emitSafely(emitter, event, ...args) {
  try {
    emitter.emit(event, ...args);
  } catch (err) {
    if (emitter.listenerCount('handler-error') > 0) emitter.emit('handler-error', err, event);
    else
      process.nextTick(() => {
        throw err;
      });
  }
}

module.exports = safeEmit;
module.exports.emitSafely = emitSafely;
