'use strict';

// Errors raised by the API layer itself (as opposed to errors reported by
// the broker, which are plain `Error`s carrying `code`, `classId` and
// `methodId`).

// Raised when an operation is attempted on a channel or connection that is
// in a state where the operation makes no sense, e.g. publishing on a
// channel that has been closed. `stackAtStateChange` records where the
// object entered that state, which is usually more useful for debugging
// than where the doomed operation was attempted.
class IllegalOperationError extends Error {
  constructor(msg, stack) {
    super(msg);
    // Start the trace at whoever constructed us, not inside this class.
    if (Error.captureStackTrace) Error.captureStackTrace(this, new.target);
    this.stackAtStateChange = stack;
  }
}

// The name lives on the prototype so that `err.name` and the first line
// of `err.stack` read "IllegalOperationError".
Object.defineProperty(IllegalOperationError.prototype, 'name', {
  value: 'IllegalOperationError',
  writable: true,
  configurable: true,
  enumerable: false,
});

// Record the current call stack as a string, labelled with a reason, so it
// can be attached later (as `stackAtStateChange`) to errors caused by the
// state change happening now. Frames inside this helper are left out.
function stackCapture(reason) {
  const holder = {};
  Error.captureStackTrace(holder, stackCapture);
  const frames = holder.stack.slice(holder.stack.indexOf('\n') + 1);
  return `Stack capture: ${reason}\n${frames}`;
}

module.exports = { IllegalOperationError, stackCapture };
