'use strict';
// A local certificate authority, a server certificate it signed (for 127.0.0.1 and localhost)
// and a client certificate it signed: what a TLS listener of the tests presents, what a client
// is told to trust, and what a client presents to a listener that asks for a certificate. Also
// another CA of the same name and another key, which signed nothing: a CA made again.
// Made with openssl at test time; where the tests' platform has none (Windows Node under Wine),
// the host makes them (scripts/emulated.js) and AMQPLIB_RS_TEST_CERTIFICATES names their
// directory.

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync } = require('node:child_process');

const FILES = { ca: 'ca.pem', key: 'server.key', cert: 'server.pem', clientKey: 'client.key', clientCert: 'client.pem', otherCa: 'other-ca.pem' };

let made = null;

// { ca, key, cert, clientKey, clientCert, otherCa } as PEM buffers, made once per process.
function tlsCertificates() {
  if (made) return made;
  let dir = process.env.AMQPLIB_RS_TEST_CERTIFICATES;
  const temporary = !dir;
  if (temporary) dir = makeTlsCertificates(fs.mkdtempSync(path.join(os.tmpdir(), 'amqplib-rs-tls-')));
  made = Object.fromEntries(Object.entries(FILES).map(([name, file]) => [name, fs.readFileSync(path.join(dir, file))]));
  if (temporary) fs.rmSync(dir, { recursive: true, force: true });
  return made;
}

// Writes the files FILES names into `dir`, valid for `days`; returns it.
function makeTlsCertificates(dir, days = 2) {
  const file = (name) => path.join(dir, name);
  const openssl = (...args) => execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'] });
  const ecKey = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  fs.mkdirSync(dir, { recursive: true });
  openssl('req', '-x509', ...ecKey, '-keyout', file('ca.key'), '-out', file(FILES.ca), '-subj', '/CN=amqplib-rs test CA', '-days', String(days));
  openssl('req', ...ecKey, '-keyout', file(FILES.key), '-out', file('server.csr'), '-subj', '/CN=localhost');
  fs.writeFileSync(file('server.ext'), 'subjectAltName=DNS:localhost,IP:127.0.0.1\n');
  openssl('x509', '-req', '-in', file('server.csr'), '-CA', file(FILES.ca), '-CAkey', file('ca.key'), '-CAcreateserial',
    '-out', file(FILES.cert), '-days', String(days), '-extfile', file('server.ext'));
  openssl('req', ...ecKey, '-keyout', file(FILES.clientKey), '-out', file('client.csr'), '-subj', '/CN=amqplib-rs test client');
  fs.writeFileSync(file('client.ext'), 'extendedKeyUsage=clientAuth\n'); // and so X.509 v3, as webpki requires
  openssl('x509', '-req', '-in', file('client.csr'), '-CA', file(FILES.ca), '-CAkey', file('ca.key'), '-CAcreateserial',
    '-out', file(FILES.clientCert), '-days', String(days), '-extfile', file('client.ext'));
  openssl('req', '-x509', ...ecKey, '-keyout', file('other-ca.key'), '-out', file(FILES.otherCa), '-subj', '/CN=amqplib-rs test CA', '-days', String(days));
  return dir;
}

module.exports = { tlsCertificates, makeTlsCertificates };
