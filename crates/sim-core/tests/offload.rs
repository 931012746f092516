//! KV offload tiers end to end (`[scheduler.kv_offload]`, [`sim_core::kv::offload`]): a
//! host-DRAM tier raises the hit rate across tiers and lowers TTFT when HBM is too small for
//! the working set, with each request's load time in `kv_load_ms`; a degraded PCIe link to
//! the host slows exactly the loads; blocking loads stall the batch; evictions cascade to an
//! SSD tier; a preempted request loads its own blocks back; bad settings are typed errors
//! naming the field.

use serde_json::{json, Value};
mod common;

use common::{err, run};
use sim_core::{SimError, SimResult};

/// 24 system prompts of 2,048 tokens (128 blocks each: ~3,200 blocks with their
/// questions) shared by their users, on a GPU of 900 blocks; every request is sent twice.
fn scenario(patch: Value) -> Value {
    let mut v = json!({
        "seed": 3, "model": "llama-3-8b", "gpu": "h100",
        "scheduler": {"policy": "vllm", "num_gpu_blocks": 900, "kv_offload": {"cpu_gib": 32}},
        "workload": {
            "num_requests": 240,
            "arrival": {"kind": "poisson", "rate": 8.0},
            "shared_prefix": {"groups": 24, "users_per_group": 5, "prefix_tokens": 2048,
                              "question": {"kind": "uniform", "min": 32, "max": 128},
                              "output": {"kind": "uniform", "min": 20, "max": 60}}
        }
    });
    merge(&mut v, &patch);
    v
}

fn merge(v: &mut Value, patch: &Value) {
    match (v, patch) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, x) in b {
                match a.get_mut(k) {
                    // A patch's tiers replace the scenario's whole.
                    Some(y) if y.is_object() && x.is_object() && k != "kv_offload" => merge(y, x),
                    _ => {
                        a.insert(k.clone(), x.clone());
                    }
                }
            }
        }
        (v, p) => *v = p.clone(),
    }
}


fn no_tier() -> Value {
    let mut v = scenario(json!({}));
    v["scheduler"].as_object_mut().unwrap().remove("kv_offload");
    v
}

fn f(r: &SimResult, path: &[&str]) -> f64 {
    let mut x = &r.summary;
    for p in path {
        x = &x[*p];
    }
    x.as_f64().unwrap_or_else(|| panic!("{path:?} in {}", r.summary))
}

#[test]
fn a_host_tier_raises_the_hit_rate_and_lowers_ttft_when_hbm_is_too_small() {
    let with = run(&scenario(json!({})));
    let without = run(&no_tier());
    for r in [&with, &without] {
        assert_eq!(f(r, &["finished"]), 240.0, "every request counted once");
    }
    let gpu_only = f(&without, &["prefix_cache_hit_rate"]);
    let all = f(&with, &["kv_offload", "hit_rate_all_tiers"]);
    assert!(all > gpu_only + 0.3, "hit rate across tiers {all} vs HBM alone {gpu_only}");
    assert!(f(&with, &["ttft_ms", "mean"]) < 0.7 * f(&without, &["ttft_ms", "mean"]));
    assert!(f(&with, &["computed_prefill_tokens"]) < 0.5 * f(&without, &["computed_prefill_tokens"]));
    // The load time per request: 128 blocks of 2 MiB (Llama-3-8B, 16 tokens) over the H100's
    // 64 GB/s each way, plus 1 µs: 4.195 ms for a whole system prompt.
    let loads: Vec<f64> = with.requests.kv_load_ms.iter().copied().filter(|&x| x > 0.0).collect();
    assert_eq!(loads.len() as f64, f(&with, &["kv_offload", "loads"]));
    let one = 128.0 * 2.0 * (1u64 << 20) as f64 / 64e9 * 1e3 + 1e-3;
    assert!(loads.iter().any(|&x| (x - one).abs() < 1e-6), "a whole prefix loads in {one} ms: {loads:?}");
    assert!(without.requests.kv_load_ms.is_empty(), "no column without a tier");
    let tiers = &with.summary["kv_offload"]["tiers"][0];
    assert_eq!(tiers["medium"], "cpu");
    // 32 GiB of 2 MiB blocks.
    assert_eq!(tiers["capacity_blocks"], 16_384);
    assert!(tiers["hit_blocks"].as_u64().unwrap() > 1000 && tiers["stored_blocks"].as_u64().unwrap() > 0);
}

