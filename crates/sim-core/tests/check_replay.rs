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

/// Two replicas, five requests: the shortest leak needs replica 1's step to outlast replica
/// 0's longer ones, which no timing of one shared cost model produces; the replay follows
/// another order to the same violation, and the simulator breaks the same property.
const TWO_REPLICAS: &str = r#"{"model": "llama-3-8b", "gpu": "h200", "deployment": {"replicas": 2},
  "scheduler": {"policy": "vllm", "block_size": 4, "num_gpu_blocks": 5, "max_num_batched_tokens": 16,
                "max_num_seqs": 8, "inject_bug": "leak_on_preempt"},
  "workload": {"requests": [{"arrival_ms": 0, "prompt_tokens": 9, "output_tokens": 5},
                            {"arrival_ms": 0, "prompt_tokens": 7, "output_tokens": 4},
                            {"arrival_ms": 0, "prompt_tokens": 6, "output_tokens": 4},
                            {"arrival_ms": 0, "prompt_tokens": 5, "output_tokens": 4},
                            {"arrival_ms": 0, "prompt_tokens": 3, "output_tokens": 3}]}}"#;

#[test]
fn a_two_replica_counterexample_replays_in_the_simulator() {
    let r = check(TWO_REPLICAS, Format::Json, CheckOptions::default()).unwrap();
    let v = &r.violations[0];
    assert_eq!(v.property, "block_accounting");
    assert_eq!(v.reproduced, Some(true), "{:?} {:?}", v.replay_note, v.replay_message);
    let followed = v.replay_trace.as_ref().unwrap_or(&v.trace);
    assert_eq!(v.replay_events, Some(followed.len() as u64));
    let mut replay = v.replay_scenario.clone().expect("a timed replay");
    let on = SimOptions { check_invariants: true, ..SimOptions::default() };
    match sim_core::simulate(&replay.to_string(), Format::Json, on) {
        Err(SimError::Internal { message }) => assert!(message.contains("block_accounting"), "{message}"),
        other => panic!("expected the invariant to break, got {:?}", other.map(|r| r.summary)),
    }
    replay["scheduler"].as_object_mut().unwrap().remove("inject_bug");
    let fixed = sim_core::simulate(&replay.to_string(), Format::Json, on).unwrap();
    assert_eq!(fixed.summary["finished"], 5);
}
