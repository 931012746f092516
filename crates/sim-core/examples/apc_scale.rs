//! Prefix caching at scale, on a Mooncake-like workload (every 512 tokens of a prompt have
//! an id, equal ids = equal content): the scale scenario's 64 replicas of Llama-3-8B/H100,
//! N requests at 100 req/s, each a Zipf-chosen document of 1-8 shared 512-token blocks
//! (1,000 documents) plus 1-4 blocks of its own, 64-320 output tokens. Prints wall time and
//! peak-free numbers with caching on and off.
//!
//! `cargo run --release --example apc_scale -- [REQUESTS] [on|off]`
use sim_core::config::Scenario;
use sim_core::workload::{RequestSpec, Segment, Workload};
use sim_core::{Format, SimOptions, Simulation};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn workload(n: u32) -> Workload {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let docs = 1000usize;
    // Zipf(1.1) over documents, by inverse CDF.
    let weights: Vec<f64> = (1..=docs).map(|k| 1.0 / (k as f64).powf(1.1)).collect();
    let total: f64 = weights.iter().sum();
    let mut cdf = Vec::with_capacity(docs);
    let mut acc = 0.0;
    for w in &weights {
        acc += w / total;
        cdf.push(acc);
    }
    let mut w = Workload::default();
    let mut t_ns = 0u64;
    for i in 0..n {
        t_ns += (-(1.0 - rng.next()).ln() * 10e6) as u64;
        let d = cdf.partition_point(|&c| c < rng.next()).min(docs - 1);
        let doc_blocks = 1 + d % 8;
        let own = 1 + (rng.next() * 4.0) as u64;
        let start = w.segments.len() as u32;
        for j in 0..doc_blocks {
            w.segments.push(Segment { key: (d as u64) << 8 | j as u64, len: 512 });
        }
        for j in 0..own {
            w.segments.push(Segment { key: 1 << 40 | u64::from(i) << 4 | j, len: 512 });
        }
        let prompt = 512 * (doc_blocks as u32 + own as u32);
        let out = 64 + (rng.next() * 256.0) as u32;
        w.requests.push(RequestSpec { segs: (start, doc_blocks as u32 + own as u32), ..RequestSpec::new(i, t_ns, prompt, out, 0) });
    }
    w
}

fn main() {
    let n: u32 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let text = std::fs::read_to_string("benchmarks/scenarios/scale.toml").expect("run from the repository root");
    let w = workload(n);
    let which: Vec<bool> = match std::env::args().nth(2).as_deref() {
        Some("on") => vec![true],
        Some("off") => vec![false],
        _ => vec![false, true],
    };
    for on in which {
        let mut sc = Scenario::parse(&text, Format::Toml).expect("parses");
        sc.scheduler.enable_prefix_caching = Some(on);
        let t = std::time::Instant::now();
        let sim = Simulation::with_workload(sc, w.clone(), SimOptions::default()).expect("builds");
        let r = sim.finish().expect("runs");
        let s = &r.summary;
        println!(
            "caching {on:>5}: {:.2} s for {n} requests; hit rate {:.3}, steps {}, finished {}, mean TTFT {:.1} ms",
            t.elapsed().as_secs_f64(),
            s["prefix_cache_hit_rate"].as_f64().unwrap_or(0.0),
            s["steps"],
            s["finished"],
            s["ttft_ms"]["mean"].as_f64().unwrap_or(0.0)
        );
    }
}
