'use strict';
// The native addon's own guarantees, as JS sees them.

const { describe, it } = require('node:test');
const assert = require('node:assert');
const { execFileSync, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const { pathToFileURL } = require('node:url');
const native = require('../lib/native');
const { ownPlatformSuffix } = require('../lib/platform');
const defs = require('../lib/defs');

const root = path.join(__dirname, '..');

describe('native addon', () => {
  it('turns a Rust panic into a thrown Error, and keeps working', () => {
    assert.throws(() => native.__panicForTest('boom'), (err) => err instanceof Error && /boom/.test(err.message));
    const frame = defs.encodeMethod(defs.BasicQos, 1, { prefetchCount: 5 });
    assert.strictEqual(defs.decode(defs.BasicQos, frame.subarray(11, frame.length - 1)).prefetchCount, 5);
  });

  it('the hot entry points take only a connection handle, and keep the kinds of codec errors', () => {
    const session = new native.NativeConnection();
    const handle = session.handle();
    assert.throws(() => native.sendAcknowledgement({}, 1, defs.BasicAck, 1, 0, 0), /Not a connection handle/);
    assert.throws(() => native.sendAcknowledgement(handle, 1, defs.BasicQos, 1, 0, 0), /Unknown class\/method ID/);
    assert.throws(() => native.sendMethod(handle, 1, defs.BasicQos, { prefetchCount: 70000 }), RangeError);
    assert.throws(() => native.sendMethod(handle, 1, defs.BasicPublish, { exchange: 1 }), TypeError);
    assert.strictEqual(session.pendingOutput, 0, 'nothing of the failed methods is left');
    const waiting = native.sendAcknowledgement(handle, 1, defs.BasicAck, 1, 0, 0);
    assert.strictEqual(waiting, 21, 'an ack frame: 8 bytes of envelope, 4 of method, 8 of tag, 1 of flags');
    assert.ok(native.sendMethod(handle, 1, defs.QueueDeclare, { queue: 'q', arguments: { x: 1 } }) > waiting, 'and the connection goes on');
  });

  it('codec errors are of the kinds amqplib raises', () => {
    assert.throws(() => defs.encodeMethod(defs.BasicPublish, 1, { exchange: 1 }), TypeError);
    assert.throws(() => defs.encodeMethod(defs.BasicDeliver, 1, {}), /Missing value for mandatory field 'consumerTag'/);
    assert.throws(() => defs.encodeMethod(defs.BasicQos, 1, { prefetchCount: 70000 }), RangeError);
    assert.throws(() => defs.encodeMethod(12345, 1, {}), /Unknown class\/method ID/);
  });

  it('a shortstr is at most 255 bytes of UTF-8, whatever the characters', () => {
    const roundTrip = (exchange) => {
      const frame = defs.encodeMethod(defs.BasicPublish, 1, { exchange });
      return defs.decode(defs.BasicPublish, frame.subarray(11, frame.length - 1)).exchange;
    };
    for (const fits of ['x'.repeat(255), '€'.repeat(85), '😀'.repeat(63) + 'abc']) {
      assert.strictEqual(Buffer.byteLength(fits), 255);
      assert.strictEqual(roundTrip(fits), fits);
    }
    for (const tooLong of ['x'.repeat(256), '€'.repeat(86), `a${'€'.repeat(85)}`, '😀'.repeat(64)]) {
      assert.throws(() => roundTrip(tooLong), /Field 'exchange' is the wrong type; must be a string \(up to 255 chars\)/);
    }
  });

  it('loads through require and import on Node 24 and on the system Node', () => {
    const script = `
      const cjs = require(${JSON.stringify(root)});
      import(${JSON.stringify(pathToFileURL(path.join(root, 'index.mjs')).href)}).then((esm) => {
        if (esm.default.connect !== cjs.connect || esm.connect !== cjs.connect) throw new Error('not the same objects');
        return import(${JSON.stringify(pathToFileURL(path.join(root, 'callback_api.mjs')).href)});
      }).then((cb) => {
        if (cb.default.connect !== require(${JSON.stringify(path.join(root, 'callback_api.js'))}).connect) throw new Error('callback api differs');
        console.log(process.versions.node.split('.')[0]);
      });`;
    const nodes = [process.execPath];
    try {
      const system = execFileSync('sh', ['-c', 'PATH=/usr/local/bin:/usr/bin:/bin command -v node'], { encoding: 'utf8' }).trim();
      // Only a Node of this architecture can load this build (under qemu, the system's is another).
      const sameArch = system && execFileSync(system, ['-p', 'process.arch'], { encoding: 'utf8' }).trim() === process.arch;
      if (sameArch && system !== process.execPath) nodes.push(system);
    } catch {
      // no other node on this machine
    }
    for (const node of nodes) {
      const major = execFileSync(node, ['-e', script], { encoding: 'utf8' }).trim();
      assert.ok(Number(major) >= 20, `${node} loaded the addon (Node ${major})`);
    }
  });

  it('tells glibc from musl by the memory map, and agrees with the diagnostic report here', () => {
    const { libcInMaps, runsOnGlibc } = require('../lib/platform');
    const line = (file) => `7f5a2c400000-7f5a2c426000 r--p 00000000 fe:00 326279                     ${file}\n`;
    assert.strictEqual(libcInMaps(line('/usr/lib/x86_64-linux-gnu/libc.so.6') + line('[heap]')), 'glibc');
    assert.strictEqual(libcInMaps(line('/lib/ld-musl-x86_64.so.1')), 'musl');
    assert.strictEqual(libcInMaps(line('/usr/lib/libc.musl-aarch64.so.1')), 'musl');
    assert.strictEqual(libcInMaps(line('/usr/bin/node') + line('[vdso]')), null, 'a static build shows neither');
    assert.strictEqual(libcInMaps(line('/opt/libc.so.6.backup')), null, 'only the library itself counts');
    assert.strictEqual(libcInMaps(line('/lib/x86_64-linux-gnu/libc-2.31.so')), 'glibc', 'glibc before 2.34');
    assert.strictEqual(libcInMaps(line('/usr/lib/x86_64-linux-gnu/libc.so.6 (deleted)')), 'glibc', 'upgraded since');
    assert.strictEqual(libcInMaps(line('/usr/lib/libc.so')), 'musl', "Void's musl");
    assert.strictEqual(libcInMaps(line('/lib/ld-musl-x86_64.so.1 (deleted)')), 'musl');
    assert.strictEqual(libcInMaps(line('/usr/lib/libc.so.60')), null);
    if (process.platform === 'linux') {
      // The map of this very process names its C library, so the fast path is the one taken here.
      const mine = libcInMaps(fs.readFileSync('/proc/self/maps', 'latin1'));
      assert.notStrictEqual(mine, null, 'this process maps a shared C library');
      assert.strictEqual(mine === 'glibc', !!process.report.getReport().header.glibcVersionRuntime);
      assert.strictEqual(runsOnGlibc(), !!process.report.getReport().header.glibcVersionRuntime);
    }
  });

  it('loads node:tls only for the first amqps:// connection', () => {
    const script = `
      const api = require(process.argv[1]);
      const loaded = () => process.moduleLoadList.includes('NativeModule tls');
      const before = loaded();
      // A closed port: the connection fails, but the transport has been chosen by then.
      api.connect('amqps://127.0.0.1:1').catch(() => console.log(JSON.stringify([before, loaded()])));`;
    const [before, after] = JSON.parse(execFileSync(process.execPath, ['-e', script, root], { encoding: 'utf8' }));
    assert.strictEqual(before, false, 'requiring the package does not load node:tls');
    assert.strictEqual(after, true, 'an amqps:// connection does');
  });

  it('AMQPLIB_RS_ADDON chooses the build to load, and one that is missing is named', () => {
    const load = (addon) => spawnSync(process.execPath, ['-e', 'require(process.argv[1]).connect', root], {
      env: { ...process.env, AMQPLIB_RS_ADDON: addon },
      encoding: 'utf8',
    });
    const nowhere = path.resolve('/nonexistent/amqplib_rs.node'); // with a drive letter on Windows
    const missing = load(nowhere);
    assert.notStrictEqual(missing.status, 0);
    assert.ok(missing.stderr.includes(`${nowhere}: not found`), missing.stderr);
    assert.doesNotMatch(missing.stderr, /native\/amqplib_rs/, 'nothing else is tried');
    // The build this process runs: this platform's in native/ (though others' may be built there),
    // or the one AMQPLIB_RS_ADDON already names (the sanitizer's, an emulated platform's).
    const built = process.env.AMQPLIB_RS_ADDON ?? path.join(root, 'native', `amqplib_rs.${ownPlatformSuffix()}.node`);
    assert.strictEqual(load(built).status, 0);
  });
});
