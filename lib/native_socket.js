// @ts-check: its call of the native entry point is checked against lib/native.d.ts (see
// tsconfig.lib.json).
'use strict';
// The amqp:// transport: a TCP socket read and written by the native session itself, on
// Node's own event loop (src/driver.rs, src/bindings/socket.rs). It offers the connection the
// parts of a net.Socket it uses; what it reads arrives already parsed, as the event tape of
// each read (`read()` gives those, in order).

const EventEmitter = require('node:events');
const dns = require('node:dns');
const net = require('node:net');
const util = require('node:util');
const native = require('./native');
const nativeTls = require('./native_tls');

const { SOCKET_CONNECT, SOCKET_DATA, SOCKET_DRAIN, SOCKET_END, SOCKET_ERROR, SOCKET_CLOSE } = require('./boundary');

// An error shaped as Node's own socket errors are: `connect ECONNREFUSED 127.0.0.1:5672`.
function systemError(errno, syscall, address, port) {
  const code = util.getSystemErrorName(-errno);
  const where = syscall === 'connect' ? ` ${address}:${port}` : '';
  const err = new Error(`${syscall} ${code}${where}`);
  Object.assign(err, { errno: -errno, code, syscall });
  if (syscall === 'connect') Object.assign(err, { address, port });
  return err;
}

// What tls.connect says of a socket that ends before its handshake is done.
function handshakeCut({ path, host, port, localAddress }) {
  const err = new Error('Client network socket disconnected before secure TLS connection was established');
  return Object.assign(err, { code: 'ECONNRESET', path, host, port, localAddress });
}

// net.connect options the native socket does not implement: given any of them, amqp:// goes
// through net.connect instead, so that each is honoured as amqplib honours it.
const NET_ONLY_OPTIONS = [
  'lookup', 'localAddress', 'localPort', 'hints', 'path', 'fd', 'signal', 'onread', 'blockList',
  'allowHalfOpen', 'autoSelectFamilyAttemptTimeout',
];

// Whether this runtime runs libuv's poll as Node does, which the native socket drives
// (src/driver.rs: it relies on a readable socket being reported again on every turn while
// it stays readable). Bun exports uv_poll_* as stubs that abort the process; Deno's poll
// stops reporting a socket after its first reads. Both get the stream path.
const RUNTIME_POLLS_AS_NODE = !process.versions.bun && !process.versions.deno;

// Whether this build and this runtime can drive the native socket at all.
function nativeSocketWorks() {
  return RUNTIME_POLLS_AS_NODE && native.hasNativeSocket();
}

class NativeSocket extends EventEmitter {
  constructor() {
    super();
    this.session = new native.NativeConnection();
    // The handle the per-message and per-read native calls take (src/bindings/hot.rs).
    /** @type {import('./native').Handle} */
    this.handle = this.session.handle();
    this.received = [];
    // What the last read() took besides its tape.
    this.objects = undefined;
    this.slab = undefined;
    this.open = false;
    this.destroyed = false;
    this.timeout = null;
    this._host = null;
    // amqps://: the connect's options, and what the addon is given of them (see secure()).
    this.tlsOptions = null;
    this.tlsSettings = undefined;
    this.writableLength = 0; // what waits is in the session, which the connection asks itself
    this.onEvent = this.onEvent.bind(this);
  }

  // Whether amqp:// (or amqps://) with these socket options takes the native socket: where
  // the platform has one (see build.rs) and the runtime is Node, unless
  // AMQPLIB_RS_TRANSPORT=stream asks for Node's net.connect and tls.connect,
  // or an option only net.connect honours is given (a custom lookup, a local address...), or
  // for amqps:// one only tls.connect honours (lib/native_tls.js).
  // A port or timeout net.connect would refuse goes to net.connect too, which refuses it as
  // amqplib reports it.
  static serves(options, protocol = 'amqp:') {
    if (!nativeSocketWorks() || process.env.AMQPLIB_RS_TRANSPORT === 'stream') return false;
    if (protocol === 'amqps:' && !nativeTls.serves(options)) return false;
    const { port = 5672, timeout } = options;
    if (!/^\d{1,5}$/.test(typeof port === 'number' || typeof port === 'string' ? String(port) : '') || Number(port) > 65535) return false;
    if (timeout !== undefined && !(typeof timeout === 'number' && timeout >= 0 && timeout < 2 ** 31)) return false;
    return NET_ONLY_OPTIONS.every((name) => options[name] === undefined);
  }

