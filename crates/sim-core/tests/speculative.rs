//! Speculative decoding end to end (`[scheduler.speculative]`): EAGLE-3 speeds up TPOT at
//! small batches and not at large ones; low acceptance loses; MTP prices DeepSeek-V3's
//! module; the drafts count against the token budget and their KV slots; results are
//! deterministic; bad settings are typed errors naming the field.

use serde_json::{json, Value};
mod common;

use common::{err, run};
use sim_core::{simulate, Format, SimError, SimOptions, SimResult};

/// `n` requests arriving together (a batch of `n` decoding side by side), each a
/// 512-token prompt and 256 output tokens.
fn batch(model: &str, gpu: &str, tp: u32, n: usize, spec: Option<Value>) -> Value {
    let reqs: Vec<Value> = (0..n).map(|_| json!({"arrival_ms": 0.0, "prompt_tokens": 512, "output_tokens": 256})).collect();
    let mut v = json!({
        "seed": 5, "model": model, "gpu": gpu,
        "deployment": {"tp": tp},
        "scheduler": {"policy": "vllm", "max_num_seqs": 512, "max_num_batched_tokens": 8192},
        "workload": {"requests": reqs},
    });
    if let Some(s) = spec {
        v["scheduler"]["speculative"] = s;
    }
    v
}


fn tpot(r: &SimResult) -> f64 {
    r.summary["tpot_ms"]["mean"].as_f64().unwrap()
}

fn eagle3(a: f64) -> Value {
    json!({"method": "eagle3", "num_tokens": 3, "acceptance_rate": a})
}

/// TPOT without / with speculation for a batch of `n`.
fn speedup(model: &str, gpu: &str, tp: u32, n: usize, spec: Value) -> (f64, SimResult) {
    let base = run(&batch(model, gpu, tp, n, None));
    let sp = run(&batch(model, gpu, tp, n, Some(spec)));
    (tpot(&base) / tpot(&sp), sp)
}

#[test]
fn eagle3_speeds_up_small_batches_and_not_a_full_one() {
    let at = |n| speedup("llama-3.1-8b", "h100", 1, n, eagle3(0.7)).0;
    let (s1, s8, s64, s256) = (at(1), at(8), at(64), at(256));
    // k = 3 at 0.7: 2.53 tokens per verify; memory-bound steps cost little more for them.
    assert!(s1 > 1.8 && s8 > 1.8, "batch 1: {s1:.2}x, batch 8: {s8:.2}x");
    assert!(s64 < s8 && s256 < s64, "speedup must fall with the batch: {s8:.2} {s64:.2} {s256:.2}");
    assert!(s256 < 1.1, "at 256 the verification is compute-bound: {s256:.2}x");
}

#[test]
fn low_acceptance_loses() {
    // A draft model whose drafts are rarely accepted pays its passes and the verification.
    let spec = json!({"method": "draft_model", "draft_model": "llama-3.2-1b", "num_tokens": 4, "acceptance_rate": 0.1});
    let (s, _) = speedup("llama-3.1-8b", "h100", 1, 32, spec);
    assert!(s < 0.95, "{s:.3}x");
    let (s, _) = speedup("llama-3.1-8b", "h100", 1, 8, eagle3(0.05));
    assert!(s < 1.0, "{s:.3}x");
}

