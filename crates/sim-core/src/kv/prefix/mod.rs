//! Automatic prefix caching (APC) as vLLM v1 does it (`vllm/v1/core/block_pool.py`,
//! `kv_cache_manager.py`, `single_type_kv_cache_manager.py`, `kv_cache_utils.py`, the era
//! of v0.15.1, whose V1 engine the real runs we compare with used; request for request
//! equal to vllm 0.33.0's scheduler on the workloads of `tests/vllm_reference.rs`).
//!
//! Two halves:
//! - [`BlockCache`], the cache side of one replica's KV pool ([`crate::kv::KvPool`] holds
//!   it when caching is on): the free units in vLLM's `FreeKVCacheBlockQueue` order
//!   (allocation takes the head, a freed unit goes to the tail if it holds a hash and to
//!   the head if not, a hit takes a free unit out of the middle), reference counts, and an index from keys to the units cached
//!   under them, oldest first — all kept by *pieces* (consecutive blocks of one run
//!   registered together) rather than by unit. These match `BlockPool` (`get_new_blocks`
//!   with `_maybe_evict_cached_block`, `touch`, `free_blocks`, `cache_full_blocks`) and
//!   `FreeKVCacheBlockQueue`.
//! - [`Apc`], the engine-wide side: which tokens of which request are identical (the
//!   workload's [`Segment`]s), the block hashes derived from them, and per request what
//!   it has cached; `lookup` (vLLM's `get_computed_blocks`), `take_hits` + `cache_shared`
//!   (the hit and caching halves of `allocate_slots`) and `release` (`free`).
//!
//! **Which blocks can ever be hit.** A block's hash chains its parent's hash and its
//! tokens' identity, so another request can hit a block of request X only if its own token
//! stream begins with the same tokens through that block's end. So X's leading blocks
//! inside its longest common prefix with any other request (its prompt's segments, then,
//! when they cover the prompt, its output if a later turn repeats it) are *shared*; the
//! blocks after them can only be hit by X itself: when X is preempted (or handed off) and
//! admitted again. Requests whose streams begin with the same piece form a *family*; the
//! longest common prefix is found by sorting a family's streams (a neighbour holds it).
//!
//! vLLM hashes and caches every full block as soon as it is allocated for a step that
//! fills it (`cache_blocks` in `allocate_slots`, so a request admitted later in the same
//! step hits it). o1sim does exactly that for shared blocks. A private block is cached
//! (in X's own run, by its unit index in X's table) only when X frees it without
//! finishing: nobody can look it up before, and a finished request never looks again; among several cached copies of one block a lookup
//! returns the first cached, and X caches its copies in the order vLLM would have. And a
//! pool's cache stays dormant (its plain free stack, no reference counts) until something
//! is cached: before that every free unit is alike, so which one an allocation takes
//! cannot change a result. So a workload of unique prompts that never preempts hashes
//! nothing and pays nothing. A property test checks all of this against the algorithm
//! taken literally (every block hashed and cached as scheduled, the queue from the start):
//! the same results, byte for byte.
//!
//! A small family's shared blocks are registered *cold* on a replica until one of them is
//! hit there (see [`cache`]): most shared blocks are never hit (another replica serves the
//! follow-up, or it comes after the eviction), and an append to the request's own list
//! costs far less than the index.
//!
//! Shared keys are 64-bit hashes of a block's content and its prefix (a run's first
//! block's, the run's units by index after it). Two different shared blocks collide with
//! probability about n²/2⁶² for n distinct blocks (vLLM takes the same kind of risk with
//! its 64-bit builtin hash; it now defaults to SHA-256).

mod cache;

use crate::kv::offload::{Offload, TierHit, PRIVATE};
use crate::kv::KvPool;
use crate::request::Req;
use crate::workload::{output_key, RequestSpec, Segment};

pub use cache::{BlockCache, KeyHasher, RunKey, COLD};
use cache::Seg;

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

/// The bits a content hash keeps clear (the literal test's unique-token stream keys set
/// one of them).
const CLEAR: u64 = 0b11 << 62;

/// What a request looked up (vLLM's `get_computed_blocks`): tokens hit and units hit
/// (left in [`Apc::hits`]; [`Apc::evictable`] counts the free ones), the last `private` of
/// them the request's own private blocks.
#[derive(Debug, Clone, Copy, Default)]
pub struct Hit {
    pub tokens: u32,
    pub units: u32,
    pub private: u32,
}

/// A range of a request's table holding cached copies: (run, first index in the run,
/// first position in the table, length).
type Held = (u32, u32, u32, u32);

/// Per-request state of a workload whose prompts share tokens.
#[derive(Debug, Clone, Default)]
struct ApcReq {
    /// Leading blocks made only of tokens other requests may hold too (`u32::MAX`: the
    /// whole prompt is, and so are its output blocks, which a later turn repeats).
    share_blocks: u32,
    /// Leading shared blocks registered for the request's current table.
    cached_shared: u32,
    /// The leading shared blocks hashed so far (memo, dropped when done), as runs (first
    /// block, blocks, its hash): the whole blocks of one stream piece are one run, cached
    /// under its first block's hash by unit index; a block holding pieces of two streams
    /// is a run of its own.
    runs: Vec<(u32, u32, u64)>,
    /// Tokens hit at the first admission (vLLM's `num_cached_tokens`).
    cached_tokens: u32,
}

