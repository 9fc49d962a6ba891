#!/usr/bin/env node
'use strict';
// Integrity soak (issue 15): publishers and consumers over three transports at once, every
// delivery checked.
//
//   plain   amqp:// straight to the broker
//   tls     amqps:// through a local TLS-terminating proxy (a self-signed certificate made at run
//           time with the openssl CLI; the client trusts it through `ca`)
//   chunk   amqp:// through a proxy that splits the byte stream, both ways, into pieces of
//           random sizes (from 1 byte) and coalesces what arrives close together
//
// All connections use frameMax 8192 and heartbeat 1. Each transport has a publishing connection
// with two confirm-mode channels and a consuming connection; messages are of random sizes from
// 1 byte to --max-size (skewed small: most under 64 KB, one in ten from 64 KB up), random bytes,
// published mandatory to a queue of the transport. Each carries in its headers its publisher, a
// sequence number, its length and its SHA-256. The consumer checks every delivery: length,
// digest, the next sequence number of its publisher (a lower one is a duplicate, a higher one a
// loss or a reordering), not redelivered. At the end publishing stops, every publish must be
// confirmed and every confirmed message consumed.
//
//   node benchmarks/integrity_soak.js [--lib=ours|amqplib] [--seconds=60] [--max-size=4194304]
//                                     [--transports=plain,tls,chunk] [--seed=N]
//
// `--lib=amqplib` is amqplib 2.3.1 (devDependency amqplib-latest). Every 10 s it prints the
// throughput and RSS; at the end messages, bytes, errors, integrity failures and the peak RSS
// (process.resourceUsage().maxRSS; the proxies run in a child process of their own, so this is
// the client's). Exits 1 on any integrity failure or error. Needs a broker at AMQP_URL (default
// amqp://localhost).

const path = require('node:path');
const fs = require('node:fs');
const os = require('node:os');
const net = require('node:net');
const tls = require('node:tls');
const crypto = require('node:crypto');
const { fork } = require('node:child_process');
const { ROOT, cliArgs, prng, sleep } = require('./lib');
const { makeTlsCertificates } = require('../__test__/tls_certificates');

const args = cliArgs().options;
const BROKER = new URL(process.env.AMQP_URL || 'amqp://localhost');
const TARGET = { host: BROKER.hostname === 'localhost' ? '127.0.0.1' : BROKER.hostname, port: Number(BROKER.port) || 5672 };

// ------------------------------------------------------------------------- the proxies
//
// They run in a child process (`--proxies`), so that their buffers and CPU are not counted as
// the client's; the child tells the parent its ports.

// Pieces for the chunking proxy: a third tiny (1-16 bytes), a third about a packet, a third
// up to 64 KB.
function pieceSize(rand) {
  const r = rand();
  if (r < 0.33) return 1 + Math.floor(rand() * 16);
  if (r < 0.66) return 17 + Math.floor(rand() * 1500);
  return 1517 + Math.floor(rand() * 64000);
}

const pieceStats = { pieces: 0, tiny: 0 };

// One direction of a chunking link: what `from` sends is queued and written to `to` in pieces
// of random sizes; what arrives while a write waits is written together with it (coalesced).
function chunkPipe(from, to, rand) {
  const queue = [];
  let queued = 0;
  let flushing = false;
  let ended = false;
  const flush = () => {
    flushing = false;
    if (to.destroyed) return;
    let pieces = 0;
    while (queued > 0 && !to.writableNeedDrain) {
      const size = Math.min(queued, pieceSize(rand));
      const parts = [];
      let got = 0;
      while (got < size) {
        const head = queue[0];
        const take = Math.min(head.length, size - got);
        parts.push(head.subarray(0, take));
        if (take === head.length) queue.shift();
        else queue[0] = head.subarray(take);
        got += take;
      }
      queued -= size;
      pieceStats.pieces++;
      if (size <= 16) pieceStats.tiny++;
      to.write(parts.length === 1 ? parts[0] : Buffer.concat(parts));
      // Now and then let the loop turn, so that the reader sees the stream in separate reads
      // and more arrives to coalesce.
      if (++pieces >= 4 && rand() < 0.2) break;
    }
    if (queued > 0) schedule();
    else if (ended) to.end();
    if (queued < 256 * 1024) from.resume();
  };
  const schedule = () => {
    if (flushing) return;
    flushing = true;
    if (to.writableNeedDrain) to.once('drain', flush);
    else setImmediate(flush);
  };
  from.on('data', (chunk) => {
    queue.push(chunk);
    queued += chunk.length;
    if (queued >= 256 * 1024) from.pause();
    schedule();
  });
  from.on('end', () => {
    ended = true;
    if (queued === 0) to.end();
  });
}

