//! AMQP frames: parsing the frame envelope in place, and writing frames back to back into
//! the connection's one output buffer.
//!
//! ```text
//! 0      1         3             7                  size+7 size+8
//! +------+---------+-------------+  +------------+  +-----------+
//! | type | channel |    size     |  |  payload   |  | frame-end |
//! +------+---------+-------------+  +------------+  +-----------+
//! ```

use crate::boundary::ErrorId;
use crate::codec::{self, FrameBudget, Value};
use crate::spec::{FRAME_BODY, FRAME_END, FRAME_HEADER, FRAME_HEARTBEAT, FRAME_METHOD};
use crate::spec_types::{MethodSpec, PropertiesSpec};

pub const HEADER_BYTES: usize = 7;
/// Envelope bytes around a payload: the 7-byte header and the frame-end octet.
pub const OVERHEAD: usize = 8;
pub const HEARTBEAT: [u8; 8] = [FRAME_HEARTBEAT as u8, 0, 0, 0, 0, 0, 0, FRAME_END as u8];

/// The envelope of one complete frame found at the start of a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Envelope {
    pub kind: u8,
    pub channel: u16,
    /// Payload length; the whole frame is `size + OVERHEAD` bytes.
    pub size: usize,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// The octet after the payload is not frame-end.
    BadFrameEnd,
    /// The frame declares a payload longer than the peer may send (`maxFrameSize`).
    TooLarge { size: usize, max: usize },
}

impl FrameError {
    pub fn report(&self) -> codec::Report<'static> {
        match self {
            FrameError::BadFrameEnd => codec::Report::of(ErrorId::BadFrameEnd),
            FrameError::TooLarge { size, max } => codec::Report::numbers(ErrorId::FrameSize, &[*size as f64, *max as f64]),
        }
    }
}

/// Reads the envelope of the first frame in `buf`: `Ok(None)` until the whole frame has
/// arrived. `max_payload` is checked as soon as the size is known, so an oversized frame is
/// refused before its bytes are waited for.
pub fn parse_envelope(buf: &[u8], max_payload: usize) -> Result<Option<Envelope>, FrameError> {
    if buf.len() < HEADER_BYTES {
        return Ok(None);
    }
    let size = u32::from_be_bytes([buf[3], buf[4], buf[5], buf[6]]) as usize;
    if size > max_payload {
        return Err(FrameError::TooLarge { size, max: max_payload });
    }
    if buf.len() < size + OVERHEAD {
        return Ok(None);
    }
    if buf[HEADER_BYTES + size] != FRAME_END as u8 {
        return Err(FrameError::BadFrameEnd);
    }
    Ok(Some(Envelope { kind: buf[0], channel: u16::from_be_bytes([buf[1], buf[2]]), size }))
}

/// Starts a frame at the end of `out`; returns where it starts, for [`end_frame`].
fn begin_frame(out: &mut Vec<u8>, kind: u32, channel: u16) -> usize {
    let at = out.len();
    out.push(kind as u8);
    out.extend_from_slice(&channel.to_be_bytes());
    out.extend_from_slice(&[0; 4]);
    at
}

fn end_frame(out: &mut Vec<u8>, at: usize) {
    let size = (out.len() - at - HEADER_BYTES) as u32;
    out[at + 3..at + 7].copy_from_slice(&size.to_be_bytes());
    out.push(FRAME_END as u8);
}

/// Runs `body` to write a frame's payload, within the budget of a frame of at most
/// `frame_max` bytes; on error, removes the partial frame, so the output buffer only ever
/// holds whole frames.
fn frame_with<F>(out: &mut Vec<u8>, kind: u32, channel: u16, frame_max: usize, body: F) -> codec::Result<()>
where
    F: FnOnce(&mut Vec<u8>, FrameBudget) -> codec::Result<()>,
{
    let at = begin_frame(out, kind, channel);
    match body(out, FrameBudget::new(at, frame_max)) {
        Ok(()) => {
            end_frame(out, at);
            Ok(())
        }
        Err(e) => {
            out.truncate(at);
            Err(e)
        }
    }
}

