'use strict';
// Packaging (issue 8): what `npm pack` puts in the main package and in this platform's package,
// that the two tarballs install into an empty project with no Rust on PATH and run an unchanged
// amqplib application there, and that the addon works from a worker thread.

const { describe, it, after } = require('node:test');
const assert = require('node:assert');
const { execFileSync, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { findOnPath } = require('./helpers');

const ROOT = path.join(__dirname, '..');
const AMQP_URL = process.env.AMQP_URL || 'amqp://localhost';
const PLATFORM = require('../lib/platform').ownPlatformSuffix(); // the one built here
const BINARY = `amqplib_rs.${PLATFORM}.node`;
const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'));

const temps = [];
after(() => {
  for (const dir of temps) fs.rmSync(dir, { recursive: true, force: true });
});
function tempDir(prefix) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  temps.push(dir);
  return dir;
}

// PATH without any directory that holds cargo, rustc or rustup, nor node_modules/.bin (where the
// napi CLI is), with this Node's directory first so that `npm` and scripts run on it.
const TOOLS = ['cargo', 'rustc', 'rustup'];
const rustFreePath = [path.dirname(process.execPath), ...(process.env.PATH || '').split(path.delimiter)]
  .filter((dir) => dir && !dir.split(path.sep).includes('.bin') && !TOOLS.some((tool) => findOnPath(tool, [dir])));

// The environment for the clean project: no npm_* variables inherited from an npm script (they
// would point npm at this repository), no NODE_PATH (which could reach its node_modules), no
// AMQPLIB_RS_ADDON (which would choose the addon for it).
function cleanEnv() {
  const env = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (!/^npm_/i.test(key) && !['NODE_PATH', 'PATH', 'AMQPLIB_RS_ADDON'].includes(key)) env[key] = value;
  }
  env.PATH = rustFreePath.join(path.delimiter);
  env.AMQP_URL = AMQP_URL;
  return env;
}

function npm(args, cwd, env = process.env) {
  // On Windows npm is npm.cmd, which only a shell runs.
  const run = spawnSync('npm', args, { cwd, env, encoding: 'utf8', timeout: 30_000, shell: process.platform === 'win32' });
  assert.strictEqual(run.status, 0, `npm ${args.join(' ')} in ${cwd} failed:\n${run.stdout}\n${run.stderr}`);
  return run.stdout;
}

// `npm pack` of a directory; --ignore-scripts, because packing runs `prepare` (the Rust build).
function pack(dir, destination) {
  const [result] = JSON.parse(npm(['pack', '--ignore-scripts', '--json', '--pack-destination', destination], dir));
  return { file: path.join(destination, result.filename), files: result.files.map((f) => f.path).sort() };
}

const unique = `amqplib-rs-test.package.${process.pid}.${Date.now()}`;

const { platformSuffix } = require('../lib/platform');

