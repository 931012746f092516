//! Run a scenario file natively N times and print the best wall time (profiling aid):
//! `cargo run --release --example run_file -- benchmarks/scenarios/vidur_s2.toml 5`
use sim_core::{simulate, Format, SimOptions};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let path = args.get(1).expect("usage: run_file SCENARIO.toml [REPEATS]");
    let repeats: u32 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(3);
    let text = std::fs::read_to_string(path).expect("readable scenario");
    let format = if path.ends_with(".json") { Format::Json } else { Format::Toml };
    let mut best = f64::INFINITY;
    let mut steps = 0;
    for _ in 0..repeats {
        let t = std::time::Instant::now();
        let r = simulate(&text, format, SimOptions::default()).unwrap_or_else(|e| panic!("{e}"));
        best = best.min(t.elapsed().as_secs_f64());
        steps = r.summary["steps"].as_u64().unwrap_or(0);
    }
    println!("{path}: best {:.3} ms over {repeats} runs, {steps} steps", best * 1e3);
}
