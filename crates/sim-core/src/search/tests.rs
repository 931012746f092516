use serde_json::json;

use super::*;

fn summary() -> serde_json::Value {
    json!({
        "finished": 10, "goodput_rps": 1.5, "rejections": {"dispatch queue full": 2},
        "slo_attainment": 0.95, "ttft_ms": {"mean": 10.0, "p50": 9.0, "p90": 20.0, "p99": 30.0},
        "tpot_ms": {"mean": null, "p50": null, "p90": null, "p99": null}, "name": "x", "list": [1, 2],
    })
}

#[test]
fn flat_metrics_name_distributions_and_tables() {
    let f = flat_metrics(&summary());
    let keys: Vec<&str> = f.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "finished", "goodput_rps", "rejections_dispatch_queue_full", "slo_attainment", "tpot_mean_ms", "tpot_p50_ms",
            "tpot_p90_ms", "tpot_p99_ms", "ttft_mean_ms", "ttft_p50_ms", "ttft_p90_ms", "ttft_p99_ms"
        ]
    );
    assert_eq!(f["ttft_p99_ms"], json!(30.0));
    assert_eq!(f["tpot_p99_ms"], serde_json::Value::Null);
}

#[test]
fn known_metrics_cover_a_real_summary() {
    let r = crate::simulate(crate::default_scenario_toml(), crate::Format::Toml, crate::SimOptions::default()).unwrap();
    let known = known_metrics();
    for name in flat_metrics(&r.summary).keys() {
        assert!(known.contains(name), "{name} is reported but cannot be bounded");
    }
    assert!(known.iter().any(|k| k == "e2e_p90_ms") && known.iter().any(|k| k == "goodput"));
}

#[test]
fn slo_bounds_by_direction_and_per_request_thresholds() {
    let spec = parse_slo(&json!({"ttft_p99_ms": 25.0, "ttft_p90_ms": 40.0, "goodput": 0.9, "finished": 5}), "slo").unwrap();
    assert!(spec.needs_per_request);
    assert_eq!(spec.per_request.ttft_ms, Some(25.0), "the tightest TTFT bound");
    assert_eq!(spec.per_request.tpot_ms, None);
    let misses = slo_misses(&spec, &summary());
    assert_eq!(misses.len(), 1);
    assert_eq!(misses[0].metric, "ttft_p99_ms");
    assert_eq!(misses[0].value, Some(30.0));
    // An unmeasured metric misses any bound.
    let spec = parse_slo(&json!({"tpot_p99_ms": 50}), "slo").unwrap();
    assert_eq!(slo_misses(&spec, &summary())[0].value, None);
    // Explicit directions.
    let spec = parse_slo(&json!({"kv_utilization_peak": {"max": 0.5}}), "slo").unwrap();
    assert_eq!(spec.objectives[0].bound, Bound::AtMost);
}

#[test]
fn bad_slos_name_the_field() {
    let err = |v: serde_json::Value| parse_slo(&v, "slo").unwrap_err();
    let e = err(json!({"ttft_p99": 2000}));
    assert_eq!(e.path(), Some("slo.ttft_p99"));
    assert!(e.to_string().contains("did you mean ttft_p99_ms"), "{e}");
    assert_eq!(err(json!({"goodput": 1.5})).path(), Some("slo.goodput"));
    assert_eq!(err(json!({"ttft_p99_ms": -1})).path(), Some("slo.ttft_p99_ms"));
    assert!(err(json!({"kv_utilization_mean": 0.5})).to_string().contains("which way"));
    assert_eq!(err(json!({})).path(), Some("slo"));
    assert_eq!(err(json!([1])).path(), Some("slo"));
}

/// Drive the search against a known threshold: rates ≤ `cap` meet the SLO.
fn search(cap: f64, start: f64, parallel: u32, tol: f64) -> (CapacityStep, usize) {
    let mut req = CapacityRequest { start_rate: start, tolerance: tol, parallel, min_rate: None, max_rate: None, points: vec![] };
    for round in 0..200 {
        match capacity_next(&req).unwrap() {
            CapacityStep::Run { rates } => {
                assert!(!rates.is_empty() && rates.len() <= parallel as usize);
                req.points.extend(rates.iter().map(|&rate| Point { rate, meets: rate <= cap }));
            }
            done => return (done, round),
        }
    }
    panic!("no answer in 200 rounds");
}

#[test]
fn capacity_brackets_a_threshold_within_tolerance() {
    for (cap, start) in [(37.3, 14.0), (3.1, 14.0), (14.0, 14.0), (400.0, 0.5)] {
        for parallel in [1, 2, 5] {
            let (step, rounds) = search(cap, start, parallel, 0.02);
            let CapacityStep::Found { rate, lo, hi } = step else { panic!("{step:?}") };
            assert!(rate <= cap && cap < hi && hi - lo <= 0.02 * lo, "{cap} {start} {parallel}: {rate} {hi}");
            assert!(rounds <= 20, "{rounds}");
        }
    }
}

#[test]
fn capacity_says_when_no_rate_meets_or_all_do() {
    let (step, _) = search(0.0, 14.0, 2, 0.02);
    assert!(matches!(step, CapacityStep::None { rate: None, .. }), "{step:?}");
    let (step, _) = search(f64::INFINITY, 14.0, 1, 0.02);
    let CapacityStep::AboveMax { rate, .. } = step else { panic!("{step:?}") };
    assert_eq!(rate, 14.0 * 1024.0);
}

