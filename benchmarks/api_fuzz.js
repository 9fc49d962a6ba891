#!/usr/bin/env node
'use strict';
// API fuzz against amqplib (issue 15: nothing a user sends takes the process down).
//
// For each argument position of the public API (connect's url and options, publish and
// sendToQueue's exchange, routing key, content and every option, the queue, exchange, bind,
// consume, get, ack/nack, prefetch, cancel and delete arguments, table values, ...) and each of
// ~100 odd values (Symbols, BigInts, functions, getters and proxies that throw, cyclic and
// 10,000-deep objects, sparse arrays, typed arrays and DataViews, detached and resizable
// buffers, NaN/Infinity/-0, huge numbers, very long strings, `{'!': type}` table values of
// unknown or mismatched types, ...), the call is made with amqplib 2.3.1
// (`require('amqplib-latest')`) and with ours, against the real broker.
//
// Each (library, position) batch runs in a child process of its own, so that a crash is seen
// as one (exit signal or code, or an uncaught exception / unhandled rejection, which would take
// a user's process down) and the batch carries on in a new child from the next value. Every
// call has a time limit (a call whose promise or callback never settles is a hang; a child
// whose event loop stops answering is killed and that is a hang too).
//
// Per case it records: the outcome kind (returned, resolved, threw synchronously, rejected,
// callback error, callback ok, crash, hang), the error's class, message and `code`, the
// value returned (its shape), the first 'error' event on the connection or channel, and
// whether the connection survived: afterwards the channel is checked with a round trip
// (`ok`, `channel closed`, `connection closed`, or `... hung`); for connect, whether the new
// connection opens a channel. Then ours is compared with amqplib's, field by field.
//
//   node benchmarks/api_fuzz.js --quick      a sample (every position, a dozen of the most
//                                            hostile values): < 60 s; for `npm test`
//   node benchmarks/api_fuzz.js              all positions x all values; writes the list of
//                                            differences to benchmarks/results/api_fuzz.md
//
// Options: --positions=REGEX, --values=REGEX (filter by name), --limit=MS (per call; default
// 3000), --jobs=N (children at once; default 3, 4 with --quick), --list (print positions and values), --json=FILE
// (every case's outcome for both libraries).
//
// Exit status: 1 when OURS crashed or hung in any case (the list says where), else 0;
// differences from amqplib alone do not fail the run. Needs a broker at AMQP_URL (default
// amqp://localhost).

const path = require('node:path');
const fs = require('node:fs');
const { spawn } = require('node:child_process');
const { inspect } = require('node:util');
const { ROOT, cliArgs, sleep } = require('./lib');

const BROKER_URL = process.env.AMQP_URL || 'amqp://localhost';
const LIBS = {
  amqplib: { promise: 'amqplib-latest', callback: 'amqplib-latest/callback_api', label: 'amqplib 2.3.1' },
  ours: { promise: ROOT, callback: path.join(ROOT, 'callback_api.js'), label: 'ours' },
};
const LIB_ORDER = ['amqplib', 'ours'];
const CHECK_LIMIT = 3000; // ms for a setup step or a round trip that must answer
// A round trip on a working channel answers within this (ms); one that has not is checked
// against a new channel on the same connection: if that opens and answers while the first still
// does not, the first is stuck.
const QUICK_ANSWER = 150;
const CONNECT_SETTLE = 50; // ms after each connect case
const CONNECT_LIMIT = 6000; // ms per connect call: the broker drops a bad handshake after 3 s

// ------------------------------------------------------------------------------------ values
//
// Each value is made fresh for each call (some are consumed: detached, mutated, ...).

function deepObject(depth) {
  let v = { leaf: 1 };
  for (let i = 0; i < depth; i++) v = { a: v };
  return v;
}

function deepArray(depth) {
  let v = [1];
  for (let i = 0; i < depth; i++) v = [v];
  return v;
}

function throwingProxy() {
  const boom = (what) => () => {
    throw new Error(`proxy trap ${what}`);
  };
  return new Proxy({}, {
    get: boom('get'), has: boom('has'), ownKeys: boom('ownKeys'), getOwnPropertyDescriptor: boom('getOwnPropertyDescriptor'),
    getPrototypeOf: boom('getPrototypeOf'), set: boom('set'), defineProperty: boom('defineProperty'),
  });
}

// Every option name the API reads, each a getter that throws.
const OPTION_NAMES = [
  'headers', 'expiration', 'userId', 'CC', 'BCC', 'priority', 'persistent', 'deliveryMode', 'mandatory',
  'contentType', 'contentEncoding', 'correlationId', 'replyTo', 'messageId', 'timestamp', 'type', 'appId',
  'exclusive', 'durable', 'autoDelete', 'arguments', 'messageTtl', 'expires', 'deadLetterExchange',
  'deadLetterRoutingKey', 'maxLength', 'maxPriority', 'internal', 'alternateExchange', 'consumerTag',
  'noLocal', 'noAck', 'ifUnused', 'ifEmpty', 'clientProperties', 'credentials', 'noDelay', 'keepAlive',
  'keepAliveDelay', 'timeout', 'highWaterMark', 'protocol', 'hostname', 'port', 'username', 'password',
  'vhost', 'frameMax', 'heartbeat', 'channelMax', 'locale', 'maxFrameSize', 'recovery', 'servername',
  'mechanism', 'response', 'fields', 'properties', 'content', 'deliveryTag', 'value', '!',
];

function throwingGetters() {
  const o = {};
  for (const name of OPTION_NAMES) {
    Object.defineProperty(o, name, {
      enumerable: true,
      get() {
        throw new Error(`getter ${name}`);
      },
    });
  }
  return o;
}

function detachedView() {
  const u = new Uint8Array(16);
  u.buffer.transfer();
  return u;
}

function detachedBuffer() {
  const b = Buffer.alloc(16, 1); // not pooled: its store is its own
  b.buffer.transfer();
  return b;
}

const VALUES = [];
function value(name, make) {
  VALUES.push({ name, make });
}

