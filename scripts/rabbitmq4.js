#!/usr/bin/env node
'use strict';
// RabbitMQ 4.x for the tests, beside whatever broker the machine runs (here Debian 12's 3.10 on
// 5672, which is never touched): a Debian root made by debootstrap with Debian's own
// rabbitmq-server (sid: 4.3, trixie: 4.0), and nodes run in it by chroot.
//
//   node scripts/rabbitmq4.js start|stop|status [--release sid|trixie] [--refuse-deprecated]
//   node scripts/rabbitmq4.js run [--release ...] [--refuse-deprecated] [--tls] [--time-limit S] -- command args...
//   const rabbitmq4 = require('./scripts/rabbitmq4'); const node = await rabbitmq4.start(); node.url; await node.stop();
//
// start prints AMQP_URL=...; run starts a node from empty data, runs the command with AMQP_URL
// (with --tls, the node's amqps:// listener, and NODE_EXTRA_CA_CERTS its CA)
// and AMQPLIB_RS_RABBITMQCTL (the node's rabbitmqctl, a JSON array of argv) set, stops the node
// and exits with the command's status, so that nothing is left running; with --time-limit, a
// command still running after S seconds (a test file that never exits) is killed, its process
// group with it, and run exits with 124.
//
// The root is cached in AMQPLIB_RS_CACHE_DIR (default ~/.cache/amqplib-rs) as debian-<release>,
// with debian-<release>.json beside it, written once the root is complete: a root without it
// was left half-made and is made again. debootstrap (installed with apt when missing) and
// everything else that needs root run as they are for root, else through `sudo -n`
// (scripts/system.js). AMQPLIB_RS_DEBIAN_MIRROR overrides debootstrap's default mirror.
//
// A node runs as the root's user rabbitmq, in a mount namespace of its own in which /proc and
// /dev are bound into the root: the host never sees those mounts, and the kernel drops them
// when the node and its epmd are gone, however they ended. Each node has its own AMQP port,
// distribution port, epmd port (its ERL_EPMD_PORT, never the system's 4369) and
// RABBITMQ_CONF_ENV_FILE, and its state under /var/lib/amqplib-rs/<name> in the root.
// `+S 1:1 +sbwt none`: one scheduler that does not spin, as the machines have 2 cores.
// The module logs its steps with NODE_DEBUG=amqplib-rs-rabbitmq4; the script always does.

