'use strict';

// Shared helpers for the broker tests (dropin, messages, arguments).
// One place for: the broker URL, unique names, loading the example
// applications with `require('amqplib')` pointed at this package,
// timeouts, and recording how a call fails.

const Module = require('node:module');
const fs = require('node:fs');
const path = require('node:path');
const crypto = require('node:crypto');

const ROOT = path.resolve(__dirname, '..');
const APPS_DIR = path.join(__dirname, 'apps') + path.sep;
const AMQP_URL = process.env.AMQP_URL || 'amqp://localhost';

// --- the two libraries -------------------------------------------------

// Ours, by path, and the original from node_modules (the devDependency):
// `amqplib` is 2.0.1 (whose test suite compat/ runs), `amqplib-latest` is
// 2.3.1 (an alias), the version whose behaviour we now match.
const ours = require(ROOT);
const oursCallback = require(path.join(ROOT, 'callback_api'));
const original = require('amqplib');
const originalCallback = require('amqplib/callback_api');
const latest = require('amqplib-latest');
const latestCallback = require('amqplib-latest/callback_api');
// A small deterministic generator, so that a failure replays: the benchmarks' own.
const { prng } = require('../benchmarks/lib');

// --- names ---------------------------------------------------------------

let counter = 0;
const runId = `${process.pid}-${crypto.randomBytes(3).toString('hex')}`;

// --- tools ---------------------------------------------------------------

// The directory of `dirs` (PATH's by default) that holds the program `name`, or undefined; on
// Windows with any of PATHEXT's extensions (npm is npm.cmd there).
function findOnPath(name, dirs = (process.env.PATH || '').split(path.delimiter).filter(Boolean)) {
  const names = process.platform === 'win32'
    ? ['', ...(process.env.PATHEXT || '.EXE;.CMD;.BAT').split(';')].map((ext) => name + ext.toLowerCase())
    : [name];
  return dirs.find((dir) => names.some((file) => {
    try {
      fs.accessSync(path.join(dir, file), fs.constants.X_OK);
      return fs.statSync(path.join(dir, file)).isFile();
    } catch {
      return false;
    }
  }));
}

// A queue/exchange name no other test (or earlier run) uses.
function uniqueName(prefix) {
  counter += 1;
  return `amqplib-rs-test.${prefix}.${runId}.${counter}`;
}

// --- drop-in loading ------------------------------------------------------

// Applications in __test__/apps are written against amqplib and say
// `require('amqplib')` or `require('amqplib/callback_api')`. While the
// hook is installed, those requests -- and only those made from files
// under __test__/apps -- resolve to this package's entry points, the way
// an npm alias (`amqplib@npm:amqplib-rs`) would. Everything else
// (including this file's `require('amqplib')`) still gets the original.
const resolutions = [];
let hookInstalled = false;

function installAliasHook() {
  if (hookInstalled) return;
  hookInstalled = true;
  const resolve = Module._resolveFilename;
  Module._resolveFilename = function resolveAmqplibAlias(request, parent, ...rest) {
    const fromApp = parent && typeof parent.filename === 'string' && parent.filename.startsWith(APPS_DIR);
    if (fromApp && (request === 'amqplib' || request.startsWith('amqplib/'))) {
      const target = resolve.call(this, ROOT + request.slice('amqplib'.length), parent, ...rest);
      resolutions.push({ request, from: parent.filename, target });
      return target;
    }
    return resolve.call(this, request, parent, ...rest);
  };
}

// With AMQPLIB_REFERENCE=1 the alias is not installed and the apps get the
// original amqplib: a way to check the tests' expectations against it.
const REFERENCE = process.env.AMQPLIB_REFERENCE === '1';

// require() an application from __test__/apps with the alias in place.
function loadApp(name) {
  if (!REFERENCE) installAliasHook();
  return require(path.join(APPS_DIR, name));
}

// --- async utilities -------------------------------------------------------

function withTimeout(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

const delay = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// Poll `predicate` until it is true (or fail after `ms`).
async function waitUntil(predicate, ms, what) {
  const deadline = Date.now() + ms;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await delay(5);
  }
}

// --- recording failures -----------------------------------------------------

// Run `fn` and describe what happened in a comparable form:
// { outcome: 'throw' | 'reject' | 'ok', name, message }. `name` is the
// error's constructor name (so it works across the two libraries' own
// IllegalOperationError classes). A returned promise is awaited.
async function outcomeOf(fn) {
  let result;
  try {
    result = fn();
  } catch (err) {
    return describeError('throw', err);
  }
  if (result && typeof result.then === 'function') {
    try {
      await result;
    } catch (err) {
      return describeError('reject', err);
    }
  }
  return { outcome: 'ok' };
}

function describeError(outcome, err) {
  if (!(err instanceof Error)) return { outcome, name: typeof err, message: String(err) };
  return { outcome, name: err.constructor.name, message: err.message };
}

// --- connections --------------------------------------------------------------

// Open a promise-API connection with `lib` (ours or original); the caller
// closes it. Connection-level 'error' events are collected rather than
// left to crash the process.
async function openConnection(lib, url = AMQP_URL) {
  const connection = await lib.connect(url);
  connection.errors = [];
  connection.on('error', (err) => connection.errors.push(err));
  return connection;
}

// Close, ignoring "already closed".
async function closeQuietly(closable) {
  if (!closable) return;
  try {
    await closable.close();
  } catch (_) {
    // already closed
  }
}

module.exports = {
  prng,
  ROOT,
  APPS_DIR,
  AMQP_URL,
  ours,
  oursCallback,
  original,
  originalCallback,
  latest,
  latestCallback,
  uniqueName,
  loadApp,
  resolutions,
  REFERENCE,
  withTimeout,
  delay,
  waitUntil,
  outcomeOf,
  describeError,
  openConnection,
  closeQuietly,
  findOnPath,
};
