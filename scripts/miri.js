#!/usr/bin/env node
'use strict';
// Runs the core's Rust tests under Miri, which checks the unsafe code they reach (reads into
// spare capacity and `set_len`, in the read buffer and in a body's assembly) for undefined
// behaviour. `npm run test:miri` runs them all (about 20 minutes: Miri interprets);
// `--direct-reads`, which npm test uses, the tests that drive those reads (a few minutes).
// What Miri cannot run is left out: the socket tests (system calls into the kernel), and the
// Node-API layer, which only runs inside Node (the ASan run covers it). Needs a nightly
// toolchain with the miri component (`rustup +nightly component add miri rust-src`); without
// one it says so and skips, since a fresh machine may have only stable.

const { spawnSync } = require('node:child_process');
const path = require('node:path');

const root = path.join(__dirname, '..');
const probe = spawnSync('cargo', ['+nightly', 'miri', '--version'], { cwd: root, encoding: 'utf8' });
if (probe.status !== 0) {
  console.log('Miri skipped: no nightly toolchain with the miri component here ' +
    '(rustup +nightly component add miri rust-src installs it).');
  process.exit(0);
}
// The tests that read through `receive_with`, straight into spare capacity.
const DIRECT_READS = ['connection::pair_tests', 'connection::tests::a_direct_body_frame_must_end_with_frame_end', 'connection::tests::large_bodies_are_read_straight_into_their_assembly'];
const filters = process.argv.includes('--direct-reads') ? DIRECT_READS : ['--skip', 'transport::'];
const run = spawnSync('cargo', ['+nightly', 'miri', 'test', '--lib', '--', ...filters], {
  cwd: root,
  stdio: 'inherit',
  // Isolation off: proptest looks for its persistence file; few cases, as Miri is slow.
  env: { ...process.env, MIRIFLAGS: '-Zmiri-disable-isolation', PROPTEST_CASES: '4' },
});
process.exit(run.status ?? 1);