/// One request at a time (one every 5 s): each is alone on the GPU, so a change of the
/// PCIe link to the host shows only in the loads.
fn spaced(events: Value) -> Value {
    scenario(json!({
        "gpu": "l40s", "topology": "pcie-4x-l40s",
        "scheduler": {"num_gpu_blocks": 400},
        "workload": {"num_requests": 60, "arrival": {"kind": "constant", "rate": 0.2}},
        "events": events,
    }))
}

#[test]
fn a_degraded_pcie_link_to_the_host_slows_exactly_the_loads() {
    let healthy = run(&spaced(json!([])));
    let slow = run(&spaced(json!([{"at_s": 0, "kind": "set_link", "src": "gpu0", "dst": "host0", "bandwidth_gbps": 3.2}])));
    let (a, b) = (&healthy.requests, &slow.requests);
    let mut loaded = 0;
    for i in 0..a.request_id.len() {
        let (la, lb) = (a.kv_load_ms[i], b.kv_load_ms[i]);
        let ttft = |c: &sim_core::RequestColumns| c.first_token_ms[i] - c.arrival_ms[i];
        let tail = |c: &sim_core::RequestColumns| c.finish_ms[i] - c.first_token_ms[i];
        // The decode steps are the same; the first token comes later by the extra load time.
        assert!((tail(a) - tail(b)).abs() < 1e-6, "request {i}: decode {} vs {}", tail(a), tail(b));
        assert!(((ttft(b) - ttft(a)) - (lb - la)).abs() < 1e-5, "request {i}: TTFT +{} for load +{}", ttft(b) - ttft(a), lb - la);
        if la > 0.0 {
            loaded += 1;
            // 32 GB/s → 3.2 GB/s: the bytes take ten times as long (latency 1.5 µs both).
            assert!(((lb - 0.0015) / (la - 0.0015) - 10.0).abs() < 1e-3, "request {i}: load {la} → {lb} ms");
        }
    }
    assert!(loaded > 20, "{loaded} requests loaded from the host");
    assert_eq!(healthy.summary["kv_offload"]["hit_rate_all_tiers"], slow.summary["kv_offload"]["hit_rate_all_tiers"]);
}

#[test]
fn blocking_loads_stall_the_batch_and_async_ones_do_not() {
    let asynchronous = run(&scenario(json!({})));
    let blocking = run(&scenario(json!({"scheduler": {"kv_offload": {"cpu_gib": 32, "load": "blocking"}}})));
    assert_eq!(f(&asynchronous, &["kv_offload", "load_stall_ms"]), 0.0);
    let stall = f(&blocking, &["kv_offload", "load_stall_ms"]);
    assert!(stall > 100.0, "steps waited {stall} ms for loads");
    // Decoding requests wait for the loads of the steps they are in.
    assert!(f(&blocking, &["tpot_ms", "mean"]) > f(&asynchronous, &["tpot_ms", "mean"]));
}

#[test]
fn blocks_evicted_from_a_small_host_tier_cascade_to_the_ssd() {
    let tiers = json!({"scheduler": {"kv_offload": {"tiers": [
        {"medium": "cpu", "capacity_gib": 2},
        {"medium": "ssd", "capacity_gib": 64}
    ]}}});
    let r = run(&scenario(tiers));
    let t = &r.summary["kv_offload"]["tiers"];
    assert_eq!((t[0]["medium"].as_str(), t[1]["medium"].as_str()), (Some("cpu"), Some("ssd")));
    assert!(t[0]["evicted_blocks"].as_u64().unwrap() > 0);
    // What the host tier evicts goes to the SSD (unless the SSD holds it already).
    let (evicted, ssd_stored) = (t[0]["evicted_blocks"].as_u64().unwrap(), t[1]["stored_blocks"].as_u64().unwrap());
    assert!(ssd_stored > 0 && ssd_stored <= evicted, "{ssd_stored} stored of {evicted} evicted");
    assert!(t[1]["hit_blocks"].as_u64().unwrap() > 0, "and is found there");
    // An SSD hit loads slower than a host one: 6.8 GB/s against 64.
    let cpu_only = run(&scenario(json!({"scheduler": {"kv_offload": {"tiers": [{"medium": "cpu", "capacity_gib": 64}]}}})));
    assert!(f(&r, &["kv_offload", "load_ms", "mean"]) > f(&cpu_only, &["kv_offload", "load_ms", "mean"]));
}

