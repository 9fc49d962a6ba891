#!/usr/bin/env node
'use strict';
// Our version numbers (issue 26): the version says which amqplib it matches, so that tools that
// check the version of the package installed as `amqplib` (OpenTelemetry's instrumentation
// takes `>=0.5.5 <3`) take ours for it, and our own fixes still come out in order:
// - x.y.p with p < 100: amqplib x.y.p itself (our releases before this rule: 2.3.1);
// - x.y.(p * 100 + n): our n-th fix (1-99) on amqplib x.y.p; n = 0 matches x.y.p exactly from
//   then on (amqplib 2.3.2 is 2.3.200).
// A prerelease such as 2.3.1-rs.1 would fall outside `<3` for such range checks.
// `node scripts/version.js` prints the matched amqplib version and the next fix's number.

function parse(version) {
  const match = /^(\d+)\.(\d+)\.(\d+)$/.exec(version);
  if (!match) throw new Error(`Expected a version x.y.z; got ${version}`);
  return match.slice(1).map(Number);
}

// The amqplib version ours matches.
function matchedAmqplib(version) {
  const [major, minor, patch] = parse(version);
  return `${major}.${minor}.${patch < 100 ? patch : Math.floor(patch / 100)}`;
}

// The number of our next fix on the same amqplib version.
function nextFix(version) {
  const [major, minor, patch] = parse(version);
  const next = patch < 100 ? patch * 100 + 1 : patch + 1;
  if (next % 100 === 0) throw new Error(`${version} is the 99th fix on amqplib ${matchedAmqplib(version)}: no number is left`);
  return `${major}.${minor}.${next}`;
}

module.exports = { matchedAmqplib, nextFix };

if (require.main === module) {
  const { version } = require('../package.json');
  console.log(`${version} matches amqplib ${matchedAmqplib(version)}; our next fix is ${nextFix(version)}`);
}
