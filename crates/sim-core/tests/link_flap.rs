//! Links that go down and come back while requests are in flight lose no request and
//! finish none twice: the reproducer of issue 15 (11 events in 50 ms, TP2 × 4 on
//! hgx-h200), then random link-event schedules over random deployments, each run with the
//! model checker's invariants checked after every instant (done requests counted once, in
//! no queue) and every request accounted for at the end. `O1SIM_FLAP_SCHEDULES=10000`
//! runs the long version (`make fuzz`); CI runs a few hundred.

use serde_json::{json, Value};
use sim_core::rng::SimRng;
use sim_core::{simulate, Format, SimOptions, SimResult};

const REPRO: &str = include_str!("../../../tests/repro/link_flap_double_finish.json");

fn checked(text: &str) -> Result<SimResult, sim_core::SimError> {
    simulate(text, Format::Json, SimOptions { check_invariants: true, ..SimOptions::default() })
}

/// Every request is finished or rejected, each once, and the summary says so.
fn conserved(r: &SimResult, n: u64, what: &str) {
    let c = &r.requests;
    assert_eq!(c.request_id.len() as u64, n, "{what}");
    let finished = c.status.iter().filter(|&&s| s == 0).count() as u64;
    assert_eq!(r.summary["finished"].as_u64(), Some(finished), "{what}");
    assert_eq!(r.summary["num_requests"].as_u64(), Some(n), "{what}");
    let rejected = n - finished;
    assert_eq!(r.summary["rejected"].as_u64(), Some(rejected), "{what}: {}", r.summary);
    for i in 0..c.request_id.len() {
        assert!(c.finish_ms[i].is_finite(), "{what}: request {i} has no finish time");
        if c.status[i] == 0 {
            assert!(c.first_token_ms[i] <= c.finish_ms[i], "{what}: request {i}");
        }
    }
}

#[test]
fn the_flapping_reproducer_finishes_every_request_once() {
    let r = checked(REPRO).expect("the reproducer runs");
    conserved(&r, 40, "reproducer");
    assert_eq!(r.summary["finished"], 40);
    let t = &r.summary["topology"];
    assert!(t["stopped_replicas"].as_u64().unwrap() > 0 && t["restarted_replicas"].as_u64().unwrap() > 0, "{t}");
}

/// A random deployment on hgx-h200 with a random schedule of link (and sometimes GPU)
/// events among its GPU links.
fn schedule(seed: u64) -> (Value, u64) {
    let mut rng = SimRng::new(seed);
    let mut pick = |n: u32| rng.range_u32(0, n - 1);
    let tp = [1u32, 2, 4][pick(3) as usize];
    let max_reps = 8 / tp;
    let disagg = max_reps >= 2 && pick(5) == 0;
    let replicas = if disagg { 2 + pick(max_reps - 1) } else { 1 + pick(max_reps) };
    let policy = if disagg { "disagg" } else { ["vllm", "sarathi", "orca", "o1pro"][pick(4) as usize] };
    let router = ["round_robin", "least_outstanding_tokens", "topology_aware"][pick(3) as usize];
    let n = 10 + u64::from(pick(50));
    let rate = [100.0, 500.0, 2000.0][pick(3) as usize];
    let gpus = tp * replicas;
    let horizon_ms = 20 + pick(200);
    let blocks = [40, 64, 256][pick(3) as usize];
    let mut events = Vec::new();
    for _ in 0..1 + pick(16) {
        let at_s = f64::from(pick(horizon_ms)) / 1e3;
        let g = format!("gpu{}", pick(gpus));
        let e = match pick(12) {
            0..=4 => json!({"at_s": at_s, "kind": "link_down", "src": g, "dst": "nvswitch0"}),
            5..=9 => json!({"at_s": at_s, "kind": "link_up", "src": g, "dst": "nvswitch0"}),
            10 => json!({"at_s": at_s, "kind": "set_link", "src": g, "dst": "nvswitch0",
                         "bandwidth_gbps": 1.0 + f64::from(pick(400))}),
            _ => json!({"at_s": at_s, "kind": "remove_gpu", "node": g}),
        };
        events.push(e);
    }
    let mut v = json!({
        "seed": seed, "model": "llama-3-8b", "gpu": "h200", "topology": "hgx-h200",
        "deployment": {"tp": tp, "replicas": replicas, "router": router},
        // Small pools: preemptions happen, and the invariants' bit-mask fast path applies.
        "scheduler": {"policy": policy, "num_gpu_blocks": blocks},
        "workload": {"num_requests": n, "arrival": {"kind": "poisson", "rate": rate},
                     "prompt": {"kind": "uniform", "min": 16, "max": 512},
                     "output": {"kind": "uniform", "min": 1, "max": 32}},
        "events": events,
    });
    if disagg {
        v["deployment"]["prefill_replicas"] = json!(1 + pick(replicas - 1));
    }
    (v, n)
}

/// How many schedules to run (CI size unless `O1SIM_FLAP_SCHEDULES` says otherwise).
fn schedules() -> u64 {
    std::env::var("O1SIM_FLAP_SCHEDULES").ok().and_then(|s| s.parse().ok()).unwrap_or(300)
}

#[test]
fn random_link_event_schedules_conserve_every_request() {
    let count = schedules();
    let mut stopped = 0u64;
    for seed in 0..count {
        let (v, n) = schedule(seed);
        let text = v.to_string();
        let r = checked(&text).unwrap_or_else(|e| panic!("schedule {seed}: {e}\n{text}"));
        conserved(&r, n, &format!("schedule {seed}: {text}"));
        stopped += r.summary["topology"]["stopped_replicas"].as_u64().unwrap_or(0).min(1);
    }
    // The schedules do exercise the failure paths.
    assert!(stopped * 4 > count, "only {stopped} of {count} schedules stopped a replica");
    eprintln!("{count} random link-event schedules: every request finished or rejected once ({stopped} stopped a replica)");
}

