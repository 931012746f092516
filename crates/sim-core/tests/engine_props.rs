//! Property tests over random workloads, policies and pool sizes: block accounting holds
//! after every event (free + used = total, no unit held twice, none held by a request that
//! is not running), every request ends finished or rejected with a reason, and each
//! request's times are ordered.

use proptest::prelude::*;
use serde_json::json;
use sim_core::{Format, SimOptions, Simulation};

fn scenario(policy: &str, blocks: u32, budget: u32, reqs: &[(u32, u32, u32, i32)], replicas: u32) -> String {
    let requests: Vec<_> = reqs
        .iter()
        .map(|&(a, p, o, pr)| json!({"arrival_ms": a, "prompt_tokens": p, "output_tokens": o, "priority": pr}))
        .collect();
    json!({
        "seed": 3,
        "model": "llama-3-8b",
        "gpu": "h200",
        "deployment": {"replicas": replicas, "router": "least_outstanding_tokens"},
        "scheduler": {"policy": policy, "block_size": 4, "num_gpu_blocks": blocks,
                      "max_num_batched_tokens": budget, "chunk_size": budget, "max_num_seqs": 6,
                      "max_tokens_per_request": 7},
        "cost_model": {"kind": "linear", "base_ms": 1.0, "per_prefill_token_ms": 0.01,
                       "per_decode_seq_ms": 0.1, "per_context_token_ms": 0.001},
        "workload": {"requests": requests}
    })
    .to_string()
}

fn check_run(text: &str) -> Result<(), TestCaseError> {
    let mut sim = Simulation::from_text(text, Format::Json, SimOptions::default()).unwrap();
    let mut guard = 0;
    loop {
        let done = sim.run_events(1).map_err(|e| TestCaseError::fail(e.to_string()))?;
        sim_core::check::props::check_invariants(sim.engine()).map_err(TestCaseError::fail)?;
        if done {
            break;
        }
        guard += 1;
        prop_assert!(guard < 200_000, "no progress");
    }
    let res = sim.finish().unwrap();
    let r = &res.requests;
    for i in 0..r.request_id.len() {
        let (a, f) = (r.arrival_ms[i], r.finish_ms[i]);
        prop_assert!(f.is_finite() && f >= a, "request {i} finish {f} before arrival {a}");
        if r.status[i] == 0 {
            let t = r.first_token_ms[i];
            prop_assert!(t >= a && t <= f, "request {i}: arrival {a} first token {t} finish {f}");
            prop_assert_eq!(r.reason[i], 0);
        } else {
            prop_assert!(r.reason[i] != 0, "rejected without a reason");
        }
    }
    let finished = res.summary["finished"].as_u64().unwrap();
    let rejected = res.summary["rejected"].as_u64().unwrap();
    prop_assert_eq!(finished + rejected, r.request_id.len() as u64);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]
    #[test]
    fn accounting_holds_under_random_workloads(
        policy in prop::sample::select(sim_core::policy::Policy::colocated_names()),
        blocks in 2u32..24,
        budget in 1u32..40,
        replicas in 1u32..3,
        reqs in prop::collection::vec((0u32..30, 1u32..40, 1u32..12, 0i32..3), 1..12),
    ) {
        check_run(&scenario(policy, blocks, budget, &reqs, replicas))?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]
    /// Steady decode steps are applied to the requests lazily (`sim_core::steady`, off
    /// when invariants are checked): with long outputs, pools that run out and several
    /// replicas, the results are the same bytes either way.
    #[test]
    fn lazy_steady_decode_changes_no_byte(
        policy in prop::sample::select(sim_core::policy::Policy::colocated_names()),
        blocks in 8u32..160,
        budget in 4u32..64,
        replicas in 1u32..3,
        reqs in prop::collection::vec((0u32..2000, 1u32..120, 1u32..300, 0i32..3), 1..16),
    ) {
        let text = scenario(policy, blocks, budget, &reqs, replicas);
        let fast = sim_core::simulate(&text, Format::Json, SimOptions::default()).unwrap().to_json();
        let checked = SimOptions { check_invariants: true, ..SimOptions::default() };
        let slow = sim_core::simulate(&text, Format::Json, checked).unwrap().to_json();
        prop_assert_eq!(fast, slow);
    }
}

#[test]
fn oversized_request_is_rejected_not_deadlocked() {
    // 4 blocks of 4 tokens = 16 slots; a 40-token prompt can never fit.
    let text = scenario("vllm", 4, 8, &[(0, 40, 4, 0), (0, 5, 3, 0)], 1);
    let res = sim_core::simulate(&text, Format::Json, SimOptions::default()).unwrap();
    assert_eq!(res.requests.status, vec![1, 0]);
    assert_eq!(sim_core::REASON_NAMES[res.requests.reason[0] as usize], "kv cache too small");
}

