'use strict';
// The suffix of this platform's addon and package (amqplib_rs.<suffix>.node, amqplib-rs-<suffix>),
// as napi-rs names its targets' npm/ directories. Kept apart from the loader so that the test
// of the packages can ask it for every target, not only the machine's own.

const fs = require('node:fs');

function platformSuffix(platform, arch, glibc) {
  if (platform === 'win32') return `win32-${arch}-msvc`;
  if (platform !== 'linux') return `${platform}-${arch}`;
  return `linux-${arch}-${glibc ? 'gnu' : 'musl'}`;
}

// Which C library a Linux process's memory map shows loaded: 'musl', 'glibc', or null when it
// shows neither (a static build). musl is ld-musl-<arch>.so.1 (Alpine), libc.musl-<arch>.so.1 or
// a bare libc.so (Void); glibc is libc.so.6, or libc-2.NN.so before 2.34. A library replaced on
// disk since it was loaded shows as "<path> (deleted)".
function libcInMaps(maps) {
  if (/\/(ld-musl-[^/\n]*|libc\.musl-[^/\n]*|libc\.so)( \(deleted\))?$/m.test(maps)) return 'musl';
  if (/\/(libc\.so\.6|libc-2\.\d+\.so)( \(deleted\))?$/m.test(maps)) return 'glibc';
  return null;
}

// Whether this Linux process runs on glibc. Its memory map says so in well under a millisecond;
// Node's diagnostic report says so too, but making one costs about 2 ms and 1 MB of resident
// memory, so it is asked only when the map cannot be read or is silent.
function runsOnGlibc() {
  let libc = null;
  try {
    libc = libcInMaps(fs.readFileSync('/proc/self/maps', 'latin1'));
  } catch {
    // no /proc: fall back to the report
  }
  if (libc) return libc === 'glibc';
  return !!process.report?.getReport?.().header?.glibcVersionRuntime;
}

// This process's suffix.
function ownPlatformSuffix() {
  return platformSuffix(process.platform, process.arch, process.platform === 'linux' && runsOnGlibc());
}

module.exports = { platformSuffix, ownPlatformSuffix, libcInMaps, runsOnGlibc };
