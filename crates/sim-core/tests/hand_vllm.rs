//! A hand-worked vLLM case: 4 requests, a linear cost model, 5 blocks of 4 tokens and an
//! 8-token budget, so the scheduler chunks a prompt, refuses an admission for lack of
//! blocks, preempts a request (itself, the last admitted), recomputes it, and finishes all.
//! Every step below was worked out by hand from the rules in `sched.rs`.

use sim_core::{simulate, Format, SimOptions};

const SCENARIO: &str = r#"{
  "seed": 1,
  "model": "llama-3-8b",
  "gpu": "h200",
  "scheduler": {"policy": "vllm", "block_size": 4, "num_gpu_blocks": 5,
                "max_num_batched_tokens": 8, "max_num_seqs": 8},
  "cost_model": {"kind": "linear", "base_ms": 1.0, "per_prefill_token_ms": 0.25,
                 "per_decode_seq_ms": 0.5, "per_context_token_ms": 0.125},
  "workload": {"requests": [
    {"arrival_ms": 0, "prompt_tokens": 6, "output_tokens": 4},
    {"arrival_ms": 0, "prompt_tokens": 5, "output_tokens": 3},
    {"arrival_ms": 0, "prompt_tokens": 4, "output_tokens": 2},
    {"arrival_ms": 5, "prompt_tokens": 3, "output_tokens": 2}
  ]}
}"#;

#[test]
fn every_step_matches_the_hand_computation() {
    let res = simulate(SCENARIO, Format::Json, SimOptions { record_steps: true, ..SimOptions::default() }).unwrap();
    type Step = (f64, f64, Vec<(u32, u32)>, Vec<u32>, Vec<u32>);
    let steps: Vec<Step> = res
        .steps
        .iter()
        .map(|s| (s.start_ms, s.end_ms, s.scheduled.clone(), s.preempted.clone(), s.finished.clone()))
        .collect();
    let expected = vec![
        // t=0: R0's whole prompt (6), R1's first chunk (2) exhausts the budget of 8.
        // cost = 1 + 0.25·8 + 0 + 0.125·(6+2) = 4 ms
        (0.0, 4.0, vec![(0, 6), (1, 2)], vec![], vec![]),
        // R0 decodes, R1 finishes its prompt (3), R2 admitted (4 tokens, last free block).
        // cost = 1 + 0.25·7 + 0.5·1 + 0.125·(7+5+4) = 5.25 ms
        (4.0, 9.25, vec![(0, 1), (1, 3), (2, 4)], vec![], vec![]),
        // R2 needs a 2nd block, none free: the last running entry (R2 itself) is
        // preempted; no admissions in this step. cost = 1 + 0.5·2 + 0.125·(8+6) = 3.75 ms
        (9.25, 13.0, vec![(0, 1), (1, 1)], vec![2], vec![]),
        // R0 takes the last block; R2 (5 tokens now) does not fit, so nobody is admitted.
        // cost = 1 + 0.5·2 + 0.125·(9+7) = 4 ms; R0 and R1 finish.
        (13.0, 17.0, vec![(0, 1), (1, 1)], vec![], vec![0, 1]),
        // R2 recomputes prompt + its 1 generated token (5, counted as prefill), R3 admitted.
        // cost = 1 + 0.25·8 + 0.125·(5+3) = 4 ms; R2 produces its 2nd token and finishes.
        (17.0, 21.0, vec![(2, 5), (3, 3)], vec![], vec![2]),
        // R3 decodes: cost = 1 + 0.5 + 0.125·4 = 2 ms.
        (21.0, 23.0, vec![(3, 1)], vec![], vec![3]),
    ];
    assert_eq!(steps, expected);

    let r = &res.requests;
    assert_eq!(r.first_token_ms, vec![4.0, 9.25, 9.25, 21.0]);
    assert_eq!(r.finish_ms, vec![17.0, 17.0, 21.0, 23.0]);
    assert_eq!(r.preemptions, vec![0, 0, 1, 0]);
    assert_eq!(r.status, vec![0, 0, 0, 0]);
    assert_eq!(res.summary["preemptions"], 1);
    // R2's failed growth at 9.25 ms and its refused re-admission at 13 ms (R3 was never
    // considered at 9.25: no admissions in a step that preempted).
    assert_eq!(res.summary["allocation_failures"], 2);
}
