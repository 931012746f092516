//! Hand-worked cases of the `trtllm` policy (TensorRT-LLM's capacity and micro-batch
//! schedulers, `sched/trtllm.rs`): a linear cost model (1 ms + 0.25 ms a prefill token +
//! 0.5 ms a decoding sequence), KV blocks of 4 tokens, every request at t = 0. Every step
//! below was worked out by hand from the rules in the module's docs.

use sim_core::config::{CapacityPolicy, Scenario};
use sim_core::workload::{RequestSpec, Workload};
use sim_core::{Format, SimOptions, SimResult, Simulation};

fn scenario(blocks: u32, max_batch_size: u32, max_num_tokens: u32, cap: &str) -> Scenario {
    let text = format!(
        r#"{{"seed": 1, "model": "llama-3-8b", "gpu": "h200",
            "scheduler": {{"policy": "trtllm", "block_size": 4, "num_gpu_blocks": {blocks},
                          "max_batch_size": {max_batch_size}, "max_num_tokens": {max_num_tokens},
                          "capacity_scheduler_policy": "{cap}"}},
            "cost_model": {{"kind": "linear", "base_ms": 1.0, "per_prefill_token_ms": 0.25, "per_decode_seq_ms": 0.5}},
            "workload": {{"requests": [{{"arrival_ms": 0, "prompt_tokens": 1, "output_tokens": 1}}]}}}}"#
    );
    Scenario::parse(&text, Format::Json).unwrap()
}

/// Requests (prompt, output), all at t = 0.
fn run(sc: Scenario, lengths: &[(u32, u32)]) -> SimResult {
    let requests = lengths.iter().enumerate().map(|(i, &(p, o))| RequestSpec::new(i as u32, 0, p, o, 0)).collect();
    let opts = SimOptions { record_steps: true, ..SimOptions::default() };
    Simulation::with_workload(sc, Workload { requests, segments: Vec::new() }, opts).unwrap().finish().unwrap()
}

type Step = (f64, f64, Vec<(u32, u32)>, Vec<u32>, u64);

fn steps(r: &SimResult) -> Vec<Step> {
    r.steps.iter().map(|s| (s.start_ms, s.end_ms, s.scheduled.clone(), s.preempted.clone(), s.free_blocks_after)).collect()
}

#[test]
fn guaranteed_no_evict_reserves_whole_lengths_and_schedules_whole_contexts() {
    // 6 blocks; at most 3 requests and 8 tokens a step. A (4+4 tokens: 2 blocks whole),
    // B (6+6: 3), C (2+2: 1), D (3+3: 2).
    let res = run(scenario(6, 3, 8, "guaranteed_no_evict"), &[(4, 4), (6, 6), (2, 2), (3, 3)]);
    let expected: Vec<Step> = vec![
        // Capacity: A (2 of 6 free), B (3), C (1) fit their whole lengths; the batch is full
        // before D. Micro-batch: A's 4-token context, then B's 6 would pass 8 tokens: stop.
        // cost = 1 + 0.25·4 = 2 ms. A holds 1 block.
        (0.0, 2.0, vec![(0, 4)], vec![], 5),
        // A may still need 1 block: 5 − 1 = 4 left; B (3) and C (1) fit. A's token + B's 6;
        // C's 2 would pass 8. cost = 1 + 0.25·6 + 0.5 = 3 ms. A 2 blocks, B 2.
        (2.0, 5.0, vec![(0, 1), (1, 6)], vec![], 2),
        // 2 free, A needs 0 more, B 1: 1 left, C's 1 fits. cost = 1 + 0.25·2 + 0.5·2 = 2.5.
        (5.0, 7.5, vec![(0, 1), (1, 1), (2, 2)], vec![], 1),
        // Three running: the batch is full, D waits. A and C produce their last token.
        (7.5, 10.0, vec![(0, 1), (1, 1), (2, 1)], vec![], 4),
        // 4 free, B may need 1: D's 2 fit. B grows into its third block.
        (10.0, 12.25, vec![(1, 1), (3, 3)], vec![], 2),
        (12.25, 14.25, vec![(1, 1), (3, 1)], vec![], 2),
        (14.25, 16.25, vec![(1, 1), (3, 1)], vec![], 6),
    ];
    assert_eq!(steps(&res), expected);
    let r = &res.requests;
    assert_eq!(r.first_token_ms, vec![2.0, 5.0, 7.5, 12.25]);
    assert_eq!(r.finish_ms, vec![10.0, 16.25, 10.0, 16.25]);
    assert_eq!(r.preemptions, vec![0, 0, 0, 0]);
    assert_eq!(res.deployment["trtllm"]["capacity_scheduler_policy"], "guaranteed_no_evict");
    assert_eq!(res.deployment["trtllm"]["max_batch_size"], 3);
    assert_eq!(res.deployment["trtllm"]["max_num_tokens"], 8);
}