const { spawn, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const util = require('node:util');
const { answers } = require('./answers');
const system = require('./system');
const { tlsCertificates } = require('../__test__/tls_certificates');

const { readPid, alive } = system;
const withLock = (file, fn) => system.withLock(file, fn, { timeout: LOCK_TIMEOUT, log });

const RELEASES = ['sid', 'trixie'];
const CACHE = process.env.AMQPLIB_RS_CACHE_DIR || path.join(process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache'), 'amqplib-rs');
const BOOT_TIMEOUT = 90_000;
const CTL_TIMEOUT = 60_000;
const STOP_TIMEOUT = 15_000;
const LOCK_TIMEOUT = 600_000;
// Where the nodes' state lives, inside the root.
const STATE = '/var/lib/amqplib-rs';
const SERVER = '/usr/lib/rabbitmq/bin/rabbitmq-server';
const CTL = '/usr/lib/rabbitmq/bin/rabbitmqctl';
// What `--refuse-deprecated` adds to a node's rabbitmq.conf: the deprecated features that a
// client sees (a transient non-exclusive queue is refused at declare, a global basic.qos is
// closed with 540). A node whose data already held such queues keeps permitting them, so a
// refusing node always starts from empty data.
const REFUSE_DEPRECATED = ['deprecated_features.permit.transient_nonexcl_queues = false', 'deprecated_features.permit.global_qos = false'];

let log = util.debuglog('amqplib-rs-rabbitmq4');

// Where the steps are logged from now on: scripts/cluster.js's own log when it runs its nodes.
const useLog = (fn) => (log = fn);

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const rootDir = (release) => path.join(CACHE, `debian-${release}`);
const markerFile = (release) => `${rootDir(release)}.json`;

function checkRelease(release) {
  if (!RELEASES.includes(release)) throw new Error(`release is one of ${RELEASES.join(', ')}, not ${release}`);
}

// Runs `command args` as root (or through sudo -n), its output piped; returns its stdout, or
// throws with the end of its output when it fails.
// How to run `command args` as root: [command, args], through sudo -n for a user; throws when
// neither can be.
function rootCommand(command, args, env = {}) {
  const how = system.asRoot(command, args, env);
  if (!how) throw new Error(`${command} needs root: run as root, or as a user with passwordless sudo (sudo -n)`);
  return how;
}

function runAsRoot(command, args, { env = {}, timeout } = {}) {
  const [cmd, cmdArgs] = rootCommand(command, args, env);
  const result = spawnSync(cmd, cmdArgs, { encoding: 'utf8', timeout, env: { ...process.env, ...env }, maxBuffer: 64 * 1024 * 1024 });
  if (result.status !== 0) {
    const output = `${result.stdout || ''}${result.stderr || ''}`.trim().split('\n').slice(-20).join('\n');
    throw new Error(`${command} ${args.slice(0, 4).join(' ')}... failed (exit ${result.status ?? result.error?.code ?? result.signal}):\n${output}`);
  }
  return result.stdout;
}

// Writes files (name → text) into `dir` as root, owned by `owner` (uid:gid); `wipe` empties
// the directory first. One shell, so a user through sudo asks once; the texts go as arguments.
const WRITE_FILES = [
  'set -e',
  'dir=$1; owner=$2; wipe=$3; shift 3',
  'if [ "$wipe" = wipe ]; then rm -rf --one-file-system "$dir"; fi',
  'mkdir -p "$dir"',
  'while [ $# -gt 0 ]; do printf %s "$2" >"$dir/$1"; shift 2; done',
  'chown -R "$owner" "$dir"',
].join('\n');

function writeFilesAsRoot(dir, files, { owner = '0:0', wipe = false } = {}) {
  runAsRoot('sh', ['-c', WRITE_FILES, 'sh', dir, owner, wipe ? 'wipe' : 'keep', ...Object.entries(files).flat()]);
}

// Mount points at or under `dir` in our mount namespace, deepest first: what an interrupted
// debootstrap leaves (it mounts /proc and /sys in its target while it installs).
function mountsUnder(dir) {
  const unescape = (field) => field.replace(/\\(\d{3})/g, (_, octal) => String.fromCharCode(parseInt(octal, 8)));
  return fs
    .readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => unescape(line.split(' ')[4]))
    .filter((point) => point === dir || point.startsWith(`${dir}/`))
    .sort((a, b) => b.length - a.length);
}

function unmountUnder(dir) {
  for (const point of mountsUnder(dir)) {
    log(`unmounting ${point}`);
    runAsRoot('umount', ['--lazy', point]);
  }
}

// Removes a root as root, never crossing into another file system (a /dev bound there).
function removeRoot(dir) {
  unmountUnder(dir);
  runAsRoot('rm', ['-rf', '--one-file-system', dir]);
}



// What the marker of a complete root says ({ release, rabbitmq, made, seconds }), or null
// when there is no complete root (no marker, or a root removed since).
function rootInfo(release) {
  try {
    const info = JSON.parse(fs.readFileSync(markerFile(release), 'utf8'));
    return fs.existsSync(path.join(rootDir(release), 'etc', 'passwd')) ? info : null;
  } catch {
    return null;
  }
}

const hasRoot = (release) => rootInfo(release) !== null;

// The root for `release`, made when there is none or only a half-made one. Resolves with
// madeRoot's answer.
async function ensureRoot(release = 'sid') {
  checkRelease(release);
  const dir = rootDir(release);
  if (!rootInfo(release)) {
    await withLock(`${dir}.lock`, async () => {
      if (!rootInfo(release)) makeRoot(release, dir);
    });
  }
  return madeRoot(release);
}

// The complete root for `release`: { release, dir, rabbitmq (its version), uid, gid (its user
// rabbitmq's) }; throws when there is none (ensureRoot makes it).
function madeRoot(release) {
  checkRelease(release);
  const info = rootInfo(release);
  if (!info) throw new Error(`no complete root for ${release} in ${CACHE}: node scripts/rabbitmq4.js start --release ${release} makes it`);
  const dir = rootDir(release);
  const entry = fs
    .readFileSync(path.join(dir, 'etc', 'passwd'), 'utf8')
    .split('\n')
    .find((line) => line.startsWith('rabbitmq:'));
  const [, , uid, gid] = entry.split(':');
  return { release, dir, rabbitmq: info.rabbitmq, uid: Number(uid), gid: Number(gid) };
}

function makeRoot(release, dir) {
  if (process.platform !== 'linux') throw new Error('RabbitMQ 4 by chroot is for Linux only');
  // Ubuntu's debootstrap needs Debian's keys to check a Debian release.
  system.aptInstall(['debootstrap', 'debian-archive-keyring']);
  if (fs.existsSync(dir)) {
    log(`${dir} is half-made (no ${path.basename(markerFile(release))}): removing it`);
    removeRoot(dir);
  }
  fs.mkdirSync(path.dirname(dir), { recursive: true });
  const t0 = Date.now();
  const mirror = process.env.AMQPLIB_RS_DEBIAN_MIRROR ? [process.env.AMQPLIB_RS_DEBIAN_MIRROR] : [];
  log(`debootstrap --variant=minbase --include=rabbitmq-server ${release} ${dir} (a minute or two)`);
  runAsRoot('debootstrap', ['--variant=minbase', '--include=rabbitmq-server', release, dir, ...mirror]);
  // debootstrap writes no /etc/hosts: without one, `localhost` in the nodes' names goes to DNS,
  // and a node hangs at boot resolving it.
  writeFilesAsRoot(path.join(dir, 'etc'), { hosts: '127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n' });
  const server = fs.readdirSync(path.join(dir, 'usr', 'lib', 'rabbitmq', 'lib')).find((name) => name.startsWith('rabbitmq_server-'));
  if (!server) throw new Error(`debootstrap made ${dir}, but it has no rabbitmq_server-* in /usr/lib/rabbitmq/lib`);
  const seconds = Math.round((Date.now() - t0) / 100) / 10;
  const info = { release, rabbitmq: server.slice('rabbitmq_server-'.length), made: new Date().toISOString(), seconds };
  fs.writeFileSync(markerFile(release), `${JSON.stringify(info, null, 2)}\n`);
  log(`made ${dir} (RabbitMQ ${info.rabbitmq}) in ${seconds} s`);
}

// Runs node's launcher as root: a mount namespace of its own, /proc and /dev bound into the
// root there, then chroot as the root's rabbitmq; the output appended to the node's startup.log.
const LAUNCH = [
  'set -e',
  'root=$1; output=$2; shift 2',
  'mount --bind /proc "$root/proc"',
  'mount --bind /dev "$root/dev"',
  'exec chroot --userspec=rabbitmq:rabbitmq "$root" "$@" >>"$root$output" 2>&1',
].join('\n');

// One node in a root: `root` from ensureRoot; `name` short (the node is <name>@localhost);
// `port` its AMQP port; `distPort`, `epmdPort`; `config` more lines of its rabbitmq.conf;
// `tlsPort`, if given, an amqps:// listener with a certificate for localhost and 127.0.0.1 of
// the tests' local CA: `certificates()`'s ({ ca, cert, key }), by default this process's
// (__test__/tls_certificates.js).
class ChrootNode {
  constructor(root, { name, port, distPort = port + 20000, epmdPort, config = [], tlsPort = 0, certificates = tlsCertificates }) {
    if (epmdPort === 4369) throw new Error('the system epmd (4369) is never used: give the node an epmd port of its own');
    Object.assign(this, { root, short: name, port, distPort, epmdPort, config, tlsPort, certificates });
    this.name = `${name}@localhost`;
    this.url = `amqp://guest:guest@127.0.0.1:${port}`;
    this.tlsUrl = tlsPort ? `amqps://guest:guest@localhost:${tlsPort}` : null;
    this.dir = `${STATE}/${name}`;
    this.hostDir = path.join(root.dir, STATE, name);
    this.startupLog = path.join(this.hostDir, 'startup.log');
  }

  // What a process of this node sees: no variable of ours (RABBITMQ_*, ERL_*) leaks into it.
  env() {
    return ['PATH=/usr/sbin:/usr/bin:/sbin:/bin', 'HOME=/var/lib/rabbitmq', 'LANG=C.UTF-8', `RABBITMQ_CONF_ENV_FILE=${this.dir}/rabbitmq-env.conf`];
  }

  files() {
    return {
      'rabbitmq.conf': [`listeners.tcp.1 = 127.0.0.1:${this.port}`, 'loopback_users = none', ...this.tlsConfig(), ...this.config, ''].join('\n'),
      // No plugins at all (not even management): less to boot and less CPU.
      enabled_plugins: '[].\n',
      'rabbitmq-env.conf': [
        `NODENAME=${this.name}`,
        `DIST_PORT=${this.distPort}`,
        `CONFIG_FILE=${this.dir}/rabbitmq.conf`,
        `ENABLED_PLUGINS_FILE=${this.dir}/enabled_plugins`,
        `MNESIA_BASE=${this.dir}/data`,
        `MNESIA_DIR=${this.dir}/data/${this.short}`,
        `LOG_BASE=${this.dir}/log`,
        `PID_FILE=${this.dir}/pid`,
        `SERVER_ADDITIONAL_ERL_ARGS='+S 1:1 +sbwt none'`,
        // The node's epmd, the CLI's and the distribution, on loopback and on ports of their own.
        `export ERL_EPMD_PORT=${this.epmdPort}`,
        'export ERL_EPMD_ADDRESS=127.0.0.1',
        `export ERL_FLAGS='-kernel inet_dist_use_interface {127,0,0,1}'`,
        '',
      ].join('\n'),
    };
  }

  tlsConfig() {
    return this.tlsPort ? system.tlsListenerConfig(this.tlsPort, this.dir) : [];
  }

  // The CA a client of the TLS listener is to trust, as a file on the host.
  get caFile() {
    return path.join(this.hostDir, 'ca.pem');
  }

  // Writes the node's files; `wipe` drops its state (data, logs) first. The TLS files are
  // written at a wipe or when one is missing, and kept across boots: clients trust the CA they
  // came with, and a node that another process restarts (a cluster scenario's) must still
  // present one of it.
  prepare({ wipe = false } = {}) {
    const missing = system.TLS_LISTENER_FILES.some((file) => !fs.existsSync(path.join(this.hostDir, file)));
    const tls = this.tlsPort && (wipe || missing) ? system.tlsListenerFiles(this.certificates()) : {};
    writeFilesAsRoot(this.hostDir, { ...this.files(), ...tls }, { owner: `${this.root.uid}:${this.root.gid}`, wipe });
  }

  // The pid of the node's VM, or 0. The pid file outlives a killed node and its pid may be
  // reused: where there is a /proc, the process must also be a BEAM.
  pid() {
    const pid = readPid(path.join(this.hostDir, 'pid'));
    if (!pid || !alive(pid)) return 0;
    try {
      return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('beam') ? pid : 0;
    } catch (err) {
      return err.code === 'ENOENT' && !fs.existsSync('/proc/self') ? pid : 0;
    }
  }

  accepts() {
    return answers('127.0.0.1', this.port);
  }

  // Starts the node's VM detached, so that it outlives this process; resolves once it accepts
  // AMQP, rejects at once if its launcher ends first.
  async boot({ wipe = false } = {}) {
    if (await this.accepts()) throw new Error(`${this.name} is not running, but another process holds 127.0.0.1:${this.port}`);
    this.prepare({ wipe });
    const [command, args] = rootCommand('unshare', [
      '--mount',
      '--propagation',
      'private',
      'sh',
      '-c',
      LAUNCH,
      'sh',
      this.root.dir,
      `${this.dir}/startup.log`,
      'env',
      '-i',
      ...this.env(),
      SERVER,
    ]);
    const child = spawn(command, args, { detached: true, stdio: 'ignore' });
    child.unref();
    log(`${this.name}: booting (AMQP 127.0.0.1:${this.port}, state in ${this.hostDir})`);
    let ended = null;
    child.once('error', (err) => (ended = err.message));
    child.once('exit', (code, signal) => (ended = `exit ${signal || code}`));
    const deadline = Date.now() + BOOT_TIMEOUT;
    while (!(await this.accepts())) {
      if (ended) throw new Error(`${this.name} ended (${ended}) before accepting AMQP; ${this.startupLog} ends:\n${this.tail()}`);
      if (Date.now() > deadline) throw new Error(`${this.name} did not accept AMQP within ${BOOT_TIMEOUT} ms; ${this.startupLog} ends:\n${this.tail()}`);
      await sleep(200);
    }
    log(`${this.name}: accepts AMQP`);
  }

  tail() {
    try {
      return fs.readFileSync(this.startupLog, 'utf8').trim().split('\n').slice(-15).join('\n');
    } catch (err) {
      return `(${err.message})`;
    }
  }

  // The node's rabbitmqctl as argv (through sudo -n for a user), what faults.test.js runs.
  ctlCommand() {
    const [command, args] = rootCommand('chroot', ['--userspec=rabbitmq:rabbitmq', this.root.dir, 'env', '-i', ...this.env(), CTL, '-n', this.name]);
    return [command, ...args];
  }

  // Runs rabbitmqctl `args` against the node; resolves with its stdout.
  ctl(args, timeout = CTL_TIMEOUT) {
    const [command, ...before] = this.ctlCommand();
    return runChild(command, [...before, ...args], timeout);
  }

  // SIGKILL to the node's VM, as root (it runs as the root's rabbitmq); waits until it is gone.
  async kill() {
    const pid = this.pid();
    if (!pid) return;
    runAsRoot('kill', ['-KILL', String(pid)]);
    if (!(await this.gone(pid, STOP_TIMEOUT))) throw new Error(`${this.name}: pid ${pid} or port ${this.port} survived SIGKILL`);
  }

  // Waits until the VM has exited and its AMQP port refuses (its sockets can outlive it for a
  // moment, and a test that stops a node expects connections to fail).
  async gone(pid, timeoutMs) {
    const deadline = Date.now() + timeoutMs;
    while (alive(pid) || (await this.accepts())) {
      if (Date.now() > deadline) return false;
      await sleep(100);
    }
    return true;
  }

  // `rabbitmqctl stop`, then SIGKILL if the VM is still alive. The node's epmd stays: it may
  // serve other nodes (a cluster's share one); stopEpmd ends it.
  async stop() {
    const pid = this.pid();
    if (!pid) return;
    log(`${this.name}: stop (pid ${pid})`);
    try {
      await this.ctl(['stop'], STOP_TIMEOUT);
    } catch (err) {
      log(`${this.name}: ${err.message}`);
    }
    if (await this.gone(pid, STOP_TIMEOUT)) return;
    log(`${this.name}: still alive, kill -9 ${pid}`);
    await this.kill();
  }

  // Ends the epmd that the node started on its port (once no node is registered with it); the
  // node's mount namespace ends with it.
  async stopEpmd() {
    const [command, args] = rootCommand('chroot', ['--userspec=rabbitmq:rabbitmq', this.root.dir, 'env', '-i', 'PATH=/usr/bin:/bin', `ERL_EPMD_PORT=${this.epmdPort}`, 'epmd', '-kill']);
    try {
      await runChild(command, args, STOP_TIMEOUT);
      log(`epmd on ${this.epmdPort}: stopped`);
    } catch {
      // none was running
    }
  }
}

// Runs a command; resolves with its stdout, rejects with its exit and the end of its output.
function runChild(command, args, timeout) {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { timeout, killSignal: 'SIGKILL', stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.once('error', (err) => reject(new Error(`${command}: ${err.message}`)));
    child.once('close', (code, signal) => {
      if (code === 0) return resolve(stdout);
      const how = signal === 'SIGKILL' ? `killed after ${timeout} ms` : signal ? `killed by ${signal}` : `exit code ${code}`;
      reject(new Error(`${args.slice(-3).join(' ')} failed (${how}): ${(stderr.trim() || stdout.trim()).slice(-2000)}`));
    });
  });
}

