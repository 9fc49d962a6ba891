#!/usr/bin/env node
'use strict';
// `npm run check:targets` (a step of `npm run test:full`): clippy, warnings denied, for every
// target of package.json's napi.targets, each as build.rs sets it up (with the native socket
// where the platform has one, Windows without). The host's own build without the native socket
// is the full run's "crate without the native socket" step. Installs the standard library of a
// missing target with rustup first, and says so. Nothing is linked: that is build:cross's.

const { spawnSync, execFileSync } = require('node:child_process');
const path = require('node:path');
const pkg = require('../package.json');

const root = path.join(__dirname, '..');

function run(command, args, env = {}) {
  console.log(`\n--- ${[command, ...args].join(' ')}`);
  const result = spawnSync(command, args, { cwd: root, stdio: 'inherit', env: { ...process.env, ...env } });
  if (result.status !== 0) {
    console.error(`${command} failed (exit ${result.status ?? result.signal})`);
    process.exit(result.status || 1);
  }
}

const installed = new Set(execFileSync('rustup', ['target', 'list', '--installed'], { encoding: 'utf8' }).split('\n'));
const missing = pkg.napi.targets.filter((target) => !installed.has(target));
if (missing.length > 0) {
  console.log(`Installing the standard library of ${missing.join(', ')} (rustup target add)`);
  run('rustup', ['target', 'add', ...missing]);
}
// musl links statically by default, which leaves no cdylib to build: the napi CLI turns that
// off for its builds, and so does this check, so that the addon is what is checked.
function targetEnv(target) {
  if (!target.endsWith('-musl')) return {};
  return { [`CARGO_TARGET_${target.toUpperCase().replace(/-/g, '_')}_RUSTFLAGS`]: '-C target-feature=-crt-static' };
}

for (const target of pkg.napi.targets) {
  run('cargo', ['clippy', '--release', '--all-targets', '--target', target, '--target-dir', path.join('target', 'check'), '--', '-D', 'warnings'], targetEnv(target));
}
console.log(`\nclippy is clean for ${pkg.napi.targets.length} targets`);
