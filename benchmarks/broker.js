'use strict';
// With the real broker. The process under measurement (a child, one library) runs on its
// own; this process is the driver (always amqplib, so both libraries face the same one)
// and sends at a fixed rate below what either can take.
//
//   deliver.<size>   the child consumes (noAck) and does nothing
//   turn.<size>      the child answers each message with a publish to its replyTo queue and
//                    acks it; the driver measures the round trip (p50, p99)
//   publish.<size>   the child publishes, at the fixed rate, to a key nothing is bound to
//
// The child measures itself, from the first message after the warm-up to the last:
// process.cpuUsage (all threads), GC entries, RSS and peak RSS, and writes to its socket
// (by wrapping connection.stream.write, where the connection has a stream).
//
//   node benchmarks/broker.js <scenario> <amqplib|ours>          driver (starts the child)
//   node benchmarks/broker.js --child <scenario> <amqplib|ours>  the process under measurement

const { fork } = require('node:child_process');
const { once } = require('node:events');
const { performance } = require('node:perf_hooks');
const { load, SIZES, Meter, report, deadline, percentile, sleep } = require('./lib');

const URL = process.env.AMQP_URL || 'amqp://guest:guest@127.0.0.1:5672';
// Messages per second, by size; a scenario warms up for WARM_S then is measured for MEASURE_S.
const RATE = { '100': 4000, '1k': 4000, '64k': 400, '448k': 60 };
const WARM_S = 0.5;
const MEASURE_S = 3;
// Nagle's algorithm off on every connection, so that latency shows the clients, not the
// interplay of Nagle with delayed ACKs (which holds small writes back by tens of ms).
const SOCKET_OPTIONS = { noDelay: true };
const PROPS = { contentType: 'application/octet-stream', headers: { 'x-source': 'bench' } };

// Calls `send(i)` for i = 0..count-1 at `rate` per second; waits for 'drain' when told to.
async function paced(channel, rate, count, send) {
  const t0 = performance.now();
  for (let i = 0; i < count;) {
    const due = Math.min(count, Math.floor(((performance.now() - t0) * rate) / 1000) + 1);
    let ok = true;
    while (i < due) ok = send(i++) && ok;
    if (!ok) await once(channel, 'drain');
    else await sleep(2);
  }
}

function plan(scenario) {
  const [kind, sizeName] = scenario.split('.');
  const rate = RATE[sizeName];
  if (!['deliver', 'turn', 'publish'].includes(kind) || !rate) throw new Error(`unknown scenario ${scenario}`);
  return { kind, sizeName, size: SIZES[sizeName], rate, warm: Math.round(rate * WARM_S), measure: Math.round(rate * MEASURE_S) };
}

// ------------------------------------------------------------------ the measured process

// Counts the connection's writes to its socket: calls of stream.write where the connection
// writes to a Node stream; where its socket is written natively (ours: a `flushOutput` that
// writes the session's queued output), the flushes that had something to write. `waiting()`
// is what is still queued for the socket.
function countWrites(connection) {
  const counter = { writes: 0, by: null, waiting: () => 0 };
  const stream = connection?.stream;
  if (stream && typeof stream.write === 'function') {
    const write = stream.write;
    stream.write = function countedWrite(...args) {
      counter.writes++;
      return write.apply(this, args);
    };
    counter.by = 'stream.write';
    counter.waiting = () => stream.writableLength;
  } else if (stream && typeof stream.flushOutput === 'function' && connection.session && 'pendingOutput' in connection.session) {
    const flushOutput = stream.flushOutput;
    stream.flushOutput = function countedFlush(...args) {
      if (connection.session.pendingOutput > 0) counter.writes++;
      return flushOutput.apply(this, args);
    };
    counter.by = 'flushOutput';
    counter.waiting = () => connection.session.pendingOutput;
  }
  return counter;
}

