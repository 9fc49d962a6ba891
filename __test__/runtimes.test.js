'use strict';
// The package under the runtimes services run it on: Node, Bun and Deno (both from the npm
// registry, devDependencies), each with its default transport (lib/native_socket.js chooses
// by the runtime: the native socket on Node, the stream path on Bun, whose uv_poll_* abort
// the process, and on Deno, whose poll reports once per start, from a thread of its own).
// 1000 confirmed round trips each (__test__/runtimes/roundtrip.cjs).

const { describe, it } = require('node:test');
const assert = require('node:assert');
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { AMQP_URL } = require('./helpers');

const bin = (name) => path.join(__dirname, '..', 'node_modules', '.bin', process.platform === 'win32' ? `${name}.cmd` : name);
const script = path.join(__dirname, 'runtimes', 'roundtrip.cjs');
const nativeTransport = process.env.AMQPLIB_RS_TRANSPORT !== 'stream' && require('../lib/native_socket').nativeSocketWorks();

// The stream path's socket: Node's TLS socket for amqps://.
const streamSocket = new URL(AMQP_URL).protocol === 'amqps:' ? 'TLSSocket' : 'Socket';

const RUNTIMES = [
  ['Node', process.execPath, [script], nativeTransport ? 'NativeSocket' : streamSocket],
  ['Bun', bin('bun'), [script], streamSocket],
  ['Deno', bin('deno'), ['run', '--allow-all', script], streamSocket],
];

// Deno looks for a newer release of itself at dl.deno.land unless told not to: nothing may
// leave the machine.
const env = { ...process.env, AMQP_URL, DENO_NO_UPDATE_CHECK: '1' };

// `deno test` frees the addon's objects as a file ends, JS still holding them, then runs the
// event loop once more: a connection whose I/O is still in flight then read into freed memory
// (a SIGSEGV in 2 of 3 runs before lib/native.js made its calls inert after 'unload').
const inFlight = path.join(__dirname, 'runtimes', 'in_flight_at_exit.cjs');

// Bun and Deno are this machine's own binaries from npm: they load the package's own build,
// not another one under test (the emulated and sanitizer runs name theirs).
const skipFor = (name, command) =>
  ((process.versions.bun || process.versions.deno) && 'run from Node, which starts each runtime') ||
  (name !== 'Node' && process.env.AMQPLIB_RS_ADDON && 'another build is under test (AMQPLIB_RS_ADDON)') ||
  (!fs.existsSync(command) && `${path.basename(command)} is not installed (npm install)`);

describe('runtimes', () => {
  for (const [name, command, args, transport] of RUNTIMES) {
    const skip = skipFor(name, command);
    it(`${name}: 1000 confirmed round trips with the default transport`, { skip, timeout: 120_000 }, () => {
      const run = spawnSync(command, args, { encoding: 'utf8', timeout: 100_000, env });
      assert.strictEqual(run.status, 0, `${name} exited with ${run.status ?? run.signal}:\n${run.stderr}`);
      const report = JSON.parse(run.stdout.trim().split('\n').pop());
      assert.deepStrictEqual(report, { confirmed: 1000, received: 1000, inOrder: true, transport });
    });
  }

  it('Deno: a test file that ends with connections in flight exits as its tests say, five times of five', { skip: skipFor('Deno', bin('deno')), timeout: 120_000 }, () => {
    for (let run = 0; run < 5; run++) {
      const deno = spawnSync(bin('deno'), ['test', '--allow-all', '--no-check', '--unstable-detect-cjs', inFlight], { encoding: 'utf8', timeout: 20_000, env });
      assert.strictEqual(deno.status, 0, `run ${run + 1}: exit ${deno.status ?? deno.signal}\n${deno.stdout}\n${deno.stderr}`);
    }
  });
});
