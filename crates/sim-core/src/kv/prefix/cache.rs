//! The cache side of one replica's KV pool: vLLM's free queue, reference counts and the
//! index from block hashes to cached units (see [`super`]), kept by *pieces* of runs
//! instead of by unit.
//!
//! **What is kept.** A *run* is a key (a block hash, or a request's id for its private
//! blocks) with unit indices 0, 1, …: the units of one stream piece's blocks, of one
//! single block, or of one request's table. Each registration (`BlockPool.cache_full_blocks`
//! on consecutive units) adds a *piece* to its run: an index range, the units that hold it
//! (copied from the table), its rank (registration order: among several copies of an index
//! a lookup takes the oldest, as vLLM's `get_one_block` does) and its state: held by
//! `refs` tables, or free in the queue. A piece's units share their state; a hit on part of
//! a piece splits it, so a table always holds whole pieces.
//!
//! **The free queue** (`FreeKVCacheBlockQueue`) is the units' ids in order, head evicted
//! next. Units freed holding no hash (a table's tail past its full blocks) are prepended
//! (`prepend_n`): they wait in `front`, ahead of the head, outside the positions below, and
//! are handed out first without evicting anything. Freeing a piece (`free_blocks`, last
//! unit first) appends its units and records
//! where the first one went: index `i` of a free piece `[lo, hi)` is at queue position
//! `pos + hi − 1 − i`. Taking units from the head (`get_new_blocks`) evicts their blocks
//! (`_maybe_evict_cached_block`) without reading them: a free copy is cached while its
//! position is at or after the head's, so the copies a pop passes are gone from every
//! lookup at once, and what is left of a partly popped piece is a prefix of it (its tail
//! went first, as vLLM frees tails first to keep prefixes). A hit on a free unit
//! (`touch`, `remove` from the middle of the queue) leaves a hole (`NIL`) in the queue,
//! skipped when it reaches the head; when holes are many they are packed away and the free
//! pieces' positions renumbered.
//!
//! **Units never handed out** are not stored: when the cache wakes, the pool's free stack
//! ([`crate::kv::free::FreeStack`]) becomes the queue, its freed units (top first) then the
//! units never handed out, lowest first. These stay a range (`fresh`) at their place in the
//! queue, after the first `split` stored entries and before every unit freed since, so
//! that the queue's memory follows the units handed out, not the pool's size. No hit
//! touches them (nothing is cached in a unit never handed out), so the holes are all in
//! the stored entries.
//!
//! **Cold pieces.** Most shared blocks are never hit: a follow-up prompt usually runs on
//! another replica, or after its prefix was evicted. So the shared blocks of a small
//! *family* (the requests whose streams begin alike, [`super::Apc`]) are registered *cold*
//! on a replica where none of them was hit yet: appended to their request's own list
//! ([`ColdList`], units copied, in registration order) instead of the index. A cold piece
//! is in the same state as an indexed one would be — held by its one table, or free in the
//! queue at the position its release gave it, evicted as the head passes — and a request's
//! list is dropped once its last free piece is evicted (its release order is the queue's,
//! [`BlockCache::cold_fifo`]). A lookup that finds a cold copy of the first block it asks
//! for *materializes* the family here: every cold piece of its members moves into the index
//! in registration order (what the index would have held), and the family is indexed here
//! from then on ([`BlockCache::hot`]). A registration that no lookup ever finds costs an
//! append.
//!
//! So the per-unit work of a request's life — allocating, caching, freeing and evicting
//! about a thousand blocks of a long prompt — is copying unit ids; everything else is done
//! once per piece. Pieces whose every copy was evicted are swept away in batches (amortised
//! O(1) each), and a run with no piece left leaves the index.

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::ops::Range;

use crate::kv::free::FreeStack;
use crate::limits::{queue_holes_max, PACK_CHUNK};

/// "No unit": a hole in the free queue, no piece found.
pub(super) const NIL: u32 = u32::MAX;

/// A hasher for keys that are already hashes (or request ids): one multiply-xorshift
/// spreads the bits the map indexes by. Deterministic; the maps are only ever looked up,
/// never iterated, so their order cannot reach a result.
#[derive(Default)]
pub struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    #[inline]
    fn write_u64(&mut self, x: u64) {
        let h = (self.0 ^ x).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.0 = h ^ (h >> 32);
    }
    #[inline]
    fn write_u32(&mut self, x: u32) {
        self.write_u64(u64::from(x));
    }
}

type Map<K> = HashMap<K, u32, BuildHasherDefault<KeyHasher>>;

/// Which key a run is cached under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunKey {
    /// A slab entry not in use.
    Free,
    /// A block hash (shared blocks: a run's first block, or a single block).
    Shared(u64),
    /// A request's private blocks, by unit index of its table.
    Private(u32),
}

/// Consecutive unit indices of a run registered together, in one state.
#[derive(Debug, Clone, Copy)]
struct Piece {
    /// Registration order (pieces split from one share it).
    rank: u64,
    lo: u32,
    hi: u32,
    /// Where index `lo`'s unit is in the run's `units`.
    at: u32,
    /// Tables holding it; 0: free, in the queue.
    refs: u32,
    /// Free: the queue position of index `hi − 1` (the first of its units appended).
    pos: u64,
}

impl Piece {
    /// End of the indices still cached at head position `head` (all of them when held;
    /// a free piece loses its tail first).
    #[inline]
    fn valid_hi(&self, head: u64) -> u32 {
        if self.refs > 0 || self.pos >= head {
            return self.hi;
        }
        let gone = (head - self.pos).min(u64::from(self.hi - self.lo)) as u32;
        self.hi - gone
    }

