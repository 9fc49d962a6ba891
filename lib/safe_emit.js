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
    reportThrow(emitter, err, event);
  }
}

// An event whose emitter must go on whatever its listeners do (the recovery's): a listener's
// throw never goes into the emitter's work (see reportThrow).
function emitSafely(emitter, event, ...args) {
  try {
    emitter.emit(event, ...args);
  } catch (err) {
    reportThrow(emitter, err, event);
  }
}

// A listener's or callback's throw, caught where it must not stop the work: told to
// 'handler-error' (err, what) on the next turn when someone listens for that (so that a throw
// of that listener too lands outside the work), else thrown on its own on the next tick,
// uncaught, as any listener's throw is.
function reportThrow(emitter, err, what) {
  if (emitter.listenerCount('handler-error') > 0) setImmediate(() => emitter.emit('handler-error', err, what));
  else
    process.nextTick(() => {
      throw err;
    });
}

module.exports = safeEmit;
module.exports.emitSafely = emitSafely;
module.exports.reportThrow = reportThrow;
