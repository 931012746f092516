//! The model-checker benchmark of `benchmarks/check.py`, in Rust (for profiling):
//! `cargo run --release -p sim-core --example check_bench [FILTER] [REPEATS]`. Prints one
//! line per configuration × policy × mutant (states, transitions, best states/s,
//! verdicts with counterexample lengths) and the overall rate; FILTER keeps the checks
//! whose "config policy bug" line contains it (`C5`, `C5 vllm -`, `leak_on_preempt`).

use sim_core::check::{check, CheckOptions};
use sim_core::config::BUGS;
use sim_core::policy::Policy;
use sim_core::Format;
use std::time::Instant;

type Req = (u32, u32, u32);

fn configs() -> Vec<(&'static str, u32, u32, u32, Vec<Req>)> {
    let six = vec![(9, 6, 1), (7, 5, 0), (6, 4, 1), (5, 4, 0), (3, 3, 1), (8, 4, 0)];
    vec![
        ("C1", 6, 1, 8, vec![(6, 4, 1), (5, 3, 0), (4, 3, 1)]),
        ("C2", 3, 1, 16, vec![(4, 6, 1), (4, 6, 0)]),
        ("C3", 16, 1, 16, six.clone()),
        ("C4", 12, 1, 8, six),
        ("C5", 6, 2, 16, vec![(9, 5, 1), (7, 4, 0), (6, 4, 1), (5, 4, 0), (3, 3, 1), (8, 3, 0)]),
    ]
}

fn scenario(policy: &str, bug: Option<&str>, blocks: u32, reps: u32, budget: u32, reqs: &[Req]) -> String {
    let mut sched = serde_json::json!({"policy": policy, "block_size": 4, "num_gpu_blocks": blocks,
        "max_num_batched_tokens": budget, "chunk_size": budget, "max_num_seqs": 8,
        "max_tokens_per_request": budget});
    if let Some(b) = bug {
        sched["inject_bug"] = b.into();
    }
    let requests: Vec<_> = reqs
        .iter()
        .map(|&(p, o, pr)| serde_json::json!({"arrival_ms": 0, "prompt_tokens": p, "output_tokens": o, "priority": pr}))
        .collect();
    serde_json::json!({"model": "llama-3-8b", "gpu": "h200", "deployment": {"replicas": reps},
        "scheduler": sched, "workload": {"requests": requests}})
    .to_string()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let filter = args.get(1).cloned().unwrap_or_default();
    let repeats: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1);
    let t0 = Instant::now();
    let mut total = 0u64;
    let mut per_cfg: Vec<(String, u64, f64)> = Vec::new();
    for (name, blocks, reps, budget, reqs) in configs() {
        let (mut cs, mut ct) = (0u64, 0f64);
        for policy in Policy::colocated_names() {
            for bug in std::iter::once(None).chain(BUGS.iter().map(|b| Some(*b))) {
                if !format!("{name} {policy} {}", bug.unwrap_or("-")).contains(filter.as_str()) {
                    continue;
                }
                let text = scenario(policy, bug, blocks, reps, budget, &reqs);
                let mut best = 0f64;
                let mut last = None;
                for _ in 0..repeats {
                    let r = check(&text, Format::Json, CheckOptions::default()).expect("check");
                    best = best.max(r.states_per_s);
                    last = Some(r);
                }
                let r = last.expect("ran");
                total += r.states;
                cs += r.states;
                ct += r.states as f64 / best;
                let verdict: Vec<String> = r
                    .violations
                    .iter()
                    .map(|v| format!("{} in {} ({:?})", v.property, v.length, v.reproduced))
                    .collect();
                println!(
                    "{name} {policy:<8} {:<16} {:>9} {:>9} {:>11.0}  {}",
                    bug.unwrap_or("-"),
                    r.states,
                    r.transitions,
                    best,
                    if r.ok { "ok".to_string() } else { verdict.join(", ") }
                );
            }
        }
        if cs > 0 {
            per_cfg.push((name.to_string(), cs, ct));
        }
    }
    for (n, s, t) in &per_cfg {
        println!("{n}: {s} states, {:.0} states/s (best-of exploration)", *s as f64 / t);
    }
    let wall = t0.elapsed().as_secs_f64() / repeats as f64;
    println!("{total} states, {:.0} states/s overall (wall per repeat, incl. replays)", total as f64 / wall);
}
