//! Tests of the prefix cache: the block cache's queue and indexes, and the shortcuts
//! against the literal algorithm.

use super::*;

/// An awake cache over `total` free units, queued in id order.
fn awake(total: u32) -> BlockCache {
    let mut c = BlockCache::new(total);
    c.activate(&mut crate::kv::free::FreeStack::new(total));
    c
}

/// Units `n` at the queue's head, one by one.
fn pop(c: &mut BlockCache, n: usize) -> Vec<u32> {
    let mut t = Vec::new();
    assert!(c.pop_into(&mut t, n));
    t
}

/// What a lookup along the run under `key` from index `from` finds (at most `max`).
fn find(c: &BlockCache, key: RunKey, from: u32, max: u32) -> (Vec<u32>, Vec<Seg>) {
    let (mut out, mut segs) = (Vec::new(), Vec::new());
    let e = match key {
        RunKey::Shared(h) => c.shared_run(h),
        RunKey::Private(id) => c.private_run(id),
        RunKey::Free => None,
    };
    if let Some(e) = e {
        c.hits(e, from, max, &mut out, &mut segs);
    }
    (out, segs)
}

#[test]
fn free_queue_is_fifo_with_removal_from_the_middle() {
    let mut c = awake(6);
    let units = pop(&mut c, 4);
    assert_eq!(units, vec![0, 1, 2, 3]);
    let e: Vec<u32> = units.iter().enumerate().map(|(k, &u)| c.register(RunKey::Shared(10 + k as u64), 0, &[u])).collect();
    c.release(e[1], 0, &[1]);
    c.release(e[0], 0, &[0]);
    c.release(e[3], 0, &[3]);
    c.release(e[2], 0, &[2]);
    // Queue: the two units never used, 4, 5, then 1, 0, 3, 2 as freed.
    assert_eq!(c.free_iter().collect::<Vec<_>>(), vec![4, 5, 1, 0, 3, 2]);
    let (hit, segs) = find(&c, RunKey::Shared(13), 0, 1);
    assert_eq!(hit, vec![3]);
    c.touch(segs[0]);
    assert_eq!(c.free_iter().collect::<Vec<_>>(), vec![4, 5, 1, 0, 2]);
    assert_eq!(c.num_free, 5);
    c.check().unwrap();
    // Allocation takes the head: 4, 5, then 1 (its block evicted), 0, skipping 3.
    assert_eq!(pop(&mut c, 4), vec![4, 5, 1, 0]);
    let at = |c: &BlockCache, k| c.lookup(RunKey::Shared(k), 0);
    assert_eq!((at(&c, 11), at(&c, 10), at(&c, 13), at(&c, 12)), (None, None, Some(3), Some(2)));
    c.check().unwrap();
}

/// A piece freed last unit first loses its tail first: what is left is a prefix.
#[test]
fn a_partly_evicted_piece_keeps_its_prefix() {
    let mut c = awake(6);
    let t = pop(&mut c, 4);
    let e = c.register(RunKey::Shared(7), 0, &t);
    c.release(e, 0, &t);
    // Queue: 4, 5, 3, 2, 1, 0.
    assert_eq!(c.free_iter().collect::<Vec<_>>(), vec![4, 5, 3, 2, 1, 0]);
    assert_eq!(pop(&mut c, 3), vec![4, 5, 3]);
    assert_eq!(find(&c, RunKey::Shared(7), 0, 4).0, vec![0, 1, 2]);
    assert_eq!(find(&c, RunKey::Shared(7), 1, 4).0, vec![1, 2]);
    assert_eq!(find(&c, RunKey::Shared(7), 3, 4).0, Vec::<u32>::new());
    c.check().unwrap();
}

#[test]
fn duplicates_are_found_oldest_first_and_eviction_keeps_the_rest() {
    let mut c = awake(4);
    let (a, b) = (pop(&mut c, 1), pop(&mut c, 1));
    let e = c.register(RunKey::Shared(42), 0, &a);
    assert_eq!(c.register(RunKey::Shared(42), 0, &b), e);
    assert_eq!(c.lookup(RunKey::Shared(42), 0), Some(a[0]));
    c.release(e, 0, &a);
    c.release(e, 0, &b);
    // Queue: 2, 3, a, b: two allocations leave both cached, the third evicts a.
    assert_eq!(pop(&mut c, 2), vec![2, 3]);
    assert_eq!(pop(&mut c, 1), a);
    assert_eq!(c.lookup(RunKey::Shared(42), 0), Some(b[0]));
    c.check().unwrap();
}

