//! The sans-IO connection core: bytes in, events out; frames in, bytes out.
//!
//! [`Connection::receive`] takes whatever the transport read, parses every complete frame into
//! typed events (`event.rs`), polled through [`EventSource`], and keeps the tail of a
//! partial frame for the next read. On a channel the peer has opened, content frames go
//! through the channel's content rules (`content.rs`): a delivery, return or get-ok is one
//! event once its body is whole, its body assembled into one `Vec` of exactly the declared
//! size (bounded up front, so a lying header cannot make us allocate what never arrives), or
//! the channel is told it broke the rules. Other frames are handed on one by one. Outgoing
//! frames are written back to back into one output buffer that the transport drains;
//! nothing here does I/O.

use crate::boundary::Refusal;
use crate::channels::{ChannelHandle, Channels, Received};
use crate::codec::{CodecError, Reader};
use crate::content::{carries_content, Assembly, Held, Stage, Violation};
use crate::event::{Content, Event, EventSource, ProtocolError};
use crate::frame::{self, parse_envelope, Envelope, OVERHEAD};
use crate::spec::{self, FRAME_BODY, FRAME_HEADER, FRAME_HEARTBEAT, FRAME_METHOD};
use std::collections::VecDeque;
use std::ops::Range;

/// The largest frame this side sends when the peers agreed on "no limit" (frameMax 0).
pub const UNTUNED_FRAME_MAX: usize = 16 * 1024 * 1024;
/// The largest payload accepted from the peer unless told otherwise (amqplib's
/// `maxFrameSize` default). It is not the negotiated frame max: some brokers send larger
/// frames unsplit (amqplib #784), and amqplib accepts them.
pub const DEFAULT_MAX_FRAME_SIZE: usize = 64 * 1024 * 1024;
/// Room made in the read buffer before each read from a socket.
pub const READ_CHUNK: usize = 64 * 1024;
/// A body frame with at least this much of its payload still to come is read from the socket
/// straight into its message's assembly, not through the read buffer.
pub const DIRECT_BODY_MIN: usize = 32 * 1024;
/// The most one direct read asks for (and reserves in the assembly ahead of the bytes).
const DIRECT_READ_MAX: usize = 1024 * 1024;

/// A body frame whose header has been parsed and whose payload's rest is read from the
/// socket into the channel's assembly, so that a large message's bytes are copied by the
/// kernel only. The frame-end octet that follows is checked by the next parse.
#[derive(Clone, Copy)]
struct DirectBody {
    channel: u16,
    payload_left: usize,
}

/// What one [`Connection::receive_with`] read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Read {
    /// Bytes the reader filled; 0 is the end of the stream.
    pub filled: usize,
    /// Bytes it was offered: a read that filled them all may have left more waiting.
    pub offered: usize,
}

pub struct Connection {
    read: Vec<u8>,
    /// Bytes at the front of `read` already parsed; dropped at the next receive (but for
    /// the frames of messages still under way, which move to the front), since the objects
    /// of the tape refer to `read` until then.
    consumed: usize,
    /// The frame max set by tuning; `None` before, when bodies are split at the spec's
    /// minimum frame size.
    frame_max: Option<usize>,
    /// The largest payload accepted, checked from a frame's header alone (`None`: no limit).
    max_frame_size: Option<usize>,
    /// Every channel's record: its state, where it is in a message, its acks, its last
    /// publish (`channels.rs`).
    pub channels: Channels,
    /// What this read brought, for [`EventSource::poll_event`].
    events: VecDeque<Event>,
    pub out: Vec<u8>,
    /// Set by a framing error (the stream can no longer be trusted) and once the buffers are
    /// released: later bytes are not parsed.
    ignoring_input: bool,
    /// Received bytes copied in memory (into the read buffer from a stream's chunk, into a
    /// body being assembled, into a Buffer for JS), for the benchmarks and tests; what a
    /// socket read puts in the read buffer is not a copy.
    pub bytes_copied: u64,
    /// Frames parsed and frames put in the output (a widened ack is none), for the
    /// application's counters.
    pub frames_received: u64,
    pub frames_sent: u64,
    /// The body frame being read straight into its assembly, if any.
    direct: Option<DirectBody>,
    /// The channel of a direct body frame whose payload is complete: its frame-end octet
    /// starts the next read.
    frame_end_due: Option<u16>,
    /// When the last frame in `out` is a basic.ack after which no delivery of its channel up
    /// to its tag is left unsettled: that channel, and where the frame ends. The next such
    /// ack on the channel, with nothing between, widens it (`send_acknowledgement`).
    settled_prefix: Option<(u16, usize)>,
}

impl Default for Connection {
    fn default() -> Self {
        Connection {
            read: Vec::new(),
            consumed: 0,
            frame_max: None,
            max_frame_size: Some(DEFAULT_MAX_FRAME_SIZE),
            channels: Channels::default(),
            events: VecDeque::new(),
            out: Vec::new(),
            ignoring_input: false,
            bytes_copied: 0,
            frames_received: 0,
            frames_sent: 0,
            direct: None,
            frame_end_due: None,
            settled_prefix: None,
        }
    }
}

impl Connection {
    pub fn new() -> Self {
        Connection::default()
    }

    /// Gives back the memory of the buffers once the connection is over, rather than when the
    /// JS object holding the session is collected (V8 does not see this memory, so that can
    /// be a long time). Nothing more is received or sent after this.
    pub fn release_buffers(&mut self) {
        self.read = Vec::new();
        self.consumed = 0;
        self.out = Vec::new();
        self.settled_prefix = None;
        self.events = VecDeque::new();
        self.channels.clear();
        self.direct = None;
        self.frame_end_due = None;
        self.ignoring_input = true;
    }

    /// The frame max agreed in tuning (0 is read as "no limit").
    pub fn set_frame_max(&mut self, frame_max: usize) {
        self.frame_max = Some(frame_max);
    }

    /// The largest payload accepted from the peer (amqplib's `maxFrameSize`); 0 lifts the limit.
    pub fn set_max_frame_size(&mut self, max: usize) {
        self.max_frame_size = (max > 0).then_some(max);
    }

    /// The largest frame this side sends: the tuned frame max (as agreed, however small: a
    /// server below the spec's minimum is refused in the handshake), or the spec's minimum
    /// before tuning.
    fn send_frame_max(&self) -> usize {
        match self.frame_max {
            None => spec::FRAME_MIN_SIZE as usize,
            Some(0) => UNTUNED_FRAME_MAX,
            Some(n) => n.min(UNTUNED_FRAME_MAX),
        }
    }

    /// The frame max to split a body at, if it leaves room for one byte of body per frame.
    fn body_frame_max(&self) -> crate::codec::Result<usize> {
        let max = self.send_frame_max();
        if max <= OVERHEAD {
            return Err(CodecError::NoRoomForBody(max));
        }
        Ok(max)
    }

    /// The largest frame this side may send: the encoder reads a user's tables no further.
    pub fn sendable_frame_max(&self) -> usize {
        self.send_frame_max().max(spec::FRAME_MIN_SIZE as usize)
    }

    /// Refuses the frames in `frames` if one is larger than this side may send (a table too
    /// large for one frame), before any of them joins the output. Every peer accepts frames
    /// of the spec's minimum size, whatever frame max was agreed.
    pub fn check_sendable(&self, frames: &[u8]) -> crate::codec::Result<()> {
        let max = self.sendable_frame_max();
        let mut rest = frames;
        while rest.len() >= frame::HEADER_BYTES {
            let size = u32::from_be_bytes([rest[3], rest[4], rest[5], rest[6]]) as usize;
            if size + OVERHEAD > max {
                return Err(CodecError::FrameTooLarge { size: size + OVERHEAD, max });
            }
            rest = &rest[(size + OVERHEAD).min(rest.len())..];
        }
        Ok(())
    }

    /// The buffer that events' ranges refer to, valid until the next `receive`.
    pub fn read_buffer(&self) -> &[u8] {
        &self.read
    }

    /// Parses every complete frame of what has arrived so far, plus `chunk`, into events.
    pub fn receive(&mut self, chunk: &[u8]) {
        self.begin_receive();
        if !self.ignoring_input {
            self.read.extend_from_slice(chunk);
            self.bytes_copied += chunk.len() as u64;
        }
        self.parse_received(false);
    }

    /// Like [`receive`](Self::receive), reading straight into the session's buffers: `read`
    /// is given spare capacity to fill and returns how much it filled. That is the read
    /// buffer (at least [`READ_CHUNK`] bytes), or, while a large body frame is under way, its
    /// message's assembly. This is how a socket owned by the native side
    /// avoids a copy per read, and for large messages any copy at all.
    pub fn receive_with<F>(&mut self, read: F) -> std::io::Result<Read>
    where
        F: FnOnce(&mut [std::mem::MaybeUninit<u8>]) -> std::io::Result<usize>,
    {
        self.begin_receive();
        if let Some(direct) = self.direct {
            return self.receive_direct(direct, read);
        }
        // Between the frames of a large body, read only up to the next frame's header, so
        // that its payload too is read straight into the assembly.
        let limit = if self.body_continues() { 1 + frame::HEADER_BYTES } else { usize::MAX };
        self.read.reserve(READ_CHUNK);
        let spare = self.read.spare_capacity_mut();
        let offered = spare.len().min(limit);
        let spare = &mut spare[..offered];
        let filled = read(spare)?;
        assert!(filled <= offered, "a read cannot fill more than it was given");
        // SAFETY: `read` initialised the first `filled` bytes of the spare capacity.
        unsafe { self.read.set_len(self.read.len() + filled) };
        self.parse_received(true);
        Ok(Read { filled, offered })
    }

