'use strict';
// Shared helpers for the benchmarks: which library to load, a small AMQP frame encoder and
// scanner for the fake broker, the fake duplex stream, measurement of CPU, GC and memory,
// running one benchmark process and reading back its figures, and the driver/child plumbing
// of the scenarios against the broker.

const path = require('node:path');
const fs = require('node:fs');
const { Duplex } = require('node:stream');
const { PerformanceObserver, performance, constants: perfConstants } = require('node:perf_hooks');
const { execFileSync, fork } = require('node:child_process');
const v8 = require('node:v8');

const ROOT = path.join(__dirname, '..');
// amqplib and ours for every benchmark; the two other clients on the registry for the
// scenarios written against benchmarks/clients.js.
const LIBS = {
  amqplib: path.join(ROOT, 'node_modules', 'amqplib'),
  ours: ROOT,
  cloudamqp: path.join(ROOT, 'node_modules', '@cloudamqp', 'amqp-client'),
  'rabbitmq-client': path.join(ROOT, 'node_modules', 'rabbitmq-client'),
};

// The pieces of one library the benchmarks use: the public API, and (brokerless only, amqplib
// and ours) the Connection class, the promise-API model that sits on a connection, and the
// channel core beneath it.
function load(name) {
  const root = LIBS[name];
  if (!root) throw new Error(`unknown library ${name}; expected one of ${Object.keys(LIBS)}`);
  return {
    name,
    api: () => require(root),
    Connection: () => require(path.join(root, 'lib', 'connection.js')).Connection,
    ChannelModel: () => require(path.join(root, 'lib', 'channel_model.js')).ChannelModel,
    Channel: () => require(path.join(root, 'lib', 'channel.js')).Channel,
  };
}

const SIZES = { '100': 100, '1k': 1024, '16k': 16 * 1024, '64k': 64 * 1024, '448k': 448 * 1024 };

// BENCH_TRACE_SUBSCRIBER=1: a subscriber that does nothing on each of our tracing channels
// (lib/tracing.js), to measure what being traced costs; unset, nobody subscribes (issue 28).
if (process.env.BENCH_TRACE_SUBSCRIBER === '1') {
  const dc = require('node:diagnostics_channel');
  const nothing = () => {};
  const handlers = { start: nothing, end: nothing, asyncStart: nothing, asyncEnd: nothing, error: nothing };
  for (const name of ['connect', 'publish', 'deliver', 'rpc']) dc.tracingChannel(`amqplib:${name}`).subscribe(handlers);
}

// ------------------------------------------------------------------ frames (our own encoder)

const FRAME_METHOD = 1;
const FRAME_HEADER = 2;
const FRAME_BODY = 3;
const FRAME_END = 0xce;
const FRAME_MAX = 131072;

const M = {
  ConnectionStart: 0x000a000a, ConnectionStartOk: 0x000a000b, ConnectionTune: 0x000a001e,
  ConnectionTuneOk: 0x000a001f, ConnectionOpen: 0x000a0028, ConnectionOpenOk: 0x000a0029,
  ConnectionClose: 0x000a0032, ConnectionCloseOk: 0x000a0033,
  ChannelOpen: 0x0014000a, ChannelOpenOk: 0x0014000b, ChannelClose: 0x00140028, ChannelCloseOk: 0x00140029,
  BasicQos: 0x003c000a, BasicQosOk: 0x003c000b, BasicConsume: 0x003c0014, BasicConsumeOk: 0x003c0015,
  BasicPublish: 0x003c0028, BasicDeliver: 0x003c003c, BasicAck: 0x003c0050,
};

