'use strict';
// Tracing without patching (issue 28): Node's diagnostics_channel, as undici, mysql2 and
// ioredis publish on it. Named after the package as users require it, `amqplib:...`, so that
// a tool written for amqplib subscribes to ours. Nothing is built unless someone subscribes:
// each call site asks `hasSubscribers` first.
//
// Tracing channels (start, end, asyncStart, asyncEnd, error). Callbacks run where what settles
// them is read (an RPC's reply, a confirm, a delivery), as amqplib's do: not in the caller's
// async context, unless a subscriber binds a store to start or asyncStart, which Node then
// enters around them:
// - amqplib:connect  each connection attempt (recovery's too): serverAddress, serverPort,
//   vhost, node (protocol://host:port/vhost) and nodeIndex; on success frameMax, channelMax,
//   heartbeat and result (the connection); on failure error.
// - amqplib:publish  each publish and sendToQueue: destination (the exchange), routingKey,
//   properties (the caller's options as the prototype of an object of its own, and so its
//   headers: a subscriber may add headers in `start`, and they are sent),
//   messageId, conversationId, bodySize, channel (its number), confirm; on a confirm channel
//   asyncStart/asyncEnd when the server acks or nacks (error: the nack or the close).
// - amqplib:deliver  around each consumer callback: queue, consumerTag, destination,
//   routingKey, redelivered, deliveryTag, messageId, conversationId, bodySize, channel,
//   message.
// - amqplib:rpc  each channel RPC: method (e.g. 'queue.declare'), fields, channel; result (the
//   reply frame) or error.
// Every context also has system: 'rabbitmq', serverAddress and serverPort.
// Plain channels: amqplib:connection:blocked ({ connection, reason }), :unblocked
// ({ connection }), :close ({ connection, error }), and amqplib:channel:error ({ channel,
// error }).

const dc = require('node:diagnostics_channel');
const { methodName } = require('./format');

const SYSTEM = 'rabbitmq';

// TracingChannel#hasSubscribers came with Node 20.13 and 22.0; before, a getter of our own
// asks its five channels.
function tracingChannel(name) {
  const channel = dc.tracingChannel(name);
  if (typeof channel.hasSubscribers !== 'boolean') {
    const parts = ['start', 'end', 'asyncStart', 'asyncEnd', 'error'].map((event) => channel[event]);
    Object.defineProperty(channel, 'hasSubscribers', { get: () => parts.some((part) => part.hasSubscribers) });
  }
  return channel;
}

const connect = tracingChannel('amqplib:connect');
const publish = tracingChannel('amqplib:publish');
const deliver = tracingChannel('amqplib:deliver');
const rpc = tracingChannel('amqplib:rpc');
const connectionBlocked = dc.channel('amqplib:connection:blocked');
const connectionUnblocked = dc.channel('amqplib:connection:unblocked');
const connectionClose = dc.channel('amqplib:connection:close');
const channelError = dc.channel('amqplib:channel:error');

// Runs `start(callback)`, traced on `channel` with `context`: start and end around it, then
// asyncStart and asyncEnd around `callback(err, result)` (error first, if there is one), in
// the stores bound to asyncStart. Returns what `start` returns.
function traceCallback(channel, context, start, callback) {
  return channel.traceCallback(start, 0, context, undefined, callback);
}

// An RPC's method as the protocol names it: 'queue.declare', 'basic.recover-async'.
function rpcName(id) {
  const [, klass, method] = /^([A-Z][a-z]*)(.*)$/.exec(methodName(id));
  return `${klass.toLowerCase()}.${method.replace(/(?!^)[A-Z]/g, (c) => `-${c}`).toLowerCase()}`;
}

// What every context says of the connection.
function serverOf(connection) {
  return { system: SYSTEM, serverAddress: connection.serverAddress, serverPort: connection.serverPort };
}

// The properties a traced publish sends: objects of its own whose prototypes are the caller's
// options and headers, so that everything the caller's objects give, inherited or own, is read
// as an untraced publish reads it, and what a subscriber sets lands on the copies alone. Being
// observed never changes a message. Headers that are no object are left for the encoder to
// refuse, as it does untraced.
function publishContext(channel, exchange, routingKey, content, options, confirm) {
  const properties = Object.create(isObject(options) ? options : null);
  const headers = isObject(options) ? options.headers : undefined;
  properties.headers = isObject(headers) ? Object.create(headers) : headers == null ? {} : headers;
  return {
    ...serverOf(channel.connection),
    destination: exchange,
    routingKey,
    properties,
    messageId: properties.messageId,
    conversationId: properties.correlationId,
    bodySize: content?.length,
    channel: channel.ch,
    confirm,
  };
}

function isObject(value) {
  return (typeof value === 'object' && value !== null) || typeof value === 'function';
}

function deliverContext(channel, queue, message) {
  const { fields, properties } = message;
  return {
    ...serverOf(channel.connection),
    queue,
    consumerTag: fields.consumerTag,
    destination: fields.exchange,
    routingKey: fields.routingKey,
    redelivered: fields.redelivered,
    deliveryTag: fields.deliveryTag,
    messageId: properties.messageId,
    conversationId: properties.correlationId,
    bodySize: message.content.length,
    channel: channel.ch,
    message,
  };
}

module.exports = {
  connect,
  publish,
  deliver,
  rpc,
  connectionBlocked,
  connectionUnblocked,
  connectionClose,
  channelError,
  SYSTEM,
  traceCallback,
  serverOf,
  rpcName,
  publishContext,
  deliverContext,
};