/// What a lookup was asked: (request, replica, cache epoch, tokens, private).
type Asked = (u32, u32, u64, u32, bool);

/// The engine-wide side of prefix caching.
#[derive(Debug, Clone, Default)]
pub struct Apc {
    /// Prefix caching is on (`scheduler.enable_prefix_caching`).
    pub on: bool,
    /// Some request has shared blocks: they are hashed and registered as scheduled.
    pub shared: bool,
    segments: Vec<Segment>,
    /// Per request id: its range in `segments` (empty when `shared` is false).
    segs: Vec<(u32, u32)>,
    /// Per request id (empty when `shared` is false).
    per: Vec<ApcReq>,
    /// Per request holding cached copies: where in its table (in table order; its units
    /// after the last range cache nothing). Emptied when it frees its table.
    held: HashMap<u32, Vec<Held>, BuildHasherDefault<KeyHasher>>,
    /// Emptied `held` lists, for reuse.
    spare: Vec<Vec<Held>>,
    /// The units of the last lookup.
    pub hits: Vec<u32>,
    /// The last lookup's ranges (run, first index, length), its private ones last.
    hit_segs: Vec<Seg>,
    /// Scratch: the token-stream pieces of the request being hashed.
    pieces: Vec<(u64, u64, u64)>,
    /// Tests only: vLLM's algorithm taken literally (every full block hashed, unique tokens
    /// included, and cached as scheduled), the reference the shortcuts are checked against.
    literal: bool,
    /// Per request that cached private blocks: the replicas (pools) holding them, to
    /// drop their index there when it is done.
    homes: HashMap<u32, Vec<u32>, BuildHasherDefault<KeyHasher>>,
    /// The last lookup (request, replica, cache epoch, tokens, private), whose units are
    /// in `hits`, and the queue position the answer holds until (its earliest free unit's;
    /// the queue's tail then, if it names a held unit): a request waiting at the head of a
    /// full pool asks again every step, and the answer cannot change until something is
    /// cached, the queue is packed, or the head passes that position.
    memo: Option<(Asked, u64, Hit)>,
    /// The precise prefix router's KV events (only with `precise_prefix`): per replica,
    /// each shared run's key and when a block of it was last stored there from uncached
    /// (vLLM's `BlockStored`), ns.
    pub(crate) stored: Option<Vec<HashMap<u64, u64, BuildHasherDefault<KeyHasher>>>>,
    /// The time stored events are stamped with (the engine sets it before a step is
    /// scheduled).
    pub(crate) now_ns: u64,
    /// Scratch for the router's probes.
    probe_units: Vec<u32>,
    probe_segs: Vec<Seg>,
    /// KV tiers below HBM (`[scheduler.kv_offload]`), if any ([`crate::kv::offload`]).
    pub offload: Option<Box<Offload>>,
    /// Per request id: its family (the requests whose streams begin with the same piece
    /// and share a block with another of them), or [`NO_FAMILY`].
    family: Vec<u32>,
    /// Each family's members (ids, ascending): `fam_members[fam_start[f]..fam_start[f + 1]]`.
    fam_start: Vec<u32>,
    fam_members: Vec<u32>,
    /// Families of at most this many members are registered cold where none of them was hit
    /// ([`cache`]'s module docs); larger ones are always indexed (a lookup would scan them).
    pub(crate) cold_max: u32,
    /// Scratch: held pieces a materialization moved to the index.
    moved: Vec<(u32, u32, u32)>,
    /// Scratch: a request's blocks as tier pieces (key, first index, end index).
    tier_pieces: Vec<(u64, u32, u32)>,
}

/// One word into a running hash.
#[inline]
fn mix(h: u64, w: u64) -> u64 {
    let x = (h.rotate_left(23) ^ w).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^ (x >> 31)
}

/// The final avalanche (SplitMix64's), the two top bits cleared, never 0.
#[inline]
fn finish(h: u64) -> u64 {
    let mut z = h.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    ((z ^ (z >> 31)) & !CLEAR).max(1)
}