#[test]
fn same_scenario_same_bytes() {
    let text = scenario("sarathi", 9, 16, &[(0, 30, 9, 0), (1, 12, 20, 1), (3, 7, 5, 0)], 2);
    let a = sim_core::simulate(&text, Format::Json, SimOptions::default()).unwrap().to_json();
    let b = sim_core::simulate(&text, Format::Json, SimOptions::default()).unwrap().to_json();
    assert_eq!(a, b);
}

#[test]
fn o1pro_urgent_request_preempts_less_urgent_one() {
    // Two long low-priority requests fill the pool; an urgent one arrives later and
    // preempts rather than waiting for them to finish.
    let text = scenario("o1pro", 24, 16, &[(0, 40, 30, 2), (0, 40, 30, 2), (5, 8, 2, 0)], 1);
    let res = sim_core::simulate(&text, Format::Json, SimOptions::default()).unwrap();
    let r = &res.requests;
    assert!(r.preemptions[0] + r.preemptions[1] >= 1, "{:?}", r.preemptions);
    assert!(r.finish_ms[2] < r.finish_ms[0].min(r.finish_ms[1]));
    // vLLM (FCFS) on the same input makes the urgent one wait.
    let text = scenario("vllm", 24, 16, &[(0, 40, 30, 2), (0, 40, 30, 2), (5, 8, 2, 0)], 1);
    let v = sim_core::simulate(&text, Format::Json, SimOptions::default()).unwrap();
    assert!(v.requests.finish_ms[2] > r.finish_ms[2]);
}

#[test]
fn orca_never_preempts() {
    let text = scenario("orca", 8, 64, &[(0, 10, 20, 0), (0, 10, 20, 0), (0, 10, 20, 0)], 1);
    let res = sim_core::simulate(&text, Format::Json, SimOptions::default()).unwrap();
    assert_eq!(res.summary["preemptions"], 0);
    assert_eq!(res.summary["finished"], 3);
}

#[test]
fn absurd_costs_and_rates_stop_with_an_error_not_an_overflow() {
    // A step cost of 1e300 ms, and an arrival rate of 1e-300 req/s: both push simulated time
    // past any u64 nanosecond count. The run must end with a clear error (debug builds panic
    // on overflow, so this also proves no sum overflows).
    let mut v: serde_json::Value = serde_json::from_str(&scenario("vllm", 8, 8, &[(0, 5, 3, 0)], 1)).unwrap();
    v["cost_model"]["base_ms"] = json!(1e300);
    let e = sim_core::simulate(&v.to_string(), Format::Json, SimOptions::default()).unwrap_err();
    assert_eq!(e.kind_name(), "StallError", "{e}");
    assert!(e.to_string().contains("10^9 s"), "{e}");
    // the message says when the run stood and when its next event would have come
    assert!(e.to_string().contains("the next event is at 2.000e9 s") && e.to_string().contains("unfinished at 1.000e9 s"), "{e}");
    let slow = json!({"model": "llama-3-8b", "gpu": "h200", "workload": {"num_requests": 3,
        "arrival": {"kind": "poisson", "rate": 1e-300}, "prompt": {"kind": "fixed", "value": 8},
        "output": {"kind": "fixed", "value": 2}}});
    match sim_core::simulate(&slow.to_string(), Format::Json, SimOptions::default()) {
        Err(e) => assert!(matches!(e.kind_name(), "StallError" | "ConfigError"), "{e}"),
        Ok(r) => panic!("a request arriving after 1e300 s cannot finish: {}", r.summary),
    }
}

/// A request of a random prefix-caching workload: arrival (ms), prefix group (segment key;
/// `None`: unique prompt), prefix length, unique tail, output, priority, and whether it is a
/// session turn following the previous request (its prompt then repeats the previous
/// prompt and output).
type ApcReq = (u32, Option<u64>, u32, u32, u32, i32, bool);

