#!/usr/bin/env node
'use strict';
// `npm run build:cross` (a step of `npm run test:full`): links the addon for every target this
// machine can link besides its own, into target/cross/, and checks each file: its format and
// architecture, the shared libraries it needs (Linux: the C library only, and for glibc the
// highest symbol version it needs, held to GLIBC_PROMISE; macOS: libSystem only, napi looked
// up in the process at load, the minimum macOS it says), and for Windows its DLL imports.
//
// zig links Linux arm64, both musl and both macOS targets (`napi build -x`, cargo-zigbuild);
// mingw links x86_64-pc-windows-gnu, the Windows target a Linux machine can link (the
// published one is msvc, built on Windows by release.yml). What is missing is installed and
// said: rust-std by rustup; ziglang and cargo-zigbuild by pip into target/venv, a virtual
// environment whose bin goes first on PATH for the builds (a Debian or Ubuntu Python refuses a
// plain pip install); by apt (through sudo -n when not root), mingw-w64, and for the checks
// binutils (readelf, objdump), file and llvm (llvm-objdump and llvm-nm, or Debian's llvm-objdump-NN).

const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { root, run, installRustTargets } = require('./toolchain');
const system = require('./system');

const out = path.join(root, 'target', 'cross');
// The oldest glibc the Linux gnu builds must run on (the README says so).
const GLIBC_PROMISE = '2.17';

const TARGETS = [
  { target: 'aarch64-unknown-linux-gnu', format: 'elf', arch: 'ARM aarch64', zig: true },
  { target: 'x86_64-unknown-linux-musl', format: 'elf', arch: 'x86-64', zig: true },
  { target: 'aarch64-unknown-linux-musl', format: 'elf', arch: 'ARM aarch64', zig: true },
  // zig stamps its own newest macOS unless told; dead_strip_dylibs drops the libiconv that
  // Rust's std asks for and the addon never calls.
  { target: 'x86_64-apple-darwin', format: 'macho', arch: 'x86_64', zig: true, minos: '10.13' },
  { target: 'aarch64-apple-darwin', format: 'macho', arch: 'arm64', zig: true, minos: '11.0' },
  { target: 'x86_64-pc-windows-gnu', format: 'pe', arch: 'x86-64', zig: false },
];

const ELF_LIBRARIES = {
  gnu: ['libc.so.6', 'libpthread.so.0', 'libdl.so.2', 'libm.so.6', 'librt.so.1', 'libgcc_s.so.1', 'ld-linux-aarch64.so.1', 'ld-linux-x86-64.so.2'],
  musl: ['libc.so'],
};
const WINDOWS_DLL = /^(kernel32|msvcrt|ntdll|userenv|ws2_32|bcryptprimitives|advapi32|api-ms-win-[a-z0-9-]+)\.dll$/i;

