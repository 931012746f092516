//! Tests of the prefix cache: the block cache's queue and indexes, and the shortcuts
//! against the literal algorithm.

use super::*;

/// An awake cache over `total` free units, queued in id order.
fn awake(total: u32) -> BlockCache {
    let mut c = BlockCache::new(total);
    c.activate(&mut (0..total).rev().collect());
    c
}

#[test]
fn free_queue_is_fifo_with_removal_from_the_middle() {
    let mut c = awake(6);
    let units: Vec<u32> = (0..4).map(|_| c.pop_free()).collect();
    assert_eq!(units, vec![0, 1, 2, 3]);
    for (k, &u) in units.iter().enumerate() {
        c.register(u, 10 + k as u64);
    }
    c.decref(1);
    c.decref(0);
    c.decref(3);
    c.decref(2);
    // Queue: the two blank units 4, 5, then 1, 0, 3, 2 as freed.
    assert_eq!(c.free_iter().collect::<Vec<_>>(), vec![4, 5, 1, 0, 3, 2]);
    c.touch(3);
    assert_eq!(c.free_iter().collect::<Vec<_>>(), vec![4, 5, 1, 0, 2]);
    assert_eq!(c.num_free, 5);
    c.check().unwrap();
    // Allocation takes the head: the blanks, then 1 (its block evicted), 0, skipping 3.
    let next: Vec<u32> = (0..4).map(|_| c.pop_free()).collect();
    assert_eq!(next, vec![4, 5, 1, 0]);
    assert_eq!((c.lookup(11), c.lookup(10), c.lookup(13)), (None, None, Some(3)));
    c.check().unwrap();
}

/// Which blank unit (one caching nothing) is handed out does not matter, where its place
/// in the queue does: it delays the eviction of the cached units behind it.
#[test]
fn blank_units_keep_their_places_in_the_queue() {
    let mut c = awake(4);
    let (a, b, x) = (c.pop_free(), c.pop_free(), c.pop_free());
    c.register(a, 7);
    // A table [a, x] freed, last first, its units from index 1 on known to be blank;
    // then a table [b], all blank.
    let mut table = vec![a, x];
    c.release_all(&mut table, 1);
    assert!(table.is_empty());
    c.release_all(&mut vec![b], 0);
    assert_eq!(c.num_free, 4);
    c.check().unwrap();
    // Queue: the unit never used, x's place, a, b's place. Two allocations leave a cached,
    // the third evicts it, the fourth takes the last blank.
    c.pop_free();
    c.pop_free();
    assert_eq!(c.lookup(7), Some(a));
    assert_eq!(c.pop_free(), a);
    assert_eq!(c.lookup(7), None);
    c.pop_free();
    assert_eq!(c.num_free, 0);
    c.check().unwrap();
}

#[test]
fn duplicates_are_found_oldest_first_and_eviction_keeps_the_rest() {
    let mut c = awake(4);
    let (a, b) = (c.pop_free(), c.pop_free());
    c.register(a, 42);
    c.register(b, 42);
    assert_eq!(c.lookup(42), Some(a));
    c.decref(a);
    c.decref(b);
    // Queue: 2, 3, a, b: two allocations leave both cached, the third evicts a.
    let (x, y) = (c.pop_free(), c.pop_free());
    assert_eq!((x, y), (2, 3));
    assert_eq!(c.pop_free(), a);
    assert_eq!(c.lookup(42), Some(b));
    assert_eq!(c.key_of(a), 0);
    c.check().unwrap();
}

#[test]
fn private_copies_are_found_oldest_first_and_a_done_request_is_forgotten() {
    let mut c = awake(6);
    let (a, b, x) = (c.pop_free(), c.pop_free(), c.pop_free());
    // Request 9 cached its unit index 0 on a, later again (a recompute) on x.
    c.register_private(9, 0, &[a, b]);
    c.register_private(9, 0, &[x]);
    assert_eq!(c.lookup(private_key(9, 0)), Some(a));
    assert_eq!(c.lookup(private_key(9, 1)), Some(b));
    c.decref(a);
    c.decref(b);
    c.decref(x);
    // Queue: 3, 4, 5, a, b, x. Reusing a leaves x as index 0's copy.
    for _ in 0..4 {
        c.pop_free();
    }
    assert_eq!(c.lookup(private_key(9, 0)), Some(x));
    assert_eq!(c.lookup(private_key(9, 1)), Some(b));
    c.check().unwrap();
    // Done: its units keep their keys until reused, but nobody finds them.
    c.forget(9);
    assert_eq!(c.lookup(private_key(9, 1)), None);
    c.check().unwrap();
    assert_eq!(c.pop_free(), b);
    assert!(c.ghost(9).1.is_empty());
    c.check().unwrap();
}

