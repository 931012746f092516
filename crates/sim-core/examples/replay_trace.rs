//! Replay a scenario whose `workload.trace.path` names a file, natively (profiling aid for
//! `benchmarks/traces.py`'s replays, without Python): the file is fed to the core's trace
//! reader in 1 MiB chunks, as the Python front end does, then the run is timed.
//! `cargo run --release --example replay_trace -- SCENARIO.json`
use std::io::Read;

use sim_core::workload::{TraceReader, TraceSpec};
use sim_core::{Format, SimOptions, Simulation};

fn main() {
    let path = std::env::args().nth(1).expect("usage: replay_trace SCENARIO.json");
    let text = std::fs::read_to_string(&path).expect("readable scenario");
    let doc: serde_json::Value = serde_json::from_str(&text).expect("a JSON scenario");
    let spec = &doc["workload"]["trace"];
    let file = spec["path"].as_str().expect("workload.trace.path");
    let t0 = std::time::Instant::now();
    let mut reader = TraceReader::new(&TraceSpec::from_json(&spec.to_string()).expect("a trace spec")).expect("a reader");
    let mut f = std::fs::File::open(file).expect("readable trace");
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).expect("reads");
        if n == 0 || !reader.feed(&buf[..n]).expect("parses") {
            break;
        }
    }
    let trace = reader.finish().expect("a whole trace");
    let t1 = std::time::Instant::now();
    let sim = Simulation::from_text_with_trace(&text, Format::Json, SimOptions::default(), Some(trace)).expect("builds");
    let t2 = std::time::Instant::now();
    let hwm = || std::fs::read_to_string("/proc/self/status").ok().and_then(|s| s.lines().find(|l| l.starts_with("VmHWM")).map(|l| l.to_string())).unwrap_or_default();
    eprintln!("after build: {}", hwm());
    let r = sim.finish().expect("runs");
    let t3 = std::time::Instant::now();
    eprintln!("after run: {}", hwm());
    let s = &r.summary;
    println!(
        "read {:.2} s, build {:.2} s, run {:.2} s; {} requests, {} finished, {} steps, hit rate {:.4}, TTFT p50 {:.1} ms; digest {:016x}",
        (t1 - t0).as_secs_f64(),
        (t2 - t1).as_secs_f64(),
        (t3 - t2).as_secs_f64(),
        s["num_requests"],
        s["finished"],
        s["steps"],
        s["prefix_cache_hit_rate"].as_f64().unwrap_or(0.0),
        s["ttft_ms"]["p50"].as_f64().unwrap_or(0.0),
        {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            r.to_json().hash(&mut h);
            h.finish()
        }
    );
}
