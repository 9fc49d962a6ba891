'use strict';
// A project whose node_modules/amqplib is the library under test, as a service has it when it
// installs us under the alias (`amqplib@npm:amqplib-rs`: a real copy, our package.json as it
// is), or amqplib 2.3.1 itself laid out the same way. Instrumentation finds amqplib by that
// path (a link to node_modules/amqplib-latest would be a name it does not know), so the tests
// of what agents see with each (tracing.test.js, agents.test.js) run their applications in
// such a project, in a child process of its own. The projects are removed at the end.

const { after } = require('node:test');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const ROOT = path.join(__dirname, '..');
const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
const AMQPLIB_LATEST = path.dirname(require.resolve('amqplib-latest'));

const temps = [];
after(() => {
  for (const dir of temps) fs.rmSync(dir, { recursive: true, force: true });
});

// A project directory with `files` ({ name: source }) and a node_modules/amqplib that is
// `fill(dir)`'s work.
function project(files, fill) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'amqplib-rs-installed-'));
  temps.push(dir);
  const installed = path.join(dir, 'node_modules', 'amqplib');
  fs.mkdirSync(installed, { recursive: true });
  fill(installed);
  for (const [name, source] of Object.entries(files)) fs.writeFileSync(path.join(dir, name), source);
  return dir;
}

// Ours: the files of package.json's `files`, and package.json (with `version` if given). The
// addon comes from this checkout's native/ (linked: only the JavaScript's paths matter here).
function withOurs(files, version) {
  return project(files, (installed) => {
    for (const entry of pkg.files) fs.cpSync(path.join(ROOT, entry), path.join(installed, entry), { recursive: true });
    const manifest = version ? { ...pkg, version } : pkg;
    fs.writeFileSync(path.join(installed, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
    fs.symlinkSync(path.join(ROOT, 'native'), path.join(installed, 'native'), 'dir');
  });
}

// amqplib 2.3.1, copied.
function withAmqplib(files) {
  return project(files, (installed) => fs.cpSync(AMQPLIB_LATEST, installed, { recursive: true }));
}

module.exports = { ROOT, pkg, AMQPLIB_LATEST, withOurs, withAmqplib };