  // As net.connect: resolves `host`, connects to its addresses one after the other until
  // one answers (as net.connect does with autoSelectFamily, Node's default), calls
  // `onConnect`. For amqps://, as tls.connect: `onConnect` once the handshake is done and
  // the server's certificate checked ('secureConnect').
  static connect(options, onConnect, protocol = 'amqp:') {
    const socket = new NativeSocket();
    if (protocol === 'amqps:') socket.secure(options);
    if (onConnect) socket.once(socket.tlsOptions ? 'secureConnect' : 'connect', onConnect);
    socket.start(options);
    return socket;
  }

  secure(options) {
    this.tlsOptions = options;
    this.tlsSettings = nativeTls.settings(options);
    this.encrypted = true;
    this.authorized = false;
    this.authorizationError = null;
  }

  start({ host = 'localhost', port = 5672, family = 0, autoSelectFamily }) {
    this._host = net.isIP(host) ? null : host; // net.Socket names only a host it looks up
    dns.lookup(host, { family, all: true }, (err, addresses) => {
      if (this.destroyed) return;
      if (err) return this.fail(err);
      this.port = Number(port);
      this.untried = addresses.map((a) => a.address);
      if (autoSelectFamily === false) this.untried.length = 1;
      this.connectErrors = [];
      this.connectNext();
    });
  }

  // The peer's address, port and family while connected, as net.Socket has them, and the host
  // it was asked for as `_host` (APM agents read them from `connection.stream`: dd-trace tags
  // out.host with `_host`).
  get remoteAddress() {
    return this.open ? this.address : undefined;
  }

  get remotePort() {
    return this.open ? this.port : undefined;
  }

  get remoteFamily() {
    if (!this.open) return undefined;
    return net.isIPv6(this.address) ? 'IPv6' : 'IPv4';
  }

  // Tries the next address; when none is left, fails with what each attempt met (one error,
  // or an AggregateError of them all, as net.connect reports).
  connectNext() {
    const address = this.untried.shift();
    this.address = address;
    // The async context is made first, on its own: making it runs async_hooks' init hooks,
    // which connectSocket must not run while it has the connection in hand.
    let errno;
    try {
      errno = this.session.connectSocket(address, this.port, this.onEvent, native.socketAsyncContext(), this.tlsSettings);
    } catch (err) {
      return this.fail(err); // TLS settings that cannot work (a key rustls cannot read, say)
    }
    if (errno !== 0) this.connectFailed(systemError(errno, 'connect', address, this.port));
  }

  connectFailed(err) {
    this.connectErrors.push(err);
    // The next attempt waits for the poll callback that reported this one to close its socket.
    if (this.untried.length > 0) return setImmediate(() => this.destroyed || this.connectNext());
    const errors = this.connectErrors;
    if (errors.length === 1) return this.fail(errors[0]);
    const aggregate = /** @type {AggregateError & { code?: string }} */ (new AggregateError(errors));
    aggregate.code = errors[0].code;
    this.fail(aggregate);
  }

