//! Deployments of pools (`[[deployment.pools]]`): each pool priced with its own GPU.

use serde_json::{json, Value};
use sim_core::{simulate, Format, SimOptions, SimResult};

/// Requests far apart, so that each runs alone on its replica.
fn alone(n: u32) -> Value {
    let reqs: Vec<Value> = (0..n)
        .map(|i| json!({"arrival_ms": f64::from(i) * 20_000.0, "prompt_tokens": 700 + 37 * i, "output_tokens": 60 + 5 * i}))
        .collect();
    json!({"requests": reqs})
}

fn run(v: &Value) -> SimResult {
    let options = SimOptions { record_steps: true, ..SimOptions::default() };
    simulate(&v.to_string(), Format::Json, options).unwrap_or_else(|e| panic!("{e}"))
}

/// Each replica's steps as (start, end) in integer ns.
fn steps_ns(r: &SimResult, replica: u32) -> Vec<(u64, u64)> {
    let ns = |ms: f64| (ms * 1e6).round() as u64;
    r.steps.iter().filter(|s| s.replica == replica).map(|s| (ns(s.start_ms), ns(s.end_ms))).collect()
}

#[test]
fn each_pool_is_priced_with_its_own_gpu_to_the_nanosecond() {
    let mixed = json!({
        "seed": 1, "model": "llama-3-8b", "gpu": "h200",
        "deployment": {"router": "round_robin", "pools": [
            {"name": "big", "replicas": 1, "tp": 1},
            {"name": "small", "gpu": "l40s", "replicas": 1, "tp": 1}]},
        "workload": alone(8)
    });
    let r = run(&mixed);
    assert_eq!(r.summary["finished"], 8);
    let pools = r.deployment["pools"].as_array().unwrap();
    assert_eq!((pools[0]["gpu"].as_str(), pools[1]["gpu"].as_str()), (Some("h200"), Some("l40s")));
    assert_ne!(pools[0]["num_gpu_blocks"], pools[1]["num_gpu_blocks"], "each pool has its own memory plan");
    // The same requests on one GPU of each kind alone: round robin sent the even requests
    // to the H200 pool and the odd ones to the L40S pool.
    for (gpu, replica, parity) in [("h200", 0, 0), ("l40s", 1, 1)] {
        let reqs: Vec<Value> = alone(8)["requests"].as_array().unwrap().iter().enumerate()
            .filter(|(i, _)| i % 2 == parity).map(|(_, r)| r.clone()).collect();
        let one = json!({"seed": 1, "model": "llama-3-8b", "gpu": gpu, "workload": {"requests": reqs}});
        let single = run(&one);
        assert_eq!(steps_ns(&r, replica), steps_ns(&single, 0), "{gpu}");
    }
    // and an L40S step is slower than the same H200 step
    let (a, b) = (steps_ns(&r, 0)[0], steps_ns(&r, 1)[0]);
    assert!(b.1 - b.0 > a.1 - a.0);
}

#[test]
fn bad_pools_are_typed_errors_naming_the_field() {
    let base = |pools: Value, extra: Value| {
        let mut v = json!({"model": "llama-3-8b", "gpu": "h200", "deployment": {"pools": pools},
                           "workload": {"num_requests": 4, "arrival": {"kind": "poisson", "rate": 1}}});
        if let Some(o) = extra.as_object() {
            for (k, x) in o {
                v["deployment"][k] = x.clone();
            }
        }
        match simulate(&v.to_string(), Format::Json, SimOptions::default()) {
            Err(e) => (e.kind_name(), e.path().unwrap_or("").to_string(), e.to_string()),
            Ok(_) => panic!("should fail: {v}"),
        }
    };
    let p = |name: &str| json!({"name": name, "replicas": 1});
    assert_eq!(base(json!([p("a"), p("a")]), json!({})).1, "deployment.pools[1].name");
    assert_eq!(base(json!([p("a")]), json!({"tp": 2})).1, "deployment.tp");
    assert_eq!(base(json!([{"name": "a", "gpu": "h900"}]), json!({})).1, "deployment.pools[0].gpu");
    assert_eq!(base(json!([{"name": "a", "tp": 3}]), json!({})).1, "deployment.pools[0].tp");
    assert_eq!(base(json!([{"name": "a", "role": "prefill"}]), json!({})).1, "deployment.pools[0].role");
    assert_eq!(base(json!([{"name": "a", "dp": 2, "ep": 3}]), json!({})).1, "deployment.pools[0].ep");
    assert_eq!(base(json!([{"name": "a", "bogus": 1}]), json!({})).0, "ConfigError");
    // A pool whose GPU cannot hold the model: Infeasible, naming the pool.
    let v = json!({"model": "llama-3-70b", "gpu": "h200", "deployment": {"pools": [
        {"name": "big", "tp": 4}, {"name": "tiny", "gpu": "l40s", "tp": 1}]},
        "workload": {"num_requests": 4, "arrival": {"kind": "poisson", "rate": 1}}});
    let e = simulate(&v.to_string(), Format::Json, SimOptions::default()).unwrap_err();
    assert_eq!(e.kind_name(), "InfeasibleError");
    assert!(e.to_string().starts_with("pool \"tiny\": "), "{e}");
}