    /// A direct body frame has ended and its message has more to come.
    fn body_continues(&self) -> bool {
        self.frame_end_due.is_some_and(|channel| matches!(self.channels.stage(channel), Some(Stage::Body { assembly, .. }) if assembly.remaining > 0))
    }

    /// The assembly of the message under way on `channel`, if its body has begun to come.
    fn assembly_mut(&mut self, channel: u16) -> Option<&mut Assembly> {
        match self.channels.stage_mut(channel) {
            Some(Stage::Body { assembly, .. }) => Some(assembly),
            _ => None,
        }
    }

    /// Reads the rest of a direct body frame's payload into its assembly.
    fn receive_direct<F>(&mut self, direct: DirectBody, read: F) -> std::io::Result<Read>
    where
        F: FnOnce(&mut [std::mem::MaybeUninit<u8>]) -> std::io::Result<usize>,
    {
        let assembly = self.assembly_mut(direct.channel).expect("a direct body has its assembly");
        let wanted = direct.payload_left.min(DIRECT_READ_MAX);
        assembly.content.reserve(wanted);
        let spare = &mut assembly.content.spare_capacity_mut()[..wanted];
        let filled = read(spare)?;
        assert!(filled <= wanted, "a read cannot fill more than it was given");
        // SAFETY: `read` initialised the first `filled` bytes of the spare capacity.
        unsafe { assembly.content.set_len(assembly.content.len() + filled) };
        assembly.remaining -= filled as u64;
        let payload_left = direct.payload_left - filled;
        self.direct = (payload_left > 0).then_some(DirectBody { payload_left, ..direct });
        self.frame_end_due = (payload_left == 0).then_some(direct.channel);
        Ok(Read { filled, offered: wanted })
    }

    fn begin_receive(&mut self) {
        debug_assert!(self.events.is_empty(), "the last read's events are taken before the next read");
        self.events.clear();
        self.drop_parsed();
    }

    /// Drops the parsed bytes from the read buffer, but for the frames held by messages still
    /// under way, which move to its front (in order, so each moves down, never onto another).
    fn drop_parsed(&mut self) {
        let mut held: Vec<&mut Range<usize>> = self.channels.stages_mut().flat_map(Stage::held_mut).collect();
        held.sort_by_key(|range| range.start);
        let mut front = 0;
        for range in held {
            let len = range.len();
            self.read.copy_within(range.clone(), front);
            *range = front..front + len;
            front += len;
        }
        self.read.drain(front..self.consumed);
        self.consumed = front;
    }

    /// Parses the frames in the read buffer. With `direct`, a large body frame left
    /// incomplete at the end continues as a [`DirectBody`].
    fn parse_received(&mut self, direct: bool) {
        if self.ignoring_input {
            // Nothing after a framing error can be trusted; keep reading only to see the end.
            self.read.clear();
            return;
        }
        let max = self.max_frame_size.unwrap_or(usize::MAX);
        let mut pos = self.consumed;
        if let (Some(channel), true) = (self.frame_end_due, self.read.len() > pos) {
            if let Err(e) = self.end_direct_body(channel, pos) {
                self.fail(e);
                return;
            }
            pos += 1;
        }
        loop {
            match parse_envelope(&self.read[pos..], max) {
                Ok(Some(envelope)) => {
                    if let Err(e) = self.frame(envelope, pos) {
                        self.fail(e);
                        break;
                    }
                    pos += envelope.size + OVERHEAD;
                }
                Ok(None) => {
                    if direct {
                        pos = self.begin_direct_body(pos);
                    }
                    break;
                }
                Err(e) => {
                    self.fail(ProtocolError::Framing(e));
                    break;
                }
            }
        }
        self.consumed = pos;
    }

    /// If the incomplete frame at `pos` is a body frame with much of its payload to come (its
    /// size is already checked against the frame max), takes what has arrived of it into its
    /// message's assembly and goes on directly; returns the read buffer position parsed up to.
    fn begin_direct_body(&mut self, pos: usize) -> usize {
        let rest = &self.read[pos..];
        if rest.len() < frame::HEADER_BYTES || rest[0] as u32 != FRAME_BODY {
            return pos;
        }
        let channel = u16::from_be_bytes([rest[1], rest[2]]);
        let size = u32::from_be_bytes([rest[3], rest[4], rest[5], rest[6]]) as usize;
        let arrived = &rest[frame::HEADER_BYTES..];
        let arrived_len = arrived.len();
        let Some(Stage::Body { assembly, .. }) = self.channels.stage_mut(channel) else { return pos };
        if size - arrived_len < DIRECT_BODY_MIN || size as u64 > assembly.remaining {
            return pos; // small, or an error the whole frame will show
        }
        assembly.append(arrived);
        self.bytes_copied += arrived_len as u64;
        self.frames_received += 1;
        self.direct = Some(DirectBody { channel, payload_left: size - arrived_len });
        // The partial frame is in the assembly now; the read buffer keeps only held frames.
        self.read.truncate(pos);
        pos
    }

    /// The frame-end octet after a direct body frame, at `pos` in the read buffer; the body is
    /// complete when nothing of it remains.
    fn end_direct_body(&mut self, channel: u16, pos: usize) -> Result<(), ProtocolError> {
        self.frame_end_due = None;
        if self.read[pos] != spec::FRAME_END as u8 {
            return Err(ProtocolError::Framing(frame::FrameError::BadFrameEnd));
        }
        if self.assembly_mut(channel).is_some_and(|a| a.remaining == 0) {
            self.complete_message(channel, None);
        }
        Ok(())
    }

    /// Writes out what is waiting through `write` until all is written or the writer would
    /// block; keeps the rest, in order, for the next call. True when nothing is left.
    pub fn write_with<F>(&mut self, mut write: F) -> std::io::Result<bool>
    where
        F: FnMut(&[u8]) -> std::io::Result<usize>,
    {
        let mut written = 0;
        let result = loop {
            if written == self.out.len() {
                break Ok(true);
            }
            match write(&self.out[written..]) {
                Ok(0) => break Err(std::io::ErrorKind::WriteZero.into()),
                Ok(n) => written += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break Ok(false),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => break Err(e),
            }
        };
        if written > 0 {
            self.out.drain(..written);
            self.settled_prefix = None;
        }
        result
    }

    /// Empties the output once the caller has taken a copy of it.
    pub fn clear_output(&mut self) {
        self.out.clear();
        self.settled_prefix = None;
    }

    fn fail(&mut self, e: ProtocolError) {
        self.ignoring_input = true;
        self.channels.clear();
        self.direct = None;
        self.frame_end_due = None;
        self.events.push_back(Event::ConnectionError { error: e });
    }

    fn frame(&mut self, env: Envelope, pos: usize) -> Result<(), ProtocolError> {
        self.frames_received += 1;
        let payload = pos + frame::HEADER_BYTES..pos + frame::HEADER_BYTES + env.size;
        match env.kind as u32 {
            FRAME_METHOD => self.method_frame(env.channel, payload),
            FRAME_HEADER => self.header_frame(env.channel, payload),
            FRAME_BODY => self.body_frame(env.channel, payload),
            FRAME_HEARTBEAT => {
                self.events.push_back(Event::Heartbeat { channel: env.channel });
                Ok(())
            }
            _ => Err(ProtocolError::UnknownFrameType(env.kind)),
        }
    }

    fn method_frame(&mut self, channel: u16, payload: Range<usize>) -> Result<(), ProtocolError> {
        let id = Reader::new(&self.read[payload.clone()]).u32()?;
        let method = spec::method(id).ok_or(CodecError::UnknownMethod)?;
        // Its arguments are decoded by whoever takes the event (see `poll_event`).
        let args = payload.start + 4..payload.end;
        if let (Some(record), true) = (self.channels.open_mut(channel), carries_content(method)) {
            match &record.stage {
                Stage::Idle => {
                    record.acks.message_received(id, &self.read[args.clone()]);
                    record.stage = Stage::Header { method: Held { id, range: args } };
                }
                Stage::Refused => {}
                stage => {
                    let violation = Violation::method_out_of_turn(stage, id);
                    self.refuse(channel, violation);
                }
            }
            return Ok(());
        }
        if channel != 0 {
            match self.channels.received(channel, id, &self.read[args.clone()]) {
                Received::HandOn => {}
                Received::Drop => return Ok(()),
                Received::AnswerClose => {
                    frame::write_bare_method(&mut self.out, channel, &spec::CHANNEL_CLOSE_OK);
                    self.frames_sent += 1;
                    return Ok(());
                }
                Received::CloseConfirmed => {
                    self.events.push_back(Event::ChannelClosed { channel });
                    return Ok(());
                }
            }
        }
        self.events.push_back(Event::Method { channel, id, args });
        Ok(())
    }

    fn header_frame(&mut self, channel: u16, payload: Range<usize>) -> Result<(), ProtocolError> {
        let mut r = Reader::new(&self.read[payload.clone()]);
        let class_id = r.u16()?;
        let _weight = r.u16()?;
        let body_size = r.u64()?;
        spec::properties(class_id).ok_or(CodecError::UnknownProperties)?;
        let properties = payload.start + 12..payload.end;
        match self.channels.stage(channel) {
            None => {
                self.events.push_back(Event::Header { channel, class_id, body_size, properties });
                return Ok(());
            }
            Some(Stage::Header { .. }) => {}
            Some(Stage::Refused) => return Ok(()),
            Some(stage) => {
                let violation = Violation::header_out_of_turn(stage, channel, class_id);
                self.refuse(channel, violation);
                return Ok(());
            }
        }
        let stage = self.channels.stage_mut(channel).expect("matched above");
        let Stage::Header { method } = std::mem::replace(stage, Stage::Idle) else { unreachable!("matched above") };
        let properties = Held { id: class_id as u32, range: properties };
        let assembly = Assembly { remaining: body_size, content: Vec::new() };
        *stage = Stage::Body { method, properties, body_size, assembly };
        if body_size == 0 {
            self.complete_message(channel, None);
        }
        Ok(())
    }

