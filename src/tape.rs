//! The event tape: how the core's events (`event.rs`) reach JS in one crossing per read.
//!
//! The bindings' [`Serializer`] takes a read's events and decodes their arguments and
//! properties into a flat run of numbers (`slots`) and a short list of objects (strings and
//! Buffers that must become JS values). The bindings hand both to JS in one call;
//! JS walks the slots with generated readers (lib/spec.js) and builds each fields object in
//! one literal, of a stable shape. Strings that repeat are interned: their slot holds an id
//! into a JS-side array that only receives a string the first time it is seen.
//!
//! Layout (its positions are generated, in `boundary.rs` and lib/boundary.js): the string
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
//! order, into one Buffer per read (the read's content slab), and their event holds the
//! `offset, length` of each in it. Each message's content is then a view of exactly its size
//! into that Buffer, made in JS: one allocation per read instead of one per message (the
//! cost that dominated receiving small messages), as Node pools its own small Buffers. What
//! a retained message keeps alive is bounded by what one read brought.

use crate::boundary::*;
use crate::codec::{Decoder, Reader};
use crate::connection::Connection;
use crate::event::{Content, Event};
use crate::spec;
use crate::strings::Interner;

/// Bodies in one frame up to this size share their read's content slab; larger ones get a
/// Buffer of their own, whose allocation their copy outweighs anyway.
pub const POOLED_BODY_MAX: usize = 8 * 1024;

/// Turns the core's events (`event.rs`) into the tape JS reads, decoding each method's
/// arguments and each message's properties once, straight onto it. The bindings keep one per
/// connection, with the connection's interned-string table.
#[derive(Default)]
pub struct Serializer {
    pub tape: Tape,
    strings: Interner,
}

impl Serializer {
    /// Takes every event of `core`'s last read onto a fresh tape. Arguments that do not decode
    /// are the core's to judge ([`Connection::decoding_failed`]): its connection error takes
    /// the place of the rest of the read.
    pub fn serialize_read(&mut self, core: &mut Connection) {
        self.tape.clear();
        self.strings.reset_if_full(&mut self.tape);
        while let Some(event) = core.poll_event() {
            if let Err(e) = self.write(event, core.read_buffer()) {
                core.decoding_failed(e);
            }
        }
    }

