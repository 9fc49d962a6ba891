'use strict';
// scripts/count-unsafe.js, which npm test runs against a ceiling: it must count the keyword
// where Rust would read it and nowhere else.

const { describe, it } = require('node:test');
const assert = require('node:assert');
const { count, pointersFromSelf } = require('../scripts/count-unsafe');

const none = { blocks: 0, fns: 0, impls: 0, externs: 0, tests: 0 };

describe('count-unsafe', () => {
  it('finds raw pointers made from self, not in comments or strings', () => {
    assert.strictEqual(pointersFromSelf('let data = (self as *mut NativeConnection).cast();'), 1);
    assert.strictEqual(pointersFromSelf('let p = self  as  *const Self;'), 1);
    assert.strictEqual(pointersFromSelf('// self as *mut T\nlet s = "self as *mut T"; let n = self.len() as usize;'), 0);
  });

  it('counts blocks, functions, impls and extern blocks apart', () => {
    const src = [
      'unsafe impl Send for Foo {}',
      'unsafe trait Bar {}',
      'pub unsafe fn a() { unsafe { f() } }',
      'pub unsafe extern "C" fn b(x: *mut c_void) {}',
      'unsafe extern "C" { fn c(); }',
      'let g = || unsafe { h() };',
    ].join('\n');
    assert.deepStrictEqual(count(src), { blocks: 2, fns: 2, impls: 2, externs: 1, tests: 0 });
  });

  it('counts what lies under #[cfg(test)] apart', () => {
    const src = [
      '#[cfg(test)]',
      'use std::ptr;',
      'fn code() { unsafe { a() } }',
      '#[cfg(test)]',
      'mod tests {',
      '    fn helper() { if x { unsafe { b() } } }',
      '    #[test]',
      '    fn t() { unsafe { c() } }',
      '}',
      '#[cfg(test)]',
      'unsafe fn only_for_tests() {}',
      'fn more_code() { unsafe { d() } }',
    ].join('\n');
    assert.deepStrictEqual(count(src), { ...none, blocks: 2, tests: 3 });
  });

  it('leaves out function pointer types and unsafe attributes', () => {
    const src = [
      'type Callback = unsafe extern "C" fn(handle: *mut c_void);',
      'type Plain = unsafe fn(u8);',
      '#[unsafe(no_mangle)]',
      'fn x() {}',
    ].join('\n');
    assert.deepStrictEqual(count(src), none);
  });

  it('ignores the word in comments, strings, char literals and identifiers', () => {
    const src = [
      '// unsafe { in a line comment }',
      '/* outer /* nested */ unsafe { still a comment } */',
      '/// SAFETY: unsafe { in a doc comment }',
      'let s = "unsafe { in a string \\" still }";',
      'let r = r#"unsafe { "in" a raw string }"#;',
      'let b = b"unsafe {";',
      "let q = '\"'; let e = '\\''; let u = 'é';",
      'fn f<\'a>(x: &\'a str) -> &\'a str { x }',
      'let unsafe_count = 1; let r#unsafe_ident = 2;',
      'unsafe { real() }',
    ].join('\n');
    assert.deepStrictEqual(count(src), { ...none, blocks: 1 });
  });
});