async function child(scenario, name) {
  const p = plan(scenario);
  deadline(40000, `broker child ${scenario} ${name}`);
  const model = await load(name).api().connect(URL, SOCKET_OPTIONS);
  const counter = countWrites(model.connection);
  const channel = await model.createChannel();
  const meter = new Meter();
  let writes0 = 0;
  let finished;
  const done = new Promise((resolve) => { finished = resolve; });
  const mark = (n) => {
    if (n === p.warm) {
      writes0 = counter.writes;
      meter.start();
    } else if (n === p.warm + p.measure) finished();
  };

  if (p.kind === 'publish') {
    const content = Buffer.alloc(p.size, 0x63);
    process.send({ ready: true });
    await paced(channel, p.rate, p.warm + p.measure, (i) => {
      mark(i);
      return channel.publish('amq.direct', `nowhere.${process.pid}`, content, PROPS);
    });
    // Until everything has been handed to the socket.
    for (let i = 0; i < 500 && counter.waiting() > 0; i++) await sleep(2);
    finished();
  } else {
    const queue = `bench.${scenario}.${process.pid}`;
    await channel.assertQueue(queue, { exclusive: true, autoDelete: true });
    let n = 0;
    if (p.kind === 'deliver') {
      await channel.consume(queue, () => mark(++n), { noAck: true });
    } else {
      await channel.prefetch(100);
      await channel.consume(queue, (msg) => {
        channel.publish('', msg.properties.replyTo, msg.content, { correlationId: msg.properties.correlationId });
        channel.ack(msg);
        mark(++n);
      }, { noAck: false });
    }
    process.send({ ready: true, queue });
  }
  await done;
  await sleep(0);
  const result = await meter.stop(p.measure, {
    writes: counter.by ? (counter.writes - writes0) / p.measure : null,
    writesCountedBy: counter.by,
  });
  process.send({ result });
  await Promise.race([model.close().catch(() => {}), sleep(1000)]);
  process.exit(0);
}

// ------------------------------------------------------------------ the driver

async function driver(scenario, name) {
  const p = plan(scenario);
  deadline(50000, `broker driver ${scenario} ${name}`);
  const proc = fork(__filename, ['--child', scenario, name], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const exited = once(proc, 'exit');
  const fromChild = (key) => new Promise((resolve, reject) => {
    const onMessage = (m) => {
      if (m[key] !== undefined) {
        proc.off('message', onMessage);
        resolve(m);
      }
    };
    proc.on('message', onMessage);
    exited.then(([code]) => reject(new Error(`child exited (${code}) before ${key}`)));
  });
  const ready = await fromChild('ready');
  const resultP = fromChild('result');
  let model = null;
  let latency = {};
  try {
    if (p.kind !== 'publish') {
      model = await load('amqplib').api().connect(URL, SOCKET_OPTIONS);
      const channel = await model.createChannel();
      const content = Buffer.alloc(p.size, 0x64);
      const total = p.warm + p.measure;
      const sentAt = new Float64Array(total);
      const rtt = [];
      let props = PROPS;
      if (p.kind === 'turn') {
        const { queue: replyTo } = await channel.assertQueue('', { exclusive: true });
        await channel.consume(replyTo, (msg) => {
          const i = Number(msg.properties.correlationId);
          if (i >= p.warm) rtt.push(performance.now() - sentAt[i]);
        }, { noAck: true });
        props = (i) => ({ ...PROPS, replyTo, correlationId: String(i) });
      }
      await paced(channel, p.rate, total, (i) => {
        sentAt[i] = performance.now();
        return channel.sendToQueue(ready.queue, content, typeof props === 'function' ? props(i) : props);
      });
      await resultP;
      if (p.kind === 'turn') {
        for (let i = 0; i < 100 && rtt.length < p.measure; i++) await sleep(10);
        rtt.sort((a, b) => a - b);
        latency = { p50Ms: percentile(rtt, 50), p99Ms: percentile(rtt, 99), replies: rtt.length };
      }
    }
    const { result } = await resultP;
    report({ lib: name, scenario, rate: p.rate, ...result, ...latency });
  } finally {
    if (model) await Promise.race([model.close().catch(() => {}), sleep(1000)]);
    await Promise.race([exited, sleep(3000)]);
    if (proc.exitCode === null) proc.kill('SIGKILL');
  }
  process.exit(0);
}

const args = process.argv.slice(2);
const run = args[0] === '--child' ? child(args[1], args[2]) : driver(args[0], args[1]);
run.catch((err) => {
  console.error(err);
  process.exit(1);
});
