#!/usr/bin/env node
'use strict';
// The compat runner: runs amqplib 2.0.1's own test suite, unchanged, against amqplib-rs.
//
// compat/test is copied afresh from node_modules/amqplib/test; what it requires from
// '../lib/*', '../channel_api' and '../callback_api' resolves to the adapters beside it.
// exemptions.json lists what is not run, and why; everything else must pass.

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const net = require('node:net');
const { spawn } = require('node:child_process');
const { pathToFileURL } = require('node:url');

const here = __dirname;
const original = path.join(here, '..', 'node_modules', 'amqplib', 'test');
const copy = path.join(here, 'test');
const exemptions = JSON.parse(fs.readFileSync(path.join(here, 'exemptions.json'), 'utf8'));

const name = (r) => `${r.file}:${r.line} ${r.name}`;
const escapeRegExp = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

function copySuite() {
  fs.rmSync(copy, { recursive: true, force: true });
  fs.cpSync(original, copy, { recursive: true });
}

// The broker the suite is pointed at: AMQP_URL, default amqp://localhost. The suite reads
// URL (channel_api.test.js), set to it; its other files connect to amqp://localhost (5672)
// whatever either says.
const BROKER_URL = process.env.AMQP_URL || 'amqp://localhost';
const broker = new URL(BROKER_URL);
// Where the relay below goes: AMQP_URL's broker, or for an amqps:// one (whose port speaks TLS)
// amqp://localhost, which the suite's other files reach.
const BROKER = broker.protocol === 'amqps:' ? { host: '127.0.0.1', port: 5672 } : {
  host: broker.hostname === 'localhost' ? '127.0.0.1' : broker.hostname.replace(/^\[(.*)\]$/, '$1'),
  port: Number(broker.port) || 5672,
};

// The suite's "ipv6" test connects to amqp://[::1]. A broker configured to listen on
// 127.0.0.1 only (as this project's machines are) does not answer there, and amqplib itself
// fails that test on such a machine; so, when nothing listens on [::1]:5672, the runner
// relays that port to AMQP_URL's broker for the duration of the run.
function relayIpv6ToBroker() {
  return new Promise((resolve) => {
    const server = net.createServer((client) => {
      const upstream = net.connect(BROKER);
      client.pipe(upstream).pipe(client);
      const end = () => {
        client.destroy();
        upstream.destroy();
      };
      client.on('error', end).on('close', end);
      upstream.on('error', end).on('close', end);
    });
    server.once('error', () => resolve(null)); // taken (a broker listens there) or no IPv6
    server.listen({ host: '::1', port: 5672, ipv6Only: true }, () => resolve(server.unref()));
  });
}

function runSuite() {
  const exemptFiles = new Set(exemptions.files.map((e) => e.file));
  const files = fs.readdirSync(copy).filter((f) => f.endsWith('.test.js') && !exemptFiles.has(f)).sort();
  const resultsFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'compat-')), 'results.jsonl');
  const args = [
    '--test',
    // amqplib's own bound per test (its package.json), unless COMPAT_TEST_TIMEOUT sets
    // another for a slower machine (scripts/emulated.js: qemu runs several times slower).
    `--test-timeout=${Number(process.env.COMPAT_TEST_TIMEOUT) || 1000}`,
    '--test-reporter=spec', '--test-reporter-destination=stdout',
    // A file URL: Node takes a reporter's absolute path for a URL scheme on Windows (C:).
    `--test-reporter=${pathToFileURL(path.join(here, 'reporter.mjs')).href}`, `--test-reporter-destination=${resultsFile}`,
    ...exemptions.tests.map((t) => `--test-skip-pattern=^${escapeRegExp(t.name)}$`),
    ...files.map((f) => path.join('test', f)),
  ];
  console.log(`compat: amqplib@2.0.1 suite on Node ${process.version}, ${files.length} files, broker ${broker.protocol}//${broker.host}`);
  return new Promise((resolve) => {
    const run = spawn(process.execPath, args, { cwd: here, stdio: 'inherit', env: { ...process.env, URL: process.env.URL || BROKER_URL } });
    run.on('exit', () => {
      const lines = fs.existsSync(resultsFile) ? fs.readFileSync(resultsFile, 'utf8').split('\n').filter(Boolean) : [];
      resolve(lines.map((l) => JSON.parse(l)));
    });
  });
}

async function main() {
  copySuite();
  const relay = await relayIpv6ToBroker();
  const results = await runSuite();
  if (relay) relay.close();
  const ran = results.filter((r) => !r.skipped);
  const failed = ran.filter((r) => !r.passed);
  const exempt = exemptions.files.reduce((n, e) => n + e.tests, 0) + exemptions.tests.length;
  console.log('');
  for (const r of failed) console.log(`  failed: ${name(r)}`);
  console.log(`compat: ${ran.length - failed.length} passed, ${failed.length} failed, ${exempt} exempt, of ${ran.length + exempt}`);
  if (failed.length > 0 || ran.length === 0) process.exit(1);
}

// scripts/runtimes.js runs the same suite under Bun and Deno, with the same copy and relay.
if (require.main === module) main();
else module.exports = { copySuite, relayIpv6ToBroker, exemptions, BROKER_URL };
