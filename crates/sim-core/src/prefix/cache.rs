//! The cache side of one replica's KV pool: reference counts, the keys units are cached
//! under, vLLM's free queue, and the indexes from keys to units (see [`super`]).

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

use super::{private_key, NIL, RUN, TOP};

/// A hasher for keys that are already hashes (or private keys): one multiply-xorshift
/// spreads the bits the map indexes by. Deterministic; the map is only ever looked up,
/// never iterated, so its order cannot reach a result.
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
}

/// One unit's cache state: 16 bytes, all zero for a unit never cached (so the array is
/// handed out as zeroed pages, touched only as units are used). Every allocation and
/// release of a cached unit reads and writes it, and after the free queue's full cycle
/// through a large pool it is never in a CPU cache, so its size is memory traffic.
#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    /// The key it is cached under, 0 when it holds no cached block.
    key: u64,
    /// Its position in the free queue (counted from the queue's first entry ever, modulo
    /// 2³²: the queue never holds 2³² entries, so two positions in it never agree), while
    /// it is there: an entry of `queue` naming it is live only at this position.
    qpos: u32,
    /// `REFS`: how many request tables hold it (vLLM's `ref_cnt`), while it is cached
    /// (`key` not 0; a unit caching nothing is held by one table or free, see
    /// `BlockCache::blanks`); `FIRST`: the map's entry for `key` names this unit (the
    /// oldest copy); `DUP`: a later copy is cached under the same key (in `dups`).
    meta: u32,
}

/// `Slot::meta`'s reference count (at most `scheduler.max_num_seqs` ≤ 2²⁰ tables).
const REFS: u32 = (1 << 30) - 1;
/// `Slot::meta`: the oldest unit cached under its key.
const FIRST: u32 = 1 << 30;
/// `Slot::meta`: `dups` names the next unit cached under its key.
const DUP: u32 = 1 << 31;

impl Slot {
    #[inline]
    fn ref_cnt(&self) -> u32 {
        self.meta & REFS
    }
    #[inline]
    fn first(&self) -> bool {
        self.meta & FIRST != 0
    }
    /// Is it the free queue's entry at position `at`? (Queued cached units have no holder.)
    #[inline]
    fn queued_at(&self, at: u64) -> bool {
        self.key != 0 && self.meta & REFS == 0 && self.qpos == at as u32
    }
}

/// Per-unit cache state: `slots`, and the duplicate chains (rare) apart.
#[derive(Debug, Clone, Default)]
struct Units {
    slots: Vec<Slot>,
    /// Per unit with `DUP` set: the next unit cached under the same key (registration
    /// order). Read only through `DUP`, so never initialised.
    dups: Vec<u32>,
}

impl Units {
    /// The next unit cached under `u`'s key, or NIL.
    #[inline]
    fn dup(&self, u: u32) -> u32 {
        if self.slots[u as usize].meta & DUP != 0 {
            self.dups[u as usize]
        } else {
            NIL
        }
    }

    #[inline]
    fn set_dup(&mut self, u: u32, next: u32) {
        let s = &mut self.slots[u as usize];
        if next == NIL {
            s.meta &= !DUP;
        } else {
            s.meta |= DUP;
            self.dups[u as usize] = next;
        }
    }

    /// Cache blank unit `u` under `key`, after `head` (the first unit cached under it,
    /// NIL: none) and its copies; held by the one table that held it blank.
    #[inline]
    fn cache(&mut self, u: u32, key: u64, head: u32) {
        if head != NIL {
            let mut last = head;
            loop {
                let next = self.dup(last);
                if next == NIL {
                    break;
                }
                last = next;
            }
            self.set_dup(last, u);
        }
        let s = &mut self.slots[u as usize];
        s.key = key;
        s.meta = 1 | if head == NIL { FIRST } else { 0 };
    }

    /// Read the slots of `units` (NIL skipped) before working on them one by one: they
    /// are seldom in a CPU cache (the free queue cycles through the whole pool), and these
    /// independent loads are in flight together, where the work's own loads, each behind
    /// the last one's branch, mostly wait one at a time.
    #[inline]
    fn warm(&self, units: impl Iterator<Item = u32>) {
        let mut acc = 0u64;
        for u in units {
            if let Some(s) = self.slots.get(u as usize) {
                acc ^= s.key;
            }
        }
        std::hint::black_box(acc);
    }