#[test]
fn acceptance_is_drawn_as_configured_and_reported() {
    let (_, r) = speedup("llama-3.1-8b", "h100", 1, 16, json!({"method": "eagle", "num_tokens": 3, "acceptance_rate": [0.8, 0.6, 0.4]}));
    let s = &r.summary["speculative"];
    let per: Vec<f64> = s["acceptance_per_position"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
    for (got, want) in per.iter().zip([0.8, 0.6, 0.4]) {
        assert!((got - want).abs() < 0.05, "{per:?}");
    }
    let tpv = s["tokens_per_verify"].as_f64().unwrap();
    assert!((tpv - 2.8).abs() < 0.1, "{tpv}");
    // Output tokens: 16 first tokens from the prefills, 1 + accepted per verify, and a plain
    // decode for a request whose last token is left alone (no draft past its end).
    let accepted = s["accepted_tokens"].as_u64().unwrap();
    let verifies = s["verifies"].as_u64().unwrap();
    let made = accepted + verifies + 16;
    assert!((16 * 255..=16 * 256).contains(&made), "{s}");
    assert_eq!(r.deployment["speculative"]["expected_tokens_per_step"].as_f64().unwrap(), 2.8);
}

#[test]
fn drafts_take_token_budget_and_kv_slots() {
    // A budget of 64 tokens: 64 decodes alone fit; with 3 drafts each only 16 do a step.
    let mut v = batch("llama-3.1-8b", "h100", 1, 64, Some(eagle3(0.7)));
    v["scheduler"]["max_num_batched_tokens"] = json!(64);
    v["scheduler"]["max_num_seqs"] = json!(64);
    let r = simulate(&v.to_string(), Format::Json, SimOptions { record_steps: true, ..Default::default() }).unwrap();
    let steps = r.steps_json();
    let steps: Value = serde_json::from_str(&steps).unwrap();
    let tokens = |s: &Value| s["scheduled"].as_array().unwrap().iter().map(|e| e[1].as_u64().unwrap()).sum::<u64>();
    let all = steps.as_array().unwrap();
    assert!(all.iter().all(|s| tokens(s) <= 64));
    // Steps where the drafts used the budget up: a prefill chunk got only what the
    // decodes' 1 + 3 tokens each left.
    let full = all.iter().filter(|s| tokens(s) == 64 && s["shape"]["spec_tokens"].as_u64().unwrap_or(0) > 0).count();
    assert!(full > 10, "{full}");
    let chunk = all.iter().find(|s| s["shape"]["spec_tokens"].as_u64() == Some(3) && s["shape"]["decode_seqs"] == json!(1));
    assert_eq!(chunk.expect("one verify beside a chunk")["shape"]["prefill"][0][0], json!(64 - 4));
    // The drafter's KV and weights come out of the KV cache.
    let plain = run(&batch("llama-3.1-8b", "h100", 1, 1, None));
    let spec = run(&batch("llama-3.1-8b", "h100", 1, 1, Some(eagle3(0.7))));
    let blocks = |r: &SimResult| r.deployment["num_gpu_blocks"].as_u64().unwrap();
    assert!(blocks(&spec) < blocks(&plain), "{} {}", blocks(&spec), blocks(&plain));
    let draft = run(&batch("llama-3.1-8b", "h100", 1, 1, Some(json!({"method": "draft_model", "draft_model": "llama-3.2-1b", "num_tokens": 3, "acceptance_rate": 0.6}))));
    assert!(blocks(&draft) < blocks(&spec), "a 1B draft model holds more than an EAGLE head");
}

#[test]
fn mtp_prices_deepseek_v3s_module_with_its_published_acceptance() {
    let v = |spec: Option<Value>| {
        let mut v = batch("deepseek-v3", "h200", 8, 8, spec);
        v["workload"]["requests"].as_array_mut().unwrap().iter_mut().for_each(|r| r["output_tokens"] = json!(128));
        v
    };
    let base = run(&v(None));
    let mtp = run(&v(Some(json!({"method": "mtp"}))));
    assert_eq!(mtp.deployment["speculative"]["acceptance_per_position"], json!([0.85]));
    let rate = mtp.summary["speculative"]["acceptance_rate"].as_f64().unwrap();
    assert!((rate - 0.85).abs() < 0.06, "{rate}");
    assert!(tpot(&mtp) < tpot(&base), "{} vs {}", tpot(&mtp), tpot(&base));
    // The MTP layer is priced: a step with its module costs more than the verification alone.
    let shape = json!({"decode_seqs": 8, "decode_context_sum": 8 * 600, "context_sum_after": 8 * 600, "sampled": 16, "spec_tokens": 8});
    let a = sim_core::step_anatomy(&v(Some(json!({"method": "mtp"}))).to_string(), Format::Json, &shape.to_string()).unwrap();
    let a: Value = serde_json::from_str(&a).unwrap();
    let names: Vec<&str> = a["kernels"]["name"].as_array().unwrap().iter().map(|x| x.as_str().unwrap()).collect();
    assert!(names.iter().any(|n| n.starts_with("drafter (mtp")), "{names:?}");
    // Kimi-K2 has no MTP module.
    let mut k = batch("kimi-k2", "h200", 8, 1, Some(json!({"method": "mtp"})));
    k["deployment"]["ep"] = json!(8);
    k["deployment"]["dp"] = json!(8);
    k["deployment"]["tp"] = json!(1);
    match err(&k) {
        SimError::Config { path, .. } => assert_eq!(path, "scheduler.speculative.method"),
        e => panic!("{e}"),
    }
}

#[test]
fn same_seed_same_bytes_other_seed_other_acceptance() {
    let v = batch("llama-3.1-8b", "h100", 1, 8, Some(eagle3(0.6)));
    let a = run(&v).to_json();
    let b = run(&v).to_json();
    assert_eq!(a, b);
    let mut w = v.clone();
    w["seed"] = json!(6);
    assert_ne!(run(&w).summary["speculative"]["accepted_tokens"], run(&v).summary["speculative"]["accepted_tokens"]);
}

#[test]
fn bad_settings_are_typed_errors_naming_the_field() {
    let cases = [
        (json!({"method": "eagle4", "num_tokens": 3, "acceptance_rate": 0.7}), "scheduler.speculative.method"),
        (json!({"method": "eagle3", "acceptance_rate": 0.7}), "scheduler.speculative.num_tokens"),
        (json!({"method": "eagle3", "num_tokens": 0, "acceptance_rate": 0.7}), "scheduler.speculative.num_tokens"),
        (json!({"method": "eagle3", "num_tokens": 17, "acceptance_rate": 0.7}), "scheduler.speculative.num_tokens"),
        (json!({"method": "eagle3", "num_tokens": 3}), "scheduler.speculative.acceptance_rate"),
        (json!({"method": "eagle3", "num_tokens": 3, "acceptance_rate": 1.5}), "scheduler.speculative.acceptance_rate"),
        (json!({"method": "eagle3", "num_tokens": 2, "acceptance_rate": [0.5]}), "scheduler.speculative.acceptance_rate"),
        (json!({"method": "eagle3", "num_tokens": 2, "acceptance_rate": [0.5, 0.6]}), "scheduler.speculative.acceptance_rate[1]"),
        (json!({"method": "draft_model", "num_tokens": 2, "acceptance_rate": 0.5}), "scheduler.speculative.draft_model"),
        (json!({"method": "draft_model", "num_tokens": 2, "acceptance_rate": 0.5, "draft_model": "qwen2.5-7b"}), "scheduler.speculative.draft_model"),
        (json!({"method": "draft_model", "num_tokens": 2, "acceptance_rate": 0.5, "draft_model": "nope"}), "scheduler.speculative.draft_model"),
        (json!({"method": "ngram", "num_tokens": 2, "acceptance_rate": 0.5, "draft_model": "llama-3.2-1b"}), "scheduler.speculative.draft_model"),
        (json!({"method": "mtp"}), "scheduler.speculative.method"),
        (json!({"method": "ngram", "num_tokens": 2, "acceptance_rate": 0.5, "k": 3}), "scheduler.speculative"),
    ];
    for (spec, field) in cases {
        match err(&batch("llama-3.1-8b", "h100", 1, 1, Some(spec.clone()))) {
            SimError::Config { path, .. } => assert!(path.starts_with(field), "{spec}: {path} vs {field}"),
            e => panic!("{spec}: {e}"),
        }
    }
    let mut orca = batch("llama-3.1-8b", "h100", 1, 1, Some(eagle3(0.7)));
    orca["scheduler"]["policy"] = json!("orca");
    match err(&orca) {
        SimError::Config { path, .. } => assert_eq!(path, "scheduler.speculative"),
        e => panic!("{e}"),
    }
}
