//! Expert parallelism and data-parallel attention end to end (scenarios through `simulate`).

use serde_json::{json, Value};
use sim_core::{simulate, Format, SimOptions};

fn scenario(model: &str, gpu: &str, tp: u32, dp: u32, ep: u32, moe: Value) -> Value {
    json!({
        "seed": 3, "model": model, "gpu": gpu,
        "deployment": {"tp": tp, "dp": dp, "ep": ep, "moe": moe},
        "scheduler": {"policy": "vllm", "max_num_seqs": 256},
        "workload": {"num_requests": 400, "arrival": {"kind": "poisson", "rate": 200.0},
                     "prompt": {"kind": "fixed", "value": 1000}, "output": {"kind": "fixed", "value": 200}}
    })
}

fn run(v: &Value) -> Value {
    simulate(&v.to_string(), Format::Json, SimOptions::default()).unwrap_or_else(|e| panic!("{e}")).summary
}

#[test]
fn probe() {
    for (dp, ep, moe) in [(1, 1, json!({})), (8, 8, json!({})), (8, 8, json!({"two_batch_overlap": true})), (8, 8, json!({"redundant_experts": 16})), (8, 8, json!({"all_to_all": "allgather"}))] {
        let s = run(&scenario("qwen3-30b-a3b", "h200", 1, dp, ep, moe.clone()));
        println!("dp {dp} ep {ep} {moe}: tpot {:.3} ttft {:.1} thr {:.0} tok/s batch {:.1}", s["tpot_ms"]["mean"].as_f64().unwrap(), s["ttft_ms"]["mean"].as_f64().unwrap(), s["output_tokens_per_s"].as_f64().unwrap(), s["mean_batch_size"].as_f64().unwrap());
    }
}
