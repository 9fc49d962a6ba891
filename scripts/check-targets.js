#!/usr/bin/env node
'use strict';
// `npm run check:targets` (a step of `npm run test:full`): clippy, warnings denied, for every
// target of package.json's napi.targets, each as build.rs sets it up (with the native socket
// where the platform has one, Windows without). The host's own build without the native socket
// is the full run's "crate without the native socket" step. Installs the standard library of a
// missing target with rustup first, and says so. Nothing is linked: that is build:cross's.
// ring (rustls's crypto, for TLS in the native socket) compiles C for its target: for the Linux
// and macOS targets other than the host's, clippy runs through cargo-zigbuild, whose zig is
// that C compiler (ziglang and cargo-zigbuild by pip into target/venv, as build:cross has them).

const path = require('node:path');
const pkg = require('../package.json');
const { run, installRustTargets } = require('./toolchain');
const system = require('./system');

// The machine this runs on: Linux (test:full's check).
const HOST = `${process.arch === 'arm64' ? 'aarch64' : 'x86_64'}-unknown-linux-gnu`;

// Whether `target` builds C for the native socket's TLS with another machine's compiler.
const needsZig = (target) => target !== HOST && !target.includes('windows');

// musl links statically by default, which leaves no cdylib to build: the napi CLI turns that
// off for its builds, and so does this check, so that the addon is what is checked.
function targetEnv(target) {
  if (!target.endsWith('-musl')) return {};
  return { [`CARGO_TARGET_${target.toUpperCase().replace(/-/g, '_')}_RUSTFLAGS`]: '-C target-feature=-crt-static' };
}

try {
  installRustTargets(pkg.napi.targets);
  if (pkg.napi.targets.some(needsZig)) system.pipInstall(['ziglang', 'cargo-zigbuild'], 'cargo-zigbuild');
  for (const target of pkg.napi.targets) {
    const [command, args] = needsZig(target) ? ['cargo-zigbuild', ['clippy']] : ['cargo', ['clippy']];
    run(command, [...args, '--release', '--all-targets', '--target', target, '--target-dir', path.join('target', 'check'), '--', '-D', 'warnings'], targetEnv(target));
  }
  console.log(`\nclippy is clean for ${pkg.napi.targets.length} targets`);
} catch (err) {
  console.error(err.message);
  process.exit(1);
}