impl Apc {
    /// The prefix-cache side of a run: `on` from the scheduler section; token identity
    /// from the workload (`specs` by id, `segments` their arena). `block_of(spec)` is the
    /// request's block size in tokens (o1pro's per-request sizes: a cache per size).
    pub fn new(on: bool, specs: &[RequestSpec], segments: Vec<Segment>, block_of: impl Fn(&RequestSpec) -> u32) -> Apc {
        let mut a = Apc { on, cold_max: COLD_FAMILY_MAX, ..Apc::default() };
        if !on || !specs.iter().any(|s| s.segs.1 > 0) {
            return a;
        }
        // A block of request M can be hit by another request N only if N's token stream
        // begins with the same tokens up to that block's end (a block's hash chains its
        // prefix). So M's shared blocks are those inside its longest common prefix with any
        // other request, and only requests whose streams begin with the same piece — a
        // *family* — can share anything. Requests are grouped by their first piece (a sort
        // of one pair per request), and within a family sorted by their streams: the
        // longest common prefix with any other member is the one with a neighbour in that
        // order (a longer common run of pieces beats any partial piece after a shorter
        // one, and among members agreeing on as many pieces the neighbours come closest
        // on the next one).
        let mut firsts: Vec<(u64, u32)> = specs
            .iter()
            .filter_map(|s| {
                let mut first = None;
                stream_of(s, &segments, |key, _| {
                    first = Some(key);
                    false
                });
                first.map(|k| (k, s.id))
            })
            .collect();
        firsts.sort_unstable();
        let by_id: Vec<u32> = {
            // Specs are by id in the engine, but need not be here.
            let mut v = vec![u32::MAX; specs.iter().map(|s| s.id as usize + 1).max().unwrap_or(0)];
            for (i, s) in specs.iter().enumerate() {
                v[s.id as usize] = i as u32;
            }
            v
        };
        let n = by_id.len();
        a.segs = vec![(0, 0); n];
        a.per = vec![ApcReq::default(); n];
        a.family = vec![NO_FAMILY; n];
        a.fam_start.push(0);
        let (mut pieces, mut starts, mut members): (Vec<(u64, u64)>, Vec<usize>, Vec<u32>) = (Vec::new(), Vec::new(), Vec::new());
        let mut lcp: Vec<u64> = Vec::new();
        let mut i = 0;
        while i < firsts.len() {
            let j = i + firsts[i..].iter().take_while(|f| f.0 == firsts[i].0).count();
            if j - i >= 2 {
                // The family's streams, sorted.
                pieces.clear();
                starts.clear();
                members.clear();
                for &(_, id) in &firsts[i..j] {
                    starts.push(pieces.len());
                    stream_of(&specs[by_id[id as usize] as usize], &segments, |key, len| {
                        pieces.push((key, len));
                        true
                    });
                    members.push(id);
                }
                starts.push(pieces.len());
                let of = |k: usize| &pieces[starts[k]..starts[k + 1]];
                let mut order: Vec<usize> = (0..members.len()).collect();
                order.sort_by(|&x, &y| of(x).cmp(of(y)).then(members[x].cmp(&members[y])));
                lcp.clear();
                lcp.extend(order.windows(2).map(|w| common_tokens(of(w[0]), of(w[1]))));
                let fam = a.fam_start.len() as u32 - 1;
                for (k, &m) in order.iter().enumerate() {
                    let best = lcp.get(k).copied().unwrap_or(0).max(if k > 0 { lcp[k - 1] } else { 0 });
                    let s = &specs[by_id[members[m] as usize] as usize];
                    let b = u64::from(block_of(s).max(1));
                    let share = (best / b).min(u64::from(u32::MAX - 1)) as u32;
                    if share > 0 {
                        a.per[s.id as usize].share_blocks = share;
                        a.family[s.id as usize] = fam;
                        a.fam_members.push(s.id);
                    }
                }
                if a.fam_members.len() as u32 > *a.fam_start.last().unwrap_or(&0) {
                    a.fam_members[*a.fam_start.last().unwrap_or(&0) as usize..].sort_unstable();
                    a.fam_start.push(a.fam_members.len() as u32);
                }
            }
            i = j;
        }
        drop(firsts);
        for s in specs {
            a.segs[s.id as usize] = s.segs;
            a.shared |= a.per[s.id as usize].share_blocks > 0;
        }
        a.segments = segments;
        a.compact(specs, &by_id, &block_of);
        a
    }

    /// Keep of each request only the segments its shared blocks are made of (their hashes
    /// are all that is ever asked of them), in place, when every request has its own range
    /// of the arena (a trace's rows do; generated workloads that share ranges have small
    /// arenas): a trace's segments are most of its memory, and a run that caches little
    /// needs few of them.
    fn compact(&mut self, specs: &[RequestSpec], by_id: &[u32], block_of: impl Fn(&RequestSpec) -> u32) {
        let mut order: Vec<(u32, u32)> = specs.iter().map(|s| (s.segs.0, s.id)).collect();
        order.sort_unstable();
        let disjoint = order.windows(2).all(|w| {
            let first = &specs[by_id[w[0].1 as usize] as usize];
            u64::from(w[0].0) + u64::from(first.segs.1) <= u64::from(w[1].0)
        });
        if !disjoint {
            return;
        }
        let mut segments = std::mem::take(&mut self.segments);
        let a = &mut *self;
        let mut to = 0usize;
        for &(lo, id) in &order {
            let s = &specs[by_id[id as usize] as usize];
            if a.per[id as usize].share_blocks == 0 {
                a.segs[id as usize] = (0, 0);
                continue;
            }
            let b = u64::from(block_of(s).max(1));
            let want = u64::from(a.per[id as usize].share_blocks) * b;
            let lo = lo as usize;
            let all = segments.get(lo..lo.saturating_add(s.segs.1 as usize)).map_or(0, <[Segment]>::len);
            // The leading segments that reach `want` tokens (all of them when the output is
            // shared: the output piece follows the last).
            let mut tokens = 0u64;
            let keep = segments[lo..lo + all]
                .iter()
                .take_while(|g| {
                    let more = tokens < want;
                    tokens += u64::from(g.len);
                    more
                })
                .count();
            let keep = if want > u64::from(s.prompt_tokens) { all } else { keep };
            segments.copy_within(lo..lo + keep, to);
            a.segs[id as usize] = (to as u32, keep as u32);
            to += keep;
        }
        segments.truncate(to);
        segments.shrink_to_fit();
        self.segments = segments;
    }

