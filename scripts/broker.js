#!/usr/bin/env node
'use strict';
// Makes sure a broker answers at AMQP_URL (default amqp://localhost) before the tests that
// need one. If nothing answers at the port of a RabbitMQ 4 node of scripts/rabbitmq4.js's, starts
// that node (and leaves it running, as `node scripts/rabbitmq4.js start` does); if nothing
// answers at 5672 and RabbitMQ is installed here, starts it and waits (60 s at most); otherwise
// fails at once, saying how to get one.

const { answers: tcpAnswers } = require('./answers');
const { spawnSync } = require('node:child_process');

const url = new URL(process.env.AMQP_URL || 'amqp://localhost');
// An IPv6 address without the brackets the URL writes it in, as net.connect takes it.
const host = url.hostname.replace(/^\[(.*)\]$/, '$1') || 'localhost';
const port = Number(url.port) || (url.protocol === 'amqps:' ? 5671 : 5672);

const answers = () => tcpAnswers(host, port);

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function installed() {
  return spawnSync('sh', ['-c', 'command -v rabbitmq-server'], { stdio: 'ignore' }).status === 0;
}

async function main() {
  if (await answers()) return;
  const local = host === 'localhost' || host === '127.0.0.1' || host === '::1';
  const rabbitmq4 = local && require('./rabbitmq4').singleNodeFor(port);
  if (rabbitmq4) {
    console.error(`No broker at ${host}:${port}: starting the RabbitMQ 4 node of scripts/rabbitmq4.js's that has that port`);
    await require('./rabbitmq4').start(rabbitmq4);
    return;
  }
  if (!local || port !== 5672 || !installed()) {
    console.error(
      `No AMQP broker answers at ${host}:${port}.\n` +
        'Install RabbitMQ (e.g. `apt-get install rabbitmq-server`) so the tests can start it, ' +
        'or point AMQP_URL at a running broker (amqp://user:pass@host:port/vhost).',
    );
    process.exit(1);
  }
  console.error(`No broker at ${host}:${port}: starting RabbitMQ (rabbitmq-server -detached)`);
  spawnSync('rabbitmq-server', ['-detached'], { stdio: 'inherit' });
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    if (await answers()) return;
    await sleep(1000);
  }
  console.error(`RabbitMQ did not accept connections at ${host}:${port} within 60 s`);
  process.exit(1);
}

main();
