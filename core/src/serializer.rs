//! The bindings' serializer: each read's events (`event.rs`), taken from the connection core,
//! onto the tape JS reads (`tape.rs`, laid out as `boundary.rs` says), each method's arguments
//! and each message's properties decoded once, straight onto it, with the connection's
//! interned-string table (`strings.rs`).

use crate::boundary::*;
use crate::codec::{Decoder, Param, Reader};
use crate::content::Violation;
use crate::event::{Content, Event, EventSource, ProtocolError};
use crate::spec;
use crate::strings::Interner;
use crate::tape::{Obj, Tape};

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
    /// are the core's to judge ([`EventSource::decoding_failed`]): its connection error takes
    /// the place of the rest of the read.
    pub fn serialize_read(&mut self, core: &mut impl EventSource) {
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
                let at = begin_message(tape, channel, id, body_size, content);
                let method = spec::method(id).expect("a method the core knows");
                let props = spec::properties(class_id).expect("a class the core knows");
                let mut decoder = Decoder { strings: &mut self.strings, tape, base: args.start };
                decoder.method_args(method, &mut Reader::new(&read[args])).and_then(|()| {
                    mark_message_properties(decoder.tape, at);
                    decoder.base = properties.start;
                    decoder.properties(props, &mut Reader::new(&read[properties]))
                }).map(|()| at)
            }
            Event::Body { channel, content } => Ok(body(tape, channel, content)),
            Event::Heartbeat { channel } => Ok(tape.begin_event(TapeEvent::Heartbeat, channel, 0)),
            Event::ChannelError { channel, violation } => Ok(channel_error(tape, channel, violation)),
            Event::ChannelClosed { channel } => Ok(tape.begin_event(TapeEvent::ChannelClosed, channel, 0)),
            Event::ConnectionError { error } => Ok(error_event(tape, error)),
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

/// Starts a body frame's event: a small body goes into this read's content slab, a larger
/// one becomes a Buffer of its own.
fn body(tape: &mut Tape, channel: u16, content: Content) -> usize {
    match content {
        Content::Read(range) if range.len() <= POOLED_BODY_MAX => {
            let at = tape.begin_event(TapeEvent::PooledBody, channel, 0);
            debug_assert_eq!(tape.len(), at + POOLED_BODY_OFFSET);
            debug_assert_eq!(POOLED_BODY_LENGTH, POOLED_BODY_OFFSET + 1);
            let offset = tape.pool(range.start, range.len());
            tape.extend(&[offset, range.len() as f64]);
            at
        }
        content => {
            let object = content_object(tape, content);
            let at = tape.begin_event(TapeEvent::Body, channel, 0);
            debug_assert_eq!(tape.len(), at + BODY_CONTENT);
            tape.push(object);
            at
        }
    }
}

/// The object index of a body given a Buffer of its own.
fn content_object(tape: &mut Tape, content: Content) -> f64 {
    tape.object(match content {
        Content::Empty => Obj::Content(Vec::new()),
        Content::Read(range) => Obj::Bytes { start: range.start, len: range.len() },
        Content::Assembled(bytes) => Obj::Content(bytes),
    })
}

/// Starts a whole message's event: its fixed slots, then the method's arguments are to
/// follow, then [`mark_message_properties`] and its properties, then [`Tape::end_event`].
fn begin_message(tape: &mut Tape, channel: u16, method_id: u32, body_size: u64, content: Content) -> usize {
    let at = tape.begin_event(TapeEvent::Message, channel, method_id);
    debug_assert_eq!(tape.len(), at + MESSAGE_BODY_SIZE);
    debug_assert_eq!(
        [MESSAGE_CONTENT, MESSAGE_OFFSET, MESSAGE_LENGTH, MESSAGE_PROPERTIES, MESSAGE_ARGUMENTS],
        [1, 2, 3, 4, 5].map(|n| MESSAGE_BODY_SIZE + n)
    );
    let (object, offset, len) = match content {
        Content::Empty => (-1.0, 0.0, 0.0),
        Content::Read(range) if range.len() <= POOLED_BODY_MAX => (-1.0, tape.pool(range.start, range.len()), range.len() as f64),
        content => (content_object(tape, content), 0.0, 0.0),
    };
    tape.extend(&[body_size as f64, object, offset, len, 0.0]);
    at
}

/// Where the message event begun at `at` has its properties: from here on.
fn mark_message_properties(tape: &mut Tape, at: usize) {
    tape.set(at + MESSAGE_PROPERTIES, (tape.len() - at) as f64);
}

/// Starts the event of a channel error: its code, then which rule was broken and its
/// parameters (JS words the message from them, lib/format.js).
fn channel_error(tape: &mut Tape, channel: u16, violation: Violation) -> usize {
    let at = tape.begin_event(TapeEvent::ChannelError, channel, violation.code() as u32);
    debug_assert_eq!(tape.len(), at + CHANNEL_ERROR_VIOLATION);
    debug_assert_eq!([CHANNEL_ERROR_METHOD, CHANNEL_ERROR_BODY_SIZE], [1, 2].map(|n| CHANNEL_ERROR_VIOLATION + n));
    tape.extend(&[violation.kind() as u8 as f64, violation.blamed() as f64, violation.body_size() as f64]);
    at
}

/// Starts the event of a connection error: its code, which error and its parameters (JS
/// words the message from them, lib/core_errors.js): a number as it is, a text as an object.
fn error_event(tape: &mut Tape, error: ProtocolError) -> usize {
    let report = error.report();
    let mut params = [0.0; ERROR_PARAMS];
    for (slot, param) in params.iter_mut().zip(&report.params) {
        *slot = match *param {
            Param::Number(n) => n,
            Param::Text(text) => tape.object(Obj::Text(text.to_owned())),
        };
    }
    let at = tape.begin_event(TapeEvent::ConnectionError, 0, error.code() as u32);
    debug_assert_eq!(tape.len(), at + CONNECTION_ERROR_ERROR);
    debug_assert_eq!(CONNECTION_ERROR_PARAMS, CONNECTION_ERROR_ERROR + 1);
    tape.push(report.id as u8 as f64);
    tape.extend(&params);
    at
}
