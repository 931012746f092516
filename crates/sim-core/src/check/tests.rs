//! Unit tests of the model checker on tiny configurations.

use super::*;
use serde_json::json;

/// A small scenario: `reqs` are (prompt, output, priority); block size 4, 8 seats a batch.
pub(crate) fn small(policy: &str, bug: Option<&str>, blocks: u32, replicas: u32, budget: u32, reqs: &[(u32, u32, i32)]) -> String {
    small_seats(policy, bug, blocks, replicas, budget, 8, reqs)
}

/// [`small`] with `seats` for `max_num_seqs`.
pub(crate) fn small_seats(
    policy: &str,
    bug: Option<&str>,
    blocks: u32,
    replicas: u32,
    budget: u32,
    seats: u32,
    reqs: &[(u32, u32, i32)],
) -> String {
    let requests: Vec<_> = reqs
        .iter()
        .map(|&(p, o, pr)| json!({"arrival_ms": 0, "prompt_tokens": p, "output_tokens": o, "priority": pr}))
        .collect();
    let mut sched = json!({"policy": policy, "block_size": 4, "num_gpu_blocks": blocks,
        "max_num_batched_tokens": budget, "chunk_size": budget, "max_num_seqs": seats, "max_tokens_per_request": budget});
    if let Some(b) = bug {
        sched["inject_bug"] = json!(b);
    }
    json!({"model": "llama-3-8b", "gpu": "h200", "deployment": {"replicas": replicas, "router": "round_robin"},
           "scheduler": sched, "workload": {"requests": requests}})
    .to_string()
}

fn run(text: &str) -> CheckResult {
    check(text, Format::Json, CheckOptions::default()).unwrap()
}