value('undefined', () => undefined);
value('null', () => null);
value('true', () => true);
value('false', () => false);
value('0', () => 0);
value('-0', () => -0);
value('1', () => 1);
value('-1', () => -1);
value('0.5', () => 0.5);
value('NaN', () => NaN);
value('Infinity', () => Infinity);
value('-Infinity', () => -Infinity);
value('255', () => 255);
value('65536', () => 65536);
value('2**31', () => 2 ** 31);
value('2**32', () => 2 ** 32);
value('2**53', () => 2 ** 53);
value('-(2**63)', () => -(2 ** 63));
value('2**64', () => 2 ** 64);
value('1e21', () => 1e21);
value('Number.MAX_VALUE', () => Number.MAX_VALUE);
value('Number.MIN_VALUE', () => Number.MIN_VALUE);
value('1n', () => 1n);
value('2n**64n', () => 2n ** 64n);
value('-(2n**63n)-1n', () => -(2n ** 63n) - 1n);
value("''", () => '');
value("'a'", () => 'a');
value("'0'", () => '0');
value("'-1'", () => '-1');
value("'1.5'", () => '1.5');
value("'NaN'", () => 'NaN');
value("'amq.direct'", () => 'amq.direct');
value("'amq.gen-fuzz'", () => 'amq.gen-fuzz');
value("'\\0'", () => '\0');
value("'é€😀'", () => 'é€😀');
value("'\\ud800' (lone surrogate)", () => '\ud800');
value("'x'*255", () => 'x'.repeat(255));
value("'x'*256", () => 'x'.repeat(256));
value("'é'*200 (400 bytes)", () => 'é'.repeat(200));
value("'x'*70000", () => 'x'.repeat(70000));
value("'x'*2**20", () => 'x'.repeat(2 ** 20));
value("'amqp://localhost'", () => 'amqp://localhost');
value("'amqps://localhost:1'", () => 'amqps://localhost:1');
value("'http://localhost'", () => 'http://localhost');
value("'amqp://%zz@localhost/%zz'", () => 'amqp://%zz@localhost/%zz');
value('Symbol()', () => Symbol('fuzz'));
value('Symbol.iterator', () => Symbol.iterator);
value('function', () => function fuzz() {});
value('arrow function', () => () => {});
value('class', () => class Fuzz {});
value('async function', () => async () => {});
value('function with props', () => Object.assign(function f() {}, { durable: true, headers: { a: 1 }, value: 1 }));
value('[]', () => []);
value('[1,2,3]', () => [1, 2, 3]);
value("['a','b']", () => ['a', 'b']);
value("sparse [,'a',,'b']", () => [, 'a', , 'b']); // eslint-disable-line no-sparse-arrays
value('new Array(3) (holes)', () => new Array(3));
value('[undefined]', () => [undefined]);
value('[null]', () => [null]);
value('[Symbol()]', () => [Symbol('in array')]);
value('[1n]', () => [1n]);
value('[[[]]]', () => [[[]]]);
value('array of 100000', () => new Array(100000).fill('x'));
value('{}', () => ({}));
value('{a:1}', () => ({ a: 1 }));
value('Object.create(null)', () => Object.create(null));
value('{x:Symbol()}', () => ({ x: Symbol('in object') }));
value('{x:1n}', () => ({ x: 1n }));
value('{x:2n**64n}', () => ({ x: 2n ** 64n }));
value('{x:undefined}', () => ({ x: undefined }));
value('{x:function}', () => ({ x() {} }));
value('{[Symbol()]:1}', () => ({ [Symbol('key')]: 1 }));
value('JSON {"__proto__":1}', () => JSON.parse('{"__proto__":{"x":1}}'));
value('cyclic object', () => {
  const o = { a: 1 };
  o.self = o;
  return o;
});
value('cyclic array', () => {
  const a = [1];
  a.push(a);
  return a;
});
value('10,000-deep object', () => deepObject(10000));
value('10,000-deep array', () => deepArray(10000));
value('object of 10,000 keys', () => Object.fromEntries(Array.from({ length: 10000 }, (_, i) => [`k${i}`, i])));
value('frozen {a:1}', () => Object.freeze({ a: 1 }));
value('throwing getters', throwingGetters);
value('throwing proxy', throwingProxy);
value('toString throws', () => ({
  toString() {
    throw new Error('toString');
  },
}));
value('valueOf throws', () => ({
  valueOf() {
    throw new Error('valueOf');
  },
}));
value('toPrimitive throws', () => ({
  [Symbol.toPrimitive]() {
    throw new Error('toPrimitive');
  },
}));
value('{length:2**32}', () => ({ length: 2 ** 32 }));
value("{'!':'float',value:'abc'}", () => ({ '!': 'float', value: 'abc' }));
value("{'!':'float',value:1.5}", () => ({ '!': 'float', value: 1.5 }));
value("{'!':'int',value:2**40}", () => ({ '!': 'int', value: 2 ** 40 }));
value("{'!':'int'} (no value)", () => ({ '!': 'int' }));
value("{'!':'long',value:2**64}", () => ({ '!': 'long', value: 2 ** 64 }));
value("{'!':'long',value:1n}", () => ({ '!': 'long', value: 1n }));
value("{'!':'double',value:'x'}", () => ({ '!': 'double', value: 'x' }));
value("{'!':'byte',value:300}", () => ({ '!': 'byte', value: 300 }));
value("{'!':'timestamp',value:NaN}", () => ({ '!': 'timestamp', value: NaN }));
value("{'!':'decimal',value:{places:2,digits:12345}}", () => ({ '!': 'decimal', value: { places: 2, digits: 12345 } }));
value("{'!':'decimal',value:{places:300,digits:-1}}", () => ({ '!': 'decimal', value: { places: 300, digits: -1 } }));
value("{'!':'decimal',value:'x'}", () => ({ '!': 'decimal', value: 'x' }));
value("{'!':'unknown',value:1}", () => ({ '!': 'unknown', value: 1 }));
value("{'!':Symbol(),value:1}", () => ({ '!': Symbol('type'), value: 1 }));
value("{'!':null,value:1}", () => ({ '!': null, value: 1 }));
value('new Date(0)', () => new Date(0));
value('new Date(NaN)', () => new Date(NaN));
value('/re/', () => /re/);
value("new Error('e')", () => new Error('e'));
value('new Map([[1,2]])', () => new Map([[1, 2]]));
value('new Set([1])', () => new Set([1]));
value('Promise.resolve(1)', () => Promise.resolve(1));
value("new String('s')", () => new String('s')); // eslint-disable-line no-new-wrappers
value('new Number(1)', () => new Number(1)); // eslint-disable-line no-new-wrappers
value('Buffer.alloc(0)', () => Buffer.alloc(0));
value("Buffer.from('abc')", () => Buffer.from('abc'));
value('Buffer 4 MB', () => Buffer.alloc(4 * 1024 * 1024, 7));
value('Buffer subarray at offset 3', () => Buffer.from('0123456789').subarray(3, 7));
value('Uint8Array [1,2,3]', () => new Uint8Array([1, 2, 3]));
value('Uint16Array [1,2]', () => new Uint16Array([1, 2]));
value('Float64Array [1.5]', () => new Float64Array([1.5]));
value('BigInt64Array [1n]', () => new BigInt64Array([1n]));
value('DataView(4)', () => new DataView(new ArrayBuffer(4)));
value('ArrayBuffer(4)', () => new ArrayBuffer(4));
value('SharedArrayBuffer(4)', () => new SharedArrayBuffer(4));
value('Buffer over SharedArrayBuffer', () => Buffer.from(new SharedArrayBuffer(8)));
value('detached Uint8Array', detachedView);
value('detached Buffer', detachedBuffer);
value('Uint8Array over resizable ArrayBuffer', () => new Uint8Array(new ArrayBuffer(8, { maxByteLength: 64 })));