// Writes values into a growing list of small buffers; enough of the AMQP types for the
// frames a fake broker sends.
class Writer {
  constructor() { this.parts = []; }
  octet(v) { this.parts.push(Buffer.from([v])); return this; }
  short(v) { const b = Buffer.alloc(2); b.writeUInt16BE(v); this.parts.push(b); return this; }
  long(v) { const b = Buffer.alloc(4); b.writeUInt32BE(v); this.parts.push(b); return this; }
  longlong(v) { const b = Buffer.alloc(8); b.writeBigUInt64BE(BigInt(v)); this.parts.push(b); return this; }
  shortstr(s) { const b = Buffer.from(s); return this.octet(b.length).raw(b); }
  longstr(s) { const b = Buffer.from(s); return this.long(b.length).raw(b); }
  raw(b) { this.parts.push(b); return this; }
  table(t) {
    const w = new Writer();
    for (const [k, v] of Object.entries(t)) {
      w.shortstr(k);
      if (typeof v === 'number') w.octet(0x49).long(v); // 'I', signed 32 (non-negative here)
      else if (typeof v === 'boolean') w.octet(0x74).octet(v ? 1 : 0); // 't'
      else if (typeof v === 'object') w.octet(0x46).table(v); // 'F'
      else w.octet(0x53).longstr(String(v)); // 'S'
    }
    const body = w.done();
    return this.long(body.length).raw(body);
  }
  done() { return Buffer.concat(this.parts); }
}

function frame(type, channel, payload) {
  const head = Buffer.alloc(7);
  head.writeUInt8(type, 0);
  head.writeUInt16BE(channel, 1);
  head.writeUInt32BE(payload.length, 3);
  return Buffer.concat([head, payload, Buffer.from([FRAME_END])]);
}

function method(channel, id, fill) {
  const w = new Writer().long(id);
  if (fill) fill(w);
  return frame(FRAME_METHOD, channel, w.done());
}

// Content header (basic class) with the properties the benchmarks use.
function header(channel, size, props) {
  const order = [
    ['contentType', 15, 'shortstr'], ['headers', 13, 'table'], ['deliveryMode', 12, 'octet'],
    ['correlationId', 10, 'shortstr'], ['replyTo', 9, 'shortstr'], ['messageId', 7, 'shortstr'],
    ['timestamp', 6, 'longlong'],
  ];
  let flags = 0;
  const w = new Writer();
  for (const [key, bit, type] of order) {
    if (props[key] === undefined) continue;
    flags |= 1 << bit;
    w[type](props[key]);
  }
  const head = new Writer().short(60).short(0).longlong(size).short(flags).done();
  return frame(FRAME_HEADER, channel, Buffer.concat([head, w.done()]));
}

// The frames of a whole message: method, header, and the body split at frameMax.
function message(channel, methodFrame, props, body) {
  const parts = [methodFrame, header(channel, body.length, props)];
  const max = FRAME_MAX - 8;
  for (let at = 0; at < body.length; at += max) parts.push(frame(FRAME_BODY, channel, body.subarray(at, at + max)));
  return Buffer.concat(parts);
}

const CONSUMER_TAG = 'bench';
// Where the delivery tag sits in a basic.deliver frame: 7 (frame header) + 4 (method id) +
// 1 + the consumer tag; the low 32 bits are 4 further on.
const TAG_LOW = 7 + 4 + 1 + CONSUMER_TAG.length + 4;

// Message property sets the receive benchmarks cycle through: some with headers tables.
const PROPERTY_MIX = [
  {},
  { contentType: 'application/octet-stream', deliveryMode: 2 },
  { contentType: 'application/json', headers: { 'x-trace': 'a1b2c3d4e5', 'x-attempt': 1, 'x-route': { region: 'eu', tier: 'gold' } } },
  { messageId: 'msg-000001', timestamp: 1700000000, headers: { 'x-origin': 'billing', 'x-retry': false } },
];

// A basic.deliver + header + body for each property set, delivery tag 1 (patched as sent).
function deliveryTemplates(size, channel = 1) {
  const body = Buffer.alloc(size, 0x61);
  return PROPERTY_MIX.map((props) => message(channel, method(channel, M.BasicDeliver, (w) =>
    w.shortstr(CONSUMER_TAG).longlong(1).octet(0).shortstr('amq.direct').shortstr('bench')), props, body));
}

// Cuts a run of `count` deliveries (templates in turn, delivery tags 1..count) into fresh
// chunks of `chunkSize` bytes, back to back, so frames fall across chunks as on a socket.
class DeliveryStream {
  constructor(templates, count, chunkSize = 65536) {
    this.templates = templates;
    this.count = count;
    this.chunkSize = chunkSize;
    this.n = 0; // messages started
    this.current = null;
    this.at = 0;
  }