    /// Tests only: switch to the literal algorithm for `n` requests (see `literal`).
    #[cfg(test)]
    pub(crate) fn make_literal(&mut self, specs: &[RequestSpec], segments: Vec<Segment>) {
        let n = specs.len();
        self.literal = true;
        self.shared = true;
        self.segments = segments;
        self.segs.resize(n, (0, 0));
        for s in specs {
            self.segs[s.id as usize] = s.segs;
        }
        self.per.resize(n, ApcReq::default());
        self.per.iter_mut().for_each(|p| p.share_blocks = u32::MAX);
    }

    /// Tokens request `id` hit at its first admission (vLLM's `num_cached_tokens`): 0
    /// unless some prompt shares tokens, since a request's first lookup can only hit
    /// shared blocks.
    pub fn cached_tokens(&self, id: u32) -> u32 {
        self.per.get(id as usize).map_or(0, |p| p.cached_tokens)
    }

    /// Record the tokens hit at `id`'s first admission.
    pub fn set_cached_tokens(&mut self, id: u32, tokens: u32) {
        if let Some(p) = self.per.get_mut(id as usize) {
            p.cached_tokens = tokens;
        }
    }

    /// A request is done: drop its memo. Returns the replicas whose caches hold private
    /// blocks of it (to be forgotten there: [`BlockCache::forget`]).
    pub fn forget(&mut self, id: u32) -> Vec<u32> {
        if let Some(p) = self.per.get_mut(id as usize) {
            p.runs = Vec::new();
        }
        if self.homes.is_empty() {
            return Vec::new();
        }
        self.homes.remove(&id).unwrap_or_default()
    }

    /// The request's cache block size in tokens and units per cache block.
    #[inline]
    fn block_of(kv: &KvPool, r: &Req) -> (u32, u32) {
        let b = r.req_block.max(kv.block_size);
        (b, (b / kv.block_size).max(1))
    }

    /// Leading shared blocks of request `id`.
    #[inline]
    fn share_blocks(&self, id: u32) -> u32 {
        self.per.get(id as usize).map_or(0, |p| p.share_blocks)
    }

    /// The family of request `id` if its shared blocks are registered cold in `kv`'s cache
    /// (a small family none of whose members was hit there; never with the precise prefix
    /// router, which reads the index, nor in the literal algorithm).
    #[inline]
    fn cold_family(&self, kv: &KvPool, id: u32) -> Option<u32> {
        let f = *self.family.get(id as usize)?;
        if f == NO_FAMILY || self.literal || self.cold_max == 0 {
            return None;
        }
        let size = self.fam_start[f as usize + 1] - self.fam_start[f as usize];
        let c = kv.cache.as_deref()?;
        (size <= self.cold_max && !c.is_hot(f)).then_some(f)
    }

    /// The members of family `f`.
    #[inline]
    fn members(&self, f: u32) -> &[u32] {
        &self.fam_members[self.fam_start[f as usize] as usize..self.fam_start[f as usize + 1] as usize]
    }

    /// Index family `f` in `kv`'s cache from now on ([`BlockCache::materialize`]); the
    /// tables holding its cold pieces there now name their runs.
    fn materialize(&mut self, kv: &mut KvPool, f: u32) {
        let Some(c) = kv.cache.as_deref_mut() else { return };
        let mut moved = std::mem::take(&mut self.moved);
        moved.clear();
        let (lo, hi) = (self.fam_start[f as usize] as usize, self.fam_start[f as usize + 1] as usize);
        c.materialize(f, &self.fam_members[lo..hi], &mut moved);
        for &(req, k, e) in &moved {
            if let Some(h) = self.held.get_mut(&req) {
                for x in h.iter_mut().filter(|x| x.0 == COLD | k) {
                    x.0 = e;
                }
            }
        }
        self.moved = moved;
    }

