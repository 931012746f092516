//! The cache-aware routers' own state ([`super::route`] picks with it): the approximate
//! prefix router's record of what it sent where, the consistent-hash ring, the scorers'
//! weights and the KV events' delay.

use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasherDefault;

use crate::policy::Router;
use crate::config::{RouterScorers, Scenario};
use crate::kv::prefix::KeyHasher;

/// Points per replica on the consistent-hash ring.
pub(super) const RING_POINTS: u64 = 160;
/// The bounded-load factor of the consistent-hash ring.
pub(super) const RING_LOAD_BOUND: f64 = 1.25;
/// Tokens of the prompt the consistent-hash key covers.
pub(super) const HASH_PREFIX_TOKENS: u32 = 512;

/// An LRU of block-run keys (the approximate router's record of one replica): each key with
/// the blocks of its run sent there, least recently sent evicted first once more than
/// `capacity` blocks are recorded.
#[derive(Debug, Clone, Default)]
pub(super) struct Lru {
    entries: HashMap<u64, (u32, u64), BuildHasherDefault<KeyHasher>>,
    order: BTreeMap<u64, u64>,
    blocks: u64,
    capacity: u64,
}

impl Lru {
    /// An empty record of at most `capacity` blocks.
    pub(super) fn with_capacity(capacity: u64) -> Lru {
        Lru { capacity, ..Lru::default() }
    }

    pub(super) fn blocks_of(&self, key: u64) -> u32 {
        self.entries.get(&key).map_or(0, |e| e.0)
    }

    /// Record `blocks` blocks of run `key` as sent now (`tick`).
    pub(super) fn record(&mut self, key: u64, blocks: u32, tick: u64) {
        let e = self.entries.entry(key).or_insert((0, tick));
        self.order.remove(&e.1);
        if blocks > e.0 {
            self.blocks += u64::from(blocks - e.0);
            e.0 = blocks;
        }
        e.1 = tick;
        self.order.insert(tick, key);
        while self.blocks > self.capacity {
            let Some((_, old)) = self.order.pop_first() else { break };
            if let Some((b, _)) = self.entries.remove(&old) {
                self.blocks -= u64::from(b);
            }
        }
    }
}

/// The state of a cache-aware router.
#[derive(Debug, Clone)]
pub(crate) struct Routing {
    pub(super) weights: RouterScorers,
    /// `precise_prefix`: KV events' delay, ns.
    pub(super) delay_ns: u64,
    /// `approx_prefix`: per replica, what the router sent there.
    pub(super) approx: Vec<Lru>,
    pub(super) tick: u64,
    /// `consistent_hash`: (point, replica), sorted; built for `ring_n` replicas.
    pub(super) ring: Vec<(u64, u32)>,
    pub(super) ring_n: usize,
    /// Scratch: per candidate (replica, prefix blocks).
    pub(super) seen: Vec<(usize, u32)>,
}

/// A 64-bit mix (SplitMix64's finaliser) of two words.
pub(super) fn hash2(a: u64, b: u64) -> u64 {
    let mut z = a ^ b.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Routing {
    /// The router's state for a scenario (`None` for the routers that keep none).
    pub(crate) fn new(sc: &Scenario) -> Option<Box<Routing>> {
        let d = &sc.deployment;
        if !matches!(d.router, Router::PrecisePrefix | Router::ApproxPrefix | Router::ConsistentHash) {
            return None;
        }
        Some(Box::new(Routing {
            weights: d.router_scorers.unwrap_or_default(),
            delay_ns: (d.kv_event_delay_ms * 1e6).round() as u64,
            approx: Vec::new(),
            tick: 0,
            ring: Vec::new(),
            ring_n: 0,
            seen: Vec::new(),
        }))
    }

    pub(super) fn build_ring(&mut self, n: usize) {
        self.ring = (0..n as u64)
            .flat_map(|rep| (0..RING_POINTS).map(move |v| (hash2(hash2(0x0051_5EED_0F21_4E65, rep), v), rep as u32)))
            .collect();
        self.ring.sort_unstable();
        self.ring_n = n;
    }
}

