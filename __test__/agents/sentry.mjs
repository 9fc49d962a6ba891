// @sentry/node's set-up, loaded with --import before the application (agents.test.js), as
// Sentry documents it: its DSN is a closed port on loopback, and every transaction is kept in
// process (beforeSendTransaction, with the static trace lifecycle) and never sent.
import { createRequire } from 'node:module';

const require = createRequire(`${process.env.DEPS_ROOT}/`);
const Sentry = require('@sentry/node');

globalThis.sentryTransactions = [];
Sentry.init({
  dsn: 'http://public@127.0.0.1:9/1',
  tracesSampleRate: 1,
  traceLifecycle: 'static',
  beforeSendTransaction(event) {
    globalThis.sentryTransactions.push(event);
    return null;
  },
});