// The most hostile values: the sample `--quick` runs at every position.
const QUICK_VALUES = [
  'Symbol()', '2n**64n', 'NaN', "sparse [,'a',,'b']", 'cyclic object', '10,000-deep object', 'throwing proxy',
  "{'!':'float',value:'abc'}", "'x'*70000", 'detached Buffer', 'function',
];

// ------------------------------------------------------------------------------ positions
//
// `call(c, v, cb)` makes the call with `v` in the position; `cb` is given for callback-API
// positions (`callback: true`). `pre(c)` prepares what the call needs (a message to ack);
// `cleanup(c, v, result)` removes what the call made on the broker.

const POSITIONS = [];
function position(name, spec) {
  POSITIONS.push({ name, api: 'promise', ...spec });
}

const connectSpec = (call) => ({ kind: 'connect', limit: CONNECT_LIMIT, call });
// The broker's address as a URL object (localhost as 127.0.0.1: the broker may not listen on ::1).
const BROKER = new URL(BROKER_URL);
const BROKER_HOST = BROKER.hostname === 'localhost' ? '127.0.0.1' : BROKER.hostname;
const urlObject = (extra) => ({ protocol: 'amqp', hostname: BROKER_HOST, port: Number(BROKER.port) || 5672, username: 'guest', password: 'guest', ...extra });

position('connect.url', connectSpec((c, v) => c.lib.connect(v)));
position('connect.socketOptions', connectSpec((c, v) => c.lib.connect(c.url, v)));
position('connect.socketOptions.clientProperties', connectSpec((c, v) => c.lib.connect(c.url, { clientProperties: v })));
position('connect.clientProperties value', connectSpec((c, v) => c.lib.connect(c.url, { clientProperties: { fuzz: v } })));
position('connect.socketOptions.credentials', connectSpec((c, v) => c.lib.connect(c.url, { credentials: v })));
position('connect credentials.plain(username)', connectSpec((c, v) => c.lib.connect(c.url, { credentials: c.lib.credentials.plain(v, 'guest') })));
position('connect.socketOptions.timeout', connectSpec((c, v) => c.lib.connect(c.url, { timeout: v })));
position('connect.socketOptions.recovery', connectSpec((c, v) => c.lib.connect(c.url, { recovery: v })));
position('connect url object', connectSpec((c, v) => c.lib.connect(Object.assign(urlObject({}), v))));
position('connect url object .username', connectSpec((c, v) => c.lib.connect(urlObject({ username: v }))));
position('connect url object .vhost', connectSpec((c, v) => c.lib.connect(urlObject({ vhost: v }))));
position('connect url object .port', connectSpec((c, v) => c.lib.connect(urlObject({ port: v }))));
position('connect url object .frameMax', connectSpec((c, v) => c.lib.connect(urlObject({ frameMax: v }))));
position('connect url object .heartbeat', connectSpec((c, v) => c.lib.connect(urlObject({ heartbeat: v }))));
// (A function in the url's place is the callback, by the API's shapes: it is given ours.)
position('callback_api connect url', {
  kind: 'connect', limit: CONNECT_LIMIT, api: 'callback', callback: true, call: (c, v, cb) => c.cbLib.connect(typeof v === 'function' ? cb : v, cb),
});
position('createChannel options', { kind: 'channel', call: (c, v) => c.conn.createChannel(v) });

const body = () => Buffer.from('fuzz');
position('publish.exchange', { call: (c, v) => c.ch.publish(v, c.q, body()) });
position('publish.routingKey', { call: (c, v) => c.ch.publish('', v, body()) });
position('publish.content', { call: (c, v) => c.ch.publish('', c.q, v) });
position('publish.options', { call: (c, v) => c.ch.publish('', c.q, body(), v) });
for (const option of ['headers', 'CC', 'BCC', 'expiration', 'priority', 'timestamp', 'persistent', 'deliveryMode',
  'contentType', 'messageId', 'userId', 'mandatory', 'appId']) {
  position(`publish.options.${option}`, { call: (c, v) => c.ch.publish('', c.q, body(), { [option]: v }) });
}
position('publish headers value', { call: (c, v) => c.ch.publish('', c.q, body(), { headers: { fuzz: v } }) });
position('sendToQueue.queue', { call: (c, v) => c.ch.sendToQueue(v, body()) });
position('sendToQueue.content', { call: (c, v) => c.ch.sendToQueue(c.q, v) });
position('sendToQueue.options', { call: (c, v) => c.ch.sendToQueue(c.q, body(), v) });
position('ConfirmChannel publish options (callback)', {
  confirm: true, callback: true, call: (c, v, cb) => c.confirmCh.publish('', c.q, body(), v, cb),
});

