//! The interned-string table: short strings that repeat (consumer tags, exchanges, routing
//! keys, content types, header names) are given an id the first time they are seen, and JS
//! keeps the decoded string under that id, so it is never decoded again.
//!
//! Bounded: when the table holds [`MAX_ENTRIES`] strings it is emptied before the next read
//! (JS empties its side at the same point), so a stream of unique strings cannot grow it.

use crate::tape::Tape;
use std::collections::HashMap;

pub const MAX_ENTRIES: usize = 4096;
/// Longer strings are rarely repeated and cost more to keep than to decode.
pub const MAX_LEN: usize = 128;

#[derive(Default)]
pub struct Interner {
    ids: HashMap<Box<[u8]>, u32, ahash::RandomState>,
}

impl Interner {
    pub fn new() -> Self {
        Interner::default()
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Called before each read: empties a full table, and tells JS to do the same.
    pub fn reset_if_full(&mut self, tape: &mut Tape) {
        if self.ids.len() >= MAX_ENTRIES {
            self.ids.clear();
            tape.note_strings_reset();
        }
    }

    /// The id of `bytes`, assigning one (and noting the new string on the tape) if it is new.
    /// `None` when the string is not to be interned: too long, or the table is full.
    pub fn intern(&mut self, bytes: &[u8], start: usize, tape: &mut Tape) -> Option<u32> {
        if bytes.len() > MAX_LEN {
            return None;
        }
        if let Some(&id) = self.ids.get(bytes) {
            return Some(id);
        }
        if self.ids.len() >= MAX_ENTRIES {
            return None;
        }
        let id = self.ids.len() as u32;
        self.ids.insert(bytes.into(), id);
        tape.note_new_string(id, start, bytes.len());
        Some(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeats_get_the_same_id_and_are_noted_once() {
        let mut tape = Tape::new();
        let mut strings = Interner::new();
        assert_eq!(strings.intern(b"amq.direct", 0, &mut tape), Some(0));
        assert_eq!(strings.intern(b"tag", 20, &mut tape), Some(1));
        assert_eq!(strings.intern(b"amq.direct", 40, &mut tape), Some(0));
        assert_eq!(tape.objects.len(), 2);
    }

    #[test]
    fn unique_strings_do_not_grow_the_table_without_bound() {
        let mut tape = Tape::new();
        let mut strings = Interner::new();
        // Past a reset or two (under Miri, which runs some 10,000 times slower, one).
        let count = if cfg!(miri) { MAX_ENTRIES + 2 } else { MAX_ENTRIES * 3 };
        for n in 0..count {
            strings.reset_if_full(&mut tape);
            let s = format!("message-{n}");
            strings.intern(s.as_bytes(), 0, &mut tape);
            assert!(strings.len() <= MAX_ENTRIES);
        }
        assert!(tape.to_slots()[crate::boundary::TAPE_STRINGS_RESET] == 1.0, "a reset was signalled");
    }

    #[test]
    fn long_strings_are_not_interned() {
        let mut tape = Tape::new();
        let mut strings = Interner::new();
        assert_eq!(strings.intern(&[b'x'; MAX_LEN + 1], 0, &mut tape), None);
        assert!(strings.is_empty());
    }
}
