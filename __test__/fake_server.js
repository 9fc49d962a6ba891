'use strict';
// A scripted AMQP server on 127.0.0.1 for tests of what real brokers won't do: it runs the
// opening handshake with our own Connection class (over the TCP socket, as a stream), then
// hands the test the socket and the frame codec to misbehave with.

const net = require('node:net');
const { Connection } = require('../lib/connection');
const defs = require('../lib/defs');

const PROTOCOL_HEADER_BYTES = 8;

// Starts a server; `script({ conn, socket, send, expect })` runs after each client's handshake.
// Resolves to { url, close }.
function fakeServer(script, { frameMax = 4096 } = {}) {
  return new Promise((resolve) => {
    const sockets = new Set();
    const server = net.createServer((socket) => {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => {});
      socket.once('readable', () => {
        socket.read(PROTOCOL_HEADER_BYTES);
        handshake(socket, frameMax).then((peer) => script(peer), () => socket.destroy());
      });
    });
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      resolve({
        url: `amqp://127.0.0.1:${port}`,
        close: () => {
          for (const s of sockets) s.destroy();
          return new Promise((done) => server.close(done));
        },
      });
    });
  });
}

function handshake(socket, frameMax) {
  const conn = new Connection(socket);
  conn.expectSocketClose = true;
  // Channels the client may open; the fake side needs records for them to send on.
  for (let i = 0; i < 3; i++) conn.freshChannel(null);
  const send = (id, fields, channel = 0) => conn.sendMethod(channel, id, fields);
  const expect = (id) =>
    new Promise((resolve, reject) =>
      conn.step((err, frame) => {
        if (err) reject(err);
        else if (id && frame.id !== id) reject(new Error(`expected ${defs.info(id).name}, got ${frame.id}`));
        else resolve(frame);
      }),
    );
  send(defs.ConnectionStart, {
    versionMajor: 0,
    versionMinor: 9,
    serverProperties: { product: 'fake' },
    mechanisms: Buffer.from('PLAIN'),
    locales: Buffer.from('en_US'),
  });
  return expect(defs.ConnectionStartOk)
    .then(() => send(defs.ConnectionTune, { channelMax: 0, frameMax, heartbeat: 0 }))
    .then(() => expect(defs.ConnectionTuneOk))
    .then(() => expect(defs.ConnectionOpen))
    .then(() => send(defs.ConnectionOpenOk, { knownHosts: '' }))
    .then(() => {
      // Raw bytes go straight to the socket, after anything the codec has queued.
      const sendRaw = (bytes) => {
        conn.flush();
        socket.write(Buffer.from(bytes));
      };
      return { conn, socket, send, sendRaw, expect };
    });
}

module.exports = { fakeServer };