    /// Take `u` out of the chain that starts at `head` (it is not the first).
    fn unchain(&mut self, head: u32, u: u32) {
        let after = self.dup(u);
        let mut x = head;
        loop {
            let next = self.dup(x);
            if next == u || next == NIL {
                break;
            }
            x = next;
        }
        self.set_dup(x, after);
    }
}

/// The cache side of one replica's pool.
///
/// It starts *dormant*: until the first block is cached, no unit holds cached content, so
/// which free unit an allocation takes cannot change any result, and the pool keeps its
/// plain free stack (a workload of unique prompts that never preempts never leaves this
/// state and pays nothing). The first registration wakes it: the free units, all equally
/// empty, become the free queue, every held unit gets a reference count of one (nothing
/// can be shared before something is cached), and from then on the queue follows vLLM's
/// order exactly.
#[derive(Debug, Clone)]
pub struct BlockCache {
    /// Units in the pool.
    total: u32,
    /// Awake: `units` and the queue are live.
    pub active: bool,
    units: Units,
    /// The free queue, head = evicted next, as an array: a unit taken out of the middle
    /// (a hit on a free unit) leaves a stale entry behind, skipped when it reaches the head
    /// (its slot's `qpos` no longer names that position). The same order as a linked list,
    /// but popping a run of units reads their ids in sequence instead of chasing one link
    /// per unit through memory (the simulator's hottest loop on long prompts).
    queue: VecDeque<u32>,
    /// Entries ever popped from the queue's head: `queue[i]` is at position `popped + i`.
    popped: u64,
    /// Stale entries in `queue`.
    stale: u32,
    /// Units in the free queue (free, cached or not).
    pub num_free: u32,
    /// The free units that cache nothing (*blank*), next handed out last. Their places in
    /// the queue hold `NIL`: a blank unit's position in vLLM's queue matters (it delays
    /// the eviction of the cached units behind it), which blank unit it is does not (it
    /// holds nothing a lookup could find), so a `NIL` entry reaching the head hands out
    /// the most recently freed blank unit. Freeing or taking one touches no per-unit state
    /// but a bit (a request's private tail, about half the blocks of a long prompt): blank
    /// units are held by one table (nothing is shared before it is cached).
    blanks: Vec<u32>,
    /// One bit per unit: a free blank unit (in `blanks`).
    blank_bits: Vec<u64>,
    /// Counts changes of what is cached (registrations, evictions): a lookup's answer
    /// cannot change while it stays put.
    pub epoch: u64,
    /// Shared key of a single block (one that holds pieces of two token streams) → the
    /// first unit cached under it.
    map: HashMap<u64, u32, BuildHasherDefault<KeyHasher>>,
    /// Runs of shared blocks, each inside one stream piece (a 512-token `hash_id`, a
    /// system prompt): run key (the hash of the run's first block) → index into `slab`.
    /// One entry for a whole run instead of one per block: a run's blocks are cached,
    /// looked up and (mostly) evicted together, block by block in order. An entry whose
    /// slab entry no longer carries its key is stale (the run emptied: its last unit was
    /// evicted); it is left in place rather than removed then (the removal's probe of a
    /// cold bucket was half the cost of evicting a run's last unit), overwritten when the
    /// key is cached again, and swept out when stale entries outnumber live ones.
    runs: HashMap<u64, u32, BuildHasherDefault<KeyHasher>>,
    /// Stale entries in `runs`.
    stale_runs: usize,
    slab: Vec<Run>,
    /// Free entries of `slab` (key 0).
    free_slab: Vec<u32>,
    /// Private keys, by request id: per unit index of the request's table, the first unit
    /// cached under that key (NIL: none). Arrays instead of map entries: a request
    /// registers its whole table at once and looks it up in order. Dropped when the
    /// request is done ([`BlockCache::forget`]); its units keep their keys until reused,
    /// unreachable (nobody else can look them up).
    ghosts: HashMap<u32, Ghost, BuildHasherDefault<KeyHasher>>,
}

