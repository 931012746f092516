//! Client timeouts (`workload.timeout_s`) count every request exactly once: finished,
//! rejected or timed out, `finished + rejected = total`, on every path. Random small
//! scenarios — each scheduler policy, async scheduling on and off, prefix caching, sessions,
//! with and without a topology, link and GPU faults, and disaggregated prefill/decode — run
//! step-wise in random slices with the model checker's invariants checked after every
//! instant (a done request is in no queue and counted once), must end with every request
//! done once, timed-out ones at their deadline and finished ones before it, and give the
//! same bytes as one unchecked run to the end.

use proptest::prelude::*;
use serde_json::{json, Value};
use sim_core::{Format, SimOptions, SimResult, Simulation};

/// One random scenario's knobs.
#[derive(Debug, Clone)]
struct Case {
    policy: &'static str,
    /// Prefill replicas under `disagg` (0: not disaggregated).
    prefill: u32,
    topology: bool,
    tp: u32,
    replicas: u32,
    async_sched: Option<bool>,
    apc: bool,
    blocks: u32,
    timeout_ms: u32,
    n: u32,
    rate: f64,
    prompt_max: u32,
    output_max: u32,
    sessions: bool,
    /// (at ms, GPU, kind 0..=4) link and GPU events.
    events: Vec<(u32, u32, u32)>,
    slice: u64,
}

fn case() -> impl Strategy<Value = Case> {
    let shape = (prop::sample::select(vec!["vllm", "sarathi", "orca", "o1pro", "disagg"]), any::<bool>(), 1u32..=2, 1u32..=4, 0u32..8);
    let knobs = (prop::option::of(any::<bool>()), any::<bool>(), prop::sample::select(vec![24u32, 64, 512]), 1u32..400);
    let load = (1u32..24, prop::sample::select(vec![20.0, 200.0, 2000.0]), 16u32..600, 1u32..40, any::<bool>());
    let events = prop::collection::vec((0u32..300, 0u32..8, 0u32..5), 0..6);
    let slice = prop::sample::select(vec![1u64, 2, 7, u64::MAX]);
    (shape, knobs, load, events, slice).prop_map(|((policy, topology, tp, replicas, p), knobs, load, events, slice)| {
        let disagg = policy == "disagg";
        // `disagg` runs on a topology with at least one prefill and one decode replica.
        let (topology, replicas) = if disagg { (true, replicas.max(2)) } else { (topology, replicas) };
        let prefill = if disagg { 1 + p % (replicas - 1) } else { 0 };
        let (async_sched, apc, blocks, timeout_ms) = knobs;
        let (n, rate, prompt_max, output_max, sessions) = load;
        let events = if topology { events } else { Vec::new() };
        Case { policy, prefill, topology, tp, replicas, async_sched, apc, blocks, timeout_ms, n, rate, prompt_max, output_max, sessions, events, slice }
    })
}