describe('packaging', () => {
  it('the platform packages match the napi targets and are optional dependencies of the same version', () => {
    const dirs = fs.readdirSync(path.join(ROOT, 'npm')).sort();
    assert.strictEqual(dirs.length, pkg.napi.targets.length);
    const names = dirs.map((dir) => {
      const platform = JSON.parse(fs.readFileSync(path.join(ROOT, 'npm', dir, 'package.json'), 'utf8'));
      assert.strictEqual(platform.name, `amqplib-rs-${dir}`);
      assert.strictEqual(platform.version, pkg.version);
      assert.deepStrictEqual(platform.files, [`amqplib_rs.${dir}.node`, 'THIRD_PARTY_LICENSES.md']);
      assert.strictEqual(platform.main, `amqplib_rs.${dir}.node`);
      assert.ok(platform.os && platform.cpu, `${dir} says which os and cpu it is for`);
      if (dir.startsWith('linux-')) assert.deepStrictEqual(platform.libc, [dir.endsWith('-musl') ? 'musl' : 'glibc']);
      // The loader looks for this very package on the machines it is for.
      const glibc = platform.libc?.[0] === 'glibc';
      assert.strictEqual(platformSuffix(platform.os[0], platform.cpu[0], glibc), dir, `the loader's case for ${dir}`);
      return platform.name;
    });
    assert.deepStrictEqual(pkg.optionalDependencies, Object.fromEntries(names.map((name) => [name, pkg.version])));
    // `npm ci` refuses a lock that lacks a dependency of package.json, even an optional one that
    // is not on the registry yet: the lock must name each.
    const lock = JSON.parse(fs.readFileSync(path.join(ROOT, 'package-lock.json'), 'utf8'));
    for (const name of names) {
      assert.strictEqual(lock.packages[`node_modules/${name}`]?.version, pkg.version, `package-lock.json has ${name}`);
      assert.strictEqual(lock.packages[`node_modules/${name}`].optional, true);
    }
  });

  it('with neither a local build nor the platform package, loading says what to do', () => {
    const dir = tempDir('amqplib-rs-noaddon-');
    fs.mkdirSync(path.join(dir, 'lib'));
    for (const file of ['native.js', 'platform.js']) fs.copyFileSync(path.join(ROOT, 'lib', file), path.join(dir, 'lib', file));
    const run = spawnSync(process.execPath, ['-e', `require(${JSON.stringify(path.join(dir, 'lib', 'native.js'))})`],
      { env: cleanEnv(), encoding: 'utf8' });
    assert.notStrictEqual(run.status, 0);
    assert.match(run.stderr, /Error: amqplib-rs: no native addon for [\w-]+ could be loaded/);
    assert.match(run.stderr, /npm install amqplib-rs-[\w-]+/);
    assert.match(run.stderr, /npm run build.*Rust toolchain/s);
  });

  // npm comes with Node's installers, not with Node itself (the Node that test:windows runs
  // under Wine is the bare program).
  const noNpm = !findOnPath('npm') && 'npm is not on PATH';
  it('installs from the packed tarballs with no Rust on PATH and runs an unchanged amqplib application', { skip: noNpm }, () => {
    const work = tempDir('amqplib-rs-pack-');
    const main = pack(ROOT, work);
    // Only what users need: the entry points, lib/, the README, the licence and package.json.
    for (const file of main.files) {
      assert.match(file, /^(index|callback_api)\.(js|mjs|d\.ts)$|^lib\/[\w.]+\.(js|d\.ts)$|^(README\.md|LICENSE|package\.json)$/,
        `${file} does not belong in the package`);
    }
    for (const file of ['index.js', 'callback_api.js', 'lib/native.js', 'lib/connection.js', 'package.json']) {
      assert.ok(main.files.includes(file), `the package has ${file}`);
    }

    const platformDir = path.join(ROOT, 'npm', PLATFORM);
    // The build this process runs goes into the platform package: native/'s, or the one
    // AMQPLIB_RS_ADDON names (the sanitizer's, an emulated platform's).
    const built = process.env.AMQPLIB_RS_ADDON ?? path.join(ROOT, 'native', BINARY);
    assert.ok(fs.existsSync(built), `${built} is missing: run \`npm run build\` first`);
    fs.copyFileSync(built, path.join(platformDir, BINARY));
    let platform;
    try {
      platform = pack(platformDir, work);
    } finally {
      fs.rmSync(path.join(platformDir, BINARY), { force: true });
    }
    assert.deepStrictEqual(platform.files, ['README.md', 'THIRD_PARTY_LICENSES.md', BINARY, 'package.json']);

    const env = cleanEnv();
    for (const tool of TOOLS) assert.strictEqual(findOnPath(tool, rustFreePath), undefined, `${tool} is not on PATH`);
    assert.strictEqual(findOnPath('napi', rustFreePath), undefined, 'napi is not on PATH');

    // npm aliases (`amqplib@npm:amqplib-rs`) name registry packages only; for a local tarball the
    // same thing is a `file:` spec under the name amqplib. Scripts are not ignored: installing a
    // tarball must not run the build (which could not run here).
    const app = path.join(work, 'app');
    fs.mkdirSync(app);
    fs.writeFileSync(path.join(app, 'package.json'), JSON.stringify({
      name: 'app',
      version: '1.0.0',
      private: true,
      dependencies: {
        amqplib: `file:../${path.basename(main.file)}`,
        [`amqplib-rs-${PLATFORM}`]: `file:../${path.basename(platform.file)}`,
      },
    }, null, 2));
    npm(['install', '--offline', '--no-audit', '--no-fund', '--no-update-notifier'], app, env);
    const installed = path.join(app, 'node_modules', 'amqplib');
    assert.strictEqual(JSON.parse(fs.readFileSync(path.join(installed, 'package.json'), 'utf8')).name, 'amqplib-rs');
    assert.ok(!fs.existsSync(path.join(installed, 'native')), 'no build ran on install');

    // An amqplib application, as anyone would write it.
    fs.writeFileSync(path.join(app, 'app.js'), `'use strict';
const amqp = require('amqplib');

async function main() {
  const queue = process.argv[2];
  const conn = await amqp.connect(process.env.AMQP_URL);
  const ch = await conn.createChannel();
  await ch.assertQueue(queue, { durable: true, autoDelete: true });
  ch.sendToQueue(queue, Buffer.from('hello from the tarball'));
  const body = await new Promise((resolve) => {
    ch.consume(queue, (msg) => {
      ch.ack(msg);
      resolve(msg.content.toString());
    });
  });
  await ch.close();
  await conn.close();
  console.log('received: ' + body);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
`);
    const run = spawnSync(process.execPath, ['app.js', unique], { cwd: app, env, encoding: 'utf8', timeout: 20_000 });
    assert.strictEqual(run.status, 0, `the application failed:\n${run.stdout}\n${run.stderr}`);
    assert.strictEqual(run.stdout.trim(), 'received: hello from the tarball');

    // And what it ran on: the installed package, with the addon from the platform package.
    const where = execFileSync(process.execPath, ['-e', `
      require('amqplib');
      console.log(JSON.stringify({ main: require.resolve('amqplib'), addons: Object.keys(require.cache).filter((f) => f.endsWith('.node')) }));
    `], { cwd: app, env, encoding: 'utf8' });
    const { main: entry, addons } = JSON.parse(where);
    assert.strictEqual(entry, path.join(fs.realpathSync(installed), 'index.js'));
    assert.deepStrictEqual(addons, [path.join(fs.realpathSync(app), 'node_modules', `amqplib-rs-${PLATFORM}`, BINARY)]);
  });
});

