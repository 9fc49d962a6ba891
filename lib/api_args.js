'use strict';

// Translation of the user-facing arguments and options of each channel
// operation into the fields of the AMQP method (and, for publish, the
// message properties) that carries it.
//
// Both the promise API (channel_model.js) and the callback API
// (callback_model.js) go through here, so the two always put the same
// bytes on the wire for the same call.
//
// Conventions shared by every function below:
//  - the caller's objects are never mutated;
//  - a missing `options` behaves like `{}`;
//  - field tables are built as fresh objects: `arguments` with own properties
//    only, a publish's `headers` over the caller's as its prototype (see
//    publishHeaders). Entries whose value is `undefined` are dropped by the
//    encoder, as amqplib's encoder does.

const { MAX_TABLE_BYTES } = require('./boundary');

const NO_OPTIONS = Object.freeze({});

// Options that RabbitMQ takes as queue arguments, promoted to first-class
// options of assertQueue: option name -> argument name.
const QUEUE_ARGUMENT_OPTIONS = [
  ['expires', 'x-expires'],
  ['messageTtl', 'x-message-ttl'],
  ['deadLetterExchange', 'x-dead-letter-exchange'],
  ['deadLetterRoutingKey', 'x-dead-letter-routing-key'],
  ['maxLength', 'x-max-length'],
  ['maxPriority', 'x-max-priority'],
  ['overflow', 'x-overflow'],
  ['queueMode', 'x-queue-mode'],
];

const EXCHANGE_ARGUMENT_OPTIONS = [['alternateExchange', 'alternate-exchange']];

const CONSUME_ARGUMENT_OPTIONS = [['priority', 'x-priority']];

// Copy every enumerable entry of a user-supplied table (inherited ones
// too: amqplib serialises those) into a fresh plain object.
function copyTable(source) {
  const table = {};
  if (!source) return table; // any falsy value means "no table"
  if (typeof source !== 'object' && typeof source !== 'function') {
    // amqplib fails the same way when given a non-object table.
    throw new TypeError(`Object prototype may only be an Object or null: ${String(source)}`);
  }
  for (const key in source) table[key] = source[key];
  return table;
}

// Build an `arguments` table: the user's own `options.arguments`, overlaid
// with any promoted options that were given (a promoted option that is
// absent leaves a same-named entry in `options.arguments` alone).
function argumentsTable(options, promoted) {
  const table = copyTable(options.arguments);
  for (let i = 0; i < promoted.length; i++) {
    const value = options[promoted[i][0]];
    if (value !== undefined) table[promoted[i][1]] = value;
  }
  return table;
}

// `durable` is the one flag that defaults to true.
function durableOption(options) {
  return options.durable === undefined ? true : options.durable;
}

// Requeueing is what happens unless the caller says otherwise: only an
// absent value defaults (to true); anything given is passed through.
function requeueOption(requeue) {
  return requeue === undefined ? true : requeue;
}

// --- Queues ---

function assertQueue(queue, options) {
  const opts = options || NO_OPTIONS;
  return {
    queue: queue || '', // '' asks the server to name the queue
    exclusive: !!opts.exclusive,
    durable: durableOption(opts),
    autoDelete: !!opts.autoDelete,
    arguments: argumentsTable(opts, QUEUE_ARGUMENT_OPTIONS),
    passive: false,
    ticket: 0, // deprecated, but still a field of the method
    nowait: false,
  };
}

// A passive declare: the server only checks that the queue exists; the
// other flags are ignored by it but must still be encoded.
function checkQueue(queue) {
  return {
    queue,
    passive: true,
    nowait: false,
    durable: true,
    autoDelete: false,
    exclusive: false,
    ticket: 0,
  };
}

function deleteQueue(queue, options) {
  const opts = options || NO_OPTIONS;
  return {
    queue,
    ifUnused: !!opts.ifUnused,
    ifEmpty: !!opts.ifEmpty,
    ticket: 0,
    nowait: false,
  };
}

function purgeQueue(queue) {
  return { queue, ticket: 0, nowait: false };
}

// `argt` is handed over as given; when absent the encoder uses the
// method's default (an empty table).
function bindQueue(queue, source, pattern, argt) {
  return {
    queue,
    exchange: source,
    routingKey: pattern,
    arguments: argt,
    ticket: 0,
    nowait: false,
  };
}

function unbindQueue(queue, source, pattern, argt) {
  return bindQueue(queue, source, pattern, argt);
}

// --- Exchanges ---

function assertExchange(exchange, type, options) {
  const opts = options || NO_OPTIONS;
  return {
    exchange,
    ticket: 0,
    type,
    passive: false,
    durable: durableOption(opts),
    autoDelete: !!opts.autoDelete,
    internal: !!opts.internal,
    nowait: false,
    arguments: argumentsTable(opts, EXCHANGE_ARGUMENT_OPTIONS),
  };
}

function checkExchange(exchange) {
  return {
    exchange,
    passive: true,
    nowait: false,
    durable: true,
    internal: false,
    type: '',
    autoDelete: false,
    ticket: 0,
  };
}

function deleteExchange(exchange, options) {
  const opts = options || NO_OPTIONS;
  return {
    exchange,
    ifUnused: !!opts.ifUnused,
    ticket: 0,
    nowait: false,
  };
}