/// A run of shared blocks inside one stream piece (see `BlockCache::runs`).
#[derive(Debug, Clone, Default)]
struct Run {
    /// Its key in `runs` (0 while the entry is free: no run key is 0).
    key: u64,
    /// Per unit index in the run: the first unit cached there (NIL: none).
    heads: Vec<u32>,
    /// Units cached in the run (copies included): at zero the entry goes.
    live: u32,
}

/// A run unit's key: its slab entry and unit index.
#[inline]
fn run_key_of(slab: u32, idx: u32) -> u64 {
    RUN | (u64::from(slab) << 24) | u64::from(idx)
}

/// A run unit's slab entry and index.
#[inline]
fn split_run(key: u64) -> (usize, usize) {
    (((key & !RUN) >> 24) as usize, (key & 0xFF_FFFF) as usize)
}

/// One request's private index (see `BlockCache::ghosts`).
#[derive(Debug, Clone, Default)]
struct Ghost {
    /// Per unit index: the first unit cached under that private key (NIL: none).
    heads: Vec<u32>,
    /// The first private unit index (the request's shared blocks come before).
    base: usize,
    /// How many indices from `base` on are cached without a gap: a lookup hits those.
    valid: usize,
}

impl Ghost {
    /// Make `u` (NIL: nobody) the first unit cached at index `i`.
    fn set(&mut self, i: usize, u: u32) {
        if i >= self.heads.len() {
            if u == NIL {
                return;
            }
            self.heads.resize(i + 1, NIL);
        }
        self.heads[i] = u;
        if i < self.base {
            return;
        }
        let r = i - self.base;
        if u == NIL {
            self.valid = self.valid.min(r);
        } else if r == self.valid {
            while self.base + self.valid < self.heads.len() && self.heads[self.base + self.valid] != NIL {
                self.valid += 1;
            }
        }
    }
}

/// A private key's request id and unit index.
#[inline]
fn split_private(key: u64) -> (u32, usize) {
    ((key >> 24) as u32, (key & 0xFF_FFFF) as usize)
}

impl BlockCache {
    /// A dormant cache for a pool of `total` units.
    pub fn new(total: u32) -> BlockCache {
        BlockCache {
            total,
            active: false,
            units: Units::default(),
            queue: VecDeque::new(),
            popped: 0,
            stale: 0,
            num_free: 0,
            blanks: Vec::new(),
            blank_bits: Vec::new(),
            epoch: 0,
            map: HashMap::default(),
            runs: HashMap::default(),
            stale_runs: 0,
            slab: Vec::new(),
            free_slab: Vec::new(),
            ghosts: HashMap::default(),
        }
    }

    /// Wake up with `free` (the pool's free stack, drained) as the free queue, next
    /// allocated first; every other unit is held by one request. Nothing is cached yet:
    /// all of them are blank.
    pub fn activate(&mut self, free: &mut Vec<u32>) {
        // Zeroed: the pages are mapped as units are first used.
        self.units = Units { slots: vec![Slot::default(); self.total as usize], dups: vec![0; self.total as usize] };
        self.blank_bits = vec![0; (self.total as usize).div_ceil(64)];
        // Room for every unit and the most stale entries kept: the queue never grows.
        self.queue = VecDeque::with_capacity(self.total as usize + self.max_stale() as usize + 1);
        self.queue.extend(std::iter::repeat_n(NIL, free.len()));
        self.num_free = free.len() as u32;
        for &u in free.iter() {
            self.blank_bits[u as usize / 64] |= 1 << (u % 64);
        }
        // The stack's top, handed out next, stays on top.
        self.blanks = std::mem::take(free);
        self.active = true;
        self.epoch += 1;
    }

    /// Tests only: count the queue's positions from `n` on (their wrap at 2³² reached).
    #[cfg(test)]
    pub(crate) fn skip_positions(&mut self, n: u64) {
        self.popped += n;
    }

    /// Is `u` a free blank unit?
    #[inline]
    fn is_free_blank(&self, u: u32) -> bool {
        self.blank_bits.get(u as usize / 64).is_some_and(|w| w >> (u % 64) & 1 != 0)
    }

    /// Free blank unit `u` (held by one table, caching nothing): a `NIL` entry at the
    /// queue's tail.
    #[inline]
    fn free_blank(&mut self, u: u32) {
        debug_assert!(self.units.slots[u as usize].key == 0 && !self.is_free_blank(u));
        self.blank_bits[u as usize / 64] |= 1 << (u % 64);
        self.blanks.push(u);
        self.queue.push_back(NIL);
        self.num_free += 1;
    }

