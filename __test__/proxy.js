'use strict';
// A small TCP proxy on loopback for the fault tests: it sits between a client and the broker
// (AMQP_URL's) and forwards bytes both ways, until told otherwise:
//
//   cutNow()              destroy both sides of every link at once
//   cutAfter(dir, n)      forward exactly n more bytes in direction dir ('up' is client to
//                         broker, 'down' broker to client), then destroy both sides: with a
//                         small n the cut falls inside a frame
//   stall()               stop forwarding both ways (and stop reading, so TCP pushes back)
//   slow(k, tickMs)       forward at most k bytes per direction per tick, reading only as much
//                         as it can pass on, so the sender's writes go partial
//   resume()              back to forwarding as fast as the sockets allow
//   close()               stop listening and destroy every link
//
// The controls apply to every open link and to links made later. Counters (bytes, writes,
// largest write, cuts) are in `stats`, per link in `link.stats`.

const net = require('node:net');
const EventEmitter = require('node:events');
const { defaultPort } = require('../lib/nodes');

const DIRECTIONS = ['up', 'down'];
// Bytes queued in the proxy for one direction before it stops reading the source.
const QUEUE_LIMIT = 64 * 1024;

class Link extends EventEmitter {
  constructor(proxy, client) {
    super();
    this.proxy = proxy;
    this.client = client;
    this.server = net.connect({ host: proxy.target.host, port: proxy.target.port });
    this.closed = false;
    this.serverConnected = false;
    this.queue = { up: [], down: [] };
    this.queued = { up: 0, down: 0 };
    this.ended = { up: false, down: false }; // the source said end; pass it on once drained
    this.cutAt = { up: null, down: null }; // bytes still to forward before a cut
    this.stats = { up: 0, down: 0, writes: { up: 0, down: 0 }, largestWrite: { up: 0, down: 0 } };

    this.server.on('connect', () => {
      this.serverConnected = true;
      this.emit('connect');
      this.pump('up');
    });
    this.wire('up', client, this.server);
    this.wire('down', this.server, client);
  }

  source(dir) {
    return dir === 'up' ? this.client : this.server;
  }

  sink(dir) {
    return dir === 'up' ? this.server : this.client;
  }

  wire(dir, from, to) {
    from.on('data', (chunk) => {
      this.queue[dir].push(chunk);
      this.queued[dir] += chunk.length;
      this.pump(dir);
    });
    from.on('end', () => {
      this.ended[dir] = true;
      this.pump(dir);
    });
    // A side gone without an orderly end (a reset, or destroyed) takes the other down too;
    // during a stall that waits, as nothing at all passes a stalled link.
    from.on('error', () => this.lost());
    from.on('close', () => {
      if (!this.ended[dir]) this.lost();
    });
    to.on('drain', () => this.pump(dir));
  }

  lost() {
    if (this.proxy.mode === 'stall') this.lostDuringStall = true;
    else this.destroy();
  }

  // Forwards what may go now in direction `dir`, as the proxy's mode allows.
  pump(dir) {
    if (this.lostDuringStall && this.proxy.mode !== 'stall') return this.destroy();
    if (this.closed) return;
    const proxy = this.proxy;
    const from = this.source(dir);
    const to = this.sink(dir);
    if (proxy.mode === 'stall' || (dir === 'up' && !this.serverConnected)) {
      from.pause();
      return;
    }
    let budget = proxy.mode === 'slow' ? this.budget[dir] : Infinity;
    while (this.queue[dir].length > 0 && budget > 0 && !this.closed) {
      if (to.writableNeedDrain) break;
      let chunk = this.queue[dir][0];
      let take = Math.min(chunk.length, budget);
      const cut = this.cutAt[dir];
      if (cut !== null) take = Math.min(take, cut);
      if (take < chunk.length) {
        this.queue[dir][0] = chunk.subarray(take);
        chunk = chunk.subarray(0, take);
      } else {
        this.queue[dir].shift();
      }
      this.queued[dir] -= take;
      budget -= take;
      if (take > 0) this.write(dir, to, chunk);
      if (cut !== null) {
        this.cutAt[dir] = cut - take;
        if (this.cutAt[dir] === 0) {
          // What was written goes out first; then both sides go at once.
          const splitAt = this.stats[dir];
          to.write(Buffer.alloc(0), () => this.cut(`${dir} after ${splitAt} bytes`, this.queued[dir]));
          this.cutAt[dir] = null;
          this.closed = true; // nothing more is forwarded from here on
          return;
        }
      }
    }
    if (proxy.mode === 'slow') this.budget[dir] = budget;
    // Read more only when there is room to hold it.
    if (this.queued[dir] < QUEUE_LIMIT && (proxy.mode !== 'slow' || this.queued[dir] < proxy.slowBytes)) from.resume();
    else from.pause();
    if (this.queue[dir].length === 0 && this.ended[dir] && !to.writableEnded) to.end();
  }

