//! Prefix caching, priority scheduling, sessions and client timeouts end to end, on
//! workloads built in Rust (token identity as [`Segment`]s, sessions as `after` links).

use serde_json::{json, Value};
use sim_core::config::Scenario;
use sim_core::workload::{output_key, After, RequestSpec, Segment, Workload};
use sim_core::{Format, SimOptions, SimResult, Simulation, REASON_NAMES};

const MS: u64 = 1_000_000;

fn scenario(patch: Value) -> Scenario {
    let mut v = json!({
        "seed": 1, "model": "llama-3-8b", "gpu": "h200",
        "scheduler": {"policy": "vllm"},
        "cost_model": {"kind": "linear", "base_ms": 2.0, "per_prefill_token_ms": 0.02,
                       "per_decode_seq_ms": 0.05, "per_context_token_ms": 0.0005},
        "workload": {"requests": [{"arrival_ms": 0, "prompt_tokens": 1, "output_tokens": 1}]}
    });
    for (k, x) in patch.as_object().unwrap() {
        if let (Some(a), Some(b)) = (v[k].as_object_mut(), x.as_object()) {
            a.extend(b.clone());
        } else {
            v[k] = x.clone();
        }
    }
    Scenario::parse(&v.to_string(), Format::Json).unwrap()
}

fn run_with(sc: &Scenario, w: &Workload, opts: SimOptions) -> SimResult {
    Simulation::with_workload(sc.clone(), w.clone(), opts).unwrap().finish().unwrap()
}

fn run(sc: &Scenario, w: &Workload) -> SimResult {
    run_with(sc, w, SimOptions::default())
}

fn caching(sc: &Scenario, on: bool) -> Scenario {
    let mut s = sc.clone();
    s.scheduler.enable_prefix_caching = Some(on);
    s
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap()
}

/// inference-perf's `shared_prefix` data, built by hand: `groups` system prompts of
/// `prefix` tokens, `users` per group, each with a unique `question` and `output` tokens;
/// one request every `gap_ms`, groups interleaved.
fn shared_prefix(groups: u32, users: u32, prefix: u32, question: u32, output: u32, gap_ms: u64) -> Workload {
    let segments = (0..groups).map(|g| Segment { key: 100 + g as u64, len: prefix }).collect();
    let requests = (0..groups * users)
        .map(|i| RequestSpec { segs: (i % groups, 1), ..RequestSpec::new(i, i as u64 * gap_ms * MS, prefix + question, output, 0) })
        .collect();
    Workload { requests, segments }
}

#[test]
fn a_100_token_shared_prefix_reuses_96_tokens_with_16_token_blocks() {
    let sc = scenario(json!({}));
    // One group, requests far apart: each after the first finds the prefix cached.
    let w = shared_prefix(1, 5, 100, 40, 8, 500);
    let r = run(&sc, &w);
    assert_eq!(r.requests.cached_tokens, vec![0, 96, 96, 96, 96]);
    assert_eq!(r.summary["prefix_cache_hits"], 4 * 96);
    assert_eq!(r.summary["prefix_cache_queries"], 5 * 140);
    assert_eq!(r.summary["computed_prefill_tokens"], 5 * 140 - 4 * 96);
}

#[test]
fn a_request_admitted_later_in_the_same_step_hits_the_blocks_scheduled_in_it() {
    // Two requests with the same 64-token prefix arrive together: the first's blocks are
    // cached as they are scheduled, so the second, admitted right after it in the same
    // step, computes only its 16 unique tokens.
    let w = shared_prefix(1, 2, 64, 16, 4, 0);
    let r = run_with(&scenario(json!({})), &w, SimOptions { record_steps: true, check_invariants: true });
    assert_eq!(r.steps[0].scheduled, vec![(0, 80), (1, 16)]);
    assert_eq!(r.steps[0].cached, vec![(1, 64)]);
    assert_eq!(r.requests.cached_tokens, vec![0, 64]);
}

