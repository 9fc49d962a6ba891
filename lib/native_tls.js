'use strict';
// amqps:// on the native socket: TLS inside the addon's driver (src/tls.rs, rustls), with
// Node's options and Node's trust. What this implements: `ca`, `cert` and `key` (PEM),
// `servername` (SNI, and the name checked), `rejectUnauthorized`, `checkServerIdentity`
// (called here with the server's certificate, as Node calls it) and `minVersion`/`maxVersion`
// from TLSv1.2 up. Any other TLS option goes to tls.connect, which honours it.

const fs = require('node:fs');

// tls.connect options the native TLS does not implement: given any of them (or a `key`,
// `cert` or `ca` it cannot read, or a maxVersion under TLSv1.2), amqps:// takes tls.connect.
const TLS_CONNECT_ONLY_OPTIONS = [
  'pfx', 'passphrase', 'secureContext', 'ciphers', 'secureProtocol', 'ecdhCurve', 'ALPNProtocols', 'session',
  'crl', 'sigalgs', 'privateKeyEngine', 'privateKeyIdentifier', 'clientCertEngine', 'dhparam', 'honorCipherOrder',
  'secureOptions', 'enableTrace', 'pskCallback', 'requestOCSP', 'minDHSize', 'socket',
];

const VERSIONS = ['TLSv1', 'TLSv1.1', 'TLSv1.2', 'TLSv1.3'];

// A PEM text, a DER Buffer, or a list of them, as tls.connect takes `ca` and `cert`.
function pemItems(value) {
  const items = Array.isArray(value) ? value : [value];
  return items.every((item) => typeof item === 'string' || Buffer.isBuffer(item)) ? items.map((item) => Buffer.from(item)) : null;
}

// Whether the native TLS can honour these options.
function serves(options) {
  if (TLS_CONNECT_ONLY_OPTIONS.some((name) => options[name] !== undefined)) return false;
  if (options.key !== undefined && !(typeof options.key === 'string' || Buffer.isBuffer(options.key))) return false;
  if ((options.key === undefined) !== (options.cert === undefined)) return false;
  for (const name of ['ca', 'cert']) if (options[name] !== undefined && pemItems(options[name]) === null) return false;
  const { minVersion = 'TLSv1.2', maxVersion = 'TLSv1.3' } = options;
  return VERSIONS.includes(minVersion) && VERSIONS.indexOf(maxVersion) >= 2;
}

// Node's default trust: its bundled roots and NODE_EXTRA_CA_CERTS (and the system's, where
// Node is told to use them), read once.
let nodeRoots = null;
function defaultRoots() {
  if (nodeRoots) return nodeRoots;
  const tls = require('node:tls');
  let pems;
  if (typeof tls.getCACertificates === 'function') pems = tls.getCACertificates('default');
  else {
    pems = [...tls.rootCertificates];
    const extra = process.env.NODE_EXTRA_CA_CERTS;
    if (extra) {
      try {
        pems.push(fs.readFileSync(extra, 'utf8'));
      } catch {
        // Node warns of an unreadable file once at startup, and goes on without it.
      }
    }
  }
  nodeRoots = [Buffer.from(pems.join('\n'))];
  return nodeRoots;
}

// The name the certificate is checked against, as Node has it.
function hostnameOf(options) {
  return options.servername || options.host || 'localhost';
}

// What src/bindings/socket.rs's NativeTls takes.
function settings(options) {
  const { minVersion = 'TLSv1.2', maxVersion = 'TLSv1.3' } = options;
  return {
    servername: hostnameOf(options),
    roots: options.ca === undefined ? defaultRoots() : pemItems(options.ca),
    rejectUnauthorized: options.rejectUnauthorized !== false,
    cert: options.cert === undefined ? undefined : Buffer.concat(pemItems(options.cert)),
    key: options.key === undefined ? undefined : Buffer.from(options.key),
    tls12: VERSIONS.indexOf(minVersion) <= 2,
    tls13: maxVersion === 'TLSv1.3',
  };
}

// After the handshake, as Node's TLS socket: the server's certificate against the name, by
// `checkServerIdentity` (the user's or tls's own). An Error when it fails.
function checkIdentity(options, der) {
  const { X509Certificate } = require('node:crypto');
  const tls = require('node:tls');
  const check = options.checkServerIdentity || tls.checkServerIdentity;
  const certificate = new X509Certificate(der).toLegacyObject();
  return check(hostnameOf(options), certificate) || null;
}

// A failure the driver reports (an error event with errno 0), or a chain taken unverified: Node's
// code, its words.
function tlsError(code, message) {
  const err = new Error(message || code);
  err.code = code;
  return err;
}

module.exports = { serves, settings, checkIdentity, tlsError };
