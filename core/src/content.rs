//! The content rules of a channel: a delivery, return or get-ok is its method frame, then a
//! header, then (unless the header declares an empty body) body frames adding up to exactly
//! the declared size, all on its channel; other methods may come in between. This module is
//! the one owner of those rules: [`Stage`] is where a channel is in a message, and the
//! errors are the ones amqplib's channel raises, with the spec's code (505, unexpected
//! frame). `connection.rs` applies them to a channel from the channel.open-ok it receives
//! until the channel closes. Elsewhere (channel 0, a channel not opened by the peer, as when
//! amqplib's tests play the server) frames are handed on one by one, as amqplib's
//! connection hands them to its channels.

use crate::spec;
use crate::spec_types::MethodSpec;
use std::ops::Range;

/// The most a content header can make us allocate before its body arrives.
pub const MAX_CONTENT_RESERVE: u64 = 8 * 1024 * 1024;

/// Whether a method received from the server is followed by content: those the spec says
/// carry content, but basic.publish, which only a client sends (one from the server is handed
/// on alone, as amqplib's channel takes any method it has no case for).
pub fn carries_content(method: &MethodSpec) -> bool {
    method.has_content && method.id != spec::BASIC_PUBLISH.id
}

/// A frame's payload held in the read buffer until its message is whole (the connection
/// moves it to the front of the buffer when a read ends before that).
#[derive(Debug, Clone, PartialEq)]
pub struct Held {
    /// The method id, or the class id of a header.
    pub id: u32,
    /// The method's arguments, or a header's flags and properties, in the read buffer.
    pub range: Range<usize>,
}

/// A message body being assembled from more than one frame.
#[derive(Debug, Default)]
pub struct Assembly {
    pub remaining: u64,
    pub content: Vec<u8>,
}

impl Assembly {
    /// Adds a piece of the body that came through the read buffer. Nothing is reserved until
    /// the first piece, and then at most [`MAX_CONTENT_RESERVE`] ahead of the bytes.
    pub fn append(&mut self, piece: &[u8]) {
        if self.content.capacity() == 0 {
            self.content.reserve_exact(self.remaining.min(MAX_CONTENT_RESERVE) as usize);
        }
        self.content.extend_from_slice(piece);
        self.remaining -= piece.len() as u64;
    }
}

/// Where an open channel is in a message.
#[derive(Debug)]
pub enum Stage {
    /// Between messages.
    Idle,
    /// A method that carries content has come; its header is next.
    Header { method: Held },
    /// The header has come; body frames are next, `assembly.remaining` bytes of them.
    Body { method: Held, properties: Held, body_size: u64, assembly: Assembly },
    /// The channel broke the rules and was told so: its content frames are dropped until
    /// it is closed or opened again.
    Refused,
}

impl Stage {
    /// The frame payloads this stage keeps in the read buffer.
    pub fn held_mut(&mut self) -> impl Iterator<Item = &mut Range<usize>> {
        let (first, second) = match self {
            Stage::Header { method } => (Some(&mut method.range), None),
            Stage::Body { method, properties, .. } => (Some(&mut method.range), Some(&mut properties.range)),
            Stage::Idle | Stage::Refused => (None, None),
        };
        first.into_iter().chain(second)
    }
}

/// A channel error: what the channel is told, as amqplib's words it.
#[derive(Debug, Clone, PartialEq)]
pub struct Violation {
    pub text: String,
    /// The method (or properties class) blamed; 0 for a body frame.
    pub blamed: u32,
}

impl Violation {
    fn new(text: impl Into<String>, blamed: u32) -> Self {
        Violation { text: text.into(), blamed }
    }

    /// A content method while the previous message is unfinished.
    pub fn method_out_of_turn(stage: &Stage, method_id: u32) -> Self {
        match stage {
            Stage::Body { .. } => Violation::new(CONTENT_EXPECTED, method_id),
            _ => Violation::new(HEADER_EXPECTED, method_id),
        }
    }

    /// A header anywhere but after a content method.
    pub fn header_out_of_turn(stage: &Stage, channel: u16, class_id: u16) -> Self {
        match stage {
            Stage::Body { .. } => Violation::new(CONTENT_EXPECTED, class_id as u32),
            _ => Violation::new(format!("{METHOD_EXPECTED}<BasicProperties channel:{channel}>"), class_id as u32),
        }
    }

    /// A body frame anywhere but after a header.
    pub fn body_out_of_turn(stage: &Stage, channel: u16) -> Self {
        match stage {
            Stage::Header { .. } => Violation::new(HEADER_EXPECTED, 0),
            // amqplib renders a body frame's missing size as NaN.
            _ => Violation::new(format!("{METHOD_EXPECTED}<Content channel:{channel} size:NaN>"), 0),
        }
    }

    /// Body frames adding up to more than the header declared.
    pub fn too_much_content(body_size: u64) -> Self {
        Violation::new(format!("Too much content sent! Expected {body_size} bytes"), 0)
    }
}

const METHOD_EXPECTED: &str = "Expected BasicDeliver or BasicReturn; got ";
const HEADER_EXPECTED: &str = "Expected headers frame after delivery";
const CONTENT_EXPECTED: &str = "Expected content frame after headers";