const deleteQueueAfter = async (c, v, result) => {
  if (result && typeof result.queue === 'string') await c.tidy((ch) => ch.deleteQueue(result.queue));
};
position('assertQueue.queue', { call: (c, v) => c.ch.assertQueue(v, { exclusive: true }), cleanup: deleteQueueAfter });
position('assertQueue.options', { call: (c, v) => c.ch.assertQueue(`${c.q}.aq`, v), cleanup: deleteQueueAfter });
position('assertQueue.options.arguments', { call: (c, v) => c.ch.assertQueue(`${c.q}.aq`, { exclusive: true, arguments: v }), cleanup: deleteQueueAfter });
position('assertQueue arguments value', { call: (c, v) => c.ch.assertQueue(`${c.q}.aq`, { exclusive: true, arguments: { 'x-fuzz': v } }), cleanup: deleteQueueAfter });
for (const option of ['messageTtl', 'maxLength', 'deadLetterExchange', 'maxPriority']) {
  position(`assertQueue.options.${option}`, { call: (c, v) => c.ch.assertQueue(`${c.q}.aq`, { exclusive: true, [option]: v }), cleanup: deleteQueueAfter });
}
position('callback_api assertQueue.options', {
  api: 'callback', callback: true, call: (c, v, cb) => c.ch.assertQueue(`${c.q}.aq`, v, cb), cleanup: deleteQueueAfter,
});

const deleteExchangeAfter = (name) => async (c, v) => {
  const n = name(c, v);
  if (typeof n === 'string' && n !== '' && !n.startsWith('amq.')) await c.tidy((ch) => ch.deleteExchange(n));
};
position('assertExchange.exchange', { call: (c, v) => c.ch.assertExchange(v, 'fanout', { autoDelete: true }), cleanup: deleteExchangeAfter((c, v) => v) });
position('assertExchange.type', { call: (c, v) => c.ch.assertExchange(`${c.q}.ax`, v, { autoDelete: true }), cleanup: deleteExchangeAfter((c) => `${c.q}.ax`) });
position('assertExchange.options', { call: (c, v) => c.ch.assertExchange(`${c.q}.ax`, 'fanout', v), cleanup: deleteExchangeAfter((c) => `${c.q}.ax`) });

const unbindAfter = async (c, v, result, args) => {
  if (result) await c.tidy((ch) => ch.unbindQueue(...args));
};
position('bindQueue.source', {
  call: (c, v) => c.ch.bindQueue(c.q, v, 'rk'), cleanup: (c, v, r) => unbindAfter(c, v, r, [c.q, v, 'rk']),
});
position('bindQueue.pattern', {
  call: (c, v) => c.ch.bindQueue(c.q, 'amq.topic', v), cleanup: (c, v, r) => unbindAfter(c, v, r, [c.q, 'amq.topic', v]),
});
position('bindQueue.args', {
  call: (c, v) => c.ch.bindQueue(c.q, 'amq.headers', '', v), cleanup: (c, v, r) => unbindAfter(c, v, r, [c.q, 'amq.headers', '', v]),
});

const cancelAfter = async (c, v, result) => {
  if (result && typeof result.consumerTag === 'string') await c.guard(c.ch.cancel(result.consumerTag));
};
// A message waits in the queue, so that the consumer is called.
const withMessage = async (c) => {
  c.ch.sendToQueue(c.q, body());
};
position('consume.queue', { call: (c, v) => c.ch.consume(v, () => {}), settle: 20, cleanup: cancelAfter });
position('consume.callback', { pre: withMessage, call: (c, v) => c.ch.consume(c.q, v), settle: 50, cleanup: cancelAfter });
position('consume.options', { call: (c, v) => c.ch.consume(c.q, () => {}, v), settle: 20, cleanup: cancelAfter });
position('consume.options.consumerTag', { call: (c, v) => c.ch.consume(c.q, () => {}, { consumerTag: v }), settle: 20, cleanup: cancelAfter });
position('consume.options.arguments', { call: (c, v) => c.ch.consume(c.q, () => {}, { arguments: v }), settle: 20, cleanup: cancelAfter });
position('get.queue', { call: (c, v) => c.ch.get(v, { noAck: true }) });
position('get.options', { pre: withMessage, call: (c, v) => c.ch.get(c.q, v) });

// A message got (not acked), for the acknowledgement positions.
const gotMessage = async (c) => {
  c.ch.sendToQueue(c.q, body());
  for (let i = 0; i < 50; i++) {
    const msg = await c.ch.get(c.q);
    if (msg) return msg;
    await sleep(2);
  }
  throw new Error('no message to acknowledge');
};
position('ack.message', { call: (c, v) => c.ch.ack(v) });
position('ack.allUpTo', { pre: gotMessage, call: (c, v, cb, msg) => c.ch.ack(msg, v) });
position('nack.message', { call: (c, v) => c.ch.nack(v) });
position('nack.requeue', { pre: gotMessage, call: (c, v, cb, msg) => c.ch.nack(msg, false, v) });
position('reject.message', { call: (c, v) => c.ch.reject(v) });
position('prefetch.count', { call: (c, v) => c.ch.prefetch(v) });
position('prefetch.global', { call: (c, v) => c.ch.prefetch(10, v) });
position('cancel.consumerTag', { call: (c, v) => c.ch.cancel(v) });
position('deleteQueue.queue', { call: (c, v) => c.ch.deleteQueue(v, { ifUnused: true, ifEmpty: true }) });
position('deleteQueue.options', { call: (c, v) => c.ch.deleteQueue(`${c.q}.dq`, v), pre: (c) => c.ch.assertQueue(`${c.q}.dq`, { exclusive: true }) });
position('checkQueue.queue', { call: (c, v) => c.ch.checkQueue(v) });

// ---------------------------------------------------------------------------- utilities

function withTimeout(promise, ms) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(Object.assign(new Error('timeout'), { timeout: true })), ms);
    Promise.resolve(promise).then((v) => {
      clearTimeout(timer);
      resolve(v);
    }, (e) => {
      clearTimeout(timer);
      reject(e);
    });
  });
}

function safe(fn, fallback) {
  try {
    return fn();
  } catch (_) {
    return fallback;
  }
}

// The parts of an error (or any thrown value) that are compared.
function describeError(err) {
  if (!(err instanceof Error)) return { cls: `(non-Error ${typeof err})`, msg: safe(() => String(err), '?'), code: undefined };
  const cls = safe(() => err.constructor.name, '?');
  const msg = safe(() => String(err.message), '?');
  const code = safe(() => err.code, undefined);
  return { cls, msg, code: code === undefined ? undefined : safe(() => String(code), '?') };
}

