//! The channels of a connection, each one record from its opening to the end of its close
//! handshake: the one owner of whether a channel is open. The record holds where the channel
//! is in its life, in a message (`content.rs`), in its deliveries' acks (`unsettled.rs`), and
//! its last publish.
//!
//! JS names a channel by a [`ChannelHandle`] given when it opens one: its number and a
//! generation, so that a channel object kept after its close cannot send on a later channel
//! given the same number. Every send is checked against the record ([`Channels::may_send`]):
//! nothing but the close-ok owed goes out on a channel closing or closed, and JS words the
//! refusal (amqplib's IllegalOperationError). The connection moves a record along by what it
//! writes and reads (`Connection::send_frames`, `Connection::method_frame`); between our close
//! and its close-ok, the channel's frames are dropped, and a close crossing ours is answered
//! here.

use crate::boundary::Refusal;
use crate::content::Stage;
use crate::spec;
use crate::unsettled::Acks;
use std::collections::HashMap;

/// Per-channel state, keyed by channel number (SipHash, the default, showed up in profiles of
/// receiving small messages: a lookup per message).
type ByChannel<V> = HashMap<u16, V, ahash::RandomState>;

/// A channel as JS names it: its number in the low 16 bits, its generation above them (a
/// safe integer in JS). Generation 0 names a bare number, checked against nothing: channel 0,
/// and the frames amqplib's and our codec tests write by hand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChannelHandle(pub u64);

impl ChannelHandle {
    pub fn number(self) -> u16 {
        self.0 as u16
    }

    fn generation(self) -> u64 {
        self.0 >> 16
    }
}

/// Where a channel is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lifecycle {
    /// Given to JS; channel.open written or about to be.
    Opening,
    /// The channel.open-ok read: the content rules apply.
    Open,
    /// Our channel.close written: only its close-ok matters now.
    Closing,
    /// The peer's channel.close read: only our close-ok goes out.
    ClosedByPeer,
}

#[derive(Debug)]
pub struct Channel {
    generation: u64,
    lifecycle: Lifecycle,
    /// Where the channel is in a message; read only while the content rules apply.
    pub stage: Stage,
    pub acks: Acks,
    /// The method and header frames of its last publish, to send again for a publish with the
    /// same arguments (only the body size differs).
    pub last_publish: Vec<u8>,
}

impl Channel {
    fn new(generation: u64, lifecycle: Lifecycle) -> Self {
        Channel { generation, lifecycle, stage: Stage::Idle, acks: Acks::default(), last_publish: Vec::new() }
    }

    /// Whether what completes on it (a message, a channel error) is dropped: our close is on
    /// its way.
    pub fn is_closing(&self) -> bool {
        self.lifecycle == Lifecycle::Closing
    }

    /// Whether its frames go through the content rules: from the open-ok read until the close.
    fn content_rules_apply(&self) -> bool {
        matches!(self.lifecycle, Lifecycle::Open | Lifecycle::Closing)
    }
}

/// What a method read on a channel means for it (see [`Channels::received`]).
#[derive(Debug, PartialEq, Eq)]
pub enum Received {
    /// Handed on to JS.
    HandOn,
    /// Dropped: the channel is closing.
    Drop,
    /// A close crossing ours: answered with a close-ok, not handed on.
    AnswerClose,
    /// The close-ok of our close: the channel has ended.
    CloseConfirmed,
}

#[derive(Debug, Default)]
pub struct Channels {
    records: ByChannel<Channel>,
    last_generation: u64,
}

impl Channels {
    /// A channel JS is about to open on `number` (which it chose, lowest first, as amqplib
    /// does); a record left on that number is replaced, so its handle is refused from now on.
    pub fn open(&mut self, number: u16) -> ChannelHandle {
        self.last_generation += 1;
        self.records.insert(number, Channel::new(self.last_generation, Lifecycle::Opening));
        ChannelHandle(self.last_generation << 16 | number as u64)
    }

