'use strict';

// Opening a connection: turn the URL (string or object) and socket options
// a user gives to `connect()` into socket settings plus the fields of the
// opening handshake (StartOk, TuneOk, Open), open the socket, and hand it
// to a Connection to run the handshake.
//
// Parsing follows amqplib exactly, quirks included, since applications
// rely on it: e.g. credentials in a URL are decoded with `unescape`, the
// vhost with querystring's unescape, and numeric query options are
// `parseInt`ed without validation (the encoder then rejects NaN with
// "Field 'frameMax' is the wrong type").

const net = require('node:net');
const { NativeSocket } = require('./native_socket');
const QS = require('node:querystring');
const credentials = require('./credentials');
const { attemptAuthOf, checkNodeList, defaultPort, describeNode, nodeIndexOf, openFirst, withHandshakeTimeout } = require('./nodes');
const tracing = require('./tracing');
const pkg = require('../package.json');

const DEFAULT_FRAME_MAX = 131072; // RabbitMQ 4.1 refuses smaller maxima

// Sent in ConnectionStartOk. The capabilities tell the broker which
// extensions we understand (it won't send e.g. basic.nack or
// connection.blocked to a client that doesn't claim them).
const CLIENT_PROPERTIES = Object.freeze({
  product: 'amqplib-rs',
  version: pkg.version,
  platform: `Node.JS ${process.version}`,
  ...(pkg.homepage ? { information: pkg.homepage } : {}),
  capabilities: Object.freeze({
    publisher_confirms: true,
    exchange_exchange_bindings: true,
    'basic.nack': true,
    consumer_cancel_notify: true,
    'connection.blocked': true,
    authentication_failure_close: true,
  }),
});

// Own enumerable properties only: tls.connect looks at `Object.keys` of
// its options, so inherited settings would be silently ignored.
function shallowCopy(obj) {
  return Object.assign({}, obj);
}

function intOr(value, fallback) {
  return value === undefined ? fallback : parseInt(value, 10);
}

// maxFrameSize as amqplib 2.3 reads it: digits only (from a URL query or an object), else
// NaN, which the connection refuses with a TypeError; absent means the default.
function maxFrameSizeOrUndefined(value) {
  if (value == null) return undefined;
  return /^\d+$/.test(String(value)) ? Number(value) : NaN;
}

// User-supplied client properties are laid over ours key by key (a user
// `capabilities` replaces ours as a whole).
function clientProperties(extra) {
  return Object.assign({}, CLIENT_PROPERTIES, extra);
}

// `query` holds locale/channelMax/frameMax/heartbeat, as strings (from a
// URL query) or as given in a URL object.
function handshakeFields(vhost, query, creds, extraClientProperties) {
  return {
    // ConnectionStartOk
    clientProperties: clientProperties(extraClientProperties),
    mechanism: creds.mechanism,
    response: creds.response(),
    locale: query.locale || 'en_US',
    // ConnectionTuneOk: 0 means "no limit of ours"; a null heartbeat means
    // "no preference", leaving the choice to the server.
    channelMax: intOr(query.channelMax, 0),
    frameMax: intOr(query.frameMax, DEFAULT_FRAME_MAX),
    heartbeat: query.heartbeat !== undefined && query.heartbeat !== null ? intOr(query.heartbeat, 0) : null,
    // Not sent: the largest frame payload accepted from the server.
    maxFrameSize: maxFrameSizeOrUndefined(query.maxFrameSize),
    // ConnectionOpen
    virtualHost: vhost ? QS.unescape(vhost) : '/',
    capabilities: '',
    insist: 0,
  };
}

// Credentials given in a parsed URL. Only when both user name and password
// are empty do we fall back to guest/guest, so "amqp://:pw@host" means an
// empty user name.
function credentialsFromUrl(parts) {
  if (parts.username === '' && parts.password === '') {
    return credentials.plain('guest', 'guest');
  }
  const user = parts.username ? unescape(parts.username) : '';
  const passwd = parts.password ? unescape(parts.password) : '';
  return credentials.plain(user, passwd);
}

