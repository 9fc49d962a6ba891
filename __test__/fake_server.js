'use strict';
// A scripted AMQP server on 127.0.0.1 for tests of what real brokers won't do: it runs the
// opening handshake with our own Connection class (over the TCP socket, as a stream), then
// hands the test the socket and the frame codec to misbehave with. With `tls`, it listens for
// amqps:// with a certificate of the local test CA (__test__/tls_certificates.js); `tls` may be
// options of tls.createServer over those.

const net = require('node:net');
const tls = require('node:tls');
const { tlsCertificates } = require('./tls_certificates');
const { Connection } = require('../lib/connection');
const defs = require('../lib/defs');

const PROTOCOL_HEADER_BYTES = 8;

// Starts a server; `script({ conn, socket, send, expect, reset, startOk })` runs after each
// client's handshake (`startOk`: the fields of its connection.start-ok). `refuseLogin(startOk)`,
// if given and true, refuses the login instead (403, as RabbitMQ refuses one), and no script
// runs. Resolves to { url, close }, and with `tls` to the `ca` a client is to trust too.
function fakeServer(script, { frameMax = 4096, serverProperties, tls: secure = false, refuseLogin } = {}) {
  return new Promise((resolve) => {
    const sockets = new Set();
    const { ca, key, cert } = tlsCertificates();
    const listen = (onSocket) => (secure ? tls.createServer({ ca, key, cert, ...(secure === true ? {} : secure) }, onSocket) : net.createServer(onSocket));
    const server = listen((socket) => {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => {});
      serve(socket, script, { frameMax, serverProperties, refuseLogin });
    });
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      resolve({
        url: `${secure ? 'amqps' : 'amqp'}://127.0.0.1:${port}`,
        ca: secure ? tlsCertificates().ca : undefined,
        close: () => {
          for (const s of sockets) s.destroy();
          return new Promise((done) => server.close(done));
        },
      });
    });
  });
}

// Serves one client on `socket` (any duplex stream): the handshake, then the script. Its
// connection.start announces `serverProperties` (default: product 'fake').
function serve(socket, script, { frameMax = 4096, serverProperties = { product: 'fake' }, refuseLogin = () => false } = {}) {
  socket.once('readable', () => {
    socket.read(PROTOCOL_HEADER_BYTES);
    handshake(socket, frameMax, serverProperties, refuseLogin).then((peer) => script(peer), () => socket.destroy());
  });
}

function handshake(socket, frameMax, serverProperties, refuseLogin) {
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
    serverProperties,
    mechanisms: Buffer.from('PLAIN'),
    locales: Buffer.from('en_US'),
  });
  let startOk;
  return expect(defs.ConnectionStartOk)
    .then((frame) => {
      startOk = frame.fields;
      if (refuseLogin(startOk)) {
        send(defs.ConnectionClose, { replyCode: 403, replyText: `ACCESS_REFUSED - Login was refused using authentication mechanism ${startOk.mechanism}`, classId: 0, methodId: 0 });
        conn.flush();
        throw new Error('login refused');
      }
      send(defs.ConnectionTune, { channelMax: 0, frameMax, heartbeat: 0 });
    })
    .then(() => expect(defs.ConnectionTuneOk))
    .then(() => expect(defs.ConnectionOpen))
    .then(() => {
      // On the wire before the script runs, whatever it writes and however.
      send(defs.ConnectionOpenOk, { knownHosts: '' });
      conn.flush();
      // Raw bytes go straight to the socket, after anything the codec has queued.
      const sendRaw = (bytes) => {
        conn.flush();
        socket.write(Buffer.from(bytes));
      };
      // The TCP socket (under TLS, the one it runs over), and its reset: what the server wrote
      // before is sent first, a TLS close_notify not.
      const tcp = socket._parent ?? socket;
      const reset = () => tcp.resetAndDestroy();
      return { conn, socket, tcp, send, sendRaw, expect, reset, startOk };
    });
}

module.exports = { fakeServer, serve };
