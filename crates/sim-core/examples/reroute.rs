//! Re-route after a link change on the 512-GPU fabric, natively (profiling aid for
//! `benchmarks/topology.py`): `cargo run --release --example reroute -- [REPEATS]`
use sim_core::{Format, SimOptions, Simulation};

fn main() {
    let repeats: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(20);
    let sc = r#"{"seed": 1, "model": "llama-3-8b", "gpu": "h200", "topology": "64x-hgx-h200-ib",
        "deployment": {"tp": 8, "replicas": 64},
        "workload": {"num_requests": 640, "arrival": {"kind": "poisson", "rate": 640.0},
                     "prompt": {"kind": "fixed", "value": 512}, "output": {"kind": "fixed", "value": 64}}}"#;
    let t = std::time::Instant::now();
    let mut sim = Simulation::from_text(sc, Format::Json, SimOptions::default()).unwrap();
    println!("build {:.1} ms", t.elapsed().as_secs_f64() * 1e3);
    sim.run_events(2000).unwrap();
    type Case = (&'static str, fn(usize) -> String);
    let cases: [Case; 3] = [
        ("bandwidth", |i| format!(r#"[{{"at_s":0,"kind":"set_link","src":"n17.gpu3","dst":"n17.nvswitch0","bandwidth_gbps":{}}}]"#, if i % 2 == 0 { 45.0 } else { 450.0 })),
        ("latency", |i| format!(r#"[{{"at_s":0,"kind":"set_link","src":"n17.gpu3","dst":"n17.nvswitch0","latency_us":{}}}]"#, if i % 2 == 0 { 1.5 } else { 1.6 })),
        ("ib down/up", |i| format!(r#"[{{"at_s":0,"kind":"{}","src":"n5.nic2","dst":"ib2"}}]"#, if i % 2 == 0 { "link_down" } else { "link_up" })),
    ];
    for (name, make) in cases {
        let mut times = Vec::new();
        for i in 0..repeats {
            let p = make(i);
            let t = std::time::Instant::now();
            sim.inject_topology(&p).unwrap();
            times.push(t.elapsed().as_secs_f64() * 1e3);
        }
        let stat = |mut v: Vec<f64>| {
            v.sort_by(f64::total_cmp);
            (v[0], v[v.len() / 2])
        };
        let (even, odd): (Vec<_>, Vec<_>) = times.iter().enumerate().partition(|(i, _)| i % 2 == 0);
        let (b, m) = stat(times.clone());
        let (be, me) = stat(even.into_iter().map(|x| *x.1).collect());
        let (bo, mo) = stat(odd.into_iter().map(|x| *x.1).collect());
        println!("{name:<12} best {b:.3} ms  median {m:.3} ms  (first kind: {be:.3} / {me:.3}, second: {bo:.3} / {mo:.3})");
    }
}
