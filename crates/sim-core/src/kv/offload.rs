//! KV-cache tiers below HBM (`[scheduler.kv_offload]`): host DRAM, a local SSD, a remote
//! store. What they do follows vLLM's offloading connector (`vllm/distributed/kv_transfer/
//! kv_connector/v1/offloading/scheduler.py` with `vllm/v1/kv_offload/`, read at commit
//! 0072b0b of vLLM's main branch, the v0.11+ design):
//!
//! - **Stores are write-through.** After each step, every full block a request has computed
//!   and not offered before is offered to the first tier (`_get_reqs_to_store`, from the
//!   request's next-to-store index); one already there is skipped (`prepare_store`), the
//!   others are copied GPU → host over the replica's host path, and become loadable when the
//!   copy is done (`complete_store`). A tier with no room evicts its least recently used
//!   blocks that are neither being loaded nor still being stored; when that cannot free
//!   enough, the request's blocks are not stored this time (`prepare_store` returning
//!   `None`). A block evicted from one tier is written to the next one (a cascade, as
//!   Dynamo's KV block manager and SGLang's hierarchical cache move blocks down).
//! - **Loads are looked up at admission** (`get_num_new_matched_tokens`): after the GPU's
//!   prefix-cache hit, the longest run of the prompt's next blocks the tiers hold (in any
//!   tier, fastest first), at most `num_tokens − 1` tokens. The request takes GPU blocks
//!   for them at once (`update_state_after_alloc`); with `load = "async"` it waits out of the
//!   batch (`WAITING_FOR_REMOTE_KVS`) until its blocks are in, while the others' steps go
//!   on, and then is scheduled with them counted as computed; with `load = "blocking"` the
//!   step admitting it waits for the load (the whole batch stalls). A lookup refreshes the
//!   blocks it finds (`touch`).
//! - **Transfers.** One copy stream per direction per replica (the connector's worker
//!   submits its transfers in order on one CUDA stream), so loads queue behind loads and
//!   stores behind stores, first come first served; loads (host → GPU) and stores
//!   (GPU → host) use the two directions of a full-duplex link and do not slow each other.
//!   Every GPU of a replica moves its own share of a block at once, over its own path: a
//!   transfer of `n` blocks takes `latency + n · bytes per block per GPU / bandwidth`.
//!
//! What is kept is the blocks' identity as the prefix cache hashes them ([`super::prefix`]):
//! a shared block by its run's key and index, a block only its own request holds (unique
//! tokens) by the request's id, so a preempted request re-admitted loads its own blocks back
//! instead of recomputing them (swap-in). Recency is kept per run (a run's blocks are stored
//! and hit together), and eviction trims a run from its tail, as vLLM frees a request's
//! blocks tail first: the prefix stays longest.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::hash::BuildHasherDefault;

use serde::Serialize;

use super::prefix::KeyHasher;

/// The key of a request's private blocks (above any shared key, whose two top bits are 0).
pub const PRIVATE: u64 = 1 << 63;

/// One tier as a replica sees it (resolved from the scenario by the engine's builder).
#[derive(Debug, Clone, PartialEq)]
pub struct TierSpec {
    /// `cpu`, `ssd` or `remote`.
    pub medium: &'static str,
    /// Blocks it holds per replica.
    pub capacity_blocks: u64,
    /// GB/s each way; `None`: the replica's host path (a `cpu` tier without its own figure).
    pub gbps: Option<f64>,
    /// Latency of one transfer, ns; `None`: the host path's.
    pub latency_ns: Option<u64>,
    /// Hits refresh recency (LRU); otherwise oldest stored first (FIFO).
    pub lru: bool,
}

/// Stored blocks of one run in one tier: indices `lo..hi` reserved, `lo..ready` loadable.
#[derive(Debug, Clone, Copy)]
struct Entry {
    lo: u32,
    hi: u32,
    ready: u32,
    /// Its place in the eviction order.
    stamp: u64,
    /// A load reads it until then (not evictable).
    pinned_until: u64,
}

