//! The record of a channel's deliveries waiting for an ack (`core/src/unsettled.rs`) on its
//! own, for the tests that check it against a plain set of tags (lib/unsettled.js). Connections
//! keep theirs in Rust and never call this; development builds only (`codec-exports`).

use crate::unsettled::Unsettled;
use napi_derive::napi;

/// A tag from JS: the tests pass safe integers, whatever else (negative, NaN) saturates to
/// a tag the record refuses as the server would.
fn tag(value: f64) -> u64 {
    value as u64
}

#[napi(js_name = "UnsettledTags")]
pub struct UnsettledTags {
    record: Unsettled,
}

#[napi]
impl UnsettledTags {
    #[napi(constructor, catch_unwind)]
    pub fn new() -> Self {
        UnsettledTags { record: Unsettled::default() }
    }

    #[napi(catch_unwind)]
    pub fn received(&mut self, delivery_tag: f64, waits: bool) {
        self.record.received(tag(delivery_tag), waits);
    }

    #[napi(catch_unwind)]
    pub fn settles_prefix(&self, delivery_tag: f64, multiple: bool) -> bool {
        self.record.settles_prefix(tag(delivery_tag), multiple)
    }

    #[napi(catch_unwind)]
    pub fn settle(&mut self, delivery_tag: f64, multiple: bool) {
        self.record.settle(tag(delivery_tag), multiple);
    }

    #[napi(catch_unwind)]
    pub fn stop_keeping(&mut self) {
        self.record.stop_keeping();
    }

    /// The tags held: waiting, or settled out of order behind one that waits.
    #[napi(getter, catch_unwind)]
    pub fn tags(&self) -> Vec<f64> {
        self.record.held_tags().map(|t| t as f64).collect()
    }
}
