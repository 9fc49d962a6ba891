#!/usr/bin/env node
'use strict';
// A 3-node RabbitMQ cluster on loopback (AMQP on 5681-5683) for the tests that need one:
// quorum queues, leaders that move, nodes that die, memory alarms.
//
//   node scripts/cluster.js start|stop|status [--release sid|trixie]
//   const cluster = require('./scripts/cluster'); await cluster.start(); ... cluster.kill(1)
//
// With AMQPLIB_RS_CLUSTER_RELEASE=sid or trixie (or --release), the cluster is of RabbitMQ 4.x
// (4.3 or 4.0) on scripts/rabbitmq4.js's root of that release (made first if need be), AMQP on
// 5691-5693, one epmd of its own on 4690, with Khepri as its metadata store (4.3 has no other; on
// 4.0 the feature flag khepri_db is enabled once the cluster is formed). The nodes are
// rabbitmq4.js's ChrootNode: their state is in the root, and they are run as its rabbitmq.
//
// Each node has its own config, ports and state under one directory (AMQPLIB_RS_CLUSTER_DIR,
// default $TMPDIR/amqplib-rs-cluster-<user>: one per user, so that what a run as root left, owned
// by rabbitmq, is no obstacle to a user's run, nor the other way), so a broker already running on
// 5672 and its files are never touched. As root, the nodes and the CLI run as the user rabbitmq:
// its home holds the Erlang cookie they must share. Any other user runs them as itself, with the
// cookie of its own home (Erlang makes one at the first node's boot): no root and no sudo needed.
// Debian's scripts are run behind its wrappers (/usr/sbin/rabbitmq*), which refuse anyone but
// root and rabbitmq. A cold start wipes the old state, boots rs1, then rs2 and rs3
// together; those join rs1 by themselves (classic_config peer discovery), which is faster than
// stop_app/join_cluster/start_app. Processes are only ever stopped by the pid their node wrote.
// The module logs its steps with NODE_DEBUG=amqplib-rs-cluster; the script always does.

const { spawn } = require('node:child_process');
const { X509Certificate } = require('node:crypto');
const fs = require('node:fs');
const { answers } = require('./answers');
const { makeTlsCertificates } = require('../__test__/tls_certificates');
const { readPid, alive, withLock, TLS_LISTENER_FILES, tlsListenerConfig, tlsListenerFiles } = require('./system');
const os = require('node:os');
const path = require('node:path');
const util = require('node:util');

const flag = (name) => (require.main === module && process.argv.includes(name) ? process.argv[process.argv.indexOf(name) + 1] : undefined);
const RELEASE = process.env.AMQPLIB_RS_CLUSTER_RELEASE || flag('--release') || null;
const rabbitmq4 = RELEASE ? require('./rabbitmq4') : null;
if (RELEASE && !rabbitmq4.RELEASES.includes(RELEASE)) throw new Error(`AMQPLIB_RS_CLUSTER_RELEASE is one of ${rabbitmq4.RELEASES.join(', ')}, not ${RELEASE}`);
const DIR =
  process.env.AMQPLIB_RS_CLUSTER_DIR || path.join(os.tmpdir(), `amqplib-rs-cluster-${RELEASE ? `${RELEASE}-` : ''}${os.userInfo().username}`);
// Short names on `localhost` work here: Debian's own broker runs as rabbit@localhost.
const FIRST_PORT = RELEASE ? 5691 : 5681;
// Each node also listens for amqps:// 100 ports above, with a certificate of the cluster's CA
// (clusterCertificates) for 127.0.0.1; caFile() is that CA, for the clients to trust.
const NODES = [0, 1, 2].map((n) => ({
  name: `rs${n + 1}@localhost`,
  port: FIRST_PORT + n,
  url: `amqp://guest:guest@127.0.0.1:${FIRST_PORT + n}`,
  tlsPort: FIRST_PORT + 100 + n,
  tlsUrl: `amqps://guest:guest@127.0.0.1:${FIRST_PORT + 100 + n}`,
}));
// The 4.x cluster's epmd, shared by its nodes (they find each other through it); never 4369.
const EPMD_PORT = 4690;

