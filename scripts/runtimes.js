#!/usr/bin/env node
'use strict';
// `node scripts/runtimes.js bun|deno [--compat]` (steps of `npm run test:full`): our JS tests
// (with --compat, amqplib's own suite, as compat/run.js runs it on Node) under Bun or Deno (both
// from the npm registry, devDependencies), each test file by the runtime's own test runner
// (`bun test`, `deno test`: both run node:test suites), against AMQP_URL's broker, with the
// runtime's default transport (the stream path: lib/native_socket.js).
//
// What a runtime does differently is listed, with its reason, in __test__/runtimes/
// exemptions.json (the README shows the list; amqplib's files as compat/<file>): a test named
// there may fail (a name ending in "*", every test whose name starts so), a file named with "*"
// is not run; every other test must pass, and a file must run to its end (within 3 minutes). A
// listed test that passes is said, so that the list only shrinks.

const { spawn } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const root = path.join(__dirname, '..');
const bin = (name) => path.join(root, 'node_modules', '.bin', process.platform === 'win32' ? `${name}.cmd` : name);

// How each runtime runs one file, and how its report names a failed test ("suite > test").
const RUNTIMES = {
  bun: {
    // A path starting with ./ is a file to Bun; anything else a filter, matched against every
    // file under the root, symlinks followed (Wine's prefix under target/ links to /).
    command: (file) => [bin('bun'), ['test', '--timeout', '60000', `./${file}`]],
    failures: (out) => [...out.matchAll(/^\(fail\) (.+?)(?: \[[\d.]+m?s\])?$/gm)].map((m) => m[1]),
    finished: (out) => /^Ran \d+ tests? across/m.test(out),
  },
  deno: {
    // CommonJS test files, not type-checked (lib/'s JSDoc types are for tsc).
    command: (file) => [bin('deno'), ['test', '--allow-all', '--no-check', '--unstable-detect-cjs', file]],
    // Deno looks for a newer release of itself at dl.deno.land unless told not to: nothing
    // may leave the machine.
    env: { DENO_NO_UPDATE_CHECK: '1' },
    failures: (out) => [...new Set([...out.matchAll(/^(.+?) => \S+:\d+:\d+$/gm)].map((m) => m[1].split(' ... ').join(' > ')))],
    finished: (out) => /^(ok|FAILED) \| \d+ passed/m.test(out),
  },
};