    /// Append `u` at the tail of the free queue (`FreeKVCacheBlockQueue.append`).
    #[inline]
    fn push_free(&mut self, u: u32) {
        let s = &mut self.units.slots[u as usize];
        debug_assert!(s.key != 0 && s.ref_cnt() == 0);
        s.qpos = (self.popped + self.queue.len() as u64) as u32;
        self.queue.push_back(u);
        self.num_free += 1;
    }

    /// Take `u` out of the free queue (`FreeKVCacheBlockQueue.remove`; the caller gives it
    /// a holder): its entry goes stale; when most entries are, the live ones are packed
    /// (amortised O(1)).
    #[inline]
    fn unlink(&mut self) {
        self.num_free -= 1;
        self.stale += 1;
        if self.stale > self.max_stale() {
            self.pack();
        }
    }

    /// Stale entries kept before they are packed away: an eighth of the pool (packing
    /// costs a pass over the queue, paid for by that many removals), at least 1024.
    #[inline]
    fn max_stale(&self) -> u32 {
        (self.total / 8).max(1024)
    }

    /// Drop the stale entries of the queue, renumbering the live ones' positions.
    #[cold]
    fn pack(&mut self) {
        let BlockCache { queue, units, popped, .. } = self;
        let slots = &mut units.slots;
        let mut at = *popped;
        queue.retain(|&u| {
            let live = u == NIL || slots[u as usize].queued_at(at);
            at += 1;
            live
        });
        for (i, &u) in queue.iter().enumerate() {
            if u != NIL {
                slots[u as usize].qpos = (*popped + i as u64) as u32;
            }
        }
        self.stale = 0;
    }

    /// A new unit for a request: the head of the free queue, its cached block evicted
    /// (`BlockPool.get_new_blocks` with `_maybe_evict_cached_block`). The caller has
    /// checked that a unit is free.
    #[inline]
    pub fn pop_free(&mut self) -> u32 {
        loop {
            let u = self.queue.pop_front().expect("pop_free on an empty free queue");
            let at = self.popped;
            self.popped += 1;
            if u == NIL {
                // A blank unit's place: the most recently freed one.
                let b = self.blanks.pop().expect("a blank unit for each NIL entry");
                self.blank_bits[b as usize / 64] &= !(1 << (b % 64));
                self.num_free -= 1;
                return b;
            }
            let s = &mut self.units.slots[u as usize];
            if !s.queued_at(at) {
                self.stale -= 1;
                continue; // taken out of the middle since
            }
            self.num_free -= 1;
            self.evict(u);
            return u;
        }
    }

    /// A request hits cached unit `u`: one more holder, out of the free queue if it was
    /// there (`BlockPool.touch`).
    #[inline]
    pub fn touch(&mut self, u: u32) {
        debug_assert!(self.units.slots[u as usize].key != 0, "a hit is on a cached unit");
        let s = &mut self.units.slots[u as usize];
        s.meta += 1;
        if s.ref_cnt() == 1 {
            // Held now (so its entry is stale) before `unlink` may pack the queue.
            self.unlink();
        }
    }

    /// Append `need` new units to `table` ([`BlockCache::pop_free`] each, the queue's
    /// head first). The caller has checked that they are free.
    pub fn pop_into(&mut self, table: &mut Vec<u32>, need: usize) {
        table.reserve(need);
        self.units.warm(self.queue.range(..need.min(self.queue.len())).copied());
        for _ in 0..need {
            let u = self.pop_free();
            table.push(u);
        }
    }

    /// Every unit of `table` lets go of it, last first ([`BlockCache::decref`] each).
    /// Its units from index `blank_from` on are known to cache nothing (so to be held by
    /// this table alone): they are freed without reading their state.
    pub fn release_all(&mut self, table: &mut Vec<u32>, blank_from: usize) {
        let cut = blank_from.min(table.len());
        self.units.warm(table[..cut].iter().copied());
        for &u in table[cut..].iter().rev() {
            self.free_blank(u);
        }
        for &u in table[..cut].iter().rev() {
            self.decref(u);
        }
        table.clear();
    }

