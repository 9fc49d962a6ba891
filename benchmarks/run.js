'use strict';
// Runs the benchmarks, each library in a process of its own, one after the other, in two
// rounds; prints a markdown table per benchmark and writes the raw figures to
// benchmarks/results/latest.json (and the tables to latest.md). Per round, not averaged.
//
// parse, receive, send and broker compare amqplib and ours: each cell is
// `amqplib / ours (ours ÷ amqplib)`. The families of issue 16 (saturation, tiny, large, rpc,
// latency; see each script) run all four clients of benchmarks/clients.js: a row per library,
// each cell `value (value ÷ amqplib's)`. They take about 10 minutes for the two rounds on two
// cores.
//
//   node benchmarks/run.js [--quick] [parse] [receive] [send] [broker] [saturation] [tiny]
//                          [large] [rpc] [latency]                      (default: all of them)
//
// --quick: one round, and the issue-16 families with small counts and short runs (a smoke
// run of a minute or two; parse, receive, send and broker have no smaller setting).

const path = require('node:path');
const fs = require('node:fs');
const { load, libVersion, runChild, writeJson } = require('./lib');
const { LIBRARIES } = require('./clients');

const LIBS = ['amqplib', 'ours'];
const LABELS = { amqplib: 'amqplib', ours: 'amqplib-rs', cloudamqp: '@cloudamqp/amqp-client', 'rabbitmq-client': 'rabbitmq-client' };
const RECEIVE_SIZES = ['100', '1k', '16k', '64k', '448k'];
const BROKER_SIZES = ['100', '1k', '64k', '448k'];

// Each benchmark: its script, its scenarios (name and arguments after the library), and
// the columns of its table: [heading, key, decimals].
const BENCHMARKS = {
  parse: {
    script: 'parse.js',
    scenarios: [['parse.1k', []], ['parse.1k.small-reads', ['1200']]],
    columns: [['ns/msg', 'nsPerMessage', 0], ['heap B/msg', 'heapBytes', 0], ['GC/1k', 'gcPer1k', 2],
      ['GC µs', 'gcUs', 3], ['peak MB', 'peakMB', 0]],
  },
  receive: {
    script: 'receive.js',
    scenarios: RECEIVE_SIZES.flatMap((s) => [[`receive.${s}`, [s, 'noack']], [`receive.${s}.ack`, [s, 'ack']]]),
    harness: 'none', // the fake broker's share of the CPU figure, run alone
    columns: [['CPU µs', 'cpuUs', 2], ['sys µs', 'sysUs', 2], ['GC/1k', 'gcPer1k', 2], ['GC µs', 'gcUs', 2],
      ['RSS MB', 'rssMB', 0], ['peak MB', 'peakMB', 0], ['writes/msg', 'writes', 3]],
  },
  send: {
    script: 'send.js',
    scenarios: RECEIVE_SIZES.map((s) => [`send.${s}`, [s]]),
    columns: [['CPU µs', 'cpuUs', 2], ['sys µs', 'sysUs', 2], ['GC/1k', 'gcPer1k', 2], ['GC µs', 'gcUs', 2],
      ['RSS MB', 'rssMB', 0], ['peak MB', 'peakMB', 0], ['writes/msg', 'writes', 4]],
  },
  broker: {
    script: 'broker.js',
    scenarios: ['deliver', 'turn', 'publish'].flatMap((k) => BROKER_SIZES.map((s) => [`${k}.${s}`, [`${k}.${s}`]])),
    argsFirst: true, // broker.js takes the scenario before the library
    columns: [['CPU µs', 'cpuUs', 1], ['sys µs', 'sysUs', 1], ['GC/1k', 'gcPer1k', 2], ['GC µs', 'gcUs', 2],
      ['RSS MB', 'rssMB', 0], ['peak MB', 'peakMB', 0], ['writes/msg', 'writes', 3], ['p50 ms', 'p50Ms', 2],
      ['p99 ms', 'p99Ms', 2]],
  },
};

const GC_KIND_COLUMNS = ['minor', 'major', 'incremental', 'weak'].flatMap((k) => [[`${k} n`, `gcKinds.${k}.count`, 0], [`${k} ms`, `gcKinds.${k}.ms`, 0]]);

