'use strict';
// What the scripts (and the faults test) need of the machine beyond the project, the same as
// root (this machine, a container) and as a user with passwordless sudo (GitHub's runners run as
// `runner`):
// - root's commands (apt-get, mount, binfmt_misc) run as they are when we are root, else through
//   `sudo -n` (never a password prompt); with neither, a clear error;
// - Debian packages installed with apt when missing, saying so;
// - Python tools (zig, cargo-zigbuild) in a virtual environment of the project's, target/venv: a
//   Debian 12 or Ubuntu 24.04 Python is externally managed and refuses `pip install`;
// - RabbitMQ's CLI for the system broker (brokerCtl): Debian's rabbitmqctl is a wrapper that
//   runs for root or rabbitmq alone (and as root switches to rabbitmq, whose home has the
//   broker's Erlang cookie).

const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const root = path.join(__dirname, '..');
const VENV = path.join(root, 'target', 'venv');
const VENV_BIN = path.join(VENV, 'bin');

const isRoot = () => process.getuid?.() === 0;

let sudoWorks;
// Whether `sudo -n` runs a command as root without asking anything.
function canSudo() {
  if (sudoWorks === undefined) sudoWorks = !isRoot() && spawnSync('sudo', ['-n', 'true'], { stdio: 'ignore' }).status === 0;
  return sudoWorks;
}

// How to run `command args` as root with `env` set: [command, args], or through sudo, which
// resets the environment (so the variables are given through env(1)). Null when we can't.
function asRoot(command, args, env = {}) {
  if (isRoot()) return [command, args];
  if (!canSudo()) return null;
  const vars = Object.entries(env).map(([k, v]) => `${k}=${v}`);
  return ['sudo', ['-n', ...(vars.length > 0 ? ['env', ...vars] : []), command, ...args]];
}

const NO_ROOT = 'needs root: run as root, or as a user with passwordless sudo (sudo -n)';

// Runs `command args` as root, its output shown; throws if it fails or can't be run as root.
function runAsRoot(command, args, { env = {} } = {}) {
  const how = asRoot(command, args, env);
  if (!how) throw new Error(`${[command, ...args].join(' ')} ${NO_ROOT}`);
  const [cmd, cmdArgs] = how;
  console.log(`--- ${[cmd, ...cmdArgs].join(' ')}`);
  const result = spawnSync(cmd, cmdArgs, {
    cwd: root,
    stdio: 'inherit',
    env: isRoot() ? { ...process.env, ...env } : process.env,
  });
  if (result.status !== 0) throw new Error(`${cmd} ${cmdArgs.join(' ')} failed (exit ${result.status ?? result.error?.code ?? result.signal})`);
}

// Whether `command` is on PATH (the venv's bin counted once it is on it).
function has(command) {
  return spawnSync('sh', ['-c', `command -v "${command}"`], { stdio: 'ignore' }).status === 0;
}

const installed = (pkg) => spawnSync('dpkg-query', ['-W', '-f=${Status}', pkg], { encoding: 'utf8' }).stdout === 'install ok installed';

let updated = false;
// apt-get install of those of `packages` not installed (Debian and Ubuntu), saying so.
function aptInstall(packages) {
  const missing = packages.filter((p) => !installed(p));
  if (missing.length === 0) return;
  console.log(`Installing ${missing.join(', ')} (apt${isRoot() ? '' : ', sudo'})`);
  const env = { DEBIAN_FRONTEND: 'noninteractive' };
  if (!updated) runAsRoot('apt-get', ['update', '-q'], { env });
  updated = true;
  runAsRoot('apt-get', ['install', '-y', '-q', ...missing], { env });
}

// Puts the venv's bin first on this process's PATH, and so on its children's: its python3 is
// then the one cargo-zigbuild runs (`python3 -m ziglang`) when there is no zig on PATH.
function useVenv() {
  const dirs = (process.env.PATH || '').split(path.delimiter);
  if (dirs[0] !== VENV_BIN) process.env.PATH = [VENV_BIN, ...dirs.filter((d) => d !== VENV_BIN)].join(path.delimiter);
}