/// Counters of one tier, reported per tier.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TierStats {
    pub medium: &'static str,
    pub capacity_blocks: u64,
    /// Blocks found here by admissions (and loaded).
    pub hit_blocks: u64,
    /// Blocks written here (from HBM, or cascaded from the tier above).
    pub stored_blocks: u64,
    /// Blocks evicted from here.
    pub evicted_blocks: u64,
    /// Blocks that could not be stored: no room could be made.
    pub dropped_blocks: u64,
}

#[derive(Debug, Clone)]
struct Tier {
    spec: TierSpec,
    used: u64,
    map: HashMap<u64, Entry, BuildHasherDefault<KeyHasher>>,
    /// Eviction order: stamp → key, oldest first.
    order: BTreeMap<u64, u64>,
    /// When its write path is free (stores and cascades queue on it).
    write_free: u64,
    stats: TierStats,
}

impl Tier {
    fn new(spec: TierSpec) -> Tier {
        let stats = TierStats { medium: spec.medium, capacity_blocks: spec.capacity_blocks, ..TierStats::default() };
        Tier { spec, used: 0, map: HashMap::default(), order: BTreeMap::new(), write_free: 0, stats }
    }

    /// Loadable blocks of `key` from index `i` on: the end of the run of them, or `i`.
    fn ready_from(&self, key: u64, i: u32) -> u32 {
        match self.map.get(&key) {
            Some(e) if e.lo <= i && i < e.ready => e.ready,
            _ => i,
        }
    }
}

/// The tiers of one replica and its two copy streams.
#[derive(Debug, Clone)]
struct RepTiers {
    tiers: Vec<Tier>,
    /// When the host → GPU stream is free.
    load_free: u64,
    /// Stores in flight, completion order (one stream per tier: each tier's completions
    /// are in order, and so are the whole list's as long as one tier is written at once;
    /// settled by time).
    pending: VecDeque<(u64, u8, u64, u32)>,
    /// The host path of the replica's GPUs: GB/s each way and latency, ns.
    host_gbps: f64,
    host_latency_ns: u64,
    /// The path without a topology route to a host (the GPU's own host link).
    host_default: (f64, u64),
    /// Blocking loads of the step being built: how long it waits for them, ns.
    stall_ns: u64,
}

/// What a lookup found below HBM: blocks per tier, in the order of the prompt.
#[derive(Debug, Clone, Default)]
pub struct TierHit {
    /// Blocks found (all tiers).
    pub blocks: u32,
    /// Per tier.
    pub per_tier: Vec<u32>,
    /// (tier, key) of each entry read, to pin while the load runs.
    read: Vec<(u8, u64)>,
}

/// Run-wide counters (the summary's `kv_offload`).
#[derive(Debug, Clone, Default)]
pub struct OffloadStats {
    pub loads: u64,
    pub load_bytes: f64,
    pub store_bytes: f64,
    /// Tokens found below HBM at first admissions (beyond the GPU's hit).
    pub hit_tokens: u64,
    /// Blocking loads: Σ time steps waited for them, ns.
    pub stall_ns: u64,
}

/// The offload side of a run: every replica's tiers, and per request what it offered and
/// waits for.
#[derive(Debug, Clone, Default)]
pub struct Offload {
    pub blocking: bool,
    /// KV bytes of one block on one GPU of a replica.
    block_bytes: f64,
    /// GPUs of a replica holding a share of each block (what one block moves in all).
    pub gpus: f64,
    reps: Vec<RepTiers>,
    /// Per request: blocks already offered to the tiers (the connector's next-to-store index).
    offered: Vec<u32>,
    /// Per request: when its async load is done (`u64::MAX`: not loading).
    loading: Vec<u64>,
    /// Per request: time spent loading from the tiers, ns (the `kv_load_ms` column).
    pub load_ns: Vec<u64>,
    /// Async loads started by the step being built: (done, replica), for the engine's wake-ups.
    pub wakes: Vec<(u64, u32)>,
    pub stats: OffloadStats,
}