// Debian's rabbitmq-server and rabbitmqctl on PATH are one wrapper that refuses users other than
// root and rabbitmq and, run as rabbitmq, sends the server's output to
// /var/log/rabbitmq/startup_log, a file of the system broker's: run the scripts behind it.
const DEBIAN_BIN = '/usr/lib/rabbitmq/bin';
const debian = (name) => (fs.existsSync(path.join(DEBIAN_BIN, name)) ? path.join(DEBIAN_BIN, name) : name);
const SERVER = debian('rabbitmq-server');
const CTL = debian('rabbitmqctl');
const BOOT_TIMEOUT = 90_000;
const CTL_TIMEOUT = 60_000;
const STOP_TIMEOUT = 15_000;
const LOCK_TIMEOUT = 300_000;

let log = util.debuglog('amqplib-rs-cluster');
// The 4.x nodes' own steps (boot, stop) in the cluster's log.
if (RELEASE) rabbitmq4.useLog((message) => log(message));

let chrootNodes;
// Node i of a 4.x cluster, once its root is made (start() makes it).
function chrootNode(i) {
  if (!chrootNodes) {
    const root = rabbitmq4.madeRoot(RELEASE);
    chrootNodes = NODES.map(
      (node, n) =>
        new rabbitmq4.ChrootNode(root, { name: `rs${n + 1}`, port: node.port, tlsPort: node.tlsPort, epmdPort: EPMD_PORT, config: discoveryConfig(n), certificates: clusterCertificates }),
    );
  }
  return chrootNodes[i];
}

const nodeDir = (i) => path.join(DIR, `rs${i + 1}`);
const envFile = (i) => path.join(nodeDir(i), 'rabbitmq-env.conf');
const pidFile = (i) => path.join(nodeDir(i), 'pid');
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

let account;
// Who runs the nodes and the CLI: rabbitmq when we are root, whose home has the cookie; else we.
function user() {
  if (account) return account;
  if (process.getuid() !== 0) return (account = { home: os.homedir() });
  const entry = fs
    .readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((line) => line.startsWith('rabbitmq:'));
  if (!entry) throw new Error('running as root, but there is no user rabbitmq: is rabbitmq-server installed?');
  const [, , uid, gid, , home] = entry.split(':');
  return (account = { uid: Number(uid), gid: Number(gid), home });
}

// A clean environment: variables of the caller's (RABBITMQ_*, ERL_*) must not leak into a node.
function childEnv(i) {
  const { home } = user();
  return { PATH: process.env.PATH, HOME: home, LANG: 'C.UTF-8', RABBITMQ_CONF_ENV_FILE: envFile(i) };
}

