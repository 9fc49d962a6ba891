'use strict';
// Before/after of our own code, alternately: each scenario runs in checkout A, then in B (the
// order swapped every other pair, so that a machine slowing down weighs on both), ours only.
// `node benchmarks/ab.js <dirA> <dirB> [pairs] [scenario ...]`; AB_ENV_A and AB_ENV_B (JSON)
// add environment variables to each side, e.g. AB_ENV_B='{"BENCH_TRACE_SUBSCRIBER":"1"}' with
// A and B the same checkout for what a tracing subscriber costs. Prints a Markdown table of
// medians with every run's figure: CPU, GC and peak memory, and throughput or latency where
// the scenario has them.

const { execFileSync } = require('node:child_process');
const path = require('node:path');

const [dirA, dirB, pairsArg, ...only] = process.argv.slice(2);
const envA = JSON.parse(process.env.AB_ENV_A || '{}');
const envB = JSON.parse(process.env.AB_ENV_B || '{}');
const pairs = Number(pairsArg || 5);

// name, script, arguments, the figures compared (the first is the CPU one).
const COST = ['gcPer1k', 'peakMB'];
const SCENARIOS = [
  ['parse.1k', 'parse.js', ['ours'], ['nsPerMessage', 'heapBytes', ...COST]],
  ['parse.1k.small-reads', 'parse.js', ['ours', '1200'], ['nsPerMessage', 'heapBytes', ...COST]],
  ['send.100', 'send.js', ['ours', '100'], ['cpuUs', ...COST]],
  ['send.1k', 'send.js', ['ours', '1k'], ['cpuUs', ...COST]],
  ['receive.1k', 'receive.js', ['ours', '1k', 'noack'], ['cpuUs', ...COST]],
  ['receive.1k.ack', 'receive.js', ['ours', '1k', 'ack'], ['cpuUs', ...COST]],
  ['deliver.1k', 'broker.js', ['deliver.1k', 'ours'], ['cpuUs', ...COST]],
  ['publish.1k', 'broker.js', ['publish.1k', 'ours'], ['cpuUs', ...COST]],
  ['turn.1k', 'broker.js', ['turn.1k', 'ours'], ['cpuUs', ...COST, 'p50Ms', 'p99Ms']],
  ['saturation.publish', 'saturation.js', ['ours', 'publish', '20000'], ['cpuUs', 'msgsPerSec', 'gcPer1k', 'hwmMB']],
  ['saturation.confirm', 'saturation.js', ['ours', 'confirm', '20000'], ['cpuUs', 'msgsPerSec', 'gcPer1k', 'hwmMB']],
  ['saturation.consume', 'saturation.js', ['ours', 'consume', '20000'], ['cpuUs', 'msgsPerSec', 'gcPer1k', 'hwmMB']],
  ['rpc', 'rpc.js', ['ours', '2000', '--warm=200'], ['cpuUs', 'perSec', 'p50Ms', 'p99Ms', 'hwmMB']],
  ['latency.nodelay', 'latency.js', ['ours', 'nodelay', '2'], ['cpuUs', 'p50Ms', 'p99Ms']],
].filter(([name]) => only.length === 0 || only.includes(name));

function run(dir, script, args, env) {
  const out = execFileSync(process.execPath, ['--expose-gc', path.join(path.resolve(dir), 'benchmarks', script), ...args], {
    encoding: 'utf8', env: { ...process.env, ...env }, timeout: 300000,
  });
  return JSON.parse(out.split('\n').reverse().find((l) => l.startsWith('RESULT ')).slice(7));
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const figures = (runs, key) => runs.map((r) => r[key].toFixed(2)).join(' ');

console.log('| scenario | figure | A | B | B/A | A runs | B runs |');
console.log('|---|---|---|---|---|---|---|');
for (const [name, script, args, keys] of SCENARIOS) {
  const a = [];
  const b = [];
  for (let i = 0; i < pairs; i++) {
    const sides = [[dirA, a, envA], [dirB, b, envB]];
    for (const [dir, runs, env] of i % 2 ? sides.reverse() : sides) runs.push(run(dir, script, args, env));
  }
  for (const key of keys) {
    const ma = median(a.map((r) => r[key]));
    const mb = median(b.map((r) => r[key]));
    console.log(`| ${name} | ${key} | ${ma.toFixed(2)} | ${mb.toFixed(2)} | ${(mb / ma).toFixed(2)} | ${figures(a, key)} | ${figures(b, key)} |`);
  }
}
