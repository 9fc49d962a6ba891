'use strict';
// A growable set of non-negative integers, used to allocate channel numbers lowest-first.

const WORD = 32;

class BitSet {
  constructor(size) {
    this.words = new Array(size ? Math.ceil(size / WORD) : 0).fill(0);
  }

  ensure(word) {
    while (this.words.length <= word) this.words.push(0);
  }

  get(bit) {
    const word = (bit / WORD) | 0;
    return word < this.words.length && (this.words[word] & (1 << bit % WORD)) !== 0;
  }

  set(bit) {
    const word = (bit / WORD) | 0;
    this.ensure(word);
    this.words[word] |= 1 << bit % WORD;
  }

  clear(bit) {
    const word = (bit / WORD) | 0;
    if (word < this.words.length) this.words[word] &= ~(1 << bit % WORD);
  }

  // The lowest member >= from, or -1.
  nextSetBit(from) {
    for (let word = (from / WORD) | 0; word < this.words.length; word++) {
      const bits = this.words[word] & fromMask(word, from);
      if (bits !== 0) return word * WORD + lowestBit(bits);
    }
    return -1;
  }

  // The lowest non-member >= from (there always is one).
  nextClearBit(from) {
    for (let word = (from / WORD) | 0; word < this.words.length; word++) {
      const bits = ~this.words[word] & fromMask(word, from);
      if (bits !== 0) return word * WORD + lowestBit(bits);
    }
    return Math.max(from, this.words.length * WORD);
  }
}

// The bits of `word` at or above `from`.
function fromMask(word, from) {
  const start = word === ((from / WORD) | 0) ? from % WORD : 0;
  return start === 0 ? -1 : ~((1 << start) - 1);
}

function lowestBit(bits) {
  return 31 - Math.clz32(bits & -bits);
}

module.exports = { BitSet };
