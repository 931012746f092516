use serde_json::Value;

use crate::{simulate, Format, SimOptions, SimResult, Simulation};

/// Llama-3-70B at TP 4 on H100 (≈ 17 req/s per replica at P90 E2E 8 s with these lengths),
/// two replicas to start, evenly spaced arrivals at `rate` req/s for 300 s, then 4 × `rate`
/// until 600 s.
fn step_scenario(rate: f64, scaling: &str) -> String {
    let mut reqs = Vec::new();
    let mut t = 0.0;
    while t < 600.0 {
        reqs.push(format!(r#"{{"arrival_ms": {:.3}, "prompt_tokens": 512, "output_tokens": 128}}"#, t * 1e3));
        t += if t < 300.0 { 1.0 / rate } else { 1.0 / (4.0 * rate) };
    }
    format!(
        r#"{{"seed": 0, "model": "llama-3-70b", "gpu": "h100",
        "deployment": {{"tp": 4, "replicas": 2, "router": "least_outstanding_tokens"}},
        "workload": {{"requests": [{}]}}, "scaling": {scaling}}}"#,
        reqs.join(",")
    )
}

const SCALE: &str = r#"{"min_replicas": 2, "max_replicas": 8, "metric": "e2e_p90_ms", "target": 4000,
    "window_s": 30, "interval_s": 15, "scale_down_cooldown_s": 60, "stabilization_window_s": 60}"#;

fn run(text: &str) -> SimResult {
    simulate(text, Format::Json, SimOptions::default()).unwrap()
}

/// P90 E2E (ms) of the requests finishing in `[lo_s, hi_s)`.
fn p90_finishing(r: &SimResult, lo_s: f64, hi_s: f64) -> f64 {
    let c = &r.requests;
    let mut v: Vec<f64> = (0..c.request_id.len())
        .filter(|&i| c.finish_ms[i] >= lo_s * 1e3 && c.finish_ms[i] < hi_s * 1e3)
        .map(|i| c.finish_ms[i] - c.arrival_ms[i])
        .collect();
    v.sort_by(f64::total_cmp);
    crate::metrics::percentile(&v, 90.0)
}

fn events(r: &SimResult) -> Vec<Value> {
    r.summary["scaling"]["events"].as_array().unwrap().clone()
}

#[test]
fn a_rate_step_scales_up_after_the_cold_start_and_p90_recovers() {
    let scaled = run(&step_scenario(10.0, SCALE));
    let n = scaled.requests.request_id.len() as u64;
    assert_eq!(scaled.summary["finished"], n, "no request lost");
    let ev = events(&scaled);
    let up = &ev[0];
    let (t_up, ready) = (up["time_s"].as_f64().unwrap(), up["ready_s"].as_f64().unwrap());
    let delay = scaled.summary["scaling"]["scale_up_delay_s"].as_f64().unwrap();
    // 70B / TP 4 in BF16: 35.3 GB per GPU read at 2 GB/s.
    assert!((delay - 17.64).abs() < 0.05, "{delay}");
    assert!(t_up > 300.0 && t_up <= 330.0, "first scale-up {t_up} s: after the step, within two decisions");
    assert!((ready - t_up - delay).abs() < 1e-6);
    assert!(up["to"].as_u64().unwrap() > up["from"].as_u64().unwrap());
    // Ready replicas in the time series: 2 before the new ones are ready, more after.
    let ts = &scaled.timeseries;
    let mean_in = |lo: f64, hi: f64| {
        let v: Vec<f64> = (0..ts.time_ms.len()).filter(|&i| ts.time_ms[i] >= lo * 1e3 && ts.time_ms[i] < hi * 1e3).map(|i| ts.replicas[i]).collect();
        v.iter().sum::<f64>() / v.len() as f64
    };
    assert_eq!(mean_in(0.0, 300.0), 2.0);
    assert!(mean_in(t_up, ready - 0.5) <= 2.0 + 1e-9, "nothing serves before its cold start ends");
    assert!(mean_in(ready + 1.0, ready + 30.0) > 3.0);
    // The same step with min = max: no scaling, and the tail does not recover.
    let fixed = run(&step_scenario(10.0, &SCALE.replace("\"max_replicas\": 8", "\"max_replicas\": 2")));
    assert!(events(&fixed).is_empty());
    assert_eq!(fixed.summary["scaling"]["peak_replicas"], 2);
    let (before, after_s, after_f) = (p90_finishing(&scaled, 200.0, 300.0), p90_finishing(&scaled, 420.0, 600.0), p90_finishing(&fixed, 420.0, 600.0));
    assert!(after_s < 1.5 * before && after_s < 4000.0, "scaled: P90 {before:.0} ms before, {after_s:.0} after");
    assert!(after_f > 2.0 * after_s && after_f > 1.5 * 4000.0, "fixed: P90 {after_f:.0} ms vs scaled {after_s:.0}");
    // The scaled run holds more GPU-hours, and reports them.
    assert!(scaled.summary["gpu_hours"].as_f64().unwrap() > fixed.summary["gpu_hours"].as_f64().unwrap());
    // Fixed: 2 replicas × 4 GPUs over the whole run.
    let span_h = fixed.summary["duration_s"].as_f64().unwrap() / 3600.0;
    assert!((fixed.summary["gpu_hours"].as_f64().unwrap() - 8.0 * span_h).abs() < 1e-9);
}