// The families of issue 16: every scenario for each of LIBRARIES. A scenario is [name,
// arguments after the library, the same with --quick]; `timeoutMs` is per child.
const PEER_BENCHMARKS = {
  saturation: {
    script: 'saturation.js',
    timeoutMs: 180000,
    scenarios: [['publish', ['publish'], ['publish', '10000']], ['confirm', ['confirm'], ['confirm', '5000']],
      ['consume', ['consume'], ['consume', '10000']]],
    columns: [['msgs/s', 'msgsPerSec', 0], ['CPU µs/msg', 'cpuUs', 1], ['GC/1k', 'gcPer1k', 2], ['GC ms', 'gcMs', 0],
      ['peak MB', 'hwmMB', 0], ['sampled max MB', 'rssSampledMB', 0]],
  },
  tiny: {
    script: 'tiny.js',
    timeoutMs: 300000,
    scenarios: ['128', '2048'].map((heap) => [`heap.${heap}`, [heap, '200000'], [heap, '20000']]),
    columns: [['wall s', 'seconds', 2], ['CPU s', 'cpuS', 2], ['msgs/s', 'msgsPerSec', 0], ['GC n', 'gcCount', 0],
      ['GC ms', 'gcMs', 0], ...GC_KIND_COLUMNS, ['peak MB', 'hwmMB', 0]],
  },
  large: {
    script: 'large.js',
    timeoutMs: 180000,
    scenarios: [['1m', ['1m'], ['1m', '5']], ['448k', ['448k'], ['448k', '5']]],
    columns: [['wall s', 'seconds', 2], ['MB/s', 'MBps', 0], ['consumer peak MB', 'consumerPeakMB', 0],
      ['consumer sampled MB', 'consumerSampledMB', 0], ['consumer GC/1k', 'consumerGcPer1k', 1],
      ['consumer GC ms', 'consumerGcMs', 0], ['consumer CPU µs/msg', 'consumerCpuUs', 0],
      ['publisher peak MB', 'publisherPeakMB', 0], ['publisher sampled MB', 'publisherSampledMB', 0],
      ['publisher CPU µs/msg', 'publisherCpuUs', 0]],
  },
  rpc: {
    script: 'rpc.js',
    timeoutMs: 150000,
    scenarios: [['rpc', [], ['1000', '--warm=100']]],
    columns: [['round trips/s', 'perSec', 0], ['p50 ms', 'p50Ms', 3], ['p99 ms', 'p99Ms', 3], ['CPU µs/rt', 'cpuUs', 1],
      ['GC/1k', 'gcPer1k', 2], ['peak MB', 'hwmMB', 0]],
  },
  latency: {
    script: 'latency.js',
    timeoutMs: 150000,
    scenarios: [['default', ['default'], ['default', '2']], ['nodelay', ['nodelay'], ['nodelay', '2']]],
    columns: [['p50 ms', 'p50Ms', 2], ['p99 ms', 'p99Ms', 2], ['p99.9 ms', 'p999Ms', 2], ['max ms', 'maxMs', 2],
      ['CPU µs/msg', 'cpuUs', 1], ['GC/1k', 'gcPer1k', 2], ['noDelay', 'noDelay']],
  },
};

function fixed(v, d) {
  return typeof v === 'number' ? v.toFixed(d) : '–';
}

// "amqplib / ours (ours ÷ amqplib)"
function cell(a, o, d) {
  const ratio = typeof a === 'number' && typeof o === 'number' && a > 0 ? ` (${(o / a).toFixed(2)})` : '';
  return `${fixed(a, d)} / ${fixed(o, d)}${ratio}`;
}

function table(name, bench, runs) {
  const head = ['scenario', 'round', ...bench.columns.map(([h]) => h)];
  if (bench.harness) head.push('harness CPU µs');
  const lines = [`### ${name}`, '', `| ${head.join(' | ')} |`, `|${head.map(() => '---').join('|')}|`];
  for (const run of runs) {
    const [a, o] = [run.amqplib, run.ours];
    const cells = bench.columns.map(([, key, d]) => cell(a[key], o[key], d));
    if (bench.harness) cells.push(fixed(run[bench.harness]?.cpuUs, 2));
    lines.push(`| ${run.scenario} | ${run.round} | ${cells.join(' | ')} |`);
    for (const lib of LIBS) if (run[lib].error) lines.push(`| ${run.scenario} | ${run.round} | ${lib}: ${run[lib].error} |`);
  }
  return lines.join('\n');
}

// A figure by its key; `a.b.c` looks into nested objects. A GC kind that did not occur is 0.
function pick(result, key) {
  const value = key.split('.').reduce((v, k) => (v == null ? undefined : v[k]), result);
  if (value === undefined && key.startsWith('gcKinds.') && result.gcKinds) return 0;
  if (key === 'gcCount' && result.gcKinds) return Object.values(result.gcKinds).reduce((n, k) => n + k.count, 0);
  return value;
}

// "value (value ÷ amqplib's)"; text as it is.
function peerCell(v, base, d) {
  if (typeof v !== 'number') return v === undefined || v === null ? '–' : String(v);
  const ratio = typeof base === 'number' && base > 0 ? ` (${(v / base).toFixed(2)})` : '';
  return `${fixed(v, d)}${ratio}`;
}