    /// Whether JS may write `method_id` on the channel `handle` names: its number if so.
    pub fn may_send(&self, handle: ChannelHandle, method_id: u32) -> Result<u16, Refusal> {
        let number = handle.number();
        if handle.generation() == 0 {
            return Ok(number);
        }
        match self.records.get(&number) {
            Some(record) if record.generation == handle.generation() => match record.lifecycle {
                Lifecycle::Opening | Lifecycle::Open => Ok(number),
                Lifecycle::Closing => Err(Refusal::ChannelClosing),
                Lifecycle::ClosedByPeer if method_id == spec::CHANNEL_CLOSE_OK.id => Ok(number),
                Lifecycle::ClosedByPeer => Err(Refusal::ChannelClosed),
            },
            _ => Err(Refusal::ChannelClosed),
        }
    }

    /// How many deliveries of the channel `handle` names wait for an ack; None when its record
    /// cannot tell (`unsettled.rs`) or the handle names no channel open now.
    pub fn unsettled(&self, handle: ChannelHandle) -> Option<usize> {
        let record = self.records.get(&handle.number())?;
        if record.generation != handle.generation() {
            return None;
        }
        record.acks.unsettled_count()
    }

    /// A method frame written on `channel` (not 0): a close makes it closing, the close-ok
    /// of the peer's close ends it; the ack record takes the rest.
    pub fn sent(&mut self, channel: u16, id: u32, args: &[u8]) {
        let Some(record) = self.records.get_mut(&channel) else { return };
        if id == spec::CHANNEL_CLOSE.id && record.lifecycle != Lifecycle::ClosedByPeer {
            record.lifecycle = Lifecycle::Closing;
        } else if id == spec::CHANNEL_CLOSE_OK.id && record.lifecycle == Lifecycle::ClosedByPeer {
            self.records.remove(&channel);
        } else if record.content_rules_apply() {
            record.acks.sent(id, args);
        }
    }

    /// A method frame without content read on `channel` (not 0).
    pub fn received(&mut self, channel: u16, id: u32, args: &[u8]) -> Received {
        if id == spec::CHANNEL_OPEN_OK.id {
            return self.opened(channel);
        }
        let Some(record) = self.records.get_mut(&channel) else { return Received::HandOn };
        match (record.lifecycle, id) {
            (Lifecycle::Closing, _) if id == spec::CHANNEL_CLOSE.id => Received::AnswerClose,
            (Lifecycle::Closing, _) if id == spec::CHANNEL_CLOSE_OK.id => {
                self.records.remove(&channel);
                Received::CloseConfirmed
            }
            (Lifecycle::Closing, _) => Received::Drop,
            (_, _) if id == spec::CHANNEL_CLOSE.id => {
                // A message cut off by a close is not one; what it delivered is settled by it.
                *record = Channel::new(record.generation, Lifecycle::ClosedByPeer);
                Received::HandOn
            }
            (Lifecycle::Open, _) => {
                record.acks.method_received(id, args);
                Received::HandOn
            }
            _ => Received::HandOn,
        }
    }

    /// The open-ok of `channel` read: the content rules apply from here, and nothing of it is
    /// unsettled. A channel the peer opens unasked (amqplib's tests playing the server do) gets a
    /// bare record. A channel we closed before its open-ok stays closing, and the open-ok is
    /// dropped: the close-ok to come ends the channel, and the open's reply hears of that end.
    fn opened(&mut self, channel: u16) -> Received {
        let record = self.records.entry(channel).or_insert_with(|| Channel::new(0, Lifecycle::Open));
        if record.is_closing() {
            return Received::Drop;
        }
        *record = Channel::new(record.generation, Lifecycle::Open);
        Received::HandOn
    }

    /// The record of `channel` while its frames go through the content rules.
    pub fn open_mut(&mut self, channel: u16) -> Option<&mut Channel> {
        self.records.get_mut(&channel).filter(|record| record.content_rules_apply())
    }

    /// Where `channel` is in a message, while the content rules apply to it.
    pub fn stage(&self, channel: u16) -> Option<&Stage> {
        self.records.get(&channel).filter(|record| record.content_rules_apply()).map(|record| &record.stage)
    }

    pub fn stage_mut(&mut self, channel: u16) -> Option<&mut Stage> {
        self.open_mut(channel).map(|record| &mut record.stage)
    }

    /// The record of a channel JS may write on (see [`may_send`](Self::may_send)), for its
    /// last publish.
    pub fn get_mut(&mut self, channel: u16) -> Option<&mut Channel> {
        self.records.get_mut(&channel)
    }

