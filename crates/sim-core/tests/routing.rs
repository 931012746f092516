//! The cache-aware routers end to end: prefix-aware routing raises the hit rate across
//! replicas over least-outstanding-tokens, stale KV events lower it, sessions stay on
//! their replica, consistent hashing keeps a prefix on one replica, and bad settings are
//! typed errors naming the field.

use serde_json::{json, Value};
use sim_core::config::Scenario;
use sim_core::workload::{output_key, After, RequestSpec, Segment, Workload};
use sim_core::{Format, SimOptions, SimResult, Simulation};

const MS: u64 = 1_000_000;

fn scenario(router: &str, patch: Value) -> Scenario {
    let mut v = json!({
        "seed": 1, "model": "llama-3-8b", "gpu": "h200",
        "deployment": {"replicas": 4, "router": router},
        "scheduler": {"policy": "vllm", "num_gpu_blocks": 1200},
        "cost_model": {"kind": "linear", "base_ms": 2.0, "per_prefill_token_ms": 0.02,
                       "per_decode_seq_ms": 0.05, "per_context_token_ms": 0.0005},
        "workload": {"requests": [{"arrival_ms": 0, "prompt_tokens": 1, "output_tokens": 1}]}
    });
    for (k, x) in patch.as_object().unwrap() {
        v[k].as_object_mut().unwrap().extend(x.as_object().unwrap().clone());
    }
    Scenario::parse(&v.to_string(), Format::Json).unwrap()
}

fn run(sc: &Scenario, w: &Workload) -> SimResult {
    Simulation::with_workload(sc.clone(), w.clone(), SimOptions::default()).unwrap().finish().unwrap()
}

fn hit_rate(r: &SimResult) -> f64 {
    r.summary["prefix_cache_hit_rate"].as_f64().unwrap()
}

fn ttft_mean(r: &SimResult) -> f64 {
    r.summary["ttft_ms"]["mean"].as_f64().unwrap()
}

/// 16 system prompts of 2,048 tokens (128 blocks each: all 16 take 2,048 blocks, and a
/// replica holds 1,200), 40 users each with a 128-token question, one request every 15 ms,
/// groups interleaved at random.
fn groups() -> Workload {
    let segments = (0..16).map(|g| Segment { key: 100 + g as u64, len: 2048 }).collect();
    let mut x = 12_345u64;
    let requests = (0..640)
        .map(|i| {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            RequestSpec { segs: ((x >> 33) as u32 % 16, 1), ..RequestSpec::new(i, u64::from(i) * 15 * MS, 2048 + 128, 32, 0) }
        })
        .collect();
    Workload { requests, segments }
}

#[test]
fn prefix_aware_routers_raise_the_hit_rate_and_stale_events_lower_it() {
    let w = groups();
    let lot = run(&scenario("least_outstanding_tokens", json!({})), &w);
    let rr = run(&scenario("round_robin", json!({})), &w);
    let ring = run(&scenario("consistent_hash", json!({})), &w);
    let precise = run(&scenario("precise_prefix", json!({})), &w);
    let approx = run(&scenario("approx_prefix", json!({})), &w);
    let stale = run(&scenario("precise_prefix", json!({"deployment": {"kv_event_delay_ms": 2000.0}})), &w);
    for r in [&lot, &precise, &approx, &stale] {
        assert_eq!(r.summary["finished"], 640);
    }
    let (l, p, a, s) = (hit_rate(&lot), hit_rate(&precise), hit_rate(&approx), hit_rate(&stale));
    eprintln!("hit rates: round robin {:.3}, least outstanding {l:.3}, consistent hash {:.3}, precise {p:.3}, approx {a:.3}, stale {s:.3}",
              hit_rate(&rr), hit_rate(&ring));
    eprintln!("TTFT mean ms: least outstanding {:.1}, precise {:.1}, approx {:.1}, stale {:.1}", ttft_mean(&lot), ttft_mean(&precise), ttft_mean(&approx), ttft_mean(&stale));
    assert!(p > l + 0.2, "precise {p} vs least outstanding tokens {l}");
    assert!(a > l + 0.2, "approx {a} vs least outstanding tokens {l}");
    assert!(s < p - 0.02 && s > l, "2 s stale events {s} between {l} and {p}");
    // Fewer prompt tokens to compute: the first token comes sooner.
    assert!(ttft_mean(&precise) < ttft_mean(&lot), "{} vs {}", ttft_mean(&precise), ttft_mean(&lot));
    // The scorers' weights change the picks: load alone is least-outstanding-tokens.
    let load_only = run(&scenario("precise_prefix", json!({"deployment": {"router_scorers": {"prefix": 0, "load": 1, "kv_usage": 0}}})), &w);
    assert_eq!(load_only.requests.replica, lot.requests.replica);
    // A policy without a prefix cache: no prefix anywhere, the load and KV scorers route.
    let orca = run(&scenario("precise_prefix", json!({"scheduler": {"policy": "orca", "num_gpu_blocks": 1200}})), &w);
    assert_eq!(orca.summary["finished"], 640);
    assert_eq!(orca.summary["prefix_cache_hits"], 0);
    // Same scenario, same bytes.
    let again = run(&scenario("precise_prefix", json!({"deployment": {"kv_event_delay_ms": 2000.0}})), &w);
    assert_eq!(again.to_json(), stale.to_json());
}