/// A method frame; a user's tables are read no further than a frame of `frame_max` holds.
pub fn write_method<V: Value>(out: &mut Vec<u8>, channel: u16, method: &MethodSpec, fields: &V, frame_max: usize) -> codec::Result<()> {
    frame_with(out, FRAME_METHOD, channel, frame_max, |out, budget| {
        out.extend_from_slice(&method.id.to_be_bytes());
        codec::encode_args(out, method, fields, budget)
    })
}

/// A method that has no arguments (channel.close-ok, say).
pub fn write_bare_method(out: &mut Vec<u8>, channel: u16, method: &MethodSpec) {
    debug_assert!(method.args.is_empty(), "{} has arguments", method.name);
    let at = begin_frame(out, FRAME_METHOD, channel);
    out.extend_from_slice(&method.id.to_be_bytes());
    end_frame(out, at);
}

/// basic.ack, basic.nack or basic.reject from its arguments: a delivery tag, then its flags
/// packed in one octet (the shape all three share). These go out once per message consumed,
/// so they skip reading a fields object.
pub fn write_acknowledgement(out: &mut Vec<u8>, channel: u16, method: &MethodSpec, delivery_tag: u64, flags: u8) {
    let at = begin_frame(out, FRAME_METHOD, channel);
    out.extend_from_slice(&method.id.to_be_bytes());
    out.extend_from_slice(&delivery_tag.to_be_bytes());
    out.push(flags);
    end_frame(out, at);
}

/// Makes the basic.ack frame that ends `out` acknowledge every delivery up to `delivery_tag`:
/// its tag replaced, its `multiple` bit set.
pub fn widen_acknowledgement(out: &mut [u8], delivery_tag: u64) {
    let end = out.len();
    // The frame ends with the tag, the flags octet and the frame-end octet.
    out[end - 10..end - 2].copy_from_slice(&delivery_tag.to_be_bytes());
    out[end - 2] |= 1;
}

/// The arguments of a basic.publish, one by one rather than in a fields object.
pub struct Publish<'a, V> {
    pub exchange: &'a V,
    pub routing_key: &'a V,
    pub mandatory: bool,
    pub immediate: bool,
    pub properties: &'a V,
    /// The properties to read: those that are neither undefined nor null.
    pub present: u16,
}

/// A basic.publish's method and header frames (ticket 0), for a body of `body_size` bytes; on
/// an encoding error nothing of them is left in `out`. No session is involved, so JS values
/// can be read (and getters run) while none is borrowed.
pub fn write_publish_head<V: Value>(out: &mut Vec<u8>, channel: u16, publish: &Publish<V>, body_size: usize, frame_max: usize) -> codec::Result<()> {
    let start = out.len();
    let written = write_publish_method(out, channel, publish, frame_max)
        .and_then(|()| write_header(out, channel, &crate::spec::BASIC_PROPERTIES, body_size as u64, publish.properties, publish.present, frame_max));
    if written.is_err() {
        out.truncate(start);
    }
    written
}

fn write_publish_method<V: Value>(out: &mut Vec<u8>, channel: u16, publish: &Publish<V>, frame_max: usize) -> codec::Result<()> {
    let args = crate::spec::BASIC_PUBLISH.args;
    frame_with(out, FRAME_METHOD, channel, frame_max, |out, _| {
        out.extend_from_slice(&crate::spec::BASIC_PUBLISH.id.to_be_bytes());
        out.extend_from_slice(&[0, 0]); // ticket
        codec::encode_shortstr_arg(out, &args[1], publish.exchange)?;
        codec::encode_shortstr_arg(out, &args[2], publish.routing_key)?;
        out.push(publish.mandatory as u8 | (publish.immediate as u8) << 1);
        Ok(())
    })
}

/// A content header frame; only the properties flagged in `candidates` are read, and a
/// user's tables no further than a frame of `frame_max` holds.
pub fn write_header<V: Value>(
    out: &mut Vec<u8>,
    channel: u16,
    props: &PropertiesSpec,
    body_size: u64,
    fields: &V,
    candidates: u16,
    frame_max: usize,
) -> codec::Result<()> {
    frame_with(out, FRAME_HEADER, channel, frame_max, |out, budget| {
        out.extend_from_slice(&props.class_id.to_be_bytes());
        out.extend_from_slice(&[0, 0]); // weight, unused
        out.extend_from_slice(&body_size.to_be_bytes());
        codec::encode_properties(out, props, fields, candidates, budget)
    })
}