    fn body_frame(&mut self, channel: u16, payload: Range<usize>) -> Result<(), ProtocolError> {
        let len = payload.len();
        let (assembly, body_size) = match self.channels.stage_mut(channel) {
            None => {
                self.events.push_back(Event::Body { channel, content: Content::Read(payload) });
                return Ok(());
            }
            Some(Stage::Body { assembly, body_size, .. }) => (assembly, *body_size),
            Some(Stage::Refused) => return Ok(()),
            Some(stage) => {
                let violation = Violation::body_out_of_turn(stage, channel);
                self.refuse(channel, violation);
                return Ok(());
            }
        };
        if len as u64 > assembly.remaining {
            self.refuse(channel, Violation::too_much_content(body_size));
            return Ok(());
        }
        if assembly.content.is_empty() && len as u64 == assembly.remaining {
            // The whole body in one frame: it is copied straight from the read buffer into
            // the Buffer JS gets, with no assembly in between.
            self.complete_message(channel, Some(payload));
            return Ok(());
        }
        assembly.append(&self.read[payload]);
        self.bytes_copied += len as u64;
        if assembly.remaining == 0 {
            self.complete_message(channel, None);
        }
        Ok(())
    }

    /// The message under way on `channel` is whole: one event with its method, its
    /// properties and its content, which is `body` in the read buffer or else its assembly.
    fn complete_message(&mut self, channel: u16, body: Option<Range<usize>>) {
        let record = self.channels.open_mut(channel).expect("a message completes on an open channel");
        let Stage::Body { method, properties, body_size, assembly } = std::mem::replace(&mut record.stage, Stage::Idle) else {
            unreachable!("a message completes in its body stage")
        };
        if record.is_closing() {
            return; // our close is on its way: nothing of the channel is handed on
        }
        let content = match body {
            Some(range) => Content::Read(range),
            None if body_size == 0 => Content::Empty,
            None => Content::Assembled(assembly.content),
        };
        let (id, args) = (method.id, method.range);
        let (class_id, properties) = (properties.id as u16, properties.range);
        self.events.push_back(Event::Message { channel, id, args, class_id, properties, body_size, content });
    }

    /// Tells the channel it broke the content rules; its content frames are dropped from now
    /// until it is closed.
    fn refuse(&mut self, channel: u16, violation: Violation) {
        let Some(record) = self.channels.open_mut(channel) else { return };
        record.stage = Stage::Refused;
        if !record.is_closing() {
            self.events.push_back(Event::ChannelError { channel, violation });
        }
    }

    /// Whether the last read brought events to poll.
    pub fn has_events(&self) -> bool {
        !self.events.is_empty()
    }

    /// Whether bytes wait to be written: what JS sent, or what the core answered by itself (the
    /// close-ok of a close crossing ours).
    pub fn has_output(&self) -> bool {
        !self.out.is_empty()
    }


    // ------------------------------------------------------------ outgoing

    /// Frames encoded by the caller (a method's, say): refused, nothing sent, if one is too
    /// large to send (its tables, say).
    pub fn send_frames(&mut self, frames: &[u8]) -> crate::codec::Result<()> {
        self.check_sendable(frames)?;
        self.out.extend_from_slice(frames);
        self.frames_sent += frame::count_frames(frames);
        frame::each_method(frames, |channel, id, args| self.channels.sent(channel, id, args));
        Ok(())
    }

    /// A method with content: its method and header frames `head`, encoded by the caller
    /// (`frame::write_method` and `write_header`), then `content` split into body frames.
    /// Frames too large to send are refused, nothing sent.
    pub fn send_content(&mut self, channel: u16, head: &[u8], content: &[u8]) -> crate::codec::Result<()> {
        let frame_max = self.body_frame_max()?;
        self.check_sendable(head)?;
        self.out.extend_from_slice(head);
        self.frames_sent += frame::count_frames(head) + frame::write_body(&mut self.out, channel, content, frame_max);
        Ok(())
    }

    /// basic.publish with its content, the hot path of sending: as [`send_content`](Self::send_content),
    /// with `head` from `frame::write_publish_head`, kept for a publish with the same arguments.
    pub fn send_publish_head(&mut self, channel: u16, head: &[u8], content: &[u8]) -> crate::codec::Result<()> {
        self.send_content(channel, head, content)?;
        if let Some(record) = self.channels.get_mut(channel) {
            record.last_publish.clear();
            record.last_publish.extend_from_slice(head);
        }
        Ok(())
    }

    /// basic.ack, basic.nack or basic.reject (see `frame::write_acknowledgement`): `flags`
    /// holds its bits in the order of its arguments. Any other method is refused.
    ///
    /// When, by the channel's record of deliveries waiting (`unsettled.rs`), an ack leaves no
    /// delivery of the channel up to its tag unsettled, and so did the frame just before it in
    /// the output, an ack on the same channel, the two settle exactly what one ack of the later
    /// tag with `multiple` set does: the later one widens the earlier frame instead of
    /// following it. The acks of a read's deliveries, taken in order, leave as one, and the
    /// server handles one method for them.
    pub fn send_acknowledgement(&mut self, channel: u16, method_id: u32, delivery_tag: u64, flags: u8) -> crate::codec::Result<()> {
        let (method, multiple) = match method_id {
            id if id == spec::BASIC_ACK.id => (&spec::BASIC_ACK, flags & 1 != 0),
            id if id == spec::BASIC_NACK.id => (&spec::BASIC_NACK, flags & 1 != 0),
            // A reject's only bit is `requeue`.
            id if id == spec::BASIC_REJECT.id => (&spec::BASIC_REJECT, false),
            _ => return Err(CodecError::UnknownMethod),
        };
        let settles_prefix = self.channels.open_mut(channel).is_some_and(|record| record.acks.acknowledge(method.id, delivery_tag, multiple));
        if !settles_prefix {
            frame::write_acknowledgement(&mut self.out, channel, method, delivery_tag, flags);
            self.frames_sent += 1;
            return Ok(());
        }
        if self.settled_prefix == Some((channel, self.out.len())) {
            frame::widen_acknowledgement(&mut self.out, delivery_tag);
        } else {
            frame::write_acknowledgement(&mut self.out, channel, method, delivery_tag, flags);
            self.frames_sent += 1;
            self.settled_prefix = Some((channel, self.out.len()));
        }
        Ok(())
    }

    /// A publish with the same arguments as the channel's last one (the caller checks): its
    /// method and header frames again, with this body's size. False if there is none (the
    /// last one was sent under the same frame max, so its frames fit).
    pub fn send_publish_again(&mut self, channel: u16, content: &[u8]) -> bool {
        let Ok(frame_max) = self.body_frame_max() else { return false };
        let Some(last) = self.channels.get_mut(channel).map(|record| &record.last_publish).filter(|last| !last.is_empty()) else { return false };
        let at = self.out.len();
        self.out.extend_from_slice(last);
        let size_at = at + frame::body_size_at(last);
        self.out[size_at..size_at + 8].copy_from_slice(&(content.len() as u64).to_be_bytes());
        self.frames_sent += 2 + frame::write_body(&mut self.out, channel, content, frame_max);
        true
    }

    /// Whether JS may write `method_id` on the channel `handle` names (`channels.rs`): its
    /// number if so. The send functions take that number.
    pub fn may_send(&self, handle: ChannelHandle, method_id: u32) -> Result<u16, Refusal> {
        self.channels.may_send(handle, method_id)
    }

    /// JS opens a channel on `number` (see `Channels::open`).
    pub fn open_channel(&mut self, number: u16) -> ChannelHandle {
        self.channels.open(number)
    }

    pub fn send_heartbeat(&mut self) {
        self.out.extend_from_slice(&frame::HEARTBEAT);
        self.frames_sent += 1;
    }

    pub fn send_bytes(&mut self, bytes: &[u8]) {
        self.out.extend_from_slice(bytes);
    }
}

impl EventSource for Connection {
    fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    fn read_buffer(&self) -> &[u8] {
        Connection::read_buffer(self)
    }