#[test]
fn max_utilization_admits_on_this_step_s_blocks_and_pauses_the_last_started() {
    // 4 blocks, A and B (4+6 tokens each: 3 blocks whole).
    let res = run(scenario(4, 4, 16, "max_utilization"), &[(4, 6), (4, 6)]);
    let expected: Vec<Step> = vec![
        // Each context needs 1 block now: both start. cost = 1 + 0.25·8 = 3 ms.
        (0.0, 3.0, vec![(0, 4), (1, 4)], vec![], 2),
        // Both grow into their second block. cost = 1 + 0.5·2 = 2 ms.
        (3.0, 5.0, vec![(0, 1), (1, 1)], vec![], 0),
        (5.0, 7.0, vec![(0, 1), (1, 1)], vec![], 0),
        (7.0, 9.0, vec![(0, 1), (1, 1)], vec![], 0),
        (9.0, 11.0, vec![(0, 1), (1, 1)], vec![], 0),
        // A's ninth token needs a third block, none is free: the last started request, B,
        // is paused (its 2 blocks freed, its 9 tokens to recompute) and A goes on alone,
        // producing its last token. cost = 1 + 0.5 = 1.5 ms.
        (11.0, 12.5, vec![(0, 1)], vec![1], 4),
        // B recomputes its prompt and the 5 tokens it had generated: its last token.
        // cost = 1 + 0.25·9 = 3.25 ms.
        (12.5, 15.75, vec![(1, 9)], vec![], 4),
    ];
    assert_eq!(steps(&res), expected);
    assert_eq!(res.requests.finish_ms, vec![12.5, 15.75]);
    assert_eq!(res.requests.preemptions, vec![0, 1]);
    assert_eq!(res.summary["preemptions"], 1);

    // The same requests under guaranteed_no_evict: B waits until A has finished (A's 3
    // blocks reserved leave 1), nothing is paused, and B finishes later.
    let gne = run(scenario(4, 4, 16, "guaranteed_no_evict"), &[(4, 6), (4, 6)]);
    assert_eq!(gne.requests.preemptions, vec![0, 0]);
    assert_eq!(gne.requests.first_token_ms, vec![2.0, 11.5]);
    assert_eq!(gne.requests.finish_ms, vec![9.5, 19.0]);
    assert!(gne.summary["allocation_failures"].as_u64().unwrap() > 0);
}

#[test]
fn a_request_that_can_never_be_reserved_is_refused_at_arrival() {
    // 8 + 9 tokens: 5 blocks whole, more than the pool's 4. Guaranteed-no-evict reserves the
    // whole length, so it can never start; max_utilization needs its 16 KV tokens (the last
    // one is never written): 4 blocks, it runs.
    let gne = run(scenario(4, 4, 16, "guaranteed_no_evict"), &[(8, 9)]);
    assert_eq!(gne.requests.status, vec![1]);
    assert_eq!(gne.requests.reason[0], 2); // "kv cache too small"
    let mu = run(scenario(4, 4, 16, "max_utilization"), &[(8, 9)]);
    assert_eq!(mu.requests.status, vec![0]);
}

#[test]
fn the_capacity_policy_parses_by_name() {
    let sc = scenario(4, 4, 16, "max_utilization");
    assert_eq!(sc.scheduler.capacity_scheduler_policy, Some(CapacityPolicy::MaxUtilization));
}