    /// Every copy evicted (free, its first index's unit popped).
    #[inline]
    fn expired(&self, head: u64) -> bool {
        self.refs == 0 && self.pos + u64::from(self.hi - self.lo) <= head
    }

    /// The part `[lo, hi)` of it, in the same state.
    #[inline]
    fn part(&self, lo: u32, hi: u32) -> Piece {
        Piece { lo, hi, at: self.at + (lo - self.lo), pos: self.pos + u64::from(self.hi - hi), ..*self }
    }
}

/// One run: its pieces (in rank order) and their units.
#[derive(Debug, Clone)]
struct Run {
    key: RunKey,
    pieces: Vec<Piece>,
    units: Vec<u32>,
}

/// A shared piece registered cold ([`BlockCache::register_cold`]): like a [`Piece`] of the
/// run under `key`, held by its request's table alone or free.
#[derive(Debug, Clone, Copy)]
struct ColdPiece {
    key: u64,
    rank: u64,
    lo: u32,
    hi: u32,
    /// Where index `lo`'s unit is in the list's `units`.
    at: u32,
    held: bool,
    /// Free: the queue position of index `hi − 1`.
    pos: u64,
}

impl ColdPiece {
    /// End of the indices still cached at head position `head`.
    #[inline]
    fn valid_hi(&self, head: u64) -> u32 {
        Piece { rank: self.rank, lo: self.lo, hi: self.hi, at: self.at, refs: u32::from(self.held), pos: self.pos }.valid_hi(head)
    }
}

/// One request's cold pieces on this replica, in registration order.
#[derive(Debug, Clone, Default)]
struct ColdList {
    req: u32,
    pieces: Vec<ColdPiece>,
    /// The units of its held pieces (a free piece's are in the queue, at its positions);
    /// emptied when nothing is held.
    units: Vec<u32>,
    /// Pieces held (by its table).
    held: u32,
    /// Once nothing is held: the position the head must reach for every piece to be evicted.
    expire: u64,
    /// Bumped at each release and when the list is dropped (stale [`BlockCache::cold_fifo`]
    /// entries are skipped).
    gen: u32,
}

/// Marks a held range of a request's table as a cold piece (its index in the request's
/// list) rather than a run of the index.
pub const COLD: u32 = 1 << 31;

/// The cache side of one replica's pool.
///
/// It starts *dormant*: until the first block is cached, no unit holds cached content, so
/// which free unit an allocation takes cannot change any result, and the pool keeps its
/// plain free stack (a workload of unique prompts that never preempts never leaves this
/// state and pays nothing). The first registration wakes it: the free units, all equally
/// empty, become the free queue, and from then on the queue follows vLLM's order exactly.
#[derive(Debug, Clone)]
pub struct BlockCache {
    /// Units in the pool.
    total: u32,
    /// Awake: the queue and the runs are live.
    pub active: bool,
    /// The free queue's stored unit ids, head first, `fresh` after the first `split` of
    /// them; `NIL`: a hole left by a hit.
    queue: VecDeque<u32>,
    /// Stored entries before `fresh` (0 once `fresh` is empty).
    split: usize,
    /// Units never handed out, in the queue lowest first after `queue[..split]`.
    fresh: Range<u32>,
    /// Units freed holding no hash (a table's partly filled or unscheduled tail: vLLM's
    /// `free_blocks` prepends them, so they are reused before any cached unit is evicted),
    /// ahead of the queue's head, the last one first. They evict nothing when taken and have
    /// no queue position.
    front: Vec<u32>,
    /// Entries ever taken from the head: the queue's `i`th entry (stored or fresh) is at
    /// position `head + i`.
    head: u64,
    /// Holes in `queue`.
    holes: u32,
    /// Units in the free queue (cached or not).
    pub num_free: u32,
    /// Counts registrations: with the head's position, what a lookup's answer depends on.
    pub epoch: u64,
    shared: Map<u64>,
    private: Map<u32>,
    slab: Vec<Run>,
    free_slab: Vec<u32>,
    /// Registrations so far (the next piece's rank).
    ranks: u64,
    /// Pieces now in the runs, and at the last sweep.
    pieces: usize,
    swept: usize,
    /// Scratch for [`BlockCache::release`].
    mine: Vec<usize>,
    /// Cold lists (a slab), by request, and the slab's free entries.
    cold: Vec<ColdList>,
    cold_of: Map<u32>,
    cold_free: Vec<u32>,
    /// Lists with nothing held, in release order, which is their `expire` order: (list, gen).
    cold_fifo: VecDeque<(u32, u32)>,
    /// Families materialized here: their shared blocks are indexed.
    hot: HashSet<u32, BuildHasherDefault<KeyHasher>>,
}

/// A held range of a run found by a lookup: (run, first index, length).
pub type Seg = (u32, u32, u32);

impl BlockCache {
    /// A dormant cache for a pool of `total` units.
    pub fn new(total: u32) -> BlockCache {
        BlockCache {
            total,
            active: false,
            queue: VecDeque::new(),
            split: 0,
            fresh: total..total,
            front: Vec::new(),
            head: 0,
            holes: 0,
            num_free: 0,
            epoch: 0,
            shared: Map::default(),
            private: Map::default(),
            slab: Vec::new(),
            free_slab: Vec::new(),
            ranks: 0,
            pieces: 0,
            swept: 0,
            mine: Vec::new(),
            cold: Vec::new(),
            cold_of: Map::default(),
            cold_free: Vec::new(),
            cold_fifo: VecDeque::new(),
            hot: HashSet::default(),
        }
    }