    /// One holder lets `u` go; at zero it joins the tail of the free queue, still cached
    /// (`BlockPool.free_blocks`).
    #[inline]
    pub fn decref(&mut self, u: u32) {
        let s = &mut self.units.slots[u as usize];
        if s.key == 0 {
            self.free_blank(u);
            return;
        }
        s.meta -= 1;
        if s.ref_cnt() == 0 {
            self.push_free(u);
        }
    }

    /// The first unit cached under `key` (`BlockHashToBlockMap.get_one_block`): a single
    /// block's hash, a private key or a run unit's key.
    #[inline]
    pub fn lookup(&self, key: u64) -> Option<u32> {
        let u = if key & TOP != 0 {
            let (id, i) = split_private(key);
            self.ghosts.get(&id).and_then(|g| g.heads.get(i)).copied()
        } else if key & RUN != 0 {
            let (e, i) = split_run(key);
            self.slab.get(e).and_then(|r| r.heads.get(i)).copied()
        } else {
            self.map.get(&key).copied()
        };
        u.filter(|&u| u != NIL)
    }

    /// The run `key`'s first unit cached at each index (NIL: none there; empty: no run).
    #[inline]
    pub fn run(&self, key: u64) -> &[u32] {
        match self.runs.get(&key) {
            Some(&e) if self.slab[e as usize].key == key => self.slab[e as usize].heads.as_slice(),
            _ => &[],
        }
    }

    /// Cache the not yet cached units of `units` in run `key`, the first at unit index
    /// `from` (one map operation for all; duplicates after the copies already there).
    pub fn register_run(&mut self, key: u64, from: u32, units: &[u32]) {
        use std::collections::hash_map::Entry;
        debug_assert!(key != 0);
        let BlockCache { runs, slab, free_slab, units: us, epoch, stale_runs, .. } = self;
        let new_entry = |slab: &mut Vec<Run>, free_slab: &mut Vec<u32>| match free_slab.pop() {
            Some(e) => {
                slab[e as usize].key = key;
                e
            }
            None => {
                slab.push(Run { key, ..Run::default() });
                slab.len() as u32 - 1
            }
        };
        let e = match runs.entry(key) {
            Entry::Occupied(mut o) => {
                let e = *o.get();
                if slab[e as usize].key == key {
                    e
                } else {
                    // A stale entry: the run emptied since.
                    *stale_runs -= 1;
                    let e = new_entry(slab, free_slab);
                    o.insert(e);
                    e
                }
            }
            Entry::Vacant(v) => *v.insert(new_entry(slab, free_slab)),
        };
        let run = &mut slab[e as usize];
        let end = from as usize + units.len();
        if run.heads.len() < end {
            run.heads.resize(end, NIL);
        }
        for (k, &u) in units.iter().enumerate() {
            if us.slots[u as usize].key != 0 {
                continue; // a block it hit: cached already
            }
            *epoch += 1;
            let i = from as usize + k;
            let head = run.heads[i];
            if head == NIL {
                run.heads[i] = u;
            }
            run.live += 1;
            us.cache(u, run_key_of(e, i as u32), head);
        }
    }

    /// Request `id`'s private blocks cached without a gap: the first private unit index,
    /// and the first unit cached under each index from there on.
    #[inline]
    pub fn ghost(&self, id: u32) -> (usize, &[u32]) {
        self.ghosts.get(&id).map_or((0, &[][..]), |g| (g.base, &g.heads[g.base..g.base + g.valid]))
    }

    /// Make `u` (NIL: nobody) the first unit cached under private key `key`, in the index
    /// of a request that is not done (an eviction must not bring one back).
    fn set_private_head(&mut self, key: u64, u: u32) {
        let (id, i) = split_private(key);
        if let Some(g) = self.ghosts.get_mut(&id) {
            g.set(i, u);
        }
    }

    /// Cache unit `u` under shared key `key`, after any unit already cached under it (vLLM
    /// keeps duplicates; a lookup returns the oldest). The cache must be awake.
    pub fn register(&mut self, u: u32, key: u64) {
        use std::collections::hash_map::Entry;
        self.epoch += 1;
        debug_assert!(self.active && key != 0 && key & (TOP | RUN) == 0 && self.units.slots[u as usize].key == 0);
        let head = match self.map.entry(key) {
            Entry::Vacant(v) => {
                v.insert(u);
                NIL
            }
            Entry::Occupied(o) => *o.get(),
        };
        self.units.cache(u, key, head);
    }