#[test]
fn caching_cuts_computed_prefill_by_the_hit_rate_and_cuts_ttft() {
    // 4 groups × 16 users, 1,000-token system prompts, 200-token questions, a request
    // every 20 ms: busy but never short of KV, so nothing is preempted or evicted and
    // every user but a group's first hits its system prompt's 62 full blocks (992 tokens),
    // even when admitted in the same step as the first.
    let (groups, users, prefix, question) = (4, 16, 1000, 200);
    let w = shared_prefix(groups, users, prefix, question, 64, 20);
    let sc = scenario(json!({"cost_model": {"per_prefill_token_ms": 0.05}}));
    let (on, off) = (run(&caching(&sc, true), &w), run(&caching(&sc, false), &w));
    assert_eq!(on.summary["preemptions"], 0);
    let expected = f64::from(groups * (users - 1) * 992) / f64::from(groups * users * (prefix + question));
    let rate = f(&on.summary["prefix_cache_hit_rate"]);
    assert!((rate - expected).abs() < 1e-12, "hit rate {rate} vs {expected}");
    let (c_on, c_off) = (f(&on.summary["computed_prefill_tokens"]), f(&off.summary["computed_prefill_tokens"]));
    assert_eq!(c_off, f64::from(groups * users * (prefix + question)));
    assert!((c_on / c_off - (1.0 - rate)).abs() < 1e-12, "computed prefill {c_on} / {c_off}, hit rate {rate}");
    let (t_on, t_off) = (f(&on.summary["ttft_ms"]["mean"]), f(&off.summary["ttft_ms"]["mean"]));
    assert!(t_on < 0.6 * t_off, "mean TTFT {t_on} ms with caching vs {t_off} without");
    assert_eq!(off.summary["prefix_cache_queries"], 0);
    // The time series carries the lookups of each bucket.
    let ts = &on.timeseries;
    let q: f64 = ts.prefix_queries.iter().sum();
    let h: f64 = ts.prefix_hits.iter().sum();
    assert_eq!((q, h), (f(&on.summary["prefix_cache_queries"]), f(&on.summary["prefix_cache_hits"])));
    assert!(ts.prefix_hit_rate.iter().any(|&x| x > 0.5));
}

#[test]
fn prompts_that_share_nothing_hit_nothing_and_keep_their_results_without_preemption() {
    // Unique prompts and no preemption: caching changes no result but the new counters.
    let w = Workload {
        requests: (0..40).map(|i| RequestSpec::new(i, u64::from(i) * 7 * MS, 300 + 10 * i, 50, 0)).collect(),
        segments: Vec::new(),
    };
    let sc = scenario(json!({}));
    let (on, off) = (run(&caching(&sc, true), &w), run(&caching(&sc, false), &w));
    assert_eq!(on.summary["preemptions"], 0);
    assert_eq!(on.summary["prefix_cache_hits"], 0);
    assert_eq!(on.requests.finish_ms, off.requests.finish_ms);
    assert_eq!(on.summary["ttft_ms"], off.summary["ttft_ms"]);
}

#[test]
fn a_preempted_request_re_hits_its_own_blocks() {
    // 6 blocks of 4 tokens. A (12 tokens) and B (8) fill 5; A grows into the 6th, B cannot
    // grow and preempts itself, freeing its two full blocks — cached though its prompt is
    // unique. A finishes; B, re-admitted with 9 tokens (prompt + 1 generated), hits 8 and
    // computes 1. Without caching it recomputes all 9.
    let w = Workload { requests: vec![RequestSpec::new(0, 0, 12, 2, 0), RequestSpec::new(1, 0, 8, 3, 0)], segments: Vec::new() };
    let sc = scenario(json!({"scheduler": {"block_size": 4, "num_gpu_blocks": 6}}));
    let opts = SimOptions { record_steps: true, check_invariants: true };
    for (on, third) in [(true, vec![(1, 1)]), (false, vec![(1, 9)])] {
        let r = run_with(&caching(&sc, on), &w, opts);
        let plans: Vec<_> = r.steps.iter().map(|s| (s.scheduled.clone(), s.preempted.clone())).collect();
        assert_eq!(plans[..3], [(vec![(0, 12), (1, 8)], vec![]), (vec![(0, 1)], vec![1]), (third, vec![])], "caching {on}");
        // A re-admission after a preemption is not a first admission: not in the counters.
        assert_eq!(r.summary["prefix_cache_hits"], 0);
        assert_eq!(r.requests.cached_tokens, vec![0, 0]);
    }
}

