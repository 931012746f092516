//! The `vllm` policy against the real vLLM v1 scheduler (vllm 0.33.0, run on a CPU with a
//! fake executor and a virtual clock by `../shared/tools/vllm-reference/driver.py`), request
//! by request, on six workloads made to reach the mechanisms that only show once blocks are
//! evicted or priorities differ (`tools/vllm_reference_workloads.py`): a pool too small for
//! the prefixes in use, priority scheduling in a tight pool, prompts that are a whole cached
//! prefix, bursts of one group admitted together, preemption of requests whose blocks stay
//! cached, and priority preemption with self-preemptions. Both sides price a step with the
//! driver's linear model, so every difference is the scheduler's or the prefix cache's.
//! The references are committed in `tests/data/vllm_reference/` (workload, the driver's
//! request CSV and its configuration).

use sim_core::{simulate, Format, SimOptions};

/// The reference runs; each one's settings are read from the configuration the driver
/// wrote for it (`NAME.config.json`: what vLLM really ran with).
const RUNS: [&str; 6] = ["tight_pool", "priority_tight", "whole_prompt", "bursts", "preempt_cached", "priority_preempt"];

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/data/vllm_reference");

fn csv(path: &str) -> Vec<std::collections::HashMap<String, String>> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut lines = text.lines();
    let head: Vec<String> = lines.next().unwrap().split(',').map(str::to_string).collect();
    lines.map(|l| head.iter().cloned().zip(l.split(',').map(str::to_string)).collect()).collect()
}

/// Per request of run `name`: (TTFT ms, E2E ms, tokens hit at the first admission), o1sim's
/// and vLLM's.
type Row = (f64, f64, u32);

fn run(name: &str) -> Vec<(Row, Row)> {
    let text = std::fs::read_to_string(format!("{DIR}/{name}.config.json")).unwrap();
    let config: serde_json::Value = serde_json::from_str(&text).unwrap();
    let workload = csv(&format!("{DIR}/{name}.workload.csv"));
    let reqs: Vec<serde_json::Value> = workload
        .iter()
        .map(|w| {
            let num = |k: &str| w[k].parse::<f64>().unwrap();
            let mut r = serde_json::json!({"arrival_ms": num("arrival_ms"), "prompt_tokens": num("prompt_tokens") as u64,
                                           "output_tokens": num("output_tokens") as u64, "priority": num("priority") as i64});
            if num("prefix_group") >= 0.0 && num("prefix_length") > 0.0 {
                r["prefix_group"] = serde_json::json!(num("prefix_group") as u64);
                r["prefix_length"] = serde_json::json!(num("prefix_length") as u64);
            }
            r
        })
        .collect();
    let scenario = serde_json::json!({
        "seed": 1, "model": {"preset": "llama-3-8b", "max_context": 16384}, "gpu": "h100",
        // vLLM's block 0 is the null block: N − 1 usable.
        "scheduler": {"policy": "vllm", "block_size": config["block_size"], "num_gpu_blocks": config["num_gpu_blocks"].as_u64().unwrap() - 1,
                      "max_num_batched_tokens": config["max_num_batched_tokens"], "max_num_seqs": config["max_num_seqs"],
                      "enable_prefix_caching": config["enable_prefix_caching"], "scheduling_policy": config["policy"]},
        // The driver's step: 5.0 + 0.02·prefill tokens + 0.05·decodes + 0.00001·Σcontext ms.
        "cost_model": {"kind": "linear", "base_ms": 5.0, "per_prefill_token_ms": 0.02, "per_decode_seq_ms": 0.05,
                       "per_context_token_ms": 0.00001},
        "workload": {"requests": reqs},
    });
    let res = simulate(&scenario.to_string(), Format::Json, SimOptions::default()).unwrap();
    let q = &res.requests;
    let reference = csv(&format!("{DIR}/{name}.requests.csv"));
    reference
        .iter()
        .map(|v| {
            let i = v["id"].parse::<usize>().unwrap();
            let ours = (q.first_token_ms[i] - q.arrival_ms[i], q.finish_ms[i] - q.arrival_ms[i], q.cached_tokens[i]);
            let theirs = (v["ttft_ms"].parse().unwrap(), v["e2e_ms"].parse().unwrap(), v["num_cached_tokens"].parse().unwrap());
            (ours, theirs)
        })
        .collect()
}

#[test]
fn every_request_matches_the_real_scheduler_within_one_percent() {
    let mut report = Vec::new();
    for name in RUNS {
        let rows = run(name);
        let off = |a: f64, b: f64| (a - b).abs() / b.abs().max(1e-9);
        let bad: Vec<_> = rows.iter().enumerate().filter(|(_, (o, t))| off(o.0, t.0) > 0.01 || off(o.1, t.1) > 0.01 || o.2 != t.2).collect();
        let worst = rows.iter().map(|(o, t)| off(o.0, t.0).max(off(o.1, t.1))).fold(0.0, f64::max);
        report.push(format!("{name}: {} of {} requests within 1% (worst {:.2}%), first off: {:?}", rows.len() - bad.len(), rows.len(), 100.0 * worst, bad.first()));
    }
    println!("{}", report.join("\n"));
    assert!(report.iter().all(|l| l.contains("first off: None")), "{}", report.join("\n"));
}