// The single nodes' ports: AMQP 5701 for sid, 5702 for trixie, 10 more when refusing the
// deprecated features; amqps:// 100 above, the distribution's 20000 above, epmd's 1000 below.
function singleNodeSpec(release, refuseDeprecated) {
  checkRelease(release);
  const port = 5701 + RELEASES.indexOf(release) + (refuseDeprecated ? 10 : 0);
  return {
    name: `amqplib-rs-${release}${refuseDeprecated ? '-refusing' : ''}`,
    port,
    tlsPort: port + 100,
    epmdPort: port - 1000,
    config: refuseDeprecated ? REFUSE_DEPRECATED : [],
  };
}

async function singleNode({ release = 'sid', refuseDeprecated = false } = {}) {
  return new ChrootNode(await ensureRoot(release), singleNodeSpec(release, refuseDeprecated));
}

// What start() resolves with: the node's URL and how to reach its CLI and stop it.
function handle(node) {
  return { url: node.url, tlsUrl: node.tlsUrl, caFile: node.caFile, name: node.name, rabbitmq: node.root.rabbitmq, ctlCommand: () => node.ctlCommand(), ctl: (args) => node.ctl(args), stop: () => stopNode(node) };
}

// Starts the single node (the root made first if need be), from empty data unless it runs.
async function start(options = {}) {
  const node = await singleNode(options);
  await withLock(`${node.root.dir}.${node.short}.lock`, async () => {
    if (node.pid() && (await node.accepts())) {
      log(`${node.name}: already running`);
      return;
    }
    // Whatever is left of an earlier node that died (its VM or its epmd) goes first.
    await node.kill();
    await node.stopEpmd();
    await node.boot({ wipe: true });
  });
  return handle(node);
}

