'use strict';
// What a publisher confirm costs the channel's bookkeeping with a window of unconfirmed
// publishes in flight: the broker's acks, one tag at a time or `multiple` over a batch, each
// followed by as many new publishes as it confirmed (so the window stays full). amqplib keeps
// the window in an Array and takes confirmed ones from its front (shift, splice); ours moves a
// start index (lib/channel.js, ConfirmQueue). The channel's own code only: no broker, no
// encoding. Best of five rounds, ns per confirm.
//
//   node benchmarks/confirm_window.js

const { load } = require('./lib');

const CONFIRMS = 1_000_000;
const ROUNDS = 5;
const WINDOW = 1000;
const noop = () => {};

function nsPerConfirm(lib, batch, multiple) {
  const Channel = load(lib).Channel();
  const ch = new Channel({});
  for (let i = 0; i < WINDOW; i++) ch.pushConfirmCallback(noop);
  let tag = 0;
  let best = Infinity;
  for (let round = 0; round < ROUNDS; round++) {
    const start = process.hrtime.bigint();
    for (let n = 0; n < CONFIRMS; n += batch) {
      if (multiple) {
        tag += batch;
        ch.emit('ack', { deliveryTag: tag, multiple: true });
      } else {
        for (let k = 0; k < batch; k++) ch.emit('ack', { deliveryTag: ++tag, multiple: false });
      }
      for (let k = 0; k < batch; k++) ch.pushConfirmCallback(noop);
    }
    best = Math.min(best, Number(process.hrtime.bigint() - start) / CONFIRMS);
  }
  if (ch.unconfirmed.length !== WINDOW) throw new Error(`${lib}: ${ch.unconfirmed.length} unconfirmed, expected ${WINDOW}`);
  return best;
}

console.log(`| acks (window ${WINDOW}) | amqplib, ns per confirm | ours, ns per confirm | ours ÷ amqplib |`);
console.log('|---|---|---|---|');
for (const [label, batch, multiple] of [['one at a time', 1, false], ['multiple, 1 each', 1, true], ['multiple, 10 each', 10, true], ['multiple, 100 each', 100, true]]) {
  const theirs = nsPerConfirm('amqplib', batch, multiple);
  const ours = nsPerConfirm('ours', batch, multiple);
  console.log(`| ${label} | ${theirs.toFixed(1)} | ${ours.toFixed(1)} | ${(ours / theirs).toFixed(2)} |`);
}