  write(dir, to, chunk) {
    this.stats[dir] += chunk.length;
    this.stats.writes[dir] += 1;
    if (chunk.length > this.stats.largestWrite[dir]) this.stats.largestWrite[dir] = chunk.length;
    this.proxy.stats[dir] += chunk.length;
    to.write(chunk);
  }

  // Gives each direction its allowance for one tick of a slow link.
  tick() {
    this.budget = { up: this.proxy.slowBytes, down: this.proxy.slowBytes };
    for (const dir of DIRECTIONS) this.pump(dir);
  }

  cut(how, dropped = 0) {
    this.proxy.stats.cuts += 1;
    this.proxy.cutLog.push({ how, dropped });
    this.destroy();
  }

  destroy() {
    if (this.destroyedBoth) return;
    this.destroyedBoth = true;
    this.closed = true;
    this.client.destroy();
    this.server.destroy();
    this.proxy.links.delete(this);
    this.emit('close');
  }
}

// The broker the tests use: AMQP_URL (default amqp://127.0.0.1), whose host and port the
// proxy forwards to, and whose credentials and vhost its url() keeps.
const BROKER = new URL(process.env.AMQP_URL || 'amqp://127.0.0.1');
const BROKER_HOST = BROKER.hostname.replace(/^\[(.*)\]$/, '$1') || '127.0.0.1';
const BROKER_PORT = Number(BROKER.port) || defaultPort(BROKER.protocol);

class Proxy extends EventEmitter {
  constructor({ host = BROKER_HOST, port = BROKER_PORT } = {}) {
    super();
    this.target = { host, port };
    this.links = new Set();
    this.mode = 'pass';
    this.slowBytes = Infinity;
    this.timer = null;
    this.stats = { up: 0, down: 0, links: 0, cuts: 0 };
    this.cutLog = [];
    this.server = net.createServer((client) => {
      const link = new Link(this, client);
      link.budget = { up: this.slowBytes, down: this.slowBytes };
      this.links.add(link);
      this.stats.links += 1;
      this.lastLink = link;
      this.emit('link', link);
    });
  }

  // Listens on an ephemeral loopback port; resolves with it.
  listen() {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(0, '127.0.0.1', () => {
        this.port = this.server.address().port;
        resolve(this.port);
      });
    });
  }

  // AMQP_URL's scheme, user and vhost, through the proxy (guest, as amqplib takes it, when it
  // has none). Over amqps:// the proxy passes TLS records: the faults fall inside them.
  url(query = '') {
    const user = BROKER.username ? `${BROKER.username}:${BROKER.password}` : 'guest:guest';
    return `${BROKER.protocol}//${user}@127.0.0.1:${this.port}${BROKER.pathname}${query ? `?${query}` : ''}`;
  }

  // Resolves with the next link made (or the current one, if `existing` and there is one).
  nextLink() {
    return new Promise((resolve) => this.once('link', resolve));
  }

  cutNow() {
    for (const link of [...this.links]) link.cut('now');
  }

  cutAfter(dir, bytes) {
    if (!DIRECTIONS.includes(dir)) throw new TypeError(`direction is 'up' or 'down', not ${dir}`);
    for (const link of this.links) {
      link.cutAt[dir] = bytes;
      link.pump(dir);
    }
  }

  stall() {
    this.setMode('stall');
  }

  slow(bytesPerTick, tickMs = 1) {
    this.slowBytes = bytesPerTick;
    this.setMode('slow');
    this.timer = setInterval(() => {
      for (const link of this.links) link.tick();
    }, tickMs);
  }

  resume() {
    this.slowBytes = Infinity;
    this.setMode('pass');
  }

  setMode(mode) {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    this.mode = mode;
    for (const link of this.links) {
      link.budget = { up: this.slowBytes, down: this.slowBytes };
      for (const dir of DIRECTIONS) link.pump(dir);
    }
  }

  close() {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    for (const link of [...this.links]) link.destroy();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

module.exports = { Proxy };