    fn write(&mut self, event: Event, read: &[u8]) -> crate::codec::Result<()> {
        let tape = &mut self.tape;
        let (start, objects) = (tape.len(), tape.objects.len());
        let at = match event {
            Event::Method { channel, id, args } => {
                let at = tape.begin_event(TapeEvent::Method, channel, id);
                let method = spec::method(id).expect("a method the core knows");
                let mut decoder = Decoder { strings: &mut self.strings, tape, base: args.start };
                decoder.method_args(method, &mut Reader::new(&read[args])).map(|()| at)
            }
            Event::Header { channel, class_id, body_size, properties } => {
                let at = tape.begin_event(TapeEvent::Header, channel, class_id as u32);
                debug_assert_eq!(tape.len(), at + HEADER_BODY_SIZE);
                tape.push(body_size as f64);
                let props = spec::properties(class_id).expect("a class the core knows");
                let mut decoder = Decoder { strings: &mut self.strings, tape, base: properties.start };
                decoder.properties(props, &mut Reader::new(&read[properties])).map(|()| at)
            }
            Event::Message { channel, id, args, class_id, properties, body_size, content } => {
                let at = tape.begin_message(channel, id, body_size, content);
                let method = spec::method(id).expect("a method the core knows");
                let props = spec::properties(class_id).expect("a class the core knows");
                let mut decoder = Decoder { strings: &mut self.strings, tape, base: args.start };
                decoder.method_args(method, &mut Reader::new(&read[args])).and_then(|()| {
                    decoder.tape.mark_message_properties(at);
                    decoder.base = properties.start;
                    decoder.properties(props, &mut Reader::new(&read[properties]))
                }).map(|()| at)
            }
            Event::Body { channel, content } => Ok(tape.body(channel, content)),
            Event::Heartbeat { channel } => Ok(tape.begin_event(TapeEvent::Heartbeat, channel, 0)),
            Event::ChannelError { channel, code, text, blamed } => Ok(tape.channel_error(channel, code, text, blamed)),
            Event::ConnectionError { code, text } => Ok(tape.error_event(code, text)),
        };
        match at {
            Ok(at) => {
                self.tape.end_event(at);
                Ok(())
            }
            Err(e) => {
                self.tape.abandon_event(start, objects);
                Err(e)
            }
        }
    }
}

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

    /// Starts a body frame's event: a small body goes into this read's content slab, a larger
    /// one becomes a Buffer of its own.
    fn body(&mut self, channel: u16, content: Content) -> usize {
        match content {
            Content::Read(range) if range.len() <= POOLED_BODY_MAX => {
                let at = self.begin_event(TapeEvent::PooledBody, channel, 0);
                debug_assert_eq!(self.slots.len(), at + POOLED_BODY_OFFSET);
                debug_assert_eq!(POOLED_BODY_LENGTH, POOLED_BODY_OFFSET + 1);
                let offset = self.pool(range.start, range.len());
                self.slots.extend_from_slice(&[offset, range.len() as f64]);
                at
            }
            content => {
                let object = self.content_object(content);
                let at = self.begin_event(TapeEvent::Body, channel, 0);
                debug_assert_eq!(self.slots.len(), at + BODY_CONTENT);
                self.slots.push(object);
                at
            }
        }
    }

    /// The object index of a body given a Buffer of its own.
    fn content_object(&mut self, content: Content) -> f64 {
        self.object(match content {
            Content::Empty => Obj::Content(Vec::new()),
            Content::Read(range) => Obj::Bytes { start: range.start, len: range.len() },
            Content::Assembled(bytes) => Obj::Content(bytes),
        })
    }

    /// Adds `start..start + len` of the decoded buffer to the content slab; returns its offset there.
    fn pool(&mut self, start: usize, len: usize) -> f64 {
        let offset = self.pooled_bytes;
        self.pooled.push((start, len));
        self.pooled_bytes += len;
        offset as f64
    }

    /// Starts a whole message's event: its fixed slots, then the method's arguments are to
    /// follow, then [`mark_message_properties`](Self::mark_message_properties) and its
    /// properties, then [`end_event`](Self::end_event).
    fn begin_message(&mut self, channel: u16, method_id: u32, body_size: u64, content: Content) -> usize {
        let at = self.begin_event(TapeEvent::Message, channel, method_id);
        debug_assert_eq!(self.slots.len(), at + MESSAGE_BODY_SIZE);
        debug_assert_eq!(
            [MESSAGE_CONTENT, MESSAGE_OFFSET, MESSAGE_LENGTH, MESSAGE_PROPERTIES, MESSAGE_ARGUMENTS],
            [1, 2, 3, 4, 5].map(|n| MESSAGE_BODY_SIZE + n)
        );
        let (object, offset, len) = match content {
            Content::Empty => (-1.0, 0.0, 0.0),
            Content::Read(range) if range.len() <= POOLED_BODY_MAX => (-1.0, self.pool(range.start, range.len()), range.len() as f64),
            content => (self.content_object(content), 0.0, 0.0),
        };
        self.slots.extend_from_slice(&[body_size as f64, object, offset, len, 0.0]);
        at
    }

    /// Where the message event begun at `at` has its properties: from here on.
    fn mark_message_properties(&mut self, at: usize) {
        self.slots[at + MESSAGE_PROPERTIES] = (self.slots.len() - at) as f64;
    }

    /// Starts the event of a channel error: its code, text and the method blamed.
    fn channel_error(&mut self, channel: u16, code: u16, text: String, blamed: u32) -> usize {
        let text = self.object(Obj::Text(text));
        let at = self.begin_event(TapeEvent::ChannelError, channel, code as u32);
        debug_assert_eq!(self.slots.len() + 1, at + CHANNEL_ERROR_METHOD);
        self.slots.extend_from_slice(&[text, blamed as f64]);
        at
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

    /// Starts the event of a connection error.
    fn error_event(&mut self, code: u16, message: String) -> usize {
        let text = self.object(Obj::Text(message));
        let at = self.begin_event(TapeEvent::ConnectionError, 0, code as u32);
        debug_assert_eq!(self.slots.len(), at + CONNECTION_ERROR_TEXT);
        self.slots.push(text);
        at
    }

    /// Slots of the whole tape as JS reads it.
    pub fn total_slots(&self) -> usize {
        TAPE_STRING_PAIRS + 2 * self.new_strings.len() + self.slots.len()
    }

    /// Writes the whole tape as JS reads it, the string-table header and then the events,
    /// into `out` (of exactly [`total_slots`](Self::total_slots) slots).
    pub fn write_slots(&self, out: &mut [f64]) {
        let (header, events) = out.split_at_mut(out.len() - self.slots.len());
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
