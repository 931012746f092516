//! The cache-aware routers (`deployment.router`): which replica an arrival goes to by the
//! prefix its cache holds, by session, or by a consistent hash.
//!
//! - **`precise_prefix`** reads each replica's own prefix cache (the block hashes its
//!   [`crate::kv::prefix::BlockCache`] holds), as llm-d's precise prefix-cache scorer and
//!   Dynamo's KV router do from the engines' KV events. The events reach the router
//!   `deployment.kv_event_delay_ms` late: a block stored less than that long ago is not yet
//!   known to it. Evictions (`BlockRemoved`) are seen at once — a simplification: so a stale
//!   view here only misses new blocks, never believes in evicted ones.
//! - **`approx_prefix`** keeps its own record of what it sent where (llm-d's approximate
//!   prefix scorer, SGLang's cache-aware router): per replica an LRU of block hashes as large
//!   as the replica's KV pool, assuming each prompt routed there is cached there.
//! - Both weigh the prefix score with load and KV usage (`deployment.router_scorers`, llm-d's
//!   weighted scorers): `prefix × (share of the prompt's full blocks held) + load ×
//!   (outstanding tokens, min-max scaled over the candidates, fewest = 1) + kv_usage × (free
//!   share of the KV pool)`; the best score wins, ties to fewer outstanding tokens, then the
//!   lower index.
//! - **`session_affinity`**: a session's turn goes where its previous turn went.
//! - **`consistent_hash`**: a ring of 160 points per replica keyed by the session's first
//!   turn, or by the hash of the prompt's first 512 tokens, with bounded loads (Mirrokni,
//!   Thorup, Zadimoghaddam 2018, as Envoy and HAProxy use it): a replica holding more than
//!   1.25× the mean outstanding tokens (this request's counted in the mean) passes the
//!   request on along the ring.
//!
//! Block hashes are the prefix cache's own ([`crate::kv::prefix::Apc::route_runs`]): with
//! prefix caching off (or a policy without a cache, as `compare` runs them all) no replica
//! holds a prefix, and the prefix-aware routers route by load and KV usage alone.

use super::router_state::{hash2, Lru, HASH_PREFIX_TOKENS, RING_LOAD_BOUND};
use super::{Engine, Router};

impl Engine {
    /// The cache-aware routers' pick for request `id` among arrival replicas `0..n`.
    pub(super) fn pick_cache_aware(&mut self, id: u32, n: usize) -> Option<usize> {
        match self.router {
            Router::PrecisePrefix | Router::ApproxPrefix => self.pick_by_prefix(id, n),
            Router::SessionAffinity => {
                let parent = self.sessions.as_ref().and_then(|s| s.after[id as usize]).map(|a| a.parent);
                let home = parent.map(|p| self.reqs[p as usize].replica).filter(|&r| r >= 0 && (r as usize) < n);
                match home {
                    Some(r) if self.has_room(r as usize) => Some(r as usize),
                    _ => self.least_outstanding(n),
                }
            }
            Router::ConsistentHash => self.pick_on_ring(id, n),
            Router::RoundRobin | Router::LeastOutstandingTokens | Router::TopologyAware => self.least_outstanding(n),
        }
    }

    /// The replica with room and the fewest outstanding tokens (then the lower index).
    pub(super) fn least_outstanding(&mut self, n: usize) -> Option<usize> {
        if n < 2 || n != self.replicas.len() || self.fabric.is_some() || self.scaler.is_some() {
            return self.least_outstanding_scan(n);
        }
        let mut ix = match self.lot.take() {
            Some(ix) if ix.len() == n => ix,
            _ => super::lot_index::LotIndex::new(n),
        };
        let pick = ix.pick(|i| (self.has_room(i), self.replicas[i].outstanding_tokens));
        self.lot = Some(ix);
        debug_assert_eq!(pick, self.least_outstanding_scan(n), "the router's index disagrees with its scan");
        pick
    }

    /// [`Engine::least_outstanding`] by a scan of every replica.
    fn least_outstanding_scan(&self, n: usize) -> Option<usize> {
        (0..n).filter(|&i| self.has_room(i)).min_by_key(|&i| (self.replicas[i].outstanding_tokens, i))
    }