    /// Wake up with `free` (the pool's free stack, taken whole) as the free queue, its top
    /// (allocated next) at the head: its freed units, then those never handed out. Nothing
    /// is cached yet.
    pub fn activate(&mut self, free: &mut FreeStack) {
        // In place: the stack's list becomes the queue's (a copy would hold both). It has
        // room for every unit handed out and the queue's holes ([`FreeStack::make_room`]),
        // so that freeing never grows the queue.
        let (mut list, fresh) = free.take();
        list.reverse();
        self.queue = VecDeque::from(list);
        self.split = if fresh.is_empty() { 0 } else { self.queue.len() };
        self.num_free = (self.queue.len() + fresh.len()) as u32;
        self.fresh = fresh;
        self.active = true;
        self.epoch += 1;
    }

    /// Units handed out at some time (all below this; those from it on never were).
    #[inline]
    pub fn issued(&self) -> u32 {
        self.fresh.start
    }

    /// The stored entry at the queue's `i`th place from the head (`None`: a unit never
    /// handed out, or past the tail).
    #[inline]
    fn stored(&self, i: usize) -> Option<usize> {
        if i < self.split {
            Some(i)
        } else if i < self.split + self.fresh.len() {
            None
        } else {
            Some(i - self.fresh.len())
        }
    }

    /// Holes the queue keeps before it packs them: [`queue_holes_max`] of the units handed
    /// out (fewer in tests, so that the tiny pools they use exercise packing).
    #[inline]
    fn holes_max(&self) -> u32 {
        if cfg!(test) {
            (self.issued() / 8).max(2)
        } else {
            queue_holes_max(self.issued())
        }
    }

    /// The head's position: a lookup's answer holds while it stays at or before the
    /// earliest position of a free unit the answer names.
    #[inline]
    pub fn head(&self) -> u64 {
        self.head
    }

    /// The queue's tail position (head plus the queue, holes included): a unit freed from
    /// now on joins at or after it, so a held unit an answer names cannot be evicted
    /// before the head passes it. It only grows until [`BlockCache::pack`], which moves
    /// positions and so starts a new epoch.
    #[inline]
    pub fn tail(&self) -> u64 {
        self.head + (self.queue.len() + self.fresh.len()) as u64
    }

    /// Tests only: entries the stored queue has room for.
    #[cfg(test)]
    pub(crate) fn room(&self) -> usize {
        self.queue.capacity()
    }

    /// Tests only: count the queue's positions from `n` on.
    #[cfg(test)]
    pub(crate) fn skip_positions(&mut self, n: u64) {
        self.head += n;
    }

    /// Append `need` units from the queue's head to `table` (`get_new_blocks`): the blocks
    /// they cached are evicted by the head passing them. The caller has checked they are free.
    /// `false` (nothing changed) when the queue's room for units handed out for the first
    /// time could not be allocated.
    pub fn pop_into(&mut self, table: &mut Vec<u32>, need: usize) -> bool {
        if !self.fresh.is_empty() {
            // Room for the units this may hand out for the first time (at most `need`), so
            // that freeing them never grows the queue.
            let issued = self.fresh.start + need.min(self.fresh.len()) as u32;
            let want = issued as usize + queue_holes_max(issued) as usize;
            if self.queue.capacity() < want && self.queue.try_reserve(want - self.queue.len()).is_err() {
                return false;
            }
        }
        // A new table gets room to grow by an eighth before it moves (a prompt's table
        // then takes its decode blocks in place).
        table.reserve(if table.is_empty() { need + need / 8 } else { need });
        // The blank units at the front first, the last prepended first.
        let n = need.min(self.front.len());
        table.extend(self.front.drain(self.front.len() - n..).rev());
        let mut got = n;
        while got < need {
            let want = need - got;
            if self.split == 0 && !self.fresh.is_empty() {
                // Units never handed out, lowest first.
                let n = want.min(self.fresh.len()) as u32;
                table.extend(self.fresh.start..self.fresh.start + n);
                self.fresh.start += n;
                self.head += u64::from(n);
                got += n as usize;
                continue;
            }
            // The stored entries before `fresh` first, if any.
            let want = if self.split > 0 { want.min(self.split) } else { want };
            self.split -= want.min(self.split);
            got += self.take_stored(table, want);
        }
        self.num_free -= need as u32;
        true
    }

    /// Move the queue's first `want` stored entries to `table`, holes dropped; returns how
    /// many units that was.
    #[inline]
    fn take_stored(&mut self, table: &mut Vec<u32>, want: usize) -> usize {
        let before = table.len();
        let (a, b) = self.queue.as_slices();
        let (a, b) = if want <= a.len() { (&a[..want], &b[..0]) } else { (a, &b[..want - a.len()]) };
        if self.holes == 0 {
            table.extend_from_slice(a);
            table.extend_from_slice(b);
        } else {
            table.extend(a.iter().chain(b).copied().filter(|&u| u != NIL));
        }
        self.queue.drain(..want);
        let took = table.len() - before;
        self.holes -= (want - took) as u32;
        self.head += want as u64;
        took
    }

    /// Free units that cache nothing (a table's tail past its cached blocks), `units` in
    /// table order: appended last first.
    pub fn free_blank(&mut self, units: &[u32]) {
        self.queue.extend(units.iter().rev());
        self.debug_check_len();
        self.num_free += units.len() as u32;
    }