function linkUp(client, rand) {
  const upstream = net.connect(TARGET);
  client.setNoDelay(true);
  upstream.setNoDelay(true);
  const down = () => {
    client.destroy();
    upstream.destroy();
  };
  client.on('error', down);
  upstream.on('error', down);
  client.on('close', down);
  upstream.on('close', down);
  if (rand) {
    chunkPipe(client, upstream, rand);
    chunkPipe(upstream, client, rand);
  } else {
    client.pipe(upstream);
    upstream.pipe(client);
  }
}

async function proxiesMain() {
  const key = fs.readFileSync(path.join(args.certs, 'server.key'));
  const cert = fs.readFileSync(path.join(args.certs, 'server.pem'));
  const rand = prng(Number(args.seed) + 1);
  const tlsServer = tls.createServer({ key, cert }, (socket) => linkUp(socket, null));
  tlsServer.on('tlsClientError', () => {});
  const chunkServer = net.createServer((socket) => linkUp(socket, rand));
  const listen = (server) => new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server.address().port)));
  const ports = { tls: await listen(tlsServer), chunk: await listen(chunkServer) };
  process.send({ ports });
  process.on('message', () => process.send({ stats: pieceStats }));
  process.on('disconnect', () => process.exit(0));
}

// ------------------------------------------------------------------------------ the soak


const mb = (n) => (n / 1048576).toFixed(1);
const sha256 = (buf) => crypto.createHash('sha256').update(buf).digest('hex');

