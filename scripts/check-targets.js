#!/usr/bin/env node
'use strict';
// `npm run check:targets` (a step of `npm run test:full`): clippy, warnings denied, for every
// target of package.json's napi.targets, each as build.rs sets it up (with the native socket
// where the platform has one, Windows without). The host's own build without the native socket
// is the full run's "crate without the native socket" step. Installs the standard library of a
// missing target with rustup first, and says so. Nothing is linked: that is build:cross's.

const path = require('node:path');
const pkg = require('../package.json');
const { run, installRustTargets } = require('./toolchain');

// musl links statically by default, which leaves no cdylib to build: the napi CLI turns that
// off for its builds, and so does this check, so that the addon is what is checked.
function targetEnv(target) {
  if (!target.endsWith('-musl')) return {};
  return { [`CARGO_TARGET_${target.toUpperCase().replace(/-/g, '_')}_RUSTFLAGS`]: '-C target-feature=-crt-static' };
}

try {
  installRustTargets(pkg.napi.targets);
  for (const target of pkg.napi.targets) {
    run('cargo', ['clippy', '--release', '--all-targets', '--target', target, '--target-dir', path.join('target', 'check'), '--', '-D', 'warnings'], targetEnv(target));
  }
  console.log(`\nclippy is clean for ${pkg.napi.targets.length} targets`);
} catch (err) {
  console.error(err.message);
  process.exit(1);
}
