//! GPUs rank physically at defaults: on the same scenario, a GPU at least as capable as
//! another in every datasheet figure (compute, memory bandwidth and size, interconnect) is
//! never predicted slower, over every pair of GPU presets (the step-level check is
//! `perf::tests::a_faster_gpu_is_never_predicted_slower`).

use sim_core::catalog::gpu_presets;
use sim_core::{simulate, Format, SimOptions};

/// The summary, or None where the deployment does not fit the GPU.
fn run(model: &str, gpu: &str, tp: u32) -> Option<serde_json::Value> {
    let text = format!(
        r#"{{"seed": 3, "model": "{model}", "gpu": "{gpu}", "deployment": {{"tp": {tp}}},
            "scheduler": {{"max_num_seqs": 64, "max_num_batched_tokens": 2048}},
            "workload": {{"num_requests": 300, "arrival": {{"kind": "poisson", "rate": 4.0}},
              "prompt": {{"kind": "lognormal", "mean": 900, "sigma": 0.6, "max": 4000}},
              "output": {{"kind": "uniform", "min": 32, "max": 400}}}}}}"#
    );
    match simulate(&text, Format::Json, SimOptions::default()) {
        Ok(r) => Some(r.summary),
        Err(sim_core::SimError::Infeasible { .. }) => None,
        Err(e) => panic!("{model} on {gpu}: {e}"),
    }
}

#[test]
fn a_faster_gpu_never_serves_a_scenario_slower() {
    let gpus = gpu_presets();
    let mut pairs = 0;
    for (model, tp) in [("llama-3-8b", 1), ("llama-3-70b", 4), ("mixtral-8x7b", 2)] {
        let results: Vec<_> = gpus.iter().map(|g| run(model, &g.name, tp)).collect();
        for (a, ra) in gpus.iter().zip(&results) {
            for (b, rb) in gpus.iter().zip(&results) {
                if a.name == b.name || !a.dominates(b) {
                    continue;
                }
                let Some(rb) = rb else { continue };
                // a GPU with at least as much memory holds whatever the other holds
                let ra = ra.as_ref().unwrap_or_else(|| panic!("{model} fits {} but not {}", b.name, a.name));
                pairs += 1;
                // Means strictly; a tail within 2% (faster steps batch requests differently,
                // which may move a single request's place in line). Not TPOT: a GPU with less
                // memory holds fewer requests at once, so each of its decode steps is smaller.
                for metric in ["ttft_ms", "e2e_ms"] {
                    for (stat, slack) in [("mean", 1.0), ("p99", 1.02)] {
                        let (x, y) = (ra[metric][stat].as_f64().unwrap(), rb[metric][stat].as_f64().unwrap());
                        assert!(x <= y * slack, "{model} tp{tp} {metric} {stat}: {} {x} > {} {y}", a.name, b.name);
                    }
                }
            }
        }
    }
    assert!(pairs >= 20, "{pairs}");
}