#[test]
fn private_copies_are_found_oldest_first_and_a_done_request_is_forgotten() {
    let mut c = awake(6);
    let (ab, x) = (pop(&mut c, 2), pop(&mut c, 1));
    // Request 9 cached its unit index 0 on a, later again (a recompute) on x.
    let e = c.register(RunKey::Private(9), 0, &ab);
    c.register(RunKey::Private(9), 0, &x);
    assert_eq!(find(&c, RunKey::Private(9), 0, 2).0, ab);
    c.release(e, 0, &ab);
    c.release(e, 0, &x);
    // Queue: 3, 4, 5, b, a, x. Reusing b and a leaves x as index 0's copy.
    assert_eq!(pop(&mut c, 5), vec![3, 4, 5, ab[1], ab[0]]);
    assert_eq!(find(&c, RunKey::Private(9), 0, 2).0, x);
    c.check().unwrap();
    // Done: its units stay in the queue, but nobody finds them.
    c.forget(9);
    assert_eq!(c.lookup(RunKey::Private(9), 0), None);
    c.check().unwrap();
    assert_eq!(pop(&mut c, 1), x);
    c.check().unwrap();
}

/// The free queue keeps vLLM's order through many removals from the middle, including
/// when its holes are packed away: checked against a plain list. Every held unit is
/// cached (a fresh key each time).
#[test]
fn free_queue_order_survives_packing() {
    let n = 4000u32;
    let mut c = awake(n);
    let mut model: std::collections::VecDeque<u32> = (0..n).collect();
    let mut held: Vec<(u32, u32)> = Vec::new();
    let mut key_of: std::collections::HashMap<u32, u64> = std::collections::HashMap::new();
    let mut x = 7u64;
    let mut rnd = |m: usize| {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (x >> 33) as usize % m.max(1)
    };
    let mut key = 0u64;
    for step in 0..60_000 {
        match rnd(5) {
            0 if !model.is_empty() => {
                let u = pop(&mut c, 1)[0];
                assert_eq!(Some(u), model.pop_front(), "step {step}");
                key += 1;
                let e = c.register(RunKey::Shared(key), 0, &[u]);
                key_of.insert(u, key);
                held.push((e, u));
            }
            1 if !held.is_empty() => {
                let (e, u) = held.swap_remove(rnd(held.len()));
                c.release(e, 0, &[u]);
                model.push_back(u);
            }
            _ if !model.is_empty() => {
                // A hit on a free cached unit: out of the middle of the queue.
                let i = rnd(model.len());
                let Some(&k) = key_of.get(&model[i]) else { continue };
                let (hit, segs) = find(&c, RunKey::Shared(k), 0, 1);
                assert_eq!(hit, vec![model[i]], "step {step}");
                let u = model.remove(i).unwrap();
                c.touch(segs[0]);
                held.push((segs[0].0, u));
            }
            _ => {}
        }
    }
    assert_eq!(c.free_iter().collect::<Vec<_>>(), model.iter().copied().collect::<Vec<_>>());
    assert_eq!(c.num_free as usize, model.len());
    c.check().unwrap();
}

use crate::workload::{After, Workload};

/// Cases per property: 384, or `PROPTEST_CASES` (`make fuzz`).
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(384)
}
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

/// The run's result: vLLM's algorithm taken literally, or the shortcuts with families of
/// at most `cold_max` members registered cold (0: every shared block indexed).
fn result(text: &str, w: &Workload, literal: bool, cold_max: u32) -> String {
    let sc = crate::config::Scenario::parse(text, Format::Json).unwrap();
    let opts = SimOptions { check_invariants: true, ..SimOptions::default() };
    let mut sim = Simulation::with_workload(sc, w.clone(), opts).unwrap();
    sim.engine_mut().apc.cold_max = cold_max;
    if literal {
        let e = sim.engine_mut();
        e.apc.make_literal(&w.requests, w.segments.clone());
        e.replicas.iter_mut().for_each(|r| {
            r.sched.kv.awake_cache();
        });
    }
    sim.finish().unwrap().to_json()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), .. ProptestConfig::default() })]
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
        cold_max in prop::sample::select(vec![0u32, 2, 32]),
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
        prop_assert_eq!(result(&text, &w, false, cold_max), result(&text, &w, true, 0));
    }
}

/// A key of the model below: (0 shared | 1 private, block hash | request id, unit index).
type MKey = (u8, u64, u32);

fn mkey(k: RunKey, i: u32) -> MKey {
    match k {
        RunKey::Shared(h) => (0, h, i),
        RunKey::Private(id) => (1, u64::from(id), i),
        RunKey::Free => unreachable!(),
    }
}

/// vLLM's `BlockPool` taken literally, one block at a time: the free queue as a list of
/// units, per unit its key and holders, per key its cached units oldest first.
#[derive(Default)]
struct Model {
    queue: std::collections::VecDeque<u32>,
    key: Vec<Option<MKey>>,
    refs: Vec<u32>,
    copies: std::collections::BTreeMap<MKey, Vec<u32>>,
    forgotten: std::collections::BTreeSet<u32>,
}