    /// Make sure the hashes of `r`'s shared blocks `0..upto` are in its memo.
    fn hash_upto(&mut self, r: &Req, b: u32, upto: u32) {
        let id = r.id as usize;
        if upto == 0 || id >= self.per.len() {
            return;
        }
        let have = self.per[id].runs.last().map_or(0, |r| r.0 + r.1);
        if have >= upto {
            return;
        }
        let (lo, n) = self.segs[id];
        let segs = self.segments.get(lo as usize..lo as usize + n as usize).unwrap_or(&[]);
        let prompt = u64::from(r.prompt);
        let b64 = u64::from(b);
        // The pieces of the token stream: (start position, key, length), segments clamped
        // to the prompt, then (when they cover it) the request's own outputs.
        let pieces = &mut self.pieces;
        pieces.clear();
        let mut pos = 0u64;
        for g in segs {
            let len = u64::from(g.len).min(prompt - pos);
            if len > 0 {
                pieces.push((pos, g.key, len));
                pos += len;
            }
            if pos >= prompt {
                break;
            }
        }
        if self.literal && pos < prompt {
            // Tokens unique to the request: a stream no workload key names.
            pieces.push((pos, (1 << 62) | u64::from(r.id), prompt - pos));
            pos = prompt;
        }
        if pos >= prompt {
            pieces.push((prompt, output_key(r.id), u64::from(r.output)));
        }
        let p = &mut self.per[id];
        p.runs.reserve(pieces.len());
        let mut parent = match p.runs.last() {
            None => finish(mix(0x6F31_7369_6D41_5043, b64)),
            Some(&(_, 1, h)) => h,
            Some(&(_, n, h)) => mix(h, u64::from(n - 1)),
        };
        let mut at = 0usize;
        let mut k = have;
        while k < upto {
            let (start, end) = (u64::from(k) * b64, u64::from(k + 1) * b64);
            while at < pieces.len() && pieces[at].0 + pieces[at].2 <= start {
                at += 1;
            }
            let mut h = parent;
            let mut i = at;
            while i < pieces.len() && pieces[i].0 < end {
                let (s, key, len) = pieces[i];
                let lo = start.max(s);
                let hi = end.min(s + len);
                h = mix(mix(mix(h, key), lo - s), hi - lo);
                i += 1;
            }
            let h = finish(h);
            // Inside one piece: the first of its whole blocks (a resumed memo ends where a
            // run does), and the run goes on to the piece's last whole block.
            let inside = i == at + 1 && pieces[at].0 <= start && end <= pieces[at].0 + pieces[at].2;
            let n = if inside { ((pieces[at].0 + pieces[at].2) / b64 - u64::from(k)) as u32 } else { 1 };
            p.runs.push((k, n, h));
            // The next block's parent: this one's hash, or the run's last block's (a
            // block inside a run past its first is never a key, only a parent, so the
            // run's key and its offset name it: the same content for every request
            // holding it).
            parent = if n == 1 { h } else { mix(h, u64::from(n - 1)) };
            k += n;
        }
    }

    /// vLLM's `get_computed_blocks` for a request with nothing computed: its longest chain
    /// of cached full blocks, at most `num_tokens − 1` tokens (a fully cached prompt
    /// recomputes its last block, whose logits are needed). The hit units are left in
    /// `self.hits`, in table order.
    pub fn lookup(&mut self, kv: &mut KvPool, r: &Req) -> Hit {
        // Nothing is cached before the cache wakes up.
        let Some(c) = kv.cache.as_deref().filter(|c| c.active) else {
            self.clear_hits();
            return Hit::default();
        };
        let asked = (r.id, kv.replica, c.epoch, r.num_tokens(), r.apc_private);
        if let Some((key, until, hit)) = self.memo {
            if key == asked && c.head() <= until {
                return hit;
            }
        }
        self.clear_hits();
        let (b, per) = Self::block_of(kv, r);
        let share = self.share_blocks(r.id);
        let max_blocks = (r.num_tokens() - 1) / b;
        // Without shared blocks and never freed unfinished, nothing can be cached for it.
        let limit = if r.apc_private { max_blocks } else { max_blocks.min(share) };
        if limit == 0 {
            return Hit::default();
        }
        self.hash_upto(r, b, share.min(limit));
        let mut end = limit.min(share);
        if end > 0 {
            if let Some(f) = self.cold_family(kv, r.id) {
                // Registered cold here: a hit needs a copy of its first block; with one, the
                // family is indexed here from now on, and the lookup goes on in the index.
                let key = self.per[r.id as usize].runs[0].2;
                if kv.cache.as_deref().is_some_and(|c| c.cold_copy(self.members(f), key, 0)) {
                    self.materialize(kv, f);
                } else {
                    end = 0;
                }
            }
        }
        let Some(c) = kv.cache.as_deref() else { return Hit::default() };
        let mut hit = Hit::default();
        // Shared blocks by their runs, then private ones by the request's own run.
        let mut k = 0;
        let (hits, segs) = (&mut self.hits, &mut self.hit_segs);
        if end > 0 {
            let p = &self.per[r.id as usize];
            let mut runs = p.runs.iter();
            while k < end {
                // The run starting at block k (a lookup stops at the first block missed).
                let Some(&(k0, n, key)) = runs.next() else { break };
                debug_assert_eq!(k0, k);
                let blocks = (k0 + n).min(end) - k;
                let Some(run) = c.shared_run(key) else { break };
                let (units, nsegs) = (hits.len(), segs.len());
                let got = c.hits(run, 0, blocks * per, hits, segs) / per;
                // Whole blocks only.
                hits.truncate(units + (got * per) as usize);
                trim_segs(segs, nsegs, got * per);
                hit.tokens += got * b;
                k += got;
                if got < blocks {
                    break;
                }
            }
        }
        if k == share && k < limit {
            // Its private blocks cached without a gap, from its first private unit.
            if let Some(run) = c.private_run(r.id) {
                let (units, nsegs) = (hits.len(), segs.len());
                let got = c.hits(run, k * per, (limit - k) * per, hits, segs) / per;
                hits.truncate(units + (got * per) as usize);
                trim_segs(segs, nsegs, got * per);
                hit.tokens += got * b;
                hit.private = got * per;
            }
        }
        hit.units = hits.len() as u32;
        // The answer holds until the head passes a free unit it names, or the queue's
        // present tail if it names a held one (freed later, that unit joins after it).
        let until = segs
            .iter()
            .map(|&g| match c.free_in(g) {
                (free, first) if free < g.2 => first.min(c.tail()),
                (_, first) => first,
            })
            .min()
            .unwrap_or(u64::MAX);
        self.memo = Some((asked, until, hit));
        hit
    }

