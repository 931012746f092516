//! A recorded step's anatomy: its kernels in launch order on a timeline that ends where the
//! run's step ended (the price is the same model), with streams, sources and occupancy.

use serde_json::{json, Value};
use sim_core::{simulate, step_anatomy, Format, SimOptions};

fn scenario(policy: &str, extra: Value) -> Value {
    let mut v = json!({
        "seed": 3, "model": "llama-3-70b", "gpu": "h200",
        "deployment": {"tp": 4},
        "scheduler": {"policy": policy},
        "workload": {"num_requests": 30, "arrival": {"kind": "poisson", "rate": 6.0},
                     "prompt": {"kind": "lognormal", "mean": 900, "sigma": 0.6, "max": 6000},
                     "output": {"kind": "uniform", "min": 8, "max": 64}}
    });
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    v
}

/// Every `stride`-th step of a run with its anatomy (the first always).
fn anatomies(v: &Value, stride: usize) -> Vec<(Value, Value)> {
    let text = v.to_string();
    let r = simulate(&text, Format::Json, SimOptions { record_steps: true, ..SimOptions::default() }).unwrap();
    let steps: Vec<Value> = serde_json::from_str(&r.steps_json()).unwrap();
    steps
        .into_iter()
        .step_by(stride)
        .map(|s| {
            let a: Value = serde_json::from_str(&step_anatomy(&text, Format::Json, &s.to_string()).unwrap()).unwrap();
            (s, a)
        })
        .collect()
}

fn col<'a>(a: &'a Value, name: &str) -> &'a Vec<Value> {
    a["kernels"][name].as_array().unwrap()
}

#[test]
fn a_steps_kernels_fill_its_recorded_duration_in_launch_order() {
    let all = anatomies(&scenario("vllm", json!({})), 7);
    assert!(all.len() > 20);
    for (step, a) in &all {
        let (recorded, end) = (a["recorded_ms"].as_f64().unwrap(), a["step_ms"].as_f64().unwrap());
        // The run interpolates the dense part on a grid (≤ 0.2%); the anatomy is exact.
        assert!((end / recorded - 1.0).abs() < 2e-3, "step {step}: anatomy {end} ms, recorded {recorded} ms");
        let (start, stop) = (col(a, "start_us"), col(a, "end_us"));
        let last = stop.iter().map(|x| x.as_f64().unwrap()).fold(0.0, f64::max);
        assert!(last <= end * 1e3 + 1e-6);
        // On the GPU one kernel at a time, in launch order.
        let mut t = 0.0;
        for i in 0..start.len() {
            if col(a, "stream")[i] == "cpu" {
                continue;
            }
            let (s, e) = (start[i].as_f64().unwrap(), stop[i].as_f64().unwrap());
            assert!(s >= t - 1e-9 && e >= s, "kernel {i}: {s}..{e} after {t}");
            t = e;
        }
    }
    // A decode step of Llama-3-70B at TP 4 as a CUDA graph. vLLM's engine: the replay was
    // launched during the previous step (async scheduling), then per layer qkv, one fused
    // RoPE kernel, attention, … The reference engine: the replay launch first, 16 RoPE
    // kernels per layer.
    let reference = anatomies(&scenario("vllm", json!({"cost_model": {"engine": "reference"}})), 7);
    for (a, first, ropes) in [
        (decode_step(&all), vec!["embedding", "rms_norm", "qkv"], 1),
        (decode_step(&reference), vec!["graph_launch", "embedding", "rms_norm", "qkv"], 16),
    ] {
        decode_anatomy(a, &first, ropes);
    }
    // A decode GEMM of a few rows fills a fraction of the 132 SMs; a 2k-token prefill more.
    let occ_of = |a: &Value, op: &str| {
        let names = col(a, "name");
        col(a, "sm_occupancy")[names.iter().position(|n| n == op).unwrap()].as_f64().unwrap()
    };
    let a = decode_step(&all);
    let (_, big) = all.iter().max_by_key(|(s, _)| s["shape"]["prefill"].as_array().unwrap().iter().map(|p| p[0].as_u64().unwrap()).sum::<u64>()).unwrap();
    assert!(occ_of(a, "qkv") < occ_of(big, "qkv"), "{} vs {}", occ_of(a, "qkv"), occ_of(big, "qkv"));
    // A mixed step under vLLM: one attention call per layer for all its requests.
    let (_, mixed) = all.iter().find(|(s, _)| s["shape"]["prefill"].as_array().unwrap().len() + (s["shape"]["decode_seqs"].as_u64().unwrap() > 0) as usize >= 2).unwrap();
    let layer0: Vec<&str> = col(mixed, "name").iter().zip(col(mixed, "layer")).filter(|(_, l)| l.as_i64() == Some(0)).map(|(n, _)| n.as_str().unwrap()).collect();
    assert_eq!(layer0.iter().filter(|n| n.starts_with("attention")).collect::<Vec<_>>(), [&"attention"]);
}

fn decode_step(all: &[(Value, Value)]) -> &Value {
    &all.iter().find(|(s, _)| s["shape"]["prefill"].as_array().unwrap().is_empty()).unwrap().1
}

