//! The event tape: how the core's events (`event.rs`) reach JS in one crossing per read.
//!
//! The bindings' serializer (`serializer.rs`) takes a read's events and decodes their
//! arguments and properties into a flat run of numbers (`slots`) and a short list of objects (strings and
//! Buffers that must become JS values). The bindings hand both to JS in one call;
//! JS walks the slots with generated readers (lib/spec.js) and builds each fields object in
//! one literal, of a stable shape. Strings that repeat are interned: their slot holds an id
//! into a JS-side array that only receives a string the first time it is seen.
//!
//! Layout (its positions are generated, in `boundary.rs` and lib/boundary.js): whether JS
//! holds the tape and where its events end (a tape is written again by a later read once JS
//! has released it, so it may be longer than this read's events), then the string
//! table's changes (whether it was reset before this read, so JS empties its array; then
//! `n`, the number of newly interned strings, and `n` pairs `(string id, object index)`),
//! then the events. Each event starts with the same slots (`kind, channel, id, length`,
//! length counting all of the event's slots), followed by its fixed slots and then any
//! table data.
//!
//! A string slot holds `id >= 0` for an interned string, or `-(index + 1)` for a string
//! object of this read. Other object slots hold the object's index.
//!
//! Small bodies that arrived in one frame are not objects of their own: they are copied, in
//! order, into one ArrayBuffer per read (the read's content slab), and their event holds the
//! `offset, length` of each in it. Each message's content is then a view of exactly its size
//! into that ArrayBuffer, made in JS: one allocation per read instead of one per message (the
//! cost that dominated receiving small messages), as Node pools its own small Buffers. What
//! a retained message keeps alive is bounded by what one read brought.

use crate::boundary::*;

/// A value JS must be given as an object rather than a number.
#[derive(Debug, PartialEq)]
pub enum Obj {
    /// UTF-8 text at `start..start + len` of the buffer being decoded.
    Str { start: usize, len: usize },
    /// Bytes at `start..start + len` of the buffer being decoded, to be copied into a Buffer
    /// (a longstr, a byte array in a table, or a body that arrived in one frame).
    Bytes { start: usize, len: usize },
    /// A message body, already assembled; becomes a Buffer without another copy.
    Content(Vec<u8>),
    /// An error's message text.
    Text(String),
}

#[derive(Debug, Default)]
pub struct Tape {
    slots: Vec<f64>,
    pub objects: Vec<Obj>,
    new_strings: Vec<(u32, usize)>,
    reset_strings: bool,
    /// The ranges of the decoded buffer that make up this read's content slab, in order.
    pub pooled: Vec<(usize, usize)>,
    pooled_bytes: usize,
}

impl Tape {
    pub fn new() -> Self {
        Tape::default()
    }

    pub fn clear(&mut self) {
        self.slots.clear();
        self.objects.clear();
        self.new_strings.clear();
        self.reset_strings = false;
        self.pooled.clear();
        self.pooled_bytes = 0;
    }

    /// Bytes of this read's content slab.
    pub fn pooled_bytes(&self) -> usize {
        self.pooled_bytes
    }



    /// Adds `start..start + len` of the decoded buffer to the content slab; returns its offset there.
    pub fn pool(&mut self, start: usize, len: usize) -> f64 {
        let offset = self.pooled_bytes;
        self.pooled.push((start, len));
        self.pooled_bytes += len;
        offset as f64
    }




    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    pub fn push(&mut self, v: f64) {
        self.slots.push(v);
    }

    pub fn extend(&mut self, values: &[f64]) {
        self.slots.extend_from_slice(values);
    }

    pub fn set(&mut self, slot: usize, v: f64) {
        self.slots[slot] = v;
    }

    /// Appends `n` zeroed slots and returns the index of the first.
    pub fn reserve(&mut self, n: usize) -> usize {
        let at = self.slots.len();
        self.slots.resize(at + n, 0.0);
        at
    }

    pub fn object(&mut self, obj: Obj) -> f64 {
        self.objects.push(obj);
        (self.objects.len() - 1) as f64
    }

    pub fn transient_string(&mut self, start: usize, len: usize) -> f64 {
        -(self.object(Obj::Str { start, len }) + 1.0)
    }

    pub fn note_new_string(&mut self, id: u32, start: usize, len: usize) {
        let index = self.object(Obj::Str { start, len }) as usize;
        self.new_strings.push((id, index));
    }

    pub fn note_strings_reset(&mut self) {
        self.reset_strings = true;
    }

    /// Starts an event; its own slots follow, then [`end_event`](Self::end_event).
    pub fn begin_event(&mut self, kind: TapeEvent, channel: u16, id: u32) -> usize {
        let at = self.reserve(EVENT_HEAD_SLOTS);
        self.slots[at + EVENT_KIND] = kind as u8 as f64;
        self.slots[at + EVENT_CHANNEL] = channel as f64;
        self.slots[at + EVENT_ID] = id as f64;
        at
    }

    pub fn end_event(&mut self, at: usize) {
        self.slots[at + EVENT_LENGTH] = (self.slots.len() - at) as f64;
    }

    /// Drops an event that failed to decode, with the objects it had added.
    pub fn abandon_event(&mut self, at: usize, objects: usize) {
        self.slots.truncate(at);
        self.objects.truncate(objects);
        self.new_strings.retain(|&(_, index)| index < objects);
    }


    /// Slots of the whole tape as JS reads it.
    pub fn total_slots(&self) -> usize {
        TAPE_STRING_PAIRS + 2 * self.new_strings.len() + self.slots.len()
    }

    /// Writes the whole tape as JS reads it, the header and then the events, into the first
    /// [`total_slots`](Self::total_slots) slots of `out`, marked held by JS.
    pub fn write_slots(&self, out: &mut [f64]) {
        let total = self.total_slots();
        let (header, events) = out[..total].split_at_mut(total - self.slots.len());
        header[TAPE_HELD] = 1.0;
        header[TAPE_END] = total as f64;
        header[TAPE_STRINGS_RESET] = self.reset_strings as u8 as f64;
        header[TAPE_NEW_STRINGS] = self.new_strings.len() as f64;
        for (pair, &(id, index)) in header[TAPE_STRING_PAIRS..].chunks_exact_mut(2).zip(&self.new_strings) {
            pair[0] = id as f64;
            pair[1] = index as f64;
        }
        events.copy_from_slice(&self.slots);
    }

    /// The whole tape as JS reads it, as a Vec.
    #[cfg(test)]
    pub fn to_slots(&self) -> Vec<f64> {
        let mut out = vec![0.0; self.total_slots()];
        self.write_slots(&mut out);
        out
    }
}