#[test]
fn o1pro_keeps_a_cache_per_block_size() {
    // o1pro picks 32-token blocks above 16,000 tokens: the same 17,000-token prefix is
    // cached in 32-token blocks for long requests and 16-token blocks for short ones, and
    // a lookup only finds blocks of its own size.
    let sc = scenario(json!({"model": {"preset": "llama-3-8b", "max_context": 40000},
                             "scheduler": {"policy": "o1pro", "max_model_len": 40000}}));
    let seg = Segment { key: 5, len: 17_000 };
    let req = |id, at: u64, prompt| RequestSpec { segs: (0, 1), ..RequestSpec::new(id, at * 1000 * MS, prompt, 4, 0) };
    // Long (32-token blocks), long again, then one whose total stays at 16,000 (16-token
    // blocks) sharing the first 15,990 tokens of the prefix.
    let seg_short = Segment { key: 5, len: 15_990 };
    let w = Workload {
        requests: vec![req(0, 0, 17_100), req(1, 1, 17_100), RequestSpec { segs: (1, 1), ..RequestSpec::new(2, 2000 * MS, 15_996, 4, 0) }],
        segments: vec![seg, seg_short],
    };
    let r = run(&sc, &w);
    assert_eq!(r.requests.cached_tokens, vec![0, 17_000 / 32 * 32, 0]);
}

/// A two-replica disagg deployment over InfiniBand (prefill on replica 0).
fn disagg() -> Scenario {
    let mut links = Vec::new();
    for n in 0..2 {
        for j in 0..8 {
            links.push(json!({"src": format!("n{n}.nic{j}"), "dst": format!("ib{j}"), "kind": "ib", "bandwidth_gbps": 25.0, "latency_us": 1.0}));
        }
    }
    scenario(json!({"model": "llama-3-70b",
        "deployment": {"tp": 8, "replicas": 2, "prefill_replicas": 1, "router": "topology_aware"},
        "scheduler": {"policy": "disagg", "num_gpu_blocks": 3000},
        "topology": {"preset": "2x-hgx-h200-ib", "links": links}}))
}

#[test]
fn disagg_prefill_replicas_hit_their_cache() {
    let w = shared_prefix(2, 10, 512, 64, 32, 50);
    let sc = disagg();
    let checked = SimOptions { check_invariants: true, ..SimOptions::default() };
    let on = run_with(&sc, &w, checked);
    let off = run(&caching(&sc, false), &w);
    assert_eq!(on.summary["finished"], 20);
    assert_eq!(on.summary["prefix_cache_hits"], 2 * 9 * 512);
    assert!(f(&on.summary["ttft_ms"]["mean"]) < f(&off.summary["ttft_ms"]["mean"]));
    // The decode side never looks up (the KV arrives): every query came from replica 0.
    let ts = &on.timeseries;
    let from_decode: f64 = (0..ts.replica.len()).filter(|&i| ts.replica[i] == 1).map(|i| ts.prefix_queries[i]).sum();
    assert_eq!(from_decode, 0.0);
    assert_eq!(run(&sc, &w).to_json(), on.to_json());
}

// ---- priority scheduling ---------------------------------------------------------------

fn priority_case(policy: Option<&str>, caching_on: bool) -> SimResult {
    let mut sc = scenario(json!({
        "scheduler": {"policy": "vllm", "block_size": 4, "num_gpu_blocks": 4, "max_num_batched_tokens": 64},
        "cost_model": {"base_ms": 1.0, "per_prefill_token_ms": 0.25, "per_decode_seq_ms": 0.5, "per_context_token_ms": 0.125}}));
    sc.scheduler.scheduling_policy = policy.map(str::to_string);
    sc.scheduler.enable_prefix_caching = Some(caching_on);
    // R0: less urgent, first. R1: urgent, at 1 ms. R2: urgent, at 8 ms.
    let w = Workload {
        requests: vec![RequestSpec::new(0, 0, 7, 10, 1), RequestSpec::new(1, MS, 4, 10, 0), RequestSpec::new(2, 8 * MS, 4, 2, 0)],
        segments: Vec::new(),
    };
    run_with(&sc, &w, SimOptions { record_steps: true, check_invariants: true })
}