    /// The cache blocks of `r` a router may find cached anywhere (its leading shared
    /// blocks, at most `num_tokens − 1` tokens as a lookup takes), with `block` tokens a
    /// block, their runs hashed: (blocks, runs as (first block, blocks, key)).
    pub(crate) fn route_runs(&mut self, r: &Req, block: u32) -> (u32, &[(u32, u32, u64)]) {
        let share = self.share_blocks(r.id);
        let limit = (r.num_tokens().saturating_sub(1) / block.max(1)).min(share);
        if limit == 0 {
            return (0, &[]);
        }
        self.hash_upto(r, block, limit);
        (limit, &self.per[r.id as usize].runs)
    }

    /// How many leading blocks of `r` replica `kv`'s cache holds now, counting only runs
    /// whose key `visible` accepts (the precise prefix router: those whose stored events
    /// reached it). A read-only lookup: nothing is touched or remembered.
    pub(crate) fn cached_blocks(&mut self, kv: &KvPool, r: &Req, visible: impl Fn(u64) -> bool) -> u32 {
        let Some(c) = kv.cache.as_deref().filter(|c| c.active) else { return 0 };
        let (b, per) = Self::block_of(kv, r);
        let (limit, _) = self.route_runs(r, b);
        let (units, segs) = (&mut self.probe_units, &mut self.probe_segs);
        let mut k = 0;
        for &(k0, n, key) in self.per.get(r.id as usize).map_or(&[][..], |p| &p.runs[..]) {
            if k >= limit {
                break;
            }
            debug_assert_eq!(k0, k);
            let blocks = (k0 + n).min(limit) - k;
            let Some(run) = c.shared_run(key).filter(|_| visible(key)) else { break };
            units.clear();
            segs.clear();
            let got = c.hits(run, 0, blocks * per, units, segs) / per;
            k += got;
            if got < blocks {
                break;
            }
        }
        k
    }

    /// Forget the last lookup.
    pub fn clear_hits(&mut self) {
        self.hits.clear();
        self.hit_segs.clear();
        self.memo = None;
    }

    /// How many units of the last lookup, `hit`, are free (an admission counts them as
    /// units to allocate: they leave the free queue). Its private units all are: only
    /// their request, which is waiting, can hold them.
    pub fn evictable(&self, kv: &KvPool, hit: &Hit) -> u32 {
        let Some(c) = kv.cache.as_deref().filter(|c| c.active) else { return hit.private };
        let mut left = self.hits.len() as u32 - hit.private;
        let mut free = hit.private;
        for &g in &self.hit_segs {
            let n = g.2.min(left);
            if n == 0 {
                break;
            }
            free += c.free_in((g.0, g.1, n)).0;
            left -= n;
        }
        free
    }

    /// Give `table` (empty) the units of the last lookup, each touched (the first half of
    /// `allocate_slots`: `allocate_new_computed_blocks`), and count them as cached.
    pub fn take_hits(&mut self, kv: &mut KvPool, r: &mut Req) {
        let Some(c) = kv.awake_cache() else { return };
        let mut pos = r.blocks.len() as u32;
        let segs = std::mem::take(&mut self.hit_segs);
        for &g in &segs {
            c.touch(g);
        }
        r.blocks.extend_from_slice(&self.hits);
        let (_, per) = Self::block_of(kv, r);
        let held = held_of(&mut self.held, &mut self.spare, r.id);
        for &(e, lo, n) in &segs {
            match held.last_mut() {
                Some(h) if h.0 == e && h.1 + h.3 == lo && h.2 + h.3 == pos => h.3 += n,
                _ => held.push((e, lo, pos, n)),
            }
            pos += n;
        }
        self.hit_segs = segs;
        self.hit_segs.clear();
        self.memo = None;
        if let Some(p) = self.per.get_mut(r.id as usize) {
            p.cached_shared = (self.hits.len() as u32 / per).min(p.share_blocks);
        }
        r.apc_gate = 0;
    }