// pip install of `packages` into target/venv (made with `python3 -m venv` first, Debian's
// python3-venv installed for it when missing), then useVenv(). `check` names a file of the venv's
// bin that says they are there already.
function pipInstall(packages, check) {
  const python = path.join(VENV_BIN, 'python3');
  if (!fs.existsSync(python) || spawnSync(python, ['-m', 'pip', '--version'], { stdio: 'ignore' }).status !== 0) {
    console.log(`Making a Python virtual environment (${path.relative(root, VENV)})`);
    fs.rmSync(VENV, { recursive: true, force: true });
    const made = spawnSync('python3', ['-m', 'venv', VENV], { stdio: 'inherit' });
    if (made.status !== 0) {
      // Debian and Ubuntu ship venv's ensurepip apart: python3-venv (python3.X-venv with it).
      fs.rmSync(VENV, { recursive: true, force: true });
      aptInstall(['python3-venv']);
      const again = spawnSync('python3', ['-m', 'venv', VENV], { stdio: 'inherit' });
      if (again.status !== 0) throw new Error(`python3 -m venv ${VENV} failed (exit ${again.status ?? again.signal})`);
    }
  }
  useVenv();
  if (check && fs.existsSync(path.join(VENV_BIN, check))) return;
  console.log(`Installing ${packages.join(', ')} (pip, into ${path.relative(root, VENV)})`);
  const result = spawnSync(python, ['-m', 'pip', 'install', '-q', ...packages], { stdio: 'inherit' });
  if (result.status !== 0) throw new Error(`pip install ${packages.join(' ')} failed (exit ${result.status ?? result.signal})`);
}

// The PATH's `name`, or Debian's versioned `name-NN` (the highest), or LLVM's own bin/name under
// /usr/lib/llvm-NN; null when there is none.
function versioned(name) {
  if (has(name)) return name;
  const dirs = (process.env.PATH || '').split(path.delimiter).filter(Boolean);
  const found = [];
  for (const dir of dirs) {
    let files = [];
    try {
      files = fs.readdirSync(dir);
    } catch {
      continue;
    }
    for (const file of files) {
      const m = new RegExp(`^${name}-(\\d+)$`).exec(file);
      if (m) found.push({ version: Number(m[1]), file: path.join(dir, file) });
    }
  }
  try {
    for (const dir of fs.readdirSync('/usr/lib')) {
      const m = /^llvm-(\d+)$/.exec(dir);
      const file = path.join('/usr/lib', dir, 'bin', name);
      if (m && fs.existsSync(file)) found.push({ version: Number(m[1]), file });
    }
  } catch {
    // no /usr/lib
  }
  found.sort((a, b) => b.version - a.version);
  return found[0]?.file ?? null;
}

// The rabbitmqctl of the system broker, if any: on PATH, or where Debian puts it (/usr/sbin is
// not on a Debian user's PATH).
function findCtl() {
  const dirs = [...(process.env.PATH || '').split(path.delimiter).filter(Boolean), '/usr/sbin', '/usr/local/sbin'];
  for (const dir of dirs) {
    const file = path.join(dir, 'rabbitmqctl');
    try {
      fs.accessSync(file, fs.constants.X_OK);
      if (fs.statSync(file).isFile()) return file;
    } catch {
      // not here
    }
  }
  return null;
}

// Whether `file` is Debian's wrapper, which runs only for root or rabbitmq.
function debianWrapper(file) {
  try {
    return path.basename(fs.realpathSync(file)) === 'rabbitmq-script-wrapper';
  } catch {
    return false;
  }
}

// How to run the system broker's rabbitmqctl: { command: [file, ...args before its own] }, or
// { skip: why } when it can't be run here. Debian's wrapper runs as root (it switches to
// rabbitmq), as rabbitmq, or through `sudo -n`; any other rabbitmqctl (a tarball's, Homebrew's,
// a script that execs into a container) as it is.
function brokerCtl() {
  // A .bat runs only through a shell there: the scenario's execFile is not made for that.
  if (process.platform === 'win32') return { skip: 'rabbitmqctl is run on Linux and macOS only' };
  const file = findCtl();
  if (!file) return { skip: 'rabbitmqctl is not installed (not on PATH nor in /usr/sbin)' };
  if (!debianWrapper(file) || isRoot() || os.userInfo().username === 'rabbitmq') return { command: [file] };
  if (canSudo()) return { command: ['sudo', '-n', file] };
  return { skip: `${file} (Debian's) runs only as root or rabbitmq, and sudo -n is not available to ${os.userInfo().username}` };
}

