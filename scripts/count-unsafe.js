#!/usr/bin/env node
'use strict';
// Counts the unsafe code per file and per area: the sans-IO core (core/src/), the native
// socket (src/transport.rs, uv.rs, driver.rs and tls.rs) and the Node-API bindings (the rest of src/). Counted apart: `unsafe { }` blocks, `unsafe fn` items
// (with or without an ABI), `unsafe impl` / `unsafe trait`, and `unsafe extern` blocks.
// Function pointer types (`unsafe extern "C" fn(...)`) and `#[unsafe(...)]` attributes declare
// no unsafe code and are not counted. What lies under `#[cfg(test)]` (the tests modules) is
// counted apart, all kinds together, and has no ceiling: it never ships.
// The scan reads Rust's tokens, so `unsafe` in comments, strings (raw ones included), char
// literals and identifiers such as `unsafe_op` is not taken for the keyword.
// `npm test` runs it: it fails when an area's count rises above CEILING, so unsafe code can only
// shrink; when a count falls, it says so, to lower CEILING in the same commit.
// It also fails on a raw pointer made from `self` in the bindings (`self as *mut ...`): a
// pointer kept past a call must be the one napi-rs wrapped the value with (JsEnv::wrapped),
// since one made from a call's `&mut self` is ended by napi-rs's next borrow of the value
// (Stacked and Tree Borrows), which neither Miri nor ASan sees across the boundary.

const fs = require('node:fs');
const path = require('node:path');

const KINDS = ['blocks', 'fns', 'impls', 'externs'];
// The counts as committed: raise one only with a reason in the commit that needs it.
const CEILING = {
  core: { blocks: 2, fns: 0, impls: 0, externs: 0 },
  'native socket': { blocks: 12, fns: 4, impls: 0, externs: 0 },
  bindings: { blocks: 62, fns: 7, impls: 0, externs: 0 },
};
const NATIVE_SOCKET = ['src/transport.rs', 'src/uv.rs', 'src/driver.rs', 'src/tls.rs'];