#[test]
fn scale_down_waits_for_the_cooldown_and_drains_without_losing_a_request() {
    let r = run(&step_scenario(10.0, SCALE));
    let ev = events(&r);
    let downs: Vec<&Value> = ev.iter().filter(|e| e["to"].as_u64() < e["from"].as_u64()).collect();
    assert!(!downs.is_empty(), "latency under target after the scale-up: replicas leave");
    for pair in ev.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        if b["to"].as_u64() < b["from"].as_u64() {
            assert!(b["time_s"].as_f64().unwrap() - a["time_s"].as_f64().unwrap() >= 60.0 - 1e-9, "cool-down: {a} then {b}");
        }
    }
    // A drained replica takes no request that arrives after it was told to leave (unless
    // taken back later), and every request finished.
    let c = &r.requests;
    for d in &downs {
        let t = d["time_s"].as_f64().unwrap() * 1e3;
        let back = ev.iter().filter(|e| e["time_s"].as_f64().unwrap() * 1e3 > t).map(|e| e["time_s"].as_f64().unwrap() * 1e3).next();
        for rep in d["replicas"].as_array().unwrap() {
            let rep = rep.as_i64().unwrap() as i32;
            let late = (0..c.request_id.len())
                .filter(|&i| c.replica[i] == rep && c.arrival_ms[i] > t && back.is_none_or(|b| c.arrival_ms[i] < b))
                .count();
            assert_eq!(late, 0, "replica {rep} drained at {t} ms took {late} new requests");
        }
    }
    assert!(c.status.iter().all(|&s| s == 0), "every request finished");
    assert_eq!(r.summary["rejected"], 0);
}

#[test]
fn queue_and_kv_metrics_scale_from_samples_and_runs_are_deterministic() {
    for metric in [r#""queue_length", "target": 2"#, r#""kv_usage", "target": 0.05"#, r#""ttft_p90_ms", "target": 800"#] {
        let scaling = format!(r#"{{"min_replicas": 1, "max_replicas": 6, "metric": {metric}, "window_s": 20, "interval_s": 10, "scale_up_delay_s": 5}}"#);
        let text = step_scenario(6.0, &scaling).replace("\"replicas\": 2", "\"replicas\": 1");
        let a = run(&text);
        assert!(!events(&a).is_empty(), "{metric}: the step is seen");
        assert_eq!(a.summary["finished"], a.requests.request_id.len() as u64);
        assert_eq!(a.to_json(), run(&text).to_json(), "{metric}: same bytes");
        // In slices (as a front end with a progress bar runs it): same bytes.
        let mut sim = Simulation::from_text(&text, Format::Json, SimOptions::default()).unwrap();
        while !sim.run_events(997).unwrap() {}
        assert_eq!(sim.finish().unwrap().to_json(), a.to_json(), "{metric}: sliced");
    }
}

#[test]
fn without_scaling_nothing_changes_and_bad_sections_name_the_field() {
    let plain = run(&step_scenario(2.0, "null"));
    assert!(plain.summary.get("scaling").is_none() && plain.summary.get("gpu_hours").is_none());
    assert!(plain.timeseries.replicas.is_empty());
    let err = |scaling: &str| crate::validate(&step_scenario(2.0, scaling), Format::Json).unwrap_err();
    let base = r#""metric": "e2e_p90_ms", "target": 1000"#;
    for (scaling, path) in [
        (format!(r#"{{"min_replicas": 0, "max_replicas": 2, {base}}}"#), "scaling.min_replicas"),
        (format!(r#"{{"min_replicas": 3, "max_replicas": 2, {base}}}"#), "scaling.max_replicas"),
        (format!(r#"{{"min_replicas": 3, "max_replicas": 4, {base}}}"#), "deployment.replicas"),
        (r#"{"min_replicas": 1, "max_replicas": 4, "metric": "e2e_p99_ms", "target": 1}"#.to_string(), "scaling.metric"),
        (r#"{"min_replicas": 1, "max_replicas": 4, "metric": "kv_usage", "target": 2}"#.to_string(), "scaling.target"),
        (format!(r#"{{"min_replicas": 1, "max_replicas": 4, {base}, "window_s": 0}}"#), "scaling.window_s"),
        (format!(r#"{{"min_replicas": 1, "max_replicas": 4, {base}, "tolerance": 1}}"#), "scaling.tolerance"),
        (format!(r#"{{"min_replicas": 1, "max_replicas": 4, {base}, "scale_up_delay_s": -1}}"#), "scaling.scale_up_delay_s"),
        (format!(r#"{{"min_replicas": 1, "max_replicas": 4, {base}, "bogus": 1}}"#), "scaling.bogus"),
    ] {
        assert_eq!(err(&scaling).path(), Some(path), "{scaling}");
    }
    assert!(err(r#"{"min_replicas": 1, "max_replicas": 4, "metric": "e2e_p99_ms", "target": 1}"#).to_string().contains("did you mean e2e_p90_ms"));
}