// A worker thread in a child process of its own, so that a worker that cannot exit cleanly
// fails this test instead of the whole test run.
function runWorker(workerCode, mainCode) {
  const script = `
    'use strict';
    const { Worker } = require('node:worker_threads');
    const worker = new Worker(${JSON.stringify(workerCode)}, {
      eval: true,
      workerData: { root: ${JSON.stringify(ROOT)}, url: ${JSON.stringify(AMQP_URL)}, queue: ${JSON.stringify(unique)} },
    });
    const messages = [];
    worker.on('message', (m) => messages.push(m));
    worker.on('error', (err) => { console.error('worker error:', err); process.exitCode = 1; });
    worker.on('exit', async (code) => {
      console.log(JSON.stringify({ exit: code, messages }));
      ${mainCode || ''}
    });
  `;
  return spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 20_000 });
}

describe('worker_threads', () => {
  it('a worker connects, sends and receives a message, closes, and exits', () => {
    const run = runWorker(`
      const { parentPort, workerData } = require('node:worker_threads');
      const amqp = require(workerData.root);
      (async () => {
        const conn = await amqp.connect(workerData.url);
        const ch = await conn.createChannel();
        const { queue } = await ch.assertQueue('', { exclusive: true });
        ch.sendToQueue(queue, Buffer.from('from a worker'));
        const body = await new Promise((resolve) => ch.consume(queue, (msg) => { ch.ack(msg); resolve(msg.content.toString()); }));
        await conn.close();
        parentPort.postMessage(body);
      })();
    `);
    assert.strictEqual(run.status, 0, `${run.stdout}\n${run.stderr}`);
    assert.deepStrictEqual(JSON.parse(run.stdout.trim().split('\n').pop()), { exit: 0, messages: ['from a worker'] });
  });

  // A worker that stops with its connection open: the addon closes the native socket when the
  // worker's environment goes away (its Node-API cleanup hook). The broker shows whether it did:
  // the worker's exclusive queue is deleted once its connection closes (405 while it lives).
  it('a worker that exits with an open connection closes it', () => {
    const run = runWorker(`
      const { parentPort, workerData } = require('node:worker_threads');
      const amqp = require(workerData.root);
      (async () => {
        const conn = await amqp.connect(workerData.url);
        const ch = await conn.createChannel();
        await ch.assertQueue(workerData.queue + '.left-open', { exclusive: true });
        parentPort.postMessage('open');
        process.exit(0);
      })();
    `, `
      const amqp = require(${JSON.stringify(ROOT)});
      const conn = await amqp.connect(${JSON.stringify(AMQP_URL)});
      let gone = false;
      for (let i = 0; i < 30 && !gone; i += 1) {
        const ch = await conn.createChannel();
        ch.on('error', () => {});
        try {
          await ch.checkQueue(${JSON.stringify(unique + '.left-open')});
          await ch.close();
        } catch (err) {
          gone = err.code === 404; // 405 RESOURCE_LOCKED while the worker's connection lives
          if (!gone) console.log('check: ' + err.code);
        }
        if (!gone) await new Promise((resolve) => setTimeout(resolve, 100));
      }
      console.log(JSON.stringify({ gone }));
      await conn.close();
    `);
    assert.strictEqual(run.status, 0, `${run.stdout}\n${run.stderr}`);
    const lines = run.stdout.trim().split('\n');
    assert.deepStrictEqual(JSON.parse(lines[0]), { exit: 0, messages: ['open'] });
    assert.deepStrictEqual(JSON.parse(lines.at(-1)), { gone: true }, run.stdout);
  });
});