  nextChunk() {
    if (this.current === null && this.n === this.count) return null;
    const chunk = Buffer.allocUnsafe(this.chunkSize);
    let filled = 0;
    while (filled < this.chunkSize) {
      if (this.current === null) {
        if (this.n === this.count) break;
        this.current = this.templates[this.n % this.templates.length];
        this.n++;
        this.current.writeUInt32BE(this.n >>> 0, TAG_LOW);
        this.at = 0;
      }
      const copied = this.current.copy(chunk, filled, this.at);
      filled += copied;
      this.at += copied;
      if (this.at === this.current.length) this.current = null;
    }
    return filled === this.chunkSize ? chunk : chunk.subarray(0, filled);
  }
}

// Reads the client's frames as they are written: the handshake replies of a fake broker,
// and a count of body bytes. Only frame headers and method ids are looked at.
class FrameScanner {
  constructor(onMethod) {
    this.onMethod = onMethod;
    this.pending = Buffer.alloc(0); // an incomplete frame header or method frame
    this.skip = 0; // payload bytes of a non-method frame still to pass over
    this.bodyBytes = 0;
    this.headerSeen = false;
  }

  push(chunk) {
    let buf = this.pending.length ? Buffer.concat([this.pending, chunk]) : chunk;
    this.pending = Buffer.alloc(0);
    let at = 0;
    if (!this.headerSeen) {
      if (buf.length < 8) { this.pending = buf; return; }
      this.headerSeen = true;
      at = 8;
      this.onMethod(0, 'header');
    }
    while (at < buf.length) {
      if (this.skip > 0) {
        const n = Math.min(this.skip, buf.length - at);
        this.skip -= n;
        at += n;
        continue;
      }
      if (buf.length - at < 7) break;
      const type = buf[at];
      const channel = buf.readUInt16BE(at + 1);
      const size = buf.readUInt32BE(at + 3);
      if (type === FRAME_METHOD) {
        if (buf.length - at < size + 8) break;
        this.onMethod(channel, buf.readUInt32BE(at + 7), buf.subarray(at + 11, at + 7 + size));
        at += size + 8;
      } else {
        if (type === FRAME_BODY) this.bodyBytes += size;
        at += 7;
        this.skip = size + 1;
      }
    }
    if (at < buf.length) this.pending = Buffer.from(buf.subarray(at));
  }
}

// A duplex stream standing in for the socket, with a fake broker behind it: it answers the
// opening handshake, channel.open, basic.qos and basic.consume, and counts what the client
// writes (writes, bytes, body bytes). `deliver(chunk)` hands bytes to the client as a read.
function fakeSocket() {
  const stats = { writes: 0, bytes: 0 };
  const stream = new Duplex({
    read() {},
    write(chunk, _enc, cb) {
      stats.writes++;
      stats.bytes += chunk.length;
      scanner.push(chunk);
      // Completes after the write returns, as a socket's write does when the kernel does
      // not take it all at once (so a big write reports false and 'drain' follows).
      process.nextTick(cb);
    },
  });
  const reply = (buf) => setImmediate(() => stream.push(buf));
  const scanner = new FrameScanner((channel, id) => {
    switch (id) {
      case 'header':
        reply(method(0, M.ConnectionStart, (w) => w.octet(0).octet(9)
          .table({ product: 'fake', capabilities: { 'basic.nack': true, 'connection.blocked': true } })
          .longstr('PLAIN AMQPLAIN').longstr('en_US')));
        break;
      case M.ConnectionStartOk:
        reply(method(0, M.ConnectionTune, (w) => w.short(2047).long(FRAME_MAX).short(0)));
        break;
      case M.ConnectionOpen:
        reply(method(0, M.ConnectionOpenOk, (w) => w.shortstr('')));
        break;
      case M.ConnectionClose:
        reply(method(0, M.ConnectionCloseOk));
        break;
      case M.ChannelOpen:
        reply(method(channel, M.ChannelOpenOk, (w) => w.longstr('')));
        break;
      case M.ChannelClose:
        reply(method(channel, M.ChannelCloseOk));
        break;
      case M.BasicQos:
        reply(method(channel, M.BasicQosOk));
        break;
      case M.BasicConsume:
        reply(method(channel, M.BasicConsumeOk, (w) => w.shortstr(CONSUMER_TAG)));
        break;
      default:
    }
  });
  return { stream, stats, scanner, deliver: (chunk) => stream.push(chunk) };
}