async function stopNode(node) {
  await withLock(`${node.root.dir}.${node.short}.lock`, async () => {
    await node.stop();
    await node.stopEpmd();
    log(`${node.name}: stopped`);
  });
}

async function stop(options = {}) {
  if (!hasRoot(options.release || 'sid')) return;
  await stopNode(await singleNode(options));
}

async function status(options = {}) {
  const release = options.release || 'sid';
  const info = rootInfo(release);
  if (!info) return { release, root: null };
  const node = await singleNode(options);
  const pid = node.pid();
  return { release, root: rootDir(release), rabbitmq: info.rabbitmq, name: node.name, url: node.url, pid: pid || null, amqp: await node.accepts() };
}

// The options ({ release, refuseDeprecated }) of the single node whose AMQP or amqps:// port is
// `port`, or null when none of ours has it.
function singleNodeFor(port) {
  for (const release of RELEASES) {
    for (const refuseDeprecated of [false, true]) {
      const spec = singleNodeSpec(release, refuseDeprecated);
      if (spec.port === port || spec.tlsPort === port) return { release, refuseDeprecated };
    }
  }
  return null;
}

// The rabbitmqctl (argv) of the single node of ours behind `url` (by its port), if its root is
// made; null for any other URL. What scripts/system.js's brokerCtlFor asks.
function ctlCommandFor(url) {
  const options = singleNodeFor(Number(new URL(url).port));
  if (!options || !hasRoot(options.release)) return null;
  return new ChrootNode(madeRoot(options.release), singleNodeSpec(options.release, options.refuseDeprecated)).ctlCommand();
}