const NOT_LOADING: u64 = u64::MAX;

impl Offload {
    /// Tiers for `replicas` replicas from `tiers` (the same on each), `block_bytes` per
    /// block per GPU, for `requests` requests; each replica's host path given by
    /// `host(replica)` as (GB/s each way, latency ns).
    pub fn new(tiers: &[TierSpec], blocking: bool, block_bytes: f64, replicas: usize, requests: usize, host: impl Fn(usize) -> (f64, u64)) -> Offload {
        let reps = (0..replicas)
            .map(|i| {
                let (host_gbps, host_latency_ns) = host(i);
                RepTiers {
                    tiers: tiers.iter().cloned().map(Tier::new).collect(),
                    load_free: 0,
                    pending: VecDeque::new(),
                    host_gbps,
                    host_latency_ns,
                    host_default: (host_gbps, host_latency_ns),
                    stall_ns: 0,
                }
            })
            .collect();
        Offload {
            blocking,
            block_bytes,
            gpus: 1.0,
            reps,
            offered: vec![0; requests],
            loading: vec![NOT_LOADING; requests],
            load_ns: vec![0; requests],
            wakes: Vec::new(),
            stats: OffloadStats::default(),
        }
    }

    /// Replica `rep`'s host path from the topology (GB/s each way, latency ns), or `None`
    /// for the GPU's own host link (no route to a host node).
    pub fn set_host_path(&mut self, rep: usize, path: Option<(f64, u64)>) {
        if let Some(r) = self.reps.get_mut(rep) {
            (r.host_gbps, r.host_latency_ns) = path.unwrap_or(r.host_default);
        }
    }

    /// Replica `rep`'s host path: GB/s each way and latency, ns.
    pub fn host_path(&self, rep: usize) -> (f64, u64) {
        self.reps.get(rep).map_or((0.0, 0), |r| (r.host_gbps, r.host_latency_ns))
    }

    /// (GB/s, latency ns) of tier `t` on replica `r`'s path.
    fn path(r: &RepTiers, t: usize) -> (f64, u64) {
        let s = &r.tiers[t].spec;
        let gbps = s.gbps.map_or(r.host_gbps, |g| g.min(r.host_gbps));
        (gbps, s.latency_ns.unwrap_or(r.host_latency_ns))
    }

    /// Time to move `blocks` blocks at `gbps` with `latency_ns`, ns.
    fn transfer_ns(&self, blocks: u64, gbps: f64, latency_ns: u64) -> u64 {
        let s = blocks as f64 * self.block_bytes / (gbps.max(1e-9) * 1e9);
        latency_ns.saturating_add(crate::num::round_u64(s * 1e9))
    }

    /// Stores done by `now` become loadable.
    fn settle(&mut self, rep: usize, now: u64) {
        let r = &mut self.reps[rep];
        while let Some(&(done, t, key, upto)) = r.pending.front() {
            if done > now {
                break;
            }
            r.pending.pop_front();
            if let Some(e) = r.tiers[t as usize].map.get_mut(&key) {
                e.ready = e.ready.max(upto.min(e.hi));
            }
        }
    }

    /// Is request `id` waiting for an async load that is not done at `now`?
    #[inline]
    pub fn loading(&self, id: u32, now: u64) -> bool {
        self.loading.get(id as usize).is_some_and(|&t| t != NOT_LOADING && t > now)
    }

    /// Has request `id` started an async load it has not been admitted after? It holds its
    /// GPU blocks while it waits (vLLM's `WAITING_FOR_REMOTE_KVS`).
    #[inline]
    pub fn awaits_load(&self, id: u32) -> bool {
        self.loading.get(id as usize).is_some_and(|&t| t != NOT_LOADING)
    }