    /// The stages of every channel, for the frames their messages hold in the read buffer.
    pub fn stages_mut(&mut self) -> impl Iterator<Item = &mut Stage> {
        self.records.values_mut().filter(|record| record.content_rules_apply()).map(|record| &mut record.stage)
    }

    /// The connection ended (or can no longer be trusted): every channel with it, and the
    /// records' memory. Generations go on rising, so no handle given before names a later
    /// record.
    pub fn clear(&mut self) {
        self.records = ByChannel::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLOSE: u32 = spec::CHANNEL_CLOSE.id;
    const CLOSE_OK: u32 = spec::CHANNEL_CLOSE_OK.id;
    const QOS: u32 = spec::BASIC_QOS.id;

    #[test]
    fn a_channel_is_refused_once_closing_and_once_closed_and_its_handle_stays_closed_when_the_number_is_reused() {
        let mut channels = Channels::default();
        let first = channels.open(1);
        assert_eq!(channels.may_send(first, QOS), Ok(1));
        channels.received(1, spec::CHANNEL_OPEN_OK.id, &[]);
        channels.sent(1, CLOSE, &[]);
        assert_eq!(channels.may_send(first, QOS), Err(Refusal::ChannelClosing));
        assert_eq!(channels.may_send(first, CLOSE), Err(Refusal::ChannelClosing), "a second close");
        assert_eq!(channels.received(1, spec::BASIC_DELIVER.id, &[]), Received::Drop);
        assert_eq!(channels.received(1, CLOSE, &[]), Received::AnswerClose);
        assert_eq!(channels.received(1, CLOSE_OK, &[]), Received::CloseConfirmed);
        assert_eq!(channels.may_send(first, QOS), Err(Refusal::ChannelClosed));
        let second = channels.open(1);
        assert_eq!(second.number(), 1);
        assert_eq!(channels.may_send(second, QOS), Ok(1));
        assert_eq!(channels.may_send(first, QOS), Err(Refusal::ChannelClosed), "the old handle");
    }

    #[test]
    fn an_open_ok_after_our_close_is_dropped_and_the_close_ok_still_ends_the_channel() {
        let mut channels = Channels::default();
        let handle = channels.open(4);
        channels.sent(4, CLOSE, &[]);
        assert_eq!(channels.received(4, spec::CHANNEL_OPEN_OK.id, &[]), Received::Drop);
        assert_eq!(channels.may_send(handle, QOS), Err(Refusal::ChannelClosing), "still closing");
        assert_eq!(channels.received(4, CLOSE_OK, &[]), Received::CloseConfirmed);
        assert_eq!(channels.may_send(handle, QOS), Err(Refusal::ChannelClosed));
    }

    #[test]
    fn a_close_ok_that_answers_no_close_of_ours_is_handed_on_as_a_reply() {
        let mut channels = Channels::default();
        let handle = channels.open(2);
        assert_eq!(channels.received(2, CLOSE_OK, &[]), Received::HandOn);
        assert_eq!(channels.may_send(handle, CLOSE), Ok(2), "the channel closes with its error");
    }

    #[test]
    fn after_the_peers_close_only_the_close_ok_goes_out_and_it_ends_the_channel() {
        let mut channels = Channels::default();
        let handle = channels.open(3);
        channels.received(3, spec::CHANNEL_OPEN_OK.id, &[]);
        assert_eq!(channels.received(3, CLOSE, &[]), Received::HandOn);
        assert!(channels.stage(3).is_none(), "no content rules after the close");
        assert_eq!(channels.may_send(handle, QOS), Err(Refusal::ChannelClosed));
        assert_eq!(channels.may_send(handle, CLOSE_OK), Ok(3));
        channels.sent(3, CLOSE_OK, &[]);
        assert_eq!(channels.may_send(handle, CLOSE_OK), Err(Refusal::ChannelClosed));
    }

    #[test]
    fn a_bare_number_is_checked_against_nothing_and_the_end_of_the_connection_closes_every_channel() {
        let mut channels = Channels::default();
        assert_eq!(channels.may_send(ChannelHandle(5), QOS), Ok(5));
        let handle = channels.open(1);
        channels.clear();
        assert_eq!(channels.may_send(handle, QOS), Err(Refusal::ChannelClosed));
        channels.open(1);
        assert_eq!(channels.may_send(handle, QOS), Err(Refusal::ChannelClosed), "a record opened after the end");
    }
}
