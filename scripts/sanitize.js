#!/usr/bin/env node
'use strict';
// `npm run test:asan` (and the last step of `npm run test:full`, not of `npm test`): the Rust tests, then our JS tests and
// amqplib's own suite against a build of the addon with AddressSanitizer, so that every memory
// access of the native code (the codec, the Node-API and libuv calls, the socket) is checked
// while the real broker, hostile servers, faults and the original's fake sockets drive it.
//
// Stable Rust accepts -Zsanitizer only with RUSTC_BOOTSTRAP=1. Node itself is not
// instrumented: the ASan runtime (gcc's libasan, whose functions the instrumented addon calls)
// is preloaded into it, and watches every allocation in the process. Leak checks are off:
// Node leaves memory for the OS to take back at exit, by design. Set up for Linux.

const { spawnSync, execFileSync } = require('node:child_process');
const path = require('node:path');
const fs = require('node:fs');

const root = path.join(__dirname, '..');
const targetDir = path.join(root, 'target', 'asan');

function run(name, command, args, env) {
  console.log(`\n--- ${name}: ${[path.basename(command), ...args].join(' ')}`);
  const result = spawnSync(command, args, { cwd: root, stdio: 'inherit', env: { ...process.env, ...env } });
  if (result.status !== 0) {
    console.error(`\n${name} failed (exit ${result.status ?? result.signal})`);
    process.exit(result.status || 1);
  }
}

function asanRuntime() {
  let found = '';
  try {
    found = execFileSync('gcc', ['-print-file-name=libasan.so'], { encoding: 'utf8' }).trim();
  } catch {
    // no gcc: reported below
  }
  if (!path.isAbsolute(found) || !fs.existsSync(found)) {
    console.error('No AddressSanitizer runtime: install gcc and its libasan (Debian: gcc, libasan8).');
    process.exit(1);
  }
  return fs.realpathSync(found);
}

if (process.platform !== 'linux') {
  // As Miri where no nightly has it: said and skipped, so that the full run passes elsewhere.
  console.log(`The sanitizer run is set up for Linux only: skipped on ${process.platform}.`);
  process.exit(0);
}
const host = /host: (\S+)/.exec(execFileSync('rustc', ['-vV'], { encoding: 'utf8' }))[1];
// --target keeps the sanitizer out of build scripts and proc macros, which run on the host.
const cargoArgs = ['--release', '--target', host, '--target-dir', targetDir];
const sanitized = { RUSTC_BOOTSTRAP: '1', RUSTFLAGS: '-Zsanitizer=address' };
const runtime = asanRuntime();

run('Rust tests under ASan', 'cargo', ['test', ...cargoArgs], sanitized);
run('addon under ASan', 'cargo', ['build', '--lib', '--features', 'codec-exports', ...cargoArgs], sanitized);
const built = path.join(targetDir, host, 'release', 'libamqplib_rs.so');
const addon = path.join(targetDir, 'amqplib_rs.asan.node');
fs.copyFileSync(built, addon);
const underAsan = { AMQPLIB_RS_ADDON: addon, LD_PRELOAD: runtime, ASAN_OPTIONS: 'detect_leaks=0:abort_on_error=1' };
run('JS tests under ASan', process.execPath, ['--test', '--test-timeout=120000', '__test__/**/*.test.js'], underAsan);
run('amqplib\'s suite under ASan', process.execPath, ['compat/run.js'], underAsan);
console.log('\nno memory errors found');
