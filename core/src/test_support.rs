//! Helpers for the Rust tests: plain values standing in for JS ones, a reader of tape
//! slots (as lib/tape.js reads them), and encoders of whole frames from such values.

use crate::codec::{Kind, Result, Value};
use crate::tape::{Obj, Tape};
use crate::{frame, spec};

#[derive(Clone, Debug, PartialEq)]
pub enum TestValue {
    Undefined,
    Null,
    Bool(bool),
    Num(f64),
    Str(String),
    Bytes(Vec<u8>),
    Array(Vec<TestValue>),
    Object(Vec<(String, TestValue)>),
}

impl TestValue {
    pub fn object(entries: &[(&str, TestValue)]) -> Self {
        TestValue::Object(entries.iter().map(|(k, v)| (k.to_string(), v.clone())).collect())
    }

    fn entries(&self) -> &[(String, TestValue)] {
        match self {
            TestValue::Object(entries) => entries,
            _ => &[],
        }
    }
}

impl Value for TestValue {
    fn kind(&self) -> Result<Kind> {
        Ok(match self {
            TestValue::Undefined => Kind::Undefined,
            TestValue::Null => Kind::Null,
            TestValue::Bool(_) => Kind::Bool,
            TestValue::Num(_) => Kind::Number,
            TestValue::Str(_) => Kind::String,
            TestValue::Bytes(_) => Kind::Bytes,
            TestValue::Array(_) => Kind::Array,
            TestValue::Object(_) => Kind::Object,
        })
    }

    fn truthy(&self) -> Result<bool> {
        Ok(match self {
            TestValue::Undefined | TestValue::Null => false,
            TestValue::Bool(b) => *b,
            TestValue::Num(n) => *n != 0.0 && !n.is_nan(),
            TestValue::Str(s) => !s.is_empty(),
            _ => true,
        })
    }

    fn number(&self) -> Result<f64> {
        match self {
            TestValue::Num(n) => Ok(*n),
            _ => Ok(f64::NAN),
        }
    }

    fn append_utf8(&self, out: &mut Vec<u8>) -> Result<()> {
        if let TestValue::Str(s) = self {
            out.extend_from_slice(s.as_bytes());
        }
        Ok(())
    }

    fn append_bytes(&self, out: &mut Vec<u8>) -> Result<()> {
        if let TestValue::Bytes(b) = self {
            out.extend_from_slice(b);
        }
        Ok(())
    }

    fn length(&self) -> Result<u32> {
        match self {
            TestValue::Array(items) => Ok(items.len() as u32),
            _ => Ok(0),
        }
    }

    fn item(&self, index: u32) -> Result<Self> {
        match self {
            TestValue::Array(items) => Ok(items.get(index as usize).cloned().unwrap_or(TestValue::Undefined)),
            _ => Ok(TestValue::Undefined),
        }
    }

    fn keys(&self) -> Result<Self> {
        Ok(TestValue::Array(self.entries().iter().map(|(k, _)| TestValue::Str(k.clone())).collect()))
    }

    fn entry(&self, key: &Self) -> Result<(String, Self)> {
        let TestValue::Str(key) = key else { return Ok((String::new(), TestValue::Undefined)) };
        let value = self.entries().iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
        Ok((key.clone(), value.unwrap_or(TestValue::Undefined)))
    }

    fn get(&self, key: &'static str) -> Result<Self> {
        Ok(self.entries().iter().find(|(k, _)| k == key).map(|(_, v)| v.clone()).unwrap_or(TestValue::Undefined))
    }

    fn has_own(&self, key: &'static str) -> Result<bool> {
        Ok(self.entries().iter().any(|(k, _)| k == key))
    }

    /// Not JSON: the tests only need a text that tells values apart.
    fn json(&self) -> Result<String> {
        Ok(format!("{self:?}"))
    }
}

/// Reads tape slots back into values, as lib/tape.js does, to check round trips.
pub struct TapeView<'a> {
    pub slots: &'a [f64],
    pub tape: &'a Tape,
    pub source: &'a [u8],
    pub strings: std::collections::HashMap<u32, String>,
    /// Where events start in `slots` (after the string-table header).
    pub base: usize,
}

impl<'a> TapeView<'a> {
    pub fn new(slots: &'a [f64], tape: &'a Tape, source: &'a [u8]) -> Self {
        use crate::boundary::{TAPE_NEW_STRINGS, TAPE_STRING_PAIRS};
        let fresh = slots[TAPE_NEW_STRINGS] as usize;
        let mut strings = std::collections::HashMap::new();
        for n in 0..fresh {
            let pair = TAPE_STRING_PAIRS + 2 * n;
            let (id, index) = (slots[pair] as u32, slots[pair + 1] as usize);
            strings.insert(id, self_text(&tape.objects[index], source));
        }
        TapeView { slots, tape, source, strings, base: TAPE_STRING_PAIRS + 2 * fresh }
    }

