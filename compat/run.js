#!/usr/bin/env node
'use strict';
// The compat runner: runs amqplib 2.0.1's own test suite, unchanged, against amqplib-rs.
//
// compat/test is copied afresh from node_modules/amqplib/test; what it requires from
// '../lib/*', '../channel_api' and '../callback_api' resolves to the adapters beside it.
// exemptions.json lists what is not run, and why. Until the whole suite passes, passing.txt
// (the ratchet) lists the tests known to pass: one of them failing fails the run; a test that
// newly passes is reported, and recorded with `npm run compat -- --update`.

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const net = require('node:net');
const { spawn } = require('node:child_process');

const here = __dirname;
const original = path.join(here, '..', 'node_modules', 'amqplib', 'test');
const copy = path.join(here, 'test');
const ratchetFile = path.join(here, 'passing.txt');
const exemptions = JSON.parse(fs.readFileSync(path.join(here, 'exemptions.json'), 'utf8'));

const key = (r) => `${r.file}:${r.line} ${r.name}`;
const escapeRegExp = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

function copySuite() {
  fs.rmSync(copy, { recursive: true, force: true });
  fs.cpSync(original, copy, { recursive: true });
}

// The suite's "ipv6" test connects to amqp://[::1]. A broker configured to listen on
// 127.0.0.1 only (as this project's machines are) does not answer there, and amqplib itself
// fails that test on such a machine; so, when nothing listens on [::1]:5672, the runner
// relays that port to the IPv4 broker for the duration of the run.
function relayIpv6ToBroker() {
  return new Promise((resolve) => {
    const server = net.createServer((client) => {
      const upstream = net.connect({ host: '127.0.0.1', port: 5672 });
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
    '--test-timeout=1000',
    '--test-reporter=spec', '--test-reporter-destination=stdout',
    `--test-reporter=${path.join(here, 'reporter.mjs')}`, `--test-reporter-destination=${resultsFile}`,
    ...exemptions.tests.map((t) => `--test-skip-pattern=^${escapeRegExp(t.name)}$`),
    ...files.map((f) => path.join('test', f)),
  ];
  console.log(`compat: amqplib@2.0.1 suite on Node ${process.version}, ${files.length} files`);
  return new Promise((resolve) => {
    const run = spawn(process.execPath, args, { cwd: here, stdio: 'inherit' });
    run.on('exit', () => {
      const lines = fs.existsSync(resultsFile) ? fs.readFileSync(resultsFile, 'utf8').split('\n').filter(Boolean) : [];
      resolve(lines.map((l) => JSON.parse(l)));
    });
  });
}

async function main() {
  const update = process.argv.includes('--update');
  copySuite();
  const relay = await relayIpv6ToBroker();
  const results = await runSuite();
  if (relay) relay.close();
  const ran = results.filter((r) => !r.skipped);
  const passed = new Set(ran.filter((r) => r.passed).map(key));
  const failed = ran.filter((r) => !r.passed).map(key);
  const exempt = exemptions.files.reduce((n, e) => n + e.tests, 0) + exemptions.tests.length;
  const total = ran.length + exempt;

  const ratchet = fs.existsSync(ratchetFile)
    ? fs.readFileSync(ratchetFile, 'utf8').split('\n').filter((l) => l && !l.startsWith('#'))
    : [];
  const regressions = ratchet.filter((k) => !passed.has(k));
  const known = new Set(ratchet);
  const newlyPassing = [...passed].filter((k) => !known.has(k));

  if (update) {
    const header = '# Compat tests known to pass (file:line name). Written by `npm run compat -- --update`.\n';
    fs.writeFileSync(ratchetFile, header + [...new Set([...ratchet, ...passed])].sort().join('\n') + '\n');
  }

  console.log('');
  for (const k of failed) console.log(`  failed: ${k}`);
  for (const k of regressions) console.log(`  REGRESSION (listed in passing.txt, did not pass): ${k}`);
  if (newlyPassing.length > 0 && !update) {
    console.log(`  ${newlyPassing.length} newly passing test(s) not yet in passing.txt; record them with \`npm run compat -- --update\``);
  }
  console.log(`compat: ${passed.size} passed, ${failed.length} failed, ${exempt} exempt, of ${total}`);
  if (regressions.length > 0 || ran.length === 0) process.exit(1);
}

main();
