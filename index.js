'use strict';

// Promise API entry point: `require('amqplib-rs')`.

const { connect: openConnection } = require('./lib/connect');
const { ChannelModel } = require('./lib/channel_model');
const recovery = require('./lib/recovery');
const { atNode, nodesOf, withHandshakeTimeout } = require('./lib/nodes');
const credentials = require('./lib/credentials');
const { IllegalOperationError } = require('./lib/error');
const { processCounters } = require('./lib/counters');

function openChannelModel(url, socketOptions) {
  return new Promise((resolve, reject) => {
    // A bad URL throws synchronously inside this executor, which turns it
    // into a rejection.
    openConnection(url, socketOptions, (err, connection) => {
      if (err) reject(err);
      else resolve(new ChannelModel(connection));
    });
  });
}

// connect([url[, socketOptions]]) -> Promise<ChannelModel>; with a
// `recovery` option, a Promise of a RecoveringPromiseModel instead. `url` may be a list of
// nodes' URLs (lib/nodes.js).
function connect(url, socketOptions) {
  const { connectionOptions, recovery: recoveryOptions } = recovery.splitConnectionOptions(socketOptions);
  if (recovery.recoveryEnabled(recoveryOptions)) {
    let nodes;
    try {
      nodes = nodesOf(url);
    } catch (err) {
      return Promise.reject(err);
    }
    const nodeOptions = withHandshakeTimeout(connectionOptions);
    const openModel = (node, index, auth) => openChannelModel(node, atNode(nodeOptions, index, auth));
    return recovery.connectWithRecoveryPromise(openModel, recoveryOptions, nodes, nodeOptions.timeout);
  }
  return openChannelModel(url, connectionOptions);
}

// counters(): every connection's counters summed over the process (lib/counters.js).
module.exports = { connect, credentials, IllegalOperationError, counters: processCounters };