fn apc_workload(reqs: &[ApcReq]) -> sim_core::workload::Workload {
    use sim_core::workload::{output_key, After, RequestSpec, Segment, Workload};
    let mut w = Workload::default();
    let mut last: Option<(u32, Vec<Segment>, u32)> = None;
    for (i, &(at, group, prefix, tail, output, prio, follow)) in reqs.iter().enumerate() {
        let id = i as u32;
        let mut segs = Vec::new();
        let mut after = None;
        if let (true, Some((pid, psegs, pout))) = (follow, &last) {
            segs.extend_from_slice(psegs);
            segs.push(Segment { key: output_key(*pid), len: *pout });
            after = Some(After { parent: *pid, think_ns: u64::from(at % 5) * 1_000_000 });
        }
        if let Some(g) = group {
            segs.push(Segment { key: g, len: prefix });
        }
        let covered: u32 = segs.iter().map(|s| s.len).sum();
        let prompt = (covered + tail).max(1);
        let start = w.segments.len() as u32;
        w.segments.extend_from_slice(&segs);
        w.requests.push(RequestSpec { segs: (start, segs.len() as u32), after, ..RequestSpec::new(id, u64::from(at) * 1_000_000, prompt, output, prio) });
        // A later turn can only repeat a prompt made entirely of segments.
        last = (tail == 0 && !segs.is_empty()).then_some((id, segs, output));
    }
    w.requests.sort_by_key(|r| (r.arrival_ns, r.id));
    w
}

/// KV offload tiers for [`apc_scenario`]: the first tier's size in blocks (Llama-3-8B's
/// 128 KiB a token, 4-token blocks), blocking loads, and an SSD tier of twice that below it.
type Tiers = (u32, bool, bool);

fn apc_scenario(policy: &str, priority: bool, blocks: u32, budget: u32, replicas: u32, timeout_ms: Option<u32>, tiers: Option<Tiers>) -> sim_core::config::Scenario {
    let mut v: serde_json::Value = serde_json::from_str(&scenario(policy, blocks, budget, &[(0, 1, 1, 0)], replicas)).unwrap();
    if let (Some((n, blocking, ssd)), "vllm" | "sarathi") = (tiers, policy) {
        let gib = |b: u32| f64::from(b) * 4.0 * 131_072.0 / f64::from(1u32 << 30);
        let mut t = vec![json!({"medium": "cpu", "capacity_gib": gib(n)})];
        if ssd {
            t.push(json!({"medium": "ssd", "capacity_gib": gib(2 * n), "eviction": "fifo"}));
        }
        v["scheduler"]["kv_offload"] = json!({"tiers": t, "load": if blocking { "blocking" } else { "async" }});
    }
    if priority && policy != "o1pro" {
        v["scheduler"]["scheduling_policy"] = json!("priority");
    }
    if let Some(t) = timeout_ms {
        v["workload"]["timeout_s"] = json!(f64::from(t) / 1000.0);
    }
    sim_core::config::Scenario::parse(&v.to_string(), Format::Json).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]
    /// Prefix caching under random shared prefixes, sessions, priorities, timeouts and
    /// pool pressure: the block accounting of a caching pool (reference counts equal to
    /// holders, free units held by nobody, free + distinct held = total, the cache's free
    /// queue and key map consistent) holds after every event, every request ends finished
    /// or rejected with a reason, and lazy steady decode changes no byte. With KV offload
    /// tiers below (vllm, sarathi) too: requests waiting for loads hold their blocks, and a
    /// hit across tiers never covers a whole prompt.
    #[test]
    fn caching_pools_stay_consistent_under_random_shared_workloads(
        policy in prop::sample::select(vec!["vllm", "sarathi", "o1pro"]),
        priority in any::<bool>(),
        blocks in 4u32..40,
        budget in 1u32..48,
        replicas in 1u32..3,
        timeout_ms in prop::option::of(5u32..80),
        tiers in prop::option::of((1u32..30, any::<bool>(), any::<bool>())),
        reqs in prop::collection::vec(
            (0u32..40, prop::option::of(0u64..3), 1u32..40, 0u32..12, 1u32..24, 0i32..3, any::<bool>()), 1..14),
    ) {
        let sc = apc_scenario(policy, priority, blocks, budget, replicas, timeout_ms, tiers);
        let w = apc_workload(&reqs);
        let mut sim = Simulation::with_workload(sc.clone(), w.clone(), SimOptions::default()).unwrap();
        let mut guard = 0;
        while !sim.run_events(1).map_err(|e| TestCaseError::fail(e.to_string()))? {
            sim_core::check::props::check_invariants(sim.engine()).map_err(TestCaseError::fail)?;
            guard += 1;
            prop_assert!(guard < 200_000, "no progress");
        }
        let fast = sim.finish().unwrap();
        let r = &fast.requests;
        for i in 0..r.request_id.len() {
            prop_assert!(r.status[i] == 0 || r.reason[i] != 0, "request {i} rejected without a reason");
            prop_assert!(r.cached_tokens[i] < r.prompt_tokens[i], "request {i} hit its whole prompt");
        }
        let checked = SimOptions { check_invariants: true, ..SimOptions::default() };
        let slow = Simulation::with_workload(sc, w, checked).unwrap().finish().unwrap();
        prop_assert_eq!(fast.to_json(), slow.to_json());
    }
}