#[test]
fn priority_scheduling_preempts_the_least_urgent_and_queues_by_priority() {
    for caching_on in [false, true] {
        let r = priority_case(Some("priority"), caching_on);
        let steps: Vec<_> = r.steps.iter().take(4).map(|s| (s.start_ms, s.end_ms, s.scheduled.clone(), s.preempted.clone())).collect();
        assert_eq!(
            steps,
            vec![
                // R0 alone (7 tokens, 2 blocks): 1 + 0.25·7 + 0.125·7 = 3.625 ms.
                (0.0, 3.625, vec![(0, 7)], vec![]),
                // R0 decodes, R1 (arrived at 1 ms) admitted: 1 + 1 + 0.5 + 0.125·12 = 4 ms.
                (3.625, 7.625, vec![(0, 1), (1, 4)], vec![]),
                // R0 takes the last block; R1 cannot grow. The victim is the largest
                // (priority, arrival) — R0, already scheduled this step, not R1, the last
                // admitted — and R0's token goes back to the budget: 1 + 0.5 + 0.125·5.
                (7.625, 9.75, vec![(1, 1)], vec![0]),
                // R2 (priority 0, arrived at 8 ms) goes before the preempted R0 (priority 1),
                // which waits at its (priority, arrival) place, not at the head:
                // 1 + 0.25·4 + 0.5 + 0.125·(6+4) = 3.75 ms.
                (9.75, 13.5, vec![(1, 1), (2, 4)], vec![]),
            ],
            "caching {caching_on}"
        );
        assert_eq!(r.summary["finished"], 3);
    }
    // FCFS (the default): the last admitted, R1 itself, is preempted at 7.625 ms.
    let fcfs = priority_case(None, true);
    assert_eq!(fcfs.steps[2].preempted, vec![1]);
    assert_eq!(priority_case(Some("fcfs"), true).to_json(), fcfs.to_json());
}

#[test]
fn priority_order_admits_a_later_urgent_request_first() {
    // One seat: R0 runs; R1 (priority 2, at 1 ms) and R2 (priority 0, at 2 ms) wait. When
    // R0 finishes, R2 goes first under priority scheduling, R1 under FCFS.
    let w = Workload {
        requests: vec![RequestSpec::new(0, 0, 32, 20, 5), RequestSpec::new(1, MS, 32, 4, 2), RequestSpec::new(2, 2 * MS, 32, 4, 0)],
        segments: Vec::new(),
    };
    let mut sc = scenario(json!({"scheduler": {"max_num_seqs": 1}}));
    let fcfs = run(&sc, &w);
    sc.scheduler.scheduling_policy = Some("priority".into());
    let prio = run(&sc, &w);
    assert!(fcfs.requests.first_token_ms[1] < fcfs.requests.first_token_ms[2]);
    assert!(prio.requests.first_token_ms[2] < prio.requests.first_token_ms[1]);
    // sarathi runs vLLM's scheduler too and takes the same setting.
    sc.scheduler.policy = sim_core::policy::Policy::Sarathi;
    let sarathi = run(&sc, &w);
    assert!(sarathi.requests.first_token_ms[2] < sarathi.requests.first_token_ms[1]);
}

// ---- sessions --------------------------------------------------------------------------

/// A session of `turns` turns: turn k's prompt is every earlier prompt and output plus a
/// new `question`-token question (all segments, so the whole conversation is shared
/// content); turn k + 1 is sent `think_ms` after turn k finishes.
fn session(first_id: u32, at_ms: u64, turns: u32, question: u32, output: u32, think_ms: u64, w: &mut Workload) {
    let mut history: Vec<Segment> = Vec::new();
    for k in 0..turns {
        let id = first_id + k;
        history.push(Segment { key: 10_000 + u64::from(id), len: question });
        let start = w.segments.len() as u32;
        w.segments.extend_from_slice(&history);
        let prompt: u32 = history.iter().map(|s| s.len).sum();
        let after = (k > 0).then(|| After { parent: id - 1, think_ns: think_ms * MS });
        w.requests.push(RequestSpec { segs: (start, history.len() as u32), after, ..RequestSpec::new(id, at_ms * MS, prompt, output, 0) });
        history.push(Segment { key: output_key(id), len: output });
    }
}

