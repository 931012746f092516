//! Topology scenarios end to end: link degradation over time, failures that lose no
//! request, disaggregated prefill/decode over InfiniBand, bad input.

use serde_json::{json, Value};
use sim_core::{simulate, Format, SimOptions, SimResult, Simulation};

fn base(requests: u32, rate: f64) -> Value {
    json!({
        "seed": 7, "model": "llama-3-70b", "gpu": "h200",
        "deployment": {"tp": 4, "replicas": 2, "router": "least_outstanding_tokens"},
        "scheduler": {"policy": "vllm"},
        "workload": {"num_requests": requests, "arrival": {"kind": "poisson", "rate": rate},
                     "prompt": {"kind": "lognormal", "mean": 1155, "sigma": 0.9, "max": 7000},
                     "output": {"kind": "lognormal", "mean": 211, "sigma": 0.8, "max": 1000}}
    })
}

fn run(v: &Value) -> SimResult {
    simulate(&v.to_string(), Format::Json, SimOptions::default()).unwrap()
}

fn err(v: &Value) -> String {
    match simulate(&v.to_string(), Format::Json, SimOptions::default()) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("should fail"),
    }
}

fn p99(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * 0.99).round() as usize]
}

/// TPOT (ms) of each finished request with its first-token and finish times.
fn tpots(r: &SimResult) -> Vec<(f64, f64, f64)> {
    let c = &r.requests;
    (0..c.request_id.len())
        .filter(|&i| c.status[i] == 0 && c.output_tokens[i] > 1)
        .map(|i| {
            let t = (c.finish_ms[i] - c.first_token_ms[i]) / f64::from(c.output_tokens[i] - 1);
            (c.first_token_ms[i], c.finish_ms[i], t)
        })
        .collect()
}

#[test]
fn a_preset_fabric_prices_steps_like_the_gpu_roofline() {
    let plain = run(&base(300, 10.0));
    let mut v = base(300, 10.0);
    v["topology"] = json!("hgx-h200");
    let topo = run(&v);
    assert_eq!(topo.summary["finished"], 300);
    let (a, b) = (plain.summary["tpot_ms"]["mean"].as_f64().unwrap(), topo.summary["tpot_ms"]["mean"].as_f64().unwrap());
    assert!((a - b).abs() / a < 0.05, "tpot {a} vs {b}");
    let links = topo.links.as_ref().unwrap();
    assert_eq!(links.src.len(), 8);
    assert!(links.utilization.iter().all(|&u| u > 0.0 && u < 1.0), "{:?}", links.utilization);
    assert_eq!(topo.deployment["placement"], json!([["gpu0", "gpu1", "gpu2", "gpu3"], ["gpu4", "gpu5", "gpu6", "gpu7"]]));
    assert!(plain.links.is_none() && !plain.to_json().contains("\"links\""));
}

#[test]
fn nvlink_at_ten_percent_from_60s_raises_p99_tpot_after_and_not_before() {
    let mut v = base(600, 5.0); // ~120 s of traffic, below capacity
    v["deployment"]["replicas"] = json!(1);
    v["deployment"]["tp"] = json!(4);
    v["topology"] = json!("hgx-h200");
    let healthy = run(&v);
    v["events"] = json!([{"at_s": 60.0, "kind": "set_link", "src": "gpu0", "dst": "nvswitch0", "bandwidth_gbps": 45.0}]);
    let degraded = run(&v);
    assert_eq!(degraded.summary["finished"], 600);
    assert_eq!(degraded.summary["topology"]["events_applied"], 1);
    let window = |r: &SimResult, before: bool| -> f64 {
        p99(tpots(r).into_iter().filter(|&(f, e, _)| if before { e < 60_000.0 } else { f > 61_000.0 }).map(|x| x.2).collect())
    };
    let (hb, db) = (window(&healthy, true), window(&degraded, true));
    let (ha, da) = (window(&healthy, false), window(&degraded, false));
    assert_eq!(hb, db, "before the event nothing changes");
    assert!(da > 1.05 * ha, "after: healthy {ha} ms, degraded {da} ms");
    // Time series: mean TPOT by 10 s bucket of first token, over requests that do not
    // straddle the event: identical before 60 s, higher after.
    let series = |r: &SimResult| -> Vec<f64> {
        (0..12)
            .map(|b| {
                let lo = b as f64 * 10_000.0;
                let x: Vec<f64> = tpots(r).into_iter().filter(|&(f, e, _)| f >= lo && f < lo + 10_000.0 && (e < 60_000.0 || f >= 60_000.0)).map(|x| x.2).collect();
                x.iter().sum::<f64>() / x.len().max(1) as f64
            })
            .collect()
    };
    let (h, d) = (series(&healthy), series(&degraded));
    for b in 0..5 {
        assert_eq!(h[b], d[b], "bucket {b}");
    }
    for b in 7..11 {
        assert!(d[b] > 1.03 * h[b], "bucket {b}: {} vs {}", h[b], d[b]);
    }
}

