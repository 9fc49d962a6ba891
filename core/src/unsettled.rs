//! Which deliveries of each channel wait for an ack, so that the connection can tell whether an
//! ack leaves nothing of its channel unsettled up to its tag: two such acks in a row in the
//! output settle exactly what one `multiple` ack of the later tag does, and leave as that one
//! (`Connection::send_acknowledgement`).
//!
//! The record is kept from what crosses the wire alone, both ways: a channel's deliveries and
//! get-oks as they are read, whether each waits for an ack (its consumer's or its get's
//! `noAck`, from the basic.consume or basic.get written and the reply read), and every ack,
//! nack, reject, recover and tx.select written, by whatever path. So no caller has to list the
//! methods that settle a delivery.
//!
//! It is exact only while it holds what the server holds unacked. It stops keeping tags, for
//! good (until the channel is opened again), once it cannot tell: after an ack or nack of tag 0
//! with `multiple` (ackAll, nackAll) or a recover, which also settle deliveries already on
//! their way here; after an ack, nack or reject of a tag not received yet, which the server
//! applies to a delivery still on its way; after tx.select (a rollback gives back the acks it
//! held); after a tag that does not rise; and past [`MAX_WAITING`] waiting tags. A tag settled
//! out of order stays in place, marked, until those before it are settled.

use crate::codec::{self, Reader};
use crate::spec;
use std::collections::{HashSet, VecDeque};

/// The most tags a channel's record holds; past it the record stops (see the module's words).
pub const MAX_WAITING: usize = 65536;

/// One channel's deliveries that wait for an ack, in the order the server numbered them.
#[derive(Debug)]
pub struct Unsettled {
    /// (tag, settled): settled ones are those acked out of order, behind an unsettled one.
    waiting: VecDeque<(u64, bool)>,
    /// The last tag received, waiting or not.
    highest: u64,
    kept: bool,
}

impl Default for Unsettled {
    fn default() -> Self {
        Unsettled { waiting: VecDeque::new(), highest: 0, kept: true }
    }
}

impl Unsettled {
    /// A delivery or get-ok of `tag` received; `waits` when it waits for an ack.
    pub fn received(&mut self, tag: u64, waits: bool) {
        if !self.kept {
            return;
        }
        if tag <= self.highest || (waits && self.waiting.len() >= MAX_WAITING) {
            self.stop_keeping();
            return;
        }
        self.highest = tag;
        if waits {
            self.waiting.push_back((tag, false));
        }
    }

    /// Whether an ack of `tag` (with `multiple`, of those up to it too) leaves no tag up to it
    /// unsettled: it waits, and it is the first that does, or `multiple` takes the others.
    pub fn settles_prefix(&self, tag: u64, multiple: bool) -> bool {
        self.index_of(tag).is_some_and(|at| multiple || at == 0)
    }

    /// An ack, nack or reject of `tag` (with `multiple`, of every tag up to it) was sent.
    pub fn settle(&mut self, tag: u64, multiple: bool) {
        if !self.kept {
            return;
        }
        let Some(at) = self.index_of(tag) else {
            // Settled already, or of a noAck delivery: the server refuses it and closes the
            // channel. Tag 0 (ackAll, nackAll), or one not received yet: see the module's words.
            if tag == 0 || tag > self.highest {
                self.stop_keeping();
            }
            return;
        };
        if !multiple && at != 0 {
            self.waiting[at].1 = true;
            return;
        }
        self.waiting.drain(..=at);
        while self.waiting.front().is_some_and(|&(_, settled)| settled) {
            self.waiting.pop_front();
        }
    }

    /// For good: recover, tx.select, and the cases above.
    pub fn stop_keeping(&mut self) {
        self.kept = false;
        self.waiting = VecDeque::new();
    }

    /// How many deliveries wait for an ack, when the record can tell (see the module's words).
    pub fn count(&self) -> Option<usize> {
        self.kept.then(|| self.waiting.iter().filter(|&&(_, settled)| !settled).count())
    }

    /// The tags held: waiting, or settled out of order behind one that waits.
    pub fn held_tags(&self) -> impl Iterator<Item = u64> + '_ {
        self.waiting.iter().map(|&(tag, _)| tag)
    }

    /// Where `tag` waits (not when it was settled already). Tags rise, so a binary search; the
    /// first one, the usual case, is looked at before.
    fn index_of(&self, tag: u64) -> Option<usize> {
        match self.waiting.front() {
            Some(&(first, settled)) if first == tag => return (!settled).then_some(0),
            None => return None,
            _ => {}
        }
        let at = self.waiting.binary_search_by_key(&tag, |&(t, _)| t).ok()?;
        (!self.waiting[at].1).then_some(at)
    }
}

