//! Multi-LoRA serving end to end (`workload.lora`, `scheduler.max_loras` / `max_cpu_loras`):
//! more adapters than GPU slots make requests wait for a slot and adapters load; raising
//! `max_loras` removes the waits; the adapters' rank is visible in the step; bad settings
//! are typed errors naming the field.

use serde_json::{json, Value};
mod common;

use common::{err, run};
use sim_core::{Format, SimError, SimResult};

fn scenario(lora: Value, max_loras: Option<u32>) -> Value {
    let mut v = json!({
        "seed": 9, "model": "llama-3.1-8b", "gpu": "h100",
        "scheduler": {"policy": "vllm"},
        "workload": {
            "num_requests": 400, "arrival": {"kind": "poisson", "rate": 12.0},
            "prompt": {"kind": "uniform", "min": 256, "max": 1024},
            "output": {"kind": "uniform", "min": 64, "max": 256},
            "lora": lora,
        }
    });
    if let Some(m) = max_loras {
        v["scheduler"]["max_loras"] = json!(m);
    }
    v
}


fn u(r: &SimResult, k: &str) -> u64 {
    r.summary["lora"][k].as_u64().unwrap_or_else(|| panic!("{k}: {}", r.summary["lora"]))
}

#[test]
fn adapters_beyond_the_slots_wait_and_load_and_more_slots_remove_the_waits() {
    let lora = json!({"adapters": 32, "rank": 16, "popularity": "zipf"});
    let few = run(&scenario(lora.clone(), Some(2)));
    let many = run(&scenario(lora.clone(), Some(32)));
    eprintln!("{}\n{}", few.summary["lora"], many.summary["lora"]);
    assert!(u(&few, "slot_waits") > 100, "{}", few.summary["lora"]);
    // Adapters leave their slots and come back: more loads than adapters.
    assert!(u(&few, "adapter_loads") > 40, "{}", few.summary["lora"]);
    assert_eq!(u(&many, "slot_waits"), 0, "{}", many.summary["lora"]);
    // With a slot and a host copy for every adapter, each is read from disk once.
    assert!(u(&many, "adapter_loads") <= 32 && u(&many, "adapter_loads_from_disk") == u(&many, "adapter_loads"));
    let ttft = |r: &SimResult| r.summary["ttft_ms"]["mean"].as_f64().unwrap();
    assert!(ttft(&few) > 1.5 * ttft(&many), "{} vs {}", ttft(&few), ttft(&many));
    // Every request counted once.
    for r in [&few, &many] {
        let done = r.summary["finished"].as_u64().unwrap() + r.summary["rejected"].as_u64().unwrap();
        assert_eq!(done, 400);
    }
    // A host cache larger than the slots turns disk reads into host copies.
    let mut v = scenario(lora, Some(2));
    v["scheduler"]["max_cpu_loras"] = json!(32);
    let cached = run(&v);
    assert!(u(&cached, "adapter_loads_from_disk") <= 32, "{}", cached.summary["lora"]);
    assert!(cached.summary["lora"]["load_ms"].as_f64() < few.summary["lora"]["load_ms"].as_f64());
}

#[test]
fn rank_is_visible_in_the_step() {
    let v = |rank: u32| scenario(json!({"adapters": 4, "rank": rank}), Some(4));
    let shape = json!({"decode_seqs": 64, "decode_context_sum": 64 * 800, "context_sum_after": 64 * 800, "sampled": 64, "lora_adapters": 4});
    let lora_ms = |rank: u32| {
        let a = sim_core::step_anatomy(&v(rank).to_string(), Format::Json, &shape.to_string()).unwrap();
        let a: Value = serde_json::from_str(&a).unwrap();
        let k = &a["kernels"];
        let i = k["name"].as_array().unwrap().iter().position(|n| n.as_str().unwrap().starts_with("lora kernels")).expect("a lora row");
        (k["end_us"][i].as_f64().unwrap() - k["start_us"][i].as_f64().unwrap()) / 1e3
    };
    let (r8, r64) = (lora_ms(8), lora_ms(64));
    // The kernels' floors are the same; rank 64 reads eight times the weights.
    assert!(r64 > 1.3 * r8 && r64 - r8 > 0.2, "rank 8: {r8:.3} ms, rank 64: {r64:.3} ms");
    let tpot = |r: &SimResult| r.summary["tpot_ms"]["mean"].as_f64().unwrap();
    assert!(tpot(&run(&v(64))) > tpot(&run(&v(8))));
    // The slots' memory comes out of the KV cache.
    let blocks = |r: &SimResult| r.deployment["num_gpu_blocks"].as_u64().unwrap();
    assert!(blocks(&run(&v(64))) < blocks(&run(&v(8))));
}

#[test]
fn explicit_requests_name_their_adapter() {
    let reqs: Vec<Value> = (0..6).map(|i| json!({"arrival_ms": 0.0, "prompt_tokens": 128, "output_tokens": 32, "lora": i % 3})).collect();
    let v = json!({"model": "llama-3.1-8b", "gpu": "h100", "scheduler": {"max_loras": 1},
                   "workload": {"requests": reqs, "lora": {"adapters": 3, "rank": 8}}});
    let r = run(&v);
    // One adapter at a time: three groups of two, each loaded once.
    assert_eq!(u(&r, "adapter_loads"), 3);
    assert!(u(&r, "slot_waits") > 0);
    let same = run(&v);
    assert_eq!(r.to_json(), same.to_json());
}