// The fields `Connection#open` takes (what connect() would work out from a URL).
const OPEN_FIELDS = {
  clientProperties: { product: 'bench' },
  mechanism: 'PLAIN',
  response: Buffer.from('\0guest\0guest'),
  locale: 'en_US',
  channelMax: 0,
  frameMax: FRAME_MAX,
  heartbeat: 0,
  virtualHost: '/',
  capabilities: '',
  insist: 0,
};

// An open connection and channel of library `lib` over a fake socket (promise API).
async function fakeChannel(lib) {
  const sock = fakeSocket();
  const Connection = lib.Connection();
  const ChannelModel = lib.ChannelModel();
  const connection = new Connection(sock.stream);
  await new Promise((resolve, reject) => connection.open(OPEN_FIELDS, (err) => (err ? reject(err) : resolve())));
  const model = new ChannelModel(connection);
  const channel = await model.createChannel();
  return { sock, connection, model, channel };
}

// ------------------------------------------------------------------ measurement

// GC kinds as the 'gc' performance entries give them (entry.detail.kind).
const GC_KINDS = {
  [perfConstants.NODE_PERFORMANCE_GC_MINOR]: 'minor', // scavenge
  [perfConstants.NODE_PERFORMANCE_GC_MAJOR]: 'major', // mark-sweep-compact
  [perfConstants.NODE_PERFORMANCE_GC_INCREMENTAL]: 'incremental', // incremental marking
  [perfConstants.NODE_PERFORMANCE_GC_WEAKCB]: 'weak', // weak callbacks
};

// The process's peak resident set (VmHWM in /proc/self/status), in MB; null where there is
// no /proc.
function vmHwmMB() {
  try {
    const kb = /^VmHWM:\s+(\d+) kB/m.exec(fs.readFileSync('/proc/self/status', 'utf8'));
    return kb ? Number(kb[1]) / 1024 : null;
  } catch (_) {
    return null;
  }
}

// Collects GC entries from the moment it is made; `start()`/`stop()` bracket a measurement
// of CPU (user, system: all threads of the process), GC count and time (in all and by kind),
// and memory. With `heap`, also the bytes allocated on the JS heap (from V8's GC profile: what
// each GC found in use, less what the one before left). With `sample`, RSS is also sampled
// every 50 ms between start and stop (the highest sample is reported beside VmHWM, which
// covers the whole life of the process).
class Meter {
  constructor({ heap = false, sample = false } = {}) {
    this.heap = heap;
    this.sample = sample;
    this.gc = [];
    this.observer = new PerformanceObserver((list) => this.record(list.getEntries()));
    this.observer.observe({ entryTypes: ['gc'] });
  }

  record(entries) {
    for (const e of entries) this.gc.push([e.startTime, e.duration, GC_KINDS[e.detail?.kind] ?? 'other']);
  }

  start() {
    if (this.heap) {
      this.profiler = new v8.GCProfiler();
      this.heap0 = v8.getHeapStatistics().used_heap_size;
      this.profiler.start();
    }
    if (this.sample) {
      this.rssMax = process.memoryUsage.rss();
      this.sampler = setInterval(() => {
        this.rssMax = Math.max(this.rssMax, process.memoryUsage.rss());
      }, 50);
      this.sampler.unref();
    }
    this.t0 = performance.now();
    this.cpu0 = process.cpuUsage();
  }

