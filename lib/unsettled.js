'use strict';
// The delivery tags of a channel's messages that wait for an ack (deliveries to consumers
// without noAck, and gets without it), in the order the server numbered them. It tells whether
// an ack leaves nothing of the channel unsettled up to its tag: the output buffer then widens
// such an ack just before it on the channel, nothing between, into one `multiple` ack of the
// later tag, so that the acks of a read's deliveries, taken in order, leave as one
// (Connection::send_acknowledgement in core/src/connection.rs).
//
// That is exact only while the record holds what the server holds unacked. It stops keeping
// tags (and its acks leave as they are sent) once it cannot tell: after ackAll, nackAll or
// recover, which also settle deliveries already on their way here; after an ack, nack or
// reject of a tag not received yet (one of another channel's, say), which the server applies
// to a delivery still on its way; after a tag that is not a number or does not rise; and past
// MAX_WAITING waiting tags. A tag settled out of order stays in place, negated, until those
// before it are settled.

const MAX_WAITING = 65536;
// Settled tags are moved off the front once there are this many and they are half of all.
const SHIFT_AFTER = 64;

class UnsettledTags {
  constructor() {
    // The waiting tags are tags[start] to tags[end - 1]; the array is reused as it empties,
    // so that keeping them allocates nothing once it has grown.
    this.tags = [];
    this.start = 0;
    this.end = 0;
    // The last tag received, waiting or not.
    this.highest = 0;
    this.kept = true;
  }

  // A delivery or get-ok received; `waits` when it waits for an ack.
  received(tag, waits) {
    if (!this.kept) return;
    if (!(tag > this.highest) || (waits && this.end - this.start >= MAX_WAITING)) {
      this.stopKeeping();
      return;
    }
    this.highest = tag;
    if (waits) this.tags[this.end++] = tag;
  }

  // Whether an ack of `tag` (with `multiple`, of those up to it too) leaves no tag up to it
  // unsettled: it is waiting, and it is the first that is, or `multiple` takes the others.
  settlesPrefix(tag, multiple) {
    const at = this.indexOf(tag);
    return at >= 0 && (multiple || at === this.start);
  }

  // An ack, nack or reject of `tag` (with `multiple`, of every tag up to it) was sent.
  settle(tag, multiple) {
    if (!this.kept) return;
    const at = this.indexOf(tag);
    if (at < 0) {
      // Settled already, or of a noAck delivery: the server refuses it and closes the channel.
      // Tag 0 with `multiple` (ackAll, nackAll), or one not received yet: see above.
      if (!(Number.isSafeInteger(tag) && tag > 0 && tag <= this.highest)) this.stopKeeping();
      return;
    }
    if (!multiple && at !== this.start) {
      this.tags[at] = -tag;
      return;
    }
    let start = at + 1;
    while (start < this.end && this.tags[start] < 0) start++;
    if (start === this.end) {
      this.start = this.end = 0;
    } else if (start > SHIFT_AFTER && start * 2 > this.end) {
      this.tags.copyWithin(0, start, this.end);
      this.end -= start;
      this.start = 0;
    } else {
      this.start = start;
    }
  }

  // For good: recover, the channel's close, and the cases above.
  stopKeeping() {
    this.kept = false;
    this.tags = [];
    this.start = this.end = 0;
  }

  // Where `tag` waits, or -1 (also when it was settled already). Tags rise, so a binary
  // search; the first one, the usual case, is looked at before.
  indexOf(tag) {
    const tags = this.tags;
    if (this.start < this.end && tags[this.start] === tag) return this.start;
    let low = this.start;
    let high = this.end - 1;
    while (low <= high) {
      const mid = (low + high) >>> 1;
      const kept = tags[mid];
      const value = kept < 0 ? -kept : kept;
      if (value === tag) return kept > 0 ? mid : -1;
      if (value < tag) low = mid + 1;
      else high = mid - 1;
    }
    return -1;
  }
}

module.exports = { UnsettledTags };
