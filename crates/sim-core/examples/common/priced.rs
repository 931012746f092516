//! Shared by `price_only` and `floor_loop`: a run's own steps priced again alone.
use std::time::Instant;

use sim_core::perf::{BatchShape, PrefillItem, StepMemo};
use sim_core::{simulate, Format, SimOptions, Simulation};

/// What [`price_alone`] measured: the run's steps and request-steps (one request in one
/// step's batch), and the best CPU seconds of the whole run and of its steps' prices alone.
pub struct Priced {
    pub steps: usize,
    pub request_steps: u64,
    pub run_s: f64,
    pub price_s: f64,
}

/// Run the scenario `repeats` times, then once with its steps recorded; price those steps
/// again, in order, with the run's own cost model and a fresh memo, `repeats` times. Panics
/// if a repriced step does not last what the run recorded (what is timed must be what the
/// run priced: one pool, no topology, decision latency or stalls).
pub fn price_alone(text: &str, format: Format, repeats: u32) -> Priced {
    let mut run_s = f64::INFINITY;
    for _ in 0..repeats {
        let t = Instant::now();
        std::hint::black_box(simulate(text, format, SimOptions::default()).unwrap_or_else(|e| panic!("{e}")));
        run_s = run_s.min(t.elapsed().as_secs_f64());
    }
    let mut sim = Simulation::from_text(text, format, SimOptions { record_steps: true, ..SimOptions::default() })
        .unwrap_or_else(|e| panic!("{e}"));
    sim.run().unwrap_or_else(|e| panic!("{e}"));
    let perf = sim.engine().perf().clone();
    let result = sim.finish().unwrap_or_else(|e| panic!("{e}"));
    let request_steps: u64 = result.steps.iter().map(|s| s.scheduled.len() as u64).sum();
    // What the run recorded each step lasted, and the prefill entries each was priced over.
    let durations: Vec<u64> = result.steps.iter().map(|s| ((s.end_ms - s.start_ms) * 1e6).round() as u64).collect();
    let items: Vec<Vec<PrefillItem>> = result.steps.iter().map(|s| s.shape.prefill_items()).collect();
    let shapes: Vec<BatchShape> = result.steps.iter().zip(&items).map(|(s, p)| s.shape.batch(p)).collect();
    let mut memo = StepMemo::default();
    let differ = shapes.iter().zip(&durations).filter(|(s, &d)| perf.step_ns_memo(s, &mut memo) != d).count();
    assert_eq!(differ, 0, "{differ} of {} repriced steps differ from the run's: not a scenario this times", shapes.len());
    let mut price_s = f64::INFINITY;
    let mut check = 0u64;
    for _ in 0..repeats {
        let mut memo = StepMemo::default();
        let t = Instant::now();
        for s in &shapes {
            check = check.wrapping_add(perf.step_ns_memo(s, &mut memo));
        }
        price_s = price_s.min(t.elapsed().as_secs_f64());
    }
    std::hint::black_box(check);
    Priced { steps: shapes.len(), request_steps, run_s, price_s }
}
