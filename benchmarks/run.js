'use strict';
// Runs the benchmarks, each library in a process of its own, one after the other, in two
// rounds; prints a markdown table per benchmark (amqplib / ours (ratio) in each cell, per
// round, not averaged) and writes the raw figures to benchmarks/results/latest.json.
//
//   node benchmarks/run.js [parse] [receive] [send] [broker]     (default: all of them)

const path = require('node:path');
const fs = require('node:fs');
const { load, runChild, writeJson } = require('./lib');

const LIBS = ['amqplib', 'ours'];
const ROUNDS = 2;
const RECEIVE_SIZES = ['100', '1k', '16k', '64k', '448k'];
const BROKER_SIZES = ['100', '1k', '64k', '448k'];

// Each benchmark: its script, its scenarios (name and arguments after the library), and
// the columns of its table: [heading, key, decimals].
const BENCHMARKS = {
  parse: {
    script: 'parse.js',
    scenarios: [['parse.1k', []]],
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

async function main() {
  const wanted = process.argv.slice(2);
  const names = wanted.length ? wanted : Object.keys(BENCHMARKS);
  for (const n of names) if (!BENCHMARKS[n]) throw new Error(`unknown benchmark ${n}; expected ${Object.keys(BENCHMARKS)}`);
  const started = Date.now();
  const out = {
    date: new Date().toISOString(),
    node: process.version,
    rabbitmq: names.includes('broker') ? await brokerVersion() : null,
    machine: `${require('node:os').cpus().length} CPUs, ${require('node:os').cpus()[0]?.model}`,
    results: {},
  };
  for (const name of names) {
    const bench = BENCHMARKS[name];
    const runs = [];
    for (let round = 1; round <= ROUNDS; round++) {
      for (const [scenario, args] of bench.scenarios) {
        const run = { scenario, round };
        const libs = bench.harness ? [...LIBS, bench.harness] : LIBS;
        for (const lib of libs) {
          run[lib] = runChild(bench.script, bench.argsFirst ? [...args, lib] : [lib, ...args]);
          if (run[lib].error) process.stderr.write(`${run[lib].error}\n`);
        }
        runs.push(run);
        process.stderr.write(`${name} round ${round} ${scenario}: ${((Date.now() - started) / 1000).toFixed(0)} s\n`);
      }
    }
    out.results[name] = runs;
  }
  out.seconds = (Date.now() - started) / 1000;

  const header = `Benchmarks, ${out.date.slice(0, 10)}: Node ${out.node}, RabbitMQ ${out.rabbitmq ?? '(not used)'}, ${out.machine}. ` +
    `Each cell: amqplib 2.0.1 / amqplib-rs (ours ÷ amqplib). Per message; ${ROUNDS} rounds, not averaged.`;
  const md = [header, ...names.map((n) => table(n, BENCHMARKS[n], out.results[n]))].join('\n\n');
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
