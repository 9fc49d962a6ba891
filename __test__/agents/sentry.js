'use strict';
// @sentry/node under the workload (agents.test.js; set up by sentry.mjs): its transactions,
// each with its spans, op and attributes of the messaging and the server, and the transaction
// its trace continues (a consumer's, from the publish's headers). Prints one line.

const Sentry = require(require.resolve('@sentry/node', { paths: [process.env.DEPS_ROOT] }));
const workload = require('./workload');

const KEPT = /^(messaging\.|server\.|network\.)/;

workload(process.env.AMQP_URL, (name, fn) => Sentry.startSpan({ name, op: 'test' }, fn)).then(async ({ received, headerNames, hide }) => {
  await Sentry.flush(2000);
  const events = globalThis.sentryTransactions;
  const spanOwner = new Map();
  for (const event of events) {
    spanOwner.set(event.contexts.trace.span_id, event.transaction);
    for (const span of event.spans || []) spanOwner.set(span.span_id, `${event.transaction}/${span.description}`);
  }
  const describe = (op, description, data) =>
    `${op} ${hide(description)} ${JSON.stringify(Object.entries(data || {}).filter(([k]) => KEPT.test(k)).map(([k, v]) => [k, hide(v)]).sort())}`;
  const transactions = events.map((event) => {
    const trace = event.contexts.trace;
    return {
      transaction: describe(trace.op, event.transaction, trace.data),
      parent: trace.parent_span_id ? hide(spanOwner.get(trace.parent_span_id) || 'elsewhere') : null,
      spans: (event.spans || []).map((s) => describe(s.op, s.description, s.data)).sort(),
    };
  });
  transactions.sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)));
  console.log(JSON.stringify({ received, headerNames, transactions }));
  process.exit(0);
}, (err) => {
  console.error(err);
  process.exit(1);
});