  // Resolves once the GC entries up to now have come in.
  async stop(messages, extra = {}) {
    const cpu = process.cpuUsage(this.cpu0);
    const t1 = performance.now();
    const rss = process.memoryUsage.rss();
    if (this.heap) {
      const heapNow = v8.getHeapStatistics().used_heap_size;
      let allocated = 0;
      let after = this.heap0;
      for (const gc of this.profiler.stop().statistics) {
        allocated += gc.beforeGC.heapStatistics.usedHeapSize - after;
        after = gc.afterGC.heapStatistics.usedHeapSize;
      }
      extra = { heapBytes: (allocated + heapNow - after) / messages, ...extra };
    }
    if (this.sample) {
      clearInterval(this.sampler);
      extra = { rssSampledMB: Math.max(this.rssMax, rss) / 1048576, hwmMB: vmHwmMB(), ...extra };
    }
    await new Promise((r) => setTimeout(r, 20));
    this.record(this.observer.takeRecords());
    this.observer.disconnect();
    const gcs = this.gc.filter(([start]) => start >= this.t0 && start <= t1);
    const gcMs = gcs.reduce((sum, [, d]) => sum + d, 0);
    const gcKinds = {};
    for (const [, d, kind] of gcs) {
      gcKinds[kind] ??= { count: 0, ms: 0 };
      gcKinds[kind].count++;
      gcKinds[kind].ms += d;
    }
    return {
      messages,
      seconds: (t1 - this.t0) / 1000,
      cpuUs: (cpu.user + cpu.system) / messages,
      sysUs: cpu.system / messages,
      gcPer1k: (gcs.length * 1000) / messages,
      gcUs: (gcMs * 1000) / messages,
      gcMs,
      gcKinds,
      rssMB: rss / 1048576,
      peakMB: process.resourceUsage().maxRSS / 1024,
      ...extra,
    };
  }
}

// Prints a child's figures where `runChild` finds them.
function report(result) {
  process.stdout.write(`RESULT ${JSON.stringify(result)}\n`);
}

// Runs `node <script> ...args` (Node 24, the one running this) and returns its reported
// figures; a child that fails or overruns is reported as an error instead.
function runChild(script, args, timeoutMs = 60000) {
  let out;
  try {
    out = execFileSync(process.execPath, ['--expose-gc', path.join(__dirname, script), ...args], {
      encoding: 'utf8', timeout: timeoutMs, stdio: ['ignore', 'pipe', 'inherit'], killSignal: 'SIGKILL',
    });
  } catch (err) {
    // A script that failed may still have said why on a RESULT line ({ error }).
    out = err.stdout || '';
    if (!resultLine(out)) return { error: `${script} ${args.join(' ')}: ${err.message.split('\n')[0]}` };
  }
  const line = resultLine(out);
  return line ? JSON.parse(line.slice(7)) : { error: `${script} ${args.join(' ')}: no RESULT line` };
}

function resultLine(out) {
  return String(out).split('\n').reverse().find((l) => l.startsWith('RESULT '));
}

// A child exits by itself: when its work is done, or after `ms` whatever happens.
function deadline(ms, what) {
  setTimeout(() => {
    process.stderr.write(`${what}: timed out after ${ms} ms\n`);
    process.exit(3);
  }, ms).unref();
}

function percentile(sorted, p) {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

const turn = () => new Promise((r) => setImmediate(r));

function writeJson(file, data) {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, `${JSON.stringify(data, null, 2)}\n`);
}

// Command-line arguments of the scripts: the first bare number, and `--name=value` options
// (`--name` alone is `true`), by name (`option`, strings only), as flags (`flag`), or all of
// them as an object (`options`).
function cliArgs(argv = process.argv.slice(2)) {
  const options = {};
  for (const a of argv) {
    const m = /^--([^=]+)(?:=(.*))?$/.exec(a);
    if (m) options[m[1]] = m[2] === undefined ? true : m[2];
  }
  const number = argv.find((a) => /^\d+$/.test(a));
  return {
    number: (fallback) => Number(number || fallback),
    option: (name, fallback) => (typeof options[name] === 'string' ? options[name] : fallback),
    flag: (name) => options[name] !== undefined,
    options,
  };
}

// ------------------------------------------------------------------ driver and child
//
// The scenarios against the broker run as a driver (always amqplib: it declares, fills and
// deletes the queues, so every library faces the same broker state) and one or more child
// processes running the library under test, which measure themselves and send their figures
// back over IPC.

const AMQP_URL = process.env.AMQP_URL || 'amqp://guest:guest@127.0.0.1:5672';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// A queue name no other run uses.
function uniqueName(what) {
  return `amqplib-rs-bench.${what}.${process.pid}.${Date.now().toString(36)}`;
}

