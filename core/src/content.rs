//! The content rules of a channel: a delivery, return or get-ok is its method frame, then a
//! header, then (unless the header declares an empty body) body frames adding up to exactly
//! the declared size, all on its channel; other methods may come in between. This module is
//! the one owner of those rules: [`Stage`] is where a channel is in a message, and a
//! [`Violation`] is the rule broken, one for each error amqplib's channel raises, with the
//! spec's code (505, unexpected frame) and what its message needs (JS words it).
//! `connection.rs` applies them to a channel from the channel.open-ok it receives until the
//! channel closes. Elsewhere (channel 0, a channel not opened by the peer, as when
//! amqplib's tests play the server) frames are handed on one by one, as amqplib's
//! connection hands them to its channels.

use crate::boundary::ViolationKind;
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

/// A channel error: the content rule a channel broke, with what amqplib's message about it
/// needs. The words are JS's (lib/format.js, `violationText`), which has them as amqplib's
/// channel does; the tape carries [`Violation::kind`] and these fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Violation {
    /// A method or body frame where a content header was due; `blamed` is the method, or 0
    /// for a body frame.
    HeaderExpected { blamed: u32 },
    /// A method or content header where a body frame was due; `blamed` is the method, or the
    /// header's class.
    ContentExpected { blamed: u32 },
    /// A content header (of class `class_id`) or, when `class_id` is 0, a body frame where no
    /// message was under way: amqplib expected a delivery or a return.
    DeliveryExpected { channel: u16, class_id: u16 },
    /// Body frames adding up to more than the `body_size` the header declared.
    TooMuchContent { body_size: u64 },
}

impl Violation {
    /// A content method while the previous message is unfinished.
    pub fn method_out_of_turn(stage: &Stage, method_id: u32) -> Self {
        match stage {
            Stage::Body { .. } => Violation::ContentExpected { blamed: method_id },
            _ => Violation::HeaderExpected { blamed: method_id },
        }
    }

    /// A header anywhere but after a content method.
    pub fn header_out_of_turn(stage: &Stage, channel: u16, class_id: u16) -> Self {
        match stage {
            Stage::Body { .. } => Violation::ContentExpected { blamed: class_id as u32 },
            _ => Violation::DeliveryExpected { channel, class_id },
        }
    }

    /// A body frame anywhere but after a header.
    pub fn body_out_of_turn(stage: &Stage, channel: u16) -> Self {
        match stage {
            Stage::Header { .. } => Violation::HeaderExpected { blamed: 0 },
            _ => Violation::DeliveryExpected { channel, class_id: 0 },
        }
    }

    /// Body frames adding up to more than the header declared.
    pub fn too_much_content(body_size: u64) -> Self {
        Violation::TooMuchContent { body_size }
    }

    /// The reply code the channel closes with: every content rule broken is an unexpected
    /// frame, as amqplib's channel reports it.
    pub fn code(&self) -> u16 {
        spec::UNEXPECTED_FRAME as u16
    }

    /// Which rule, as the tape numbers it (generated, so JS's table of words has one entry
    /// for each).
    pub fn kind(&self) -> ViolationKind {
        match self {
            Violation::HeaderExpected { .. } => ViolationKind::HeaderExpected,
            Violation::ContentExpected { .. } => ViolationKind::ContentExpected,
            Violation::DeliveryExpected { .. } => ViolationKind::DeliveryExpected,
            Violation::TooMuchContent { .. } => ViolationKind::TooMuchContent,
        }
    }

    /// The method (or properties class) the error blames, for its `classId` and `methodId`;
    /// 0 for a body frame, which amqplib's channel blames on no method.
    pub fn blamed(&self) -> u32 {
        match *self {
            Violation::HeaderExpected { blamed } | Violation::ContentExpected { blamed } => blamed,
            Violation::DeliveryExpected { class_id, .. } => class_id as u32,
            Violation::TooMuchContent { .. } => 0,
        }
    }

    /// The declared body size, for the variant whose words have it; 0 otherwise.
    pub fn body_size(&self) -> u64 {
        match *self {
            Violation::TooMuchContent { body_size } => body_size,
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(id: u32) -> Held {
        Held { id, range: 0..0 }
    }

    fn in_body() -> Stage {
        Stage::Body { method: held(spec::BASIC_DELIVER.id), properties: held(60), body_size: 9, assembly: Assembly::default() }
    }

    #[test]
    fn each_violation_carries_its_code_kind_and_parameters() {
        let header = Stage::Header { method: held(spec::BASIC_DELIVER.id) };
        let deliver = spec::BASIC_DELIVER.id;
        // (violation, the variant expected, kind, blamed, body size)
        let cases = [
            (Violation::method_out_of_turn(&header, deliver), Violation::HeaderExpected { blamed: deliver }, ViolationKind::HeaderExpected, deliver, 0),
            (Violation::body_out_of_turn(&header, 4), Violation::HeaderExpected { blamed: 0 }, ViolationKind::HeaderExpected, 0, 0),
            (Violation::method_out_of_turn(&in_body(), deliver), Violation::ContentExpected { blamed: deliver }, ViolationKind::ContentExpected, deliver, 0),
            (Violation::header_out_of_turn(&in_body(), 4, 60), Violation::ContentExpected { blamed: 60 }, ViolationKind::ContentExpected, 60, 0),
            (Violation::header_out_of_turn(&Stage::Idle, 4, 60), Violation::DeliveryExpected { channel: 4, class_id: 60 }, ViolationKind::DeliveryExpected, 60, 0),
            (Violation::body_out_of_turn(&Stage::Idle, 4), Violation::DeliveryExpected { channel: 4, class_id: 0 }, ViolationKind::DeliveryExpected, 0, 0),
            (Violation::too_much_content(9), Violation::TooMuchContent { body_size: 9 }, ViolationKind::TooMuchContent, 0, 9),
        ];
        for (violation, expected, kind, blamed, body_size) in cases {
            assert_eq!(violation, expected);
            assert_eq!(violation.code(), spec::UNEXPECTED_FRAME as u16, "{violation:?}");
            assert_eq!(violation.kind(), kind, "{violation:?}");
            assert_eq!(violation.blamed(), blamed, "{violation:?}");
            assert_eq!(violation.body_size(), body_size, "{violation:?}");
        }
    }

    #[test]
    fn every_kind_the_tape_numbers_is_some_violation_s() {
        let made: Vec<ViolationKind> = [
            Violation::HeaderExpected { blamed: 0 },
            Violation::ContentExpected { blamed: 0 },
            Violation::DeliveryExpected { channel: 1, class_id: 0 },
            Violation::TooMuchContent { body_size: 0 },
        ]
        .iter()
        .map(Violation::kind)
        .collect();
        assert_eq!(made, ViolationKind::ALL);
    }
}