module.exports = { RELEASES, ChrootNode, useLog, hasRoot, ensureRoot, madeRoot, start, stop, status, singleNodeFor, ctlCommandFor, rootDir };

// Runs `command` in a process group of its own; resolves with its exit code, its signal, or 124
// once it has been killed for running longer than `limitS` seconds (SIGTERM to the group, then
// SIGKILL 10 s later).
function runBounded([command, ...args], env, limitS) {
  return new Promise((resolve) => {
    const child = spawn(command, args, { stdio: 'inherit', env, detached: true });
    let timedOut = false;
    const kill = (signal) => {
      try {
        process.kill(-child.pid, signal);
      } catch {
        // the group is gone
      }
    };
    const timer =
      limitS > 0 &&
      setTimeout(() => {
        timedOut = true;
        console.error(`run: ${path.basename(command)} still running after ${limitS} s: SIGTERM to its process group`);
        kill('SIGTERM');
        setTimeout(() => kill('SIGKILL'), 10_000).unref();
      }, limitS * 1000);
    // Our own Ctrl-C or kill goes to the command too, and the node is stopped after it.
    const forward = (signal) => kill(signal);
    process.on('SIGINT', forward).on('SIGTERM', forward);
    child.once('error', (err) => {
      console.error(`run: ${command}: ${err.message}`);
      resolve(127);
    });
    child.once('exit', (code, signal) => {
      if (timer) clearTimeout(timer);
      process.off('SIGINT', forward).off('SIGTERM', forward);
      // What the group still runs (a test file's process) goes with it.
      kill('SIGKILL');
      resolve(timedOut ? 124 : (code ?? signal));
    });
  });
}