    /// Free units that hold no hash (`units` in table order, the table's tail): put at the
    /// queue's front, last first (vLLM's `prepend_n` of the table's blocks freed tail first),
    /// to be handed out before any cached unit is evicted.
    pub fn prepend_blank(&mut self, units: &[u32]) {
        self.front.extend_from_slice(units);
        self.num_free += units.len() as u32;
    }

    /// The run cached under a block hash, if any.
    #[inline]
    pub fn shared_run(&self, key: u64) -> Option<u32> {
        self.shared.get(&key).copied()
    }

    /// Index `i` of run `e` has a cached copy.
    #[inline]
    pub fn cached_at(&self, e: u32, i: u32) -> bool {
        self.oldest_at(e as usize, i).0 != NIL as usize
    }

    /// Request `id`'s private run, if any.
    #[inline]
    pub fn private_run(&self, id: u32) -> Option<u32> {
        self.private.get(&id).copied()
    }

    /// The piece of run `e` whose unit at index `i` is the oldest cached copy (NIL: none),
    /// and how far from `i` on that stays so: its cached end, or the start of an older
    /// piece that covers an index after `i`.
    #[inline]
    fn oldest_at(&self, e: usize, i: u32) -> (usize, u32) {
        let pieces = &self.slab[e].pieces;
        let mut end = u32::MAX;
        for (k, p) in pieces.iter().enumerate() {
            if p.lo <= i && i < p.valid_hi(self.head) {
                return (k, end.min(p.valid_hi(self.head)));
            }
            if p.lo > i {
                end = end.min(p.lo);
            }
        }
        (NIL as usize, 0)
    }

    /// vLLM's lookup along run `e` from index `from`: the oldest cached copy of each index
    /// in turn, at most `max`, until one is not cached. Appends their units to `out` and
    /// the ranges to `segs` (one per piece); returns how many.
    pub fn hits(&self, e: u32, from: u32, max: u32, out: &mut Vec<u32>, segs: &mut Vec<Seg>) -> u32 {
        let e = e as usize;
        let end = from.saturating_add(max);
        let mut i = from;
        while i < end {
            let (k, stop) = self.oldest_at(e, i);
            if k == NIL as usize {
                break;
            }
            let p = &self.slab[e].pieces[k];
            let to = stop.min(end);
            let at = (p.at + (i - p.lo)) as usize;
            out.extend_from_slice(&self.slab[e].units[at..at + (to - i) as usize]);
            segs.push((e as u32, i, to - i));
            i = to;
        }
        i - from
    }

    /// Of run `e`'s indices `[lo, lo + n)` as a lookup found them: how many are free, and
    /// the earliest queue position among those (`u64::MAX`: none).
    pub fn free_in(&self, (e, lo, n): Seg) -> (u32, u64) {
        let (mut free, mut first) = (0, u64::MAX);
        let mut i = lo;
        while i < lo + n {
            let (k, stop) = self.oldest_at(e as usize, i);
            let p = &self.slab[e as usize].pieces[k];
            let to = stop.min(lo + n);
            if p.refs == 0 {
                free += to - i;
                first = first.min(p.pos + u64::from(p.hi - to));
            }
            i = to;
        }
        (free, first)
    }

    /// A table takes the copies a lookup found at run `e`'s indices `[lo, lo + n)` (vLLM's
    /// `touch`): one holder more each; free ones leave the queue (a hole each).
    pub fn touch(&mut self, (e, lo, n): Seg) {
        let mut i = lo;
        while i < lo + n {
            let (k, stop) = self.oldest_at(e as usize, i);
            let to = stop.min(lo + n);
            let p = self.slab[e as usize].pieces[k];
            if p.refs == 0 {
                for j in i..to {
                    // A cached unit was handed out: it is a stored entry.
                    let at = self.stored((p.pos + u64::from(p.hi - 1 - j) - self.head) as usize);
                    debug_assert!(at.is_some(), "a cached unit in the fresh range");
                    if let Some(u) = at.and_then(|at| self.queue.get_mut(at)) {
                        *u = NIL;
                    }
                }
                self.holes += to - i;
                self.num_free -= to - i;
            }
            let mid = Piece { refs: p.refs + 1, ..p.part(i, to) };
            self.split(e as usize, k, p, mid);
            i = to;
        }
        if self.holes > self.holes_max() {
            self.pack();
        }
    }

    /// The queue stores at most every unit handed out and [`queue_holes_max`] of them holes
    /// (the room [`BlockCache::pop_into`] reserved: freeing never grows it).
    #[inline]
    fn debug_check_len(&self) {
        debug_assert!(
            self.queue.len() <= self.issued() as usize + queue_holes_max(self.issued()) as usize,
            "free queue of {} entries past its room",
            self.queue.len()
        );
    }

    /// Empty the queue and hand back its allocation (a replica restarting reuses it).
    pub fn take_queue(&mut self) -> Vec<u32> {
        self.queue.clear();
        self.front.clear();
        self.split = 0;
        Vec::from(std::mem::take(&mut self.queue))
    }

    /// Replace piece `k` (`p`) of run `e` by `mid` (a part of it in a new state) and the
    /// parts of `p` before and after it.
    fn split(&mut self, e: usize, k: usize, p: Piece, mid: Piece) {
        let mut parts = [None, Some(mid), None];
        if p.lo < mid.lo {
            parts[0] = Some(p.part(p.lo, mid.lo));
        }
        if mid.hi < p.hi {
            parts[2] = Some(p.part(mid.hi, p.hi));
        }
        self.pieces += parts.iter().flatten().count() - 1;
        self.slab[e].pieces.splice(k..=k, parts.into_iter().flatten());
    }