function output(command, args) {
  return execFileSync(command, args, { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
}

const { has } = system;

// What linking `targets` needs. zig and cargo-zigbuild are always the venv's (it goes first on
// PATH), whatever else the machine has.
function installTools(targets = TARGETS) {
  installRustTargets(targets.map((t) => t.target));
  if (targets.some((t) => t.zig)) system.pipInstall(['ziglang', 'cargo-zigbuild'], 'cargo-zigbuild');
  if (targets.some((t) => t.format === 'pe') && !has('x86_64-w64-mingw32-gcc')) system.aptInstall(['mingw-w64']);
}

// The tools the checks read the files with, installed when missing; LLVM's by whatever name
// they have here (Debian's llvm package may give llvm-objdump-14 and no llvm-objdump).
const tool = {};
function installCheckTools() {
  const packages = [];
  if (!has('file')) packages.push('file');
  if (!has('readelf') || !has('objdump')) packages.push('binutils');
  if (!system.versioned('llvm-objdump') || !system.versioned('llvm-nm')) packages.push('llvm');
  system.aptInstall(packages);
  for (const name of ['llvm-objdump', 'llvm-nm']) {
    tool[name] = system.versioned(name);
    if (!tool[name]) throw new Error(`no ${name} (nor ${name}-NN) after installing llvm`);
  }
}

// napi-build links a windows-gnu addon against libnode.dll, whose functions the addon in fact
// looks up at load: an empty DLL of that name satisfies the link, and nothing imports it.
function libnodeStub(into = out) {
  const dir = path.join(into, 'libnode');
  fs.mkdirSync(dir, { recursive: true });
  const source = path.join(dir, 'stub.c');
  fs.writeFileSync(source, 'void amqplib_rs_libnode_stub(void) {}\n');
  run('x86_64-w64-mingw32-gcc', ['-shared', '-o', path.join(dir, 'libnode.dll'), source]);
  return dir;
}

// Links `target` into `dir`; `features` are cargo features (the emulated test runs want the
// codec entry points that amqplib's suite reaches into).
function build({ target, zig, minos }, libnode, dir = out, features = []) {
  const env = { LIBNODE_PATH: libnode };
  const key = target.toUpperCase().replace(/-/g, '_');
  if (minos) {
    env.MACOSX_DEPLOYMENT_TARGET = minos;
    env[`CARGO_TARGET_${key}_RUSTFLAGS`] = '-C link-arg=-Wl,-dead_strip_dylibs';
  }
  const featureArgs = features.length > 0 ? ['--features', features.join(',')] : [];
  run('napi', ['build', '--platform', '--release', '--no-js', ...(zig ? ['-x'] : []), ...featureArgs, '--target', target, '--output-dir', dir], env);
}

function addonOf(target, dir = out) {
  const built = new Map([
    ['aarch64-unknown-linux-gnu', 'linux-arm64-gnu'], ['x86_64-unknown-linux-musl', 'linux-x64-musl'],
    ['aarch64-unknown-linux-musl', 'linux-arm64-musl'], ['x86_64-apple-darwin', 'darwin-x64'],
    ['aarch64-apple-darwin', 'darwin-arm64'], ['x86_64-pc-windows-gnu', 'win32-x64-gnu'],
  ]);
  return path.join(dir, `amqplib_rs.${built.get(target)}.node`);
}

// "2.17" < "2.28": compared number by number.
function versionAbove(a, b) {
  const [x, y] = [a, b].map((v) => v.split('.').map(Number));
  for (let i = 0; i < Math.max(x.length, y.length); i++) if ((x[i] || 0) !== (y[i] || 0)) return (x[i] || 0) > (y[i] || 0);
  return false;
}

// What is wrong with the file, as a list (empty when nothing is); `facts` gets what was read.
function checkElf(file, { target, arch }, facts) {
  const problems = [];
  const needed = [...output('readelf', ['-d', file]).matchAll(/\(NEEDED\)\s+Shared library: \[([^\]]+)\]/g)].map((m) => m[1]);
  facts.libraries = needed.join(' ');
  const allowed = ELF_LIBRARIES[target.endsWith('musl') ? 'musl' : 'gnu'];
  for (const library of needed) if (!allowed.includes(library)) problems.push(`needs ${library}`);
  if (target.endsWith('gnu')) {
    // Weak references (std's gettid, statx) are looked up and done without: only strong ones count.
    const strong = output('objdump', ['-T', file]).split('\n').filter((l) => /\bGLIBC_/.test(l) && !/^\S+\s+w\s/.test(l));
    const versions = strong.map((l) => /GLIBC_([\d.]+)/.exec(l)[1]);
    const highest = versions.reduce((a, b) => (versionAbove(b, a) ? b : a), '0');
    facts.glibc = highest;
    if (versionAbove(highest, GLIBC_PROMISE)) problems.push(`needs glibc ${highest}, more than ${GLIBC_PROMISE}`);
  }
  if (!output('file', [file]).includes(arch)) problems.push(`not ${arch}`);
  return problems;
}

function checkMachO(file, { arch, minos }, facts) {
  const problems = [];
  const dylibs = output(tool['llvm-objdump'], ['--macho', '--dylibs-used', file]).split('\n').slice(2).map((l) => l.trim().split(' ')[0]).filter(Boolean);
  facts.libraries = dylibs.join(' ');
  for (const dylib of dylibs) if (dylib !== '/usr/lib/libSystem.B.dylib') problems.push(`needs ${dylib}`);
  const napiBound = output(tool['llvm-nm'], ['-u', file]).split('\n').filter((l) => /_napi_/.test(l));
  if (napiBound.length > 0) problems.push(`binds ${napiBound.length} napi symbols at link time`);
  const headers = output(tool['llvm-objdump'], ['--macho', '--private-headers', file]);
  const stamped = /LC_BUILD_VERSION[\s\S]*?minos ([\d.]+)/.exec(headers)?.[1] ?? /LC_VERSION_MIN_MACOSX[\s\S]*?version ([\d.]+)/.exec(headers)?.[1];
  facts.minos = stamped;
  if (stamped !== minos) problems.push(`minimum macOS ${stamped}, not ${minos}`);
  if (!output('file', [file]).includes(arch)) problems.push(`not ${arch}`);
  return problems;
}

function checkPe(file, { arch }, facts) {
  const problems = [];
  const dlls = [...output(tool['llvm-objdump'], ['-p', file]).matchAll(/DLL Name: (\S+)/g)].map((m) => m[1]);
  facts.libraries = [...new Set(dlls.map((d) => d.toLowerCase()))].join(' ');
  for (const dll of dlls) if (!WINDOWS_DLL.test(dll)) problems.push(`imports ${dll}`);
  const kind = output('file', [file]);
  if (!kind.includes('PE32+') || !kind.includes('DLL') || !kind.includes(arch)) problems.push(`not a PE32+ ${arch} DLL: ${kind.trim()}`);
  return problems;
}

const CHECKS = { elf: checkElf, macho: checkMachO, pe: checkPe };

function main() {
  installTools();
  installCheckTools();
  fs.rmSync(out, { recursive: true, force: true });
  const libnode = libnodeStub();
  const rows = [];
  let failed = false;
  for (const spec of TARGETS) {
    build(spec, libnode);
    const facts = {};
    const problems = CHECKS[spec.format](addonOf(spec.target), spec, facts);
    failed ||= problems.length > 0;
    rows.push(`| ${spec.target} | ${facts.libraries} | ${facts.glibc ?? facts.minos ?? ''} | ${problems.join('; ') || 'ok'} |`);
  }
  console.log('\n| target | libraries it needs | glibc / macOS minimum | check |\n|---|---|---|---|');
  for (const row of rows) console.log(row);
  if (failed) process.exit(1);
}

if (require.main === module) main();

module.exports = { TARGETS, installTools, installCheckTools, libnodeStub, build, addonOf, has };