#[test]
fn a_session_turn_is_sent_a_think_time_after_the_previous_one_finishes_and_hits_its_blocks() {
    let mut w = Workload::default();
    session(0, 0, 4, 50, 30, 250, &mut w);
    let r = run(&scenario(json!({})), &w);
    let c = &r.requests;
    assert_eq!(r.summary["finished"], 4);
    for k in 1..4 {
        assert_eq!(c.arrival_ms[k], c.finish_ms[k - 1] + 250.0, "turn {k}");
        // Turn k's prompt: the k earlier questions and outputs plus its own question.
        assert_eq!(c.prompt_tokens[k], (k as u32) * 80 + 50);
        // It hits every full block of the conversation so far except the one holding the
        // previous answer's last token (that token's KV is never computed).
        let computed_before = c.prompt_tokens[k - 1] + 30 - 1;
        assert_eq!(c.cached_tokens[k], computed_before / 16 * 16, "turn {k}");
    }
}

#[test]
fn a_rejected_or_timed_out_turn_drops_the_rest_of_its_session() {
    // Session A's second turn exceeds max_model_len: rejected at arrival, turns 3-4 dropped
    // at that moment. Session B times out on its first turn (a 1 ms client timeout).
    let mut w = Workload::default();
    session(0, 0, 4, 600, 100, 10, &mut w);
    let mut sc = scenario(json!({"scheduler": {"max_model_len": 1000}}));
    let r = run(&sc, &w);
    let c = &r.requests;
    let reason = |i: usize| REASON_NAMES[c.reason[i] as usize];
    assert_eq!(c.status, vec![0, 1, 1, 1]);
    assert_eq!((reason(1), reason(2), reason(3)), ("prompt exceeds max_model_len", "session aborted", "session aborted"));
    assert_eq!(c.finish_ms[2], c.arrival_ms[1]);
    assert_eq!(r.summary["rejections"]["session aborted"], 2);
    sc.workload.timeout_s = Some(0.001);
    let r = run(&sc, &w);
    assert_eq!(r.requests.reason.iter().map(|&x| REASON_NAMES[x as usize]).collect::<Vec<_>>(),
               vec!["timeout", "session aborted", "session aborted", "session aborted"]);
    assert_eq!(r.requests.finish_ms[0], 1.0);
}

#[test]
fn sessions_that_loop_or_follow_a_missing_request_are_config_errors() {
    let sc = scenario(json!({}));
    let mut w = Workload::default();
    session(0, 0, 2, 10, 10, 1, &mut w);
    w.requests[0].after = Some(After { parent: 1, think_ns: 0 });
    let e = Simulation::with_workload(sc.clone(), w.clone(), SimOptions::default()).err().unwrap();
    assert_eq!(e.path(), Some("workload"));
    assert!(e.to_string().contains("loop"), "{e}");
    w.requests[0].after = Some(After { parent: 7, think_ns: 0 });
    let e = Simulation::with_workload(sc, w, SimOptions::default()).err().unwrap();
    assert!(e.to_string().contains("request 0 follows request 7"), "{e}");
}

// ---- client timeouts -------------------------------------------------------------------

fn timeout_run(timeout_s: f64, max_num_seqs: u32) -> SimResult {
    // cost = 1 ms + 0.25 ms per prefill token: a 4-token prompt takes 2 ms, a decode 1 ms.
    let mut sc = scenario(json!({"scheduler": {"max_num_seqs": max_num_seqs},
        "cost_model": {"base_ms": 1.0, "per_prefill_token_ms": 0.25, "per_decode_seq_ms": 0.0, "per_context_token_ms": 0.0}}));
    sc.workload.timeout_s = Some(timeout_s);
    let w = Workload { requests: vec![RequestSpec::new(0, 0, 4, 3, 0), RequestSpec::new(1, 0, 4, 1, 0)], segments: Vec::new() };
    run_with(&sc, &w, SimOptions { check_invariants: true, record_steps: true })
}

