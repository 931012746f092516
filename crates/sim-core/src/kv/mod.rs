//! KV-cache managers. All three share one pool of fixed-size *units* of `block_size` token
//! slots with an O(1) free list of unit ids; they differ in how many units a request holds
//! for a given length:
//! - `Paged`: vLLM's paged attention — ⌈len / block⌉ blocks, grown as the request grows.
//! - `PagedPerRequest`: o1pro — each request has its own block size (16/32/64 by length,
//!   seed §2), a block of size b being b / block_size units; larger blocks waste more slots
//!   (internal fragmentation) but need fewer block-table entries on very long contexts.
//! - `Contiguous`: Orca — the whole prompt + maximum output is reserved at admission.
//!
//! Units are real ids so that double allocation and leaks are observable (property tests and
//! the model checker check them), not just counters. Units never handed out are not stored
//! ([`free::FreeStack`]): a pool's memory follows the units it has used, not its size.
//!
//! With prefix caching ([`crate::kv::prefix`]) the free units live in vLLM's free queue instead
//! of a stack: freed units stay cached and are reused least recently freed first, and each
//! unit has a reference count (a cached unit may be shared by several requests).

pub mod free;
pub mod offload;
pub mod prefix;

use std::collections::TryReserveError;

use serde::Serialize;

use free::FreeStack;

/// Which manager a pool implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum KvMode {
    Contiguous,
    Paged,
    PagedPerRequest,
}

/// The per-request block size o1pro picks from the request's longest length (seed §2):
/// more than 64,000 tokens → 64, more than 16,000 → 32, otherwise 16.
pub fn o1pro_block_size(max_len: u32) -> u32 {
    if max_len > 64_000 {
        64
    } else if max_len > 16_000 {
        32
    } else {
        16
    }
}

/// A pool of KV units with accounting.
#[derive(Debug, Clone)]
pub struct KvPool {
    pub mode: KvMode,
    /// Token slots per unit.
    pub block_size: u32,
    total: u32,
    /// Free units, a stack (without prefix caching, or while its cache is dormant).
    free: FreeStack,
    /// Room for units handed out for the first time could not be allocated: the run is
    /// out of memory (the engine reports it; the allocation was refused).
    pub(crate) out_of_memory: bool,
    /// With prefix caching: reference counts, cached keys and the free queue, once awake
    /// (then `free` stays empty; see [`crate::kv::prefix::BlockCache`]).
    pub(crate) cache: Option<Box<crate::kv::prefix::BlockCache>>,
    /// The replica this pool belongs to (its index in the engine).
    pub(crate) replica: u32,
    /// Failed allocation attempts (growth or admission refused for lack of units).
    pub allocation_failures: u64,
    /// All allocation attempts.
    pub allocation_attempts: u64,
}

impl KvPool {
    /// A pool of `total` units of `block_size` slots. Ids are handed out lowest first.
    /// Nothing is allocated until units are used.
    pub fn new(mode: KvMode, block_size: u32, total: u32) -> Self {
        Self::lazy(mode, block_size, total, false)
    }

    /// A pool with prefix caching (its cache dormant until a block is first cached).
    pub fn with_prefix_caching(mode: KvMode, block_size: u32, total: u32) -> Self {
        Self::lazy(mode, block_size, total, true)
    }

    fn lazy(mode: KvMode, block_size: u32, total: u32, caching: bool) -> Self {
        KvPool {
            mode,
            block_size,
            total,
            free: FreeStack::new(total),
            out_of_memory: false,
            cache: caching.then(|| Box::new(crate::kv::prefix::BlockCache::new(total))),
            replica: 0,
            allocation_failures: 0,
            allocation_attempts: 0,
        }
    }

    /// A pool of `total` units, with prefix caching when `caching`, whose free list (its one
    /// large allocation, [`crate::limits::kv_pool_bytes`]) has room for `units` units handed
    /// out, reserved here: a run whose requests take no more in all never grows it (with
    /// caching, room for the free queue's holes too). `Err` when it cannot be allocated.
    pub fn try_new(mode: KvMode, block_size: u32, total: u32, caching: bool, units: u32) -> Result<Self, TryReserveError> {
        let mut pool = Self::lazy(mode, block_size, total, caching);
        pool.free.reserve_exact(units, |n| if caching { crate::limits::queue_holes_max(n) } else { 0 })?;
        Ok(pool)
    }

    /// Units handed out at some time since the pool was built or emptied: all below this,
    /// and those from it on are free and were never held (what a pool's memory follows).
    pub fn issued(&self) -> u32 {
        match &self.cache {
            Some(c) if c.active => c.issued(),
            _ => self.free.issued(),
        }
    }

    /// The same pool, belonging to replica `replica`.
    pub fn for_replica(self, replica: u32) -> Self {
        KvPool { replica, ..self }
    }

    /// Does this pool cache freed blocks?
    #[inline]
    pub fn caching(&self) -> bool {
        self.cache.is_some()
    }

