//! Which hasher for the core's maps: FNV-1a (what the core used, hand-written) or ahash
//! (what it uses now).
//!
//! The workloads are the core's own: the interned-string table looks up every short string
//! of every delivery (consumer tags, exchanges, routing keys, content types, header names:
//! a few dozen distinct ones, 3 to 40 bytes), and the per-channel maps look up a channel
//! number per body frame. Each map is filled as in use and then probed in the order a
//! stream of deliveries would probe it.
//!
//!   cargo run --release --example hashers

use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};
use std::time::Instant;

/// FNV-1a, as the core had it.
#[derive(Default)]
struct Fnv(u64);

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 { 0xcbf29ce484222325 } else { self.0 };
        for &b in bytes {
            h ^= b as u64;
            h = h.wrapping_mul(0x100000001b3);
        }
        self.0 = h;
    }
}

const ROUNDS: usize = 5;
const PROBES: usize = 4_000_000;

fn strings() -> Vec<Box<[u8]>> {
    let mut out: Vec<Box<[u8]>> = Vec::new();
    for i in 0..8 {
        out.push(format!("amq.ctag-{i:0>22}").into_bytes().into());
    }
    for name in ["", "amq.direct", "amq.topic", "orders", "application/json", "text/plain", "utf-8", "x-death", "x-trace-id", "traceparent", "x-retry"] {
        out.push(name.as_bytes().into());
    }
    for i in 0..24 {
        out.push(format!("orders.eu.{i}.created").into_bytes().into());
    }
    out
}

/// Nanoseconds per lookup of `keys` in a map hashed by `S`, in probe order; the best round.
fn per_lookup<K: std::hash::Hash + Eq + Clone, S: BuildHasher + Default>(keys: &[K]) -> f64 {
    let map: HashMap<K, u32, S> = keys.iter().cloned().zip(0..).collect();
    let mut best = f64::MAX;
    for _ in 0..ROUNDS {
        let start = Instant::now();
        let mut sum = 0u64;
        for i in 0..PROBES {
            // A delivery touches its strings in a scattered order; a stride that is prime to
            // the key count visits them all.
            let key = &keys[(i * 7) % keys.len()];
            sum += *map.get(std::hint::black_box(key)).unwrap() as u64;
        }
        std::hint::black_box(sum);
        best = best.min(start.elapsed().as_nanos() as f64 / PROBES as f64);
    }
    best
}

fn main() {
    type Ahash = ahash::RandomState;
    let strings = strings();
    let channels: Vec<u16> = (1..=16).collect();
    println!("| map | FNV-1a ns/lookup | ahash ns/lookup |");
    println!("|---|---|---|");
    let row = |name: &str, fnv: f64, ahash: f64| println!("| {name} | {fnv:.2} | {ahash:.2} |");
    row("interned strings (43 keys)", per_lookup::<_, BuildHasherDefault<Fnv>>(&strings), per_lookup::<_, Ahash>(&strings));
    row("channels (16 keys)", per_lookup::<_, BuildHasherDefault<Fnv>>(&channels), per_lookup::<_, Ahash>(&channels));
}