/// A channel's record of its deliveries, with what it takes to know whether one waits for an
/// ack. It lives in the channel's record (`channels.rs`), from the channel.open-ok read until
/// the channel closes, so that the connection has one notion of an open channel.
#[derive(Debug, Default)]
pub struct Acks {
    unsettled: Unsettled,
    /// Consumer tags whose deliveries wait for no ack (usually none).
    no_ack_consumers: HashSet<Box<[u8]>>,
    /// The `noAck` of the basic.consume written and not yet answered (one RPC at a time).
    consume_no_ack: Option<bool>,
    /// The `noAck` of the basic.get written and not yet answered.
    get_no_ack: Option<bool>,
}

impl Acks {
    /// How many of the channel's deliveries wait for an ack, when the record can tell.
    pub fn unsettled_count(&self) -> Option<usize> {
        self.unsettled.count()
    }

    /// An ack, nack or reject of `tag` is being written (`multiple` as it is sent; a reject
    /// has none): whether it settles everything of the channel up to its tag and is an ack
    /// (so that it may widen the ack before it, or be widened). The record takes it either way.
    pub fn acknowledge(&mut self, method_id: u32, tag: u64, multiple: bool) -> bool {
        // Only acks are taken together: a nack or reject is rarer, and a nack's `requeue`
        // would have to match too.
        let prefix = method_id == spec::BASIC_ACK.id && self.unsettled.settles_prefix(tag, multiple);
        self.unsettled.settle(tag, multiple);
        prefix
    }

    /// A method frame written on the channel, `args` its arguments: what it settles or tells
    /// of the deliveries to come. Arguments that do not decode were written by a test's hand,
    /// not the encoder; they tell nothing.
    pub fn sent(&mut self, id: u32, args: &[u8]) {
        let _ = self.sent_from(id, &mut Reader::new(args));
    }

    /// A method frame (not one with content) read on the channel.
    pub fn method_received(&mut self, id: u32, args: &[u8]) {
        if id == spec::BASIC_CONSUME_OK.id {
            let no_ack = self.consume_no_ack.take();
            if let Ok(tag) = shortstr(&mut Reader::new(args)) {
                if no_ack == Some(true) {
                    self.no_ack_consumers.insert(tag.into());
                } else if !self.no_ack_consumers.is_empty() {
                    // A consumer tag can come back after its cancel.
                    self.no_ack_consumers.remove(tag);
                }
            }
        } else if id == spec::BASIC_GET_EMPTY.id {
            self.get_no_ack = None;
        }
    }

    /// The method of a message read on the channel (its content is still to come): a
    /// delivery or a get-ok is a tag received.
    pub fn message_received(&mut self, id: u32, args: &[u8]) {
        let mut r = Reader::new(args);
        let received = if id == spec::BASIC_DELIVER.id {
            let no_ack = &self.no_ack_consumers;
            shortstr(&mut r).and_then(|consumer| Ok((r.u64()?, no_ack.is_empty() || !no_ack.contains(consumer))))
        } else if id == spec::BASIC_GET_OK.id {
            let no_ack = self.get_no_ack.take();
            r.u64().map(|tag| (tag, no_ack != Some(true)))
        } else {
            return;
        };
        match received {
            Ok((tag, waits)) => self.unsettled.received(tag, waits),
            // Not the delivery the server numbered: whatever it was, the record can no longer
            // tell what waits.
            Err(_) => self.unsettled.stop_keeping(),
        }
    }

    fn sent_from(&mut self, id: u32, r: &mut Reader) -> codec::Result<()> {
        match id {
            _ if id == spec::BASIC_ACK.id || id == spec::BASIC_NACK.id => {
                let tag = r.u64()?;
                let multiple = r.u8()? & 1 != 0;
                self.unsettled.settle(tag, multiple);
            }
            _ if id == spec::BASIC_REJECT.id => self.unsettled.settle(r.u64()?, false),
            _ if id == spec::BASIC_RECOVER.id || id == spec::BASIC_RECOVER_ASYNC.id || id == spec::TX_SELECT.id => self.unsettled.stop_keeping(),
            _ if id == spec::BASIC_CONSUME.id => {
                r.u16()?; // ticket
                shortstr(r)?; // queue
                let tag = shortstr(r)?;
                let bits = r.u8()?;
                let (no_ack, no_wait) = (bits & 0b10 != 0, bits & 0b1000 != 0);
                if no_wait {
                    // No consume-ok comes: the tag is the one given.
                    if no_ack {
                        self.no_ack_consumers.insert(tag.into());
                    } else {
                        self.no_ack_consumers.remove(tag);
                    }
                } else {
                    self.consume_no_ack = Some(no_ack);
                }
            }
            _ if id == spec::BASIC_GET.id => {
                r.u16()?; // ticket
                shortstr(r)?; // queue
                self.get_no_ack = Some(r.u8()? & 1 != 0);
            }
            _ => {}
        }
        Ok(())
    }
}

