'use strict';

// Callback API entry point: `require('amqplib-rs/callback_api')`.

const { connect: openConnection } = require('./lib/connect');
const { CallbackModel } = require('./lib/callback_model');
const recovery = require('./lib/recovery');
const { atNode, nodesOf, withHandshakeTimeout } = require('./lib/nodes');
const credentials = require('./lib/credentials');
const { IllegalOperationError } = require('./lib/error');
const { processCounters } = require('./lib/counters');

function openCallbackModel(url, socketOptions, cb) {
  openConnection(url, socketOptions, (err, connection) => {
    if (err === null) cb(null, new CallbackModel(connection));
    else cb(err);
  });
}

// connect(url, socketOptions, cb), connect(url, cb) or connect(cb).
// Without a URL, amqp://localhost is used; a list of nodes' URLs is tried in turn (lib/nodes.js). A URL with a protocol other
// than amqp: or amqps: throws. With a `recovery` option, the callback
// receives a RecoveringCallbackModel, which is also returned.
function connect(url, socketOptions, cb) {
  let target = url;
  let options = socketOptions;
  let callback = cb;
  if (typeof target === 'function') {
    callback = target;
    target = undefined;
    options = undefined;
  } else if (typeof options === 'function') {
    callback = options;
    options = undefined;
  }

  const { connectionOptions, recovery: recoveryOptions } = recovery.splitConnectionOptions(options);
  if (recovery.recoveryEnabled(recoveryOptions)) {
    const nodeOptions = withHandshakeTimeout(connectionOptions);
    const openModel = (node, index, auth) =>
      new Promise((resolve, reject) => {
        openCallbackModel(node, atNode(nodeOptions, index, auth), (err, model) => (err ? reject(err) : resolve(model)));
      });
    return recovery.connectWithRecoveryCallback(openModel, recoveryOptions, callback, nodesOf(target), nodeOptions.timeout);
  }

  openCallbackModel(target, connectionOptions, typeof callback === 'function' ? callback : () => {});
  return undefined;
}

// counters(): every connection's counters summed over the process (lib/counters.js).
module.exports = { connect, credentials, IllegalOperationError, counters: processCounters };