    /// Cache the not yet cached units of `units` under request `id`'s private keys, the
    /// first at unit index `from` (the same as [`BlockCache::register`] on each, with the
    /// request's index fetched once).
    pub fn register_private(&mut self, id: u32, from: u32, units: &[u32]) {
        let BlockCache { ghosts, units: us, epoch, .. } = self;
        let g = ghosts.entry(id).or_insert_with(|| Ghost { base: from as usize, ..Ghost::default() });
        for (k, &u) in units.iter().enumerate() {
            let i = from as usize + k;
            if us.slots[u as usize].key != 0 {
                continue; // a block it hit: cached already
            }
            *epoch += 1;
            let head = g.heads.get(i).copied().unwrap_or(NIL);
            if head == NIL {
                g.set(i, u);
            }
            us.cache(u, private_key(id, i as u32), head);
        }
    }

    /// Forget queued unit `u`'s cached block: it is being reused, held by one table.
    fn evict(&mut self, u: u32) {
        self.epoch += 1;
        let Slot { key: k, meta, .. } = self.units.slots[u as usize];
        let after = self.units.dup(u);
        let first = meta & FIRST != 0;
        if k & RUN != 0 && k & TOP == 0 {
            self.evict_run_unit(u, k, after, first);
        } else if first {
            // The common case: one map operation.
            if k & TOP != 0 {
                self.set_private_head(k, after);
            } else if after == NIL {
                self.map.remove(&k);
            } else {
                self.map.insert(k, after);
            }
            // (A done request's private key is in no index, and its chains are not kept:
            // a copy evicted from the middle of one is not unchained, so the link to it
            // may name a unit reused since, cached under another key — not its heir.)
            if after != NIL && self.units.slots[after as usize].key == k {
                self.units.slots[after as usize].meta |= FIRST;
            }
        } else if let Some(x) = self.lookup(k) {
            self.units.unchain(x, u);
        }
        // Blank now, and held by the table it goes to.
        self.units.slots[u as usize] = Slot { key: 0, qpos: 0, meta: 1 };
    }

    /// [`BlockCache::evict`] for a unit of a run: no map operation unless the run empties.
    fn evict_run_unit(&mut self, u: u32, k: u64, after: u32, first: bool) {
        let (e, i) = split_run(k);
        let run = &mut self.slab[e];
        if first {
            run.heads[i] = after;
            if after != NIL {
                self.units.slots[after as usize].meta |= FIRST;
            }
        } else {
            self.units.unchain(run.heads[i], u);
        }
        run.live -= 1;
        if run.live == 0 {
            // Its entry in `runs` goes stale (see there).
            run.key = 0;
            run.heads.clear();
            self.free_slab.push(e as u32);
            self.stale_runs += 1;
            // (Tests sweep early, so that the tiny pools they use exercise it.)
            if self.stale_runs > (self.runs.len() - self.stale_runs).max(if cfg!(test) { 2 } else { 1024 }) {
                self.sweep_runs();
            }
        }
    }

    /// Drop the stale entries of `runs` (amortised over as many evictions).
    #[cold]
    fn sweep_runs(&mut self) {
        let slab = &self.slab;
        self.runs.retain(|&k, &mut e| slab[e as usize].key == k);
        self.stale_runs = 0;
    }

    /// Request `id` is done: nobody will look up its private keys again.
    pub fn forget(&mut self, id: u32) {
        self.ghosts.remove(&id);
    }

    /// The key unit `u` is cached under (0: none).
    #[inline]
    pub fn key_of(&self, u: u32) -> u64 {
        self.units.slots.get(u as usize).map_or(0, |s| s.key)
    }

    /// How many request tables hold unit `u` (awake cache).
    #[inline]
    pub fn ref_count(&self, u: u32) -> u32 {
        let s = &self.units.slots[u as usize];
        if s.key != 0 {
            s.ref_cnt()
        } else {
            u32::from(!self.is_free_blank(u))
        }
    }