  onEvent(kind, a, b, c) {
    switch (kind) {
      case SOCKET_CONNECT:
        this.open = true;
        this.touch();
        if (this.tlsOptions) this.secureConnected();
        else this.emit('connect');
        break;
      case SOCKET_DATA:
        this.touch();
        this.received.push(a, b, c); // tape, objects, slab
        this.emit('readable');
        break;
      case SOCKET_DRAIN:
        this.emit('drain');
        break;
      case SOCKET_END:
        // Before the TLS handshake is done, an end is a failure, as Node's TLS socket has it
        // (a node going down as the client connects): the connect waits for no 'connect'.
        if (this.tlsOptions && !this.open) return this.fail(handshakeCut(this.tlsOptions));
        this.open = false;
        this.session.destroySocket();
        this.emit('end');
        this.closed();
        break;
      case SOCKET_ERROR:
        this.open = false;
        if (a === 0) this.fail(nativeTls.tlsError(b, this.session.tlsFailure())); // errno 0: TLS's
        else if (b === 'connect') this.connectFailed(systemError(a, b, this.address, this.port));
        else this.fail(systemError(a, b, this.address, this.port));
        break;
      case SOCKET_CLOSE:
        this.closed();
        break;
    }
  }

  // The handshake is done (src/tls.rs). As Node's TLS socket: a chain that did not verify
  // (taken, under rejectUnauthorized: false) is the failure; else the name is checked. Then
  // 'connect' and 'secureConnect'; a failure destroys the socket with its error unless
  // rejectUnauthorized is false, and is `authorizationError` either way.
  secureConnected() {
    const options = /** @type {any} */ (this.tlsOptions);
    const chain = this.session.chainFailure();
    /** @type {any} */
    let failure = chain ? nativeTls.tlsError(chain[0], chain[1]) : null;
    try {
      failure ??= nativeTls.checkIdentity(options, this.session.peerCertificate());
    } catch (err) {
      failure = err;
    }
    this.authorized = failure === null;
    this.authorizationError = failure && (failure.code || failure.message);
    if (failure && options.rejectUnauthorized !== false) return this.fail(failure);
    this.emit('connect');
    this.emit('secureConnect');
  }

  // As net.Socket's: every byte read, whole frames or not.
  get bytesRead() {
    return this.destroyed ? 0 : this.session.socketBytesRead;
  }

  // The tape of the next read, or null; its objects and slab are then `objects` and `slab`
  // (the queue holds the three one after the other, so that a read costs no array).
  read() {
    const queue = this.received;
    if (queue.length === 0) return null;
    const tape = queue.shift();
    this.objects = queue.shift();
    this.slab = queue.shift();
    return tape;
  }

  // Writes what the session has queued. False when the rest must wait ('drain' follows).
  flushOutput() {
    const status = native.flushSocket(this.handle);
    if (status < 0) {
      process.nextTick(() => this.fail(systemError(-status, 'write')));
      return true;
    }
    return status === 1;
  }

  setNoDelay(on = true) {
    if (this.open) this.session.setNoDelay(on);
    return this;
  }

  setKeepAlive(on = false, delayMs = 0) {
    if (this.open) this.session.setKeepAlive(on, Math.floor(delayMs / 1000));
    return this;
  }

  // As net's: 'timeout' after `ms` without activity; 0 turns it off.
  setTimeout(ms, onTimeout) {
    if (onTimeout) this.once('timeout', onTimeout);
    this.timeoutMs = ms;
    this.touch();
    return this;
  }

  touch() {
    if (this.timeout) clearTimeout(this.timeout);
    this.timeout = this.timeoutMs > 0 ? setTimeout(() => this.emit('timeout'), this.timeoutMs) : null;
  }

  // Closes once everything queued is written.
  end() {
    if (this.destroyed) return this;
    if (this.session.endSocket()) process.nextTick(() => this.closed());
    return this;
  }

  destroy(err) {
    if (this.destroyed) return this;
    this.session.destroySocket();
    if (err) process.nextTick(() => this.emit('error', err));
    process.nextTick(() => this.closed());
    return this;
  }

  fail(err) {
    this.session.destroySocket();
    this.emit('error', err);
    this.closed();
  }

  closed() {
    if (this.destroyed) return;
    this.destroyed = true;
    this.open = false;
    if (this.timeout) clearTimeout(this.timeout);
    this.session.release();
    this.emit('close');
  }
}

module.exports = { NativeSocket, nativeSocketWorks };