#[test]
fn a_preempted_request_loads_its_own_blocks_back() {
    // Unique prompts, a pool too small for the batch: preemptions; with a tier the victims'
    // computed blocks come back over PCIe instead of being prefilled again.
    let v = |tier: bool| {
        let mut v = json!({
            "seed": 5, "model": "llama-3-8b", "gpu": "h100",
            "scheduler": {"policy": "vllm", "num_gpu_blocks": 300},
            "workload": {"num_requests": 60, "arrival": {"kind": "poisson", "rate": 100.0},
                         "prompt": {"kind": "uniform", "min": 1500, "max": 3000},
                         "output": {"kind": "uniform", "min": 200, "max": 400}}
        });
        if tier {
            v["scheduler"]["kv_offload"] = json!({"cpu_gib": 16});
        }
        v
    };
    let (with, without) = (run(&v(true)), run(&v(false)));
    assert!(f(&without, &["preemptions"]) > 10.0);
    let hits = with.summary["kv_offload"]["tiers"][0]["hit_blocks"].as_u64().unwrap();
    assert!(hits > 100, "re-admitted victims loaded {hits} blocks");
    assert!(f(&with, &["computed_prefill_tokens"]) < f(&without, &["computed_prefill_tokens"]));
}

#[test]
fn the_same_seed_gives_the_same_bytes() {
    let v = scenario(json!({"scheduler": {"kv_offload": {"tiers": [
        {"medium": "cpu", "capacity_gib": 1, "eviction": "fifo"}, {"medium": "remote", "capacity_gib": 8}]}}}));
    assert_eq!(run(&v).to_json(), run(&v).to_json());
}

#[test]
fn bad_tier_settings_are_typed_errors_naming_the_field() {
    let cases = [
        (json!({"scheduler": {"kv_offload": {"cpu_gib": -1}}}), "scheduler.kv_offload.cpu_gib"),
        (json!({"scheduler": {"kv_offload": {"cpu_gib": 8, "tiers": [{"medium": "cpu", "capacity_gib": 8}]}}}), "scheduler.kv_offload.tiers"),
        (json!({"scheduler": {"kv_offload": {"tiers": [{"medium": "tape", "capacity_gib": 8}]}}}), "scheduler.kv_offload.tiers[0].medium"),
        (json!({"scheduler": {"kv_offload": {"tiers": [{"medium": "ssd", "capacity_gib": 0}]}}}), "scheduler.kv_offload.tiers[0].capacity_gib"),
        (json!({"scheduler": {"kv_offload": {"tiers": [{"medium": "ssd", "capacity_gib": 8, "bandwidth_gbps": 0}]}}}), "scheduler.kv_offload.tiers[0].bandwidth_gbps"),
        (json!({"scheduler": {"kv_offload": {"cpu_gib": 8, "load": "lazy"}}}), "scheduler.kv_offload.load"),
        (json!({"scheduler": {"kv_offload": {"cpu_gb": 8}}}), "scheduler.kv_offload.cpu_gb"),
        (json!({"scheduler": {"kv_offload": {}}}), "scheduler.kv_offload"),
        (json!({"scheduler": {"policy": "orca"}}), "scheduler.kv_offload"),
        (json!({"scheduler": {"enable_prefix_caching": false}}), "scheduler.kv_offload"),
    ];
    for (patch, field) in cases {
        let v = scenario(patch.clone());
        match err(&v) {
            SimError::Config { path: got, .. } => assert_eq!(got, field, "{patch}"),
            e => panic!("{patch}: {e:?}"),
        }
    }
}
