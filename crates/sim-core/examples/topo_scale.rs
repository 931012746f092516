//! Issue 30 item 4, natively: building a fabric's routes at 256 … 4,096 GPUs with the fitted
//! exponent, and re-routing after a single link event at 2,048 GPUs.
//! `cargo run --release --example topo_scale -- [REPEATS]`
//!
//! Each size is `{n/8}x-hgx-h200-ib` with TP-16 replicas on every GPU (each TP group across
//! two boxes, so its pairs route over the IB rails): the build parses, places, routes every
//! TP pair and prices every replica. Times are the best of REPEATS builds (default 3; the
//! machines are noisy). The events are those of `benchmarks/topology.py`'s 2,048-GPU case:
//! node n5's rails go down one by one, then come back, five times over.
use std::time::Instant;

use sim_core::{Format, SimOptions, Simulation};

fn scenario(gpus: usize) -> String {
    let replicas = gpus / 16;
    format!(
        r#"{{"seed": 1, "model": "llama-3-8b", "gpu": "h200", "topology": "{}x-hgx-h200-ib",
        "deployment": {{"tp": 16, "replicas": {replicas}}},
        "workload": {{"num_requests": {}, "arrival": {{"kind": "poisson", "rate": {}.0}},
                     "prompt": {{"kind": "fixed", "value": 512}}, "output": {{"kind": "fixed", "value": 64}}}}}}"#,
        gpus / 8,
        replicas * 10,
        replicas * 10
    )
}

fn main() {
    let repeats: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(3);
    println!("build: parse, place, route every TP pair, price every replica (best of {repeats})");
    println!("{:>6} {:>8} {:>10} {:>12}", "GPUs", "pairs", "build ms", "µs / pair");
    let mut points = Vec::new();
    for gpus in [256usize, 512, 1024, 2048, 4096] {
        let text = scenario(gpus);
        let mut best = f64::INFINITY;
        let mut failed = None;
        for _ in 0..repeats {
            let t = Instant::now();
            match Simulation::from_text(&text, Format::Json, SimOptions::default()) {
                Ok(sim) => {
                    best = best.min(t.elapsed().as_secs_f64());
                    drop(sim);
                }
                Err(e) => {
                    failed = Some(e.to_string());
                    break;
                }
            }
        }
        let pairs = gpus / 16 * 120;
        match failed {
            Some(e) => println!("{gpus:>6} {pairs:>8}  not expressible: {e}"),
            None => {
                println!("{gpus:>6} {pairs:>8} {:>10.1} {:>12.2}", best * 1e3, best * 1e6 / pairs as f64);
                points.push(((gpus as f64).ln(), best.ln()));
            }
        }
    }
    if points.len() >= 2 {
        let m = points.len() as f64;
        let (sx, sy) = points.iter().fold((0.0, 0.0), |a, p| (a.0 + p.0, a.1 + p.1));
        let (mx, my) = (sx / m, sy / m);
        let num: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
        let den: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
        println!("fitted exponent (least squares of ln time on ln GPUs, {} sizes): n^{:.2}", points.len(), num / den);
    }

    let mut sim = Simulation::from_text(&scenario(2048), Format::Json, SimOptions::default()).unwrap();
    sim.run_events(3000).unwrap();
    let mut times: Vec<(&str, f64)> = Vec::new();
    for _ in 0..5 {
        for kind in ["link_down", "link_up"] {
            for rail in 0..7 {
                let p = format!(r#"[{{"at_s":0,"kind":"{kind}","src":"n5.nic{rail}","dst":"ib{rail}"}}]"#);
                let t = Instant::now();
                sim.inject_topology(&p).unwrap();
                times.push((kind, t.elapsed().as_secs_f64() * 1e3));
            }
        }
    }
    println!("re-route after one link event at 2,048 GPUs (256 boxes, 128 replicas at TP 16; n5's rails):");
    for kind in ["link_down", "link_up"] {
        let mut v: Vec<f64> = times.iter().filter(|(k, _)| *k == kind).map(|(_, t)| *t).collect();
        v.sort_by(f64::total_cmp);
        println!("  {kind:<10} best {:.3} ms  median {:.3} ms  worst {:.3} ms  ({} events)", v[0], v[v.len() / 2], v[v.len() - 1], v.len());
    }
}