    /// The free units of an awake cache, head (evicted next) first.
    pub fn free_iter(&self) -> impl Iterator<Item = u32> + '_ {
        // A dormant cache's queue is empty. The k-th `NIL` entry from the head names the
        // blank unit it would hand out if the queue were emptied now.
        let mut blank = self.blanks.len();
        self.queue.iter().enumerate().filter_map(move |(i, &u)| {
            if u == NIL {
                blank = blank.checked_sub(1)?;
                return self.blanks.get(blank).copied();
            }
            self.units.slots[u as usize].queued_at(self.popped + i as u64).then_some(u)
        })
    }

    /// Internal consistency of an awake cache: the free queue's links and length,
    /// reference counts of zero exactly on the queue, every cached unit reachable from its
    /// key's entry and every entry's units cached under that key. For invariant checks.
    pub fn check(&self) -> Result<(), String> {
        if !self.active {
            return Ok(());
        }
        let n = self.units.slots.len();
        let mut on_queue = vec![false; n];
        let mut count = 0u32;
        for u in self.free_iter() {
            if (u as usize) >= n || on_queue[u as usize] {
                return Err(format!("free queue revisits unit {u}"));
            }
            on_queue[u as usize] = true;
            count += 1;
        }
        if count != self.num_free || self.queue.len() as u64 != u64::from(count) + u64::from(self.stale) {
            return Err(format!(
                "free queue holds {count} units and {} stale entries, its counts say {} and {}",
                self.queue.len() as u64 - u64::from(count),
                self.num_free,
                self.stale
            ));
        }
        let nil = self.queue.iter().filter(|&&u| u == NIL).count();
        let bits: u32 = self.blank_bits.iter().map(|w| w.count_ones()).sum();
        if nil != self.blanks.len() || bits as usize != nil {
            return Err(format!("{nil} blank places in the free queue, {} blank units, {bits} marked", self.blanks.len()));
        }
        if let Some(&u) = self.blanks.iter().find(|&&u| self.units.slots[u as usize].key != 0) {
            return Err(format!("free blank unit {u} is cached"));
        }
        for (u, &q) in on_queue.iter().enumerate() {
            let rc = self.ref_count(u as u32);
            if q != (rc == 0) {
                return Err(format!("unit {u}: reference count {rc} but {} the free queue", if q { "on" } else { "off" }));
            }
        }
        let mut live = vec![0u32; self.slab.len()];
        for u in 0..n as u32 {
            let k = self.units.slots[u as usize].key;
            if k == 0 {
                continue;
            }
            if k & RUN != 0 && k & TOP == 0 {
                let (e, _) = split_run(k);
                match (live.get_mut(e), self.slab.get(e)) {
                    (Some(c), Some(r)) if r.key != 0 && self.runs.get(&r.key) == Some(&(e as u32)) => *c += 1,
                    _ => return Err(format!("unit {u} is cached in a run the index does not hold")),
                }
            }
            let orphan = k & TOP != 0 && !self.ghosts.contains_key(&split_private(k).0);
            if orphan {
                continue; // its request is done: unreachable, reused in due course
            }
            let Some(mut x) = self.lookup(k) else {
                return Err(format!("unit {u} is cached under a key the map does not hold"));
            };
            if self.units.slots[u as usize].first() != (x == u) {
                return Err(format!("unit {u}: its oldest-copy flag disagrees with the map"));
            }
            let mut steps = 0;
            while x != u {
                if x == NIL || steps > n {
                    return Err(format!("unit {u} is not in its key's chain"));
                }
                if self.units.slots[x as usize].key != k {
                    return Err(format!("unit {x} is in the chain of a key it is not cached under"));
                }
                x = self.units.dup(x);
                steps += 1;
            }
        }
        for (e, r) in self.slab.iter().enumerate() {
            if r.key != 0 && self.runs.get(&r.key) == Some(&(e as u32)) && r.live != live[e] {
                return Err(format!("run {e} counts {} cached units, {} are", r.live, live[e]));
            }
        }
        let stale = self.runs.iter().filter(|&(&k, &e)| !matches!(self.slab.get(e as usize), Some(r) if r.key == k)).count();
        if stale != self.stale_runs {
            return Err(format!("{stale} stale run entries, {} counted", self.stale_runs));
        }
        Ok(())
    }
}
