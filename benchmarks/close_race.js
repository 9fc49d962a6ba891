'use strict';
// How often a server's connection.close, followed at once by a reset, reaches the application
// as that close (320) rather than as the socket error behind it, while the client publishes
// (issue 25), over plain TCP and over TLS (issue 34: a TLS listener with a certificate of a
// local CA, the server's close_notify between its close and the reset, as RabbitMQ's).
// amqplib-rs on both transports and amqplib 2.3.1, each publishing from timers (which run
// before the turn's poll reads), from setImmediate, and with the event loop held up for 50 ms
// as the server goes. `node benchmarks/close_race.js [--runs=N]`.

const { spawnSync } = require('node:child_process');
const path = require('node:path');

const RUNS = Number((process.argv.find((a) => a.startsWith('--runs=')) || '--runs=30').slice(7));

if (process.env.CLOSE_RACE_CHILD) {
  child(JSON.parse(process.env.CLOSE_RACE_CHILD));
} else {
  parent();
}

function parent() {
  const clients = [
    ['amqplib-rs native', 'ours', {}],
    ['amqplib-rs stream', 'ours', { AMQPLIB_RS_TRANSPORT: 'stream' }],
    ['amqplib 2.3.1', 'amqplib-latest', {}],
    ['amqplib-rs TLS, native socket', 'ours', { CLOSE_RACE_TLS: '1' }],
    ['amqplib-rs TLS, tls.connect', 'ours', { CLOSE_RACE_TLS: '1', AMQPLIB_RS_TRANSPORT: 'stream' }],
    ['amqplib 2.3.1 TLS', 'amqplib-latest', { CLOSE_RACE_TLS: '1' }],
  ];
  console.log(`| client | publishing | runs | closed with 320 | 'error' first |`);
  console.log('|---|---|---|---|---|');
  for (const writer of ['timer', 'immediate', 'held']) {
    for (const [name, lib, env] of clients) {
      const run = spawnSync(process.execPath, [__filename], {
        env: { ...process.env, ...env, CLOSE_RACE_CHILD: JSON.stringify({ lib, writer, runs: RUNS }) },
        encoding: 'utf8',
        timeout: 300000,
      });
      const line = run.stdout.split('\n').find((l) => l.startsWith('OUTCOMES '));
      if (!line) throw new Error(`${name} ${writer} failed: ${run.stderr}`);
      const { closed, errored } = JSON.parse(line.slice(9));
      console.log(`| ${name} | ${writer} | ${RUNS} | ${closed} | ${errored} |`);
    }
  }
}

async function child({ lib, writer, runs }) {
  const root = path.join(__dirname, '..');
  const amqp = lib === 'ours' ? require(root) : require(lib);
  const { fakeServer } = require(path.join(root, '__test__', 'fake_server'));
  const defs = require(path.join(root, 'lib', 'defs'));
  const tls = process.env.CLOSE_RACE_TLS === '1';
  let closed = 0;
  let errored = 0;
  for (let i = 0; i < runs; i++) {
    let peer;
    const server = await fakeServer(async (p) => {
      p.tcp.setNoDelay(true);
      const open = await p.expect(defs.ChannelOpen);
      p.send(defs.ChannelOpenOk, { channelId: Buffer.alloc(0) }, open.channel);
      p.conn.flush();
      peer = p;
    }, { tls });
    const conn = await amqp.connect(server.url, { ca: server.ca });
    const ch = await conn.createChannel();
    const outcome = new Promise((resolve) => {
      conn.on('error', () => resolve('error'));
      conn.on('close', (err) => resolve(err && err.code === 320 ? 'closed' : 'error'));
    });
    let publishing = true;
    const body = Buffer.alloc(200);
    const schedule = writer === 'immediate' ? setImmediate : (f) => setTimeout(f, 0);
    const pump = () => {
      if (!publishing) return;
      try {
        for (let k = 0; k < 20; k++) ch.publish('', 'q', body);
      } catch {
        return;
      }
      schedule(pump);
    };
    pump();
    await new Promise((resolve) => setTimeout(resolve, 20 + (i % 7)));
    peer.send(defs.ConnectionClose, { replyCode: 320, replyText: 'CONNECTION_FORCED - shutdown', classId: 0, methodId: 0 });
    peer.conn.flush();
    if (tls) peer.socket.end(); // close_notify
    peer.reset();
    if (writer === 'held') {
      const until = Date.now() + 50; // the event loop busy as the node goes
      while (Date.now() < until);
      ch.publish('', 'q', body);
    }
    if ((await outcome) === 'closed') closed++;
    else errored++;
    publishing = false;
    await server.close();
  }
  process.stdout.write(`OUTCOMES ${JSON.stringify({ closed, errored })}\n`);
  process.exit(0);
}