fn scenario(c: &Case) -> Value {
    let gpus = c.tp * c.replicas;
    let mut workload = json!({"arrival": {"kind": "poisson", "rate": c.rate}, "timeout_s": f64::from(c.timeout_ms) / 1e3});
    if c.sessions {
        workload["sessions"] = json!({"count": c.n.div_ceil(3), "turns": {"kind": "uniform", "min": 1, "max": 4},
                                      "question": {"kind": "uniform", "min": 8, "max": c.prompt_max / 4 + 8},
                                      "output": {"kind": "uniform", "min": 1, "max": c.output_max}});
    } else {
        workload["num_requests"] = json!(c.n);
        workload["prompt"] = json!({"kind": "uniform", "min": 8, "max": c.prompt_max});
        workload["output"] = json!({"kind": "uniform", "min": 1, "max": c.output_max});
    }
    let mut scheduler = json!({"policy": c.policy, "num_gpu_blocks": c.blocks});
    if c.apc && c.policy != "orca" {
        scheduler["enable_prefix_caching"] = json!(true); // orca has no prefix cache
    }
    if let Some(a) = c.async_sched {
        scheduler["async_scheduling"] = json!(a);
    }
    let mut v = json!({
        "seed": c.n + c.timeout_ms, "model": "llama-3-8b", "gpu": "h200",
        "deployment": {"tp": c.tp, "replicas": c.replicas, "router": "least_outstanding_tokens"},
        "scheduler": scheduler, "workload": workload,
    });
    if c.topology {
        v["topology"] = json!("hgx-h200");
        v["deployment"]["router"] = json!("topology_aware");
        let events: Vec<Value> = c.events.iter().map(|&(at, g, kind)| {
            let (at_s, g) = (f64::from(at) / 1e3, format!("gpu{}", g % gpus));
            match kind {
                0 | 1 => json!({"at_s": at_s, "kind": "link_down", "src": g, "dst": "nvswitch0"}),
                2 => json!({"at_s": at_s, "kind": "link_up", "src": g, "dst": "nvswitch0"}),
                3 => json!({"at_s": at_s, "kind": "set_link", "src": g, "dst": "nvswitch0", "bandwidth_gbps": 1.0, "latency_us": 10000.0}),
                _ => json!({"at_s": at_s, "kind": "remove_gpu", "node": g}),
            }
        }).collect();
        v["events"] = json!(events);
    }
    if c.prefill > 0 {
        v["deployment"]["prefill_replicas"] = json!(c.prefill);
    }
    v
}

/// Every request is done once: the engine's count, the request states and the summary
/// agree; timed-out requests end at their deadline, finished ones by it.
fn conserved(sim: Simulation, timeout_ms: u32) -> Result<SimResult, TestCaseError> {
    let e = sim.engine();
    let n = e.reqs.len() as u64;
    prop_assert_eq!(e.unfinished(), 0);
    prop_assert_eq!(e.done_requests, n, "a request counted twice or not at all");
    let r = sim.finish().map_err(|e| TestCaseError::fail(e.to_string()))?;
    let c = &r.requests;
    prop_assert_eq!(c.request_id.len() as u64, n);
    let finished = c.status.iter().filter(|&&s| s == 0).count() as u64;
    prop_assert_eq!(r.summary["finished"].as_u64(), Some(finished));
    prop_assert_eq!(r.summary["rejected"].as_u64(), Some(n - finished));
    prop_assert_eq!(r.summary["num_requests"].as_u64(), Some(n));
    let timeout = f64::from(timeout_ms);
    for i in 0..c.request_id.len() {
        prop_assert!(c.finish_ms[i].is_finite(), "request {} has no end", i);
        let waited = c.finish_ms[i] - c.arrival_ms[i];
        if c.status[i] == 0 {
            prop_assert!(waited <= timeout + 1e-6, "request {} finished {} ms after arrival", i, waited);
        } else if c.reason[i] == 4 {
            prop_assert!((waited - timeout).abs() < 1e-6, "request {} timed out after {} ms", i, waited);
        }
    }
    Ok(r)
}

fn run_case(c: &Case) -> Result<(), TestCaseError> {
    let text = scenario(c).to_string();
    let fail = |e: sim_core::SimError| TestCaseError::fail(format!("{e}\n{text}"));
    let checked = SimOptions { check_invariants: true, ..SimOptions::default() };
    let mut sim = Simulation::from_text(&text, Format::Json, checked).map_err(fail)?;
    let mut calls = 0u32;
    while !sim.run_events(c.slice).map_err(fail)? {
        calls += 1;
        prop_assert!(calls < 1_000_000, "no progress");
    }
    let sliced = conserved(sim, c.timeout_ms)?;
    // One unchecked run to the end gives the same bytes.
    let whole = sim_core::simulate(&text, Format::Json, SimOptions::default()).map_err(fail)?;
    prop_assert_eq!(sliced.to_json(), whole.to_json(), "{}", text);
    Ok(())
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(256)
}

proptest! {
    // PROPTEST_CASES for a longer run (`make test` fixes PROPTEST_RNG_SEED).
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, .. ProptestConfig::default() })]
    #[test]
    fn timeouts_count_every_request_once(c in case()) {
        run_case(&c)?;
    }
}