    /// Cache `units` (held by one table, blank) at indices `from..` of the run under `key`
    /// (vLLM's `cache_full_blocks`: duplicates of cached copies are kept, after them).
    /// Returns the run.
    pub fn register(&mut self, key: RunKey, from: u32, units: &[u32]) -> u32 {
        debug_assert!(self.active && key != RunKey::Free && !units.is_empty());
        self.epoch += 1;
        let BlockCache { shared, private, slab, free_slab, .. } = self;
        let mut fresh = || match free_slab.pop() {
            Some(e) => {
                slab[e as usize].key = key;
                e
            }
            None => {
                slab.push(Run { key, pieces: Vec::new(), units: Vec::new() });
                slab.len() as u32 - 1
            }
        };
        let e = match key {
            RunKey::Shared(h) => *shared.entry(h).or_insert_with(&mut fresh),
            RunKey::Private(id) => *private.entry(id).or_insert_with(&mut fresh),
            RunKey::Free => unreachable!("a run is registered under a key"),
        };
        let run = &mut self.slab[e as usize];
        let at = run.units.len() as u32;
        run.units.extend_from_slice(units);
        run.pieces.push(Piece { rank: self.ranks, lo: from, hi: from + units.len() as u32, at, refs: 1, pos: 0 });
        self.ranks += 1;
        self.pieces += 1;
        if self.pieces > self.swept + self.swept / 2 + if cfg!(test) { 4 } else { 4096 } {
            self.sweep();
        }
        e
    }

    /// A table lets go of its copies at run `e`'s indices `[lo, lo + units.len())` (`units`
    /// as the table holds them), last first (vLLM's `free_blocks`): one holder fewer each;
    /// those nobody holds join the queue's tail, still cached.
    pub fn release(&mut self, e: u32, lo: u32, units: &[u32]) {
        let hi = lo + units.len() as u32;
        let run = &mut self.slab[e as usize];
        // The common case: the range is one piece.
        if let Some(p) = run.pieces.iter_mut().find(|p| p.lo == lo && p.hi == hi && p.refs > 0 && run.units[p.at as usize] == units[0]) {
            p.refs -= 1;
            if p.refs == 0 {
                p.pos = self.head + (self.queue.len() + self.fresh.len()) as u64;
                self.queue.extend(units.iter().rev());
                self.num_free += hi - lo;
                self.debug_check_len();
            }
            return;
        }
        let mut mine = std::mem::take(&mut self.mine);
        mine.clear();
        for (k, p) in run.pieces.iter().enumerate() {
            if p.refs > 0 && lo <= p.lo && p.hi <= hi && run.units[p.at as usize] == units[(p.lo - lo) as usize] {
                mine.push(k);
            }
        }
        mine.sort_unstable_by_key(|&k| std::cmp::Reverse(run.pieces[k].lo));
        debug_assert_eq!(mine.iter().map(|&k| run.pieces[k].hi - run.pieces[k].lo).sum::<u32>(), hi - lo, "a table holds whole pieces");
        for &k in &mine {
            let p = &mut run.pieces[k];
            p.refs -= 1;
            if p.refs == 0 {
                p.pos = self.head + (self.queue.len() + self.fresh.len()) as u64;
                let at = p.at as usize;
                self.queue.extend(run.units[at..at + (p.hi - p.lo) as usize].iter().rev());
                self.num_free += p.hi - p.lo;
            }
        }
        self.mine = mine;
        self.debug_check_len();
    }

    /// Register `units` (held by the list's request's table, blank) at indices `from..` of
    /// the run under `key` as a cold piece of list `li` ([`BlockCache::cold_list`]; see the
    /// module docs): what [`BlockCache::register`] does, without the index. Returns its index
    /// in the list.
    pub fn register_cold(&mut self, li: u32, key: u64, from: u32, units: &[u32]) -> u32 {
        debug_assert!(self.active && !units.is_empty());
        self.epoch += 1;
        let l = &mut self.cold[li as usize];
        let at = l.units.len() as u32;
        l.units.extend_from_slice(units);
        l.pieces.push(ColdPiece { key, rank: self.ranks, lo: from, hi: from + units.len() as u32, at, held: true, pos: 0 });
        l.held += 1;
        self.ranks += 1;
        l.pieces.len() as u32 - 1
    }

    /// Request `req`'s cold list (created empty when it has none), with room for `pieces`
    /// more pieces of `units` units in all: the list [`BlockCache::register_cold`] appends to.
    pub fn cold_list(&mut self, req: u32, pieces: usize, units: usize) -> u32 {
        self.sweep_cold();
        let li = match self.cold_of.get(&req) {
            Some(&li) => li,
            None => {
                let li = match self.cold_free.pop() {
                    Some(li) => li,
                    None => {
                        self.cold.push(ColdList::default());
                        self.cold.len() as u32 - 1
                    }
                };
                self.cold[li as usize].req = req;
                self.cold_of.insert(req, li);
                li
            }
        };
        let l = &mut self.cold[li as usize];
        l.pieces.reserve(pieces);
        l.units.reserve(units);
        li
    }