fn shortstr<'a>(r: &mut Reader<'a>) -> codec::Result<&'a [u8]> {
    let len = r.u8()? as usize;
    r.take(len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// A seeded generator (xorshift), so that a failing sequence can be run again.
    struct Random(u64);

    impl Random {
        fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % n
        }
    }

    // The same operations on a plain set of the waiting tags. An ack of tag 0 with `multiple`,
    // or of a tag not received yet, makes the record stop; the model then starts afresh.
    #[test]
    fn agrees_with_a_set_of_the_waiting_tags_over_random_deliveries_and_settlements() {
        // Miri interprets: four seeds there (both kinds of window), forty natively.
        let seeds: u64 = if cfg!(miri) { 4 } else { 40 };
        for seed in 1..=seeds {
            let mut random = Random(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
            let mut record = Unsettled::default();
            let mut waiting = BTreeSet::new();
            let mut next = 1u64;
            // Even seeds keep the window small; odd ones let it grow to hundreds.
            let receives = if seed % 2 == 0 { 80 } else { 110 };
            for step in 0..3000 {
                let choice = if step % 500 == 499 { 398 + random.below(2) } else { random.below(398) };
                if choice < 2 * receives || next == 1 {
                    let waits = random.below(5) != 0; // or to a noAck consumer
                    record.received(next, waits);
                    if waits {
                        waiting.insert(next);
                    }
                    next += 1;
                } else if choice < 398 {
                    // The first waiting tag (the usual ack), or one of the last 40: waiting,
                    // settled, of a noAck delivery.
                    let first = random.below(if seed % 2 == 0 { 3 } else { 2 }) == 0 && !waiting.is_empty();
                    let tag = if first { *waiting.first().unwrap() } else { (next - 1 - random.below(next.min(40))).max(1) };
                    let multiple = random.below(if seed % 2 == 0 { 4 } else { 200 }) == 0;
                    let expected = waiting.contains(&tag) && (multiple || waiting.first() == Some(&tag));
                    assert_eq!(record.settles_prefix(tag, multiple), expected, "seed {seed} step {step}: {tag} {multiple}");
                    record.settle(tag, multiple);
                    if waiting.contains(&tag) {
                        if multiple {
                            waiting.retain(|&t| t > tag);
                        }
                        waiting.remove(&tag);
                    }
                } else {
                    // ackAll or nackAll, or an ack of a tag still on its way: nothing is claimed after.
                    record.settle(if choice == 398 { 0 } else { next + random.below(3) }, true);
                    assert!(waiting.iter().all(|&t| !record.settles_prefix(t, true)));
                    assert_eq!(record.held_tags().count(), 0, "nothing is held");
                    record = Unsettled::default();
                    record.received(next, false);
                    next += 1;
                    waiting.clear();
                }
                // The count walks the window: under Miri, every 50th step (each step's took minutes).
                if !cfg!(miri) || step % 50 == 0 {
                    assert_eq!(record.count(), Some(waiting.len()), "seed {seed} step {step}: the count");
                }
            }
        }
    }

    #[test]
    fn stops_past_its_bound_or_given_a_tag_that_does_not_rise_and_then_claims_nothing() {
        let mut record = Unsettled::default();
        for tag in 1..=MAX_WAITING as u64 {
            record.received(tag, true);
        }
        assert!(record.settles_prefix(1, false));
        record.received(MAX_WAITING as u64 + 1, true);
        assert!(!record.settles_prefix(1, false));
        assert_eq!(record.held_tags().count(), 0);
        assert_eq!(record.count(), None, "it cannot tell");

        let mut backwards = Unsettled::default();
        backwards.received(5, true);
        backwards.received(5, false);
        backwards.received(6, true);
        assert!(!backwards.settles_prefix(6, true));

        let mut recovered = Unsettled::default();
        recovered.received(1, true);
        recovered.stop_keeping();
        recovered.received(2, true);
        assert!(!recovered.settles_prefix(2, false));
    }

    #[test]
    fn a_tag_settled_out_of_order_is_held_until_those_before_it_are() {
        let mut record = Unsettled::default();
        for tag in 1..=4 {
            record.received(tag, true);
        }
        record.settle(3, false);
        assert!(!record.settles_prefix(3, false), "settled already");
        assert!(!record.settles_prefix(2, false), "1 still waits");
        assert!(record.settles_prefix(2, true), "`multiple` takes 1 too");
        record.settle(1, false);
        assert!(record.held_tags().eq([2, 3, 4]));
        record.settle(2, false);
        assert!(record.held_tags().eq([4]), "3 went with 2");
        // A tag settled twice, or one of a noAck delivery, leaves the record as it was.
        record.settle(2, false);
        assert!(record.settles_prefix(4, false));
    }
}
