'use strict';

// SASL credentials for the connection handshake. Each factory returns
// `{ mechanism, response }` where `response()` produces the bytes sent in
// ConnectionStartOk; user name and password are kept on the object for
// the benefit of callers that inspect them.
//
// RabbitMQ offers PLAIN and AMQPLAIN for user name and password, and
// EXTERNAL for authentication by other means (typically a TLS client
// certificate).

// Array#join semantics: null and undefined become empty strings, and a Symbol is a
// TypeError (String() would turn it into text).
function text(value) {
  return value === undefined || value === null ? '' : `${value}`;
}

// PLAIN (RFC 4616): authzid NUL authcid NUL passwd, with an empty authzid.
function plain(user, passwd) {
  return {
    mechanism: 'PLAIN',
    response: () => Buffer.from(`\u0000${text(user)}\u0000${text(passwd)}`),
    username: user,
    password: passwd,
  };
}

// One field-table entry whose value is a long string:
// shortstr key, type tag 'S', 32-bit length, UTF-8 bytes.
function tableEntry(key, value) {
  const keyBytes = Buffer.from(key, 'utf8');
  const valueBytes = Buffer.from(String(value), 'utf8');
  const entry = Buffer.alloc(1 + keyBytes.length + 1 + 4 + valueBytes.length);
  let at = entry.writeUInt8(keyBytes.length, 0);
  at += keyBytes.copy(entry, at);
  entry[at++] = 0x53; // 'S'
  at = entry.writeUInt32BE(valueBytes.length, at);
  valueBytes.copy(entry, at);
  return entry;
}

// AMQPLAIN: the body of a field table {LOGIN, PASSWORD} (without the
// table's own length prefix). Absent values are left out, as the table
// encoder leaves out undefined entries.
function amqplain(user, passwd) {
  return {
    mechanism: 'AMQPLAIN',
    response: () => {
      const entries = [];
      if (user !== undefined) entries.push(tableEntry('LOGIN', user));
      if (passwd !== undefined) entries.push(tableEntry('PASSWORD', passwd));
      return Buffer.concat(entries);
    },
    username: user,
    password: passwd,
  };
}

// EXTERNAL: the server works out who we are; the response is empty.
function external() {
  return {
    mechanism: 'EXTERNAL',
    response: () => Buffer.alloc(0),
  };
}

// The same user with another secret (updateSecret's: an OAuth2 token, a rotated password), for
// the connections a recovering model opens later. Only PLAIN and AMQPLAIN credentials that
// name their user take it; EXTERNAL has no secret, and other mechanisms are left as they are.
function withSecret(creds, secret) {
  if (typeof creds.username !== 'string') return creds;
  const password = Buffer.isBuffer(secret) ? secret.toString('utf8') : secret;
  if (creds.mechanism === 'PLAIN') return plain(creds.username, password);
  if (creds.mechanism === 'AMQPLAIN') return amqplain(creds.username, password);
  return creds;
}

// What a recovering model's `credentials` hook may answer: credentials as the factories above
// make them, or { username, password } (strings; the password may be a Buffer) for PLAIN.
// Anything else is a TypeError that says what kind of value came, never the value: a token
// returned bare must not land in a logged error.
function fromAnswer(answer) {
  if (answer && typeof answer === 'object') {
    if (typeof answer.mechanism === 'string' && typeof answer.response === 'function') return answer;
    const { username, password } = answer;
    if (typeof username === 'string' && (typeof password === 'string' || Buffer.isBuffer(password))) return plain(username, password);
  }
  const kind = answer === null ? 'null' : typeof answer === 'object' ? `an object with keys ${Object.keys(answer).join(', ') || '(none)'}` : `a ${typeof answer}`;
  throw new TypeError(`recovery.credentials must resolve to { username, password } (strings) or credentials (amqp.credentials.plain, ...); got ${kind}`);
}

module.exports = { plain, amqplain, external, withSecret, fromAnswer };
