'use strict';
// The type declarations as an editor shows them: every JSDoc comment is followed by the
// declaration it documents, never by another comment (which would leave the first one
// documenting nothing, and the declaration after them with the wrong words).

const { it } = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const path = require('node:path');

for (const file of ['index.d.ts', 'callback_api.d.ts']) {
  it(`${file}: no JSDoc comment is followed by another`, () => {
    const text = fs.readFileSync(path.join(__dirname, '..', file), 'utf8');
    const orphans = [...text.matchAll(/\/\*\*((?:(?!\*\/)[\s\S])*)\*\/\s*\/\*\*/g)].map((m) => m[1].trim());
    assert.deepStrictEqual(orphans, []);
  });
}