// The shape of what a call returned.
function shape(v) {
  if (v === undefined || v === null || typeof v === 'boolean' || typeof v === 'number') return String(v);
  if (typeof v === 'string') return `string`;
  if (typeof v !== 'object') return typeof v;
  return safe(() => {
    // A class instance by its class (its fields are internals); a plain object by its keys.
    const proto = Object.getPrototypeOf(v);
    if (proto !== null && proto !== Object.prototype) return proto.constructor ? proto.constructor.name : 'object';
    const keys = Object.keys(v).sort();
    return `{${keys.slice(0, 12).join(',')}${keys.length > 12 ? ',...' : ''}}`;
  }, 'object');
}

// ------------------------------------------------------------------------------ the child

class Context {
  constructor(libName, pos) {
    const paths = LIBS[libName];
    this.lib = require(paths.promise);
    this.cbLib = require(paths.callback);
    this.pos = pos;
    this.url = BROKER_URL;
    this.q = `api-fuzz.${process.pid}`;
    this.conn = null;
    this.ch = null;
    this.confirmCh = null;
    this.events = [];
  }

  note(src, ev, err) {
    this.events.push({ src, ev, err: err instanceof Error ? describeError(err) : undefined });
  }

  hook(emitter, src) {
    emitter.on('error', (err) => this.note(src, 'error', err));
    emitter.on('handler-error', (err) => this.note(src, 'handler-error', err));
    emitter.on('close', () => {
      this.note(src, 'close');
      emitter.closedSeen = true;
    });
    emitter.on('return', () => this.note(src, 'return'));
    emitter.on('blocked', () => this.note(src, 'blocked'));
  }

  // A round trip on a channel, for either API.
  rpc(ch, method, ...args) {
    if (this.pos.api !== 'callback') return ch[method](...args);
    return new Promise((resolve, reject) => ch[method](...args, (err, ok) => (err ? reject(err) : resolve(ok))));
  }

  openConnection() {
    if (this.pos.api !== 'callback') return this.lib.connect(this.url);
    return new Promise((resolve, reject) => this.cbLib.connect(this.url, (err, conn) => (err ? reject(err) : resolve(conn))));
  }

  openChannel(confirm) {
    const method = confirm ? 'createConfirmChannel' : 'createChannel';
    if (this.pos.api !== 'callback') return this.conn[method]();
    return new Promise((resolve, reject) => this.conn[method]((err, ch) => (err ? reject(err) : resolve(ch))));
  }

  drop() {
    const conn = this.conn;
    this.conn = this.ch = this.confirmCh = null;
    if (conn) safe(() => Promise.resolve(conn.close(() => {})).catch(() => {}));
  }

  // A working connection, channel (and confirm channel if the position needs one), and the
  // fixture queue declared (so that '' means it on this channel, as "the last queue declared").
  async ensure() {
    if (this.conn && this.conn.closedSeen) this.drop();
    if (!this.conn) {
      this.conn = await withTimeout(this.openConnection(), CHECK_LIMIT);
      this.hook(this.conn, 'connection');
    }
    if (!this.ch || this.ch.closedSeen) {
      this.ch = await withTimeout(this.openChannel(false), CHECK_LIMIT);
      this.hook(this.ch, 'channel');
    }
    if (this.pos.confirm && (!this.confirmCh || this.confirmCh.closedSeen)) {
      this.confirmCh = await withTimeout(this.openChannel(true), CHECK_LIMIT);
      this.hook(this.confirmCh, 'confirm channel');
    }
    await withTimeout(this.rpc(this.ch, 'assertQueue', this.q, { durable: false, arguments: { 'x-expires': 120000 } }), CHECK_LIMIT);
  }

  // Cleanup on a channel of its own, so that a failure there leaves the fuzzed one alone.
  async tidy(fn) {
    try {
      const ch = await withTimeout(this.openChannel(false), CHECK_LIMIT);
      ch.on('error', () => {});
      const done = this.pos.api === 'callback'
        ? new Promise((resolve) => fn({
          deleteQueue: (q) => ch.deleteQueue(q, {}, resolve),
          deleteExchange: (e) => ch.deleteExchange(e, {}, resolve),
          unbindQueue: (...a) => ch.unbindQueue(...a, resolve),
        }))
        : fn(ch);
      await withTimeout(done, CHECK_LIMIT).catch(() => {});
      safe(() => Promise.resolve(ch.close(() => {})).catch(() => {}));
    } catch (_) {
      // the next case's ensure() sorts the connection out
    }
  }

  guard(promise) {
    return withTimeout(promise, CHECK_LIMIT).catch(() => {});
  }

  // After the call: does the connection still work?
  async survival(outcome) {
    if (this.pos.kind === 'connect') {
      const conn = outcome.result;
      let verdict = 'main ok';
      if (conn && typeof conn.createChannel === 'function') {
        try {
          const viaCallback = this.pos.api === 'callback';
          const ch = await withTimeout(viaCallback
            ? new Promise((resolve, reject) => conn.createChannel((e, c) => (e ? reject(e) : resolve(c))))
            : conn.createChannel(), CHECK_LIMIT);
          verdict = ch ? 'new connection works' : 'new connection broken';
        } catch (err) {
          verdict = err.timeout ? 'new connection hung' : 'new connection broken';
        }
        safe(() => conn.on('error', () => {}));
        await withTimeout(new Promise((resolve) => {
          const r = safe(() => conn.close(() => resolve()));
          if (r && r.then) r.then(resolve, resolve);
        }), CHECK_LIMIT).catch(() => {});
      }
      return verdict;
    }
    if (this.pos.kind === 'channel') {
      const ch = outcome.result;
      if (ch && typeof ch.close === 'function') {
        safe(() => ch.on('error', () => {}));
        try {
          await withTimeout(ch.checkExchange('amq.direct'), CHECK_LIMIT);
          await withTimeout(ch.close(), CHECK_LIMIT);
        } catch (err) {
          return err.timeout ? 'new channel hung' : 'new channel broken';
        }
        return 'new channel works';
      }
    }
    if (this.pos.settle) await sleep(this.pos.settle);
    const channels = [['ch', false], ['confirmCh', true]].filter(([key]) => key === 'ch' || this.pos.confirm);
    const verdicts = [];
    for (const [key, confirm] of channels) {
      const verdict = await this.checkChannel(key, confirm);
      verdicts.push(verdict);
      if (verdict.startsWith('connection')) {
        this.drop();
        break;
      }
    }
    return verdicts.find((v) => v !== 'ok') || 'ok';
  }

