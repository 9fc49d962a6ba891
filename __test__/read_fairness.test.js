'use strict';
// A peer that keeps the socket full must not starve the event loop: reads yield after a
// bounded amount, so timers fire on time while the bytes keep coming. The peer is a child
// process (a server in this process would be starved with us): after the handshake it sends
// heartbeat frames, 1 MB at a time, for 3 seconds.

const { it } = require('node:test');
const assert = require('node:assert');
const { fork } = require('node:child_process');
const amqp = require('../index');

const FLOOD_MS = 3000;

function floodServer() {
  const { fakeServer } = require('./fake_server');
  const heartbeats = Buffer.alloc(1024 * 1024);
  for (let at = 0; at < heartbeats.length; at += 8) heartbeats.set([8, 0, 0, 0, 0, 0, 0, 0xce], at);
  fakeServer(({ socket }) => {
    const until = Date.now() + FLOOD_MS;
    const pump = () => {
      while (Date.now() < until) if (!socket.write(heartbeats)) return socket.once('drain', pump);
      socket.destroy();
    };
    pump();
  }).then(({ url }) => process.send(url));
}

if (process.argv[2] === '--flood-server') {
  floodServer();
} else {
  it('timers fire on time while a peer floods the socket', async () => {
    const server = fork(__filename, ['--flood-server']);
    try {
      const url = await new Promise((resolve) => server.once('message', resolve));
      const conn = await amqp.connect(url);
      conn.on('error', () => {});
      const ticks = [];
      let last = Date.now();
      const timer = setInterval(() => {
        const now = Date.now();
        ticks.push(now - last);
        last = now;
      }, 50);
      await new Promise((resolve) => conn.once('close', resolve));
      clearInterval(timer);
      const worst = Math.max(...ticks);
      assert.ok(ticks.length >= (FLOOD_MS / 50) * 0.5, `${ticks.length} ticks of ~${FLOOD_MS / 50}`);
      assert.ok(worst < 1000, `worst timer gap ${worst} ms`);
    } finally {
      server.kill();
    }
  });
}