#[test]
fn bad_settings_are_typed_errors_naming_the_field() {
    let l = json!({"adapters": 8, "rank": 16});
    let cases: Vec<(Value, &str)> = vec![
        (scenario(json!({"adapters": 0}), None), "workload.lora.adapters"),
        (scenario(json!({"adapters": 8, "rank": 1000}), None), "workload.lora.rank"),
        (scenario(json!({"adapters": 8, "popularity": "pareto"}), None), "workload.lora"),
        (scenario(json!({"adapters": 8, "popularity": "uniform", "zipf_s": 1.2}), None), "workload.lora.zipf_s"),
        (scenario(json!({"adapters": 8, "target_modules": ["qkv"]}), None), "workload.lora.target_modules[0]"),
        (scenario(l.clone(), Some(0)), "scheduler.max_loras"),
        ({ let mut v = scenario(l.clone(), Some(4)); v["scheduler"]["max_cpu_loras"] = json!(2); v }, "scheduler.max_cpu_loras"),
        ({ let mut v = scenario(l.clone(), None); v["workload"].as_object_mut().unwrap().remove("lora"); v["scheduler"]["max_loras"] = json!(2); v }, "scheduler.max_loras"),
        ({ let mut v = scenario(l.clone(), None); v["scheduler"]["policy"] = json!("orca"); v }, "workload.lora"),
        ({ let mut v = scenario(l.clone(), None); v["model"] = json!("mixtral-8x7b"); v["deployment"] = json!({"tp": 2}); v }, "workload.lora.target_modules"),
        (json!({"model": "llama-3.1-8b", "gpu": "h100", "workload": {"requests": [{"arrival_ms": 0, "prompt_tokens": 8, "output_tokens": 8, "lora": 1}]}}), "workload.requests[0].lora"),
        (json!({"model": "llama-3.1-8b", "gpu": "h100", "workload": {"lora": {"adapters": 2}, "requests": [{"arrival_ms": 0, "prompt_tokens": 8, "output_tokens": 8, "lora": 2}]}}), "workload.requests[0].lora"),
    ];
    for (v, field) in cases {
        match err(&v) {
            SimError::Config { path, .. } => assert!(path.starts_with(field), "{path} vs {field}"),
            e => panic!("{field}: {e}"),
        }
    }
}

#[test]
fn the_model_checker_explores_the_slot_rule() {
    // Three requests on two adapters with one slot: every order of arrivals and steps ends
    // with each request finished, none stuck behind the slot.
    let v = json!({"model": "llama-3-8b", "gpu": "h200",
        "scheduler": {"policy": "vllm", "block_size": 4, "num_gpu_blocks": 16, "max_num_batched_tokens": 16,
                      "max_num_seqs": 8, "max_loras": 1},
        "workload": {"lora": {"adapters": 2, "rank": 8}, "requests": [
            {"arrival_ms": 0, "prompt_tokens": 6, "output_tokens": 3, "lora": 0},
            {"arrival_ms": 0, "prompt_tokens": 5, "output_tokens": 2, "lora": 1},
            {"arrival_ms": 1, "prompt_tokens": 4, "output_tokens": 3, "lora": 1}]}});
    let r = sim_core::check::check(&v.to_string(), Format::Json, Default::default()).unwrap_or_else(|e| panic!("{e}"));
    assert!(r.ok && r.complete, "{:?}", r.violations.iter().map(|v| (&v.property, &v.message)).collect::<Vec<_>>());
    assert!(r.states > 10, "{}", r.states);
}

#[test]
fn a_traces_lora_column_names_each_rows_adapter() {
    let trace = |rows: &str| format!("arrival_ms,prompt_tokens,output_tokens,lora\n{rows}");
    let v = |text: String, lora: Option<Value>| {
        let mut w = json!({"trace": {"text": text, "format": "csv"}});
        if let Some(l) = lora {
            w["lora"] = l;
        }
        json!({"model": "llama-3.1-8b", "gpu": "h100", "scheduler": {"max_loras": 1}, "workload": w})
    };
    let rows = "0,100,10,0\n0,100,10,1\n0,100,10,2\n1,100,10,0\n";
    let r = run(&v(trace(rows), Some(json!({"adapters": 3, "rank": 8}))));
    // Three adapters named, one slot: each is loaded once, two requests wait for the slot.
    assert!(u(&r, "adapter_loads") >= 3 && u(&r, "slot_waits") >= 2, "{}", r.summary["lora"]);
    match err(&v(trace("0,100,10,0\n0,100,10,5\n"), Some(json!({"adapters": 3})))) {
        SimError::Config { path, message } => assert!(path == "workload.trace" && message.contains("row 2"), "{path}: {message}"),
        e => panic!("{e}"),
    }
    // Rows naming adapters with no workload.lora: max_loras is named first, then the trace.
    match err(&v(trace(rows), None)) {
        SimError::Config { path, .. } => assert_eq!(path, "scheduler.max_loras"),
        e => panic!("{e}"),
    }
    let mut no_slots = v(trace(rows), None);
    no_slots["scheduler"] = json!({});
    match err(&no_slots) {
        SimError::Config { path, .. } => assert_eq!(path, "workload.trace"),
        e => panic!("{e}"),
    }
}