    /// Request `req`'s table lets go of its cold piece `k` (`units` as the table holds them),
    /// last unit first: it joins the queue's tail, still cached.
    pub fn release_cold(&mut self, req: u32, k: u32, units: &[u32]) {
        let Some(&li) = self.cold_of.get(&req) else {
            debug_assert!(false, "request {req} has no cold list");
            return;
        };
        let tail = self.tail();
        let n = units.len() as u32;
        let l = &mut self.cold[li as usize];
        let p = &mut l.pieces[k as usize];
        debug_assert!(p.held && p.hi - p.lo == n, "a table holds whole cold pieces");
        p.held = false;
        p.pos = tail;
        l.held -= 1;
        if l.held == 0 {
            l.expire = tail + u64::from(n);
            l.gen = l.gen.wrapping_add(1);
            l.units = Vec::new();
            self.cold_fifo.push_back((li, l.gen));
        }
        self.queue.extend(units.iter().rev());
        self.num_free += n;
        self.debug_check_len();
    }

    /// Drop the lists whose pieces were all evicted (the queue's head passed them), in
    /// release order.
    fn sweep_cold(&mut self) {
        while let Some(&(li, gen)) = self.cold_fifo.front() {
            let l = &self.cold[li as usize];
            if l.gen == gen && l.held == 0 {
                if l.expire > self.head {
                    break;
                }
                self.drop_cold(li);
            }
            self.cold_fifo.pop_front();
        }
    }

    /// Drop list `li` (its pieces evicted, or moved to the index).
    fn drop_cold(&mut self, li: u32) {
        let l = &mut self.cold[li as usize];
        self.cold_of.remove(&l.req);
        // Freed, not kept: a slot is reused by requests of any size.
        l.pieces = Vec::new();
        l.units = Vec::new();
        l.held = 0;
        l.gen = l.gen.wrapping_add(1);
        self.cold_free.push(li);
    }

    /// Family `family` is indexed here.
    #[inline]
    pub fn is_hot(&self, family: u32) -> bool {
        !self.hot.is_empty() && self.hot.contains(&family)
    }

    /// Does some request of `members` hold a cold copy, cached now, of index `i` of the run
    /// under `key`?
    pub fn cold_copy(&self, members: &[u32], key: u64, i: u32) -> bool {
        members.iter().filter_map(|m| self.cold_of.get(m)).any(|&li| {
            self.cold[li as usize].pieces.iter().any(|p| p.key == key && p.lo <= i && i < p.valid_hi(self.head))
        })
    }

    /// Index family `family` here from now on: move the cold pieces of its `members` that are
    /// still cached into the index, in registration order (as [`BlockCache::register`] would
    /// have put them), and drop their lists. Appends to `moved`, for each held piece, (its
    /// request, its index in the request's list, its run): the table's range now names the run.
    pub fn materialize(&mut self, family: u32, members: &[u32], moved: &mut Vec<(u32, u32, u32)>) {
        self.epoch += 1;
        self.hot.insert(family);
        let head = self.head;
        let mut all: Vec<(u64, u64, u32, u32)> = Vec::new();
        for &m in members {
            let Some(&li) = self.cold_of.get(&m) else { continue };
            for (k, p) in self.cold[li as usize].pieces.iter().enumerate() {
                if p.valid_hi(head) > p.lo {
                    all.push((p.key, p.rank, li, k as u32));
                }
            }
        }
        all.sort_unstable();
        for &(key, _, li, k) in &all {
            let l = &self.cold[li as usize];
            let p = l.pieces[k as usize];
            let req = l.req;
            let BlockCache { shared, slab, free_slab, cold, queue, split, fresh, .. } = &mut *self;
            let e = *shared.entry(key).or_insert_with(|| match free_slab.pop() {
                Some(e) => {
                    slab[e as usize].key = RunKey::Shared(key);
                    e
                }
                None => {
                    slab.push(Run { key: RunKey::Shared(key), pieces: Vec::new(), units: Vec::new() });
                    slab.len() as u32 - 1
                }
            });
            let run = &mut slab[e as usize];
            let at = run.units.len() as u32;
            if p.held {
                run.units.extend_from_slice(&cold[li as usize].units[p.at as usize..(p.at + p.hi - p.lo) as usize]);
            } else {
                // A free piece's units are in the queue, index `i`'s at `pos + hi − 1 − i`
                // (those evicted are never read again; their places are kept).
                let (q, split, fresh) = (&*queue, *split, fresh.len());
                run.units.extend((p.lo..p.hi).map(|i| {
                    let at = (p.pos + u64::from(p.hi - 1 - i)).checked_sub(head).map(|x| x as usize);
                    let stored = at.map(|x| if x < split { x } else { x.saturating_sub(fresh) });
                    stored.and_then(|x| q.get(x)).copied().filter(|_| i < p.valid_hi(head)).unwrap_or(NIL)
                }));
            }
            run.pieces.push(Piece { rank: p.rank, lo: p.lo, hi: p.hi, at, refs: u32::from(p.held), pos: p.pos });
            self.pieces += 1;
            if p.held {
                moved.push((req, k, e));
            }
        }
        for &m in members {
            if let Some(&li) = self.cold_of.get(&m) {
                self.drop_cold(li);
            }
        }
    }

    /// Request `id` is done: nobody will look up its private blocks again (they stay in
    /// the queue as plain units).
    pub fn forget(&mut self, id: u32) {
        if let Some(e) = self.private.remove(&id) {
            let run = &mut self.slab[e as usize];
            debug_assert!(run.pieces.iter().all(|p| p.refs == 0), "a done request holds nothing");
            self.pieces -= run.pieces.len();
            run.pieces.clear();
            run.units.clear();
            run.key = RunKey::Free;
            self.free_slab.push(e);
        }
    }