function parseArgs(argv) {
  const dashes = argv.indexOf('--');
  const own = dashes < 0 ? argv : argv.slice(0, dashes);
  const options = { command: own[0], release: 'sid', refuseDeprecated: own.includes('--refuse-deprecated'), tls: own.includes('--tls'), rest: dashes < 0 ? [] : argv.slice(dashes + 1) };
  const at = own.indexOf('--release');
  if (at >= 0) options.release = own[at + 1];
  const limit = own.indexOf('--time-limit');
  if (limit >= 0) options.timeLimit = Number(own[limit + 1]);
  return options;
}

async function main(argv) {
  const t0 = Date.now();
  const elapsed = () => `${((Date.now() - t0) / 1000).toFixed(1)} s`;
  log = (message) => console.error(`[${elapsed()}] ${message}`);
  const { command, rest, timeLimit, tls, ...options } = parseArgs(argv);
  if (command === 'start') {
    const node = await start(options);
    console.error(`start: RabbitMQ ${node.rabbitmq} as ${node.name}, up in ${elapsed()}`);
    console.log(`AMQP_URL=${node.url}`);
  } else if (command === 'stop') {
    await stop(options);
    console.error(`stop: done in ${elapsed()}`);
  } else if (command === 'status') {
    console.log(JSON.stringify(await status(options), null, 2));
  } else if (command === 'run' && rest.length > 0) {
    const node = await start(options);
    console.error(`run: RabbitMQ ${node.rabbitmq} as ${node.name} at ${tls ? node.tlsUrl : node.url}, up in ${elapsed()}`);
    const t1 = Date.now();
    // Over TLS: the node's amqps:// URL, its CA trusted as Node trusts an extra CA.
    const url = tls ? { AMQP_URL: node.tlsUrl, NODE_EXTRA_CA_CERTS: node.caFile } : { AMQP_URL: node.url };
    const status = await runBounded(rest, { ...process.env, ...url, AMQPLIB_RS_RABBITMQCTL: JSON.stringify(node.ctlCommand()) }, timeLimit);
    console.error(`run: ${path.basename(rest[0])} ended (${status}) after ${((Date.now() - t1) / 1000).toFixed(1)} s`);
    await node.stop();
    console.error(`run: done in ${elapsed()}`);
    process.exitCode = typeof status === 'number' ? status : 1;
  } else {
    throw new Error('usage: node scripts/rabbitmq4.js start|stop|status [--release sid|trixie] [--refuse-deprecated]\n' + '       node scripts/rabbitmq4.js run [--release sid|trixie] [--refuse-deprecated] [--tls] [--time-limit S] -- command args...');
  }
}

if (require.main === module) {
  main(process.argv.slice(2)).catch((err) => {
    console.error(err.message);
    process.exit(1);
  });
}