// A child process running `script --child ...args` (with extra Node flags `execArgv`).
// `next(key)` resolves with the next message from it that has `key` (rejects if it exits
// first); `send(m)` writes to it; `end()` waits a little for it to exit, then kills it.
class Child {
  constructor(script, args, execArgv = []) {
    this.proc = fork(path.join(__dirname, script), ['--child', ...args], {
      execArgv: ['--expose-gc', ...execArgv], stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    this.inbox = [];
    this.waiting = [];
    this.proc.on('message', (m) => {
      if (m.error) this.error = m.error;
      this.inbox.push(m);
      this.deliver();
    });
    // 'close' comes after the last message has been read, unlike 'exit'.
    this.exited = new Promise((resolve) => this.proc.once('close', (code, signal) => resolve(signal || code)));
    this.exited.then((how) => {
      this.how = how;
      this.deliver();
    });
    this.what = `${script} ${args.join(' ')}`;
  }

  // Hands messages to those waiting for them; once the child is gone, fails the rest.
  deliver() {
    for (const w of this.waiting.slice()) {
      const i = this.inbox.findIndex((m) => m[w.key] !== undefined);
      if (i >= 0) w.resolve(this.inbox.splice(i, 1)[0]);
      else if (this.how !== undefined) w.reject(new Error(this.error || `${this.what} exited (${this.how}) before '${w.key}'`));
      else continue;
      this.waiting.splice(this.waiting.indexOf(w), 1);
    }
  }

  next(key) {
    return new Promise((resolve, reject) => {
      this.waiting.push({ key, resolve, reject });
      this.deliver();
    });
  }

  send(m) {
    this.proc.send(m);
  }

  async end(ms = 3000) {
    await Promise.race([this.exited, sleep(ms)]);
    if (this.proc.exitCode === null && this.proc.signalCode === null) this.proc.kill('SIGKILL');
  }
}

// In a child: resolves with the next message from the driver that has `key`.
function fromDriver(key) {
  return new Promise((resolve) => {
    const onMessage = (m) => {
      if (m[key] === undefined) return;
      process.off('message', onMessage);
      resolve(m);
    };
    process.on('message', onMessage);
  });
}

// Runs a child's work: `work()` resolves with its figures, which go to the driver; then the
// child exits whatever the library left open. On an error it tells the driver why and exits
// 1; after `ms` it exits 3.
function childMain(what, ms, work) {
  deadline(ms, what);
  work().then((result) => {
    process.send({ result }, () => process.exit(0));
  }, (err) => {
    console.error(`${what}:`, err);
    process.send({ error: `${what}: ${err.message}` }, () => process.exit(1));
  });
}

// Runs the driver's work and prints its figures for `runChild`; on an error, prints why (as
// a RESULT with `error`, which run.js shows in its table) and exits 1.
function driverMain(what, ms, work) {
  deadline(ms, what);
  work().then((result) => {
    report(result);
    process.exit(0);
  }, (err) => {
    console.error(`${what}:`, err);
    report({ error: err.message });
    process.exit(1);
  });
}

// An amqplib connection and channel for a driver; `fill(queue, count, body)` publishes
// `count` copies of `body` to `queue` (waiting for 'drain' when told to) and resolves once the
// broker holds them all.
async function driverChannel() {
  const model = await load('amqplib').api().connect(AMQP_URL);
  const channel = await model.createChannel();
  const fill = async (queue, count, body) => {
    for (let i = 0; i < count; i++) {
      if (!channel.sendToQueue(queue, body)) await new Promise((r) => channel.once('drain', r));
    }
    while ((await channel.checkQueue(queue)).messageCount < count) await sleep(20);
  };
  const close = () => Promise.race([model.close().catch(() => {}), sleep(2000)]);
  return { model, channel, fill, close };
}

// The version in a library's package.json.
function libVersion(name) {
  return require(path.join(LIBS[name], 'package.json')).version;
}

// A small deterministic generator (mulberry32), so that a random run can be repeated from its
// seed (the tests use it too).
function prng(seed) {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

module.exports = {
  prng,
  ROOT, LIBS, SIZES, M, FRAME_MAX, AMQP_URL, load, libVersion, cliArgs, method, header, message,
  deliveryTemplates, DeliveryStream, FrameScanner, fakeSocket, fakeChannel, OPEN_FIELDS, Meter, vmHwmMB, report,
  runChild, deadline, percentile, turn, sleep, writeJson, uniqueName, Child, fromDriver, childMain, driverMain,
  driverChannel,
};