    /// vLLM's `cache_blocks` in `allocate_slots`: `r` now holds units for `alloc_tokens`
    /// tokens about to be computed; its shared full blocks among them are cached at once
    /// (a request admitted later in the same step hits them). Private ones wait for
    /// [`Apc::release`].
    pub fn cache_shared(&mut self, kv: &mut KvPool, r: &mut Req, alloc_tokens: u32) {
        let Some(p) = self.per.get(r.id as usize) else {
            r.apc_gate = u32::MAX;
            return;
        };
        let (b, per) = Self::block_of(kv, r);
        let upto = (alloc_tokens.min(r.num_tokens()) / b).min(p.share_blocks);
        let from = p.cached_shared;
        if upto <= from {
            r.apc_gate = Self::gate(from, p.share_blocks, b);
            return;
        }
        self.hash_upto(r, b, upto);
        let replica = kv.replica as usize;
        let cold = self.cold_family(kv, r.id).is_some();
        let Some(c) = kv.awake_cache() else { return };
        let p = &self.per[r.id as usize];
        let held = held_of(&mut self.held, &mut self.spare, r.id);
        let mut k = from;
        let mut at = p.runs.partition_point(|run| run.0 + run.1 <= k);
        let list = if cold {
            // Room for every shared block it will register (its stream's pieces bound the
            // runs), so that the list does not move as a long prompt's chunks come in.
            let whole = p.share_blocks.min(r.prompt.saturating_add(r.output) / b).max(upto);
            c.cold_list(r.id, self.segs[r.id as usize].1 as usize + 2, ((whole - from) * per) as usize)
        } else {
            0
        };
        while k < upto {
            // The blocks of this run among them, in one go.
            let (k0, n, key) = p.runs[at];
            at += 1;
            let (idx, e) = ((k - k0) * per, (k0 + n).min(upto));
            let units = &r.blocks[(k * per) as usize..(e * per) as usize];
            if let Some(stored) = self.stored.as_mut().and_then(|s| s.get_mut(replica)) {
                // A block new to this cache: a `BlockStored` event.
                if c.shared_run(key).is_none_or(|run| !c.cached_at(run, idx)) {
                    stored.insert(key, self.now_ns);
                }
            }
            if cold {
                let piece = c.register_cold(list, key, idx, units);
                held.push((COLD | piece, idx, k * per, units.len() as u32));
            } else {
                let run = c.register(RunKey::Shared(key), idx, units);
                held.push((run, idx, k * per, units.len() as u32));
            }
            k = e;
        }
        let p = &mut self.per[r.id as usize];
        p.cached_shared = upto;
        r.apc_gate = Self::gate(upto, p.share_blocks, b);
    }

    /// The length from which [`Apc::cache_shared`] has work for a request with `cached`
    /// of its `share` leading shared blocks of `b` tokens cached (`u32::MAX`: none left):
    /// the end of its next shared block.
    #[inline]
    fn gate(cached: u32, share: u32, b: u32) -> u32 {
        if cached >= share {
            u32::MAX
        } else {
            cached.saturating_add(1).saturating_mul(b)
        }
    }

    /// Free `r`'s units, last first so that its tail is evicted first (vLLM's
    /// `SingleTypeKVCacheManager.free`). `again`: the request will be admitted again (it
    /// was preempted or handed off) with its units covering `alloc_tokens` tokens as last
    /// scheduled; its private full blocks among them are registered first, so that it can
    /// hit them. Without caching, the pool's plain release.
    pub fn release(&mut self, kv: &mut KvPool, r: &mut Req, again: Option<u32>) {
        let alloc = again.unwrap_or(r.computed);
        self.release_after(kv, r, again.is_some(), alloc);
    }

    /// [`Apc::release`] of a table last allocated for `alloc` tokens (its full blocks among
    /// them hold a hash; the ones after go to the free queue's front); `again`: the request
    /// will be admitted again.
    pub fn release_after(&mut self, kv: &mut KvPool, r: &mut Req, again: bool, alloc: u32) {
        let mut held = self.held.remove(&r.id).unwrap_or_else(|| self.spare.pop().unwrap_or_default());
        if kv.queued() || (again && kv.caching()) {
            self.release_cached(kv, r, again, alloc, &mut held);
        } else {
            kv.release(&mut r.blocks);
        }
        held.clear();
        self.spare.push(held);
    }

    /// [`Apc::release`] where something may be cached: `held`, the table's ranges of
    /// cached copies.
    fn release_cached(&mut self, kv: &mut KvPool, r: &mut Req, again: bool, alloc: u32, held: &mut Vec<Held>) {
        let (b, per) = Self::block_of(kv, r);
        let mut cached = held.last().map_or(0, |h| h.2 + h.3);
        // Its full blocks as last allocated: vLLM hashed them as they were scheduled.
        let full = alloc.min(r.num_tokens()) / b;
        if again {
            let from = (self.share_blocks(r.id).min(full) * per).max(cached);
            if from < full * per {
                let replica = kv.replica;
                if let Some(c) = kv.awake_cache() {
                    let units = &r.blocks[from as usize..(full * per) as usize];
                    let run = c.register(RunKey::Private(r.id), from, units);
                    held.push((run, from, from, units.len() as u32));
                    cached = full * per;
                    r.apc_private = true;
                    let homes = self.homes.entry(r.id).or_default();
                    if !homes.contains(&replica) {
                        homes.push(replica);
                    }
                }
            }
        }
        if let Some(p) = self.per.get_mut(r.id as usize) {
            p.cached_shared = 0;
        }
        r.apc_gate = 0;
        // The table's units past its full blocks hold no hash: the free queue takes them at
        // its front.
        let hashed = ((full * per).max(cached) as usize).min(r.blocks.len());
        match kv.cache.as_deref_mut().filter(|c| c.active) {
            Some(c) => {
                c.prepend_blank(&r.blocks[hashed..]);
                c.free_blank(&r.blocks[cached as usize..hashed]);
                for &(e, lo, pos, n) in held.iter().rev() {
                    let units = &r.blocks[pos as usize..(pos + n) as usize];
                    if e & COLD != 0 {
                        c.release_cold(r.id, e & !COLD, units);
                    } else {
                        c.release(e, lo, units);
                    }
                }
                r.blocks.clear();
            }
            None => kv.release(&mut r.blocks),
        }
    }
}

