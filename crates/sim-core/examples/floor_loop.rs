//! The floor loop of issue 30: the least work any continuous-batching simulator must do per
//! request-step (one request in one step's batch), side by side with o1sim on the same
//! workload at 1, 10, 100 and 1,000 replicas, saturated and not.
//!
//! The floor keeps a record per request (arrival, output length, tokens generated, KV
//! blocks, first-token and finish instants: what pricing steps and reporting TTFT and E2E
//! need) and, per replica, a FIFO queue of ids, a batch of ids and a free-block count; an
//! event heap holds the step ends; arrivals (generated before the clock starts) are routed
//! round-robin (O(1), no load read). A step admits from the queue while sequences (256)
//! and blocks allow, is priced by one multiply-add over its tokens and the KV it reads;
//! its end advances every member by a token (a block at each 16th, first-token and finish
//! instants) and removes the finished, freeing their blocks. Nothing else: no cost model,
//! no prefix cache, no chunking, no preemption, no metrics beyond a checksum.
//!
//! `cargo run --release -p sim-core --example floor_loop -- [REQUESTS_PER_REPLICA] [REPEATS] [REPLICAS...]`
//! prints one row per (replicas, load): CPU time per request-step of each and their ratio;
//! then, per load on one replica, what o1sim's step prices alone cost per request-step
//! against the floor (its steps priced again, in order, by its own cost model: a part of
//! every run that keeping results byte for byte leaves in place).
//! `benchmarks/floor.py` runs it.
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Instant;

use sim_core::{simulate, Format, SimOptions};

#[path = "common/priced.rs"]
mod priced;

/// A replica's capacity in the o1sim scenario below is ~60 requests/s (Llama-3-8B on one
/// H100, 512-token prompts, ~128-token outputs, 256 sequences); these rates keep it at
/// about a third of that and well past it.
const LOADS: [(&str, f64); 2] = [("unsaturated", 20.0), ("saturated", 150.0)];

fn scenario(replicas: usize, requests: usize, rate_per_replica: f64) -> String {
    format!(
        r#"name = "floor"
seed = 7
model = "llama-3-8b"
gpu = "h100"
[deployment]
replicas = {replicas}
router = "least_outstanding_tokens"
[scheduler]
policy = "vllm"
max_num_seqs = 256
[limits]
max_seconds = 3600
[workload]
num_requests = {requests}
arrival = {{ kind = "poisson", rate = {rate} }}
prompt = {{ kind = "fixed", value = 512 }}
output = {{ kind = "lognormal", mean = 128, sigma = 0.6, max = 1024 }}
"#,
        rate = rate_per_replica * replicas as f64
    )
}

