//! What prefix caching costs the simulator on a workload whose prompts share prefixes
//! (inference-perf's `shared_prefix` shape, built in Rust until scenarios can say it):
//! S2's scenario (Llama-3-8B on an A100, one replica) with 10,000 requests in 64 groups of
//! a 1,000-token system prompt, 200-token questions, 128-token answers, Poisson at 8 req/s.
//! Runs with caching on and off, interleaved, and prints the best wall times, the wall time
//! per simulated step (the runs simulate different work: with caching the replica is far
//! less loaded, so it runs many more, shorter steps) and the hit rate.
//!
//! `cargo run --release --example apc_bench -- [REPEATS]`
use sim_core::config::Scenario;
use sim_core::workload::{RequestSpec, Segment, Workload};
use sim_core::{Format, SimOptions, Simulation};

fn workload() -> Workload {
    let groups = 64u32;
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let mut t_ns = 0u64;
    let requests = (0..10_000u32)
        .map(|i| {
            // xorshift64* → exponential gaps of mean 125 ms.
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            let u = (state.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64;
            t_ns += (-(1.0 - u).ln() * 125e6) as u64;
            RequestSpec { segs: (i % groups, 1), ..RequestSpec::new(i, t_ns, 1200, 128, 0) }
        })
        .collect();
    Workload { requests, segments: (0..groups).map(|g| Segment { key: u64::from(g), len: 1000 }).collect() }
}

fn main() {
    let repeats: u32 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(5);
    let text = std::fs::read_to_string("benchmarks/scenarios/vidur_s2.toml").expect("run from the repository root");
    let w = workload();
    let mut best = [f64::INFINITY; 2];
    let mut summary = [serde_json::Value::Null, serde_json::Value::Null];
    for _ in 0..repeats {
        for (k, on) in [false, true].into_iter().enumerate() {
            let mut sc = Scenario::parse(&text, Format::Toml).expect("S2 parses");
            sc.scheduler.enable_prefix_caching = Some(on);
            let sim = Simulation::with_workload(sc, w.clone(), SimOptions::default()).expect("builds");
            let t = std::time::Instant::now();
            let r = sim.finish().expect("runs");
            best[k] = best[k].min(t.elapsed().as_secs_f64());
            summary[k] = r.summary;
        }
    }
    let s = &summary[1];
    let per_step = |k: usize| best[k] / summary[k]["steps"].as_f64().unwrap_or(1.0) * 1e6;
    println!(
        "shared prefixes, 10,000 requests: caching on {:.2} ms, off {:.2} ms ({:.3}×); per step {:.3} vs {:.3} µs \
         ({:.3}×); hit rate {:.3}, computed prefill {} vs {} tokens, mean TTFT {:.1} vs {:.1} ms, steps {} vs {}",
        best[1] * 1e3,
        best[0] * 1e3,
        best[1] / best[0],
        per_step(1),
        per_step(0),
        per_step(1) / per_step(0),
        s["prefix_cache_hit_rate"].as_f64().unwrap_or(0.0),
        s["computed_prefill_tokens"],
        summary[0]["computed_prefill_tokens"],
        s["ttft_ms"]["mean"].as_f64().unwrap_or(0.0),
        summary[0]["ttft_ms"]["mean"].as_f64().unwrap_or(0.0),
        s["steps"],
        summary[0]["steps"],
    );
}
