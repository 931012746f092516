//! Re-routing events on a 2,048-GPU fabric whose TP groups span two nodes, natively
//! (profiling aid for `benchmarks/topology.py`): `cargo run --release --example reroute_wide -- [REPEATS]`
use sim_core::{Format, SimOptions, Simulation};

fn main() {
    let repeats: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(20);
    let sc = r#"{"seed": 1, "model": "llama-3-8b", "gpu": "h200", "topology": "256x-hgx-h200-ib",
        "deployment": {"tp": 16, "replicas": 128},
        "workload": {"num_requests": 1280, "arrival": {"kind": "poisson", "rate": 1280.0},
                     "prompt": {"kind": "fixed", "value": 512}, "output": {"kind": "fixed", "value": 64}}}"#;
    let t = std::time::Instant::now();
    let mut sim = Simulation::from_text(sc, Format::Json, SimOptions::default()).unwrap();
    println!("build {:.1} ms", t.elapsed().as_secs_f64() * 1e3);
    sim.run_events(3000).unwrap();
    let mut times = Vec::new();
    for i in 0..repeats {
        let kind = if i % 2 == 0 { "link_down" } else { "link_up" };
        let p = format!(r#"[{{"at_s":0,"kind":"{kind}","src":"n5.nic2","dst":"ib2"}}]"#);
        let t = std::time::Instant::now();
        sim.inject_topology(&p).unwrap();
        times.push((kind, t.elapsed().as_secs_f64() * 1e3));
    }
    for kind in ["link_down", "link_up"] {
        let mut v: Vec<f64> = times.iter().filter(|(k, _)| *k == kind).map(|(_, t)| *t).collect();
        v.sort_by(f64::total_cmp);
        println!("{kind:<10} best {:.3} ms  median {:.3} ms", v[0], v[v.len() / 2]);
    }
}