function bindExchange(dest, source, pattern, argt) {
  return {
    source,
    destination: dest,
    routingKey: pattern,
    arguments: argt,
    ticket: 0,
    nowait: false,
  };
}

function unbindExchange(dest, source, pattern, argt) {
  return bindExchange(dest, source, pattern, argt);
}

// --- Publishing (hot path) ---

// Each name in a CC or BCC list takes 5 bytes at least on the wire (its tag
// and length): a list longer than this cannot fit in a table.
const MOST_ROUTING_NAMES = Math.floor(MAX_TABLE_BYTES / 5) + 1;

// RabbitMQ's sender-selected distribution: CC and BCC headers are arrays
// of strings. A single value is accepted as a one-element list. A list is
// read only as far as it could fit (an array's length may be 2 ** 32 - 1
// with nothing in it): the encoder refuses one longer as a table too large.
function routingList(value) {
  if (Array.isArray(value)) {
    const length = Math.min(value.length, MOST_ROUTING_NAMES);
    const list = new Array(length);
    for (let i = 0; i < length; i++) list[i] = String(value[i]);
    return list;
  }
  return [String(value)];
}

// A publish's headers without the caller's: empty, and inheriting nothing, as amqplib's
// Object.create(null). Made by a constructor because V8 makes Object.create(null) a
// dictionary, slower to fill and to read, and gives a `{}` literal four spare slots: an
// instance is trimmed to the fields it has, 24 bytes where `{}` takes 56, on every publish.
function BareHeaders() {}
BareHeaders.prototype = Object.create(null);

// A publish's headers: a table of its own whose prototype is the caller's (as amqplib makes
// it), with CC and BCC over them. What an instrumentation adds (trace headers, in
// sendMessage or publish) is sent, and never lands on the caller's object. A primitive
// `headers` throws amqplib's TypeError (Object.create's own).
function publishHeaders(options) {
  const headers = options.headers ? Object.create(options.headers) : new BareHeaders();
  if (options.CC !== undefined) headers.CC = routingList(options.CC);
  if (options.BCC !== undefined) headers.BCC = routingList(options.BCC);
  return headers;
}

// 1 = transient, 2 = persistent. `persistent` wins; `deliveryMode` is
// accepted as a number, or as a truthy non-number meaning persistent (an
// older spelling). Left undefined, the property is not sent and the
// broker treats the message as transient.
function deliveryModeOption(options) {
  if (options.persistent !== undefined) return options.persistent ? 2 : 1;
  const mode = options.deliveryMode;
  if (typeof mode === 'number') return mode;
  return mode ? 2 : undefined;
}

// One object serves as both the BasicPublish method fields and the
// BasicProperties: the names don't overlap and each encoder takes what it
// needs. Always built with the same literal so every publish shares one
// object shape.
function publish(exchange, routingKey, options) {
  const opts = options || NO_OPTIONS;
  const expiration = opts.expiration;
  return {
    // method fields
    exchange,
    routingKey,
    mandatory: !!opts.mandatory,
    immediate: false, // not supported by RabbitMQ
    ticket: undefined,
    // properties
    contentType: opts.contentType,
    contentEncoding: opts.contentEncoding,
    headers: publishHeaders(opts),
    deliveryMode: deliveryModeOption(opts),
    priority: opts.priority,
    correlationId: opts.correlationId,
    replyTo: opts.replyTo,
    // a shortstr on the wire; numbers of milliseconds are the usual input
    expiration: expiration === undefined ? undefined : expiration.toString(),
    messageId: opts.messageId,
    timestamp: opts.timestamp,
    type: opts.type,
    userId: opts.userId,
    appId: opts.appId,
    clusterId: undefined,
  };
}

// --- Consuming ---

function consume(queue, options) {
  const opts = options || NO_OPTIONS;
  return {
    ticket: 0,
    queue,
    consumerTag: opts.consumerTag || '', // '' asks the server for a tag
    noLocal: !!opts.noLocal,
    noAck: !!opts.noAck,
    exclusive: !!opts.exclusive,
    nowait: false,
    arguments: argumentsTable(opts, CONSUME_ARGUMENT_OPTIONS),
  };
}

function cancel(consumerTag) {
  return { consumerTag, nowait: false };
}

function get(queue, options) {
  const opts = options || NO_OPTIONS;
  return { ticket: 0, queue, noAck: !!opts.noAck };
}

// --- Acknowledgements and flow ---

function ack(tag, allUpTo) {
  return { deliveryTag: tag, multiple: !!allUpTo };
}

function nack(tag, allUpTo, requeue) {
  return { deliveryTag: tag, multiple: !!allUpTo, requeue: requeueOption(requeue) };
}

function reject(tag, requeue) {
  return { deliveryTag: tag, requeue: requeueOption(requeue) };
}

// RabbitMQ implements only the message-count limit; `global` selects
// per-channel rather than per-consumer.
function prefetch(count, global) {
  return { prefetchCount: count || 0, prefetchSize: 0, global: !!global };
}

function recover() {
  return { requeue: true };
}

module.exports = Object.freeze({
  assertQueue,
  checkQueue,
  deleteQueue,
  purgeQueue,
  bindQueue,
  unbindQueue,
  assertExchange,
  checkExchange,
  deleteExchange,
  bindExchange,
  unbindExchange,
  publish,
  consume,
  cancel,
  get,
  ack,
  nack,
  reject,
  prefetch,
  recover,
});
