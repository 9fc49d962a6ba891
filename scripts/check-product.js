'use strict';
// Builds the addon as it is published (`npm run build:product`'s cargo build, without the
// `codec-exports` feature) and checks that the codec entry points only the development build
// needs are not in it, while the development build in native/ has them.

const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const root = path.join(__dirname, '..');
const CODEC_EXPORTS = ['encodeMethod', 'encodeProperties', 'decodeMethod', 'decodeProperties', 'encodeTable', 'decodeTable', 'UnsettledTags'];

// The names of the codec entry points found in the binary at `file` (napi-rs keeps each
// export's name as a string in it).
function codecExportsIn(file) {
  const bytes = fs.readFileSync(file);
  return CODEC_EXPORTS.filter((name) => bytes.includes(Buffer.from(`${name}\0`)));
}

const build = spawnSync('cargo', ['build', '--release', '--lib'], { cwd: root, stdio: 'inherit' });
if (build.status !== 0) process.exit(1);
const library = { linux: 'libamqplib_rs.so', darwin: 'libamqplib_rs.dylib', win32: 'amqplib_rs.dll' }[process.platform];
const product = codecExportsIn(path.join(root, 'target', 'release', library));
const development = fs.readdirSync(path.join(root, 'native')).filter((f) => f.endsWith('.node'));
const inDevelopment = development.map((f) => codecExportsIn(path.join(root, 'native', f)));

console.log(`product build: ${product.length ? product.join(', ') : 'no codec exports'}`);
console.log(`development build (${development.join(', ')}): ${inDevelopment.map((names) => names.join(', ')).join('; ')}`);
if (product.length > 0) {
  console.error('The published addon would carry the codec exports.');
  process.exit(1);
}
if (inDevelopment.length === 0 || inDevelopment.some((names) => names.length !== CODEC_EXPORTS.length)) {
  console.error('The development build lacks the codec exports (so this check could not tell them apart).');
  process.exit(1);
}
