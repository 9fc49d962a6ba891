'use strict';
const { AsyncResource } = require('node:async_hooks');

// A list of nodes: `connect([url, url, ...], socketOptions)`, for a RabbitMQ cluster. Each
// entry is a URL string or object, as `connect` takes one, with its own credentials, vhost
// and query options where it gives them, and the socket options shared. Without recovery the
// first node that completes the handshake wins; lib/recovery.js goes round the list itself.
// amqplib takes an array for a URL object with no host, and connects to localhost.

// Throws a TypeError unless `urls` is a non-empty list of URL strings or objects. Every index
// is looked at (a hole is undefined, no URL), so a sparse array is refused at its first hole.
function checkNodeList(urls) {
  if (urls.length === 0) throw new TypeError('Expected at least one URL in the list of nodes');
  for (let i = 0; i < urls.length; i++) {
    const url = urls[i];
    if (typeof url !== 'string' && (url === null || typeof url !== 'object' || Array.isArray(url))) {
      throw new TypeError(`Expected a URL string or object for node ${i}; got ${url === null ? 'null' : typeof url}`);
    }
  }
}

// A node that accepts the TCP connection and never speaks (frozen, stopped by SIGSTOP) would
// hold a list, or recovery, on it for ever: unless the caller gives a `timeout` of its own,
// each node of a list and each attempt of recovery must finish its handshake within this.
const HANDSHAKE_TIMEOUT = 10000;

// `socketOptions` with the handshake deadline for lists and recovery.
function withHandshakeTimeout(socketOptions) {
  if (socketOptions?.timeout !== undefined) return socketOptions;
  return { ...socketOptions, timeout: HANDSHAKE_TIMEOUT };
}

// Where a node's URL stands in the list recovery goes round (for tracing): carried by its
// socket options, as lib/connect.js's `connect` takes amqplib's three arguments, the
// callback last (instrumentation wraps that one).
const NODE_INDEX = Symbol('amqplib-rs node index');

// A recovering model's say on an attempt's credentials (lib/recovery.js): `{ credentials }`
// from its hook, or `{ secret }` from its updateSecret.
const ATTEMPT_AUTH = Symbol('amqplib-rs attempt credentials');

// `socketOptions` for the node at `index`, with `auth` (see ATTEMPT_AUTH) if given. Both are
// kept out of what gets copied on: neither reaches the socket, nor the options a TLS socket
// keeps (`connection.stream`), so no secret is left there.
function atNode(socketOptions, index, auth) {
  const options = Object.defineProperty({ ...socketOptions }, NODE_INDEX, { value: index });
  if (auth) Object.defineProperty(options, ATTEMPT_AUTH, { value: auth });
  return options;
}

// The `auth` atNode gave, or null.
function attemptAuthOf(socketOptions) {
  return socketOptions?.[ATTEMPT_AUTH] ?? null;
}

// The node index `atNode` gave, or 0.
function nodeIndexOf(socketOptions) {
  return socketOptions?.[NODE_INDEX] ?? 0;
}

// The nodes `connect` was given: a checked list, or a single URL (whatever it is: it is
// checked as amqplib checks it) as a list of one.
function nodesOf(url) {
  if (!Array.isArray(url)) return [url];
  checkNodeList(url);
  return url;
}

// How messages and events name a node: protocol://host:port/vhost, never its credentials
// (no URL at all is amqp://localhost, as connect takes it).
function describeNode(url) {
  const given = url || 'amqp://localhost';
  if (typeof given === 'object') {
    const protocol = `${given.protocol || 'amqp'}:`;
    return `${protocol}//${given.hostname || 'localhost'}:${given.port || defaultPort(protocol)}/${given.vhost || ''}`;
  }
  try {
    const parts = new URL(given);
    return `${parts.protocol}//${parts.hostname}:${parts.port || defaultPort(parts.protocol)}${parts.pathname || '/'}`;
  } catch {
    return 'a URL that does not parse';
  }
}

// The port a URL of this protocol means when it gives none (lib/connect.js's too).
function defaultPort(protocol) {
  return protocol === 'amqp:' ? 5672 : 5671;
}

// Every node failed: one error that names each node and its failure, as net.connect's
// AggregateError does for the addresses of one host name (its code is the first error's).
function allNodesFailed(urls, errors) {
  const each = urls.map((url, i) => `${describeNode(url)}: ${errors[i].message}`).join('; ');
  const err = new AggregateError(errors, `Could not connect to any of the ${urls.length} nodes (${each})`);
  err.code = errors[0].code;
  return err;
}

// Calls `open(url, cb, index)` for each node in turn, from the first, until one calls back with no
// error; then `cb(null, value)`, else `cb(allNodesFailed(...))`. A node whose `open` throws
// (a URL of another protocol, say) has failed like any other. Each node is tried after the
// last one's failure has been handled, in the caller's async context: traced attempts
// (lib/tracing.js) are one after the other, not each inside the last one's callback.
function openFirst(urls, open, cb) {
  const errors = [];
  const tryNode = AsyncResource.bind((i) => {
    if (i === urls.length) {
      cb(allNodesFailed(urls, errors));
      return;
    }
    const next = (err, value) => {
      if (!err) cb(null, value);
      else {
        errors.push(err);
        process.nextTick(tryNode, i + 1);
      }
    };
    try {
      open(urls[i], next, i);
    } catch (err) {
      next(err);
    }
  });
  tryNode(0);
}

module.exports = { checkNodeList, nodesOf, withHandshakeTimeout, atNode, attemptAuthOf, nodeIndexOf, describeNode, defaultPort, allNodesFailed, openFirst };