  // A round trip on the channel `this[key]`: 'ok', 'channel closed', 'channel hung' (no
  // answer while a new channel on the same connection opens and answers), 'connection closed'
  // or 'connection hung'. A channel closed or hung is replaced by a new one.
  async checkChannel(key, confirm) {
    const state = settleState(this.rpc(this[key], 'checkExchange', 'amq.direct'));
    await state.within(QUICK_ANSWER);
    if (state.value === 'ok') return 'ok';
    let fresh;
    try {
      fresh = await withTimeout(this.openChannel(confirm), CHECK_LIMIT);
      await withTimeout(this.rpc(fresh, 'checkExchange', 'amq.direct'), CHECK_LIMIT);
    } catch (err) {
      return err.timeout ? 'connection hung' : 'connection closed';
    }
    this.hook(fresh, key === 'ch' ? 'channel' : 'confirm channel');
    await state.within(QUICK_ANSWER);
    const old = this[key];
    this[key] = fresh;
    if (state.value === 'ok') {
      // Slow, not stuck: keep the old channel.
      this[key] = old;
      safe(() => Promise.resolve(fresh.close(() => {})).catch(() => {}));
      return 'ok';
    }
    return state.value === 'failed' ? 'channel closed' : 'channel hung';
  }
}

// How a promise has settled so far: value is 'pending', 'ok' or 'failed'.
function settleState(promise) {
  const state = { value: 'pending' };
  let wake = null;
  const settle = (v) => {
    state.value = v;
    if (wake) wake();
  };
  Promise.resolve(promise).then(() => settle('ok'), () => settle('failed'));
  state.within = (ms) => (state.value !== 'pending' ? Promise.resolve() : new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    wake = () => {
      clearTimeout(timer);
      resolve();
    };
  }));
  return state;
}

// Makes the call, and classifies what happens within the time limit.
function invoke(fn, expectsCallback, limit) {
  return new Promise((resolve) => {
    let settled = false;
    const done = (outcome) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(outcome);
    };
    const timer = setTimeout(() => done({ kind: 'hang', detail: `nothing within ${limit} ms` }), limit);
    const cb = (err, result) => {
      if (err) done({ kind: 'callback error', ...describeError(err) });
      else done({ kind: 'callback ok', value: shape(result), result });
    };
    let r;
    try {
      r = fn(cb);
    } catch (err) {
      done({ kind: 'threw', ...describeError(err) });
      return;
    }
    if (expectsCallback) return;
    if (r && typeof r.then === 'function') {
      r.then((v) => done({ kind: 'resolved', value: shape(v), result: v }), (err) => done({ kind: 'rejected', ...describeError(err) }));
    } else {
      done({ kind: 'returned', value: shape(r) });
    }
  });
}

function writeLine(fd, text) {
  const buf = Buffer.from(text);
  let off = 0;
  while (off < buf.length) {
    try {
      off += fs.writeSync(fd, buf, off);
    } catch (err) {
      if (err.code !== 'EAGAIN') throw err;
    }
  }
}

async function childMain(args) {
  const out = (obj) => writeLine(3, `${JSON.stringify(obj)}\n`);
  const report = (how) => (err) => {
    out({ t: 'crash', how, ...describeError(err) });
    process.exit(70);
  };
  process.on('uncaughtException', report('uncaught exception'));
  process.on('unhandledRejection', report('unhandled rejection'));

  const pos = POSITIONS.find((p) => p.name === args.position);
  const indexes = args.values.split(',').map(Number);
  const limit = Number(args.limit);
  const c = new Context(args.lib, pos);

  for (const i of indexes) {
    let pre;
    try {
      await c.ensure();
      if (pos.pre) pre = await withTimeout(pos.pre(c), CHECK_LIMIT);
    } catch (err) {
      out({ t: 'setup-failed', i, ...describeError(err) });
      process.exit(3);
    }
    c.events = [];
    const v = VALUES[i].make();
    out({ t: 'start', i });
    const outcome = await invoke((cb) => pos.call(c, v, cb, pre), pos.callback, Math.max(limit, pos.limit || 0));
    const survival = await c.survival(outcome);
    // What a failed connect leaves behind (timers, socket events) gets a moment to go wrong
    // while this case is still the one blamed.
    if (pos.kind === 'connect') await sleep(CONNECT_SETTLE);
    const events = c.events.filter((e) => e.ev !== 'close').map((e) => `${e.src} ${e.ev}${e.err ? `: ${e.err.cls}: ${e.err.msg}` : ''}`);
    const { result, ...plain } = outcome;
    out({ t: 'result', i, outcome: plain, survival, events });
    if (pos.cleanup) {
      try {
        await c.ensure();
        await pos.cleanup(c, v, result);
      } catch (_) {
        // next case's ensure() deals with it
      }
    }
    if (c.ch && !c.ch.closedSeen) await c.guard(c.rpc(c.ch, 'purgeQueue', c.q));
  }
  out({ t: 'done' });
  if (c.conn) await withTimeout(new Promise((resolve) => {
    const r = safe(() => c.conn.close(() => resolve()));
    if (r && r.then) r.then(resolve, resolve);
  }), CHECK_LIMIT).catch(() => {});
  process.exit(0);
}

// ----------------------------------------------------------------------------- the parent