/** Rust's tokens, reduced to what the count needs: identifiers, literals, punctuation. */
function tokens(src) {
  const out = [];
  const isIdentStart = (c) => /[A-Za-z_]/.test(c);
  const isIdent = (c) => /[A-Za-z0-9_]/.test(c);
  let i = 0;
  // From the opening quote at `i`, past the closing one (backslash escapes skipped).
  const quoted = (quote) => {
    i++;
    while (i < src.length && src[i] !== quote) i += src[i] === '\\' ? 2 : 1;
    i++;
  };
  while (i < src.length) {
    const c = src[i];
    if (c === '/' && src[i + 1] === '/') {
      while (i < src.length && src[i] !== '\n') i++;
    } else if (c === '/' && src[i + 1] === '*') {
      // Block comments nest in Rust.
      let depth = 0;
      do {
        if (src[i] === '/' && src[i + 1] === '*') { depth++; i += 2; }
        else if (src[i] === '*' && src[i + 1] === '/') { depth--; i += 2; }
        else i++;
      } while (depth > 0 && i < src.length);
    } else if (c === '"') {
      quoted('"');
      out.push({ kind: 'literal' });
    } else if (c === '\'') {
      // A char literal ('a', '\n', '\u{7f}', 'é') or a lifetime ('a, 'static).
      const next = String.fromCodePoint(src.codePointAt(i + 1));
      if (src[i + 1] === '\\' || src[i + 1 + next.length] === '\'') {
        quoted('\'');
        out.push({ kind: 'literal' });
      } else {
        i++;
        while (i < src.length && isIdent(src[i])) i++;
      }
    } else if (isIdentStart(c) || /[0-9]/.test(c)) {
      const start = i;
      while (i < src.length && isIdent(src[i])) i++;
      const word = src.slice(start, i);
      if (['r', 'br', 'cr'].includes(word) && (src[i] === '"' || (src[i] === '#' && /[#"]/.test(src[i + 1] ?? '')))) {
        // A raw string: r"..", r#".."#, ..., with no escapes, closed by the quote and as many #.
        let hashes = 0;
        while (src[i] === '#') { hashes++; i++; }
        const close = '"' + '#'.repeat(hashes);
        const end = src.indexOf(close, i + 1);
        i = end < 0 ? src.length : end + close.length;
        out.push({ kind: 'literal' });
      } else if (['b', 'c'].includes(word) && (src[i] === '"' || src[i] === '\'')) {
        quoted(src[i]);
        out.push({ kind: 'literal' });
      } else if (word === 'r' && src[i] === '#' && isIdentStart(src[i + 1] ?? '')) {
        // A raw identifier (r#type): an identifier, never the keyword.
        i++;
        const rawStart = i;
        while (i < src.length && isIdent(src[i])) i++;
        out.push({ kind: 'ident', text: `r#${src.slice(rawStart, i)}` });
      } else {
        out.push({ kind: 'ident', text: word });
      }
    } else if (/\s/.test(c)) {
      i++;
    } else {
      out.push({ kind: 'punct', text: c });
      i++;
    }
  }
  return out;
}

/**
 * The unsafe code in one file's source, by kind; `tests` counts, of all kinds together, what
 * lies in items under `#[cfg(test)]` (a tests module), which the kinds leave out.
 */
function count(src) {
  const found = Object.fromEntries([...KINDS, 'tests'].map((k) => [k, 0]));
  const toks = tokens(src);
  const is = (t, text) => t !== undefined && t.kind !== 'literal' && t.text === text;
  const CFG_TEST = ['#', '[', 'cfg', '(', 'test', ')', ']'];
  let depth = 0;
  // After `#[cfg(test)]`, until its item's body opens (or a `;` ends a bodiless item).
  let testAttribute = false;
  // The brace depth outside a test item's body, while inside it.
  let testDepth = null;
  for (let i = 0; i < toks.length; i++) {
    if (CFG_TEST.every((text, k) => is(toks[i + k], text))) {
      testAttribute = true;
      i += CFG_TEST.length - 1;
      continue;
    }
    if (is(toks[i], '{')) {
      if (testAttribute && testDepth === null) testDepth = depth;
      testAttribute = false;
      depth++;
      continue;
    }
    if (is(toks[i], '}')) {
      depth--;
      if (depth === testDepth) testDepth = null;
      continue;
    }
    if (is(toks[i], ';') && testDepth === null) testAttribute = false;
    if (!is(toks[i], 'unsafe')) continue;
    const kind = unsafeKind(toks, i + 1, is);
    if (kind === null) continue;
    found[testAttribute || testDepth !== null ? 'tests' : kind]++;
  }
  return found;
}

/** How many raw pointers `self as *...` the source makes. */
function pointersFromSelf(src) {
  const toks = tokens(src);
  const is = (t, text) => t !== undefined && t.kind !== 'literal' && t.text === text;
  return toks.filter((t, i) => is(t, 'self') && is(toks[i + 1], 'as') && is(toks[i + 2], '*')).length;
}

/** What the `unsafe` before toks[j] starts, or null for a type or an attribute. */
function unsafeKind(toks, j, is) {
  if (is(toks[j], '{')) return 'blocks';
  if (is(toks[j], 'impl') || is(toks[j], 'trait')) return 'impls';
  if (is(toks[j], 'extern')) {
    j++;
    if (toks[j]?.kind === 'literal') j++; // the ABI, "C"
    if (is(toks[j], '{')) return 'externs';
  }
  // `unsafe fn name` is an item; `unsafe fn(` a function pointer type.
  return is(toks[j], 'fn') && toks[j + 1]?.kind === 'ident' ? 'fns' : null;
}

function rustFiles(dir) {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return rustFiles(full);
    return entry.name.endsWith('.rs') ? [full] : [];
  }).sort();
}

// Which area a file (relative to the repository, with /) is in.
function areaOf(rel) {
  if (rel.startsWith('core/')) return 'core';
  if (NATIVE_SOCKET.includes(rel)) return 'native socket';
  return 'bindings';
}

function main() {
  const root = path.join(__dirname, '..');
  const COLUMNS = [...KINDS, 'tests'];
  const zero = () => Object.fromEntries(COLUMNS.map((k) => [k, 0]));
  const areas = { core: zero(), 'native socket': zero(), bindings: zero(), total: zero() };
  const rows = [];
  let selfPointers = false;
  for (const file of [...rustFiles(path.join(root, 'core', 'src')), ...rustFiles(path.join(root, 'src'))]) {
    const rel = path.relative(root, file).split(path.sep).join('/');
    const src = fs.readFileSync(file, 'utf8');
    const found = count(src);
    if (areaOf(rel) === 'bindings' && pointersFromSelf(src) > 0) {
      console.error(`${rel}: a raw pointer made from self; keep the one napi-rs wrapped the value with (JsEnv::wrapped)`);
      selfPointers = true;
    }
    for (const sum of [areas[areaOf(rel)], areas.total]) for (const k of COLUMNS) sum[k] += found[k];
    if (COLUMNS.some((k) => found[k] > 0)) rows.push([rel, found]);
  }
  const line = (name, c) => `${name.padEnd(40)}${COLUMNS.map((k) => String(c[k]).padStart(8)).join('')}`;
  console.log(line('unsafe code', Object.fromEntries(COLUMNS.map((k) => [k, k]))));
  for (const [name, c] of rows) console.log(line(name, c));
  console.log('');
  console.log(line('core (core/src/)', areas.core));
  console.log(line('native socket (transport, uv, driver, tls)', areas['native socket']));
  console.log(line('bindings (the rest of src/)', areas.bindings));
  console.log(line('total', areas.total));

  let failed = selfPointers;
  for (const [area, ceiling] of Object.entries(CEILING)) {
    for (const k of KINDS) {
      const n = areas[area][k];
      if (n > ceiling[k]) {
        console.error(`${area}: ${n} unsafe ${k}, above the ceiling of ${ceiling[k]} (scripts/count-unsafe.js CEILING)`);
        failed = true;
      } else if (n < ceiling[k]) {
        console.log(`${area}: ${n} unsafe ${k}, below the ceiling of ${ceiling[k]}: lower CEILING.${area}.${k} to ${n}`);
      }
    }
  }
  process.exit(failed ? 1 : 0);
}

if (require.main === module) main();
module.exports = { count, pointersFromSelf };