    /// The stream can no longer be trusted: the rest of the read's events are dropped for the
    /// connection error.
    fn decoding_failed(&mut self, e: CodecError) {
        self.events.clear();
        self.fail(e.into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::boundary::{EVENT_CHANNEL, EVENT_ID, EVENT_KIND, EVENT_LENGTH, MESSAGE_ARGUMENTS, MESSAGE_BODY_SIZE, MESSAGE_PROPERTIES, TAPE_NEW_STRINGS};
    use crate::boundary::{TapeEvent, ViolationKind, CHANNEL_ERROR_BODY_SIZE, CHANNEL_ERROR_METHOD, CHANNEL_ERROR_VIOLATION};
    use crate::serializer::{Serializer, POOLED_BODY_MAX};
    use crate::spec::FRAME_ERROR;
    use crate::spec_types::{ArgType, MethodSpec};
    use crate::tape::Obj;
    use crate::test_support::{content_head, method_frame, TapeView, TestValue};
    use proptest::prelude::*;

    /// A client core with the serializer the bindings give it: what JS is handed for each read.
    #[derive(Default)]
    struct Client {
        core: Connection,
        serializer: Serializer,
    }

    impl Client {
        fn receive(&mut self, bytes: &[u8]) {
            self.core.receive(bytes);
            self.serializer.serialize_read(&mut self.core);
        }
    }

    impl std::ops::Deref for Client {
        type Target = Connection;
        fn deref(&self) -> &Connection {
            &self.core
        }
    }

    impl std::ops::DerefMut for Client {
        fn deref_mut(&mut self) -> &mut Connection {
            &mut self.core
        }
    }

    /// (kind, channel, id) of an event on the tape.
    type Event = (u8, u16, u32);

    /// (kind, channel, id) of each event of the last read's tape.
    fn events(client: &Client) -> Vec<Event> {
        tape_events(&client.serializer.tape, client.read_buffer())
    }

    fn tape_events(tape: &crate::tape::Tape, source: &[u8]) -> Vec<Event> {
        let slots = tape.to_slots();
        let view = TapeView::new(&slots, tape, source);
        let mut out = Vec::new();
        let mut i = view.base;
        while i < slots.len() {
            out.push((slots[i + EVENT_KIND] as u8, slots[i + EVENT_CHANNEL] as u16, slots[i + EVENT_ID] as u32));
            i += slots[i + EVENT_LENGTH] as usize;
        }
        out
    }

    /// A client whose channel 1 the server has opened.
    fn opened() -> Client {
        let mut client = Client::default();
        client.receive(&method_frame(1, spec::CHANNEL_OPEN_OK.id, &TestValue::object(&[("channelId", TestValue::Bytes(Vec::new()))])).unwrap());
        client.bytes_copied = 0;
        client
    }

    fn deliver_fields(tag: &str) -> TestValue {
        TestValue::object(&[
            ("consumerTag", TestValue::Str(tag.into())),
            ("deliveryTag", TestValue::Num(1.0)),
            ("exchange", TestValue::Str("ex".into())),
            ("routingKey", TestValue::Str("rk".into())),
        ])
    }

    /// The bytes a server would send for one delivery of `body` on channel 1.
    fn delivery(body: &[u8], frame_max: usize) -> Vec<u8> {
        let mut server = Connection::new();
        server.set_frame_max(frame_max);
        let props = TestValue::object(&[("contentType", TestValue::Str("text/plain".into()))]);
        let head = content_head(1, spec::BASIC_DELIVER.id, &deliver_fields("ctag"), &props, body.len()).unwrap();
        server.send_content(1, &head, body).unwrap();
        server.out
    }

    #[test]
    fn between_our_close_and_its_close_ok_nothing_of_the_channel_is_handed_on_and_a_crossing_close_is_answered() {
        let mut client = Client::default();
        let handle = client.open_channel(1);
        client.receive(&method_frame(1, spec::CHANNEL_OPEN_OK.id, &TestValue::object(&[("channelId", TestValue::Bytes(Vec::new()))])).unwrap());
        let close = TestValue::object(&[("replyCode", TestValue::Num(200.0)), ("replyText", TestValue::Str("bye".into())), ("classId", TestValue::Num(0.0)), ("methodId", TestValue::Num(0.0))]);
        assert_eq!(client.may_send(handle, spec::CHANNEL_CLOSE.id), Ok(1));
        client.send_frames(&method_frame(1, spec::CHANNEL_CLOSE.id, &close).unwrap()).unwrap();
        client.clear_output();
        let (delivery, crossing) = (delivery(b"late", 4096), method_frame(1, spec::CHANNEL_CLOSE.id, &close).unwrap());
        client.receive(&[delivery, crossing].concat());
        assert_eq!(events(&client), vec![], "the delivery and the crossing close");
        assert_eq!(client.out, method_frame(1, spec::CHANNEL_CLOSE_OK.id, &TestValue::object(&[])).unwrap(), "the close answered");
        assert_eq!(client.may_send(handle, spec::BASIC_QOS.id), Err(Refusal::ChannelClosing));
        client.receive(&method_frame(1, spec::CHANNEL_CLOSE_OK.id, &TestValue::object(&[])).unwrap());
        assert_eq!(events(&client), vec![(TapeEvent::ChannelClosed as u8, 1, 0)]);
        assert_eq!(client.may_send(handle, spec::BASIC_QOS.id), Err(Refusal::ChannelClosed));
    }

    #[test]
    fn a_delivery_is_one_event_with_its_assembled_body() {
        let body: Vec<u8> = (0..10_000u32).map(|n| n as u8).collect();
        let mut client = opened();
        client.receive(&delivery(&body, 4096));
        assert_eq!(events(&client), vec![(TapeEvent::Message as u8, 1, spec::BASIC_DELIVER.id)]);
        let slots = client.serializer.tape.to_slots();
        let view = TapeView::new(&slots, &client.serializer.tape, client.read_buffer());
        let at = view.base;
        assert_eq!(slots[at + MESSAGE_BODY_SIZE], body.len() as f64);
        assert_eq!(view.string(slots[at + MESSAGE_ARGUMENTS]), "ctag", "the consumer tag, its first argument");
        let properties = at + slots[at + MESSAGE_PROPERTIES] as usize;
        assert_eq!(slots[properties], 0x8000 as f64, "the flags: content type only");
        assert_eq!(view.string(slots[properties + 1]), "text/plain");
        let content = client.serializer.tape.objects.iter().find_map(|o| match o {
            Obj::Content(c) => Some(c),
            _ => None,
        });
        let content = content.expect("a body");
        assert_eq!(content, &body);
        assert_eq!(content.capacity(), body.len(), "exactly its size");
    }

    /// The method frame of `method` on channel 1, with every argument given.
    fn any_method_frame(method: &MethodSpec) -> Vec<u8> {
        let value = |ty| match ty {
            ArgType::ShortStr | ArgType::LongStr => TestValue::Str("x".into()),
            ArgType::Bit => TestValue::Bool(false),
            ArgType::Table => TestValue::object(&[]),
            _ => TestValue::Num(1.0),
        };
        let fields: Vec<_> = method.args.iter().map(|a| (a.name, value(a.ty))).collect();
        method_frame(1, method.id, &TestValue::object(&fields)).unwrap()
    }

    #[test]
    fn the_methods_a_server_sends_with_content_wait_for_it_and_a_publish_does_not() {
        for method in [&spec::BASIC_DELIVER, &spec::BASIC_RETURN, &spec::BASIC_GET_OK] {
            let mut client = opened();
            client.receive(&any_method_frame(method));
            assert_eq!(events(&client), vec![], "{} waits for its header", method.name);
        }
        let mut client = opened();
        client.receive(&any_method_frame(&spec::BASIC_PUBLISH));
        assert_eq!(events(&client), vec![(TapeEvent::Method as u8, 1, spec::BASIC_PUBLISH.id)], "a publish is handed on alone");
    }

    #[test]
    fn small_bodies_in_one_frame_share_the_read_s_content_slab() {
        let mut bytes = delivery(b"small", 4096);
        bytes.extend(delivery(b"second", 4096));
        let mut client = opened();
        client.receive(&bytes);
        let kinds: Vec<u8> = events(&client).iter().map(|e| e.0).collect();
        assert_eq!(kinds, [TapeEvent::Message as u8, TapeEvent::Message as u8]);
        let slab: Vec<u8> = client.serializer.tape.pooled.iter().flat_map(|&(start, len)| &client.read_buffer()[start..start + len]).copied().collect();
        assert_eq!(slab, b"smallsecond");
        assert_eq!(client.serializer.tape.pooled_bytes(), 11);
        assert!(client.serializer.tape.objects.iter().all(|o| !matches!(o, Obj::Bytes { .. } | Obj::Content(_))));
        assert!(matches!(client.channels.stage(1), Some(Stage::Idle)), "between messages");
    }

    #[test]
    fn a_large_body_in_one_frame_is_handed_over_from_the_read_buffer() {
        let body = vec![7u8; POOLED_BODY_MAX + 1];
        let mut client = opened();
        client.receive(&delivery(&body, 131072));
        let bytes = client.serializer.tape.objects.iter().find_map(|o| match o {
            Obj::Bytes { start, len } => Some(&client.read_buffer()[*start..start + len]),
            _ => None,
        });
        assert_eq!(bytes, Some(&body[..]));
        assert!(client.serializer.tape.pooled.is_empty());
    }

    #[test]
    fn released_buffers_are_given_back_and_nothing_more_is_parsed() {
        let mut client = opened();
        client.receive(&delivery(&[1; 5000], 4096)[..3000]);
        client.release_buffers();
        assert_eq!(client.read.capacity(), 0);
        client.receive(&frame::HEARTBEAT);
        assert!(events(&client).is_empty());
    }

    #[test]
    fn acknowledgements_are_the_bytes_of_their_methods() {
        let cases = [
            (&spec::BASIC_ACK, 1, vec![("deliveryTag", TestValue::Num(7.0)), ("multiple", TestValue::Bool(true))]),
            (
                &spec::BASIC_NACK,
                2,
                vec![("deliveryTag", TestValue::Num(9e15)), ("multiple", TestValue::Bool(false)), ("requeue", TestValue::Bool(true))],
            ),
            (&spec::BASIC_REJECT, 0, vec![("deliveryTag", TestValue::Num(1.0)), ("requeue", TestValue::Bool(false))]),
        ];
        for (method, flags, fields) in cases {
            let tag = match fields[0].1 {
                TestValue::Num(n) => n as u64,
                _ => unreachable!(),
            };
            let mut fast = Connection::new();
            fast.send_acknowledgement(3, method.id, tag, flags).unwrap();
            let mut general = Connection::new();
            general.send_frames(&method_frame(3, method.id, &TestValue::object(&fields)).unwrap()).unwrap();
            assert_eq!(fast.out, general.out, "{}", method.name);
        }
        let mut session = Connection::new();
        assert!(session.send_acknowledgement(1, spec::BASIC_PUBLISH.id, 1, 0).is_err());
        assert!(session.out.is_empty());
    }

    /// The bytes of one basic.ack.
    fn ack(channel: u16, tag: u64, multiple: bool) -> Vec<u8> {
        let mut out = Vec::new();
        frame::write_acknowledgement(&mut out, channel, &spec::BASIC_ACK, tag, multiple as u8);
        out
    }

    /// The bytes of one basic.nack (`multiple` off).
    fn nack(channel: u16, tag: u64, requeue: bool) -> Vec<u8> {
        let mut out = Vec::new();
        frame::write_acknowledgement(&mut out, channel, &spec::BASIC_NACK, tag, (requeue as u8) << 1);
        out
    }

    /// A client with `channels` opened by the server, and a consumer "c" (acks wanted) on each.
    fn consuming(channels: &[u16]) -> Client {
        let mut client = Client::default();
        for &channel in channels {
            client.receive(&method_frame(channel, spec::CHANNEL_OPEN_OK.id, &TestValue::object(&[("channelId", TestValue::Bytes(Vec::new()))])).unwrap());
            consume(&mut client, channel, "c", false);
        }
        client.clear_output();
        client
    }

    /// basic.consume written (server-named when `tag` is empty) and its consume-ok read.
    fn consume(client: &mut Client, channel: u16, tag: &str, no_ack: bool) {
        let fields = TestValue::object(&[
            ("ticket", TestValue::Num(0.0)),
            ("queue", TestValue::Str("q".into())),
            ("consumerTag", TestValue::Str(String::new())),
            ("noLocal", TestValue::Bool(false)),
            ("noAck", TestValue::Bool(no_ack)),
            ("exclusive", TestValue::Bool(false)),
            ("nowait", TestValue::Bool(false)),
            ("arguments", TestValue::object(&[])),
        ]);
        client.send_frames(&method_frame(channel, spec::BASIC_CONSUME.id, &fields).unwrap()).unwrap();
        client.receive(&method_frame(channel, spec::BASIC_CONSUME_OK.id, &TestValue::object(&[("consumerTag", TestValue::Str(tag.into()))])).unwrap());
    }

    /// The bytes of deliveries of `tags` to consumer `consumer` on `channel`, one byte of body each.
    fn deliveries(channel: u16, consumer: &str, tags: impl IntoIterator<Item = u64>) -> Vec<u8> {
        let mut server = Connection::new();
        for tag in tags {
            let fields = TestValue::object(&[
                ("consumerTag", TestValue::Str(consumer.into())),
                ("deliveryTag", TestValue::Num(tag as f64)),
                ("redelivered", TestValue::Bool(false)),
                ("exchange", TestValue::Str(String::new())),
                ("routingKey", TestValue::Str("q".into())),
            ]);
            let head = content_head(channel, spec::BASIC_DELIVER.id, &fields, &TestValue::object(&[]), 1).unwrap();
            server.send_content(channel, &head, &[tag as u8]).unwrap();
        }
        server.out
    }

    fn ack_now(c: &mut Connection, channel: u16, tag: u64) {
        c.send_acknowledgement(channel, spec::BASIC_ACK.id, tag, 0).unwrap();
    }

    /// A method written with the general encoder (as for ackAll, recover or tx.select).
    fn send_method(c: &mut Connection, channel: u16, method: &MethodSpec, fields: &[(&str, TestValue)]) {
        c.send_frames(&method_frame(channel, method.id, &TestValue::object(fields)).unwrap()).unwrap();
    }

    #[test]
    fn acks_that_settle_all_below_them_leave_as_one_multiple_ack() {
        let mut c = consuming(&[1]);
        c.receive(&deliveries(1, "c", 1..=5));
        let sent = c.frames_sent;
        for tag in 1..=5 {
            ack_now(&mut c, 1, tag);
        }
        assert_eq!(c.out, ack(1, 5, true), "one ack for the read");
        assert_eq!(c.frames_sent, sent + 1, "a widened ack is no frame");

        // A held delivery stops it; those after it go alone, then the hole filled goes with
        // the next in order.
        let mut c = consuming(&[1]);
        c.receive(&deliveries(1, "c", 1..=6));
        ack_now(&mut c, 1, 1);
        ack_now(&mut c, 1, 2);
        ack_now(&mut c, 1, 4); // 3 held
        ack_now(&mut c, 1, 5);
        ack_now(&mut c, 1, 3); // now all up to 5 are settled
        ack_now(&mut c, 1, 6);
        assert_eq!(c.out, [ack(1, 2, true), ack(1, 4, false), ack(1, 5, false), ack(1, 6, true)].concat());

        // An ack with `multiple` that takes all before it widens, and is widened, the same way.
        let mut c = consuming(&[1]);
        c.receive(&deliveries(1, "c", 1..=6));
        ack_now(&mut c, 1, 1);
        c.send_acknowledgement(1, spec::BASIC_ACK.id, 4, 1).unwrap();
        ack_now(&mut c, 1, 5);
        assert_eq!(c.out, ack(1, 5, true));
    }

    #[test]
    fn nacks_and_rejects_are_never_taken_together_but_settle_what_they_name() {
        let mut c = consuming(&[1]);
        c.receive(&deliveries(1, "c", 1..=8));
        ack_now(&mut c, 1, 1);
        c.send_acknowledgement(1, spec::BASIC_NACK.id, 2, 0b10).unwrap(); // requeue
        c.send_acknowledgement(1, spec::BASIC_NACK.id, 3, 0b00).unwrap(); // dropped
        ack_now(&mut c, 1, 4); // settles all up to it, but the frame before is a nack
        ack_now(&mut c, 1, 5);
        c.send_acknowledgement(1, spec::BASIC_REJECT.id, 6, 1).unwrap(); // requeue: its bit is not `multiple`
        c.send_acknowledgement(1, spec::BASIC_REJECT.id, 7, 0).unwrap();
        ack_now(&mut c, 1, 8);
        let mut rejects = Vec::new();
        frame::write_acknowledgement(&mut rejects, 1, &spec::BASIC_REJECT, 6, 1);
        frame::write_acknowledgement(&mut rejects, 1, &spec::BASIC_REJECT, 7, 0);
        assert_eq!(c.out, [ack(1, 1, false), nack(1, 2, true), nack(1, 3, false), ack(1, 5, true), rejects, ack(1, 8, false)].concat());

        // A nack with `multiple` settles those before it: the ack after it settles all below.
        let mut c = consuming(&[1]);
        c.receive(&deliveries(1, "c", 1..=4));
        c.send_acknowledgement(1, spec::BASIC_NACK.id, 2, 0b01).unwrap();
        ack_now(&mut c, 1, 3);
        ack_now(&mut c, 1, 4);
        let mut nack_multiple = Vec::new();
        frame::write_acknowledgement(&mut nack_multiple, 1, &spec::BASIC_NACK, 2, 0b01);
        assert_eq!(c.out, [nack_multiple, ack(1, 4, true)].concat());
    }

    #[test]
    fn acks_are_taken_together_only_on_one_channel_with_nothing_between() {
        let mut c = consuming(&[2, 3]);
        c.receive(&[deliveries(2, "c", 1..=2), deliveries(3, "c", 1..=6)].concat());
        ack_now(&mut c, 2, 1);
        ack_now(&mut c, 3, 1);
        ack_now(&mut c, 3, 2);
        c.send_heartbeat();
        ack_now(&mut c, 3, 3);
        ack_now(&mut c, 2, 2); // would settle all below on 2, but 3's ack is between
        let expected = [ack(2, 1, false), ack(3, 2, true), frame::HEARTBEAT.to_vec(), ack(3, 3, false), ack(2, 2, false)].concat();
        assert_eq!(c.out, expected);

        // Nor across a write, whole or in part: what was written cannot change.
        c.clear_output();
        ack_now(&mut c, 3, 4);
        assert_eq!(c.out, ack(3, 4, false));
        let mut written = Vec::new();
        assert!(!c.write_with(|b| if written.is_empty() { written.extend_from_slice(&b[..4]); Ok(4) } else { Err(std::io::ErrorKind::WouldBlock.into()) }).unwrap());
        ack_now(&mut c, 3, 5);
        assert_eq!([written, c.out.clone()].concat(), [ack(3, 4, false), ack(3, 5, false)].concat());
        ack_now(&mut c, 3, 6);
        assert_eq!(c.out[c.out.len() - 21..], ack(3, 6, true)[..], "after the write, as before it");
    }

    #[test]
    fn a_delivery_read_between_two_acks_is_waited_for() {
        let mut c = consuming(&[1]);
        c.receive(&deliveries(1, "c", [1]));
        ack_now(&mut c, 1, 1);
        c.receive(&deliveries(1, "c", [2, 3]));
        ack_now(&mut c, 1, 3); // 2 waits
        ack_now(&mut c, 1, 2);
        assert_eq!(c.out, [ack(1, 1, false), ack(1, 3, false), ack(1, 2, false)].concat());

        let mut c = consuming(&[1]);
        c.receive(&deliveries(1, "c", [1]));
        ack_now(&mut c, 1, 1);
        c.receive(&deliveries(1, "c", [2]));
        ack_now(&mut c, 1, 2); // 1 and 2 are all there is
        assert_eq!(c.out, ack(1, 2, true));
    }

    #[test]
    fn deliveries_that_wait_for_no_ack_do_not_hold_the_others_back() {
        let mut c = consuming(&[1]);
        consume(&mut c, 1, "auto", true);
        c.clear_output();
        c.receive(&[deliveries(1, "c", [1]), deliveries(1, "auto", [2]), deliveries(1, "c", [3])].concat());
        ack_now(&mut c, 1, 1);
        ack_now(&mut c, 1, 3);
        assert_eq!(c.out, ack(1, 3, true));

        // A get's noAck, likewise; a get-empty leaves nothing pending.
        let get = |c: &mut Client, no_ack| {
            let fields = [("ticket", TestValue::Num(0.0)), ("queue", TestValue::Str("q".into())), ("noAck", TestValue::Bool(no_ack))];
            send_method(c, 1, &spec::BASIC_GET, &fields);
        };
        let get_ok = |tag: u64| {
            let fields = TestValue::object(&[
                ("deliveryTag", TestValue::Num(tag as f64)),
                ("redelivered", TestValue::Bool(false)),
                ("exchange", TestValue::Str(String::new())),
                ("routingKey", TestValue::Str("q".into())),
                ("messageCount", TestValue::Num(0.0)),
            ]);
            let mut server = Connection::new();
            server.send_content(1, &content_head(1, spec::BASIC_GET_OK.id, &fields, &TestValue::object(&[]), 1).unwrap(), b"x").unwrap();
            server.out
        };
        let mut c = consuming(&[1]);
        get(&mut c, true);
        c.receive(&get_ok(1));
        get(&mut c, false);
        c.receive(&method_frame(1, spec::BASIC_GET_EMPTY.id, &TestValue::object(&[("clusterId", TestValue::Str(String::new()))])).unwrap());
        c.receive(&deliveries(1, "c", [2, 3]));
        get(&mut c, false);
        c.receive(&get_ok(4));
        c.clear_output();
        ack_now(&mut c, 1, 2);
        ack_now(&mut c, 1, 3);
        ack_now(&mut c, 1, 4);
        assert_eq!(c.out, ack(1, 4, true));

        // A consumer tag that comes back wanting acks is waited for again.
        let mut c = consuming(&[1]);
        consume(&mut c, 1, "again", true);
        consume(&mut c, 1, "again", false);
        c.clear_output();
        c.receive(&[deliveries(1, "again", [1]), deliveries(1, "c", [2])].concat());
        ack_now(&mut c, 1, 2);
        ack_now(&mut c, 1, 1);
        assert_eq!(c.out, [ack(1, 2, false), ack(1, 1, false)].concat());
    }

    #[test]
    fn settling_deliveries_on_their_way_here_stops_the_record_until_the_channel_is_opened_again() {
        let ack_all = |c: &mut Client| send_method(c, 1, &spec::BASIC_ACK, &[("deliveryTag", TestValue::Num(0.0)), ("multiple", TestValue::Bool(true))]);
        let recover = |c: &mut Client| send_method(c, 1, &spec::BASIC_RECOVER, &[("requeue", TestValue::Bool(true))]);
        let tx_select = |c: &mut Client| send_method(c, 1, &spec::TX_SELECT, &[]);
        let nack_all = |c: &mut Client| c.send_acknowledgement(1, spec::BASIC_NACK.id, 0, 0b11).unwrap();
        let early = |c: &mut Client| ack_now(c, 1, 9); // not received yet
        let stoppers: [&dyn Fn(&mut Client); 5] = [&ack_all, &recover, &tx_select, &nack_all, &early];
        for (i, stop) in stoppers.iter().enumerate() {
            let mut c = consuming(&[1]);
            c.receive(&deliveries(1, "c", 1..=3));
            stop(&mut c);
            c.receive(&deliveries(1, "c", 4..=6));
            c.clear_output();
            for tag in 4..=6 {
                ack_now(&mut c, 1, tag);
            }
            assert_eq!(c.out, [ack(1, 4, false), ack(1, 5, false), ack(1, 6, false)].concat(), "stopper {i}");
        }

        // A close, by either side, ends the channel's record; its reopening starts a new one.
        for closer in ["client", "server"] {
            let mut c = consuming(&[1]);
            c.receive(&deliveries(1, "c", 1..=3));
            let close = [("replyCode", TestValue::Num(200.0)), ("replyText", TestValue::Str("bye".into())), ("classId", TestValue::Num(0.0)), ("methodId", TestValue::Num(0.0))];
            if closer == "client" {
                send_method(&mut c, 1, &spec::CHANNEL_CLOSE, &close);
                c.receive(&method_frame(1, spec::CHANNEL_CLOSE_OK.id, &TestValue::object(&[])).unwrap());
            } else {
                c.receive(&method_frame(1, spec::CHANNEL_CLOSE.id, &TestValue::object(&close)).unwrap());
            }
            c.clear_output();
            ack_now(&mut c, 1, 1);
            ack_now(&mut c, 1, 2);
            assert_eq!(c.out, [ack(1, 1, false), ack(1, 2, false)].concat(), "closed by the {closer}");
            c.receive(&method_frame(1, spec::CHANNEL_OPEN_OK.id, &TestValue::object(&[("channelId", TestValue::Bytes(Vec::new()))])).unwrap());
            consume(&mut c, 1, "c", false);
            c.receive(&deliveries(1, "c", 1..=2));
            c.clear_output();
            ack_now(&mut c, 1, 1);
            ack_now(&mut c, 1, 2);
            assert_eq!(c.out, ack(1, 2, true), "reopened after the {closer}'s close");
        }
    }

    #[test]
    fn a_repeated_publish_is_the_same_bytes_but_for_the_body_size() {
        let props = TestValue::object(&[("contentType", TestValue::Str("text/plain".into())), ("headers", TestValue::object(&[]))]);
        let (ex, rk) = (TestValue::Str("ex".into()), TestValue::Str("rk".into()));
        let args = frame::Publish { exchange: &ex, routing_key: &rk, mandatory: true, immediate: false, properties: &props, present: 0x8000 | 0x2000 };
        let publish = |session: &mut Connection, content: &[u8]| {
            let mut head = Vec::new();
            frame::write_publish_head(&mut head, 1, &args, content.len(), usize::MAX).unwrap();
            session.send_publish_head(1, &head, content).unwrap();
        };
        let mut fresh = Connection::new();
        publish(&mut fresh, &[1; 10]);
        publish(&mut fresh, &[2; 5000]);
        let mut again = Connection::new();
        again.open_channel(1);
        publish(&mut again, &[1; 10]);
        assert!(again.send_publish_again(1, &[2; 5000]));
        assert_eq!(again.out, fresh.out);
        assert!(!again.send_publish_again(2, b"no publish on channel 2 yet"));
    }

    #[test]
    fn split_at_every_byte_gives_the_same_events() {
        let bytes = [delivery(b"hello world", 4096), frame::HEARTBEAT.to_vec()].concat();
        for cut in 0..bytes.len() {
            let mut client = opened();
            client.receive(&bytes[..cut]);
            let mut seen = events(&client);
            client.receive(&bytes[cut..]);
            seen.extend(events(&client));
            assert_eq!(seen, [(TapeEvent::Message as u8, 1, spec::BASIC_DELIVER.id), (TapeEvent::Heartbeat as u8, 0, 0)], "cut at {cut}");
        }
    }

    /// Feeds `bytes` through `receive_with`, each read given at most `chunk` bytes; returns
    /// the events of every read and the assembled contents.
    fn read_through(client: &mut Client, bytes: &[u8], chunk: usize) -> (Vec<Event>, Vec<Vec<u8>>) {
        let (mut seen, mut contents) = (Vec::new(), Vec::new());
        let serializer = &mut client.serializer;
        crate::test_support::read_in_pieces(&mut client.core, bytes, chunk, |core| {
            serializer.serialize_read(core);
            seen.extend(tape_events(&serializer.tape, core.read_buffer()));
            contents.extend(serializer.tape.objects.drain(..).filter_map(|o| match o {
                Obj::Content(c) => Some(c),
                _ => None,
            }));
        });
        (seen, contents)
    }

    #[test]
    fn large_bodies_are_read_straight_into_their_assembly() {
        let body: Vec<u8> = (0..300_000u32).map(|n| (n % 251) as u8).collect();
        let bytes = [delivery(&body, 131072), frame::HEARTBEAT.to_vec(), delivery(b"after", 131072)].concat();
        // (Under Miri, which runs some 10,000 times slower, the tiny reads are left out.)
        let chunks: &[usize] = if cfg!(miri) { &[1000, 65536, usize::MAX] } else { &[1, 7, 1000, 65536, 200_000, usize::MAX] };
        for &chunk in chunks {
            let mut client = opened();
            client.set_frame_max(131072);
            let (seen, contents) = read_through(&mut client, &bytes, chunk);
            let kinds: Vec<u8> = seen.iter().map(|e| e.0).collect();
            assert_eq!(
                kinds,
                [TapeEvent::Message as u8, TapeEvent::Heartbeat as u8, TapeEvent::Message as u8],
                "chunk {chunk}"
            );
            assert_eq!(contents, std::slice::from_ref(&body), "chunk {chunk}");
            assert_eq!(contents[0].capacity(), body.len(), "exactly its size");
            // Only what came with the first body frame's header was copied.
            assert!(client.bytes_copied < (chunk.min(2 * READ_CHUNK) + 100) as u64, "chunk {chunk}: copied {}", client.bytes_copied);
        }
    }

    #[test]
    fn a_direct_body_frame_must_end_with_frame_end() {
        let mut bytes = delivery(&vec![1u8; 100_000], 131072);
        let end = bytes.len() - 1;
        bytes[end] = 0;
        let mut client = opened();
        client.set_frame_max(131072);
        let (seen, contents) = read_through(&mut client, &bytes, 4096);
        assert!(contents.is_empty(), "no body from a bad frame");
        assert_eq!(seen.iter().find(|e| e.0 == TapeEvent::ConnectionError as u8).map(|e| e.2), Some(FRAME_ERROR));
    }

    #[test]
    fn repeated_strings_are_sent_to_js_once() {
        let mut client = opened();
        client.receive(&delivery(b"a", 4096));
        let first = client.serializer.tape.to_slots()[TAPE_NEW_STRINGS];
        client.receive(&delivery(b"b", 4096));
        let second = client.serializer.tape.to_slots()[TAPE_NEW_STRINGS];
        assert!(first >= 4.0, "consumer tag, exchange, routing key, content type are new");
        assert_eq!(second, 0.0, "and found, not decoded, the second time");
    }

    #[test]
    fn a_header_declaring_an_enormous_body_reserves_a_bounded_amount() {
        let mut server = Connection::new();
        server.send_frames(&method_frame(1, spec::BASIC_DELIVER.id, &deliver_fields("t")).unwrap()).unwrap();
        let mut header = Vec::new();
        frame::write_header(&mut header, 1, &spec::BASIC_PROPERTIES, u64::MAX / 2, &TestValue::object(&[]), u16::MAX, usize::MAX).unwrap();
        let mut client = opened();
        client.receive(&[server.out, header].concat());
        assert_eq!(reserved(&mut client), 0, "nothing is reserved before the body arrives");
        let mut body = Vec::new();
        frame::write_body(&mut body, 1, &[0; 1000], 4096);
        client.receive(&body);
        assert!(reserved(&mut client) as u64 <= crate::content::MAX_CONTENT_RESERVE);
    }

    fn reserved(client: &mut Connection) -> usize {
        client.channels.stages_mut().map(|stage| if let Stage::Body { assembly, .. } = stage { assembly.content.capacity() } else { 0 }).sum()
    }

    #[test]
    fn frames_over_the_frame_max_are_accepted_up_to_max_frame_size() {
        // Some brokers send a delivery's body unsplit, over the negotiated frame max.
        let unsplit = delivery(&[7u8; 20_000], 131_072);
        let mut client = opened();
        client.set_frame_max(4096);
        client.receive(&unsplit);
        assert_eq!(events(&client).last().map(|e| e.0), Some(TapeEvent::Message as u8));
        // The limit is checked from the header alone, before the payload arrives.
        let mut client = opened();
        client.set_max_frame_size(16_384);
        client.receive(&unsplit[..unsplit.len() - 10_000]);
        assert_eq!(error_code(&client), Some(FRAME_ERROR));
        // 0 lifts the limit.
        let mut client = opened();
        client.set_max_frame_size(0);
        client.receive(&delivery(&vec![1u8; DEFAULT_MAX_FRAME_SIZE + 1], UNTUNED_FRAME_MAX * 8));
        assert_eq!(error_code(&client), None);
    }

    #[test]
    fn frames_too_large_to_send_are_refused_and_nothing_is_sent() {
        let mut client = opened();
        client.set_frame_max(4096);
        let big = TestValue::object(&[("x-big", TestValue::Str("x".repeat(5000)))]);
        let declare = TestValue::object(&[("queue", TestValue::Str("q".into())), ("arguments", big.clone())]);
        let e = client.send_frames(&method_frame(1, spec::QUEUE_DECLARE.id, &declare).unwrap()).unwrap_err();
        assert!(matches!(e, CodecError::FrameTooLarge { max: 4096, .. }), "{e:?}");
        let head = content_head(1, spec::BASIC_PUBLISH.id, &TestValue::object(&[]), &TestValue::object(&[("headers", big)]), 1).unwrap();
        let e = client.send_content(1, &head, b"x");
        assert!(matches!(e, Err(CodecError::FrameTooLarge { .. })));
        assert!(client.out.is_empty(), "nothing of either is left to send");
        // A frame max with no room for a body byte refuses content, whatever its size; other
        // frames up to the spec's minimum size still go.
        client.set_frame_max(8);
        client.send_frames(&method_frame(1, spec::CHANNEL_OPEN.id, &TestValue::object(&[])).unwrap()).unwrap();
        client.out.clear();
        let head = content_head(1, spec::BASIC_PUBLISH.id, &TestValue::object(&[]), &TestValue::object(&[]), 0).unwrap();
        let e = client.send_content(1, &head, b"");
        assert_eq!(e, Err(CodecError::NoRoomForBody(8)));
        assert!(!client.send_publish_again(1, b"x"));
        assert!(client.out.is_empty());
    }

    fn error_code(session: &Client) -> Option<u32> {
        events(session).into_iter().find(|e| e.0 == TapeEvent::ConnectionError as u8).map(|e| e.2)
    }

    #[test]
    fn hostile_frames_are_errors_and_later_bytes_are_ignored() {
        let oversize = [3u8, 0, 1, 0, 0, 0x20, 0];
        let mut client = opened();
        client.set_max_frame_size(4096);
        client.receive(&oversize);
        assert_eq!(error_code(&client), Some(FRAME_ERROR));
        client.receive(&frame::HEARTBEAT);
        assert!(events(&client).is_empty());

        let mut unknown_type = frame::HEARTBEAT;
        unknown_type[0] = 9;
        let mut client = opened();
        client.receive(&unknown_type);
        assert_eq!(error_code(&client), Some(FRAME_ERROR));

    }

    #[test]
    fn arguments_that_do_not_decode_are_a_connection_error_in_place_of_the_rest_of_the_read() {
        // connection.close with its reply code only: no reply text, class or method.
        let mut truncated = vec![FRAME_METHOD as u8, 0, 0, 0, 0, 0, 6];
        truncated.extend(spec::CONNECTION_CLOSE.id.to_be_bytes());
        truncated.extend([1, 200, spec::FRAME_END as u8]);
        let mut client = opened();
        client.receive(&[&frame::HEARTBEAT[..], &truncated, &frame::HEARTBEAT].concat());
        assert_eq!(events(&client), vec![(TapeEvent::Heartbeat as u8, 0, 0), (TapeEvent::ConnectionError as u8, 0, FRAME_ERROR)]);
        client.receive(&frame::HEARTBEAT);
        assert!(events(&client).is_empty(), "nothing more is read");
    }

    #[test]
    fn a_body_longer_than_declared_is_a_channel_error_and_the_connection_goes_on() {
        // In one frame, and in a second frame after part of the body.
        let mut too_long = delivery(b"abc", 4096);
        let body_at = too_long.len() - 11; // 7 header bytes, 3 of body, frame-end
        too_long[body_at + 6] = 4; // the body frame claims 4 bytes where the header said 3
        too_long.insert(too_long.len() - 1, b'd');
        let mut split = delivery(b"abcdef", 8 + 3); // three body bytes per frame
        let last_body = split.len() - 11;
        split[last_body + 6] = 4;
        split.insert(split.len() - 1, b'g');
        for (bytes, declared) in [(too_long, 3), (split, 6)] {
            let mut client = opened();
            client.receive(&bytes);
            assert_eq!(events(&client), vec![(TapeEvent::ChannelError as u8, 1, spec::UNEXPECTED_FRAME)]);
            let slots = client.serializer.tape.to_slots();
            let at = TapeView::new(&slots, &client.serializer.tape, client.read_buffer()).base;
            let error = [CHANNEL_ERROR_VIOLATION, CHANNEL_ERROR_METHOD, CHANNEL_ERROR_BODY_SIZE].map(|slot| slots[at + slot]);
            assert_eq!(error, [ViolationKind::TooMuchContent as u8 as f64, 0.0, declared as f64]);
            client.receive(&frame::HEARTBEAT);
            assert_eq!(events(&client), vec![(TapeEvent::Heartbeat as u8, 0, 0)]);
        }
    }

    proptest! {
        #[test]
        fn fuzz_frame_decoder(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
            let mut client = opened();
            client.receive(&bytes);
            client.receive(&bytes);
        }

        #[test]
        fn fuzz_frame_decoder_mutated(at in 0usize..200, byte in any::<u8>(), cut in 0usize..200) {
            let mut bytes = [delivery(b"some content", 4096), delivery(&[7; 300], 4096)].concat();
            let at = at % bytes.len();
            bytes[at] = byte;
            let cut = cut % bytes.len();
            let mut client = opened();
            client.receive(&bytes[..cut]);
            client.receive(&bytes[cut..]);
            prop_assert!(client.read_buffer().len() <= bytes.len());
        }

        #[test]
        fn fuzz_direct_reads_mutated(at in 0usize..140_000, byte in any::<u8>(), chunk in 1usize..70_000) {
            // (Under Miri, some 10,000 times slower, a body whose first frame only is direct.)
            let body = vec![9u8; if cfg!(miri) { 70_000 } else { 130_000 }];
            let mut bytes = [delivery(&body, 65536), delivery(b"after", 65536)].concat();
            let at = at % bytes.len();
            bytes[at] = byte;
            let mut client = opened();
            client.set_frame_max(65536);
            // (Miri, some 10,000 times slower, reads in larger pieces.)
            let chunk = if cfg!(miri) { chunk.max(8192) } else { chunk };
            let (seen, contents) = read_through(&mut client, &bytes, chunk);
            let failed = seen.iter().any(|e| e.0 == TapeEvent::ConnectionError as u8);
            for content in &contents {
                prop_assert!(content.len() <= bytes.len(), "nothing beyond what arrived");
            }
            if !failed && bytes[at] == body[0] && at > 200 && at < bytes.len() - 100 {
                prop_assert_eq!(&contents, std::slice::from_ref(&body), "a byte of the body changed to itself");
            }
        }
    }
}

/// The channel rules of the content state machine, read by a client core from a scripted
/// server core, at every read size that matters.
#[cfg(test)]
mod pair_tests {
    use crate::content::Violation;
    use crate::spec;
    use crate::test_support::{Pair, Seen, TestValue};

    /// Read sizes (under Miri, which runs some 10,000 times slower, the tiniest are left out).
    const READS: &[usize] = if cfg!(miri) { &[17, 4096, usize::MAX] } else { &[1, 3, 17, 4096, usize::MAX] };

    fn delivered(channel: u16, content: &[u8]) -> Seen {
        Seen::Message { channel, id: spec::BASIC_DELIVER.id, content: content.to_vec() }
    }

    fn refused(channel: u16, violation: Violation) -> Seen {
        Seen::ChannelError { channel, violation }
    }

    #[test]
    fn messages_on_interleaved_channels_are_assembled_apart() {
        for &chunk in READS {
            let mut pair = Pair::new(4096 + 8);
            let (one, two) = (vec![1u8; 10_000], vec![2u8; 5_000]);
            // Frames of two messages, interleaved as a broker may send them.
            pair.deliver(1, 1, &one);
            let first = std::mem::take(&mut pair.server.out);
            pair.deliver(2, 1, &two);
            let second = std::mem::take(&mut pair.server.out);
            let (a, b) = (crate::test_support::split_frames(&first), crate::test_support::split_frames(&second));
            for i in 0..a.len().max(b.len()) {
                for f in [a.get(i), b.get(i)].into_iter().flatten() {
                    pair.raw(f);
                }
            }
            assert_eq!(pair.read(chunk), [delivered(2, &two), delivered(1, &one)], "read {chunk}");
        }
    }

    #[test]
    fn deliveries_returns_and_get_oks_are_whole_and_other_methods_pass_between_their_frames() {
        for &chunk in READS {
            let mut pair = Pair::new(4096 + 8);
            pair.message(1, spec::BASIC_GET_OK.id, 1, &[5; 5000]);
            let bytes = std::mem::take(&mut pair.server.out);
            let frames = crate::test_support::split_frames(&bytes);
            pair.raw(frames[0]).method(1, spec::BASIC_ACK.id, &[("deliveryTag", TestValue::Num(3.0))]).raw(&frames[1..].concat());
            pair.message(2, spec::BASIC_RETURN.id, 2, b"returned");
            let expected = [
                Seen::Method { channel: 1, id: spec::BASIC_ACK.id },
                Seen::Message { channel: 1, id: spec::BASIC_GET_OK.id, content: vec![5; 5000] },
                Seen::Message { channel: 2, id: spec::BASIC_RETURN.id, content: b"returned".to_vec() },
            ];
            assert_eq!(pair.read(chunk), expected, "read {chunk}");
        }
    }

    #[test]
    fn a_message_cut_off_by_the_next_is_refused_and_the_channel_s_content_dropped_until_it_is_reopened() {
        for &chunk in READS {
            let mut pair = Pair::new(4096 + 8);
            pair.deliver(1, 1, &[7; 6000]);
            let mut bytes = std::mem::take(&mut pair.server.out);
            bytes.truncate(bytes.len() - (6000 - 4096) - 8); // the last body frame never comes
            pair.raw(&bytes).deliver(1, 2, b"next").deliver(2, 1, b"other channel");
            pair.method(1, spec::CHANNEL_CLOSE_OK.id, &[]);
            pair.method(1, spec::CHANNEL_OPEN_OK.id, &[("channelId", TestValue::Bytes(Vec::new()))]).deliver(1, 3, b"after");
            let expected = [
                refused(1, Violation::ContentExpected { blamed: spec::BASIC_DELIVER.id }),
                delivered(2, b"other channel"),
                Seen::Method { channel: 1, id: spec::CHANNEL_CLOSE_OK.id },
                Seen::Method { channel: 1, id: spec::CHANNEL_OPEN_OK.id },
                delivered(1, b"after"),
            ];
            assert_eq!(pair.read(chunk), expected, "read {chunk}");
        }
    }

    #[test]
    fn frames_out_of_turn_are_refused_with_the_rule_they_broke() {
        const STRAY_BODY: [u8; 13] = [3, 0, 1, 0, 0, 0, 5, b's', b't', b'r', b'a', b'y', 0xce];
        type Send = dyn Fn(&mut Pair) -> &mut Pair;
        let cases: [(&Send, Seen); 4] = [
            (&|p| p.deliver(1, 1, b"").raw(&STRAY_BODY), refused(1, Violation::DeliveryExpected { channel: 1, class_id: 0 })),
            (&|p| p.header(3, 10), refused(3, Violation::DeliveryExpected { channel: 3, class_id: 60 })),
            (&|p| p.message_method(1, spec::BASIC_DELIVER.id).message_method(1, spec::BASIC_DELIVER.id), refused(1, Violation::HeaderExpected { blamed: spec::BASIC_DELIVER.id })),
            (&|p| p.message_method(1, spec::BASIC_GET_OK.id).header(1, 10).header(1, 10), refused(1, Violation::ContentExpected { blamed: 60 })),
        ];
        for (send, error) in cases {
            for &chunk in READS {
                let mut pair = Pair::new(4096 + 8);
                send(&mut pair);
                let seen = pair.read(chunk);
                assert_eq!(seen.iter().filter(|s| matches!(s, Seen::ChannelError { .. })).collect::<Vec<_>>(), [&error], "read {chunk}");
            }
        }
    }

    #[test]
    fn a_stream_that_cannot_be_trusted_is_a_connection_error_with_what_broke_it() {
        // (Arguments that do not decode are found by the serializer: see the tape's tests.)
        use crate::codec::CodecError;
        use crate::event::ProtocolError;
        use crate::frame::FrameError;
        let heartbeat = crate::frame::HEARTBEAT;
        let mut bad_end = heartbeat;
        bad_end[7] = 0;
        let unknown_method = [1, 0, 0, 0, 0, 0, 4, 0, 0xff, 0, 0xff, 0xce];
        let cases: [(&[u8], ProtocolError); 4] = [
            (&[9, 0, 0, 0, 0, 0, 0, 0xce], ProtocolError::UnknownFrameType(9)),
            (&bad_end, ProtocolError::Framing(FrameError::BadFrameEnd)),
            (&[3, 0, 1, 0, 1, 0, 0], ProtocolError::Framing(FrameError::TooLarge { size: 65536, max: 4096 })),
            (&unknown_method, ProtocolError::Decoding(CodecError::UnknownMethod)),
        ];
        for (bytes, error) in cases {
            let mut pair = Pair::new(4096);
            pair.client.set_max_frame_size(4096);
            pair.raw(bytes).raw(&heartbeat);
            assert_eq!(pair.read(usize::MAX), [Seen::ConnectionError { error: error.clone() }], "{error:?}");
            assert_eq!(error.code(), spec::FRAME_ERROR as u16, "{error:?}");
        }
    }

    #[test]
    fn an_empty_message_is_whole_at_its_header() {
        for &chunk in READS {
            let mut pair = Pair::new(4096 + 8);
            pair.deliver(1, 1, b"").deliver(1, 2, b"x");
            assert_eq!(pair.read(chunk), [delivered(1, b""), delivered(1, b"x")], "read {chunk}");
        }
    }

    #[test]
    fn frames_on_channels_the_peer_has_not_opened_are_handed_on_one_by_one() {
        // Channel 0, a channel never opened, and one closed: as a server sees a publish.
        for channel in [0, 9, 3] {
            let mut pair = Pair::new(4096 + 8);
            pair.method(3, spec::CHANNEL_CLOSE.id, &[("replyCode", TestValue::Num(200.0)), ("replyText", TestValue::Str("".into())), ("classId", TestValue::Num(0.0)), ("methodId", TestValue::Num(0.0))]);
            pair.read(usize::MAX);
            pair.message(channel, spec::BASIC_PUBLISH.id, 1, b"abc").message(channel, spec::BASIC_DELIVER.id, 2, b"");
            let expected = [
                Seen::Method { channel, id: spec::BASIC_PUBLISH.id },
                Seen::Header { channel, size: 3 },
                Seen::Body { channel, content: b"abc".to_vec() },
                Seen::Method { channel, id: spec::BASIC_DELIVER.id },
                Seen::Header { channel, size: 0 },
            ];
            assert_eq!(pair.read(usize::MAX), expected, "channel {channel}");
        }
    }

    #[test]
    fn heartbeats_between_body_frames_do_not_disturb_the_body() {
        for &chunk in READS {
            let mut pair = Pair::new(4096 + 8);
            pair.deliver(1, 1, &[9; 9000]);
            let bytes = std::mem::take(&mut pair.server.out);
            for f in crate::test_support::split_frames(&bytes) {
                pair.raw(f).raw(&crate::frame::HEARTBEAT);
            }
            let seen = pair.read(chunk);
            assert_eq!(seen.iter().filter(|s| **s == Seen::Heartbeat).count(), 5, "read {chunk}");
            assert!(seen.contains(&delivered(1, &[9; 9000])), "read {chunk}");
            assert!(!seen.iter().any(|s| matches!(s, Seen::ConnectionError { .. })));
        }
    }
}