// Runs one (library, position) batch: a child per run of values, a new child after a crash
// or a hang that stopped the child's event loop. Resolves to { index: record }.
function runBatch(libName, pos, indexes, limit) {
  const results = {};
  let remaining = indexes.slice();
  const watchdogMs = Math.max(limit, pos.limit || 0) + CHECK_LIMIT * 4 + 5000;

  const once = () => new Promise((resolve) => {
    const child = spawn(process.execPath, [__filename, '--child', `--lib=${libName}`, `--position=${pos.name}`,
      `--values=${remaining.join(',')}`, `--limit=${limit}`], { stdio: ['ignore', 'ignore', 'pipe', 'pipe'] });
    let stderr = '';
    let current = null; // index started, no result yet
    let last = null; // index with a result, before the next start
    let crashReported = null;
    let setupFailed = null;
    let killedForHang = false;
    let watchdog = null;
    const arm = () => {
      clearTimeout(watchdog);
      watchdog = setTimeout(() => {
        killedForHang = true;
        child.kill('SIGKILL');
      }, watchdogMs);
    };
    arm();
    child.stderr.on('data', (d) => {
      stderr = (stderr + d.toString()).slice(-4000);
    });
    let buffered = '';
    child.stdio[3].on('data', (d) => {
      buffered += d.toString();
      let nl;
      while ((nl = buffered.indexOf('\n')) >= 0) {
        const line = buffered.slice(0, nl);
        buffered = buffered.slice(nl + 1);
        let msg;
        try {
          msg = JSON.parse(line);
        } catch (_) {
          continue;
        }
        arm();
        if (msg.t === 'start') {
          current = msg.i;
          last = null;
        } else if (msg.t === 'result') {
          results[msg.i] = { outcome: msg.outcome, survival: msg.survival, events: msg.events };
          remaining = remaining.filter((i) => i !== msg.i);
          current = null;
          last = msg.i;
        } else if (msg.t === 'crash') {
          crashReported = msg;
        } else if (msg.t === 'setup-failed') {
          setupFailed = msg;
        }
      }
    });
    child.on('exit', (code, signal) => {
      clearTimeout(watchdog);
      const tail = stderr.trim().split('\n').slice(-6).join(' | ');
      let how;
      if (killedForHang) how = null;
      else if (crashReported) how = `${crashReported.how}: ${crashReported.cls}: ${crashReported.msg}`;
      else if (signal) how = `signal ${signal}`;
      else if (code !== 0) how = `exit code ${code}`;
      if (current !== null) {
        results[current] = killedForHang
          ? { outcome: { kind: 'hang', detail: `event loop stopped answering (child killed after ${watchdogMs} ms)` }, survival: '-', events: [] }
          : { outcome: { kind: 'crash', detail: how || `exit ${code}`, stderr: tail }, survival: '-', events: [] };
        remaining = remaining.filter((i) => i !== current);
      } else if (last !== null && (how || killedForHang) && !setupFailed) {
        // It went down after the call had returned, in the check or the cleanup.
        const r = results[last];
        results[last] = { ...r, outcome: { kind: killedForHang ? 'hang' : 'crash', detail: `after the call (${r.outcome.kind}): ${how || 'event loop stopped answering'}`, stderr: tail }, survival: '-' };
      }
      if (setupFailed) {
        // The batch cannot go on (no broker, or it refuses us): the rest is not run.
        for (const i of remaining) {
          results[i] = { outcome: { kind: 'not run', detail: `setup failed: ${setupFailed.cls}: ${setupFailed.msg}` }, survival: '-', events: [] };
        }
        remaining = [];
      } else if (current === null && last === null && remaining.length > 0) {
        // Died before its first call: do not loop on it.
        for (const i of remaining) {
          results[i] = { outcome: { kind: 'not run', detail: `child ${how || 'exited'} before the first call: ${tail}` }, survival: '-', events: [] };
        }
        remaining = [];
      }
      resolve();
    });
  });

  return (async () => {
    while (remaining.length > 0) await once();
    return results;
  })();
}

async function pool(tasks, jobs) {
  const queue = tasks.slice();
  const workers = Array.from({ length: Math.max(1, jobs) }, async () => {
    while (queue.length > 0) await queue.shift()();
  });
  await Promise.all(workers);
}

// Names that carry the run (pid, server-generated names) out of messages, long runs of one
// character folded, so that both libraries' messages compare.
function normalise(text) {
  if (text === undefined || text === null) return text;
  return String(text)
    .replace(/api-fuzz\.\d+/g, 'api-fuzz.<pid>')
    .replace(/amq\.gen-[A-Za-z0-9_-]+/g, 'amq.gen-<id>')
    .replace(/amq\.ctag-[A-Za-z0-9_-]+/g, 'amq.ctag-<id>')
    .replace(/(.)\1{19,}/gs, (m, ch) => `${ch}×${m.length}`);
}

function describeCase(r) {
  const o = r.outcome;
  let s = o.kind;
  if (o.cls) s += ` ${o.cls}: ${normalise(o.msg)}`;
  if (o.code !== undefined) s += ` [code ${o.code}]`;
  if (o.value !== undefined) s += ` → ${o.value}`;
  if (o.detail) s += ` (${normalise(o.detail)})`;
  return s;
}

// The fields compared, each a string.
function fields(r) {
  const o = r.outcome;
  const firstError = r.events.find((e) => / (error|handler-error): /.test(e));
  return {
    kind: o.kind,
    class: o.cls || '',
    message: normalise(o.msg) || '',
    code: o.code === undefined ? '' : String(o.code),
    value: o.value || '',
    survival: r.survival,
    event: firstError ? normalise(firstError) : '',
  };
}

function compare(a, b) {
  const fa = fields(a);
  const fb = fields(b);
  return Object.keys(fa).filter((k) => fa[k] !== fb[k]);
}

const clip = (s, n) => (s.length > n ? `${s.slice(0, n - 1)}…` : s);
const cell = (s) => s.replace(/\|/g, '\\|').replace(/\n/g, ' ');

function summary(r) {
  const f = fields(r);
  let s = describeCase(r);
  s += `; ${f.survival}`;
  if (f.event) s += `; ${f.event}`;
  return s;
}