const name = process.argv[2];
const runtime = RUNTIMES[name];
const compat = process.argv.includes('--compat');
if (!runtime) {
  console.error('usage: node scripts/runtimes.js bun|deno [--compat]');
  process.exit(2);
}
const exemptions = JSON.parse(fs.readFileSync(path.join(root, '__test__', 'runtimes', 'exemptions.json'), 'utf8'))[name];
const plain = (text) => text.replace(/\x1b\[[0-9;]*m/g, '');

// Runs each file (a path under the root) by the runtime's runner. `listFor(file)` says what
// may fail in it: `listed`, this runtime's exemptions (test name: reason; '*' for a file not
// run), and `skippedOnNode`, names of tests that compat/exemptions.json leaves out on Node too
// (the runners cannot skip a test by name, so they may fail here). Returns the problems.
async function runFiles(files, listFor, env = {}) {
  const problems = [];
  const shrinkable = [];
  for (const file of files) {
    const { listed, skippedOnNode = [] } = listFor(file);
    if ('*' in listed) {
      console.log(`${file}: not run (${listed['*']})`);
      continue;
    }
    const mayFail = (test) => listedFor(listed, test) !== undefined || skippedOnNode.some((skipped) => test.endsWith(skipped));
    const [command, args] = runtime.command(file);
    const started = Date.now();
    const run = await runToEnd(command, args, { cwd: root, timeout: 180_000, env: { ...process.env, ...runtime.env, ...env } });
    const out = plain(run.output);
    const failed = runtime.failures(out);
    const unexpected = failed.filter((test) => !mayFail(test));
    console.log(`${file}: ${failed.length} failed (${failed.length - unexpected.length} listed), ${((Date.now() - started) / 1000).toFixed(1)} s`);
    if (!runtime.finished(out)) problems.push(`${file} did not run to its end (exit ${run.status ?? run.signal}):\n${out.slice(-4000)}`);
    else if (unexpected.length > 0 || (run.status !== 0 && failed.length === 0)) {
      problems.push(`${file}: ${unexpected.length ? unexpected.join('; ') : `exit ${run.status}`}\n${out.slice(-6000)}`);
    }
    for (const entry of Object.keys(listed)) {
      if (!failed.some((test) => listedFor({ [entry]: true }, test))) shrinkable.push(`${file}: ${entry}`);
    }
  }
  if (shrinkable.length > 0) console.log(`\nListed in exemptions.json for ${name}, and passed this time:\n  ${shrinkable.join('\n  ')}`);
  return problems;
}

// Runs a command to its end (killed after `timeout` ms) with the event loop free meanwhile (for
// compat's IPv6 relay, which serves from this process); resolves to its status, signal and
// output (stdout, then stderr).
function runToEnd(command, args, { timeout, ...options }) {
  return new Promise((resolve) => {
    const child = spawn(command, args, options);
    const stdout = [];
    const stderr = [];
    child.stdout.on('data', (chunk) => stdout.push(chunk));
    child.stderr.on('data', (chunk) => stderr.push(chunk));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeout);
    child.on('close', (status, signal) => {
      clearTimeout(timer);
      resolve({ status, signal, output: `${Buffer.concat(stdout)}\n${Buffer.concat(stderr)}` });
    });
  });
}

// The entry of `listed` that names `test`: its full name, or a prefix of it followed by '*'
// (a group of tests that fail alike, whichever of them a run's random values hit).
function listedFor(listed, test) {
  if (test in listed) return test;
  return Object.keys(listed).find((entry) => entry.length > 1 && entry.endsWith('*') && test.startsWith(entry.slice(0, -1)));
}

// Our JS tests, listed by file name.
function ourTests() {
  const files = fs.readdirSync(path.join(root, '__test__')).filter((f) => f.endsWith('.test.js')).sort();
  return runFiles(files.map((f) => `__test__/${f}`), (file) => ({ listed: exemptions[path.basename(file)] || {} }));
}

// amqplib's own suite: compat/run.js's fresh copy of it, with its IPv6 relay and its URL;
// listed as compat/<file>. What compat/exemptions.json leaves out on Node is left out here.
async function amqplibSuite() {
  const suite = require('../compat/run');
  suite.copySuite();
  const relay = await suite.relayIpv6ToBroker();
  const notRun = new Map(suite.exemptions.files.map((e) => [e.file, e.reason]));
  const listFor = (file) => {
    const base = path.basename(file);
    if (notRun.has(base)) return { listed: { '*': notRun.get(base) } };
    const skippedOnNode = suite.exemptions.tests.filter((t) => t.file === base).map((t) => t.name);
    return { listed: exemptions[`compat/${base}`] || {}, skippedOnNode };
  };
  const files = fs.readdirSync(path.join(root, 'compat', 'test')).filter((f) => f.endsWith('.test.js')).sort();
  try {
    return await runFiles(files.map((f) => `compat/test/${f}`), listFor, { URL: process.env.URL || suite.BROKER_URL });
  } finally {
    if (relay) relay.close();
  }
}

(compat ? amqplibSuite() : ourTests()).then((problems) => {
  if (problems.length > 0) {
    console.error(`\n${problems.join('\n\n')}\n\n${problems.length} file(s) failed under ${name}`);
    process.exit(1);
  }
  console.log(`\nevery file ${compat ? "of amqplib's suite " : ''}ran to its end under ${name}; no failure outside the list`);
});
