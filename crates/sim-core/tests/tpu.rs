//! The `tpu-v5e` preset: §2.4's tile rules on a second target (the seed's 8×8 MXU tile), ICI
//! torus topologies, and GPU-only options refused by name.

use serde_json::{json, Value};
use sim_core::{predict_step, simulate, Format, SimOptions};

fn predict(gpu: Value, new_tokens: u32) -> f64 {
    let req = json!({"model": "llama-3-8b", "gpu": gpu, "batch": [{"new_tokens": new_tokens, "context_tokens": 0}]});
    let p: Value = serde_json::from_str(&predict_step(&req.to_string()).unwrap()).unwrap();
    p["breakdown"].as_array().unwrap().iter().find(|o| o["op"] == "qkv").unwrap()["ms"].as_f64().unwrap()
}

#[test]
fn the_mxu_pads_gemms_to_the_seeds_8_rows_where_tensor_cores_pad_to_16() {
    // The same chip with tensor cores (16×16 tiles) and with MXUs (the seed's 8×8): a GEMM
    // of 9 rows pads to 16 on both, one of 8 rows only on tensor cores. Compute-bound rows
    // (a large weight-free limit: peak far below the weights' streaming) show it.
    let slow = |unit: &str| json!({"preset": "tpu-v5e", "matrix_unit": unit, "hbm_tbps": 1000.0});
    let (mxu8, tc8) = (predict(slow("mxu"), 8), predict(slow("tensor_core"), 8));
    let (mxu9, tc9) = (predict(slow("mxu"), 9), predict(slow("tensor_core"), 9));
    assert!(mxu8 < 0.7 * tc8, "8 rows: MXU {mxu8} ms vs tensor cores {tc8} ms (16 padded)");
    assert!((mxu9 - tc9).abs() < 1e-12, "9 rows pad to 16 either way: {mxu9} vs {tc9}");
}

fn tpu_run(extra: Value) -> Result<sim_core::SimResult, sim_core::SimError> {
    let mut v = json!({
        "seed": 2, "model": "llama-3-8b", "gpu": "tpu-v5e",
        "deployment": {"tp": 4, "replicas": 2},
        "workload": {"num_requests": 40, "arrival": {"kind": "poisson", "rate": 4.0},
                     "prompt": {"kind": "fixed", "value": 512}, "output": {"kind": "fixed", "value": 64}}
    });
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    simulate(&v.to_string(), Format::Json, SimOptions::default())
}

#[test]
fn a_tpu_v5e_slice_serves_over_its_ici_torus() {
    let plain = tpu_run(json!({})).unwrap();
    assert_eq!(plain.summary["finished"], 40);
    assert_eq!(plain.deployment["gpu"]["matrix_unit"], "mxu");
    // On the 2 × 4 torus preset: two TP-4 replicas, their AllReduces over ICI links.
    let torus = tpu_run(json!({"topology": "tpu-v5e-8"})).unwrap();
    assert_eq!(torus.summary["finished"], 40);
    let links = torus.links.as_ref().unwrap();
    assert_eq!(links.kind.iter().filter(|k| *k == "ici").count(), links.kind.len());
    assert_eq!(links.kind.len(), 12, "2 × 4 torus: 8 row links + 4 column links");
    assert!(links.bytes.iter().any(|&b| b > 0.0));
    // The AllReduces are priced on the ring's ICI links (50 GB/s a direction, 1 µs a hop),
    // not on the chip's nominal 400 GB/s: the times differ.
    let tpot = |r: &sim_core::SimResult| r.summary["tpot_ms"]["mean"].as_f64().unwrap();
    assert!(tpot(&torus) != tpot(&plain));
    // The GPUs' records are unchanged: no matrix_unit key on a tensor-core part.
    let gpu = tpu_run(json!({"gpu": "h100"})).unwrap();
    assert!(gpu.deployment["gpu"].get("matrix_unit").is_none());
}

#[test]
fn gpu_only_options_on_a_tpu_are_errors_naming_the_field() {
    let field = |extra: Value| tpu_run(extra).unwrap_err().path().map(str::to_string);
    for f in ["nvlink_gbps", "nvlink_gpus", "descriptor_cache_entries", "descriptor_miss_cycles"] {
        let mut gpu = json!({"preset": "tpu-v5e"});
        gpu[f] = json!(100);
        assert_eq!(field(json!({"gpu": gpu})), Some(format!("gpu.{f}")), "{f}");
    }
    assert_eq!(field(json!({"cost_model": {"cuda_graphs": false}})), Some("cost_model.cuda_graphs".into()));
    assert_eq!(field(json!({"cost_model": {"cuda_graph_max_tokens": 512}})), Some("cost_model.cuda_graph_max_tokens".into()));
    // ICI is a TPU's: on a GPU it is refused, on the TPU it sets the interconnect.
    let e = simulate(&json!({"model": "llama-3-8b", "gpu": {"preset": "h100", "ici_gbps": 100}}).to_string(), Format::Json, SimOptions::default()).unwrap_err();
    assert_eq!(e.path(), Some("gpu.ici_gbps"));
    let ok = tpu_run(json!({"gpu": {"preset": "tpu-v5e", "ici_gbps": 200.0}})).unwrap();
    assert_eq!(ok.deployment["gpu"]["nvlink_gbps"], 200.0);
    assert_eq!(field(json!({"gpu": {"preset": "tpu-v5e", "matrix_unit": "systolic"}})), Some("gpu.matrix_unit".into()));
    // A 70B model does not fit one 16 GB chip.
    let e = tpu_run(json!({"model": "llama-3-70b", "deployment": {"tp": 1}})).unwrap_err();
    assert_eq!(e.kind_name(), "InfeasibleError", "{e}");
}