// What an attempt authenticates with: a recovering model's credentials for it (its hook's),
// else `given` (the socket options' or the URL's) with the model's updated secret, if any.
function attemptCredentials(given, auth) {
  if (auth?.credentials) return auth.credentials;
  return auth?.secret === undefined ? given : credentials.withSecret(given, auth.secret);
}

// SNI needs a host name; setting it to an IP address is an error in
// recent Node.js versions. An explicit servername is left alone.
function setServername(sockopts, host) {
  if (!sockopts.servername && !net.isIP(host)) sockopts.servername = host;
}

// URL given as an object: { protocol, hostname, port, username, password,
// locale, frameMax, channelMax, heartbeat, maxFrameSize, vhost }.
function planFromObject(url, sockopts, extraClientProperties, auth) {
  const protocol = `${url.protocol || 'amqp'}:`;
  sockopts.host = url.hostname;
  setServername(sockopts, url.hostname);
  sockopts.port = url.port || defaultPort(protocol);

  // Default to guest/guest only if neither is given, as for string URLs.
  const noUserInfo = url.username === undefined && url.password === undefined;
  const user = noUserInfo ? 'guest' : url.username || '';
  const passwd = noUserInfo ? 'guest' : url.password || '';
  const query = {
    locale: url.locale,
    channelMax: url.channelMax,
    frameMax: url.frameMax,
    heartbeat: url.heartbeat,
    maxFrameSize: url.maxFrameSize,
  };
  const creds = attemptCredentials(sockopts.credentials || credentials.plain(user, passwd), auth);
  return { protocol, fields: handshakeFields(url.vhost, query, creds, extraClientProperties) };
}

// Query options may repeat; the first occurrence wins.
function parseQuery(search) {
  const query = QS.parse(search ? search.slice(1) : '');
  for (const key of Object.keys(query)) {
    if (Array.isArray(query[key])) query[key] = query[key][0];
  }
  return query;
}

function planFromString(url, sockopts, extraClientProperties, auth) {
  let parts;
  try {
    parts = new URL(url);
  } catch {
    parts = {}; // reported below as a bad protocol
  }
  const protocol = parts.protocol || '';
  const host = (parts.hostname || '').replace(/^\[|\]$/g, ''); // IPv6 brackets
  sockopts.host = host;
  setServername(sockopts, host);
  sockopts.port = parseInt(parts.port, 10) || defaultPort(protocol);

  const vhost = parts.pathname ? parts.pathname.slice(1) : null;
  const creds = attemptCredentials(sockopts.credentials || credentialsFromUrl(parts), auth);
  return { protocol, fields: handshakeFields(vhost, parseQuery(parts.search), creds, extraClientProperties) };
}

// Everything `connect` needs, worked out from its arguments without any
// I/O: the protocol, the options for net/tls.connect, the handshake
// fields, and the socket tweaks applied once connected.
function prepareConnect(url, socketOptions) {
  const sockopts = shallowCopy(socketOptions || {});
  const target = url || 'amqp://localhost';
  const extraClientProperties = sockopts.clientProperties || {};
  const auth = attemptAuthOf(socketOptions);
  const plan =
    typeof target === 'object'
      ? planFromObject(target, sockopts, extraClientProperties, auth)
      : planFromString(target, sockopts, extraClientProperties, auth);
  return {
    protocol: plan.protocol,
    fields: plan.fields,
    sockopts,
    // On unless asked off: our writes are already one per turn, so Nagle's algorithm only
    // adds delay (with delayed ACKs, tens of ms per round trip); amqplib leaves it on.
    noDelay: sockopts.noDelay === undefined ? true : !!sockopts.noDelay,
    keepAlive: !!sockopts.keepAlive,
    keepAliveDelay: sockopts.keepAliveDelay || 0,
    timeout: sockopts.timeout,
  };
}

