'use strict';
// What the build scripts share: running a tool in the project with its output shown, and
// installing the Rust standard library of the targets that lack one.

const { spawnSync, execFileSync } = require('node:child_process');
const path = require('node:path');

const root = path.join(__dirname, '..');

// Runs `command` in the project, its output shown; throws if it fails.
function run(command, args, env = {}) {
  console.log(`--- ${[command, ...args].join(' ')}`);
  const result = spawnSync(command, args, { cwd: root, stdio: 'inherit', env: { ...process.env, ...env } });
  if (result.status !== 0) throw new Error(`${command} failed (exit ${result.status ?? result.signal})`);
}

// rustup target add for those of `targets` not installed, saying so.
function installRustTargets(targets) {
  const installed = new Set(execFileSync('rustup', ['target', 'list', '--installed'], { encoding: 'utf8' }).split('\n'));
  const missing = targets.filter((target) => !installed.has(target));
  if (missing.length === 0) return;
  console.log(`Installing the standard library of ${missing.join(', ')} (rustup)`);
  run('rustup', ['target', 'add', ...missing]);
}

module.exports = { root, run, installRustTargets };
