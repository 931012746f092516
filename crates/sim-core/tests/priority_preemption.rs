//! o1pro's priority preemption fires when the batch is full too, not only when the KV cache
//! is: an urgent request takes the seat of the least urgent running one (latest admitted
//! among equals), so it no longer waits for a background request to finish.

use serde_json::json;
use sim_core::{simulate, Format, SimOptions, SimResult};

/// 48 background requests (priority 1, 600 output tokens) fill a batch of 16 at t = 0; 20
/// urgent ones (priority 0, 50 tokens) arrive every 500 ms from t = 1 s. KV is ample:
/// only the batch's seats are scarce. `bug`: `no_seat_preempt` is the former behaviour
/// (preemption only on a full KV cache).
fn run(policy: &str, bug: Option<&str>) -> SimResult {
    let mut reqs: Vec<_> =
        (0..48).map(|_| json!({"arrival_ms": 0, "prompt_tokens": 300, "output_tokens": 600, "priority": 1})).collect();
    reqs.extend((0..20).map(|i| json!({"arrival_ms": 1000 + 500 * i, "prompt_tokens": 300, "output_tokens": 50, "priority": 0})));
    let mut sched = json!({"policy": policy, "max_num_seqs": 16});
    if let Some(b) = bug {
        sched["inject_bug"] = json!(b);
    }
    let v = json!({"seed": 1, "model": "llama-3-8b", "gpu": "h100", "scheduler": sched, "workload": {"requests": reqs}});
    // A known bug is only accepted with the invariant checks on (as a replay runs).
    simulate(&v.to_string(), Format::Json, SimOptions { check_invariants: bug.is_some(), ..SimOptions::default() }).unwrap()
}

/// Mean TTFT (ms) of the urgent (ids ≥ 48) and background requests.
fn ttft(r: &SimResult) -> (f64, f64) {
    let q = &r.requests;
    let mean = |urgent: bool| {
        let v: Vec<f64> = (0..q.request_id.len())
            .filter(|&i| (q.request_id[i] >= 48) == urgent)
            .map(|i| q.first_token_ms[i] - q.arrival_ms[i])
            .collect();
        v.iter().sum::<f64>() / v.len() as f64
    };
    (mean(true), mean(false))
}

#[test]
fn an_urgent_request_takes_a_seat_from_a_full_batch() {
    let now = run("o1pro", None);
    let before = run("o1pro", Some("no_seat_preempt"));
    let fcfs = run("vllm", None);
    let ((u_now, b_now), (u_before, b_before), (u_fcfs, b_fcfs)) = (ttft(&now), ttft(&before), ttft(&fcfs));
    eprintln!(
        "mean TTFT urgent / background (ms): o1pro {u_now:.1} / {b_now:.1}, o1pro preempting only on a full KV cache \
         {u_before:.1} / {b_before:.1}, vLLM (FCFS) {u_fcfs:.1} / {b_fcfs:.1}; preemptions {} vs {}",
        now.summary["preemptions"], before.summary["preemptions"]
    );
    assert!(u_before >= 10.0 * u_now, "urgent TTFT {u_before:.1} -> {u_now:.1} ms: not a 10x drop");
    assert!(now.summary["preemptions"].as_u64().unwrap() >= 20, "each urgent arrival preempts a background request");
    assert_eq!(before.summary["preemptions"], 0);
    assert!(u_fcfs > u_before, "FCFS makes urgent requests wait behind everyone");
    // Every request still finishes.
    assert_eq!(now.summary["finished"], 68);
    // The victims are the least urgent, latest admitted: only background requests are preempted.
    let q = &now.requests;
    assert!((0..q.request_id.len()).all(|i| q.preemptions[i] == 0 || q.request_id[i] < 48));
}