#[test]
fn capacity_never_answers_above_a_failure() {
    // A noisy, non-monotone response: passes at 20 after failing at 18.
    let req = CapacityRequest {
        start_rate: 10.0,
        tolerance: 0.05,
        parallel: 1,
        min_rate: None,
        max_rate: None,
        points: [(10.0, true), (20.0, true), (18.0, false), (15.0, true), (16.5, true), (17.25, true), (17.625, true)]
            .map(|(rate, meets)| Point { rate, meets })
            .to_vec(),
    };
    let step = capacity_next(&req).unwrap();
    assert_eq!(step, CapacityStep::Found { rate: 17.625, lo: 17.625, hi: 18.0 });
}

#[test]
fn capacity_rejects_bad_settings() {
    let bad = |json: &str| capacity_next_json(json).unwrap_err();
    assert_eq!(bad(r#"{"start_rate": 0}"#).path(), Some("start_rate"));
    assert_eq!(bad(r#"{"start_rate": 1, "tolerance": 1.5}"#).path(), Some("tolerance"));
    assert_eq!(bad(r#"{"start_rate": 1, "parallel": 0}"#).path(), Some("parallel"));
    assert_eq!(bad(r#"{"start_rate": 1, "points": [{"rate": -1, "meets": true}]}"#).path(), Some("points[0].rate"));
    assert_eq!(bad(r#"{"start_rate": 1, "bogus": 1}"#).path(), Some("bogus"));
}

#[test]
fn plan_prices_picks_the_cheapest_and_the_front() {
    let cfg = |gpu: &str, gpus: f64, meets: bool, lat: f64| PlanConfig {
        gpu: gpu.into(),
        gpus,
        meets,
        latency_ms: Some(lat),
        tokens_per_s: Some(1000.0),
        output_tokens_per_s: Some(100.0),
        fleet: Vec::new(),
    };
    let req = PlanRequest {
        configs: vec![
            cfg("h100", 8.0, true, 100.0),  // 24 $/h
            cfg("h100", 4.0, false, 900.0), // infeasible
            cfg("h200", 4.0, true, 120.0),  // 16 $/h: cheapest
            cfg("h200", 8.0, true, 90.0),   // 32 $/h: fastest
            cfg("h100", 8.0, true, 150.0),  // 24 $/h, slower than its twin: dominated
        ],
        prices: Default::default(),
    };
    let (rows, cheapest) = plan_eval(&req).unwrap();
    assert_eq!(cheapest, Some(2));
    assert_eq!(rows.iter().map(|r| r.pareto).collect::<Vec<_>>(), [true, false, true, true, false]);
    assert_eq!(rows[0].usd_per_hour, 24.0);
    assert!((rows[0].usd_per_million_tokens.unwrap() - 24.0 / 3.6).abs() < 1e-9);
    // Own prices override the defaults; an unknown GPU needs one.
    let mut req2 = req.clone();
    req2.prices.insert("h200".into(), 10.0);
    assert_eq!(plan_eval(&req2).unwrap().1, Some(0));
    req2.configs[0].gpu = "tpu".into();
    assert_eq!(plan_eval(&req2).unwrap_err().path(), Some("configs[0].gpu"));
    assert_eq!(rows[2].tokens_per_s_per_gpu, Some(250.0));
}

/// A mixed fleet is priced part by part, not as its first GPU.
#[test]
fn a_mixed_fleet_is_priced_with_each_gpu_s_price() {
    let fleet = |parts: &[(&str, f64)]| PlanConfig {
        gpu: parts[0].0.into(),
        gpus: parts.iter().map(|p| p.1).sum(),
        meets: true,
        latency_ms: Some(100.0),
        tokens_per_s: Some(1000.0),
        output_tokens_per_s: None,
        fleet: parts.iter().map(|&(g, n)| FleetPart { gpu: g.into(), gpus: n }).collect(),
    };
    let req = PlanRequest { configs: vec![fleet(&[("h200", 8.0), ("l40s", 4.0)])], prices: Default::default() };
    let (rows, _) = plan_eval(&req).unwrap();
    assert!((rows[0].usd_per_hour - (8.0 * 4.00 + 4.0 * 1.77)).abs() < 1e-9, "{}", rows[0].usd_per_hour);
    let bad = PlanRequest { configs: vec![fleet(&[("h200", 8.0), ("tpu", 4.0)])], prices: Default::default() };
    assert_eq!(plan_eval(&bad).unwrap_err().path(), Some("configs[0].fleet[1].gpu"));
}

#[test]
fn default_prices_name_gpu_presets_and_cover_the_main_ones() {
    let presets = crate::catalog::gpu_preset_names();
    for (name, price, source) in DEFAULT_PRICES {
        assert!(presets.contains(name), "{name} is not a GPU preset");
        assert!(*price > 0.0 && source.contains("20"), "{name}: a price with a dated source");
    }
    for name in ["a100-80g", "h100", "h200", "l40s", "b200", "mi300x"] {
        assert!(DEFAULT_PRICES.iter().any(|(n, _, _)| *n == name), "{name}");
    }
}

#[test]
fn a_bare_bound_on_a_table_metric_goes_the_way_its_row_says() {
    // No naming rule covers these: the summary's metric table says which way is better.
    let spec = parse_slo(&json!({"output_tokens_per_s_per_gpu": 100.0, "prefix_cache_hit_rate": 0.5}), "slo").unwrap();
    let bounds: Vec<(&str, Bound)> = spec.objectives.iter().map(|o| (o.metric.as_str(), o.bound)).collect();
    assert!(bounds.contains(&("output_tokens_per_s_per_gpu", Bound::AtLeast)), "{bounds:?}");
    assert!(bounds.contains(&("prefix_cache_hit_rate", Bound::AtLeast)), "{bounds:?}");
    assert!(parse_slo(&json!({"kv_utilization_mean": 0.5}), "slo").is_err(), "neutral: the bound must say min or max");
}