/// A small deterministic generator (SplitMix64) for the floor's own workload.
struct Mix(u64);
impl Mix {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Arrival instants (ns) and output lengths: Poisson at `rate`/s, lognormal outputs.
fn workload(requests: usize, rate: f64) -> Vec<(u64, u32)> {
    let mut g = Mix(7);
    let mut t = 0.0f64;
    (0..requests)
        .map(|_| {
            t += -(1.0 - g.next()).ln() / rate;
            let (u1, u2) = (g.next().max(1e-12), g.next());
            let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
            let out = (128.0 * (0.6 * z - 0.18).exp()).round().clamp(1.0, 1024.0) as u32;
            ((t * 1e9) as u64, out)
        })
        .collect()
}

/// What any simulator of KV-paged continuous batching keeps per request to price steps and
/// report latencies.
#[derive(Clone, Copy, Default)]
struct FloorReq {
    arrival_ns: u64,
    output: u32,
    generated: u32,
    blocks: u32,
    first_token_ns: u64,
    done_ns: u64,
}

#[derive(Default)]
struct Rep {
    queue: VecDeque<u32>,
    batch: Vec<u32>,
    busy: bool,
    free_blocks: u64,
}

const PROMPT: u32 = 512;
const BLOCK: u32 = 16;
const BLOCKS: u64 = 30_000;

/// Admits from the queue while sequences and blocks allow, prices the step (a
/// multiply-add over its tokens and the KV it reads) and files its end.
fn start(rep: &mut Rep, i: u32, now: u64, reqs: &mut [FloorReq], ends: &mut BinaryHeap<Reverse<(u64, u32)>>, context: u64) {
    let mut tokens = rep.batch.len() as u64;
    while rep.batch.len() < 256 {
        let Some(&id) = rep.queue.front() else { break };
        let need = u64::from(PROMPT / BLOCK + 1);
        if need > rep.free_blocks {
            break;
        }
        rep.queue.pop_front();
        rep.free_blocks -= need;
        reqs[id as usize].blocks = need as u32;
        rep.batch.push(id);
        tokens += u64::from(PROMPT);
    }
    if !rep.batch.is_empty() {
        rep.busy = true;
        ends.push(Reverse((now + 4_000_000 + 30 * tokens + context / 64, i)));
    }
}

/// Runs the floor loop; returns request-steps (Σ batch sizes over steps) and a checksum of
/// the latencies (so that nothing is optimised away).
fn floor(arrivals: &[(u64, u32)], replicas: usize) -> (u64, u64) {
    let mut reqs: Vec<FloorReq> =
        arrivals.iter().map(|&(t, out)| FloorReq { arrival_ns: t, output: out, ..FloorReq::default() }).collect();
    let mut reps: Vec<Rep> = (0..replicas).map(|_| Rep { free_blocks: BLOCKS, ..Rep::default() }).collect();
    let mut ends: BinaryHeap<Reverse<(u64, u32)>> = BinaryHeap::new();
    let (mut next, mut rr, mut request_steps, mut check) = (0usize, 0usize, 0u64, 0u64);
    loop {
        let t_arr = arrivals.get(next).map_or(u64::MAX, |a| a.0);
        let t_end = ends.peek().map_or(u64::MAX, |e| e.0 .0);
        if t_arr == u64::MAX && t_end == u64::MAX {
            return (request_steps, check);
        }
        if t_arr <= t_end {
            let now = arrivals[next].0;
            let id = next as u32;
            next += 1;
            let i = rr;
            rr = (rr + 1) % replicas;
            reps[i].queue.push_back(id);
            if !reps[i].busy {
                start(&mut reps[i], i as u32, now, &mut reqs, &mut ends, 0);
            }
        } else {
            let Reverse((now, i)) = ends.pop().unwrap();
            let rep = &mut reps[i as usize];
            request_steps += rep.batch.len() as u64;
            let (mut context, mut freed) = (0u64, 0u64);
            rep.batch.retain(|&id| {
                let r = &mut reqs[id as usize];
                r.generated += 1;
                let len = PROMPT + r.generated;
                context += u64::from(len);
                if r.generated == 1 {
                    r.first_token_ns = now;
                }
                if len.is_multiple_of(BLOCK) {
                    r.blocks += 1;
                    freed = freed.wrapping_sub(1);
                }
                if r.generated == r.output {
                    r.done_ns = now;
                    freed = freed.wrapping_add(u64::from(r.blocks));
                    check = check.wrapping_add(now - r.arrival_ns).wrapping_add(r.first_token_ns);
                    return false;
                }
                true
            });
            rep.free_blocks = rep.free_blocks.wrapping_add(freed);
            rep.busy = false;
            start(rep, i, now, &mut reqs, &mut ends, context);
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let per_replica: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(1000);
    let repeats: u32 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(3);
    let mut sizes: Vec<usize> = args.iter().skip(3).filter_map(|s| s.parse().ok()).collect();
    if sizes.is_empty() {
        sizes = vec![1, 10, 100, 1000];
    }
    println!("| replicas | load | requests | floor ns/request-step | o1sim ns/request-step | ratio |");
    println!("|---:|---|---:|---:|---:|---:|");
    for &n in &sizes {
        for (label, rate) in LOADS {
            let requests = per_replica * n;
            let arrivals = workload(requests, rate * n as f64);
            let text = scenario(n, requests, rate);
            let (mut best_floor, mut best_sim) = (f64::INFINITY, f64::INFINITY);
            let (mut floor_steps, mut sim_steps) = (0u64, 0f64);
            for _ in 0..repeats {
                let t = Instant::now();
                (floor_steps, _) = std::hint::black_box(floor(&arrivals, n));
                best_floor = best_floor.min(t.elapsed().as_secs_f64());
                let t = Instant::now();
                let r = simulate(&text, Format::Toml, SimOptions::default()).unwrap_or_else(|e| panic!("{e}"));
                best_sim = best_sim.min(t.elapsed().as_secs_f64());
                let s = &r.summary;
                sim_steps = s["mean_batch_size"].as_f64().unwrap_or(0.0) * s["steps"].as_f64().unwrap_or(0.0);
            }
            let f = best_floor * 1e9 / floor_steps as f64;
            let o = best_sim * 1e9 / sim_steps;
            println!("| {n} | {label} | {requests} | {f:.1} | {o:.1} | {:.2} |", o / f);
        }
    }
    println!();
    println!(
        "| load (one replica) | o1sim steps | floor ns/request-step | o1sim ns/request-step, runs back to back | its step prices alone | prices / floor | prices' share of the run |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for (label, rate) in LOADS {
        let arrivals = workload(per_replica, rate);
        let mut best_floor = f64::INFINITY;
        let mut floor_steps = 0u64;
        for _ in 0..repeats.max(10) {
            let t = Instant::now();
            (floor_steps, _) = std::hint::black_box(floor(&arrivals, 1));
            best_floor = best_floor.min(t.elapsed().as_secs_f64());
        }
        let p = priced::price_alone(&scenario(1, per_replica, rate), Format::Toml, repeats.max(10));
        let f = best_floor * 1e9 / floor_steps as f64;
        let (run, o) = (p.run_s * 1e9 / p.request_steps as f64, p.price_s * 1e9 / p.request_steps as f64);
        println!("| {label} | {} | {f:.1} | {run:.1} | {o:.2} | {:.2} | {:.0}% |", p.steps, o / f, 100.0 * p.price_s / p.run_s);
    }
}