/// The free queue keeps vLLM's order through many removals from the middle, including
/// when its stale entries are packed away: checked against a plain list. Every held unit
/// is cached (a fresh key each time), so the queue names every unit.
#[test]
fn free_queue_order_survives_packing() {
    let n = 4000u32;
    let mut c = awake(n);
    let mut model: std::collections::VecDeque<u32> = (0..n).collect();
    let mut held: Vec<u32> = Vec::new();
    let mut x = 7u64;
    let mut rnd = |m: usize| {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (x >> 33) as usize % m.max(1)
    };
    let mut key = 0u64;
    for step in 0..60_000 {
        match rnd(5) {
            0 if !model.is_empty() => {
                let u = c.pop_free();
                assert_eq!(Some(u), model.pop_front(), "step {step}");
                key += 1;
                c.register(u, key);
                held.push(u);
            }
            1 if !held.is_empty() => {
                let u = held.swap_remove(rnd(held.len()));
                c.decref(u);
                model.push_back(u);
            }
            _ if !model.is_empty() => {
                // A hit on a free cached unit: out of the middle of the queue.
                let i = rnd(model.len());
                if c.key_of(model[i]) == 0 {
                    continue; // a blank unit: nothing to hit
                }
                let u = model.remove(i).unwrap();
                c.touch(u);
                held.push(u);
            }
            _ => {}
        }
    }
    assert_eq!(c.free_iter().collect::<Vec<_>>(), model.iter().copied().collect::<Vec<_>>());
    assert_eq!(c.num_free as usize, model.len());
    c.check().unwrap();
}

use crate::workload::{After, Workload};
use crate::{Format, SimOptions, Simulation};
use proptest::prelude::*;

/// (arrival ms, prefix group, prefix length, unique tail, output, priority, follows the
/// previous request as a session turn).
type Spec = (u32, Option<u64>, u32, u32, u32, i32, bool);

fn workload(specs: &[Spec]) -> Workload {
    let mut w = Workload::default();
    let mut last: Option<(u32, Vec<Segment>, u32)> = None;
    for (i, &(at, group, prefix, tail, output, prio, follow)) in specs.iter().enumerate() {
        let id = i as u32;
        let (mut segs, mut after) = (Vec::new(), None);
        if let (true, Some((pid, psegs, pout))) = (follow, &last) {
            segs.extend_from_slice(psegs);
            segs.push(Segment { key: output_key(*pid), len: *pout });
            after = Some(After { parent: *pid, think_ns: u64::from(at % 3) * 1_000_000 });
        }
        if let Some(g) = group {
            segs.push(Segment { key: g, len: prefix });
        }
        let prompt = (segs.iter().map(|s| s.len).sum::<u32>() + tail).max(1);
        let start = w.segments.len() as u32;
        w.segments.extend_from_slice(&segs);
        w.requests.push(RequestSpec {
            segs: (start, segs.len() as u32),
            after,
            ..RequestSpec::new(id, u64::from(at) * 1_000_000, prompt, output, prio)
        });
        last = (tail == 0 && !segs.is_empty()).then_some((id, segs, output));
    }
    w.requests.sort_by_key(|r| (r.arrival_ns, r.id));
    w
}

fn result(text: &str, w: &Workload, literal: bool) -> String {
    let sc = crate::config::Scenario::parse(text, Format::Json).unwrap();
    let mut sim = Simulation::with_workload(sc, w.clone(), SimOptions::default()).unwrap();
    if literal {
        let e = sim.engine_mut();
        e.apc.make_literal(e.reqs.len());
        e.replicas.iter_mut().for_each(|r| {
            r.sched.kv.awake_cache();
        });
    }
    sim.finish().unwrap().to_json()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 384, .. ProptestConfig::default() })]
    /// The shortcuts — a dormant cache until something is cached, only blocks another
    /// request can hold hashed and cached as scheduled, a request's own blocks cached
    /// when it frees them without finishing — give exactly the results of vLLM's
    /// algorithm taken literally (every full block hashed and cached as scheduled, the
    /// free queue in vLLM's order from the start), under shared prefixes, sessions,
    /// priorities, timeouts and pools small enough to preempt and evict.
    #[test]
    fn the_shortcuts_give_the_literal_algorithm_s_results(
        policy in prop::sample::select(vec!["vllm", "sarathi", "o1pro"]),
        priority in any::<bool>(),
        blocks in prop_oneof![3u32..10, 10u32..40],
        budget in 1u32..48,
        replicas in 1u32..3,
        timeout_ms in prop::option::of(5u32..80),
        specs in prop::collection::vec(
            (0u32..40, prop::option::of(0u64..3), 1u32..40, 0u32..12, 1u32..24, 0i32..3, any::<bool>()), 1..14),
    ) {
        let mut v = serde_json::json!({
            "seed": 1, "model": "llama-3-8b", "gpu": "h200",
            "deployment": {"replicas": replicas, "router": "least_outstanding_tokens"},
            "scheduler": {"policy": policy, "block_size": 4, "num_gpu_blocks": blocks,
                          "max_num_batched_tokens": budget, "chunk_size": budget, "max_num_seqs": 6,
                          "max_tokens_per_request": 7},
            "cost_model": {"kind": "linear", "base_ms": 1.0, "per_prefill_token_ms": 0.01,
                           "per_decode_seq_ms": 0.1, "per_context_token_ms": 0.001},
            "workload": {"requests": [{"arrival_ms": 0, "prompt_tokens": 1, "output_tokens": 1}]}
        });
        if priority && policy != "o1pro" {
            v["scheduler"]["scheduling_policy"] = serde_json::json!("priority");
        }
        if let Some(t) = timeout_ms {
            v["workload"]["timeout_s"] = serde_json::json!(f64::from(t) / 1000.0);
        }
        let text = v.to_string();
        let w = workload(&specs);
        prop_assert_eq!(result(&text, &w, false), result(&text, &w, true));
    }
}

