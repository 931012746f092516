//! Warm-up (`cost_model.warmup`, perf/warmup.rs) through whole runs: the first step that
//! needs a fused-MoE configuration start-up did not compile waits for it, once per
//! configuration per replica; nothing changes for a dense model or with warm-up off; bad
//! constants are errors naming their field.

mod common;

use common::{err, run};
use serde_json::{json, Value};

const STALL_MS: f64 = 1300.0;

/// Requests far apart (each runs alone): prompts of `prompts` tokens, 2 output tokens.
fn scenario(model: &str, tp: u32, replicas: u32, prompts: &[u32], warmup: Option<Value>) -> Value {
    let requests: Vec<Value> = prompts
        .iter()
        .enumerate()
        .map(|(i, &p)| json!({"arrival_ms": 5000.0 * i as f64, "prompt_tokens": p, "output_tokens": 2}))
        .collect();
    let mut cost = json!({"engine": "vllm"});
    if let Some(w) = warmup {
        cost["warmup"] = w;
    }
    json!({
        "seed": 1, "model": model, "gpu": "h100",
        "deployment": {"tp": tp, "replicas": replicas, "router": "round_robin"},
        "scheduler": {"policy": "vllm", "max_num_batched_tokens": 2048, "max_num_seqs": 128,
                      "enable_prefix_caching": false},
        "cost_model": cost,
        "workload": {"requests": requests},
    })
}

fn ttfts(v: &Value) -> Vec<f64> {
    let r = run(v);
    r.requests.first_token_ms.iter().zip(&r.requests.engine_arrival_ms).map(|(f, a)| f - a).collect()
}

const MIXTRAL: &str = "mistralai/Mixtral-8x7B-v0.1";

#[test]
fn each_configuration_stalls_its_first_step_once_per_replica() {
    // 600 tokens: the 512 configuration; 1000: 1024; 100 (a graph-replayed size) and 2048
    // (the profiling pass's) were compiled at start-up
    let prompts = [600, 600, 100, 2048, 1000, 700, 1000];
    let on = ttfts(&scenario(MIXTRAL, 2, 1, &prompts, None));
    let off = ttfts(&scenario(MIXTRAL, 2, 1, &prompts, Some(json!(false))));
    let extra: Vec<f64> = on.iter().zip(&off).map(|(a, b)| ((a - b) * 1e3).round() / 1e3).collect();
    assert_eq!(extra, [STALL_MS, 0.0, 0.0, 0.0, STALL_MS, 0.0, 0.0]);
    // two replicas, round robin: each compiles the 512 configuration for itself
    let on = ttfts(&scenario(MIXTRAL, 2, 2, &[600, 600, 600, 600], None));
    let off = ttfts(&scenario(MIXTRAL, 2, 2, &[600, 600, 600, 600], Some(json!(false))));
    let extra: Vec<f64> = on.iter().zip(&off).map(|(a, b)| ((a - b) * 1e3).round() / 1e3).collect();
    assert_eq!(extra, [STALL_MS, STALL_MS, 0.0, 0.0]);
}

#[test]
fn the_constant_is_the_user_s_and_off_means_none() {
    let set = |w: Value| ttfts(&scenario(MIXTRAL, 2, 1, &[600], Some(w)))[0];
    let off = set(json!(false));
    assert!((set(json!({"moe_config_compile_ms": 250.0})) - off - 250.0).abs() < 1e-6);
    assert!((set(json!({"enabled": false, "moe_config_compile_ms": 250.0})) - off).abs() < 1e-9);
    assert!((set(json!({"moe_config_compile_ms": 0.0})) - off).abs() < 1e-9);
    // the user's table: 600 tokens are nearest 512, which no start-up size is nearest to
    assert!((set(json!({"moe_config_batches": [256, 512, 2048]})) - off - STALL_MS).abs() < 1e-6);
    // with [256, 2048], 600 is nearest 256, compiled by the CUDA-graph capture
    assert!((set(json!({"moe_config_batches": [256, 2048]})) - off).abs() < 1e-9);
    // eager (no CUDA graphs): start-up ran only 2048 and 128 tokens
    let eager = |w: Value| {
        let mut v = scenario(MIXTRAL, 2, 1, &[256], Some(w));
        v["cost_model"]["cuda_graphs"] = json!(false);
        ttfts(&v)[0]
    };
    assert!((eager(json!(true)) - eager(json!(false)) - STALL_MS).abs() < 1e-6);
}

#[test]
fn a_dense_model_or_another_engine_never_stalls() {
    let prompts = [600, 1000, 1500, 3000];
    for (model, tp) in [("meta-llama/Llama-2-7b-hf", 1), ("meta-llama/Llama-2-70b-hf", 4)] {
        let on = run(&scenario(model, tp, 1, &prompts, None));
        let off = run(&scenario(model, tp, 1, &prompts, Some(json!(false))));
        assert_eq!(on.requests.first_token_ms, off.requests.first_token_ms, "{model}");
        assert_eq!(on.requests.finish_ms, off.requests.finish_ms, "{model}");
    }
    let trt = |w: Option<Value>| {
        let mut v = scenario(MIXTRAL, 2, 1, &prompts, w);
        v["cost_model"]["engine"] = json!("trtllm");
        v["scheduler"] = json!({"policy": "trtllm", "max_num_tokens": 2048, "max_batch_size": 128});
        run(&v).requests.first_token_ms
    };
    assert_eq!(trt(None), trt(Some(json!(false))));
}

#[test]
fn bad_warmup_settings_name_their_field() {
    let path = |w: Value| {
        let e = err(&scenario(MIXTRAL, 2, 1, &[600], Some(w)));
        (e.path().map(str::to_string), e.to_string())
    };
    for (w, field) in [
        (json!({"moe_config_compile_ms": -1.0}), "cost_model.warmup.moe_config_compile_ms"),
        (json!({"moe_config_batches": []}), "cost_model.warmup.moe_config_batches"),
        (json!({"moe_config_batches": [512, 256]}), "cost_model.warmup.moe_config_batches"),
        (json!({"moe_config_batches": [0, 256]}), "cost_model.warmup.moe_config_batches"),
    ] {
        let (p, msg) = path(w.clone());
        assert_eq!(p.as_deref(), Some(field), "{w}: {msg}");
    }
    let (_, msg) = path(json!({"moe_config_compile_msec": 5.0}));
    assert!(msg.contains("moe_config_compile_msec"), "{msg}");
    let (_, msg) = path(json!("yes"));
    assert!(msg.contains("warmup") || msg.contains("true, false"), "{msg}");
    // constants for an engine without the kernels
    let mut v = scenario(MIXTRAL, 2, 1, &[600], Some(json!({"moe_config_compile_ms": 5.0})));
    v["cost_model"]["engine"] = json!("reference");
    let e = err(&v);
    assert_eq!(e.path(), Some("cost_model.warmup"), "{e}");
    // the linear model has no kernels at all
    let mut v = scenario(MIXTRAL, 2, 1, &[600], None);
    v["cost_model"] = json!({"kind": "linear", "base_ms": 1.0, "warmup": false});
    assert!(err(&v).to_string().contains("warmup"));
}
