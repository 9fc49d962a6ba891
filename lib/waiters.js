'use strict';

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

module.exports = { waitInLine };