    /// Are its free units in vLLM's free queue, with reference counts (a caching pool
    /// whose cache is awake)? Otherwise every held unit has exactly one holder.
    #[inline]
    pub fn queued(&self) -> bool {
        self.cache.as_ref().is_some_and(|c| c.active)
    }

    /// The cache, woken up if it was dormant (its free stack becomes the free queue);
    /// `None` without caching.
    pub(crate) fn awake_cache(&mut self) -> Option<&mut crate::kv::prefix::BlockCache> {
        let c = self.cache.as_deref_mut()?;
        if !c.active {
            c.activate(&mut self.free);
        }
        Some(c)
    }

    /// Empty the pool: every unit free, nothing cached (a replica restarting). In place: the
    /// free list keeps its allocation (a new pool next to the old would hold two).
    pub fn empty(&mut self) {
        if let Some(c) = self.cache.as_deref_mut() {
            if c.active {
                self.free.restore(c.take_queue(), 0..self.total);
            }
            // A new epoch: no lookup answer from before carries over.
            let epoch = c.epoch + 1;
            *c = crate::kv::prefix::BlockCache::new(self.total);
            c.epoch = epoch;
        }
        self.free.reset(0..self.total);
    }

    pub fn total(&self) -> u32 {
        self.total
    }

    #[inline]
    pub fn free_units(&self) -> u32 {
        match &self.cache {
            Some(c) if c.active => c.num_free,
            _ => self.free.len() as u32,
        }
    }

    pub fn used_units(&self) -> u32 {
        self.total - self.free_units()
    }

    /// Units needed to hold `len` token slots for a request whose own block size is
    /// `req_block` (only `PagedPerRequest` uses it).
    #[inline]
    pub fn units_for(&self, len: u32, req_block: u32) -> u32 {
        Self::units_in(self.mode, self.block_size, len, req_block)
    }

    /// [`KvPool::units_for`] in a pool of `mode` with units of `block_size` slots.
    #[inline]
    pub fn units_in(mode: KvMode, block_size: u32, len: u32, req_block: u32) -> u32 {
        match mode {
            KvMode::Paged | KvMode::Contiguous => len.div_ceil(block_size),
            KvMode::PagedPerRequest => {
                let per_block = (req_block / block_size).max(1);
                len.div_ceil(req_block.max(block_size)) * per_block
            }
        }
    }

    /// Would `len` slots fit for a request now holding `held` units?
    #[inline]
    pub fn fits(&self, len: u32, req_block: u32, held: usize) -> bool {
        (self.units_for(len, req_block) as usize).saturating_sub(held) <= self.free_units() as usize
    }

    /// [`KvPool::fits`] for an admission that hits `hit` cached units, `evictable()` of them
    /// free: those count as units to allocate, since they leave the free queue (vLLM's
    /// `get_num_blocks_to_allocate`). `evictable` is asked only when the answer depends on
    /// it (it reads every hit unit's reference count).
    #[inline]
    pub fn fits_with_hits(&self, len: u32, req_block: u32, held: usize, hit: u32, evictable: impl FnOnce() -> u32) -> bool {
        let need = (self.units_for(len, req_block) as usize).saturating_sub(held + hit as usize);
        let free = self.free_units() as usize;
        if need > free {
            false
        } else if need + hit as usize <= free {
            true
        } else {
            need + evictable() as usize <= free
        }
    }

    /// Grow `table` so that it covers `len` slots. On failure nothing changes and `false`
    /// is returned (the caller preempts or waits); the failure is counted.
    #[inline]
    pub fn grow(&mut self, table: &mut Vec<u32>, len: u32, req_block: u32) -> bool {
        // Fast path (most decode steps): the held units already cover `len` slots. Every
        // unit is `block_size` slots whatever the request's own block size.
        if (len as u64) <= table.len() as u64 * self.block_size as u64 {
            return true;
        }
        self.grow_slow(table, len, req_block)
    }

    #[inline(never)]
    fn grow_slow(&mut self, table: &mut Vec<u32>, len: u32, req_block: u32) -> bool {
        let need = (self.units_for(len, req_block) as usize).saturating_sub(table.len());
        if need == 0 {
            return true;
        }
        self.allocation_attempts += 1;
        if need > self.free_units() as usize {
            self.allocation_failures += 1;
            return false;
        }
        if let Some(c) = self.cache.as_deref_mut().filter(|c| c.active) {
            if !c.pop_into(table, need) {
                self.out_of_memory = true;
                return false;
            }
            return true;
        }
        let caching = self.cache.is_some();
        if self.free.make_room(need, |n| if caching { crate::limits::queue_holes_max(n) } else { 0 }).is_err() {
            self.out_of_memory = true;
            return false;
        }
        if need == 1 {
            // The common growth by one unit: the same unit `take_into` would move.
            if let Some(u) = self.free.pop() {
                table.push(u);
            }
            return true;
        }
        self.free.take_into(table, need);
        true
    }

    /// Count a refused admission (checked with [`KvPool::fits`] without allocating).
    pub fn note_refusal(&mut self) {
        self.allocation_attempts += 1;
        self.allocation_failures += 1;
    }