    /// Request `id` is admitted (its load, if any, is done) or leaves the replica: it no
    /// longer waits for a load.
    #[inline]
    pub fn clear_loading(&mut self, id: u32) {
        if let Some(t) = self.loading.get_mut(id as usize) {
            *t = NOT_LOADING;
        }
    }

    /// Request `id` leaves its replica without finishing (moved, timed out): it waits for no
    /// load, and what it offered there no longer counts (it starts again elsewhere).
    pub fn forget_request(&mut self, id: u32) {
        self.clear_loading(id);
        if let Some(o) = self.offered.get_mut(id as usize) {
            *o = 0;
        }
    }

    /// Blocks of request `id` already offered to the tiers.
    #[inline]
    pub fn offered(&self, id: u32) -> u32 {
        self.offered.get(id as usize).copied().unwrap_or(0)
    }

    pub fn set_offered(&mut self, id: u32, blocks: u32) {
        if let Some(o) = self.offered.get_mut(id as usize) {
            *o = blocks;
        }
    }

    /// Look up, on replica `rep` at `now`, the blocks `pieces` names in order — each piece
    /// (key, first index, end index) consecutive blocks of one run — from the first on, until
    /// one is in no tier. Refreshes what it finds.
    pub fn lookup(&mut self, rep: usize, now: u64, pieces: &[(u64, u32, u32)]) -> TierHit {
        self.settle(rep, now);
        let r = &mut self.reps[rep];
        let mut hit = TierHit { per_tier: vec![0; r.tiers.len()], ..TierHit::default() };
        'pieces: for &(key, lo, hi) in pieces {
            let mut i = lo;
            while i < hi {
                // The first tier holding index i, and how far from i it holds the run.
                let Some((t, end)) = r.tiers.iter().enumerate().find_map(|(t, tier)| {
                    let end = tier.ready_from(key, i);
                    (end > i).then_some((t, end.min(hi)))
                }) else {
                    break 'pieces;
                };
                hit.per_tier[t] += end - i;
                hit.blocks += end - i;
                if !hit.read.contains(&(t as u8, key)) {
                    hit.read.push((t as u8, key));
                }
                i = end;
            }
        }
        for &(t, key) in &hit.read {
            touch(&mut r.tiers[t as usize], key);
        }
        hit
    }

    /// Start loading `hit` into replica `rep` for request `id` at `now`; returns when it is
    /// done. Async: the request waits until then (and the engine wakes the replica); blocking:
    /// the step being built waits for it.
    pub fn load(&mut self, rep: usize, id: u32, now: u64, hit: &TierHit) -> u64 {
        let mut dur = 0u64;
        for (t, &n) in hit.per_tier.iter().enumerate() {
            if n > 0 {
                let (gbps, lat) = Self::path(&self.reps[rep], t);
                dur = dur.saturating_add(self.transfer_ns(u64::from(n), gbps, lat));
                self.reps[rep].tiers[t].stats.hit_blocks += u64::from(n);
            }
        }
        let r = &mut self.reps[rep];
        let start = now.max(r.load_free);
        let done = start.saturating_add(dur);
        r.load_free = done;
        for &(t, key) in &hit.read {
            if let Some(e) = r.tiers[t as usize].map.get_mut(&key) {
                e.pinned_until = e.pinned_until.max(done);
            }
        }
        self.stats.loads += 1;
        self.stats.load_bytes += f64::from(hit.blocks) * self.block_bytes * self.gpus;
        if let Some(l) = self.load_ns.get_mut(id as usize) {
            *l = l.saturating_add(done - now);
        }
        if self.blocking {
            let r = &mut self.reps[rep];
            r.stall_ns = r.stall_ns.max(done - now);
        } else {
            if let Some(t) = self.loading.get_mut(id as usize) {
                *t = done;
            }
            self.wakes.push((done, rep as u32));
        }
        done
    }

    /// The stall blocking loads add to the step replica `rep` is starting (taken once).
    pub fn take_stall(&mut self, rep: usize) -> u64 {
        let s = self.reps.get_mut(rep).map_or(0, |r| std::mem::take(&mut r.stall_ns));
        self.stats.stall_ns = self.stats.stall_ns.saturating_add(s);
        s
    }

    /// Offer blocks `lo..hi` of run `key` (all computed, in HBM) to replica `rep`'s first
    /// tier at `now`: those not there are copied down if room can be made for all of them.
    pub fn store(&mut self, rep: usize, now: u64, key: u64, lo: u32, hi: u32) {
        if lo >= hi || self.reps[rep].tiers.is_empty() {
            return;
        }
        self.settle(rep, now);
        self.write(rep, 0, now, key, lo, hi);
    }

    /// Write `lo..hi` of `key` into tier `t` of replica `rep` (what it lacks of them,
    /// contiguous with what it holds), evicting to make room; evicted blocks go to tier
    /// `t + 1`.
    fn write(&mut self, rep: usize, t: usize, now: u64, key: u64, lo: u32, hi: u32) {
        let (from, to) = {
            let tier = &self.reps[rep].tiers[t];
            match tier.map.get(&key) {
                // Already held.
                Some(e) if e.lo <= lo && hi <= e.hi => return,
                // Extends it at the tail.
                Some(e) if e.lo <= lo && lo <= e.hi => (e.hi, hi),
                // Extends it at the head (a cascade arrives tail first).
                Some(e) if lo < e.lo && e.lo <= hi => (lo, e.lo),
                // Past a gap: unreachable by a lookup, which stops at the gap.
                Some(_) => return,
                None => (lo, hi),
            }
        };
        let need = u64::from(to - from);
        if !self.make_room(rep, t, now, need, key) {
            self.reps[rep].tiers[t].stats.dropped_blocks += need;
            return;
        }
        let (gbps, lat) = Self::path(&self.reps[rep], t);
        let dur = self.transfer_ns(need, gbps, lat);
        let block_bytes = self.block_bytes;
        let r = &mut self.reps[rep];
        let tier = &mut r.tiers[t];
        let start = now.max(tier.write_free);
        let done = start.saturating_add(dur);
        tier.write_free = done;
        tier.used += need;
        tier.stats.stored_blocks += need;
        let stamp = next_stamp(tier);
        let e = tier.map.entry(key).or_insert(Entry { lo: from, hi: from, ready: from, stamp, pinned_until: 0 });
        if from < e.lo {
            // Prepended: a lookup reads a run from its start, so none of it is loadable
            // until this write is done; then as much as was before (`e.ready`).
            let upto = e.ready;
            e.lo = from;
            e.ready = from;
            r.pending.push_back((done, t as u8, key, upto));
        } else {
            e.hi = to;
            r.pending.push_back((done, t as u8, key, to));
        }
        let old = std::mem::replace(&mut e.stamp, stamp);
        tier.order.remove(&old);
        tier.order.insert(stamp, key);
        if t == 0 {
            self.stats.store_bytes += need as f64 * block_bytes * self.gpus;
        }
    }

    /// Free `need` blocks of tier `t` (not of `keep`), least recent first, trimming runs
    /// from their tails; the blocks evicted go down a tier. `false` when that cannot be done
    /// (nothing is evicted then).
    fn make_room(&mut self, rep: usize, t: usize, now: u64, need: u64, keep: u64) -> bool {
        let tier = &self.reps[rep].tiers[t];
        if need > tier.spec.capacity_blocks {
            return false;
        }
        let free = tier.spec.capacity_blocks - tier.used;
        if need <= free {
            return true;
        }
        // Evictable: fully stored, not being read, not the run being written.
        let evictable = |k: u64, e: &Entry| k != keep && e.ready == e.hi && e.pinned_until <= now;
        let mut want = need - free;
        let avail: u64 = tier.map.iter().filter(|(k, e)| evictable(**k, e)).map(|(_, e)| u64::from(e.hi - e.lo)).sum();
        if avail < want {
            return false;
        }
        let mut victims: Vec<(u64, u32, u32)> = Vec::new();
        let tier = &mut self.reps[rep].tiers[t];
        let order: Vec<(u64, u64)> = tier.order.iter().map(|(&s, &k)| (s, k)).collect();
        for (stamp, key) in order {
            if want == 0 {
                break;
            }
            let Some(e) = tier.map.get_mut(&key) else { continue };
            if !evictable(key, e) {
                continue;
            }
            let k = (u64::from(e.hi - e.lo)).min(want) as u32;
            let (old_hi, new_hi) = (e.hi, e.hi - k);
            e.hi = new_hi;
            e.ready = new_hi;
            want -= u64::from(k);
            tier.used -= u64::from(k);
            tier.stats.evicted_blocks += u64::from(k);
            if e.hi == e.lo {
                tier.map.remove(&key);
                tier.order.remove(&stamp);
            }
            victims.push((key, new_hi, old_hi));
        }
        if t + 1 < self.reps[rep].tiers.len() {
            for (key, lo, hi) in victims {
                self.write(rep, t + 1, now, key, lo, hi);
            }
        }
        true
    }

    /// Per tier, summed over the replicas.
    pub fn tier_stats(&self) -> Vec<TierStats> {
        let mut out: Vec<TierStats> = self.reps.first().map(|r| r.tiers.iter().map(|t| TierStats { capacity_blocks: 0, ..t.stats.clone() }).collect()).unwrap_or_default();
        for (i, s) in out.iter_mut().enumerate() {
            *s = TierStats { medium: s.medium, ..TierStats::default() };
            for r in &self.reps {
                let t = &r.tiers[i].stats;
                s.capacity_blocks += t.capacity_blocks;
                s.hit_blocks += t.hit_blocks;
                s.stored_blocks += t.stored_blocks;
                s.evicted_blocks += t.evicted_blocks;
                s.dropped_blocks += t.dropped_blocks;
            }
        }
        out
    }
}

