//! What a run's step prices cost alone (issue 30's accounting): runs a scenario, then runs it
//! again with its steps recorded and prices exactly those steps a second time, in order,
//! with the run's own cost model and a fresh memo — the work a faster event loop would still
//! have to do to keep every result byte for byte. Prints the CPU time of both (best of the
//! repeats) and the pricing's share. It first checks that each repriced step lasts what the
//! run recorded, so what is timed is what the run priced: for one-pool scenarios without a
//! topology, decision latency or stalls (S2, the floor loop's scenarios).
//!
//! `cargo run --release -p sim-core --example price_only -- SCENARIO.toml [REPEATS]`
use std::time::Instant;

use sim_core::perf::{BatchShape, PrefillItem, StepMemo};
use sim_core::{simulate, Format, SimOptions, Simulation};

/// A recorded step's shape: its prefills and its aggregates, as the engine priced them.
struct Shape {
    prefill: Vec<PrefillItem>,
    prefill_tokens: u64,
    sums: [u64; 7],
}

impl Shape {
    fn batch(&self) -> BatchShape<'_> {
        let [decode_seqs, decode_context_sum, context_sum_after, sampled, decode_blocks_1024, spec_tokens, lora_adapters] = self.sums;
        BatchShape {
            prefill: &self.prefill,
            prefill_tokens: self.prefill_tokens,
            decode_seqs,
            decode_context_sum,
            context_sum_after,
            sampled,
            decode_blocks_1024,
            spec_tokens,
            lora_adapters,
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let path = args.get(1).expect("usage: price_only SCENARIO.toml [REPEATS]");
    let repeats: u32 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(20);
    let text = std::fs::read_to_string(path).expect("readable scenario");
    let format = if path.ends_with(".json") { Format::Json } else { Format::Toml };

    let mut best_run = f64::INFINITY;
    for _ in 0..repeats {
        let t = Instant::now();
        std::hint::black_box(simulate(&text, format, SimOptions::default()).unwrap_or_else(|e| panic!("{e}")));
        best_run = best_run.min(t.elapsed().as_secs_f64());
    }

    let mut sim = Simulation::from_text(&text, format, SimOptions { record_steps: true, ..SimOptions::default() })
        .unwrap_or_else(|e| panic!("{e}"));
    sim.run().unwrap_or_else(|e| panic!("{e}"));
    let perf = sim.engine().perf().clone();
    let result = sim.finish().unwrap_or_else(|e| panic!("{e}"));
    let mut request_steps = 0u64;
    let mut durations = Vec::with_capacity(result.steps.len());
    let shapes: Vec<Shape> = result
        .steps
        .iter()
        .map(|s| {
            request_steps += s.scheduled.len() as u64;
            durations.push(((s.end_ms - s.start_ms) * 1e6).round() as u64);
            let sh = &s.shape;
            let prefill: Vec<PrefillItem> =
                sh.prefill.iter().map(|&(new_tokens, context_before)| PrefillItem { new_tokens, context_before }).collect();
            Shape {
                prefill_tokens: prefill.iter().map(|p| u64::from(p.new_tokens)).sum(),
                prefill,
                sums: [
                    sh.decode_seqs,
                    sh.decode_context_sum,
                    sh.context_sum_after,
                    sh.sampled,
                    sh.decode_blocks_1024,
                    sh.spec_tokens,
                    sh.lora_adapters,
                ],
            }
        })
        .collect();

    let mut memo = StepMemo::default();
    let differ = shapes.iter().zip(&durations).filter(|(s, &d)| perf.step_ns_memo(&s.batch(), &mut memo) != d).count();
    assert_eq!(differ, 0, "{differ} of {} repriced steps differ from the run's: not a scenario this example times", shapes.len());

    let mut best_price = f64::INFINITY;
    let mut check = 0u64;
    for _ in 0..repeats {
        let mut memo = StepMemo::default();
        let t = Instant::now();
        for s in &shapes {
            check = check.wrapping_add(perf.step_ns_memo(&s.batch(), &mut memo));
        }
        best_price = best_price.min(t.elapsed().as_secs_f64());
    }
    std::hint::black_box(check);

    let n = shapes.len() as f64;
    println!(
        "{path}: {} steps, {request_steps} request-steps; run {:.3} ms, its steps' prices alone {:.3} ms ({:.0}%): \
         {:.1} ns a step, {:.2} ns a request-step (best of {repeats})",
        shapes.len(),
        best_run * 1e3,
        best_price * 1e3,
        100.0 * best_price / best_run,
        best_price * 1e9 / n,
        best_price * 1e9 / request_steps as f64,
    );
}
