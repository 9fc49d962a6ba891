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

const { spawnSync } = require('node:child_process');
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
const run = spawnSync('cargo', ['+nightly', 'miri', 'test', '-p', 'amqplib_rs_core'], {
  cwd: root,
  stdio: 'inherit',
  // Isolation off: proptest looks for its persistence file; few cases, as Miri is slow.
  env: { ...process.env, MIRIFLAGS: '-Zmiri-disable-isolation', PROPTEST_CASES: '4' },
});
process.exit(run.status ?? 1);
