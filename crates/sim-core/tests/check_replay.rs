//! The model checker through the public API: a mutant's counterexample, exported as a
//! scenario, makes the ordinary simulator (invariant checks on) stop on the same property;
//! the same scenario without the bug runs to the end.

use sim_core::check::{check, CheckOptions};
use sim_core::{Format, SimError, SimOptions};

const SCENARIO: &str = r#"{"model": "llama-3-8b", "gpu": "h200",
  "scheduler": {"policy": "sarathi", "block_size": 4, "num_gpu_blocks": 6, "chunk_size": 8,
                "max_num_seqs": 8, "inject_bug": "leak_on_preempt"},
  "workload": {"requests": [{"arrival_ms": 0, "prompt_tokens": 6, "output_tokens": 4},
                            {"arrival_ms": 0, "prompt_tokens": 5, "output_tokens": 3},
                            {"arrival_ms": 0, "prompt_tokens": 4, "output_tokens": 3}]}}"#;

#[test]
fn a_counterexample_replays_in_the_simulator() {
    let r = check(SCENARIO, Format::Json, CheckOptions::default()).unwrap();
    assert!(!r.ok && r.complete);
    let v = &r.violations[0];
    assert_eq!(v.property, "block_accounting");
    let mut replay = v.replay_scenario.clone().expect("one replica: always timed");
    let text = replay.to_string();
    let on = SimOptions { check_invariants: true, ..SimOptions::default() };
    match sim_core::simulate(&text, Format::Json, on) {
        Err(SimError::Internal { message }) => assert!(message.contains("block_accounting"), "{message}"),
        other => panic!("expected the invariant to break, got {:?}", other.map(|r| r.summary)),
    }
    replay["scheduler"].as_object_mut().unwrap().remove("inject_bug");
    let fixed = sim_core::simulate(&replay.to_string(), Format::Json, on).unwrap();
    assert_eq!(fixed.summary["finished"], 3);
}
