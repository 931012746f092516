//! Expert parallelism and data-parallel attention: the step anatomy's exchanges, EP over
//! the node boundary, two-batch overlap, load balancing, and whole runs.

use serde_json::{json, Value};
use sim_core::{simulate, step_anatomy, Format, SimOptions};

const MOE: &str = "qwen3-30b-a3b";

fn scenario(model: &str, gpu: &str, tp: u32, dp: u32, ep: u32, moe: Value) -> Value {
    json!({
        "seed": 3, "model": model, "gpu": gpu,
        "deployment": {"tp": tp, "dp": dp, "ep": ep, "moe": moe},
        "scheduler": {"policy": "vllm", "max_num_seqs": 256},
        "workload": {"num_requests": 400, "arrival": {"kind": "poisson", "rate": 200.0},
                     "prompt": {"kind": "fixed", "value": 1000}, "output": {"kind": "fixed", "value": 200}}
    })
}

/// A decode step of `per_rank` sequences on each of the replica's `dp` ranks, 2,000 tokens of
/// context each.
fn decode_step(dp: u64, per_rank: u64) -> Value {
    let n = dp * per_rank;
    json!({"prefill": [], "decode_seqs": n, "decode_context_sum": n * 2000, "context_sum_after": n * 2000,
           "sampled": n, "decode_blocks_1024": 0, "comm_ms": 0.0, "decision_ms": 0.0})
}

/// A prefill step of `per_rank` prompts of 2,048 tokens on each rank.
fn prefill_step(dp: u64, per_rank: u64) -> Value {
    let n = dp * per_rank;
    let items: Vec<Value> = (0..n).map(|_| json!([2048, 0])).collect();
    json!({"prefill": items, "decode_seqs": 0, "decode_context_sum": 0, "context_sum_after": n * 2048,
           "sampled": n, "decode_blocks_1024": 0, "comm_ms": 0.0, "decision_ms": 0.0})
}

fn anatomy(v: &Value, step: &Value) -> Value {
    serde_json::from_str(&step_anatomy(&v.to_string(), Format::Json, &step.to_string()).unwrap_or_else(|e| panic!("{e}"))).unwrap()
}

fn step_ms(v: &Value, step: &Value) -> f64 {
    anatomy(v, step)["step_ms"].as_f64().unwrap()
}

fn run(v: &Value) -> Value {
    simulate(&v.to_string(), Format::Json, SimOptions::default()).unwrap_or_else(|e| panic!("{e}")).summary
}

#[test]
fn the_anatomy_lists_every_moe_layers_dispatch_and_combine() {
    let v = scenario(MOE, "h200", 1, 8, 8, json!({}));
    let a = anatomy(&v, &decode_step(8, 32));
    let names: Vec<&str> = a["kernels"]["name"].as_array().unwrap().iter().map(|x| x.as_str().unwrap()).collect();
    let streams: Vec<&str> = a["kernels"]["stream"].as_array().unwrap().iter().map(|x| x.as_str().unwrap()).collect();
    for op in ["moe_dispatch", "moe_combine"] {
        let rows: Vec<usize> = (0..names.len()).filter(|&i| names[i] == op).collect();
        assert_eq!(rows.len(), 48, "{op}: one a MoE layer");
        assert!(rows.iter().all(|&i| streams[i] == "communication"));
    }
    // without expert parallelism there is none
    let plain = anatomy(&scenario(MOE, "h200", 8, 1, 1, json!({})), &decode_step(1, 256));
    assert!(!plain["kernels"]["name"].as_array().unwrap().iter().any(|x| x == "moe_dispatch"));
}

#[test]
fn ep_across_nodes_is_slower_per_step_than_inside_one() {
    // 16 ranks span two 8-GPU NVLink domains; 8 stay inside one. Same batch per rank.
    let inside = step_ms(&scenario(MOE, "h200", 1, 8, 8, json!({})), &decode_step(8, 64));
    let across = step_ms(&scenario(MOE, "h200", 1, 16, 16, json!({})), &decode_step(16, 64));
    assert!(across > inside * 1.05, "{across} vs {inside}");
}

#[test]
fn two_batch_overlap_helps_large_batches_and_hurts_tiny_ones() {
    let plain = scenario(MOE, "h200", 1, 16, 16, json!({}));
    let tbo = scenario(MOE, "h200", 1, 16, 16, json!({"two_batch_overlap": true}));
    let large = prefill_step(16, 4);
    assert!(step_ms(&tbo, &large) < step_ms(&plain, &large), "{} vs {}", step_ms(&tbo, &large), step_ms(&plain, &large));
    let tiny = decode_step(16, 2);
    assert!(step_ms(&tbo, &tiny) > step_ms(&plain, &tiny), "{} vs {}", step_ms(&tbo, &tiny), step_ms(&plain, &tiny));
}

#[test]
fn redundant_experts_shorten_a_step_and_allgather_lengthens_it() {
    let step = prefill_step(8, 2);
    let plain = step_ms(&scenario(MOE, "h200", 1, 8, 8, json!({})), &step);
    let eplb = step_ms(&scenario(MOE, "h200", 1, 8, 8, json!({"redundant_experts": 16})), &step);
    let uniform = step_ms(&scenario(MOE, "h200", 1, 8, 8, json!({"expert_load_cv": 0.0})), &step);
    let allgather = step_ms(&scenario(MOE, "h200", 1, 8, 8, json!({"all_to_all": "allgather"})), &step);
    assert!(eplb < plain && uniform < plain, "{eplb} {uniform} {plain}");
    assert!(allgather > plain, "{allgather} {plain}");
}

