//! What a run's step prices cost alone (issue 30's accounting): runs a scenario, then runs it
//! again with its steps recorded and prices exactly those steps a second time, in order,
//! with the run's own cost model and a fresh memo — the work a faster event loop would still
//! have to do to keep every result byte for byte. Prints the CPU time of both (best of the
//! repeats) and the pricing's share. It first checks that each repriced step lasts what the
//! run recorded, so what is timed is what the run priced: for one-pool scenarios without a
//! topology, decision latency or stalls (S2, the floor loop's scenarios).
//!
//! `cargo run --release -p sim-core --example price_only -- SCENARIO.toml [REPEATS]`
#[path = "common/priced.rs"]
mod priced;

use sim_core::Format;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let path = args.get(1).expect("usage: price_only SCENARIO.toml [REPEATS]");
    let repeats: u32 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(20);
    let text = std::fs::read_to_string(path).expect("readable scenario");
    let format = if path.ends_with(".json") { Format::Json } else { Format::Toml };
    let p = priced::price_alone(&text, format, repeats);
    println!(
        "{path}: {} steps, {} request-steps; run {:.3} ms, its steps' prices alone {:.3} ms ({:.0}%): \
         {:.1} ns a step, {:.2} ns a request-step (best of {repeats})",
        p.steps,
        p.request_steps,
        p.run_s * 1e3,
        p.price_s * 1e3,
        100.0 * p.price_s / p.run_s,
        p.price_s * 1e9 / p.steps as f64,
        p.price_s * 1e9 / p.request_steps as f64,
    );
}