/// Bytes [`write_body`] writes for a body of `len` bytes.
pub fn body_frames_len(len: usize, frame_max: usize) -> usize {
    let chunk = frame_max.saturating_sub(OVERHEAD).max(1);
    len + len.div_ceil(chunk) * OVERHEAD
}

/// Where the body size sits in a method frame followed by a header frame (whose payload is
/// class, weight, the 8-byte size, then flags and properties).
pub fn body_size_at(method_and_header: &[u8]) -> usize {
    let method_len = u32::from_be_bytes(method_and_header[3..7].try_into().unwrap()) as usize + OVERHEAD;
    method_len + HEADER_BYTES + 4
}

/// Writes `content` as body frames of at most `frame_max` bytes each (no frame when empty).
/// Returns how many frames it wrote.
pub fn write_body(out: &mut Vec<u8>, channel: u16, content: &[u8], frame_max: usize) -> u64 {
    let chunk = frame_max.saturating_sub(OVERHEAD).max(1);
    out.reserve(body_frames_len(content.len(), frame_max));
    for piece in content.chunks(chunk) {
        let at = begin_frame(out, FRAME_BODY, channel);
        out.extend_from_slice(piece);
        end_frame(out, at);
    }
    content.len().div_ceil(chunk) as u64
}

/// How many whole frames `frames` holds, one after the other.
pub fn count_frames(frames: &[u8]) -> u64 {
    let mut count = 0;
    let mut rest = frames;
    while rest.len() >= HEADER_BYTES {
        let size = u32::from_be_bytes([rest[3], rest[4], rest[5], rest[6]]) as usize;
        rest = rest.get(size + OVERHEAD..).unwrap_or_default();
        count += 1;
    }
    count
}

/// Calls `f(channel, method id, arguments)` for each whole method frame of `frames` on a
/// channel other than 0.
pub fn each_method(frames: &[u8], mut f: impl FnMut(u16, u32, &[u8])) {
    let mut rest = frames;
    while rest.len() >= HEADER_BYTES {
        let size = u32::from_be_bytes([rest[3], rest[4], rest[5], rest[6]]) as usize;
        let channel = u16::from_be_bytes([rest[1], rest[2]]);
        if rest[0] as u32 == FRAME_METHOD && channel != 0 {
            if let Some((id, args)) = rest.get(HEADER_BYTES..HEADER_BYTES + size).and_then(|payload| payload.split_first_chunk::<4>()) {
                f(channel, u32::from_be_bytes(*id), args);
            }
        }
        rest = rest.get(size + OVERHEAD..).unwrap_or_default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_split_at_any_byte_waits_for_the_rest() {
        for cut in 0..HEARTBEAT.len() {
            assert_eq!(parse_envelope(&HEARTBEAT[..cut], 4096), Ok(None));
        }
        let env = parse_envelope(&HEARTBEAT, 4096).unwrap().unwrap();
        assert_eq!(env, Envelope { kind: 8, channel: 0, size: 0 });
    }

    #[test]
    fn bad_frame_end_and_oversize_are_refused() {
        let mut bad = HEARTBEAT;
        bad[7] = 0;
        assert_eq!(parse_envelope(&bad, 4096), Err(FrameError::BadFrameEnd));
        let big = [3, 0, 1, 0, 1, 0, 0];
        assert_eq!(parse_envelope(&big, 4096), Err(FrameError::TooLarge { size: 65536, max: 4096 }));
    }

    #[test]
    fn bodies_are_split_at_frame_max() {
        let mut out = Vec::new();
        write_body(&mut out, 3, &[7u8; 10_000], 4096);
        let mut rest = &out[..];
        let mut total = 0;
        while !rest.is_empty() {
            let env = parse_envelope(rest, 4096).unwrap().unwrap();
            assert!(env.size + OVERHEAD <= 4096);
            assert_eq!((env.kind, env.channel), (3, 3));
            total += env.size;
            rest = &rest[env.size + OVERHEAD..];
        }
        assert_eq!(total, 10_000);
    }
}