    pub fn string(&self, slot: f64) -> String {
        if slot >= 0.0 {
            self.strings[&(slot as u32)].clone()
        } else {
            self_text(&self.tape.objects[(-slot - 1.0) as usize], self.source)
        }
    }

    pub fn bytes(&self, slot: f64) -> Vec<u8> {
        match &self.tape.objects[slot as usize] {
            Obj::Bytes { start, len } => self.source[*start..start + len].to_vec(),
            Obj::Content(c) => c.clone(),
            other => panic!("not bytes: {other:?}"),
        }
    }

    pub fn table(&self, at: usize) -> TestValue {
        let start = self.base + self.slots[at] as usize;
        let mut pos = start;
        self.entries(&mut pos, start + self.slots[at + 1] as usize)
    }

    fn entries(&self, pos: &mut usize, end: usize) -> TestValue {
        let mut out = Vec::new();
        while *pos < end {
            let key = self.string(self.slots[*pos]);
            *pos += 1;
            out.push((key, self.value(pos)));
        }
        TestValue::Object(out)
    }

    fn value(&self, pos: &mut usize) -> TestValue {
        let tag = self.slots[*pos] as u8;
        *pos += 1;
        let mut next = || {
            let v = self.slots[*pos];
            *pos += 1;
            v
        };
        match tag {
            b'V' => TestValue::Null,
            b't' => TestValue::Bool(next() != 0.0),
            b'S' => TestValue::Str(self.string(next())),
            b'x' => TestValue::Bytes(self.bytes(next())),
            b'D' => {
                let places = next();
                let digits = next();
                TestValue::object(&[("places", TestValue::Num(places)), ("digits", TestValue::Num(digits))])
            }
            b'F' => {
                let count = next() as usize;
                let end = *pos + count;
                self.entries(pos, end)
            }
            b'A' => {
                let count = next() as usize;
                let end = *pos + count;
                let mut items = Vec::new();
                while *pos < end {
                    items.push(self.value(pos));
                }
                TestValue::Array(items)
            }
            _ => TestValue::Num(next()),
        }
    }
}

fn self_text(obj: &Obj, source: &[u8]) -> String {
    match obj {
        Obj::Str { start, len } => String::from_utf8_lossy(&source[*start..start + len]).into_owned(),
        Obj::Text(t) => t.clone(),
        other => panic!("not a string: {other:?}"),
    }
}
/// The method frame of `method_id` with `fields`, as JS would have it encoded.
pub fn method_frame(channel: u16, method_id: u32, fields: &TestValue) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    frame::write_method(&mut out, channel, spec::method(method_id).expect("a known method"), fields, usize::MAX)?;
    Ok(out)
}

/// The method and header frames of a message of `body_size` bytes.
pub fn content_head(channel: u16, method_id: u32, fields: &TestValue, properties: &TestValue, body_size: usize) -> Result<Vec<u8>> {
    let mut out = method_frame(channel, method_id, fields)?;
    let class_id = (method_id >> 16) as u16;
    let props = spec::properties(class_id).expect("a content class");
    frame::write_header(&mut out, channel, props, body_size as u64, properties, u16::MAX, usize::MAX)?;
    Ok(out)
}

/// What a client core made of what it read, one entry per event, typed.
#[derive(Clone, Debug, PartialEq)]
pub enum Seen {
    Method { channel: u16, id: u32 },
    Header { channel: u16, size: u64 },
    Body { channel: u16, content: Vec<u8> },
    /// A whole delivery, return or get-ok.
    Message { channel: u16, id: u32, content: Vec<u8> },
    ChannelError { channel: u16, violation: crate::content::Violation },
    ChannelClosed { channel: u16 },
    Heartbeat,
    ConnectionError { error: crate::event::ProtocolError },
}

/// A client core reading what a scripted server sends, deterministically: the server's
/// frames are encoded by a second core and read by the client in reads of the sizes given,
/// as quinn's `Pair` drives two endpoints without a network.
pub struct Pair {
    pub server: crate::connection::Connection,
    pub client: crate::connection::Connection,
}

impl Pair {
    /// A pair whose channels 1 to 3 the server has opened (channel.open-ok).
    pub fn new(frame_max: usize) -> Self {
        let (mut server, mut client) = (crate::connection::Connection::new(), crate::connection::Connection::new());
        server.set_frame_max(frame_max);
        client.set_frame_max(frame_max);
        let mut pair = Pair { server, client };
        for channel in 1..=3 {
            pair.method(channel, spec::CHANNEL_OPEN_OK.id, &[("channelId", TestValue::Bytes(Vec::new()))]);
        }
        pair.read(usize::MAX);
        pair
    }