// How to run the rabbitmqctl of the broker behind `url` (the tests' AMQP_URL), answered as
// brokerCtl answers: AMQPLIB_RS_RABBITMQCTL when set (the argv as a JSON array: `node
// scripts/rabbitmq4.js run` sets it), else the node of scripts/rabbitmq4.js's that has the URL's
// port, else the system broker's for the default port on loopback; any other broker's CLI is
// not known here.
function brokerCtlFor(url) {
  if (process.env.AMQPLIB_RS_RABBITMQCTL) return { command: JSON.parse(process.env.AMQPLIB_RS_RABBITMQCTL) };
  const target = new URL(url);
  const port = Number(target.port) || (target.protocol === 'amqps:' ? 5671 : 5672);
  try {
    const chroot = require('./rabbitmq4').ctlCommandFor(url);
    if (chroot) return { command: chroot };
  } catch (err) {
    return { skip: `the rabbitmqctl of the RabbitMQ 4 node on port ${port} cannot be run: ${err.message}` };
  }
  const loopback = ['localhost', '127.0.0.1', '[::1]'].includes(target.hostname);
  if (loopback && port === 5672) return brokerCtl();
  return { skip: `no rabbitmqctl is known for the broker at ${target.hostname}:${port} (AMQPLIB_RS_RABBITMQCTL may give its argv as JSON)` };
}

// The pid in a file, or 0 when there is no file or no pid in it.
function readPid(file) {
  try {
    return Math.max(0, Number(fs.readFileSync(file, 'utf8'))) || 0;
  } catch {
    return 0;
  }
}

// A process of another user (a node run as rabbitmq) answers kill 0 with EPERM.
function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return err.code === 'EPERM';
  }
}

// Holds `file` (made with O_EXCL, our pid in it) while fn runs: test files run in parallel
// processes, and a node, a cluster or a root must be made by one at a time. A lock whose owner
// died is taken over; one without a pid is being written or removed. Gives up after `timeout`
// ms; `log` hears that it waits.
async function withLock(file, fn, { timeout, log }) {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const deadline = Date.now() + timeout;
  for (let waited = false; ; waited = true) {
    try {
      fs.writeFileSync(file, String(process.pid), { flag: 'wx' });
      break;
    } catch (err) {
      if (err.code !== 'EEXIST') throw err;
    }
    const owner = readPid(file);
    if (owner && !alive(owner)) {
      fs.rmSync(file, { force: true });
      continue;
    }
    if (Date.now() > deadline) throw new Error(`${file}: pid ${owner} still holds it after ${timeout} ms`);
    if (!waited) log(`waiting for pid ${owner}, which holds ${file}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  try {
    return await fn();
  } finally {
    fs.rmSync(file, { force: true });
  }
}

// A test node's amqps:// listener, for scripts/rabbitmq4.js's and scripts/cluster.js's nodes:
// the files it reads (named in `dir`, which `tlsListenerConfig` is given as the node sees it)
// and the lines of rabbitmq.conf on 127.0.0.1:`port` (no client certificate asked for).
const TLS_LISTENER_FILES = ['ca.pem', 'server.pem', 'server.key'];

function tlsListenerConfig(port, dir) {
  return [
    `listeners.ssl.1 = 127.0.0.1:${port}`,
    `ssl_options.cacertfile = ${dir}/ca.pem`,
    `ssl_options.certfile = ${dir}/server.pem`,
    `ssl_options.keyfile = ${dir}/server.key`,
    'ssl_options.verify = verify_none',
    'ssl_options.fail_if_no_peer_cert = false',
  ];
}

// Those files' contents from certificates as __test__/tls_certificates.js makes them.
function tlsListenerFiles({ ca, cert, key }) {
  return { 'ca.pem': ca.toString(), 'server.pem': cert.toString(), 'server.key': key.toString() };
}

module.exports = {
  isRoot, canSudo, asRoot, runAsRoot, has, aptInstall, useVenv, pipInstall, versioned, brokerCtl, brokerCtlFor, VENV_BIN, readPid, alive, withLock,
  TLS_LISTENER_FILES, tlsListenerConfig, tlsListenerFiles,
};
