'use strict';
// The suffix of this platform's addon and package (amqplib_rs.<suffix>.node, amqplib-rs-<suffix>),
// as napi-rs names its targets' npm/ directories. Kept apart from the loader so that the test
// of the packages can ask it for every target, not only the machine's own.

function platformSuffix(platform, arch, glibc) {
  if (platform === 'win32') return `win32-${arch}-msvc`;
  if (platform !== 'linux') return `${platform}-${arch}`;
  return `linux-${arch}-${glibc ? 'gnu' : 'musl'}`;
}

module.exports = { platformSuffix };