/// A fresh stamp of `tier`'s eviction order (one past its newest).
fn next_stamp(tier: &Tier) -> u64 {
    tier.order.last_key_value().map_or(0, |(&s, _)| s + 1)
}

/// A hit refreshes `key`'s recency in an LRU tier.
fn touch(tier: &mut Tier, key: u64) {
    if !tier.spec.lru {
        return;
    }
    let stamp = next_stamp(tier);
    if let Some(e) = tier.map.get_mut(&key) {
        let old = std::mem::replace(&mut e.stamp, stamp);
        tier.order.remove(&old);
        tier.order.insert(stamp, key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpu(blocks: u64) -> TierSpec {
        TierSpec { medium: "cpu", capacity_blocks: blocks, gbps: None, latency_ns: None, lru: true }
    }

    /// 1 MB blocks over a 10 GB/s path with 1 µs latency: 100 µs a block.
    fn one(tiers: &[TierSpec], blocking: bool) -> Offload {
        Offload::new(tiers, blocking, 1e6, 1, 4, |_| (10.0, 1000))
    }

    #[test]
    fn a_store_is_loadable_once_copied() {
        let mut o = one(&[cpu(100)], false);
        o.store(0, 0, 7, 0, 4);
        // 4 blocks: 1 µs + 400 µs.
        assert_eq!(o.lookup(0, 400_000, &[(7, 0, 4)]).blocks, 0, "still being copied");
        let h = o.lookup(0, 401_000, &[(7, 0, 4)]);
        assert_eq!((h.blocks, h.per_tier.clone()), (4, vec![4]));
        // A lookup stops at the first block missing.
        assert_eq!(o.lookup(0, 401_000, &[(7, 2, 6), (9, 0, 1)]).blocks, 2);
        // The load: 2 µs... one transfer of 4 blocks.
        let done = o.load(0, 1, 500_000, &h);
        assert_eq!(done, 500_000 + 401_000);
        assert!(o.loading(1, 900_000) && !o.loading(1, done));
        assert_eq!(o.load_ns[1], 401_000);
        assert_eq!(o.wakes, vec![(done, 0)]);
        // Loads queue on one stream.
        let done2 = o.load(0, 2, 500_000, &h);
        assert_eq!(done2, done + 401_000);
    }

    #[test]
    fn lru_evicts_tails_of_the_least_recent_run_and_cascades() {
        let ssd = TierSpec { medium: "ssd", capacity_blocks: 100, gbps: Some(1.0), latency_ns: Some(0), lru: true };
        let mut o = one(&[cpu(6), ssd], false);
        o.store(0, 0, 1, 0, 3);
        o.store(0, 0, 2, 0, 3);
        let t = 10_000_000;
        // Run 1 hit: run 2 is now the least recent.
        assert_eq!(o.lookup(0, t, &[(1, 0, 3)]).blocks, 3);
        o.store(0, t, 3, 0, 2);
        // Run 2 lost its last two blocks to run 3; they went to the SSD.
        let h = o.lookup(0, 2 * t, &[(2, 0, 3)]);
        assert_eq!(h.per_tier, vec![1, 2]);
        let st = o.tier_stats();
        assert_eq!((st[0].evicted_blocks, st[1].stored_blocks), (2, 2));
        // Nothing can be evicted while it is read: a store that needs it is dropped.
        let h1 = o.lookup(0, 2 * t, &[(1, 0, 3), (3, 0, 2), (2, 0, 1)]);
        o.load(0, 0, 2 * t, &h1);
        o.store(0, 2 * t, 4, 0, 1);
        assert_eq!(o.tier_stats()[0].dropped_blocks, 1);
    }

    #[test]
    fn a_cascade_prepended_to_a_run_leaves_all_of_it_loadable_once_written() {
        let ssd = TierSpec { medium: "ssd", capacity_blocks: 100, gbps: Some(1.0), latency_ns: Some(0), lru: true };
        let mut o = one(&[cpu(4), ssd], false);
        o.store(0, 0, 1, 0, 4);
        let t = 10_000_000;
        // Run 2 pushes run 1's tail (2..4) down, then its head (0..2), tail first.
        o.store(0, t, 2, 0, 2);
        o.store(0, 2 * t, 3, 0, 2);
        assert_eq!(o.lookup(0, 3 * t, &[(1, 0, 4)]).per_tier, vec![0, 4]);
        let st = o.tier_stats();
        assert_eq!((st[0].evicted_blocks, st[1].stored_blocks), (4, 4));
    }

    #[test]
    fn blocking_loads_stall_the_step_and_fifo_ignores_hits() {
        let mut o = one(&[TierSpec { lru: false, ..cpu(4) }], true);
        o.store(0, 0, 1, 0, 2);
        o.store(0, 0, 2, 0, 2);
        let h = o.lookup(0, 1_000_000, &[(1, 0, 2)]);
        let done = o.load(0, 0, 1_000_000, &h);
        assert!(!o.loading(0, 1_000_000), "a blocking load keeps no request waiting");
        assert_eq!(o.take_stall(0), done - 1_000_000);
        assert_eq!(o.take_stall(0), 0);
        // FIFO: run 1, though just hit, is evicted first.
        o.store(0, 5_000_000, 3, 0, 2);
        assert_eq!(o.lookup(0, 9_000_000, &[(1, 0, 1)]).blocks, 0);
        assert_eq!(o.lookup(0, 9_000_000, &[(2, 0, 2)]).blocks, 2);
    }
}
