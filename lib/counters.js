'use strict';
// Counters a service can read without a tracer (issue 28), per connection and summed over the
// process. What accumulates is counted as it happens, by the native core (frames; the native
// socket's bytes, reads and writes) or by a plain increment in lib/incoming.js and
// lib/outgoing.js (messages; a stream's reads and writes): a snapshot object is made only when
// one is asked for.

// Totals that only grow; the rest (confirmsOutstanding, writeBufferSize, lastHeartbeatAt) say
// how things are now.
const CUMULATIVE = [
  'framesReceived', 'framesSent', 'bytesReceived', 'bytesSent', 'reads', 'writes',
  'messagesPublished', 'messagesDelivered', 'messagesAcked',
];

// Open connections, and what the closed ones had counted.
const open = new Set();
const closedTotals = Object.fromEntries(CUMULATIVE.map((name) => [name, 0]));

function opened(connection) {
  open.add(connection);
}

// The connection is over: its counters are kept as they stand (the native socket that counted
// its bytes goes with it) and added to the process's.
function closed(connection) {
  if (!open.delete(connection)) return;
  const last = countersOf(connection);
  connection.lastCounters = last;
  for (const name of CUMULATIVE) closedTotals[name] += last[name];
}

function confirmsOutstanding(connection) {
  let waiting = 0;
  for (let i = 1; i < connection.channels.length; i++) {
    const unconfirmed = connection.channels[i]?.channel?.unconfirmed;
    if (unconfirmed) waiting += unconfirmed.outstanding; // not those confirmed out of order
  }
  return waiting;
}

// A snapshot of one connection's counters.
function countersOf(connection) {
  if (connection.lastCounters) return { ...connection.lastCounters, confirmsOutstanding: 0, writeBufferSize: 0 };
  const { session, stream, native, incoming, outgoing } = connection;
  return {
    framesReceived: session.framesReceived,
    framesSent: session.framesSent,
    bytesReceived: (native ? session.socketBytesRead : stream.bytesRead) || 0,
    bytesSent: (native ? session.socketBytesWritten : stream.bytesWritten) || 0,
    reads: native ? session.socketReads : incoming.reads,
    writes: native ? session.socketWrites : outgoing.writes,
    messagesPublished: outgoing.published,
    messagesDelivered: incoming.delivered,
    messagesAcked: outgoing.acked,
    confirmsOutstanding: confirmsOutstanding(connection),
    writeBufferSize: session.pendingOutput + (native ? 0 : stream.writableLength || 0),
    lastHeartbeatAt: connection.lastHeartbeatAt,
  };
}

// The process's: every connection's totals (closed ones' included), what the open ones wait
// for and hold now, the latest heartbeat any of them saw, and how many are open.
function processCounters() {
  const totals = { ...closedTotals, confirmsOutstanding: 0, writeBufferSize: 0, lastHeartbeatAt: null, connections: open.size };
  for (const connection of open) {
    const each = countersOf(connection);
    for (const name of CUMULATIVE) totals[name] += each[name];
    totals.confirmsOutstanding += each.confirmsOutstanding;
    totals.writeBufferSize += each.writeBufferSize;
    if (each.lastHeartbeatAt !== null && (totals.lastHeartbeatAt === null || each.lastHeartbeatAt > totals.lastHeartbeatAt)) {
      totals.lastHeartbeatAt = each.lastHeartbeatAt;
    }
  }
  return totals;
}

module.exports = { opened, closed, countersOf, processCounters };