/// A key of the model below: a run's (key, unit index), a single block's hash, a
/// request's private (id, unit index).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum MKey {
    Run(u64, u32),
    Single(u64),
    Private(u32, u32),
}

/// vLLM's `BlockPool` taken literally, one block at a time: the free queue as a list (a
/// blank unit's place as `None`: which blank unit fills it does not matter), per unit its
/// key and holders, per key its cached units oldest first.
#[derive(Default)]
struct Model {
    queue: std::collections::VecDeque<Option<u32>>,
    key: Vec<Option<MKey>>,
    refs: Vec<u32>,
    copies: std::collections::BTreeMap<MKey, Vec<u32>>,
    forgotten: std::collections::BTreeSet<u32>,
}

impl Model {
    fn cached(&mut self, u: u32, k: MKey) {
        assert!(
            self.key[u as usize].is_none() && self.refs[u as usize] == 1,
            "registering unit {u}, not a blank held unit"
        );
        self.key[u as usize] = Some(k);
        self.copies.entry(k).or_default().push(u);
    }
}

fn real_lookup(c: &BlockCache, k: MKey) -> Option<u32> {
    match k {
        MKey::Run(key, i) => c.run(key).get(i as usize).copied().filter(|&u| u != NIL),
        MKey::Single(key) => c.lookup(key),
        MKey::Private(id, i) => c.lookup(private_key(id, i)),
    }
}