function peerTable(name, bench, runs) {
  const head = ['scenario', 'round', 'library', ...bench.columns.map(([h]) => h)];
  const lines = [`### ${name}`, '', `| ${head.join(' | ')} |`, `|${head.map(() => '---').join('|')}|`];
  for (const run of runs) {
    const base = run.amqplib;
    for (const lib of LIBRARIES) {
      const r = run[lib];
      const cells = r.error
        ? [r.error, ...bench.columns.slice(1).map(() => '')]
        : bench.columns.map(([, key, d]) => peerCell(pick(r, key), lib === 'amqplib' || base.error ? undefined : pick(base, key), d));
      lines.push(`| ${run.scenario} | ${run.round} | ${LABELS[lib]} | ${cells.join(' | ')} |`);
    }
  }
  return lines.join('\n');
}

async function brokerVersion() {
  try {
    const model = await load('amqplib').api().connect(process.env.AMQP_URL || 'amqp://guest:guest@127.0.0.1:5672');
    const version = model.connection.serverProperties?.version?.toString();
    await model.close();
    return version;
  } catch (err) {
    return `unreachable (${err.message})`;
  }
}

function header(out, names) {
  const rounds = `${out.rounds} round${out.rounds === 1 ? '' : 's'}`;
  const parts = [`Benchmarks, ${out.date.slice(0, 10)}: Node ${out.node}, RabbitMQ ${out.rabbitmq ?? '(not used)'}, ${out.machine}.`];
  if (names.some((n) => BENCHMARKS[n])) {
    parts.push(`Each cell: amqplib 2.0.1 / amqplib-rs (ours ÷ amqplib). Per message; ${rounds}, not averaged.`);
  }
  if (names.some((n) => PEER_BENCHMARKS[n])) {
    const versions = LIBRARIES.map((lib) => `${LABELS[lib]} ${libVersion(lib)}`).join(', ');
    parts.push(`Issue-16 families (${versions}${out.quick ? '; --quick' : ''}): a row per library, each cell value (÷ amqplib's); ${rounds}, not averaged.`);
  }
  return parts.join(' ');
}

async function main() {
  const argv = process.argv.slice(2);
  const quick = argv.includes('--quick');
  const wanted = argv.filter((a) => a !== '--quick');
  const all = { ...BENCHMARKS, ...PEER_BENCHMARKS };
  const names = wanted.length ? wanted : Object.keys(all);
  for (const n of names) if (!all[n]) throw new Error(`unknown benchmark ${n}; expected ${Object.keys(all)}`);
  const started = Date.now();
  const out = {
    date: new Date().toISOString(),
    node: process.version,
    rabbitmq: names.some((n) => n === 'broker' || PEER_BENCHMARKS[n]) ? await brokerVersion() : null,
    machine: `${require('node:os').cpus().length} CPUs, ${require('node:os').cpus()[0]?.model}`,
    quick,
    rounds: quick ? 1 : 2,
    results: {},
  };
  for (const name of names) {
    const peer = !!PEER_BENCHMARKS[name];
    const bench = all[name];
    const runs = [];
    for (let round = 1; round <= out.rounds; round++) {
      for (const [scenario, args, quickArgs] of bench.scenarios) {
        const run = { scenario, round };
        const libs = peer ? LIBRARIES : bench.harness ? [...LIBS, bench.harness] : LIBS;
        const scenarioArgs = peer && quick ? quickArgs : args;
        for (const lib of libs) {
          run[lib] = runChild(bench.script, bench.argsFirst ? [...scenarioArgs, lib] : [lib, ...scenarioArgs], bench.timeoutMs);
          if (run[lib].error) process.stderr.write(`${run[lib].error}\n`);
        }
        runs.push(run);
        process.stderr.write(`${name} round ${round} ${scenario}: ${((Date.now() - started) / 1000).toFixed(0)} s\n`);
      }
    }
    out.results[name] = runs;
  }
  out.seconds = (Date.now() - started) / 1000;

  const tables = names.map((n) => (PEER_BENCHMARKS[n] ? peerTable(n, all[n], out.results[n]) : table(n, all[n], out.results[n])));
  const md = [header(out, names), ...tables].join('\n\n');
  console.log(md);
  const file = path.join(__dirname, 'results', 'latest.json');
  writeJson(file, out);
  fs.writeFileSync(path.join(__dirname, 'results', 'latest.md'), `${md}\n`);
  process.stderr.write(`wrote ${file} (${out.seconds.toFixed(0)} s)\n`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