#[test]
fn a_timeout_aborts_at_the_deadline_wherever_the_request_is() {
    // One seat. R0: 4 + 3 tokens, done at 2 + 1 + 1 = 4 ms; R1 waits, then 2 ms: done at 6.
    let r = timeout_run(1.0, 1);
    assert_eq!(r.requests.finish_ms, vec![4.0, 6.0]);
    // Deadline exactly at R0's finish: it finished (completions come first). R1, waiting,
    // is taken out of the queue at 4 ms too.
    let r = timeout_run(0.004, 1);
    assert_eq!(r.requests.status, vec![0, 1]);
    assert_eq!(r.requests.finish_ms, vec![4.0, 4.0]);
    assert_eq!(REASON_NAMES[r.requests.reason[1] as usize], "timeout");
    assert_eq!(r.summary["rejections"]["timeout"], 1);
    // Mid-step: R0 is aborted at 3.5 ms during its last decode step (3-4 ms), its KV freed
    // at once; R1, still waiting, times out at the same instant. The step in flight still
    // ends at 4 ms (the work was launched) and finishes nobody; nothing runs after it.
    let r = timeout_run(0.0035, 1);
    assert_eq!(r.requests.finish_ms, vec![3.5, 3.5]);
    assert_eq!(r.requests.status, vec![1, 1]);
    let last = r.steps.last().unwrap();
    assert_eq!((last.start_ms, last.end_ms, last.finished.len(), r.steps.len()), (3.0, 4.0, 0, 3));
    assert_eq!(r.steps.last().unwrap().free_blocks_after, r.deployment["num_gpu_blocks"].as_u64().unwrap());
    // Two seats: both run; R1 (done at 3 ms: its prefill step costs 1 + 0.25·8) finishes,
    // R0 times out in its last decode.
    let r = timeout_run(0.0035, 2);
    assert_eq!(r.requests.status, vec![1, 0]);
    assert_eq!(r.requests.first_token_ms[0], 3.0);
}

#[test]
fn timeouts_in_the_router_queue_and_under_overload() {
    // A heavy overload (one replica, waiting queue bounded at 4, 300 requests in 3 s):
    // with a 2 s client timeout every request ends finished or timed out within 2 s of
    // its arrival (or rejected by the router first), and the run is deterministic.
    let w = shared_prefix(3, 100, 256, 256, 128, 10);
    let mut sc = scenario(json!({"scheduler": {"max_waiting": 4, "num_gpu_blocks": 400},
        "deployment": {"dispatch_timeout_ms": 5000.0}}));
    sc.workload.timeout_s = Some(2.0);
    let checked = SimOptions { check_invariants: true, ..SimOptions::default() };
    let r = run_with(&sc, &w, checked);
    let c = &r.requests;
    let mut timeouts = 0;
    for i in 0..c.request_id.len() {
        assert!(c.finish_ms[i] - c.arrival_ms[i] <= 2000.0 + 1e-6, "request {i}");
        if REASON_NAMES[c.reason[i] as usize] == "timeout" {
            timeouts += 1;
            assert!((c.finish_ms[i] - c.arrival_ms[i] - 2000.0).abs() < 1e-6);
        }
    }
    assert!(timeouts > 100, "{timeouts} timeouts");
    assert_eq!(r.summary["rejections"]["timeout"], timeouts);
    assert_eq!(run(&sc, &w).to_json(), r.to_json());
}

#[test]
fn timeout_s_must_be_positive() {
    for bad in [0.0, -1.0] {
        let mut sc = scenario(json!({}));
        sc.workload.timeout_s = Some(bad);
        let e = Simulation::new(sc, SimOptions::default()).err().unwrap();
        assert_eq!(e.path(), Some("workload.timeout_s"));
    }
}

// ---- determinism -----------------------------------------------------------------------

#[test]
fn runs_with_caching_sessions_and_timeouts_are_deterministic_in_any_slicing() {
    let mut w = shared_prefix(3, 8, 300, 100, 60, 15);
    let n = w.requests.len() as u32;
    session(n, 40, 3, 80, 40, 30, &mut w);
    w.requests.sort_by_key(|r| (r.arrival_ns, r.id));
    let mut sc = scenario(json!({"scheduler": {"num_gpu_blocks": 120}, "deployment": {"replicas": 2}}));
    sc.workload.timeout_s = Some(3.0);
    let whole = run(&sc, &w).to_json();
    assert_eq!(run(&sc, &w).to_json(), whole);
    let mut sim = Simulation::with_workload(sc.clone(), w.clone(), SimOptions::default()).unwrap();
    while !sim.run_events(1).unwrap() {
        sim_core::check::props::check_invariants(sim.engine()).unwrap();
    }
    assert_eq!(sim.finish().unwrap().to_json(), whole);
    let checked = SimOptions { check_invariants: true, ..SimOptions::default() };
    assert_eq!(run_with(&sc, &w, checked).to_json(), whole);
}
