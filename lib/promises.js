'use strict';
// Waits with deadlines, and promises told to node-style callbacks, for the recovering model and
// its channels (lib/recovery.js, lib/recovering_channel.js, lib/topology.js).

const MAX_TIMER = 2 ** 31 - 1; // ms: setTimeout fires at once past it

// `ms` later, or as soon as `signal` (optional) aborts: no timer outlives what it waited for.
function delay(ms, signal) {
  if (signal?.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}

// `value` (a promise or not) settled, or an Error with `message` after `ms` (0: no limit).
function settleWithin(value, ms, message) {
  if (!ms) return Promise.resolve(value);
  let timer;
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(message)), ms);
  });
  return Promise.race([value, late]).finally(() => clearTimeout(timer));
}

// A promise that joins `waiters` (a list of { resolve, reject }, settled and emptied by its
// owner) and, after `ms` (0: no limit), leaves it, rejected with an Error of `message`. Both
// the recovering model's callers waiting for a connection and its channels' methods waiting
// for the recovery wait so.
function waitInLine(waiters, ms, message) {
  return new Promise((resolve, reject) => {
    const waiter = { resolve, reject };
    waiters.push(waiter);
    if (!ms) return;
    const timer = setTimeout(() => {
      waiters.splice(waiters.indexOf(waiter), 1);
      reject(new Error(message));
    }, ms);
    waiter.resolve = (value) => {
      clearTimeout(timer);
      resolve(value);
    };
    waiter.reject = (err) => {
      clearTimeout(timer);
      reject(err);
    };
  });
}

function asError(value, fallbackMessage) {
  if (value instanceof Error) return value;
  return new Error(value ? String(value) : fallbackMessage);
}

// Wrap a node-style call as a promise.
function fromCallback(call) {
  return new Promise((resolve, reject) => {
    call((err, value) => (err ? reject(err) : resolve(value)));
  });
}

// Report a promise's outcome to an optional node-style callback. A throw of the callback is
// thrown on its own, uncaught, as a callback's throw is in any callback API (inside the
// promise's handlers it would be an unhandled rejection instead).
function toCallback(promise, cb) {
  if (typeof cb !== 'function') {
    promise.catch(() => {});
    return;
  }
  const call = (...args) => {
    try {
      cb(...args);
    } catch (thrown) {
      process.nextTick(() => {
        throw thrown;
      });
    }
  };
  promise.then(
    (value) => call(null, value),
    (err) => call(asError(err, 'Operation failed')),
  );
}

module.exports = { MAX_TIMER, asError, delay, fromCallback, settleWithin, toCallback, waitInLine };
