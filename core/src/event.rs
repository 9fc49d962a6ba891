//! What the connection core yields for what it reads, polled one by one
//! ([`EventSource::poll_event`]), as quinn-proto's endpoint is polled. Payloads are ranges
//! of the core's read buffer ([`EventSource::read_buffer`]), valid until its next receive: method arguments and properties are decoded only by whoever takes the event (the
//! bindings' serializer, `tape.rs`), once, straight into what JS is handed.

use crate::boundary::ErrorId;
use crate::codec::{CodecError, Report};
use crate::content::Violation;
use crate::frame::FrameError;
use crate::spec::FRAME_ERROR;
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
    /// Our close of the channel is confirmed (its close-ok): it has ended (`channels.rs`).
    ChannelClosed { channel: u16 },
    /// The stream can no longer be trusted: nothing more is read from it.
    ConnectionError { error: ProtocolError },
}

/// Why the stream can no longer be trusted: a connection error, with its reply code.
#[derive(Debug, Clone, PartialEq)]
pub enum ProtocolError {
    /// A frame's envelope: its frame-end octet, or a size over the frame max.
    Framing(FrameError),
    /// A frame of a type the spec has none of.
    UnknownFrameType(u8),
    /// A method id or properties class unknown, or arguments or properties that do not decode.
    Decoding(CodecError),
}

impl ProtocolError {
    /// The reply code the connection closes with: each is a frame error in the spec's terms.
    pub fn code(&self) -> u16 {
        FRAME_ERROR as u16
    }
}

impl From<CodecError> for ProtocolError {
    fn from(e: CodecError) -> Self {
        ProtocolError::Decoding(e)
    }
}

impl ProtocolError {
    /// What JS words the error from (lib/core_errors.js), as amqplib words it.
    pub fn report(&self) -> Report<'_> {
        match self {
            ProtocolError::Framing(e) => e.report(),
            ProtocolError::UnknownFrameType(kind) => Report::numbers(ErrorId::UnknownFrameType, &[f64::from(*kind)]),
            ProtocolError::Decoding(e) => e.report(),
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::Param;

    #[test]
    fn each_connection_error_carries_its_code_and_reports_its_parameters() {
        let number = Param::Number;
        let cases = [
            (ProtocolError::UnknownFrameType(9), ErrorId::UnknownFrameType, vec![number(9.0)]),
            (ProtocolError::Framing(FrameError::BadFrameEnd), ErrorId::BadFrameEnd, vec![]),
            (ProtocolError::Framing(FrameError::TooLarge { size: 65536, max: 16384 }), ErrorId::FrameSize, vec![number(65536.0), number(16384.0)]),
            (ProtocolError::Decoding(CodecError::UnknownMethod), ErrorId::UnknownMethod, vec![]),
            (ProtocolError::Decoding(CodecError::Truncated), ErrorId::Truncated, vec![]),
        ];
        for (error, id, params) in cases {
            assert_eq!(error.code(), FRAME_ERROR as u16, "{error:?}");
            assert_eq!(error.report(), Report { id, params });
        }
    }
}