#[test]
fn a_dp_ep_replica_serves_more_than_one_gpu_and_runs_deterministically() {
    let one = run(&scenario(MOE, "h200", 1, 1, 1, json!({})));
    let wide = scenario(MOE, "h200", 1, 8, 8, json!({}));
    let (a, b) = (run(&wide), run(&wide));
    assert_eq!(a, b);
    assert_eq!(a["finished"], 400);
    assert!(a["output_tokens_per_s"].as_f64().unwrap() > 2.0 * one["output_tokens_per_s"].as_f64().unwrap());
    assert!(a["tpot_ms"]["mean"].as_f64().unwrap() < one["tpot_ms"]["mean"].as_f64().unwrap());
}

#[test]
fn bad_parallel_combinations_are_typed_errors_naming_the_field() {
    let err = |v: Value| simulate(&v.to_string(), Format::Json, SimOptions::default()).unwrap_err();
    let e = err(scenario(MOE, "h200", 1, 8, 4, json!({})));
    assert_eq!((e.kind_name(), e.path()), ("ConfigError", Some("deployment.ep")));
    let e = err(scenario("llama-3-8b", "h200", 1, 2, 2, json!({})));
    assert_eq!(e.path(), Some("deployment.ep"), "{e}");
    let e = err(scenario(MOE, "h200", 1, 1, 1, json!({"redundant_experts": 8})));
    assert_eq!(e.path(), Some("deployment.moe.redundant_experts"));
    let e = err(scenario(MOE, "h200", 1, 8, 8, json!({"expert_load_cv": -1})));
    assert_eq!(e.path(), Some("deployment.moe.expert_load_cv"));
    let e = err(scenario(MOE, "h200", 1, 8, 8, json!({"all_to_all": "magic"})));
    assert_eq!(e.kind_name(), "ConfigError");
    let mut v = scenario(MOE, "h200", 1, 2, 2, json!({}));
    v["deployment"]["pp"] = json!(2);
    assert_eq!(err(v).path(), Some("deployment.pp"));
}

/// DeepSeek-V3 (FP8) as people deploy it: dp 16 / ep 16 over two HGX H200 boxes and over four
/// HGX H100 boxes (on their topologies), and TP 8 on one HGX H200.
#[test]
fn deepseek_v3_runs_wide_ep_across_nodes_and_tp8_in_one() {
    let base = |topology: &str, gpu: &str, tp: u32, dp: u32| {
        json!({
            "seed": 4, "model": "deepseek-v3", "gpu": gpu, "topology": topology,
            "cost_model": {"kind": "roofline", "dtype": "fp8"},
            "deployment": {"tp": tp, "dp": dp, "ep": tp * dp},
            "scheduler": {"policy": "vllm"},
            "workload": {"num_requests": 200, "arrival": {"kind": "poisson", "rate": 20.0},
                         "prompt": {"kind": "fixed", "value": 1000}, "output": {"kind": "fixed", "value": 100}}
        })
    };
    for v in [base("2x-hgx-h200-ib", "h200", 1, 16), base("4x-hgx-h100-ib", "h100", 1, 16), base("hgx-h200", "h200", 8, 1)] {
        let r = simulate(&v.to_string(), Format::Json, SimOptions::default()).unwrap_or_else(|e| panic!("{v}: {e}"));
        assert_eq!(r.summary["finished"], 200, "{v}");
    }
    let mut v = base("2x-hgx-h200-ib", "h200", 1, 16);
    v.as_object_mut().unwrap().remove("topology");
    let a = anatomy(&v, &decode_step(16, 16));
    assert!(a["kernels"]["name"].as_array().unwrap().iter().any(|x| x == "moe_dispatch"));
}

/// DP without EP on a MoE model (vLLM without `--enable-expert-parallel`): the experts are
/// TP-sharded over all dp × tp GPUs — a quarter of each expert on each of 4 GPUs, not a whole
/// copy per rank — and every MoE layer gathers the ranks' tokens and reduce-scatters them
/// back, which the anatomy lists; a dense model's DP ranks exchange nothing.
#[test]
fn dp_without_ep_shards_the_experts_over_the_whole_group() {
    let flat = scenario(MOE, "h200", 1, 4, 1, json!({}));
    let ep = scenario(MOE, "h200", 1, 4, 4, json!({}));
    let a = anatomy(&flat, &decode_step(4, 32));
    let names = a["kernels"]["name"].as_array().unwrap();
    assert!(names.iter().any(|x| x == "moe_dispatch") && names.iter().any(|x| x == "moe_combine"));
    let weights = |v: &Value| {
        let r = simulate(&v.to_string(), Format::Json, SimOptions::default()).unwrap_or_else(|e| panic!("{e}"));
        r.deployment["memory"]["weights_gib"].as_f64().unwrap_or_else(|| panic!("{}", r.deployment))
    };
    let one = scenario(MOE, "h200", 1, 1, 1, json!({}));
    let (w_flat, w_ep, w_one) = (weights(&flat), weights(&ep), weights(&one));
    assert!(w_flat < 0.5 * w_one && (w_flat - w_ep).abs() < 0.01 * w_ep, "{w_flat} {w_ep} {w_one}");
    let dense = json!({"seed": 3, "model": "llama-3-8b", "gpu": "h200", "deployment": {"tp": 1, "dp": 4},
                       "workload": {"num_requests": 10, "arrival": {"kind": "poisson", "rate": 20.0},
                                    "prompt": {"kind": "fixed", "value": 100}, "output": {"kind": "fixed", "value": 10}}});
    let d = anatomy(&dense, &decode_step(4, 32));
    assert!(!d["kernels"]["name"].as_array().unwrap().iter().any(|x| x == "moe_dispatch"));
}