/// The 1-replica configurations every real policy must pass (small enough for debug
/// builds; `benchmarks/check.py` runs the larger set).
/// (name, blocks per replica, replicas, token budget, requests as (prompt, output, priority)).
type Config = (&'static str, u32, u32, u32, Vec<(u32, u32, i32)>);

fn configs() -> Vec<Config> {
    vec![
        ("3 requests, 6 blocks", 6, 1, 8, vec![(6, 4, 1), (5, 3, 0), (4, 3, 1)]),
        ("4 requests, 8 blocks", 8, 1, 8, vec![(8, 5, 1), (6, 4, 0), (5, 4, 1), (3, 3, 0)]),
        ("2 requests, 3 blocks", 3, 1, 16, vec![(4, 6, 1), (4, 6, 0)]),
        ("4 requests, 2 replicas × 4 blocks", 4, 2, 8, vec![(6, 3, 1), (5, 3, 0), (4, 3, 1), (3, 3, 0)]),
    ]
}

#[test]
fn a_full_batch_is_preempted_for_an_urgent_request_and_the_checker_proves_it() {
    // Ample KV (16 blocks) but 2 seats: only a full batch can keep the urgent requests waiting.
    let reqs = [(4, 4, 1), (4, 4, 1), (3, 3, 0), (3, 3, 0)];
    for policy in crate::policy::Policy::colocated_names() {
        let r = run(&small_seats(policy, None, 16, 1, 8, 2, &reqs));
        assert!(r.ok && r.complete, "{policy}: {:?}", r.violations.first().map(|v| (&v.property, &v.message)));
    }
    // Without preemption at a full batch (KV-full preemption only), o1pro keeps an urgent
    // request waiting behind two less urgent ones: timeliness is broken, and the
    // counterexample replays.
    let r = run(&small_seats("o1pro", Some("no_seat_preempt"), 16, 1, 8, 2, &reqs));
    let c = r.violations.first().expect("no_seat_preempt caught");
    assert_eq!(c.property, props::TIMELINESS);
    assert!(c.message.contains("less urgent"), "{}", c.message);
    assert_eq!(c.reproduced, Some(true), "{:?} {:?}", c.replay_note, c.replay_message);
}

#[test]
fn real_policies_pass_every_property() {
    for (name, blocks, reps, budget, reqs) in configs() {
        for policy in crate::policy::Policy::colocated_names() {
            let r = run(&small(policy, None, blocks, reps, budget, &reqs));
            assert!(r.ok && r.complete, "{policy} on {name}: {:?}", r.violations.first().map(|v| (&v.property, &v.message)));
            assert!(r.states > 1 && r.transitions >= r.states - 1, "{policy} on {name}");
            assert!(r.properties.iter().all(|p| p.status == "pass" || p.status == "not_applicable"));
            assert!(r.petri.structurally_bounded && r.petri.final_marking_reachable, "{policy} on {name}");
        }
    }
}

/// The shortest counterexample of a mutant on one replica, checked by replaying it.
fn caught(policy: &str, bug: &str, blocks: u32, budget: u32, reqs: &[(u32, u32, i32)]) -> Counterexample {
    let r = run(&small(policy, Some(bug), blocks, 1, budget, reqs));
    assert!(!r.ok, "{policy}/{bug} not caught");
    let c = r.violations[0].clone();
    assert_eq!(c.trace.len(), c.length);
    assert_eq!(c.reproduced, Some(true), "{policy}/{bug}: {:?} {:?}", c.replay_note, c.replay_message);
    assert_eq!(c.replay_events, Some(c.length as u64), "the replay breaks at the same step");
    c
}

#[test]
fn every_mutant_is_caught_with_a_replayable_counterexample() {
    let three = [(6, 4, 1), (5, 3, 0), (4, 3, 1)];
    let c = caught("vllm", "leak_on_preempt", 6, 8, &three);
    assert_eq!((c.property, c.length), (props::BLOCK_ACCOUNTING, 6));
    let c = caught("vllm", "drop_on_requeue", 6, 8, &three);
    assert_eq!((c.property, c.length), (props::ONE_STATE, 6));
    let c = caught("vllm", "double_admit", 6, 8, &three);
    assert_eq!((c.property, c.length), (props::SINGLE_EXECUTION, 1));
    let c = caught("vllm", "no_preempt", 3, 16, &[(4, 6, 1), (4, 6, 0)]);
    assert_eq!(c.property, props::NO_DEADLOCK);
    let c = caught("o1pro", "no_preempt", 6, 8, &three);
    assert_eq!(c.property, props::TIMELINESS);
    // Every step says what changed.
    assert!(c.trace.iter().all(|s| !s.text.is_empty()));
    assert!(c.trace.iter().any(|s| s.changes.iter().any(|x| x.contains("starts a step"))));
}

/// The states a counterexample's trace goes through, and when, must be what the replay
/// scenario makes the simulator do: checked by the replay itself (`reproduced`), plus the
/// times here.
fn assert_timed(trace: &[TraceStep]) {
    let times: Vec<f64> = trace.iter().map(|s| s.at_ms.expect("every replayed step is timed")).collect();
    assert!(times.windows(2).all(|w| w[0] < w[1]), "one event at a time, in order: {times:?}");
}

#[test]
fn two_replica_counterexamples_replay_with_a_solved_cost_model() {
    // Equal steps cannot time this order (replica 1's step must outlast two of replica
    // 0's): the replay's linear cost model is solved for it.
    let four = [(6, 3, 1), (5, 3, 0), (4, 3, 1), (3, 3, 0)];
    for (bug, property) in [("leak_on_preempt", props::BLOCK_ACCOUNTING), ("drop_on_requeue", props::ONE_STATE)] {
        let r = run(&small("vllm", Some(bug), 3, 2, 8, &four));
        let c = r.violations[0].clone();
        assert_eq!(c.property, property);
        assert!(c.replay_trace.is_none() && c.replay_note.is_none(), "{bug}: {:?}", c.replay_note);
        assert_eq!(c.reproduced, Some(true), "{bug}: {:?}", c.replay_message);
        assert_eq!(c.replay_events, Some(c.length as u64), "{bug}: the replay breaks at the same step");
        assert_timed(&c.trace);
        let cost = &c.replay_scenario.as_ref().unwrap()["cost_model"];
        assert!(cost["per_prefill_token_ms"].as_f64().unwrap() > 0.0, "{bug}: {cost}");
        assert!(c.trace.iter().any(|s| s.state.replicas[1].busy), "{bug}: both replicas take part");
    }
}

#[test]
fn an_order_no_timing_produces_is_replaced_by_one_that_reaches_the_same_violation() {
    // The shortest deadlock needs replica 1's step to outlast replica 0's longer ones: no
    // linear cost model does that, so the replay follows another order to a deadlock.
    let four = [(8, 4, 1), (6, 4, 0), (5, 3, 1), (4, 3, 0)];
    let r = run(&small("vllm", Some("no_preempt"), 4, 2, 8, &four));
    let c = r.violations[0].clone();
    assert_eq!(c.property, props::NO_DEADLOCK);
    assert!(c.trace.iter().all(|s| s.at_ms.is_none()), "the shortest order has no times");
    let note = c.replay_note.as_deref().unwrap();
    assert!(note.contains("no linear cost model") && note.contains("replay_trace"), "{note}");
    let alt = c.replay_trace.as_ref().expect("an order the simulator can take");
    assert!(alt.len() >= c.length);
    assert_eq!(alt.iter().map(|s| s.step).collect::<Vec<_>>(), (1..=alt.len() as u32).collect::<Vec<_>>());
    assert_timed(alt);
    assert_eq!(c.reproduced, Some(true), "{:?}", c.replay_message);
    assert_eq!(c.replay_events, Some(alt.len() as u64));
}

#[test]
fn results_are_deterministic() {
    let text = small("vllm", Some("leak_on_preempt"), 8, 1, 8, &[(8, 5, 1), (6, 4, 0), (5, 4, 1), (3, 3, 0)]);
    let strip = |r: CheckResult| {
        let mut v: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
        for k in ["elapsed_s", "states_per_s", "memory_mb"] {
            v.as_object_mut().unwrap().remove(k);
        }
        v
    };
    assert_eq!(strip(run(&text)), strip(run(&text)));
}

#[test]
fn limits_stop_the_search_with_a_clear_result() {
    let text = small("vllm", None, 8, 1, 8, &[(8, 5, 1), (6, 4, 0), (5, 4, 1), (3, 3, 0)]);
    let r = check(&text, Format::Json, CheckOptions { max_states: 100, ..CheckOptions::default() }).unwrap();
    assert!(!r.ok && !r.complete);
    assert!(r.states >= 100 && r.states < 200, "{}", r.states);
    assert!(r.stopped.as_deref().unwrap().contains("max_states"));
    assert!(r.properties.iter().any(|p| p.status == "unknown"));
}

#[test]
fn scenarios_beyond_the_limits_name_the_field() {
    let ok = small("vllm", None, 8, 1, 8, &[(8, 5, 1)]);
    let err = |text: &str, opts: CheckOptions| check(text, Format::Json, opts).unwrap_err();
    let d = CheckOptions::default();
    assert_eq!(err(&ok.replace("\"num_gpu_blocks\":8", "\"num_gpu_blocks\":80"), d).path(), Some("scheduler.num_gpu_blocks"));
    assert_eq!(err(&ok.replace(",\"num_gpu_blocks\":8", ""), d).path(), Some("scheduler.num_gpu_blocks"));
    let many = small("vllm", None, 8, 1, 8, &[(3, 3, 0); 17]);
    assert_eq!(err(&many, d).path(), Some("workload"));
    assert_eq!(err(&ok.replace("\"replicas\":1", "\"replicas\":5"), d).path(), Some("deployment.replicas"));
    assert_eq!(err(&ok, CheckOptions { max_states: 0, ..d }).path(), Some("max_states"));
    let bad_bug = small("vllm", Some("leak_on_prempt"), 8, 1, 8, &[(8, 5, 1)]);
    assert!(err(&bad_bug, d).to_string().contains("did you mean leak_on_preempt"));
}

#[test]
fn pnml_lists_the_policy_net() {
    let r = run(&small("orca", None, 6, 1, 8, &[(6, 4, 1), (5, 3, 0)]));
    assert!(r.pnml.starts_with("<?xml") && r.pnml.contains("<place id=\"free_units\">"));
    assert!(!r.pnml.contains("id=\"preempt\""), "orca never preempts");
    let v = run(&small("vllm", None, 6, 1, 8, &[(6, 4, 1), (5, 3, 0)]));
    assert!(v.pnml.contains("<transition id=\"preempt\">"));
    assert_eq!(v.petri.bounds[0], 2, "pending holds at most the two requests");
    assert!(v.petri.bounds[6] <= 6 && v.petri.p_invariants.iter().all(|p| p.holds));
}

/// `reqs` on `replicas` × TP2 on hgx-h200 with a small pool, the links of `gpus` flapping.
fn flapping(policy: &str, replicas: u32, gpus: &[u32], reqs: &[(u32, u32)]) -> String {
    let requests: Vec<_> =
        reqs.iter().map(|&(p, o)| json!({"arrival_ms": 0, "prompt_tokens": p, "output_tokens": o})).collect();
    let mut events = Vec::new();
    for g in gpus {
        events.push(json!({"at_s": 0.001, "kind": "link_down", "src": format!("gpu{g}"), "dst": "nvswitch0"}));
        events.push(json!({"at_s": 0.002, "kind": "link_up", "src": format!("gpu{g}"), "dst": "nvswitch0"}));
    }
    let mut v = json!({"model": "llama-3-8b", "gpu": "h200", "topology": "hgx-h200",
        "deployment": {"tp": 2, "replicas": replicas},
        "scheduler": {"policy": policy, "block_size": 4, "num_gpu_blocks": 6, "max_num_batched_tokens": 8,
                      "chunk_size": 8, "max_num_seqs": 8, "max_tokens_per_request": 8},
        "workload": {"requests": requests}, "events": events});
    if policy == "disagg" {
        v["deployment"]["prefill_replicas"] = json!(1);
    }
    v.to_string()
}

#[test]
fn links_going_down_and_up_are_explored_and_lose_no_request() {
    // Small enough for debug builds: `benchmarks/check.py` runs larger ones.
    let reqs = [(6, 3), (5, 2)];
    let still = run(&flapping("vllm", 2, &[], &reqs));
    for policy in ["vllm", "sarathi", "orca", "o1pro"] {
        let r = run(&flapping(policy, 2, &[1, 3], &reqs));
        assert!(r.ok && r.complete, "{policy}: {:?}", r.violations.first().map(|v| (&v.property, &v.message)));
        assert_eq!(r.config.links, ["gpu1–nvswitch0", "gpu3–nvswitch0"]);
        if policy == "vllm" {
            assert!(r.states > 4 * still.states, "{} states with links vs {} without", r.states, still.states);
        }
    }
}

#[test]
fn the_checker_catches_a_completion_applied_to_another_step() {
    // The guards of `Engine::complete_step` and `finish_step` switched off: a stopped
    // replica's dropped step, completing later, finishes requests a second time.
    let text = flapping("vllm", 2, &[1], &[(6, 3), (5, 2), (4, 2)]);
    let mut c = Checker::from_text(&text, Format::Json, CheckOptions::default()).unwrap();
    c.x.engine.unguarded = true;
    let r = c.finish().unwrap();
    let v = r.violations.first().expect("a violation");
    assert_eq!(v.property, "one_state", "{}", v.message);
    assert!(v.trace.iter().any(|s| s.action == "stale") && v.trace.iter().any(|s| s.action == "link_down"), "{:?}",
        v.trace.iter().map(|s| &s.text).collect::<Vec<_>>());
    assert!(v.replay_scenario.is_none() && v.replay_note.as_deref().is_some_and(|n| n.contains("link events")));
}

#[test]
fn disagg_kv_arrivals_are_explored_instead_of_a_false_deadlock() {
    // ../shared/repro/check_disagg_false_deadlock.toml: one request, prefill on replica 0.
    let text = include_str!("../../../../tests/repro/check_disagg_false_deadlock.toml");
    let r = check(text, Format::Toml, CheckOptions::default()).unwrap();
    assert!(r.ok && r.complete, "{:?}", r.violations.first().map(|v| (&v.property, &v.message)));
    let r = run(&flapping("disagg", 2, &[1, 2], &[(6, 3), (5, 2)]));
    assert!(r.ok && r.complete, "{:?}", r.violations.first().map(|v| (&v.property, &v.message)));
}

#[test]
fn only_link_events_are_explored() {
    let mut v: serde_json::Value = serde_json::from_str(&flapping("vllm", 2, &[1], &[(6, 3)])).unwrap();
    v["events"][1] = json!({"at_s": 0.0, "kind": "remove_gpu", "node": "gpu1"});
    let e = check(&v.to_string(), Format::Json, CheckOptions::default()).unwrap_err();
    assert_eq!(e.path(), Some("events[1].kind"), "{e}");
    let v = flapping("vllm", 2, &[0, 1, 2, 3, 4], &[(6, 3)]);
    let e = check(&v, Format::Json, CheckOptions::default()).unwrap_err();
    assert_eq!(e.path(), Some("events[8]"), "{e}");
}
