'use strict';
// dd-trace under the workload (agents.test.js): its spans as it finishes them, read in process
// (its own diagnostics channel dd-trace:span:finish); its exporter's agent is a closed port on
// loopback, so nothing leaves the machine. Prints one line: the spans, in a fixed order, each
// with its parent's name and resource.

const dep = (name) => require(require.resolve(name, { paths: [process.env.DEPS_ROOT] }));
const tracer = dep('dd-trace').init({ flushInterval: 0, startupLogs: false, telemetry: { enabled: false }, remoteConfig: { enabled: false } });
const dc = require('node:diagnostics_channel');
const workload = require('./workload');

const finished = [];
dc.channel('dd-trace:span:finish').subscribe((span) => finished.push(span.context()));

const UNITS = ['plain', 'confirmed'];
const TAGS = /^(span\.kind|out\.host|network\.destination\.port|amqp\.|component|error\.message)/;

workload(process.env.AMQP_URL, (name, fn) => tracer.trace(name, fn)).then(({ received, headerNames, hide }) => {
  setTimeout(() => {
    // The spans of its amqplib plugin and of the workload's units; its net plugin's (tcp.connect)
    // exist only where Node's net makes the socket, not on the native one.
    const ours = finished.filter((c) => c._tags.component === 'amqplib' || UNITS.includes(c._name));
    const byId = new Map(ours.map((c) => [c._spanId.toString(10), c]));
    const describe = (c) => `${c._name} ${hide(c._tags['resource.name'])}`;
    const spans = ours.map((c) => {
      const parent = c._parentId && byId.get(c._parentId.toString(10));
      const tags = Object.entries(c._tags).filter(([k]) => TAGS.test(k)).map(([k, v]) => [k, hide(v)]).sort();
      return { span: describe(c), tags: Object.fromEntries(tags), parent: parent ? describe(parent) : null };
    });
    spans.sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)));
    console.log(JSON.stringify({ received, headerNames, spans }));
    process.exit(0);
  }, 300);
}, (err) => {
  console.error(err);
  process.exit(1);
});