/// Every observable of the cache against the model: the free queue (cached units by id,
/// blank places as such), reference counts, what every key finds.
fn agree(c: &BlockCache, m: &Model, held: &[Vec<u32>]) -> Result<(), TestCaseError> {
    c.check().map_err(TestCaseError::fail)?;
    let q: Vec<Option<u32>> = c
        .free_iter()
        .map(|u| (c.key_of(u) != 0).then_some(u))
        .collect();
    prop_assert_eq!(&q, &m.queue.iter().copied().collect::<Vec<_>>());
    prop_assert_eq!(c.num_free as usize, m.queue.len());
    let mut holders = vec![0u32; m.refs.len()];
    held.iter()
        .flatten()
        .for_each(|&u| holders[u as usize] += 1);
    for (u, &h) in holders.iter().enumerate() {
        prop_assert_eq!(c.ref_count(u as u32), m.refs[u], "unit {}", u);
        prop_assert_eq!(h, m.refs[u], "unit {}", u);
        prop_assert_eq!(c.key_of(u as u32) != 0, m.key[u].is_some(), "unit {}", u);
    }
    for (&k, units) in &m.copies {
        let gone = matches!(k, MKey::Private(id, _) if m.forgotten.contains(&id));
        let want = if gone { None } else { units.first().copied() };
        prop_assert_eq!(real_lookup(c, k), want, "key {:?}", k);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]
    /// The block cache against vLLM's block pool taken literally, on tiny pools where runs
    /// are split by partial hits, partial eviction and re-registration (duplicates), the
    /// queue's positions counted from near 2³² (their wrap) in some cases.
    #[test]
    fn the_block_cache_is_vllm_s_block_pool(
        total in 2u32..24,
        wrap in any::<bool>(),
        ops in prop::collection::vec((0u8..8, 0u8..8, 0u8..8, 0u8..4), 1..120),
    ) {
        let mut c = awake(total);
        if wrap {
            c.skip_positions(u64::from(u32::MAX) - 40);
        }
        let mut m = Model {
            queue: (0..total).map(|_| None).collect(),
            key: vec![None; total as usize],
            refs: vec![0; total as usize],
            ..Model::default()
        };
        let mut held: Vec<Vec<u32>> = Vec::new();
        for (op, a, b, x) in ops {
            let pick = |n: usize| usize::from(a) % n.max(1);
            match op {
                // Allocate 1..=4 units to a new table or at the end of a held one.
                0 | 1 => {
                    let n = (usize::from(b) % 4 + 1).min(m.queue.len());
                    if n == 0 { continue; }
                    let t = if op == 0 || held.is_empty() { held.push(Vec::new()); held.len() - 1 } else { pick(held.len()) };
                    let from = held[t].len();
                    c.pop_into(&mut held[t], n);
                    for &u in &held[t][from..] {
                        match m.queue.pop_front().unwrap() {
                            None => prop_assert!(m.key[u as usize].is_none() && m.refs[u as usize] == 0, "blank place gave unit {}", u),
                            Some(v) => {
                                prop_assert_eq!(u, v);
                                let k = m.key[u as usize].take().unwrap();
                                m.copies.get_mut(&k).unwrap().retain(|&w| w != u);
                            }
                        }
                        m.refs[u as usize] = 1;
                    }
                }
                // Cache a slice of a held table's blank units in a run (its cached
                // units skipped), or one unit under a single key, or privately.
                2..=4 if !held.is_empty() => {
                    let t = pick(held.len());
                    let len = held[t].len();
                    if len == 0 { continue; }
                    let lo = usize::from(b) % len;
                    let hi = (lo + usize::from(x) + 1).min(len);
                    let units = held[t][lo..hi].to_vec();
                    let free_of_others = |u: u32| m.key[u as usize].is_some() || m.refs[u as usize] == 1;
                    if !units.iter().all(|&u| free_of_others(u)) { continue; }
                    let from = u32::from(b % 3);
                    match op {
                        2 => {
                            let key = 1000 + u64::from(x % 2);
                            c.register_run(key, from, &units);
                            for (k, &u) in units.iter().enumerate() {
                                if m.key[u as usize].is_none() { m.cached(u, MKey::Run(key, from + k as u32)); }
                            }
                        }
                        3 => {
                            let u = units[0];
                            if m.key[u as usize].is_some() { continue; }
                            let key = 1 + u64::from(x % 3);
                            c.register(u, key);
                            m.cached(u, MKey::Single(key));
                        }
                        _ => {
                            let id = u32::from(x % 3);
                            if m.forgotten.contains(&id) { continue; }
                            c.register_private(id, from, &units);
                            for (k, &u) in units.iter().enumerate() {
                                if m.key[u as usize].is_none() { m.cached(u, MKey::Private(id, from + k as u32)); }
                            }
                        }
                    }
                }
                // A hit: the oldest unit cached under a key joins a table (a new one or
                // one without it), out of the free queue if it was there.
                5 => {
                    let keys: Vec<(MKey, u32)> = m.copies.iter()
                        .filter(|(k, v)| !v.is_empty() && !matches!(k, MKey::Private(id, _) if m.forgotten.contains(id)))
                        .map(|(&k, v)| (k, v[0])).collect();
                    if keys.is_empty() { continue; }
                    let (k, u) = keys[pick(keys.len())];
                    prop_assert_eq!(real_lookup(&c, k), Some(u));
                    let t = if b % 2 == 0 || held.is_empty() { held.push(Vec::new()); held.len() - 1 } else { usize::from(b) % held.len() };
                    if held[t].contains(&u) { continue; }
                    c.touch(u);
                    if m.refs[u as usize] == 0 {
                        let at = m.queue.iter().position(|&e| e == Some(u)).unwrap();
                        m.queue.remove(at);
                    }
                    m.refs[u as usize] += 1;
                    held[t].push(u);
                }
                // Free a table, last unit first; its units after the last cached one are
                // freed as known blank (in some cases).
                6 if !held.is_empty() => {
                    let mut table = held.swap_remove(pick(held.len()));
                    let cached_end = table.iter().rposition(|&u| m.key[u as usize].is_some()).map_or(0, |i| i + 1);
                    let blank_from = if b % 2 == 0 { cached_end } else { table.len() };
                    for &u in table.iter().rev() {
                        m.refs[u as usize] -= 1;
                        if m.refs[u as usize] == 0 {
                            m.queue.push_back(m.key[u as usize].is_some().then_some(u));
                        }
                    }
                    c.release_all(&mut table, blank_from);
                    prop_assert!(table.is_empty());
                }
                7 => {
                    let id = u32::from(x % 3);
                    c.forget(id);
                    m.forgotten.insert(id);
                }
                _ => {}
            }
            agree(&c, &m, &held)?;
        }
    }
}
