'use strict';
// Heartbeats: 'beat' when we have sent nothing for half the interval (so the server sees
// activity), 'timeout' when nothing has arrived for two whole intervals.

const EventEmitter = require('node:events');

class Heart extends EventEmitter {
  constructor(interval, checkSend, checkRecv) {
    super();
    this.interval = interval;
    const ms = interval * module.exports.UNITS_TO_MS;
    this.sendTimer = setInterval(() => {
      if (!checkSend()) this.emit('beat');
    }, ms / 2);
    let silentIntervals = 0;
    this.recvTimer = setInterval(() => {
      silentIntervals = checkRecv() ? 0 : silentIntervals + 1;
      if (silentIntervals >= 2) this.emit('timeout');
    }, ms);
  }

  clear() {
    clearInterval(this.sendTimer);
    clearInterval(this.recvTimer);
  }
}

// Seconds, in the protocol; tests shorten it.
module.exports = { Heart, UNITS_TO_MS: 1000 };