/// The offload tiers' side of the prefix cache ([`crate::kv::offload`]): a request's blocks
/// named as the tiers keep them, looked up after the GPU's hit and offered after each step.
impl Apc {
    /// Blocks `from..to` of `r` (cache blocks of `block` tokens) as tier pieces in
    /// `self.tier_pieces`: its shared blocks by their runs' keys and indices, the rest by
    /// the request's own key and block index.
    fn tier_pieces(&mut self, r: &Req, block: u32, from: u32, to: u32) {
        self.tier_pieces.clear();
        if from >= to {
            return;
        }
        let share = self.share_blocks(r.id).min(to);
        if from < share {
            self.hash_upto(r, block, share);
            for &(k0, n, key) in &self.per[r.id as usize].runs {
                let (lo, hi) = (k0.max(from), (k0 + n).min(share));
                if lo < hi {
                    self.tier_pieces.push((key, lo - k0, hi - k0));
                }
                if k0 + n >= share {
                    break;
                }
            }
        }
        let lo = from.max(share);
        if lo < to {
            self.tier_pieces.push((PRIVATE | u64::from(r.id), lo, to));
        }
    }

    /// What the tiers hold of `r`'s prompt past its GPU hit `gpu` at `now` (at most
    /// `num_tokens − 1` tokens in all, whole blocks), on `kv`'s replica. Empty without tiers.
    pub fn tier_lookup(&mut self, kv: &KvPool, r: &Req, gpu: &Hit, now: u64) -> TierHit {
        let Some(mut off) = self.offload.take() else { return TierHit::default() };
        let b = kv.block_size.max(r.req_block);
        let (from, limit) = (gpu.tokens / b, (r.num_tokens() - 1) / b);
        self.tier_pieces(r, b, from, limit);
        let hit = if self.tier_pieces.is_empty() { TierHit::default() } else { off.lookup(kv.replica as usize, now, &self.tier_pieces) };
        self.offload = Some(off);
        hit
    }

    /// After a step at `now`: offer `r`'s full blocks computed and not yet offered to its
    /// replica's first tier (write-through).
    pub fn offer(&mut self, kv: &KvPool, r: &Req, now: u64) {
        let Some(mut off) = self.offload.take() else { return };
        let b = kv.block_size.max(r.req_block);
        let full = r.computed.min(r.num_tokens()) / b;
        let from = off.offered(r.id);
        if full > from {
            self.tier_pieces(r, b, from, full);
            for &(key, lo, hi) in &self.tier_pieces {
                off.store(kv.replica as usize, now, key, lo, hi);
            }
            off.set_offered(r.id, full);
        }
        self.offload = Some(off);
    }
}

/// Request `id`'s table ranges of cached copies (a list from the spares when it had none).
fn held_of<'a>(held: &'a mut HashMap<u32, Vec<Held>, BuildHasherDefault<KeyHasher>>, spare: &mut Vec<Vec<Held>>, id: u32) -> &'a mut Vec<Held> {
    held.entry(id).or_insert_with(|| spare.pop().unwrap_or_default())
}

/// Keep the first `n` units of the ranges in `segs[from..]`.
fn trim_segs(segs: &mut Vec<Seg>, from: usize, mut n: u32) {
    let mut keep = from;
    for g in &mut segs[from..] {
        if n == 0 {
            break;
        }
        g.2 = g.2.min(n);
        n -= g.2;
        keep += 1;
    }
    segs.truncate(keep);
}

/// No family: the request shares no block with any other.
const NO_FAMILY: u32 = u32::MAX;

/// The largest family registered cold ([`Apc::cold_max`]): a lookup on a replica where it
/// is cold asks each member's list there.
const COLD_FAMILY_MAX: u32 = 32;

/// Request `s`'s token stream as pieces `(key, tokens)`, as [`Apc::hash_upto`] hashes it:
/// its segments clamped to the prompt, then (when they cover it) its own output; `each`
/// returns `false` to stop.
fn stream_of(s: &RequestSpec, segments: &[Segment], mut each: impl FnMut(u64, u64) -> bool) {
    let (lo, n) = s.segs;
    let segs = segments.get(lo as usize..(lo as usize).saturating_add(n as usize)).unwrap_or(&[]);
    let prompt = u64::from(s.prompt_tokens);
    let mut pos = 0u64;
    for g in segs {
        if pos >= prompt {
            break;
        }
        let len = u64::from(g.len).min(prompt - pos);
        if len > 0 {
            if !each(g.key, len) {
                return;
            }
            pos += len;
        }
    }
    if pos >= prompt {
        each(output_key(s.id), u64::from(s.output_tokens));
    }
}

/// Tokens two streams begin with in common: whole equal pieces, then the shorter part of
/// a piece of the same key (a key names one token sequence; a length takes its start).
fn common_tokens(x: &[(u64, u64)], y: &[(u64, u64)]) -> u64 {
    let mut n = 0;
    for (&(kx, lx), &(ky, ly)) in x.iter().zip(y) {
        if kx != ky {
            break;
        }
        n += lx.min(ly);
        if lx != ly {
            break;
        }
    }
    n
}

#[cfg(test)]
mod tests;
