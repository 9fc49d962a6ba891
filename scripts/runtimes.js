#!/usr/bin/env node
'use strict';
// `node scripts/runtimes.js bun|deno` (steps of `npm run test:full`): our JS tests under Bun or
// Deno (both from the npm registry, devDependencies), each test file by the runtime's own test
// runner (`bun test`, `deno test`: both run node:test suites), against AMQP_URL's broker, with the
// runtime's default transport (the stream path: lib/native_socket.js).
//
// What a runtime does differently is listed, with its reason, in __test__/runtimes/
// exemptions.json (the README shows the list): a test named there may fail, a file named with
// "*" is not run; every other test must pass, and a file must run to its end (within 3 minutes).
// A listed test that passes is said, so that the list only shrinks.

const { spawnSync } = require('node:child_process');
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
    failures: (out) => [...new Set([...out.matchAll(/^(.+?) => \S+:\d+:\d+$/gm)].map((m) => m[1].split(' ... ').join(' > ')))],
    finished: (out) => /^(ok|FAILED) \| \d+ passed/m.test(out),
  },
};

const name = process.argv[2];
const runtime = RUNTIMES[name];
if (!runtime) {
  console.error('usage: node scripts/runtimes.js bun|deno');
  process.exit(2);
}
const exemptions = JSON.parse(fs.readFileSync(path.join(root, '__test__', 'runtimes', 'exemptions.json'), 'utf8'))[name];
const plain = (text) => text.replace(/\x1b\[[0-9;]*m/g, '');

const files = fs.readdirSync(path.join(root, '__test__')).filter((f) => f.endsWith('.test.js')).sort();
const problems = [];
const shrinkable = [];
for (const file of files) {
  const allowed = exemptions[file] || {};
  if ('*' in allowed) {
    console.log(`${file}: not run (${allowed['*']})`);
    continue;
  }
  const [command, args] = runtime.command(`__test__/${file}`);
  const started = Date.now();
  const run = spawnSync(command, args, { cwd: root, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, timeout: 180_000 });
  const out = plain(`${run.stdout}\n${run.stderr}`);
  const failed = runtime.failures(out);
  const unexpected = failed.filter((test) => !(test in allowed));
  console.log(`${file}: ${failed.length} failed (${failed.length - unexpected.length} listed), ${((Date.now() - started) / 1000).toFixed(1)} s`);
  if (!runtime.finished(out)) problems.push(`${file} did not run to its end (exit ${run.status ?? run.signal}):\n${out.slice(-4000)}`);
  else if (unexpected.length > 0 || (run.status !== 0 && failed.length === 0)) {
    problems.push(`${file}: ${unexpected.length ? unexpected.join('; ') : `exit ${run.status}`}\n${out.slice(-6000)}`);
  }
  for (const test of Object.keys(allowed)) if (!failed.includes(test)) shrinkable.push(`${file}: ${test}`);
}
if (shrinkable.length > 0) console.log(`\nListed in exemptions.json for ${name}, and passed this time:\n  ${shrinkable.join('\n  ')}`);
if (problems.length > 0) {
  console.error(`\n${problems.join('\n\n')}\n\n${problems.length} file(s) failed under ${name}`);
  process.exit(1);
}
console.log(`\nevery test file ran to its end under ${name}; no failure outside the list`);
