'use strict';
// Whether something accepts TCP connections at host:port (within 2 s): how the test scripts
// tell that a broker or a cluster node is up.

const net = require('node:net');

function answers(host, port) {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    socket.setTimeout(2000);
    const done = (ok) => {
      socket.destroy();
      resolve(ok);
    };
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
    socket.once('timeout', () => done(false));
  });
}

module.exports = { answers };
