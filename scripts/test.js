#!/usr/bin/env node
'use strict';
// `npm test`: the Rust tests, our JS tests, the type check, amqplib's own suite
// (compat/run.js), then the Rust tests, the JS tests and the compat suite again with the addon
// built with AddressSanitizer (scripts/sanitize.js). Stops at the first step that fails, with
// its exit code.

const { spawnSync } = require('node:child_process');
const path = require('node:path');

const root = path.join(__dirname, '..');
const node = process.execPath;

const steps = [
  ['Rust tests', 'cargo', ['test', '--release']],
  ['broker', node, ['scripts/broker.js']],
  ['JS tests', node, ['--test', '--test-timeout=60000', '__test__/**/*.test.js']],
  ['type check', node, [require.resolve('typescript/bin/tsc', { paths: [root] }), '-p', 'tsconfig.json']],
  ['compat suite', node, ['compat/run.js']],
  ['sanitizer', node, ['scripts/sanitize.js']],
];

console.log(`npm test on Node ${process.version}`);
for (const [name, command, args] of steps) {
  console.log(`\n=== ${name}: ${[path.basename(command), ...args].join(' ')}`);
  const run = spawnSync(command, args, { cwd: root, stdio: 'inherit' });
  if (run.status !== 0) {
    console.error(`\n${name} failed (exit ${run.status ?? run.signal})`);
    process.exit(run.status || 1);
  }
}
console.log('\nall steps passed');
