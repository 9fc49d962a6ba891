'use strict';
// The native addon's own guarantees, as JS sees them.

const { describe, it } = require('node:test');
const assert = require('node:assert');
const { execFileSync } = require('node:child_process');
const path = require('node:path');
const native = require('../lib/native');
const defs = require('../lib/defs');

const root = path.join(__dirname, '..');

describe('native addon', () => {
  it('turns a Rust panic into a thrown Error, and keeps working', () => {
    assert.throws(() => native.__panicForTest('boom'), (err) => err instanceof Error && /boom/.test(err.message));
    const frame = defs.encodeMethod(defs.BasicQos, 1, { prefetchCount: 5 });
    assert.strictEqual(defs.decode(defs.BasicQos, frame.subarray(11, frame.length - 1)).prefetchCount, 5);
  });

  it('codec errors are of the kinds amqplib raises', () => {
    assert.throws(() => defs.encodeMethod(defs.BasicPublish, 1, { exchange: 1 }), TypeError);
    assert.throws(() => defs.encodeMethod(defs.BasicDeliver, 1, {}), /Missing value for mandatory field 'consumerTag'/);
    assert.throws(() => defs.encodeMethod(defs.BasicQos, 1, { prefetchCount: 70000 }), RangeError);
    assert.throws(() => defs.encodeMethod(12345, 1, {}), /Unknown class\/method ID/);
  });

  it('loads through require and import on Node 24 and on the system Node', () => {
    const script = `
      const cjs = require(${JSON.stringify(root)});
      import(${JSON.stringify(path.join(root, 'index.mjs'))}).then((esm) => {
        if (esm.default.connect !== cjs.connect || esm.connect !== cjs.connect) throw new Error('not the same objects');
        return import(${JSON.stringify(path.join(root, 'callback_api.mjs'))});
      }).then((cb) => {
        if (cb.default.connect !== require(${JSON.stringify(path.join(root, 'callback_api.js'))}).connect) throw new Error('callback api differs');
        console.log(process.versions.node.split('.')[0]);
      });`;
    const nodes = [process.execPath];
    try {
      const system = execFileSync('sh', ['-c', 'PATH=/usr/local/bin:/usr/bin:/bin command -v node'], { encoding: 'utf8' }).trim();
      if (system && system !== process.execPath) nodes.push(system);
    } catch {
      // no other node on this machine
    }
    for (const node of nodes) {
      const major = execFileSync(node, ['-e', script], { encoding: 'utf8' }).trim();
      assert.ok(Number(major) >= 20, `${node} loaded the addon (Node ${major})`);
    }
  });
});