    /// Drop the pieces whose copies were all evicted, and the runs left with none
    /// (amortised over as many registrations).
    #[cold]
    fn sweep(&mut self) {
        let head = self.head;
        let mut left = 0;
        for (e, run) in self.slab.iter_mut().enumerate() {
            if run.key == RunKey::Free {
                continue;
            }
            run.pieces.retain(|p| !p.expired(head));
            if run.pieces.is_empty() {
                match run.key {
                    RunKey::Shared(h) => self.shared.remove(&h),
                    RunKey::Private(id) => self.private.remove(&id),
                    RunKey::Free => None,
                };
                run.key = RunKey::Free;
                run.units.clear();
                self.free_slab.push(e as u32);
                continue;
            }
            // Units of pieces gone: compact when they are most of the array.
            let used: u32 = run.pieces.iter().map(|p| p.hi - p.lo).sum();
            if run.units.len() as u32 > 2 * used + 64 {
                let mut units = Vec::with_capacity(used as usize);
                for p in run.pieces.iter_mut() {
                    let at = p.at as usize;
                    let n = (p.hi - p.lo) as usize;
                    let new_at = units.len() as u32;
                    units.extend_from_slice(&run.units[at..at + n]);
                    p.at = new_at;
                }
                run.units = units;
            }
            left += run.pieces.len();
        }
        self.pieces = left;
        self.swept = left;
    }

    /// Drop the queue's holes, renumbering the free pieces' positions (amortised over the
    /// hits that made them).
    #[cold]
    fn pack(&mut self) {
        let (head, split, fresh) = (self.head, self.split, self.fresh.len());
        let BlockCache { queue, slab, holes, cold, .. } = self;
        // The holes before each chunk of the queue (those before a position are then its
        // chunk's count plus the holes of the chunk before it): 4 B a chunk, where a list of
        // the holes' positions took 8 B a hole, up to an eighth of the pool.
        let q = queue.make_contiguous();
        let nil = |c: &[u32]| c.iter().filter(|&&u| u == NIL).count() as u32;
        let chunks: Vec<u32> = q
            .chunks(PACK_CHUNK)
            .scan(0u32, |n, c| {
                let before = *n;
                *n += nil(c);
                Some(before)
            })
            .collect();
        // Holes before stored entry `i`.
        let stored_before = |i: usize| -> u64 {
            if i >= q.len() {
                return u64::from(*holes);
            }
            let c = i / PACK_CHUNK;
            u64::from(chunks[c] + nil(&q[c * PACK_CHUNK..i]))
        };
        // Holes before position `at` (a stored entry's: no hole is among the fresh units).
        let before = |at: u64| -> u64 {
            let i = at.saturating_sub(head) as usize;
            stored_before(if i < split { i } else { i.saturating_sub(fresh) })
        };
        let split_holes = stored_before(split) as usize;
        for run in slab.iter_mut() {
            for p in run.pieces.iter_mut() {
                if p.refs > 0 || p.valid_hi(head) == p.lo {
                    continue;
                }
                // Its cached units are at positions from pos(valid_hi − 1) on, with no hole
                // among them: they move up by the holes before.
                let first = p.pos + u64::from(p.hi - p.valid_hi(head));
                p.pos -= before(first);
            }
        }
        for l in cold.iter_mut() {
            let mut expire = 0;
            for p in l.pieces.iter_mut() {
                if p.held || p.valid_hi(head) == p.lo {
                    continue;
                }
                let first = p.pos + u64::from(p.hi - p.valid_hi(head));
                p.pos -= before(first);
                expire = expire.max(p.pos + u64::from(p.hi - p.lo));
            }
            if l.held == 0 {
                l.expire = expire;
            }
        }
        self.queue.retain(|&u| u != NIL);
        self.split -= split_holes;
        self.holes = 0;
        // Positions move: a lookup's answer, bounded by positions, no longer holds.
        self.epoch += 1;
    }

