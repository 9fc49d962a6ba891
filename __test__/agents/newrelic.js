'use strict';
// New Relic's agent under the workload (agents.test.js), in serverless mode (it reports nothing
// over the network), with the account numbers distributed tracing needs. Its transactions are
// read in process as they finish: name, whether it accepted a distributed trace (a consumer's,
// from the publish's headers), and its segments with their attributes. Prints one line.

const dep = (name) => require(require.resolve(name, { paths: [process.env.DEPS_ROOT] }));
const newrelic = dep('newrelic');
const workload = require('./workload');

const finished = [];
newrelic.agent.on('transactionFinished', (tx) => {
  const segments = [];
  const walk = (segment) => {
    segments.push({ name: segment.name, attributes: segment.getAttributes() });
    for (const child of tx.trace.getChildren(segment.id)) walk(child);
  };
  walk(tx.trace.root);
  finished.push({ name: tx.getFullName(), accepted: !!tx.acceptedDistributedTrace, segments });
});

const inTransaction = (name, fn) =>
  new Promise((resolve, reject) => {
    newrelic.startBackgroundTransaction(name, () => {
      const tx = newrelic.getTransaction();
      Promise.resolve(fn()).then((value) => {
        tx.end();
        resolve(value);
      }, reject);
    });
  });

const KEPT = /^(host|port|routing_key|correlation_id|reply_to|exchange_type)$/;

workload(process.env.AMQP_URL, inTransaction).then(({ received, headerNames, hide }) => {
  setTimeout(() => {
    const transactions = finished.map((tx) => ({
      name: hide(tx.name),
      accepted: tx.accepted,
      segments: tx.segments.map((s) => `${hide(s.name)} ${JSON.stringify(Object.entries(s.attributes).filter(([k]) => KEPT.test(k)).map(([k, v]) => [k, hide(v)]).sort())}`).sort(),
    }));
    transactions.sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)));
    console.log(JSON.stringify({ received, headerNames, transactions }));
    process.exit(0);
  }, 300);
}, (err) => {
  console.error(err);
  process.exit(1);
});