#[test]
fn consistent_hashing_keeps_a_prefix_on_one_replica_while_loads_allow() {
    // Requests 200 ms apart: the replicas are idle, no load bound is reached.
    let mut w = groups();
    for (i, r) in w.requests.iter_mut().enumerate() {
        r.arrival_ns = i as u64 * 200 * MS;
    }
    w.requests.truncate(200);
    let r = run(&scenario("consistent_hash", json!({})), &w);
    let mut home = [None; 16];
    for (i, spec) in w.requests.iter().enumerate() {
        let g = spec.segs.0 as usize;
        let rep = r.requests.replica[i];
        assert_eq!(*home[g].get_or_insert(rep), rep, "group {g}");
    }
    // The 16 keys spread over more than one replica.
    let used: std::collections::BTreeSet<_> = home.iter().flatten().collect();
    assert!(used.len() > 1, "{used:?}");
}

/// `n` sessions of 4 turns, one started every `gap_ms`, each turn's prompt the whole
/// conversation so far plus a 300-token question.
fn sessions(n: u32, gap_ms: u64) -> Workload {
    let mut w = Workload::default();
    for s in 0..n {
        let mut history: Vec<Segment> = Vec::new();
        for k in 0..4u32 {
            let id = s * 4 + k;
            history.push(Segment { key: 50_000 + u64::from(id), len: 300 });
            let start = w.segments.len() as u32;
            w.segments.extend_from_slice(&history);
            let prompt: u32 = history.iter().map(|g| g.len).sum();
            let after = (k > 0).then(|| After { parent: id - 1, think_ns: 100 * MS });
            let at = u64::from(s) * gap_ms * MS;
            w.requests.push(RequestSpec { segs: (start, history.len() as u32), after, ..RequestSpec::new(id, at, prompt, 40, 0) });
            history.push(Segment { key: output_key(id), len: 40 });
        }
    }
    w
}

#[test]
fn session_turns_follow_their_first_turn() {
    let w = sessions(12, 30);
    let rr = run(&scenario("round_robin", json!({})), &w);
    let sticky = run(&scenario("session_affinity", json!({})), &w);
    let same_replica = |r: &SimResult, s: usize| (1..4).all(|k| r.requests.replica[s * 4 + k] == r.requests.replica[s * 4]);
    assert!((0..12).all(|s| same_replica(&sticky, s)), "{:?}", sticky.requests.replica);
    assert!(hit_rate(&sticky) > hit_rate(&rr) + 0.2, "{} vs {}", hit_rate(&sticky), hit_rate(&rr));
    // On a ring keyed by the session, too, while no replica is past the load bound (one
    // session at a time); sessions spread over the replicas.
    let w = sessions(12, 3000);
    let ring = run(&scenario("consistent_hash", json!({})), &w);
    assert!((0..12).all(|s| same_replica(&ring, s)), "{:?}", ring.requests.replica);
    let used: std::collections::BTreeSet<_> = ring.requests.replica.iter().collect();
    assert!(used.len() > 1, "{used:?}");
}

#[test]
fn bad_router_settings_name_the_field() {
    let err = |router: &str, patch: Value| {
        let mut v = json!({"model": "llama-3-8b", "gpu": "h200", "deployment": {"replicas": 2, "router": router},
                           "scheduler": {"policy": "vllm"}});
        for (k, x) in patch.as_object().unwrap() {
            v[k].as_object_mut().map(|o| o.extend(x.as_object().unwrap().clone())).unwrap_or_else(|| v[k] = x.clone());
        }
        Scenario::parse(&v.to_string(), Format::Json).and_then(|s| Simulation::new(s, SimOptions::default()).map(|_| ())).unwrap_err().to_string()
    };
    let cases = [
        ("round_robin", json!({"deployment": {"router_scorers": {"prefix": 1}}}), "deployment.router_scorers: weighs"),
        ("precise_prefix", json!({"deployment": {"router_scorers": {"prefix": -1}}}), "deployment.router_scorers.prefix"),
        ("approx_prefix", json!({"deployment": {"router_scorers": {"load": 2e6}}}), "deployment.router_scorers.load"),
        ("precise_prefix", json!({"deployment": {"router_scorers": {"prefix": 0, "load": 0, "kv_usage": 0}}}), "every weight is 0"),
        ("precise_prefix", json!({"deployment": {"router_scorers": {"prefx": 1}}}), "deployment.router_scorers"),
        ("approx_prefix", json!({"deployment": {"kv_event_delay_ms": 10}}), "deployment.kv_event_delay_ms: delays"),
        ("precise_prefix", json!({"deployment": {"kv_event_delay_ms": -1}}), "deployment.kv_event_delay_ms"),
        ("prefix", json!({}), "deployment.router: unknown router 'prefix'"),
    ];
    for (router, patch, want) in cases {
        let e = err(router, patch.clone());
        assert!(e.contains(want), "{router} {patch}: {e}");
    }
}
