//! A calibration profile on the shipped base (what `o1sim calibrate` writes): no tables of its
//! own, a GPU time scale and the front end measured with it.

use sim_core::{predict_step, simulate, Format, SimOptions};

fn predict(profile: &str) -> serde_json::Value {
    let req = format!(
        r#"{{"model": "llama-3-8b", "gpu": "h100", "batch": [{{"new_tokens": 1, "context_tokens": 1000}}, {{"new_tokens": 1, "context_tokens": 900}}], "profile": {profile}}}"#
    );
    serde_json::from_str(&predict_step(&req).unwrap()).unwrap()
}

fn line(p: &serde_json::Value, op: &str) -> f64 {
    p["breakdown"].as_array().unwrap().iter().find(|o| o["op"] == op).unwrap()["ms"].as_f64().unwrap()
}

#[test]
fn a_profile_on_the_shipped_base_scales_kernel_times() {
    let one = predict(r#"{"gpu": "h100", "source": "mine", "base": "shipped"}"#);
    let half = predict(r#"{"gpu": "h100", "source": "mine", "base": "shipped", "gpu_time_scale": 0.5}"#);
    for op in ["qkv", "gate_up", "attention", "add_rms_norm"] {
        assert!((line(&half, op) / line(&one, op) - 0.5).abs() < 1e-12, "{op}");
    }
    assert!(half["profile"].as_str().unwrap().starts_with("mine (on Vidur"), "{}", half["profile"]);
    // a GPU without a shipped profile: its roofline, scaled
    let req = |profile: &str| {
        let text = format!(r#"{{"model": "llama-3-8b", "gpu": "l40s", "batch": [{{"new_tokens": 1, "context_tokens": 1000}}], "profile": {profile}}}"#);
        serde_json::from_str::<serde_json::Value>(&predict_step(&text).unwrap()).unwrap()
    };
    let (r1, r2) = (req(r#"{"gpu": "l40s", "source": "m", "base": "roofline"}"#), req(r#"{"gpu": "l40s", "source": "m", "base": "roofline", "gpu_time_scale": 2}"#));
    assert!((line(&r2, "gate_up") / line(&r1, "gate_up") - 2.0).abs() < 1e-12);
    assert_eq!(line(&r1, "gate_up"), line(&serde_json::from_str(&predict_step(r#"{"model": "llama-3-8b", "gpu": "l40s", "batch": [{"new_tokens": 1, "context_tokens": 1000}]}"#).unwrap()).unwrap(), "gate_up"));
}

#[test]
fn a_profile_carries_its_front_end() {
    let text = r#"{"model": "llama-3-8b", "gpu": "h100",
      "cost_model": {"profile": {"gpu": "h100", "source": "mine", "base": "shipped",
                                 "frontend": {"request_ms": 10.0, "prompt_token_us": 0.0}}},
      "workload": {"requests": [{"arrival_ms": 0, "prompt_tokens": 100, "output_tokens": 4}]}}"#;
    let r = simulate(text, Format::Json, SimOptions::default()).unwrap();
    assert_eq!(r.requests.engine_arrival_ms, vec![10.0]);
    // the scenario's own section overrides the profile's
    let text = text.replace(r#""workload""#, r#""frontend": {"request_ms": 1.0}, "workload""#);
    let r = simulate(&text, Format::Json, SimOptions::default()).unwrap();
    assert_eq!(r.requests.engine_arrival_ms, vec![1.0]);
}

#[test]
fn bad_calibration_profiles_name_the_field() {
    for (profile, field) in [
        (r#"{"gpu": "h100", "source": "x", "base": "mine"}"#, "profile.base"),
        (r#"{"gpu": "l40s", "source": "x", "base": "shipped"}"#, "profile.gpu"),
        (r#"{"gpu": "h100", "source": "x", "base": "shipped", "gpu_time_scale": 0}"#, "profile.gpu_time_scale"),
        (r#"{"gpu": "h100", "source": "x", "base": "shipped", "frontend": {"token_ms": -2}}"#, "profile.frontend.token_ms"),
        (r#"{"gpu": "h100", "source": "x", "base": "shipped", "frontend": {"tokens_ms": 2}}"#, "profile.frontend.tokens_ms"),
        (r#"{"gpu": "h100", "source": "x"}"#, "profile"),
        (r#"{"gpu": "h100", "source": "x", "base": "roofline", "gemm": [{"dtype": "bf16", "op": "qkv", "label": "x", "k": 8, "n": 8, "m": [1], "ms": [1]}]}"#, "profile.base"),
    ] {
        let req = format!(r#"{{"model": "llama-3-8b", "gpu": "h100", "batch": [{{"new_tokens": 8}}], "profile": {profile}}}"#);
        let e = predict_step(&req).unwrap_err();
        assert_eq!(e.path(), Some(field), "{profile}: {e}");
    }
}