// Runs a command as the nodes' user; resolves with its stdout, rejects with its exit and stderr.
function run(command, args, { env, timeout = CTL_TIMEOUT }) {
  const line = [command, ...args].join(' ');
  const { uid, gid, home } = user();
  return new Promise((resolve, reject) => {
    // In the user's home, as Debian's wrapper runs its CLI: rabbitmq may not read our cwd.
    const child = spawn(command, args, { uid, gid, cwd: home, env, timeout, killSignal: 'SIGKILL', stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.once('error', (err) => reject(new Error(`${line}: ${err.message}`)));
    child.once('close', (code, signal) => {
      if (code === 0) return resolve(stdout);
      const how = signal === 'SIGKILL' ? `killed after ${timeout} ms` : signal ? `killed by ${signal}` : `exit code ${code}`;
      reject(new Error(`${line} failed (${how}): ${(stderr.trim() || stdout.trim()).slice(-2000)}`));
    });
  });
}

const ctl = (i, args, timeout) => (RELEASE ? chrootNode(i).ctl(args, timeout) : run(CTL, ['-n', NODES[i].name, ...args], { env: childEnv(i), timeout }));

const accepts = (port) => answers('127.0.0.1', port);

// Polls until node i accepts a TCP connection; `failed` may end the wait early with its Error.
async function untilAmqp(i, timeoutMs, failed = () => null) {
  const { name, port } = NODES[i];
  const deadline = Date.now() + timeoutMs;
  while (!(await accepts(port))) {
    const err = failed();
    if (err) throw err;
    if (Date.now() > deadline) throw new Error(`${name} did not accept AMQP on 127.0.0.1:${port} within ${timeoutMs} ms`);
    await sleep(200);
  }
}

const waitForAmqp = (i, timeoutMs = BOOT_TIMEOUT) => untilAmqp(i, timeoutMs);


// The pid of node i's VM, or 0. A pid file outlives a killed node and its pid may be reused,
// so where there is a /proc the process must also carry this node's env file in its environment.
function nodePid(i) {
  if (RELEASE) return chrootNode(i).pid();
  const pid = readPid(pidFile(i));
  if (!pid || !alive(pid)) return 0;
  if (!fs.existsSync('/proc/self')) return pid;
  try {
    return fs.readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').includes(`RABBITMQ_CONF_ENV_FILE=${envFile(i)}`) ? pid : 0;
  } catch {
    return 0;
  }
}

// Waits until node i's VM has exited and its AMQP port refuses. A dying process loses its
// environment (so nodePid no longer sees it) before it is gone, and its sockets can outlive it
// for a moment; a test that kills a node expects connections to fail.
async function gone(i, pid, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  while (alive(pid) || (await accepts(NODES[i].port))) {
    if (Date.now() > deadline) return false;
    await sleep(100);
  }
  return true;
}

function chown(file) {
  const { uid, gid } = user();
  if (uid !== undefined) fs.chownSync(file, uid, gid);
}

function writeFile(file, text) {
  fs.writeFileSync(file, text);
  chown(file);
}

// rs1 seeds the cluster: with peers to discover it would try them for 5 s before going on
// alone. The others, booting blank, join whichever peer runs.
function discoveryConfig(i) {
  if (i === 0) return [];
  return ['cluster_formation.peer_discovery_backend = classic_config', ...NODES.map((node, n) => `cluster_formation.classic_config.nodes.${n + 1} = ${node.name}`)];
}

// The cluster's CA and the nodes' certificate and key, one set for the three nodes in DIR/tls:
// made at the first need after a cold start (which removes them), then read by whichever
// process boots a node, so that a node a test's process restarts presents one of the CA the
// clients trust.
const tlsDir = () => path.join(DIR, 'tls');
const caFile = () => path.join(tlsDir(), 'ca.pem');

// Valid for this many days: longer than a cluster is usually left up. One left up until its
// certificates near their end is stopped and started cold, with new ones (startUnlocked).
const CERTIFICATE_DAYS = 30;

function clusterCertificates() {
  const dir = tlsDir();
  const files = { ca: 'ca.pem', cert: 'server.pem', key: 'server.key' };
  if (Object.values(files).some((file) => !fs.existsSync(path.join(dir, file)))) makeTlsCertificates(dir, CERTIFICATE_DAYS);
  return Object.fromEntries(Object.entries(files).map(([name, file]) => [name, fs.readFileSync(path.join(dir, file))]));
}

// A system node's copy of them, written when one of its files is missing.
function writeTlsFiles(i) {
  const dir = nodeDir(i);
  if (TLS_LISTENER_FILES.every((file) => fs.existsSync(path.join(dir, file)))) return;
  for (const [file, text] of Object.entries(tlsListenerFiles(clusterCertificates()))) writeFile(path.join(dir, file), text);
}

// The node's own files. The system rabbitmq.conf would put every node on 5672, and the system
// rabbitmq-env.conf names them all rabbit@localhost: each node gets its own of both.
function writeNodeFiles(i) {
  fs.mkdirSync(DIR, { recursive: true });
  chown(DIR);
  const dir = nodeDir(i);
  fs.mkdirSync(dir, { recursive: true });
  chown(dir);
  const config = [`listeners.tcp.1 = 127.0.0.1:${NODES[i].port}`, 'loopback_users = none', ...tlsListenerConfig(NODES[i].tlsPort, dir), ...discoveryConfig(i), ''];
  writeFile(path.join(dir, 'rabbitmq.conf'), config.join('\n'));
  writeTlsFiles(i);
  // No plugins at all (not even management): less to boot and less CPU.
  writeFile(path.join(dir, 'enabled_plugins'), '[].\n');
  writeFile(
    envFile(i),
    [
      `NODENAME=${NODES[i].name}`,
      `DIST_PORT=${NODES[i].port + 20000}`,
      `CONFIG_FILE=${path.join(dir, 'rabbitmq.conf')}`,
      `ENABLED_PLUGINS_FILE=${path.join(dir, 'enabled_plugins')}`,
      `MNESIA_BASE=${path.join(dir, 'mnesia')}`,
      `MNESIA_DIR=${path.join(dir, 'mnesia', `rs${i + 1}`)}`,
      `LOG_BASE=${path.join(dir, 'log')}`,
      `PID_FILE=${pidFile(i)}`,
      // One scheduler each: three nodes share two cores with the tests.
      `SERVER_ADDITIONAL_ERL_ARGS='+S 1:1'`,
      // Loopback only, for the nodes' distribution, the CLI's and an epmd that a node starts.
      'export ERL_EPMD_ADDRESS=127.0.0.1',
      `export ERL_FLAGS='-kernel inet_dist_use_interface {127,0,0,1}'`,
      '',
    ].join('\n'),
  );
}

// Starts node i's VM, detached so that it outlives this process, and waits for AMQP.
async function boot(i) {
  if (RELEASE) return chrootNode(i).boot();
  // Readiness is a TCP connect, so a port held by another process would pass for this node.
  const { name, port } = NODES[i];
  if (await accepts(port)) throw new Error(`${name} is not running, but another process holds 127.0.0.1:${port}`);
  writeNodeFiles(i);
  const { uid, gid } = user();
  const output = path.join(nodeDir(i), 'startup.log');
  const fd = fs.openSync(output, 'a');
  chown(output);
  const child = spawn(SERVER, [], { uid, gid, cwd: nodeDir(i), env: childEnv(i), detached: true, stdio: ['ignore', fd, fd] });
  fs.closeSync(fd);
  child.unref();
  log(`${name}: booting (pid ${child.pid}, AMQP 127.0.0.1:${port}, state in ${nodeDir(i)})`);
  // A node that cannot boot (bad config, name or distribution port in use) exits: say why at once.
  let ended = null;
  child.once('error', (err) => (ended = err.message));
  child.once('exit', (code, signal) => (ended = `exit ${signal || code}`));
  await untilAmqp(i, BOOT_TIMEOUT, () => {
    if (!ended) return null;
    const tail = fs.readFileSync(output, 'utf8').trim().split('\n').slice(-15).join('\n');
    return new Error(`${SERVER} for ${name} ended (${ended}) before accepting AMQP; ${output} ends:\n${tail}`);
  });
  log(`${name}: accepts AMQP`);
}

// Brings node i up whatever it was: not running (killed, stopped, never started) or running with
// its app stopped. A node with state rejoins its cluster as it boots; a blank one joins a peer.
async function ensureNode(i) {
  if (!nodePid(i)) return boot(i);
  if (await accepts(NODES[i].port)) return;
  log(`${NODES[i].name}: start_app`);
  await ctl(i, ['start_app']);
  await waitForAmqp(i);
}

async function clusterStatus(i) {
  return JSON.parse(await ctl(i, ['cluster_status', '--formatter', 'json']));
}

// A node outside rs1's cluster (it booted while rs1 was unreachable) is reset and joined to it.
async function join(i) {
  const { name } = NODES[i];
  const seed = NODES[0].name;
  log(`${name}: not in ${seed}'s cluster: stop_app, reset, join_cluster ${seed}, start_app`);
  await ctl(i, ['stop_app']);
  await ctl(i, ['reset']);
  // The seed may still count an earlier life of this node (whose state was wiped) as a member:
  // join_cluster would then fail with inconsistent_cluster.
  if ((await clusterStatus(0)).disk_nodes.includes(name)) await ctl(0, ['forget_cluster_node', name]);
  await ctl(i, ['join_cluster', seed]);
  await ctl(i, ['start_app']);
  await waitForAmqp(i);
}

async function allUp() {
  return NODES.every((_, i) => nodePid(i)) && (await Promise.all(NODES.map((node) => accepts(node.port)))).every(Boolean);
}

// Test files run in parallel processes and each may call start() or stop(): one at a time.
async function exclusive(fn) {
  fs.mkdirSync(DIR, { recursive: true });
  chown(DIR);
  return withLock(path.join(DIR, 'lock'), fn, { timeout: LOCK_TIMEOUT, log });
}

// Khepri as the 4.x cluster's metadata store: on 4.0 an opt-in feature flag, off by default,
// enabled cluster-wide while all nodes run; 4.3 has no other store (the flag is on, and enabling
// it again does nothing).
async function useKhepri() {
  await ctl(0, ['enable_feature_flag', '--opt-in', 'khepri_db']);
}

// Whether the certificates the nodes present end within a day (a run may take hours).
function certificatesExpiring() {
  const soon = Date.now() + 24 * 3600 * 1000;
  return ['ca.pem', 'server.pem'].some((file) => {
    const pem = path.join(tlsDir(), file);
    return fs.existsSync(pem) && Date.parse(new X509Certificate(fs.readFileSync(pem)).validTo) < soon;
  });
}

async function startUnlocked() {
  if ((await allUp()) && (await clusterStatus(0)).running_nodes.length === NODES.length) {
    if (!certificatesExpiring()) {
      // A start that failed at enabling Khepri left the cluster formed without it.
      if (RELEASE) await useKhepri();
      log(`already up and formed: ${NODES.map((node) => node.name).join(', ')}`);
      return;
    }
    log(`the certificates in ${tlsDir()} end within a day: stopping the nodes, to start cold with new ones`);
    await Promise.all(NODES.map((_, i) => stopNode(i)));
  }
  if (NODES.every((_, i) => !nodePid(i))) {
    // Nothing runs: start from blank state, so no queue of an earlier run is left and no node
    // waits for the one that stopped last. rs1 goes first so the others have someone to join.
    log(`cold start: wiping ${NODES.map((_, i) => (RELEASE ? chrootNode(i).hostDir : nodeDir(i))).join(', ')} and the certificates`);
    fs.rmSync(tlsDir(), { recursive: true, force: true });
    for (let i = 0; i < NODES.length; i++) {
      if (RELEASE) chrootNode(i).prepare({ wipe: true });
      else fs.rmSync(nodeDir(i), { recursive: true, force: true });
    }
    await boot(0);
  }
  await Promise.all(NODES.map((_, i) => ensureNode(i)));
  const members = (await clusterStatus(0)).running_nodes;
  for (let i = 1; i < NODES.length; i++) {
    if (!members.includes(NODES[i].name)) await join(i);
  }
  if (RELEASE) await useKhepri();
  log(`up and formed: ${NODES.map((node) => node.name).join(', ')}`);
}

// `rabbitmqctl stop`, then SIGKILL to the pid the node wrote if it is still alive.
async function stopNode(i) {
  const pid = nodePid(i);
  if (!pid) return;
  log(`${NODES[i].name}: stop (pid ${pid})`);
  try {
    await ctl(i, ['stop'], STOP_TIMEOUT);
  } catch (err) {
    log(`${NODES[i].name}: ${err.message}`);
  }
  if (await gone(i, pid, STOP_TIMEOUT)) return;
  log(`${NODES[i].name}: still alive, kill -9 ${pid}`);
  await kill(i);
}

async function stopUnlocked() {
  if (RELEASE && !rabbitmq4.hasRoot(RELEASE)) return log(`no root for ${RELEASE}: no node of it runs`);
  await Promise.all(NODES.map((_, i) => stopNode(i)));
  // The nodes' epmd goes with them, and their mount namespaces with it.
  if (RELEASE) await chrootNode(0).stopEpmd();
  log('stopped');
}

const start = async () => {
  if (RELEASE) await rabbitmq4.ensureRoot(RELEASE);
  return exclusive(startUnlocked);
};
const stop = () => exclusive(stopUnlocked);

async function kill(i) {
  if (RELEASE) return chrootNode(i).kill();
  const pid = nodePid(i);
  if (!pid) return;
  process.kill(pid, 'SIGKILL');
  if (!(await gone(i, pid, STOP_TIMEOUT))) throw new Error(`${NODES[i].name}: pid ${pid} or port ${NODES[i].port} survived SIGKILL`);
}

async function stopApp(i) {
  await ctl(i, ['stop_app']);
}

async function startApp(i) {
  await ctl(i, ['start_app']);
  await waitForAmqp(i);
}

const restart = ensureNode;

// Closes every client connection of node i (320 CONNECTION_FORCED), as an operator may.
async function closeConnections(i) {
  await ctl(i, ['close_all_connections', 'closed by the cluster scenarios']);
}

// A watermark that any VM exceeds raises the alarm at once; 0.4 is the default.
async function setMemoryAlarm(i, on) {
  await ctl(i, ['set_vm_memory_high_watermark', on ? '0.0000001' : '0.4']);
}

// Asks the first node that accepts AMQP, so it works while others are down.
async function queueLeader(queueName) {
  const responsive = await Promise.all(NODES.map((node) => accepts(node.port)));
  const i = responsive.indexOf(true);
  if (i < 0) throw new Error('no cluster node accepts AMQP');
  const queues = JSON.parse(await ctl(i, ['list_queues', 'name', 'leader', '--formatter', 'json']));
  const queue = queues.find((q) => q.name === queueName);
  if (!queue) throw new Error(`no queue ${queueName} on ${NODES[i].name}`);
  if (!queue.leader) throw new Error(`queue ${queueName} has no leader (a classic queue?)`);
  return queue.leader;
}

async function status() {
  if (RELEASE && !rabbitmq4.hasRoot(RELEASE)) return { release: RELEASE, root: null };
  const nodes = await Promise.all(
    NODES.map(async (node, i) => {
      const pid = nodePid(i);
      return { ...node, pid: pid || null, running: pid > 0, amqp: await accepts(node.port) };
    }),
  );
  const i = nodes.findIndex((node) => node.amqp);
  return { release: RELEASE || 'system', dir: DIR, nodes, cluster: i < 0 ? [] : (await clusterStatus(i)).running_nodes };
}

module.exports = { NODES, RELEASE, caFile, start, stop, status, stopApp, startApp, closeConnections, kill, restart, setMemoryAlarm, queueLeader, waitForAmqp };

async function main(command) {
  const t0 = Date.now();
  const elapsed = () => `${((Date.now() - t0) / 1000).toFixed(1)} s`;
  log = (message) => console.log(`[${elapsed()}] ${message}`);
  if (command === 'start') await start();
  else if (command === 'stop') await stop();
  else if (command === 'status') console.log(JSON.stringify(await status(), null, 2));
  else throw new Error('usage: node scripts/cluster.js start|stop|status [--release sid|trixie]');
  console.log(`${command}: done in ${elapsed()}`);
}

if (require.main === module) {
  main(process.argv[2]).catch((err) => {
    console.error(err.message);
    process.exit(1);
  });
}