    /// Return every unit of `table` to the pool, last first. With an awake cache the
    /// table must cache nothing (a request's table goes through [`crate::kv::prefix::Apc::release`]).
    #[inline]
    pub fn release(&mut self, table: &mut Vec<u32>) {
        match self.cache.as_deref_mut() {
            Some(c) if c.active => {
                c.free_blank(table);
                table.clear();
            }
            _ => self.free.push_all(table.drain(..).rev()),
        }
    }

    /// Free exactly the units `fresh` (none held before, the others held): the model
    /// checker (which runs without prefix caching) rebuilds a canonical state's block ids.
    pub(crate) fn reset_free(&mut self, fresh: std::ops::Range<u32>) {
        self.free.reset(fresh);
    }

    /// The free units (for invariant checks): the stack bottom first, or the queue head
    /// first. A pool of 10⁹ units lists 10⁹ ids: checks of large pools use
    /// [`KvPool::freed_ids`] and [`KvPool::issued`].
    pub fn free_ids(&self) -> impl Iterator<Item = u32> + '_ {
        // (An awake cache took the whole stack: it is empty.)
        self.free.iter().chain(self.cache.iter().filter(|c| c.active).flat_map(|c| c.free_iter()))
    }

    /// The free units handed out before (all below [`KvPool::issued`]; the free units from
    /// it on are the rest), in no set order.
    pub fn freed_ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.free.freed().chain(self.cache.iter().filter(|c| c.active).flat_map(|c| c.freed_iter()))
    }

    /// Per unit handed out ([`KvPool::issued`] of them; the rest are free), how many
    /// request tables hold it by its reference count (an awake cache; empty otherwise).
    pub fn ref_counts(&self) -> Vec<u32> {
        self.cache.as_ref().filter(|c| c.active).map_or_else(Vec::new, |c| c.ref_counts())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Entries a pool's free list has room for (the stack's, or its queue's once awake).
    fn room(p: &KvPool) -> usize {
        p.free.capacity() + p.cache.as_ref().map_or(0, |c| c.room())
    }

    /// A pool of 2³² − 1 units stores only what it hands out: room reserved for the
    /// requests' units (and the queue's holes with caching), grown when more are handed
    /// out, never by freeing; ids come lowest first, freed ones first again.
    #[test]
    fn a_huge_pool_stores_only_the_units_it_hands_out() {
        for caching in [false, true] {
            let mut p = KvPool::try_new(KvMode::Paged, 16, u32::MAX, caching, 64).unwrap();
            let holes = if caching { 1024 } else { 0 };
            assert_eq!(room(&p), 64 + holes);
            let (mut a, mut b) = (Vec::new(), Vec::new());
            assert!(p.grow(&mut a, 16 * 40, 16) && p.grow(&mut b, 16 * 20, 16));
            assert_eq!((a[0], a[39], b[0], b[19]), (0, 39, 40, 59));
            p.release(&mut a);
            if caching {
                p.awake_cache();
                assert!(p.queued());
            }
            assert_eq!((p.free_units(), p.issued(), room(&p)), (u32::MAX - 20, 60, 64 + holes));
            // The freed units first (the stack's top, or the queue's head), then new ones:
            // room grows for those, fallibly.
            assert!(p.grow(&mut a, 16 * 100, 16));
            assert_eq!(a, (0..40).chain(60..120).collect::<Vec<_>>());
            assert!(room(&p) >= 120 + holes && room(&p) < 1 << 12, "{}", room(&p));
            let before = room(&p);
            p.release(&mut a);
            p.release(&mut b);
            assert_eq!((p.free_units(), room(&p), p.out_of_memory), (u32::MAX, before, false));
            assert_eq!(p.freed_ids().count(), 120);
            p.empty();
            assert_eq!((p.free_units(), p.issued()), (u32::MAX, 0));
        }
    }

    #[test]
    fn paged_grows_by_blocks_and_releases() {
        let mut p = KvPool::new(KvMode::Paged, 16, 4);
        let mut t = Vec::new();
        assert!(p.grow(&mut t, 17, 16));
        assert_eq!(t.len(), 2);
        assert!(p.grow(&mut t, 32, 16));
        assert_eq!(t.len(), 2, "32 slots still fit in two blocks");
        assert!(!p.grow(&mut t, 80, 16), "five blocks do not fit in four");
        assert_eq!(p.free_units(), 2);
        assert_eq!(p.allocation_failures, 1);
        p.release(&mut t);
        assert_eq!(p.free_units(), 4);
    }

    #[test]
    fn per_request_blocks_waste_more_slots() {
        let p = KvPool::new(KvMode::PagedPerRequest, 16, 1000);
        // 100 tokens in 64-token blocks: 2 blocks = 8 units (128 slots), vs 7 units at 16.
        assert_eq!(p.units_for(100, 64), 8);
        assert_eq!(p.units_for(100, 16), 7);
        assert_eq!(o1pro_block_size(70_000), 64);
        assert_eq!(o1pro_block_size(20_000), 32);
        assert_eq!(o1pro_block_size(16_000), 16);
    }
}
