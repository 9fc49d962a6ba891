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
      // Each tick notes how many frames had arrived by then: the ticks in the middle of the
      // flood are those after which more arrived. A loop that read while bytes were there
      // would have none, on a fast machine or a slow one (qemu, Wine); so the test counts
      // those ticks and compares the gaps with the flood's length, not with the clock.
      const ticks = [];
      const frames = () => conn.counters().framesReceived;
      let last = { at: Date.now(), frames: frames() };
      const timer = setInterval(() => {
        const now = { at: Date.now(), frames: frames() };
        ticks.push({ gap: now.at - last.at, during: now.frames > last.frames });
        last = now;
      }, 50);
      await new Promise((resolve) => conn.once('close', resolve));
      clearInterval(timer);
      const received = frames();
      const during = ticks.filter((t) => t.during);
      const flood = during.reduce((sum, t) => sum + t.gap, 0);
      const worst = Math.max(...during.map((t) => t.gap));
      assert.ok(received > 131072, `the peer flooded: ${received} frames`);
      assert.ok(during.length >= 5, `${during.length} ticks during the flood (${ticks.length} in all)`);
      assert.ok(worst < flood / 4, `worst timer gap ${worst} ms of a ${flood} ms flood`);
    } finally {
      server.kill();
    }
  });
}
