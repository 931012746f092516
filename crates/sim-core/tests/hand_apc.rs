//! A hand-worked vLLM case with prefix caching: 6 blocks of 4 tokens, a linear cost model,
//! and four requests, three of which share an 8-token prefix S (two blocks). Every step
//! below was worked out by hand from the rules in `sched.rs` and `prefix.rs`:
//! - a request holding cached blocks is preempted (C, step 4); its blocks stay cached,
//!   freed last block first, so the free queue is [C's tail, C's S blocks, A's full block];
//! - no eviction: the next block allocated (B's growth, step 5) is A's partly filled last
//!   block, which A's finish put at the queue's front (it holds no hash: vLLM prepends it),
//!   so C re-admitted hits its two S blocks and its own third (12 of 13 tokens);
//! - a whole-prompt hit (D, step 6): its prompt is exactly S, fully cached, but the hit is
//!   capped at prompt − 1 tokens rounded down to whole blocks, so it recomputes its last
//!   block (4 of 8 tokens hit) — into a new block, cached as a duplicate of S's second.
//!
//! Units are handed out from the free queue's head: initially 0, 1, …, 5.

use sim_core::config::Scenario;
use sim_core::workload::{RequestSpec, Segment, Workload};
use sim_core::{Format, SimOptions, SimResult, Simulation};

const SCENARIO: &str = r#"{
  "seed": 1,
  "model": "llama-3-8b",
  "gpu": "h200",
  "scheduler": {"policy": "vllm", "block_size": 4, "num_gpu_blocks": 6,
                "max_num_batched_tokens": 32, "max_num_seqs": 8},
  "cost_model": {"kind": "linear", "base_ms": 1.0, "per_prefill_token_ms": 0.25,
                 "per_decode_seq_ms": 0.5, "per_context_token_ms": 0.125},
  "workload": {"requests": [{"arrival_ms": 0, "prompt_tokens": 1, "output_tokens": 1}]}
}"#;

/// S: 8 tokens of stream 7. A: 2 unique prompt tokens, 4 out. B: 1 unique, 7 out. C: S +
/// 2 unique, 4 out. D (at 20 ms): exactly S, 1 out.
fn workload() -> Workload {
    let s = |id, at_ms: u64, prompt, output, segs| RequestSpec { segs, ..RequestSpec::new(id, at_ms * 1_000_000, prompt, output, 0) };
    Workload {
        requests: vec![s(0, 0, 2, 4, (0, 0)), s(1, 0, 1, 7, (0, 0)), s(2, 0, 10, 4, (0, 1)), s(3, 20, 8, 1, (0, 1))],
        segments: vec![Segment { key: 7, len: 8 }],
    }
}

fn run(caching: bool) -> SimResult {
    let mut sc = Scenario::parse(SCENARIO, Format::Json).unwrap();
    sc.scheduler.enable_prefix_caching = Some(caching);
    let opts = SimOptions { record_steps: true, ..SimOptions::default() };
    Simulation::with_workload(sc, workload(), opts).unwrap().finish().unwrap()
}

type Step = (f64, f64, Vec<(u32, u32)>, Vec<u32>, Vec<u32>, u64);

fn steps(r: &SimResult) -> Vec<Step> {
    r.steps
        .iter()
        .map(|s| (s.start_ms, s.end_ms, s.scheduled.clone(), s.preempted.clone(), s.finished.clone(), s.free_blocks_after))
        .collect()
}