    /// The free units, head (evicted next) first.
    pub fn free_iter(&self) -> impl Iterator<Item = u32> + '_ {
        let (a, b) = (self.queue.range(..self.split), self.queue.range(self.split..));
        let front = self.front.iter().rev().copied();
        front.chain(a.copied().chain(self.fresh.clone()).chain(b.copied()).filter(|&u| u != NIL))
    }

    /// The free units that were handed out before (the queue less the units never handed
    /// out, all from [`BlockCache::issued`] on), head first.
    pub fn freed_iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.front.iter().rev().copied().chain(self.queue.iter().copied().filter(|&u| u != NIL))
    }

    /// Per unit handed out ([`BlockCache::issued`] of them; the others are free, none
    /// held): how many request tables hold it (an awake cache): 0 in the queue, the piece's
    /// count for a cached held copy, 1 for a held unit caching nothing.
    pub fn ref_counts(&self) -> Vec<u32> {
        let mut refs = vec![1u32; self.issued() as usize];
        for u in self.freed_iter() {
            if let Some(r) = refs.get_mut(u as usize) {
                *r = 0;
            }
        }
        for run in &self.slab {
            for p in run.pieces.iter().filter(|p| p.refs > 0) {
                for &u in &run.units[p.at as usize..(p.at + p.hi - p.lo) as usize] {
                    if let Some(r) = refs.get_mut(u as usize) {
                        *r = p.refs;
                    }
                }
            }
        }
        refs
    }

    /// The unit holding the oldest cached copy at index `i` of the run under `key`.
    #[cfg(test)]
    pub(crate) fn lookup(&self, key: RunKey, i: u32) -> Option<u32> {
        let e = match key {
            RunKey::Shared(h) => self.shared_run(h),
            RunKey::Private(id) => self.private_run(id),
            RunKey::Free => None,
        }? as usize;
        let (k, _) = self.oldest_at(e, i);
        let p = self.slab[e].pieces.get(k)?;
        Some(self.slab[e].units[(p.at + (i - p.lo)) as usize])
    }

    /// Internal consistency of an awake cache: the queue's counts, every free cached copy
    /// at its position in the queue, no unit in two cached copies or both held and free,
    /// the index naming each run. For invariant checks.
    pub fn check(&self) -> Result<(), String> {
        if !self.active {
            return Ok(());
        }
        // Units from `issued` on were never handed out: free, uncached, all in `fresh`.
        let n = self.issued() as usize;
        let live = self.queue.iter().filter(|&&u| u != NIL).count();
        if live + self.front.len() + self.fresh.len() != self.num_free as usize || self.queue.len() != live + self.holes as usize {
            return Err(format!(
                "free queue holds {live} units, {} never handed out and {} holes, its counts say {} and {}",
                self.fresh.len(),
                self.queue.len() - live,
                self.num_free,
                self.holes
            ));
        }
        if self.fresh.end > self.total || self.split > self.queue.len() || (self.fresh.is_empty() && self.split > 0) {
            return Err(format!("free queue's units never handed out {:?} after {} entries", self.fresh, self.split));
        }
        let mut queued = vec![false; n];
        for u in self.freed_iter() {
            match queued.get_mut(u as usize) {
                Some(q) if !*q => *q = true,
                _ => return Err(format!("free queue names unit {u} twice, out of range or never handed out")),
            }
        }
        let mut in_copy = vec![false; n];
        for (e, run) in self.slab.iter().enumerate() {
            let named = match run.key {
                RunKey::Free => {
                    if !run.pieces.is_empty() {
                        return Err(format!("run {e} is free but has pieces"));
                    }
                    continue;
                }
                RunKey::Shared(h) => self.shared.get(&h) == Some(&(e as u32)),
                RunKey::Private(id) => self.private.get(&id) == Some(&(e as u32)),
            };
            if !named {
                return Err(format!("run {e} ({:?}) is not in the index", run.key));
            }
            for (k, p) in run.pieces.iter().enumerate() {
                if p.lo >= p.hi || (p.at + p.hi - p.lo) as usize > run.units.len() || (k > 0 && run.pieces[k - 1].rank > p.rank) {
                    return Err(format!("run {e}: malformed piece {p:?}"));
                }
                for i in p.lo..p.valid_hi(self.head) {
                    let u = run.units[(p.at + i - p.lo) as usize];
                    match in_copy.get_mut(u as usize) {
                        Some(c) if !*c => *c = true,
                        _ => return Err(format!("unit {u} is in two cached copies or out of range")),
                    }
                    if p.refs > 0 && queued[u as usize] {
                        return Err(format!("unit {u} is held (run {e}) and free"));
                    }
                    if p.refs == 0 {
                        let at = p.pos + u64::from(p.hi - 1 - i);
                        let there = at.checked_sub(self.head).and_then(|q| self.stored(q as usize)).and_then(|q| self.queue.get(q));
                        if there != Some(&u) {
                            return Err(format!("free unit {u} of run {e} is not at its queue position {at}"));
                        }
                    }
                }
            }
        }
        for (li, l) in self.cold.iter().enumerate() {
            if l.pieces.is_empty() {
                continue;
            }
            if self.cold_of.get(&l.req) != Some(&(li as u32)) {
                return Err(format!("cold list {li} of request {} is not in the index", l.req));
            }
            if l.pieces.iter().filter(|p| p.held).count() != l.held as usize {
                return Err(format!("cold list {li} of request {} miscounts its held pieces", l.req));
            }
            for p in &l.pieces {
                if p.lo >= p.hi || (p.held && (p.at + p.hi - p.lo) as usize > l.units.len()) {
                    return Err(format!("cold list {li}: malformed piece {p:?}"));
                }
                for i in p.lo..p.valid_hi(self.head) {
                    let u = if p.held {
                        let Some(&u) = l.units.get((p.at + i - p.lo) as usize) else {
                            return Err(format!("cold list {li}: held piece {p:?} past its units"));
                        };
                        if queued.get(u as usize).copied().unwrap_or(true) {
                            return Err(format!("unit {u} is held (cold list {li}) and free, or out of range"));
                        }
                        u
                    } else {
                        // A free piece's units are where its positions say.
                        let at = p.pos + u64::from(p.hi - 1 - i);
                        match at.checked_sub(self.head).and_then(|q| self.stored(q as usize)).and_then(|q| self.queue.get(q)) {
                            Some(&u) if u != NIL => u,
                            _ => return Err(format!("a free unit of cold list {li} is not at its queue position {at}")),
                        }
                    };
                    match in_copy.get_mut(u as usize) {
                        Some(c) if !*c => *c = true,
                        _ => return Err(format!("unit {u} is in two cached copies or out of range (cold list {li})")),
                    }
                }
            }
        }
        if self.cold_of.len() != self.cold.iter().filter(|l| !l.pieces.is_empty()).count() {
            return Err("the cold lists and their index disagree".to_string());
        }
        let free_runs = self.slab.iter().filter(|r| r.key == RunKey::Free).count();
        if free_runs != self.free_slab.len() || self.shared.len() + self.private.len() + free_runs != self.slab.len() {
            return Err("the run index and the slab disagree".to_string());
        }
        Ok(())
    }
}