#[test]
fn a_failed_gpu_or_link_loses_no_request() {
    for ev in [
        json!({"at_s": 3.0, "kind": "remove_gpu", "node": "gpu5"}),
        json!({"at_s": 3.0, "kind": "link_down", "src": "gpu1", "dst": "nvswitch0"}),
    ] {
        let mut v = base(200, 20.0);
        v["topology"] = json!("hgx-h200");
        v["events"] = json!([ev]);
        let r = run(&v);
        assert_eq!(r.summary["finished"], 200, "{ev}");
        let t = &r.summary["topology"];
        assert_eq!(t["stopped_replicas"], 1, "{t}");
        assert_eq!(t["alive_replicas"], 1, "{t}");
        assert!(t["moved_requests"].as_u64().unwrap() > 0, "{t}");
    }
}

#[test]
fn inject_topology_mid_run_changes_the_rest_only() {
    let mut v = base(200, 20.0);
    v["topology"] = json!("hgx-h200");
    let text = v.to_string();
    let mut sim = Simulation::from_text(&text, Format::Json, SimOptions::default()).unwrap();
    sim.run_events(400).unwrap();
    let now = sim.progress().now_ms;
    sim.inject_topology(r#"[{"at_s": 0, "kind": "remove_gpu", "node": "gpu2"}]"#).unwrap();
    let r = sim.finish().unwrap();
    assert_eq!(r.summary["finished"], 200);
    assert_eq!(r.summary["topology"]["stopped_replicas"], 1);
    assert!(now > 0.0);
    // A swap to a degraded copy of the fabric also works mid-run.
    let mut sim = Simulation::from_text(&text, Format::Json, SimOptions::default()).unwrap();
    sim.run_events(400).unwrap();
    sim.inject_topology(r#"{"preset": "hgx-h200", "links": [{"src": "gpu0", "dst": "nvswitch0", "kind": "nvswitch", "bandwidth_gbps": 10, "latency_us": 1}]}"#).unwrap();
    let r = sim.finish().unwrap();
    assert_eq!(r.summary["finished"], 200);
    assert_eq!(r.links.unwrap().bandwidth_gbps[0], 10.0);
}

fn disagg(ib_gbps: f64, colocated: bool) -> SimResult {
    let mut v = base(150, 4.0);
    v["deployment"] = json!({"tp": 8, "replicas": 2, "router": "topology_aware"});
    if !colocated {
        v["deployment"]["prefill_replicas"] = json!(1);
        v["scheduler"]["policy"] = json!("disagg");
    }
    let mut links = Vec::new();
    for n in 0..2 {
        for j in 0..8 {
            links.push(json!({"src": format!("n{n}.nic{j}"), "dst": format!("ib{j}"), "kind": "ib", "bandwidth_gbps": ib_gbps, "latency_us": 1.0}));
        }
    }
    v["topology"] = json!({"preset": "2x-hgx-h200-ib", "links": links});
    run(&v)
}

#[test]
fn disagg_ttft_grows_monotonically_as_ib_bandwidth_drops() {
    let mut last = 0.0;
    let mut colocated = Vec::new();
    for gbps in [50.0, 25.0, 12.5, 6.25, 3.125] {
        let r = disagg(gbps, false);
        assert_eq!(r.summary["finished"], 150);
        let t = &r.summary["topology"];
        assert_eq!(t["kv_transfers"].as_u64().unwrap(), 150, "{t}");
        let ttft = r.summary["ttft_ms"]["mean"].as_f64().unwrap();
        assert!(ttft > last, "{gbps} GB/s: ttft {ttft} after {last}");
        last = ttft;
        colocated.push(disagg(gbps, true).summary["ttft_ms"]["mean"].as_f64().unwrap());
        // the decode replica (n1) did the decoding, the prefill one (n0) only prefill
        assert!(r.requests.replica.iter().all(|&x| x == 1));
    }
    // Co-located TP 8 inside each node never crosses IB.
    assert!(colocated.windows(2).all(|w| w[0] == w[1]), "{colocated:?}");
}

#[test]
fn lazy_steady_decode_steps_change_no_byte_on_a_fabric() {
    // disagg over IB (KV transfers land while decode replicas run steady steps) and a
    // replica stopping and restarting: same bytes as with every step scheduled (recorded).
    let mut v = base(150, 4.0);
    v["deployment"] = json!({"tp": 8, "replicas": 2, "prefill_replicas": 1, "router": "topology_aware"});
    v["scheduler"]["policy"] = json!("disagg");
    v["topology"] = json!("2x-hgx-h200-ib");
    let mut w = base(300, 20.0);
    w["topology"] = json!("hgx-h200");
    w["events"] = json!([{"at_s": 3.0, "kind": "link_down", "src": "gpu1", "dst": "nvswitch0"},
                         {"at_s": 5.0, "kind": "link_up", "src": "gpu1", "dst": "nvswitch0"}]);
    for s in [v, w] {
        let recorded = SimOptions { record_steps: true, ..SimOptions::default() };
        let slow = simulate(&s.to_string(), Format::Json, recorded).unwrap();
        assert_eq!(run(&s).to_json(), slow.to_json());
    }
}

#[test]
fn bad_topology_input_names_the_item() {
    let mut v = base(10, 1.0);
    v["events"] = json!([{"at_s": 1.0, "kind": "link_down", "src": "gpu0", "dst": "nvswitch0"}]);
    assert_eq!(err(&v), "events: topology events need a `topology` section");
    v["topology"] = json!("hgx-h200");
    v["events"] = json!([{"at_s": -1.0, "kind": "link_down", "src": "gpu0", "dst": "nvswitch0"}]);
    assert_eq!(err(&v), "events[0].at_s: must be >= 0 (got -1)");
    v["events"] = json!([{"at_s": 1.0, "kind": "link_down", "src": "gpu0", "dst": "gpu1"}]);
    assert_eq!(err(&v), "events[0]: no link between 'gpu0' and 'gpu1'");
    v["events"] = json!([{"at_s": 1.0, "kind": "link_up", "src": "gpu9", "dst": "nvswitch0"}]);
    assert!(err(&v).starts_with("events[0].src: unknown node id 'gpu9'"), "{}", err(&v));
    v["events"] = json!([]);
    v["topology"] = json!({"nodes": [{"id": "a", "kind": "gpu"}, {"id": "b", "kind": "gpu"}, {"id": "c", "kind": "gpu"}, {"id": "d", "kind": "gpu"}],
                           "links": [{"src": "a", "dst": "b", "kind": "nvlink", "bandwidth_gbps": 100, "latency_us": 1}]});
    v["deployment"] = json!({"tp": 4});
    let e = err(&v);
    assert!(e.contains("replica 0: GPUs 'a' and 'c' have no path"), "{e}");
    v["deployment"] = json!({"tp": 2, "replicas": 2, "placement": [["a", "b"], ["b", "c"]]});
    assert!(err(&v).starts_with("deployment.placement[1][0]: GPU 'b' is oversubscribed"), "{}", err(&v));
    v["deployment"] = json!({"tp": 4, "replicas": 2});
    assert!(err(&v).starts_with("deployment: needs 8 GPUs"), "{}", err(&v));
    v["topology"]["links"][0]["bandwidth_gbps"] = json!(0);
    assert_eq!(err(&v), "topology.links[0].bandwidth_gbps: must be > 0 (got 0)");
}

/// Two nodes of 2 H200s joined by one IB switch; replica r = TP 2 over `n0.gpu{r}` and
/// `n1.gpu{r}`. `shared`: each node has one NIC for both GPUs, so both TP groups' ring
/// traffic crosses the same `n0.nic0 – ib0 – n1.nic0` links; else each GPU has its own NIC.
fn two_tp_groups_over_ib(shared: bool) -> SimResult {
    let mut nodes = vec![json!({"id": "ib0", "kind": "switch"})];
    let mut links = Vec::new();
    for n in 0..2 {
        nodes.push(json!({"id": format!("n{n}.nvswitch0"), "kind": "nvswitch"}));
        for g in 0..2 {
            nodes.push(json!({"id": format!("n{n}.gpu{g}"), "kind": "gpu", "gpu": "h200"}));
            links.push(json!({"src": format!("n{n}.gpu{g}"), "dst": format!("n{n}.nvswitch0"), "kind": "nvswitch", "bandwidth_gbps": 450, "latency_us": 1}));
        }
        for j in 0..(if shared { 1 } else { 2 }) {
            nodes.push(json!({"id": format!("n{n}.nic{j}"), "kind": "nic"}));
            links.push(json!({"src": format!("n{n}.nic{j}"), "dst": "ib0", "kind": "ib", "bandwidth_gbps": 12.5, "latency_us": 1}));
        }
        for g in 0..2 {
            let nic = if shared { 0 } else { g };
            links.push(json!({"src": format!("n{n}.gpu{g}"), "dst": format!("n{n}.nic{nic}"), "kind": "pcie", "bandwidth_gbps": 64, "latency_us": 1}));
        }
    }
    let mut v = base(300, 12.0);
    v["model"] = json!("llama-3-8b");
    v["deployment"] = json!({"tp": 2, "replicas": 2, "router": "round_robin",
                             "placement": [["n0.gpu0", "n1.gpu0"], ["n0.gpu1", "n1.gpu1"]]});
    v["topology"] = json!({"nodes": nodes, "links": links});
    run(&v)
}

#[test]
fn two_tp_groups_sharing_an_ib_link_slow_each_other_down() {
    let (apart, shared) = (two_tp_groups_over_ib(false), two_tp_groups_over_ib(true));
    for r in [&apart, &shared] {
        assert_eq!(r.summary["finished"], 300);
    }
    assert_eq!(apart.summary["topology"]["shared_steps"], 0);
    let steps = shared.summary["steps"].as_u64().unwrap();
    let together = shared.summary["topology"]["shared_steps"].as_u64().unwrap();
    assert!(together > steps / 2, "{together} of {steps} steps shared the link");
    let p99 = |r: &SimResult| r.summary["tpot_ms"]["p99"].as_f64().unwrap();
    let (a, s) = (p99(&apart), p99(&shared));
    eprintln!("P99 TPOT apart {a} ms, sharing the IB link {s} ms; {together} of {steps} steps shared");
    assert!(s > 1.2 * a, "P99 TPOT apart {a} ms, sharing the IB link {s} ms");
    // The shared link carried both groups' bytes, the separate one replica 0's.
    let bytes = |r: &SimResult| {
        let l = r.links.as_ref().unwrap();
        (0..l.src.len()).find(|&i| l.src[i] == "n0.nic0" && l.dst[i] == "ib0").map(|i| l.bytes[i]).unwrap()
    };
    let (one, both) = (bytes(&apart), bytes(&shared));
    assert!(both > 1.8 * one, "{both} vs {one}");
}

/// Replica 0 (gpu0–3) loses gpu1's link at 3 s and gets it back at 5 s.
fn down_then_up(events: Value) -> SimResult {
    let mut v = base(300, 20.0);
    v["topology"] = json!("hgx-h200");
    v["events"] = events;
    run(&v)
}

/// Busy fraction of `replica` per time-series bucket: (bucket start ms, busy).
fn busy(r: &SimResult, replica: u32) -> Vec<(f64, f64)> {
    let ts = &r.timeseries;
    (0..ts.time_ms.len()).filter(|&i| ts.replica[i] == replica).map(|i| (ts.time_ms[i], ts.busy[i])).collect()
}

#[test]
fn a_replica_cut_off_by_link_down_restarts_after_link_up() {
    let r = down_then_up(json!([
        {"at_s": 3.0, "kind": "link_down", "src": "gpu1", "dst": "nvswitch0"},
        {"at_s": 5.0, "kind": "link_up", "src": "gpu1", "dst": "nvswitch0"}
    ]));
    assert_eq!(r.summary["finished"], 300, "no request lost");
    let t = &r.summary["topology"];
    assert_eq!(t["stopped_replicas"], 1, "{t}");
    assert_eq!(t["restarted_replicas"], 1, "{t}");
    assert_eq!(t["alive_replicas"], 2, "{t}");
    assert!(t["moved_requests"].as_u64().unwrap() > 0, "{t}");
    let b = busy(&r, 0);
    // The step in flight at 3 s is dropped but was recorded whole when it started (it
    // would have ended by ~3.04 s); from then on the replica is idle until 5 s.
    let stopped: f64 = b.iter().filter(|x| x.0 >= 3_100.0 && x.0 < 5_000.0).map(|x| x.1).sum();
    let after: f64 = b.iter().filter(|x| x.0 >= 5_000.0).map(|x| x.1).sum();
    assert_eq!(stopped, 0.0, "replica 0 idle while stopped");
    assert!(after > 1.0, "replica 0 busy again after 5 s: {after}");
    // It served requests that arrived after the link came back.
    let c = &r.requests;
    let late = (0..c.request_id.len()).filter(|&i| c.replica[i] == 0 && c.arrival_ms[i] > 5_000.0).count();
    assert!(late > 20, "{late} requests served by replica 0 after 5 s");
    // Without the link_up it stays stopped.
    let r = down_then_up(json!([{"at_s": 3.0, "kind": "link_down", "src": "gpu1", "dst": "nvswitch0"}]));
    assert_eq!(r.summary["finished"], 300);
    assert_eq!(r.summary["topology"]["restarted_replicas"], 0);
    assert_eq!(busy(&r, 0).iter().filter(|x| x.0 >= 3_100.0).map(|x| x.1).sum::<f64>(), 0.0);
}

#[test]
fn a_removed_gpu_never_comes_back() {
    let r = down_then_up(json!([
        {"at_s": 3.0, "kind": "remove_gpu", "node": "gpu1"},
        {"at_s": 5.0, "kind": "link_up", "src": "gpu1", "dst": "nvswitch0"}
    ]));
    assert_eq!(r.summary["finished"], 300);
    let t = &r.summary["topology"];
    assert_eq!((t["stopped_replicas"].as_u64(), t["restarted_replicas"].as_u64()), (Some(1), Some(0)), "{t}");
    assert!(!r.links.as_ref().unwrap().up[1], "gpu1's link stays down");
    // A whole-topology swap does not bring it back either.
    let mut v = base(300, 20.0);
    v["topology"] = json!("hgx-h200");
    let mut sim = Simulation::from_text(&v.to_string(), Format::Json, SimOptions::default()).unwrap();
    sim.run_events(400).unwrap();
    sim.inject_topology(r#"[{"at_s": 0, "kind": "remove_gpu", "node": "gpu5"}]"#).unwrap();
    sim.run_events(400).unwrap();
    sim.inject_topology(r#""hgx-h200""#).unwrap();
    let r = sim.finish().unwrap();
    assert_eq!(r.summary["finished"], 300);
    assert_eq!(r.summary["topology"]["restarted_replicas"], 0);
    assert_eq!(r.summary["topology"]["alive_replicas"], 1);
}

#[test]
fn a_replica_restarted_mid_step_ignores_its_old_step() {
    // One replica: cut off mid-step at 2 s, its requests wait in the router's queue, and 1 µs
    // later it is whole again and starts a new step at once with them. The heap entry of
    // the step cut short (due a few ms later) must not complete the new step.
    let mut v = base(300, 20.0);
    v["deployment"]["replicas"] = json!(1);
    v["topology"] = json!("hgx-h200");
    v["events"] = json!([
        {"at_s": 2.0, "kind": "link_down", "src": "gpu2", "dst": "nvswitch0"},
        {"at_s": 2.000001, "kind": "link_up", "src": "gpu2", "dst": "nvswitch0"},
        {"at_s": 4.0, "kind": "link_down", "src": "gpu2", "dst": "nvswitch0"},
        {"at_s": 4.25, "kind": "link_up", "src": "gpu2", "dst": "nvswitch0"}
    ]);
    let text = v.to_string();
    let r = run(&v);
    assert_eq!(r.summary["finished"], 300);
    let t = &r.summary["topology"];
    assert_eq!((t["stopped_replicas"].as_u64(), t["restarted_replicas"].as_u64()), (Some(2), Some(2)), "{t}");
    assert!(t["moved_requests"].as_u64().unwrap() > 10, "{t}");
    let checked = simulate(&text, Format::Json, SimOptions { check_invariants: true, ..SimOptions::default() }).unwrap();
    assert_eq!(checked.to_json(), r.to_json(), "invariants hold after every instant");
}

/// Llama-3-70B TP 4 × 2 replicas on an HGX H200 whose gpu1 ↔ NVSwitch link runs at
/// `gpu1_gbps` (replica 0 holds gpu0–3), 300 requests at 10 req/s, routed by `router`.
fn hgx_with_gpu1_at(gpu1_gbps: f64, router: &str) -> SimResult {
    let mut v = base(300, 10.0);
    v["deployment"]["router"] = json!(router);
    v["topology"] = json!({"preset": "hgx-h200",
        "links": [{"src": "gpu1", "dst": "nvswitch0", "kind": "nvswitch", "bandwidth_gbps": gpu1_gbps, "latency_us": 1}]});
    run(&v)
}

#[test]
fn a_degraded_link_steers_the_topology_aware_router_to_the_healthy_replica() {
    // Healthy links: the topology-aware router is least-outstanding-tokens, byte for byte.
    let (lot, aware) = (hgx_with_gpu1_at(450.0, "least_outstanding_tokens"), hgx_with_gpu1_at(450.0, "topology_aware"));
    assert_eq!(lot.to_json(), aware.to_json());
    // gpu1's link at 10%: replica 0's AllReduces run ~8× slower. Least-outstanding-tokens
    // does not look at links and breaks the first tie (both replicas empty) by index; the
    // topology-aware router sends that request to the healthy replica 1, and keeps the
    // degraded replica's backlog (outstanding tokens) at about half the other's after.
    let (lot, aware) = (hgx_with_gpu1_at(45.0, "least_outstanding_tokens"), hgx_with_gpu1_at(45.0, "topology_aware"));
    assert_eq!(lot.requests.replica[0], 0);
    assert_eq!(aware.requests.replica[0], 1);
    let moved = (0..300).filter(|&i| lot.requests.replica[i] != aware.requests.replica[i]).count();
    assert!(moved > 100, "{moved} requests placed differently");
    // Near saturation (10 req/s) the tail gains: the degraded replica no longer holds a
    // backlog as deep as the healthy one's. The mean stays within 1%.
    let e2e = |r: &SimResult, q: &str| r.summary["e2e_ms"][q].as_f64().unwrap();
    eprintln!(
        "E2E mean / p99: least-outstanding-tokens {:.0} / {:.0} ms, topology-aware {:.0} / {:.0} ms; {moved} of 300 placed differently",
        e2e(&lot, "mean"), e2e(&lot, "p99"), e2e(&aware, "mean"), e2e(&aware, "p99")
    );
    assert!(e2e(&aware, "p99") < 0.95 * e2e(&lot, "p99"));
    assert!(e2e(&aware, "mean") < 1.01 * e2e(&lot, "mean"));
}

/// disagg on two GPUs joined by two paths: p → x → d (10 GB/s per link, 1 µs: the
/// shortest) and p → y → d (40 GB/s, 3 µs), with routing knobs `routing`.
fn two_paths(routing: Value) -> SimResult {
    let nodes = json!([{"id": "p", "kind": "gpu", "gpu": "h200"}, {"id": "d", "kind": "gpu", "gpu": "h200"},
                       {"id": "x", "kind": "switch"}, {"id": "y", "kind": "switch"}]);
    let link = |a: &str, b: &str, gbps: f64, us: f64| json!({"src": a, "dst": b, "kind": "eth", "bandwidth_gbps": gbps, "latency_us": us});
    let links = json!([link("p", "x", 10.0, 1.0), link("x", "d", 10.0, 1.0), link("p", "y", 40.0, 3.0), link("y", "d", 40.0, 3.0)]);
    let mut v = base(40, 2.0);
    v["model"] = json!("llama-3-8b");
    v["deployment"] = json!({"tp": 1, "replicas": 2, "prefill_replicas": 1, "router": "topology_aware"});
    v["scheduler"]["policy"] = json!("disagg");
    v["topology"] = json!({"nodes": nodes, "links": links, "routing": routing});
    run(&v)
}

#[test]
fn the_frontier_route_alpha_picks_carries_the_kv_and_multipath_splits_it() {
    let kv_ms = |r: &SimResult| r.summary["topology"]["kv_transfer_ms"]["mean"].as_f64().unwrap();
    // α = 0: latency alone, the short narrow path; α = 0.65 (default): the wide one.
    let (short, wide) = (two_paths(json!({"alpha": 0.0})), two_paths(json!({})));
    let split = two_paths(json!({"multipath_kv": true}));
    for r in [&short, &wide, &split] {
        assert_eq!(r.summary["finished"], 40);
    }
    let (s, w, m) = (kv_ms(&short), kv_ms(&wide), kv_ms(&split));
    eprintln!("mean KV transfer: shortest path {s:.3} ms, alpha's frontier choice {w:.3} ms, multipath {m:.3} ms");
    // 4× the bandwidth: about a quarter of the time; both paths (50 GB/s): a fifth.
    assert!(w < 0.3 * s && w > 0.2 * s, "{w} vs {s}");
    assert!(m < w && m > 0.75 * w, "{m} vs {w}");
    let link_bytes = |r: &SimResult, src: &str, dst: &str| {
        let l = r.links.as_ref().unwrap();
        (0..l.src.len()).find(|&i| l.src[i] == src && l.dst[i] == dst).map(|i| l.bytes[i]).unwrap()
    };
    // The KV bytes went p → x alone at α = 0, p → y alone at α = 0.65, and 1 : 4 (by
    // bandwidth) over both with multipath.
    let (sx, sy) = (link_bytes(&short, "p", "x"), link_bytes(&short, "p", "y"));
    let (wx, wy) = (link_bytes(&wide, "p", "x"), link_bytes(&wide, "p", "y"));
    let (mx, my) = (link_bytes(&split, "p", "x"), link_bytes(&split, "p", "y"));
    assert!(sx > 0.0 && sy == 0.0 && wx == 0.0 && wy > 0.0, "{sx} {sy} {wx} {wy}");
    assert!((my / mx - 4.0).abs() < 1e-9 && (mx + my - wy).abs() < 1e-6 * wy, "{mx} {my}");
}

/// A topology whose GPUs differ from the GPU the scenario prices is refused, naming the node
/// (it used to be priced silently as the scenario's GPU); overrides of the same preset, and
/// nodes the placement leaves unused, are fine.
#[test]
fn a_replica_on_a_gpu_the_scenario_does_not_price_is_an_error_naming_the_node() {
    let mut v = base(20, 5.0);
    v["gpu"] = json!("l40s");
    v["topology"] = json!("hgx-h200");
    let e = simulate(&v.to_string(), Format::Json, SimOptions::default()).unwrap_err();
    assert_eq!(e.kind_name(), "ConfigError");
    assert_eq!(e.path(), Some("gpu"));
    let m = e.to_string();
    assert!(m.contains("\"gpu0\"") && m.contains("a h200") && m.contains("as a l40s"), "{m}");
    // A mixed table: replica 1 would land on the L40S node unless placed elsewhere.
    let mut nodes: Vec<Value> = (0..9).map(|i| json!({"id": format!("gpu{i}"), "kind": "gpu", "gpu": if i == 5 { "l40s" } else { "h200" }})).collect();
    nodes.push(json!({"id": "sw", "kind": "nvswitch"}));
    let links: Vec<Value> = (0..9).map(|i| json!({"src": format!("gpu{i}"), "dst": "sw", "kind": "nvswitch", "bandwidth_gbps": 450, "latency_us": 1})).collect();
    let mut v = base(20, 5.0);
    v["topology"] = json!({"nodes": nodes, "links": links});
    assert!(err(&v).contains("\"gpu5\", a l40s"), "{}", err(&v));
    v["deployment"]["placement"] = json!([["gpu0", "gpu1", "gpu2", "gpu3"], ["gpu4", "gpu6", "gpu7", "gpu8"]]);
    assert_eq!(run(&v).summary["finished"], 20);
    // The scenario's GPU with overrides is still that GPU.
    let mut v = base(20, 5.0);
    v["gpu"] = json!({"preset": "h200", "hbm_gib": 120});
    v["topology"] = json!("hgx-h200");
    assert_eq!(run(&v).summary["finished"], 20);
}

/// The new presets name their GPU: a scenario runs on the boxes of its own GPU (H800 boxes on
/// IB, a GB200 NVL72 rack, a pattern name) and is refused on another's, naming the node.
#[test]
fn new_presets_run_their_own_gpu_and_refuse_another() {
    for (gpu, topo) in [("h800", "2x-hgx-h800-ib"), ("gb200", "gb200-nvl72"), ("b200", "3x-hgx-b200-ib"), ("h100", "4x-hgx-h100-ib")] {
        let mut v = base(20, 5.0);
        v["gpu"] = json!(gpu);
        v["topology"] = json!(topo);
        assert_eq!(run(&v).summary["finished"], 20, "{gpu} on {topo}");
    }
    let mut v = base(20, 5.0);
    v["gpu"] = json!("h100");
    v["topology"] = json!("2x-hgx-h800-ib");
    let m = err(&v);
    assert!(m.starts_with("gpu: ") && m.contains("\"n0.gpu0\", a h800"), "{m}");
}

/// With data-parallel attention a replica holds dp × tp × pp GPUs: the automatic placement
/// lists them stage by stage (a stage may span boxes), an explicit one must name them all.
#[test]
fn a_dp_replica_is_placed_on_dp_tp_pp_gpus() {
    let mut v = base(20, 5.0);
    v["topology"] = json!("2x-hgx-h200-ib");
    v["deployment"] = json!({"tp": 4, "dp": 2, "replicas": 2});
    let r = run(&v);
    let box_of = |k: u32| (0..8).map(|i| format!("n{k}.gpu{i}")).collect::<Vec<_>>();
    assert_eq!(r.deployment["placement"], json!([box_of(0), box_of(1)]));
    v["deployment"] = json!({"tp": 1, "dp": 16});
    v["model"] = json!("llama-3-8b");
    let r = run(&v);
    let both = [box_of(0), box_of(1)].concat();
    assert_eq!(r.deployment["placement"], json!([both]));
    v["deployment"] = json!({"tp": 4, "dp": 2, "placement": [box_of(1)[..4].to_vec()]});
    assert!(err(&v).starts_with("deployment.placement[0]: must name dp × tp × pp = 8 GPUs (got 4)"), "{}", err(&v));
}