function startProxies(certs, seed) {
  const child = fork(__filename, ['--proxies', `--certs=${certs}`, `--seed=${seed}`], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  return new Promise((resolve, reject) => {
    child.once('message', (m) => resolve({ child, ports: m.ports }));
    child.once('exit', (code) => reject(new Error(`the proxy process exited (${code})`)));
  });
}

async function soakMain() {
  const LIB = args.lib || 'ours';
  if (!['ours', 'amqplib'].includes(LIB)) throw new Error(`--lib is ours or amqplib, not ${LIB}`);
  const amqp = LIB === 'amqplib' ? require('amqplib-latest') : require(ROOT);
  const label = LIB === 'amqplib' ? 'amqplib 2.3.1' : 'ours';
  const SECONDS = Number(args.seconds || 60);
  const MAX_SIZE = Number(args['max-size'] || 4 * 1024 * 1024);
  const TRANSPORTS = String(args.transports || 'plain,tls,chunk').split(',');
  const SEED = Number(args.seed || Date.now() % 1000000);
  const PUBLISHERS = 2; // per transport
  const WINDOW = 32; // messages published and not yet consumed, per publisher
  const WINDOW_BYTES = 16 * 1024 * 1024; // the same in bytes
  const PREFETCH = 16;
  const QUERY = 'frameMax=8192&heartbeat=1';
  const user = `${decodeURIComponent(BROKER.username || 'guest')}:${decodeURIComponent(BROKER.password || 'guest')}`;
  const vhost = BROKER.pathname && BROKER.pathname !== '/' ? BROKER.pathname : '/';
  const rand = prng(SEED);

  // Sizes: nine in ten log-uniform 1 B..64 KB, one in ten 64 KB..MAX_SIZE.
  const small = Math.min(65536, MAX_SIZE);
  const pickSize = () => {
    const [lo, hi] = rand() < 0.9 || MAX_SIZE <= small ? [1, small] : [small, MAX_SIZE];
    return Math.min(MAX_SIZE, Math.floor(lo * (hi / lo) ** rand()));
  };
  const POOL = crypto.randomBytes(MAX_SIZE + 65536);

  const certs = makeTlsCertificates(fs.mkdtempSync(path.join(os.tmpdir(), 'integrity-soak-')));
  const ca = fs.readFileSync(path.join(certs, 'ca.pem'));
  const proxies = await startProxies(certs, SEED);
  const endpoints = {
    plain: { url: `amqp://${user}@${TARGET.host}:${TARGET.port}${vhost === '/' ? '' : vhost}?${QUERY}`, options: {} },
    tls: { url: `amqps://${user}@localhost:${proxies.ports.tls}${vhost === '/' ? '' : vhost}?${QUERY}`, options: { ca: [ca] } },
    chunk: { url: `amqp://${user}@127.0.0.1:${proxies.ports.chunk}${vhost === '/' ? '' : vhost}?${QUERY}`, options: {} },
  };
  for (const t of TRANSPORTS) if (!endpoints[t]) throw new Error(`unknown transport ${t}`);

  console.log(`integrity soak: ${label}, ${SECONDS} s, transports ${TRANSPORTS.join(', ')}, ${PUBLISHERS} publishers each, `
    + `sizes 1 B..${mb(MAX_SIZE)} MB, frameMax 8192, heartbeat 1, seed ${SEED}`);

  const errors = [];
  const failures = [];
  let stopping = false;
  const error = (what) => {
    errors.push(what);
    if (errors.length <= 20) console.log(`ERROR ${what}`);
  };
  const fail = (what) => {
    failures.push(what);
    if (failures.length <= 20) console.log(`INTEGRITY ${what}`);
  };
  const totals = { published: 0, confirmed: 0, consumed: 0, bytes: 0 };
  const publishers = new Map(); // id -> state
  const connections = [];
  const consumers = [];

  const watch = (emitter, what) => {
    emitter.on('error', (err) => error(`${what} error: ${err.message}`));
    emitter.on('close', () => {
      if (!stopping) error(`${what} closed`);
    });
  };

  async function open(transport, role) {
    const { url, options } = endpoints[transport];
    const conn = await amqp.connect(url, options);
    watch(conn, `${transport} ${role} connection`);
    conn.on('blocked', (reason) => console.log(`(${transport} ${role} connection blocked: ${reason})`));
    connections.push(conn);
    return conn;
  }

  async function consumer(transport, queue) {
    const conn = await open(transport, 'consumer');
    const ch = await conn.createChannel();
    watch(ch, `${transport} consumer channel`);
    await ch.assertQueue(queue, { durable: false, arguments: { 'x-expires': 600000 } });
    await ch.purgeQueue(queue);
    await ch.prefetch(PREFETCH);
    await ch.consume(queue, (msg) => {
      if (msg === null) {
        if (!stopping) error(`${transport} consumer cancelled by the broker`);
        return;
      }
      const h = msg.properties.headers || {};
      const pub = publishers.get(h.pub);
      const where = `${h.pub} #${h.seq}`;
      if (!pub) {
        fail(`${transport}: a delivery from no known publisher (headers ${JSON.stringify(h).slice(0, 200)})`);
      } else {
        if (msg.content.length !== h.len) fail(`${where}: ${msg.content.length} bytes, published ${h.len}`);
        else if (sha256(msg.content) !== h.sha) fail(`${where}: content differs (SHA-256), ${h.len} bytes`);
        if (msg.fields.redelivered) fail(`${where}: redelivered`);
        if (h.seq < pub.expected) fail(`${where}: duplicate (expected #${pub.expected})`);
        else if (h.seq > pub.expected) fail(`${where}: #${pub.expected}..#${h.seq - 1} missing or out of order`);
        if (h.seq >= pub.expected) pub.expected = h.seq + 1;
        pub.consumed++;
        pub.outstandingBytes -= msg.content.length;
        pub.wake();
      }
      totals.consumed++;
      totals.bytes += msg.content.length;
      ch.ack(msg);
    });
    consumers.push({ ch, queue });
    return { conn, ch };
  }

  async function publisher(transport, conn, index, queue) {
    const id = `${transport}.${index}`;
    const ch = await conn.createConfirmChannel();
    watch(ch, `${transport} publisher ${index} channel`);
    ch.on('return', (msg) => error(`${id}: #${msg.properties.headers && msg.properties.headers.seq} returned unroutable`));
    const pub = { id, ch, published: 0, confirmed: 0, nacked: 0, consumed: 0, expected: 1, outstandingBytes: 0, waiter: null };
    pub.wake = () => {
      const w = pub.waiter;
      pub.waiter = null;
      if (w) w();
    };
    ch.on('drain', pub.wake);
    publishers.set(id, pub);
    pub.done = (async () => {
      while (!stopping) {
        if (pub.published - pub.consumed >= WINDOW || pub.outstandingBytes >= WINDOW_BYTES || pub.blocked) {
          await new Promise((resolve) => {
            pub.waiter = resolve;
            setTimeout(resolve, 200); // and look at `stopping` now and then
          });
          continue;
        }
        const size = pickSize();
        const offset = Math.floor(rand() * (POOL.length - size));
        const content = POOL.subarray(offset, offset + size);
        const seq = pub.published + 1;
        const headers = { pub: id, seq, len: size, sha: sha256(content) };
        let ok;
        try {
          ok = ch.publish('', queue, content, { headers, mandatory: true }, (err) => {
            if (err) {
              pub.nacked++;
              error(`${id}: #${seq} nacked: ${err.message}`);
            } else {
              pub.confirmed++;
              totals.confirmed++;
            }
          });
        } catch (err) {
          error(`${id}: publish #${seq} threw ${err.message}`);
          break;
        }
        pub.published++;
        totals.published++;
        pub.outstandingBytes += size;
        if (!ok) {
          pub.blocked = true;
          await new Promise((resolve) => {
            pub.waiter = resolve;
          });
          pub.blocked = false;
        } else if (pub.published % 8 === 0) {
          await new Promise((resolve) => setImmediate(resolve));
        }
      }
    })();
    return pub;
  }

  const started = Date.now();
  for (const transport of TRANSPORTS) {
    const queue = `integrity-soak.${process.pid}.${transport}`;
    await consumer(transport, queue);
    const conn = await open(transport, 'publisher');
    for (let i = 0; i < PUBLISHERS; i++) await publisher(transport, conn, i, queue);
  }

  // Every 10 s: throughput and memory.
  let last = { t: Date.now(), consumed: 0, bytes: 0 };
  const perTransport = () => TRANSPORTS.map((t) => {
    let n = 0;
    for (const p of publishers.values()) if (p.id.startsWith(`${t}.`)) n += p.consumed;
    return `${t} ${n}`;
  }).join(', ');
  const ticker = setInterval(() => {
    const now = Date.now();
    const dt = (now - last.t) / 1000;
    const rate = (totals.consumed - last.consumed) / dt;
    const bytes = (totals.bytes - last.bytes) / dt;
    console.log(`[${Math.round((now - started) / 1000)} s] ${rate.toFixed(0)} msg/s, ${mb(bytes)} MB/s; consumed ${totals.consumed} `
      + `(${perTransport()}); RSS ${mb(process.memoryUsage.rss())} MB; errors ${errors.length}, integrity failures ${failures.length}`);
    last = { t: now, consumed: totals.consumed, bytes: totals.bytes };
  }, 10000);

  await sleep(SECONDS * 1000);

  // Stop, then everything published must be confirmed and consumed.
  stopping = true;
  for (const p of publishers.values()) p.wake();
  await Promise.all([...publishers.values()].map((p) => p.done));
  const deadline = Date.now() + 60000;
  const unsettled = () => [...publishers.values()].filter((p) => p.confirmed + p.nacked < p.published || p.consumed < p.confirmed);
  while (unsettled().length > 0 && Date.now() < deadline && errors.length === 0) await sleep(50);
  clearInterval(ticker);
  for (const p of publishers.values()) {
    if (p.confirmed + p.nacked < p.published) error(`${p.id}: ${p.published - p.confirmed - p.nacked} publishes never confirmed`);
    if (p.consumed < p.confirmed) fail(`${p.id}: ${p.confirmed} confirmed, ${p.consumed} consumed: ${p.confirmed - p.consumed} lost`);
    if (p.consumed > p.published) fail(`${p.id}: ${p.consumed} consumed, only ${p.published} published`);
  }

  for (const { ch, queue } of consumers) {
    try {
      await Promise.race([ch.deleteQueue(queue), sleep(5000)]);
    } catch (_) {
      // x-expires removes it later
    }
  }
  for (const conn of connections) {
    try {
      await Promise.race([conn.close(), sleep(5000)]);
    } catch (_) {
      // closing is not what is measured
    }
  }
  const pieces = await Promise.race([
    new Promise((resolve) => {
      proxies.child.once('message', (m) => resolve(m.stats));
      proxies.child.send('stats');
    }),
    sleep(2000),
  ]);
  proxies.child.disconnect();
  fs.rmSync(certs, { recursive: true, force: true });

  const secs = (Date.now() - started) / 1000;
  const peak = process.resourceUsage().maxRSS * 1024;
  console.log(`\n${label}: ${SECONDS} s (${secs.toFixed(1)} s with the drain)`);
  console.log(`  messages  ${totals.consumed} consumed of ${totals.published} published, ${totals.confirmed} confirmed`);
  console.log(`  bytes     ${totals.bytes} (${mb(totals.bytes)} MB, ${mb(totals.bytes / SECONDS)} MB/s)`);
  console.log(`  per transport (consumed): ${perTransport()}`);
  if (pieces && TRANSPORTS.includes('chunk')) console.log(`  chunking proxy: ${pieces.pieces} pieces written, ${pieces.tiny} of them 1-16 bytes`);
  console.log(`  errors    ${errors.length}${errors.length > 20 ? ' (first 20 above)' : ''}`);
  console.log(`  integrity failures ${failures.length}${failures.length > 20 ? ' (first 20 above)' : ''}`);
  console.log(`  peak RSS  ${mb(peak)} MB`);
  return errors.length > 0 || failures.length > 0 ? 1 : 0;
}

if (args.proxies) {
  proxiesMain();
} else {
  soakMain().then((code) => {
    process.exitCode = code;
    // Whatever the library left running must not keep the process.
    setTimeout(() => process.exit(code), 2000).unref();
  }, (err) => {
    console.error(err);
    process.exit(2);
  });
}