    /// The prefix-aware routers: every candidate scored by the prefix it holds (as this
    /// router sees it), its load and its KV usage.
    fn pick_by_prefix(&mut self, id: u32, n: usize) -> Option<usize> {
        let mut rt = self.routing.take()?;
        let r = &self.reqs[id as usize];
        let pool0 = &self.replicas[0].sched.kv;
        let block = r.req_block.max(pool0.block_size).max(1);
        let prompt_blocks = r.prompt / block;
        rt.seen.clear();
        let (mut lo, mut hi) = (u64::MAX, 0u64);
        let candidates: Vec<usize> = (0..n).filter(|&i| self.has_room(i)).collect();
        for i in candidates {
            let kv = &self.replicas[i].sched.kv;
            let held = match self.router {
                Router::PrecisePrefix => {
                    let (stored, now, delay) = (self.apc.stored.take(), self.now_ns, rt.delay_ns);
                    let seen = |key: u64| {
                        delay == 0
                            || stored.as_ref().and_then(|s| s[i].get(&key)).is_some_and(|&t| t.saturating_add(delay) <= now)
                    };
                    let held = self.apc.cached_blocks(kv, r, seen);
                    self.apc.stored = stored;
                    held
                }
                _ => {
                    let lru = rt.approx.get(i);
                    let (limit, runs) = self.apc.route_runs(r, block);
                    let mut k = 0;
                    for &(k0, len, key) in runs {
                        if k >= limit {
                            break;
                        }
                        let want = (k0 + len).min(limit) - k0;
                        let got = lru.map_or(0, |l| l.blocks_of(key)).min(want);
                        k += got;
                        if got < want {
                            break;
                        }
                    }
                    k
                }
            };
            let out = self.replicas[i].outstanding_tokens;
            lo = lo.min(out);
            hi = hi.max(out);
            rt.seen.push((i, held));
        }
        let w = rt.weights;
        let mut best: Option<(f64, u64, usize)> = None;
        for &(i, held) in &rt.seen {
            let rep = &self.replicas[i];
            let kv = &rep.sched.kv;
            let out = rep.outstanding_tokens;
            let prefix = if prompt_blocks == 0 { 0.0 } else { f64::from(held) / f64::from(prompt_blocks) };
            let load = if hi == lo { 1.0 } else { (hi - out) as f64 / (hi - lo) as f64 };
            let free = if kv.total() == 0 { 0.0 } else { f64::from(kv.free_units()) / f64::from(kv.total()) };
            let score = w.prefix * prefix + w.load * load + w.kv_usage * free;
            if best.is_none_or(|b| score > b.0 || (score == b.0 && (out, i) < (b.1, b.2))) {
                best = Some((score, out, i));
            }
        }
        let pick = best.map(|b| b.2);
        if let (Some(to), Router::ApproxPrefix) = (pick, self.router) {
            // The router assumes what it sent will be cached there.
            if rt.approx.len() < self.replicas.len() {
                rt.approx = self
                    .replicas
                    .iter()
                    .map(|rep| {
                        let per = (block / rep.sched.kv.block_size.max(1)).max(1);
                        Lru::with_capacity(u64::from(rep.sched.kv.total() / per))
                    })
                    .collect();
            }
            let (limit, runs) = self.apc.route_runs(r, block);
            for &(k0, len, key) in runs {
                if k0 >= limit {
                    break;
                }
                rt.tick += 1;
                rt.approx[to].record(key, (k0 + len).min(limit) - k0, rt.tick);
            }
        }
        self.routing = Some(rt);
        pick
    }

    /// Consistent hashing with bounded loads.
    fn pick_on_ring(&mut self, id: u32, n: usize) -> Option<usize> {
        let mut rt = self.routing.take()?;
        if rt.ring_n != n {
            rt.build_ring(n);
        }
        let key = self.ring_key(id);
        let need = u64::from(self.reqs[id as usize].prompt) + u64::from(self.reqs[id as usize].output);
        let total: u64 = (0..n).map(|i| self.replicas[i].outstanding_tokens).sum::<u64>() + need;
        let bound = (RING_LOAD_BOUND * total as f64 / n.max(1) as f64).ceil() as u64;
        let start = rt.ring.partition_point(|&(p, _)| p < key);
        let mut first_with_room = None;
        let mut pick = None;
        for k in 0..rt.ring.len() {
            let rep = rt.ring[(start + k) % rt.ring.len()].1 as usize;
            if !self.has_room(rep) {
                continue;
            }
            first_with_room.get_or_insert(rep);
            if self.replicas[rep].outstanding_tokens <= bound {
                pick = Some(rep);
                break;
            }
        }
        self.routing = Some(rt);
        pick.or(first_with_room)
    }

    /// What the ring hashes: the session's first turn, or the prompt's first 512 tokens
    /// (their last full block's hash when those blocks are shared with some request; a
    /// prompt of its own tokens hashes by its own id).
    fn ring_key(&mut self, id: u32) -> u64 {
        if let Some(s) = &self.sessions {
            let mut root = id;
            while let Some(a) = s.after[root as usize] {
                root = a.parent;
            }
            if root != id || !s.children_of(id).is_empty() {
                return hash2(0x5E55_1011, u64::from(root));
            }
        }
        let r = &self.reqs[id as usize];
        let block = r.req_block.max(self.replicas[0].sched.kv.block_size).max(1);
        let want = (HASH_PREFIX_TOKENS.min(r.prompt) / block).max(1);
        let (limit, runs) = self.apc.route_runs(r, block);
        if want <= limit {
            let k = want - 1;
            if let Some(&(k0, _, h)) = runs.iter().take_while(|run| run.0 <= k).last() {
                return if k == k0 { h } else { hash2(h, u64::from(k - k0)) };
            }
        }
        hash2(0x0517_0C4E, u64::from(id))
    }
}