fn decode_anatomy(a: &Value, first: &[&str], ropes: usize) {
    assert_eq!(a["graph"], true);
    let names: Vec<&str> = col(a, "name").iter().map(|x| x.as_str().unwrap()).collect();
    assert_eq!(&names[..first.len()], first);
    let layer0: Vec<&str> = names.iter().zip(col(a, "layer")).filter(|(_, l)| l.as_i64() == Some(0)).map(|(n, _)| *n).collect();
    assert_eq!(layer0.iter().filter(|n| n.starts_with("rope")).count(), ropes, "{layer0:?}");
    assert_eq!(layer0.iter().filter(|n| **n == "tp_allreduce").count(), 2);
    assert!(layer0.contains(&"attention_decode"));
    assert_eq!(names.last(), Some(&"tp_logits_gather"));
    let layers = col(a, "layer").iter().filter_map(|x| x.as_i64()).max().unwrap();
    assert_eq!(layers, 79);
    // Streams, sources and occupancy per kernel.
    for (i, n) in names.iter().enumerate() {
        let stream = col(a, "stream")[i].as_str().unwrap();
        let want = match *n {
            "graph_launch" => "cpu",
            "tp_allreduce" | "tp_logits_gather" => "communication",
            _ => "compute",
        };
        assert_eq!(stream, want, "{n}");
        let occ = col(a, "sm_occupancy")[i].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&occ), "{n}: {occ}");
    }
    let source_of = |op: &str| col(a, "source")[names.iter().position(|n| *n == op).unwrap()].as_str().unwrap().to_string();
    assert_eq!(source_of("tp_allreduce"), "model");
    assert!(["table", "interpolated"].contains(&source_of("qkv").as_str()), "{}", source_of("qkv"));
}

#[test]
fn eager_steps_topology_comm_and_the_decision_latency_are_on_the_timeline() {
    // Eager launches: kernels wait for the CPU; still within the model's price.
    let eager = anatomies(&scenario("vllm", json!({"cost_model": {"cuda_graphs": false}})), 25);
    for (_, a) in &eager {
        assert_eq!(a["graph"], false);
        let (recorded, end) = (a["recorded_ms"].as_f64().unwrap(), a["step_ms"].as_f64().unwrap());
        assert!(end <= recorded * 1.002 && end > 0.98 * recorded, "eager anatomy {end} vs {recorded}");
        let launched = col(a, "launched_us");
        let start = col(a, "start_us");
        assert!((0..start.len()).all(|i| start[i].as_f64().unwrap() + 1e-9 >= launched[i].as_f64().unwrap()));
    }
    // On a topology the AllReduces carry the communication it priced.
    let topo = anatomies(&scenario("vllm", json!({"topology": "hgx-h200"})), 25);
    for (step, a) in &topo {
        assert!(step["shape"]["comm_ms"].as_f64().unwrap() > 0.0);
        let (recorded, end) = (a["recorded_ms"].as_f64().unwrap(), a["step_ms"].as_f64().unwrap());
        assert!((end / recorded - 1.0).abs() < 2e-3, "{end} vs {recorded}");
    }
    // o1pro: the first step after an idle gap waits for its scheduling decision.
    let o1 = anatomies(&scenario("o1pro", json!({})), 1000);
    let (step, a) = &o1[0];
    assert!(step["shape"]["decision_ms"].as_f64().unwrap() > 0.0);
    assert_eq!(col(a, "name")[0], "scheduler_decision");
    assert_eq!(col(a, "stream")[0], "cpu");
}

#[test]
fn a_bad_step_names_its_field() {
    let text = scenario("vllm", json!({})).to_string();
    let e = step_anatomy(&text, Format::Json, r#"{"shape": {"prefill": [[1, 2, 3]]}}"#).unwrap_err();
    assert!(e.path().unwrap().starts_with("step.shape.prefill"), "{e}");
    let e = step_anatomy(&text, Format::Json, r#"{"shape": {"decode_seqs": -1}}"#).unwrap_err();
    assert_eq!(e.path(), Some("step.shape.decode_seqs"), "{e}");
    let e = step_anatomy(&text, Format::Json, r#"{"shape": {"comm_ms": -1.0}}"#).unwrap_err();
    assert_eq!(e.path(), Some("step.shape.comm_ms"), "{e}");
    let e = step_anatomy(&text, Format::Json, "not json").unwrap_err();
    assert_eq!(e.path(), Some("step"), "{e}");
    let e = step_anatomy(&text, Format::Json, r#"{"shape": {"colour": 1}}"#).unwrap_err();
    assert!(e.to_string().contains("colour"), "{e}");
}

#[test]
fn an_mla_models_steps_list_its_projections_and_latent_attention() {
    // DeepSeek-V3 on one 8 × H200 node (TP 8): every recorded step's anatomy has MLA's
    // projections in place of the qkv GEMM, and its decode steps the absorbed
    // up-projections around the latent attention.
    let v = scenario("vllm", json!({"model": "deepseek-v3", "deployment": {"tp": 8}}));
    let all = anatomies(&v, 5);
    assert!(all.len() > 5);
    let mut decodes = 0;
    for (step, a) in &all {
        let names: Vec<&str> = col(a, "name").iter().map(|n| n.as_str().unwrap()).collect();
        for op in ["fused_qkv_a_proj", "q_a_layernorm", "q_b_proj", "kv_a_layernorm", "kv_write", "o"] {
            assert!(names.contains(&op), "step {step}: no {op}");
        }
        assert!(!names.contains(&"qkv"), "step {step}");
        let shape = &step["shape"];
        if shape["decode_seqs"].as_u64().unwrap() > 0 {
            decodes += 1;
            for op in ["w_uk_absorb", "attention_decode", "w_uv_up"] {
                assert!(names.contains(&op), "step {step}: no {op}");
            }
        }
        if !shape["prefill"].as_array().unwrap().is_empty() {
            assert!(names.contains(&"kv_b_proj") && names.contains(&"attention_prefill"), "step {step}");
        }
        let (recorded, end) = (a["recorded_ms"].as_f64().unwrap(), a["step_ms"].as_f64().unwrap());
        assert!((end / recorded - 1.0).abs() < 2e-3, "step {step}: {end} vs {recorded}");
    }
    assert!(decodes > 0);
}