async function parentMain(args) {
  const quick = !!args.quick;
  const limit = Number(args.limit || (quick ? 2000 : 3000));
  const jobs = Number(args.jobs || (quick ? 4 : 3));
  let positions = POSITIONS;
  if (args.positions) positions = positions.filter((p) => new RegExp(args.positions).test(p.name));
  let valueIdx = VALUES.map((_, i) => i);
  if (quick) valueIdx = valueIdx.filter((i) => QUICK_VALUES.includes(VALUES[i].name));
  if (args.values) valueIdx = valueIdx.filter((i) => new RegExp(args.values).test(VALUES[i].name));
  if (args.list) {
    console.log(`${POSITIONS.length} positions:\n  ${POSITIONS.map((p) => p.name).join('\n  ')}`);
    console.log(`${VALUES.length} values:\n  ${VALUES.map((v) => v.name).join('\n  ')}`);
    return 0;
  }

  const started = Date.now();
  const cases = positions.length * valueIdx.length;
  console.log(`api fuzz (${quick ? 'quick' : 'full'}): ${positions.length} positions x ${valueIdx.length} values = ${cases} cases, `
    + `for amqplib 2.3.1 and ours; ${limit} ms per call, ${jobs} children at a time`);

  const results = { amqplib: {}, ours: {} };
  const tasks = [];
  for (const pos of positions) {
    for (const lib of LIB_ORDER) {
      tasks.push(async () => {
        results[lib][pos.name] = await runBatch(lib, pos, valueIdx, limit);
        if (lib === 'ours') process.stdout.write('.');
      });
    }
  }
  await pool(tasks, jobs);
  process.stdout.write('\n');

  // Tally and compare.
  const tally = { amqplib: { crash: [], hang: [], notRun: 0 }, ours: { crash: [], hang: [], notRun: 0 } };
  const groups = new Map();
  const fieldCounts = {};
  let differing = 0;
  const all = [];
  for (const pos of positions) {
    for (const i of valueIdx) {
      const a = results.amqplib[pos.name][i];
      const o = results.ours[pos.name][i];
      const where = `${pos.name} ← ${VALUES[i].name}`;
      all.push({ position: pos.name, value: VALUES[i].name, amqplib: a, ours: o });
      for (const [lib, r] of [['amqplib', a], ['ours', o]]) {
        if (r.outcome.kind === 'crash') tally[lib].crash.push(`${where}: ${r.outcome.detail}${r.outcome.stderr ? ` [stderr: ${r.outcome.stderr}]` : ''}`);
        if (r.outcome.kind === 'hang') tally[lib].hang.push(`${where}: ${r.outcome.detail}`);
        if (r.survival.endsWith('hung')) tally[lib].hang.push(`${where}: ${r.survival} after ${describeCase(r)}`);
        if (r.outcome.kind === 'not run') tally[lib].notRun++;
      }
      const diff = compare(a, o);
      if (diff.length === 0) continue;
      differing++;
      for (const k of diff) fieldCounts[k] = (fieldCounts[k] || 0) + 1;
      const key = `${summary(a)}\u0000${summary(o)}`;
      if (!groups.has(key)) groups.set(key, { amqplib: summary(a), ours: summary(o), fields: diff, cases: [] });
      groups.get(key).cases.push(where);
    }
  }

  const secs = ((Date.now() - started) / 1000).toFixed(1);
  console.log(`\n${cases} cases in ${secs} s; differing from amqplib 2.3.1: ${differing} `
    + `(${Object.entries(fieldCounts).map(([k, n]) => `${k} ${n}`).join(', ') || 'none'}), in ${groups.size} groups`);
  for (const lib of LIB_ORDER) {
    const t = tally[lib];
    console.log(`${LIBS[lib].label}: ${t.crash.length} crashes, ${t.hang.length} hangs${t.notRun ? `, ${t.notRun} not run (setup failed)` : ''}`);
    // Ours in full; amqplib's (its channel stays stuck after an RPC it could not encode, in
    // hundreds of cases) in brief: the table below has them all.
    const shown = lib === 'ours' ? Infinity : 8;
    const lines = [...t.crash.map((l) => `  CRASH ${l}`), ...t.hang.map((l) => `  HANG  ${l}`)];
    for (const line of lines.slice(0, shown)) console.log(clip(line, 400));
    if (lines.length > shown) console.log(`  … ${lines.length - shown} more (see the differences)`);
  }

  const sorted = [...groups.values()].sort((x, y) => y.cases.length - x.cases.length);
  if (sorted.length > 0) {
    console.log('\nDifferences (ours vs amqplib 2.3.1), grouped:\n');
    console.log('| # | cases | differs in | amqplib 2.3.1 | ours | examples |');
    console.log('|---|---|---|---|---|---|');
    sorted.forEach((g, n) => {
      const examples = g.cases.slice(0, 3).join('; ') + (g.cases.length > 3 ? `; … (${g.cases.length - 3} more)` : '');
      console.log(`| ${n + 1} | ${g.cases.length} | ${g.fields.join(', ')} | ${cell(clip(g.amqplib, 160))} | ${cell(clip(g.ours, 160))} | ${cell(clip(examples, 240))} |`);
    });
  }

  if (!quick) {
    const dir = path.join(__dirname, 'results');
    fs.mkdirSync(dir, { recursive: true });
    const file = path.join(dir, 'api_fuzz.md');
    const lines = [];
    lines.push('# API fuzz: ours vs amqplib 2.3.1', '');
    lines.push(`Made by \`node benchmarks/api_fuzz.js\` on ${new Date().toISOString()} (Node ${process.version}), ${secs} s.`, '');
    lines.push(`${positions.length} argument positions x ${valueIdx.length} values = ${cases} cases per library.`, '');
    lines.push('| | crashes | hangs | not run |', '|---|---|---|---|');
    for (const lib of LIB_ORDER) lines.push(`| ${LIBS[lib].label} | ${tally[lib].crash.length} | ${tally[lib].hang.length} | ${tally[lib].notRun} |`);
    lines.push('');
    for (const lib of LIB_ORDER) {
      for (const line of tally[lib].crash) lines.push(`- ${LIBS[lib].label} CRASH: ${cell(line)}`);
      for (const line of tally[lib].hang) lines.push(`- ${LIBS[lib].label} HANG: ${cell(line)}`);
    }
    lines.push('', `## Differences: ${differing} cases in ${groups.size} groups`, '');
    lines.push(`Fields that differ, in how many cases: ${Object.entries(fieldCounts).map(([k, n]) => `${k} ${n}`).join(', ') || 'none'}.`, '');
    lines.push('Each case reads: outcome kind, error class: message [code] → value returned; what the channel check found afterwards; the first error event.', '');
    lines.push('| # | cases | differs in | amqplib 2.3.1 | ours | cases (position ← value) |', '|---|---|---|---|---|---|');
    sorted.forEach((g, n) => {
      lines.push(`| ${n + 1} | ${g.cases.length} | ${g.fields.join(', ')} | ${cell(g.amqplib)} | ${cell(g.ours)} | ${cell(g.cases.join('; '))} |`);
    });
    fs.writeFileSync(file, `${lines.join('\n')}\n`);
    console.log(`\nfull list: ${path.relative(process.cwd(), file)}`);
  }
  if (args.json) fs.writeFileSync(args.json, JSON.stringify(all, null, 1));

  const bad = tally.ours.crash.length + tally.ours.hang.length + tally.ours.notRun;
  if (bad > 0) console.log(`\nFAIL: ours crashed or hung (or could not run) in ${bad} cases`);
  return bad > 0 ? 1 : 0;
}

const args = cliArgs().options;
if (args.child) {
  childMain(args);
} else {
  parentMain(args).then((code) => {
    process.exitCode = code;
  }, (err) => {
    console.error(inspect(err));
    process.exitCode = 2;
  });
}
