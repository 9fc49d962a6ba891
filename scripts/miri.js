#!/usr/bin/env node
'use strict';
// `npm run test:miri` (a step of `npm run test:full`): every test of the sans-IO core crate
// (core/) under Miri, which checks the unsafe code they reach (reads into spare capacity and
// `set_len`, in the read buffer and in a body's assembly) and everything around it for
// undefined behaviour. The core has no system calls and no Node-API, so Miri runs all of it;
// the addon crate (the native socket, the bindings) only runs inside Node, where the ASan run
// covers it. Needs a nightly toolchain: the miri and rust-src components are added to it when
// missing (rustup); with no nightly at all, it says so and skips, except under CI (the CI
// variable set), where a skip would hide that Miri never ran: there it fails.

const { spawn, spawnSync } = require('node:child_process');
const readline = require('node:readline');
const path = require('node:path');

const root = path.join(__dirname, '..');
const has = (args) => spawnSync(args[0], args.slice(1), { cwd: root, encoding: 'utf8' }).status === 0;

if (!has(['cargo', '+nightly', 'miri', '--version'])) {
  if (!has(['rustc', '+nightly', '--version'])) {
    const install = 'rustup toolchain install nightly --component miri rust-src';
    if (/^(1|true|yes)$/i.test(process.env.CI || '')) {
      console.error(`Miri cannot run: no nightly toolchain here, and CI is set, so this is a failure, not a skip (${install}).`);
      process.exit(1);
    }
    console.log(`Miri skipped: no nightly toolchain here (${install}).`);
    process.exit(0);
  }
  console.log('Adding miri and rust-src to the nightly toolchain (rustup)');
  const added = spawnSync('rustup', ['+nightly', 'component', 'add', 'miri', 'rust-src'], { stdio: 'inherit' });
  if (added.status !== 0) process.exit(added.status ?? 1);
}
// Miri interprets on one thread, so the tests run as two processes at once, one per core: the
// slowest three (a 300 KB body read straight into its assembly takes some four minutes there;
// the three some 400 s of the 820 all took in one process) in one, the rest in the other. Each has a build directory of
// its own (cargo holds one's lock while the tests run; the core builds for Miri in seconds).
const SLOWEST = [
  'connection::tests::large_bodies_are_read_straight_into_their_assembly',
  'codec::tests::tables_round_trip',
  'strings::tests::unique_strings_do_not_grow_the_table_without_bound',
];
// Isolation off: proptest looks for its persistence file; few cases, as Miri is slow.
const env = { ...process.env, MIRIFLAGS: '-Zmiri-disable-isolation', PROPTEST_CASES: '4' };

// Runs one share, its lines prefixed with its name; resolves to its exit status.
function share(name, filters) {
  return new Promise((resolve) => {
    const args = ['+nightly', 'miri', 'test', '-p', 'amqplib_rs_core', '--target-dir', path.join('target', `miri-${name}`), '--', ...filters];
    const child = spawn('cargo', args, { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
    for (const stream of [child.stdout, child.stderr]) {
      readline.createInterface({ input: stream }).on('line', (line) => console.log(`[${name}] ${line}`));
    }
    child.on('close', (code, signal) => resolve(code ?? (signal ? 1 : 0)));
  });
}

Promise.all([share('slowest', SLOWEST), share('rest', SLOWEST.flatMap((test) => ['--skip', test]))]).then((codes) => {
  process.exit(codes.find((code) => code !== 0) ?? 0);
});