// The transport: amqp:// and amqps:// through the native socket where it serves (see
// NativeSocket.serves), else through net.connect and tls.connect.
function openSocket(protocol, sockopts, onConnect) {
  if (protocol === 'amqp:') {
    return NativeSocket.serves(sockopts) ? NativeSocket.connect(sockopts, onConnect) : net.connect(sockopts, onConnect);
  }
  // node:tls is loaded here, on the first amqps:// connection: loading it costs a process
  // about 4.5 MB of resident memory, which amqp:// users would pay for nothing.
  if (protocol === 'amqps:') {
    if (NativeSocket.serves(sockopts, protocol)) return NativeSocket.connect(sockopts, onConnect, protocol);
    return require('node:tls').connect(sockopts, onConnect);
  }
  throw new Error(`Expected amqp: or amqps: as the protocol; got ${protocol}`);
}

// Loaded on first use, so that the parsing above can be loaded (and
// tested) on its own.
function connectionClass() {
  return require('./connection').Connection;
}

function abandon(sock) {
  sock.end();
  sock.destroy();
}

// Open a connection to `url`, or to the first node of a list of them that will (see
// lib/nodes.js); calls `openCallback(null, connection)` or `openCallback(err)`. Throws
// synchronously if a single URL's protocol is neither amqp: nor amqps:, or a list is empty or
// holds anything but URLs. amqplib's signature, the callback last: instrumentation wraps it.
function connect(url, socketOptions, openCallback) {
  if (!Array.isArray(url)) {
    connectToNode(url, socketOptions, openCallback, nodeIndexOf(socketOptions));
    return;
  }
  checkNodeList(url);
  const options = withHandshakeTimeout(socketOptions);
  openFirst(url, (node, cb, index) => connectToNode(node, options, cb, index), openCallback);
}

// One connection attempt, traced on amqplib:connect when subscribed.
function connectToNode(url, socketOptions, openCallback, nodeIndex) {
  const plan = prepareConnect(url, socketOptions);
  if (!tracing.connect.hasSubscribers) {
    openConnection(plan, openCallback);
    return;
  }
  const context = {
    system: tracing.SYSTEM,
    serverAddress: plan.sockopts.host,
    serverPort: plan.sockopts.port,
    vhost: plan.fields.virtualHost,
    node: describeNode(url),
    nodeIndex,
  };
  const attempt = (done) =>
    openConnection(plan, (err, connection) => {
      if (!err) Object.assign(context, { frameMax: connection.frameMax, channelMax: connection.channelMax, heartbeat: connection.heartbeat });
      done(err, connection);
    });
  tracing.traceCallback(tracing.connect, context, attempt, openCallback);
}

// Open a socket and run the AMQP opening handshake over it; calls
// `openCallback(null, connection)` or `openCallback(err)`. Throws
// synchronously if the URL's protocol is neither amqp: nor amqps:.
function openConnection(plan, openCallback) {

  // The socket error, the timeout and the handshake can each report a
  // failure; only the first outcome reaches the caller.
  let settled = false;
  function finish(err, connection) {
    if (settled) return;
    settled = true;
    if (err) openCallback(err);
    else openCallback(null, connection);
  }

  let connected = false;
  let sock = null;

  function onConnect() {
    connected = true;
    sock.setNoDelay(plan.noDelay);
    if (plan.keepAlive) sock.setKeepAlive(true, plan.keepAliveDelay);

    const Connection = connectionClass();
    const connection = new Connection(sock);
    connection.serverAddress = plan.sockopts.host;
    connection.serverPort = plan.sockopts.port;
    connection.open(plan.fields, (err) => {
      // The timeout guards the connection attempt only; heartbeats look
      // after the open connection.
      if (plan.timeout) sock.setTimeout(0);
      if (err === null) {
        finish(null, connection);
      } else {
        // e.g. a refused login: the server won't necessarily hang up.
        abandon(sock);
        finish(err);
      }
    });
  }

  sock = openSocket(plan.protocol, plan.sockopts, onConnect);

  if (plan.timeout) {
    sock.setTimeout(plan.timeout, () => {
      abandon(sock);
      finish(new Error('connect ETIMEDOUT'));
    });
  }

  // Errors after the socket is up belong to the Connection.
  sock.once('error', (err) => {
    if (!connected) finish(err);
  });
}

module.exports = { connect, credentialsFromUrl, prepareConnect, CLIENT_PROPERTIES };
