//! What the connection core yields for what it reads, polled one by one
//! ([`EventSource::poll_event`]), as quinn-proto's endpoint is polled. Payloads are ranges
//! of the core's read buffer ([`EventSource::read_buffer`]), valid until its next receive: method arguments and properties are decoded only by whoever takes the event (the
//! bindings' serializer, `tape.rs`), once, straight into what JS is handed.

use crate::codec::CodecError;
use crate::content::Violation;
use std::ops::Range;

/// Where events come from, as whoever takes them sees it (the connection core, for the
/// bindings' serializer).
pub trait EventSource {
    /// The next event of the last read, in the order the frames came.
    fn poll_event(&mut self) -> Option<Event>;
    /// The buffer the events' ranges refer to.
    fn read_buffer(&self) -> &[u8];
    /// The arguments or properties of an event taken from this read did not decode.
    fn decoding_failed(&mut self, e: CodecError);
}

#[derive(Debug, PartialEq)]
pub enum Event {
    /// A method frame without content (or any method on a channel the peer has not opened).
    Method { channel: u16, id: u32, args: Range<usize> },
    /// A content header on a channel the peer has not opened.
    Header { channel: u16, class_id: u16, body_size: u64, properties: Range<usize> },
    /// A body frame on a channel the peer has not opened.
    Body { channel: u16, content: Content },
    /// A whole delivery, return or get-ok: its method, properties and body.
    Message { channel: u16, id: u32, args: Range<usize>, class_id: u16, properties: Range<usize>, body_size: u64, content: Content },
    Heartbeat { channel: u16 },
    /// A channel broke the content rules (`content.rs`): it is to close with this error.
    ChannelError { channel: u16, violation: Violation },
    /// The stream can no longer be trusted: nothing more is read from it.
    ConnectionError { code: u16, text: String },
}

/// A body's bytes.
#[derive(Debug, PartialEq)]
pub enum Content {
    Empty,
    /// In one frame: this range of the read buffer.
    Read(Range<usize>),
    /// Assembled from several frames (or read straight into), exactly its size.
    Assembled(Vec<u8>),
}

impl Content {
    /// The bytes, given the read buffer the event came with.
    pub fn bytes<'a>(&'a self, read: &'a [u8]) -> &'a [u8] {
        match self {
            Content::Empty => &[],
            Content::Read(range) => &read[range.clone()],
            Content::Assembled(bytes) => bytes,
        }
    }
}