/// A table as a request holds it: its units, and its ranges of cached copies (table
/// position, run, first index, length, key).
#[derive(Default, Clone)]
struct Table {
    units: Vec<u32>,
    segs: Vec<(usize, u32, u32, u32, RunKey)>,
}

/// Every observable of the cache against the model: the free queue, reference counts,
/// what every key finds.
fn agree(c: &BlockCache, m: &Model) -> Result<(), TestCaseError> {
    c.check().map_err(TestCaseError::fail)?;
    prop_assert_eq!(c.free_iter().collect::<Vec<_>>(), m.queue.iter().copied().collect::<Vec<_>>());
    prop_assert_eq!(c.num_free as usize, m.queue.len());
    // (Units never handed out are left out: free.)
    let mut refs = c.ref_counts();
    refs.resize(m.refs.len(), 0);
    prop_assert_eq!(refs, m.refs.clone());
    for (&(kind, k, i), units) in &m.copies {
        let key = if kind == 0 { RunKey::Shared(k) } else { RunKey::Private(k as u32) };
        let gone = kind == 1 && m.forgotten.contains(&(k as u32));
        let want = if gone { None } else { units.first().copied() };
        prop_assert_eq!(c.lookup(key, i), want, "key {:?}", (kind, k, i));
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), .. ProptestConfig::default() })]
    /// The block cache against vLLM's block pool taken literally, on tiny pools where
    /// pieces are split by partial hits, partial eviction and re-registration
    /// (duplicates), and the queue's holes are packed. Before the cache wakes, the pool's
    /// lazy free stack ([`crate::kv::free::FreeStack`]) hands out and takes back units as
    /// the whole stack does (`dormant`); it then becomes the queue, its units never handed
    /// out a range inside it, and the queue goes on as the literal one from the whole stack.
    #[test]
    fn the_block_cache_is_vllm_s_block_pool(
        total in 2u32..24,
        far in any::<bool>(),
        dormant in prop::collection::vec((0u8..3, 0u8..6, 0u8..8), 0..24),
        ops in prop::collection::vec((0u8..8, 0u8..8, 0u8..8, 0u8..4), 1..120),
    ) {
        // The dormant pool: the lazy stack against `(0..total).rev()` with freed units on top.
        let mut stack = crate::kv::free::FreeStack::new(total);
        let mut eager: Vec<u32> = (0..total).rev().collect();
        let mut held: Vec<Table> = Vec::new();
        for (op, n, a) in dormant {
            match op {
                0 | 1 => {
                    let n = usize::from(n).min(eager.len());
                    if n == 0 { continue; }
                    let t = if op == 0 || held.is_empty() { held.push(Table::default()); held.len() - 1 } else { usize::from(a) % held.len() };
                    stack.make_room(n, crate::limits::queue_holes_max).unwrap();
                    let from = held[t].units.len();
                    stack.take_into(&mut held[t].units, n);
                    let at = eager.len() - n;
                    let want: Vec<u32> = eager.drain(at..).rev().collect();
                    prop_assert_eq!(&held[t].units[from..], &want[..]);
                }
                _ if !held.is_empty() => {
                    let t = held.swap_remove(usize::from(a) % held.len());
                    stack.push_all(t.units.iter().rev().copied());
                    eager.extend(t.units.iter().rev());
                }
                _ => {}
            }
            prop_assert_eq!(stack.iter().collect::<Vec<_>>(), eager.clone());
        }
        let mut c = BlockCache::new(total);
        c.activate(&mut stack);
        prop_assert!(stack.is_empty());
        if far {
            // Queue positions counted from past 2³² (they are 64-bit).
            c.skip_positions(u64::from(u32::MAX) - 40);
        }
        let mut m = Model {
            // The whole stack, top (allocated next) at the head.
            queue: eager.iter().rev().copied().collect(),
            key: vec![None; total as usize],
            refs: vec![0; total as usize],
            ..Model::default()
        };
        for t in &held {
            for &u in &t.units {
                m.refs[u as usize] = 1;
            }
        }
        agree(&c, &m)?;
        for (op, a, b, x) in ops {
            let pick = |n: usize| usize::from(a) % n.max(1);
            match op {
                // Allocate 1..=4 units to a new table or at the end of a held one.
                0 | 1 => {
                    let n = (usize::from(b) % 4 + 1).min(m.queue.len());
                    if n == 0 { continue; }
                    let t = if op == 0 || held.is_empty() { held.push(Table::default()); held.len() - 1 } else { pick(held.len()) };
                    let from = held[t].units.len();
                    prop_assert!(c.pop_into(&mut held[t].units, n));
                    for &u in &held[t].units[from..] {
                        prop_assert_eq!(Some(u), m.queue.pop_front());
                        if let Some(k) = m.key[u as usize].take() {
                            m.copies.get_mut(&k).unwrap().retain(|&w| w != u);
                        }
                        m.refs[u as usize] = 1;
                    }
                }
                // Cache blank units at the end of a held table in a shared or a private run.
                2 | 3 if !held.is_empty() => {
                    let t = pick(held.len());
                    let s0 = held[t].segs.iter().map(|g| g.0 + g.3 as usize).max().unwrap_or(0);
                    let len = held[t].units.len();
                    if s0 >= len { continue; }
                    let lo = s0 + usize::from(b) % (len - s0);
                    let hi = (lo + usize::from(x) + 1).min(len);
                    let key = if op == 2 { RunKey::Shared(1000 + u64::from(x % 2)) } else { RunKey::Private(u32::from(x % 3)) };
                    if matches!(key, RunKey::Private(id) if m.forgotten.contains(&id)) { continue; }
                    let from = u32::from(b % 3);
                    let units = held[t].units[lo..hi].to_vec();
                    let e = c.register(key, from, &units);
                    held[t].segs.push((lo, e, from, units.len() as u32, key));
                    for (k, &u) in units.iter().enumerate() {
                        let mk = mkey(key, from + k as u32);
                        m.key[u as usize] = Some(mk);
                        m.copies.entry(mk).or_default().push(u);
                    }
                }
                // A hit: the oldest copies of 1..=3 indices from a cached one join a table
                // (a new one or one without them), out of the free queue if there.
                4 | 5 => {
                    let keys: Vec<MKey> = m.copies.iter()
                        .filter(|(k, v)| !(v.is_empty() || k.0 == 1 && m.forgotten.contains(&(k.1 as u32))))
                        .map(|(&k, _)| k).collect();
                    if keys.is_empty() { continue; }
                    let (kind, k, i) = keys[pick(keys.len())];
                    let key = if kind == 0 { RunKey::Shared(k) } else { RunKey::Private(k as u32) };
                    let n = u32::from(x % 3) + 1;
                    let want: Vec<u32> = (i..i + n)
                        .map_while(|j| m.copies.get(&(kind, k, j)).and_then(|v| v.first().copied()))
                        .collect();
                    let (got, segs) = find(&c, key, i, n);
                    prop_assert_eq!(&got, &want);
                    let t = if b % 2 == 0 || held.is_empty() { held.push(Table::default()); held.len() - 1 } else { usize::from(b) % held.len() };
                    if got.iter().any(|u| held[t].units.contains(u)) { continue; }
                    let mut pos = held[t].units.len();
                    for &g in &segs {
                        c.touch(g);
                        held[t].segs.push((pos, g.0, g.1, g.2, key));
                        pos += g.2 as usize;
                    }
                    held[t].units.extend_from_slice(&got);
                    for &u in &got {
                        if m.refs[u as usize] == 0 {
                            let at = m.queue.iter().position(|&e| e == u).unwrap();
                            m.queue.remove(at);
                        }
                        m.refs[u as usize] += 1;
                    }
                }
                // Free a table, last unit first: up to 2 units past its cached ones hold no
                // hash and go to the queue's front (vLLM's `prepend_n`), the others to its tail.
                6 if !held.is_empty() => {
                    let mut t = held.swap_remove(pick(held.len()));
                    let s0 = t.segs.iter().map(|g| g.0 + g.3 as usize).max().unwrap_or(0);
                    let hashed = t.units.len().saturating_sub(usize::from(x % 3)).max(s0);
                    let mut front = Vec::new();
                    for (k, &u) in t.units.iter().enumerate().rev() {
                        m.refs[u as usize] -= 1;
                        if m.refs[u as usize] == 0 {
                            if k >= hashed { front.push(u) } else { m.queue.push_back(u) }
                        }
                    }
                    for &u in front.iter().rev() {
                        m.queue.push_front(u);
                    }
                    c.prepend_blank(&t.units[hashed..]);
                    t.segs.sort_by_key(|g| std::cmp::Reverse(g.0));
                    let mut end = hashed;
                    for &(pos, e, lo, n, _) in &t.segs {
                        let to = pos + n as usize;
                        c.free_blank(&t.units[to..end]);
                        c.release(e, lo, &t.units[pos..to]);
                        end = pos;
                    }
                    c.free_blank(&t.units[..end]);
                }
                // A request is done (none of its private copies held).
                7 => {
                    let id = u32::from(x % 3);
                    if held.iter().any(|t| t.segs.iter().any(|g| g.4 == RunKey::Private(id))) { continue; }
                    c.forget(id);
                    m.forgotten.insert(id);
                }
                _ => {}
            }
            agree(&c, &m)?;
        }
    }
}