#[test]
fn every_step_matches_the_hand_computation() {
    let res = run(true);
    let expected: Vec<Step> = vec![
        // t=0: A (2 tokens, unit 0), B (1, unit 1), C (10, units 2-4; S's blocks cached on
        // units 2 and 3 as they are scheduled). Nothing was cached before: no hit.
        // cost = 1 + 0.25·13 + 0.125·(2+1+10) = 5.875 ms. Free: [5].
        (0.0, 5.875, vec![(0, 2), (1, 1), (2, 10)], vec![], vec![], 1),
        // Decodes. cost = 1 + 0.5·3 + 0.125·(3+2+11) = 4.5 ms.
        (5.875, 10.375, vec![(0, 1), (1, 1), (2, 1)], vec![], vec![], 1),
        // cost = 1 + 1.5 + 0.125·(4+3+12) = 4.875 ms.
        (10.375, 15.25, vec![(0, 1), (1, 1), (2, 1)], vec![], vec![], 1),
        // A grows into unit 5, the last free one; C (13 tokens) needs a 4th unit: none, so
        // the last running entry, C itself, is preempted. Its 3 full blocks stay cached
        // (S's two by hash, its third by its own key), freed in reverse: queue [4, 3, 2].
        // cost = 1 + 0.5·2 + 0.125·(5+4) = 3.125 ms. A finishes with 5 tokens computed: its
        // full block (unit 0) is appended, its partly filled one (unit 5, no hash) goes to
        // the queue's front (vLLM's `prepend_n`): queue [5 | 4, 3, 2, 0].
        (15.25, 18.375, vec![(0, 1), (1, 1)], vec![2], vec![0], 5),
        // B grows into unit 5, the front: nothing is evicted. C (13 tokens: prompt + 3
        // generated) looks up: S's blocks (units 2, 3) and its own third block (unit 4) hit,
        // the cap (13−1)/4 = 3 blocks; it recomputes 1 token into unit 0.
        // cost = 1 + 0.25·1 + 0.5·1 + 0.125·(5+13) = 4 ms. C finishes: its partly filled
        // unit 0 to the front, its three full blocks appended: queue [0 | 4, 3, 2].
        (18.375, 22.375, vec![(1, 1), (2, 1)], vec![], vec![2], 4),
        // D (arrived at 20 ms) is exactly S, both blocks cached, but a hit is at most
        // 8 − 1 = 7 tokens, rounded down to one block: it hits unit 2 and recomputes 4
        // tokens into unit 0 (the front; cached under S's second hash, after unit 3).
        // cost = 1 + 0.25·4 + 0.5·1 + 0.125·(6+8) = 4.25 ms.
        (22.375, 26.625, vec![(1, 1), (3, 4)], vec![], vec![3], 4),
        // cost = 1 + 0.5 + 0.125·7 = 2.375 ms.
        (26.625, 29.0, vec![(1, 1)], vec![], vec![1], 6),
    ];
    assert_eq!(steps(&res), expected);

    let r = &res.requests;
    assert_eq!(r.first_token_ms, vec![5.875, 5.875, 5.875, 26.625]);
    assert_eq!(r.finish_ms, vec![18.375, 29.0, 22.375, 26.625]);
    assert_eq!(r.preemptions, vec![0, 0, 1, 0]);
    // vLLM's num_cached_tokens: hits at the first admission only.
    assert_eq!(r.cached_tokens, vec![0, 0, 0, 4]);
    // First admissions only (vLLM's counters): A 2 + B 1 + C 10 + D 8 looked up, D's 4 hit;
    // C's re-admission (12 hit) is in vLLM's separate "preempted" class.
    assert_eq!(res.summary["prefix_cache_queries"], 21);
    assert_eq!(res.summary["prefix_cache_hits"], 4);
    assert_eq!(res.summary["prefix_cache_hit_rate"], 4.0 / 21.0);
    assert_eq!(res.summary["allocation_failures"], 1);
}

#[test]
fn without_caching_the_preempted_and_the_repeated_prompt_are_recomputed() {
    let res = run(false);
    let s = steps(&res);
    // Same first four steps; then C recomputes all 13 tokens and D all 8.
    assert_eq!(s[3].2, vec![(0, 1), (1, 1)]);
    assert_eq!(s[4].2, vec![(1, 1), (2, 13)]);
    assert_eq!(s[5].2, vec![(1, 1), (3, 8)]);
    assert_eq!(res.summary["prefix_cache_queries"], 0);
    assert_eq!(res.requests.cached_tokens, vec![0, 0, 0, 0]);
    let on = run(true);
    assert!(res.requests.finish_ms[2] > on.requests.finish_ms[2]);
    assert!(res.requests.first_token_ms[3] - 20.0 > on.requests.first_token_ms[3] - 20.0);
}