    pub fn method(&mut self, channel: u16, method_id: u32, fields: &[(&str, TestValue)]) -> &mut Self {
        self.server.send_frames(&method_frame(channel, method_id, &TestValue::object(fields)).unwrap()).unwrap();
        self
    }

    /// A basic.deliver of `body` with consumer tag "c" and delivery tag `tag`.
    pub fn deliver(&mut self, channel: u16, tag: u32, body: &[u8]) -> &mut Self {
        self.message(channel, spec::BASIC_DELIVER.id, tag, body)
    }

    /// A message of `body` with the method `method_id` (a deliver, return or get-ok).
    pub fn message(&mut self, channel: u16, method_id: u32, tag: u32, body: &[u8]) -> &mut Self {
        let head = content_head(channel, method_id, &Pair::message_fields(tag), &TestValue::object(&[]), body.len()).unwrap();
        self.server.send_content(channel, &head, body).unwrap();
        self
    }

    /// The method frame alone of a message.
    pub fn message_method(&mut self, channel: u16, method_id: u32) -> &mut Self {
        self.server.send_frames(&method_frame(channel, method_id, &Pair::message_fields(1)).unwrap()).unwrap();
        self
    }

    /// Arguments enough for a deliver, return or get-ok.
    fn message_fields(tag: u32) -> TestValue {
        TestValue::object(&[
            ("consumerTag", TestValue::Str("c".into())),
            ("deliveryTag", TestValue::Num(tag as f64)),
            ("exchange", TestValue::Str("".into())),
            ("routingKey", TestValue::Str("q".into())),
            ("replyCode", TestValue::Num(312.0)),
            ("replyText", TestValue::Str("NO_ROUTE".into())),
            ("messageCount", TestValue::Num(0.0)),
        ])
    }

    /// A content header alone, declaring `body_size`.
    pub fn header(&mut self, channel: u16, body_size: u64) -> &mut Self {
        let mut out = Vec::new();
        frame::write_header(&mut out, channel, &spec::BASIC_PROPERTIES, body_size, &TestValue::object(&[]), u16::MAX, usize::MAX).unwrap();
        self.raw(&out)
    }

    pub fn raw(&mut self, bytes: &[u8]) -> &mut Self {
        self.server.send_bytes(bytes);
        self
    }

    /// The client reads everything sent so far, in reads of at most `chunk` bytes.
    pub fn read(&mut self, chunk: usize) -> Vec<Seen> {
        let bytes = std::mem::take(&mut self.server.out);
        let mut seen = Vec::new();
        read_in_pieces(&mut self.client, &bytes, chunk, |client| seen.extend(Pair::seen_by(client)));
        seen
    }

    /// The events of `client`'s last read, as the core yields them.
    fn seen_by(client: &mut crate::connection::Connection) -> Vec<Seen> {
        use crate::event::{Event, EventSource};
        let mut out = Vec::new();
        while let Some(event) = client.poll_event() {
            let read = client.read_buffer();
            out.push(match event {
                Event::Method { channel, id, .. } => Seen::Method { channel, id },
                Event::Header { channel, body_size, .. } => Seen::Header { channel, size: body_size },
                Event::Body { channel, content } => Seen::Body { channel, content: content.bytes(read).to_vec() },
                Event::Message { channel, id, content, .. } => Seen::Message { channel, id, content: content.bytes(read).to_vec() },
                Event::Heartbeat { .. } => Seen::Heartbeat,
                Event::ChannelError { channel, violation } => Seen::ChannelError { channel, violation },
                Event::ChannelClosed { channel } => Seen::ChannelClosed { channel },
                Event::ConnectionError { error } => Seen::ConnectionError { error },
            });
        }
        out
    }
}

/// Whole frames of `bytes`, one slice each.
pub fn split_frames(bytes: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut rest = bytes;
    while let Ok(Some(envelope)) = frame::parse_envelope(rest, usize::MAX) {
        let (one, tail) = rest.split_at(envelope.size + frame::OVERHEAD);
        out.push(one);
        rest = tail;
    }
    out
}

/// Feeds `bytes` to `client` through `receive_with`, each read given at most `chunk` bytes,
/// calling `after_each` after every read.
pub fn read_in_pieces(client: &mut crate::connection::Connection, bytes: &[u8], chunk: usize, mut after_each: impl FnMut(&mut crate::connection::Connection)) {
    let mut at = 0;
    while at < bytes.len() {
        let read = client
            .receive_with(|spare| {
                let n = spare.len().min(chunk).min(bytes.len() - at);
                for (slot, &byte) in spare.iter_mut().zip(&bytes[at..at + n]) {
                    slot.write(byte);
                }
                Ok(n)
            })
            .unwrap();
        at += read.filled;
        after_each(client);
    }
}
