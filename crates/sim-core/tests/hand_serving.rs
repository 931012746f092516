//! Hand-worked cases of the serving model around the scheduler: vLLM's async scheduling (a
//! request reaching a busy engine joins the step after the next one) and the front end
//! (client-side times = engine-side + ingest + the token's way back). A linear cost model
//! keeps every time computable by hand: a step costs 1 ms + 0.25 ms per prefill token +
//! 0.5 ms per decoding request.

use sim_core::{simulate, Format, SimOptions};

fn scenario(async_scheduling: bool, frontend: &str) -> String {
    format!(
        r#"{{
  "model": "llama-3-8b", "gpu": "h200",
  "scheduler": {{"policy": "vllm", "async_scheduling": {async_scheduling}}},
  "cost_model": {{"kind": "linear", "base_ms": 1.0, "per_prefill_token_ms": 0.25, "per_decode_seq_ms": 0.5}},
  {frontend}
  "workload": {{"requests": [
    {{"arrival_ms": 0, "prompt_tokens": 4, "output_tokens": 4}},
    {{"arrival_ms": 1, "prompt_tokens": 4, "output_tokens": 2}}
  ]}}
}}"#
    )
}

type Step = (f64, f64, Vec<(u32, u32)>);

fn steps(text: &str) -> (Vec<Step>, sim_core::SimResult) {
    let res = simulate(text, Format::Json, SimOptions { record_steps: true, ..SimOptions::default() }).unwrap();
    let s = res.steps.iter().map(|s| (s.start_ms, s.end_ms, s.scheduled.clone())).collect();
    (s, res)
}

#[test]
fn a_request_reaching_a_busy_engine_joins_the_step_after_next() {
    // Synchronous: R0's prefill [0, 2) (1 + 0.25·4); R1 arrived at 1 ms and joins the next
    // step with R0's decode: [2, 4.5) = 1 + 0.25·4 + 0.5.
    let (sync, _) = steps(&scenario(false, ""));
    assert_eq!(sync[0], (0.0, 2.0, vec![(0, 4)]));
    assert_eq!(sync[1], (2.0, 4.5, vec![(0, 1), (1, 4)]));
    // Async: step 2 was scheduled when step 1 started (R1 not there yet), so it holds only
    // R0's decode [2, 3.5); R1 joins step 3 [3.5, 6).
    let (asy, res) = steps(&scenario(true, ""));
    assert_eq!(asy[0], (0.0, 2.0, vec![(0, 4)]));
    assert_eq!(asy[1], (2.0, 3.5, vec![(0, 1)]));
    assert_eq!(asy[2], (3.5, 6.0, vec![(0, 1), (1, 4)]));
    assert_eq!(res.requests.first_token_ms, vec![2.0, 6.0]);
    // An idle engine schedules an arrival at once: R0 ran at 0 in both.
    // Without a front end (linear model) client-side times are the engine's.
    assert_eq!(res.requests.client_first_token_ms, res.requests.first_token_ms);
    assert_eq!(res.summary["latency_view"], "client");
}

#[test]
fn client_times_add_ingest_and_the_way_back() {
    // 2 ms per request + 250 µs per prompt token = 3 ms of ingest for 4 tokens; a token's
    // way back: 1 ms + 100 µs × (outputs in its step + 1) / 2.
    let fe = r#""frontend": {"request_ms": 2.0, "prompt_token_us": 250.0, "token_ms": 1.0, "batch_token_us": 100.0},"#;
    let (s, res) = steps(&scenario(false, fe));
    // Engine arrivals at 3 and 4 ms: R0's prefill [3, 5); R1 arrived (at the engine) at 4 ms
    // and joins the next step [5, 7.5).
    assert_eq!(s[0], (3.0, 5.0, vec![(0, 4)]));
    assert_eq!(s[1], (5.0, 7.5, vec![(0, 1), (1, 4)]));
    let r = &res.requests;
    assert_eq!(r.arrival_ms, vec![0.0, 1.0]);
    assert_eq!(r.engine_arrival_ms, vec![3.0, 4.0]);
    assert_eq!(r.first_token_ms, vec![5.0, 7.5]);
    // R0's first token came alone (1 + 0.1 ms), R1's with R0's decode (1 + 0.15 ms)
    assert_eq!(r.client_first_token_ms, vec![6.1, 8.65]);
    // client TTFT of R1: 8.65 − 1 = 7.65 ms; engine TTFT 7.5 − 4 = 3.5 ms
    let ttft = &res.summary["ttft_ms"];
    assert!((ttft["mean"].as_f64().unwrap() - (6.1 + 7.65) / 2.0).abs() < 1e-9, "{ttft}");
    let engine = &res.summary["engine_ttft_ms"];
    assert!((engine["mean"].as_f64().unwrap() - (2.0 + 3.5) / 2.0).abs() < 1e-9, "{engine}");
    for (c, e) in r.client_finish_ms.iter().zip(&r.finish_ms) {
        assert!(c - e >= 1.05 - 1e-9 && c - e <= 1.15 + 1e-9, "{c} {e}");
    }

    // The switch puts the engine's side in the headline.
    let fe_engine = r#""frontend": {"request_ms": 2.0, "prompt_token_us": 250.0, "token_ms": 1.0, "batch_token_us": 100.0, "report": "engine"},"#;
    let (_, res) = steps(&scenario(false, fe_engine));
    assert_eq!(res.summary["latency_view"], "engine");
    assert_eq!(res.summary["ttft_ms"], res.summary["engine_ttft_ms"]);
}

#[test]
fn production_defaults_and_bad_fields() {
    // The default cost model prices vLLM: async scheduling and vLLM's API server are on.
    let text = r#"{"model": "llama-3-8b", "gpu": "h100",
      "workload": {"requests": [{"arrival_ms": 0, "prompt_tokens": 600, "output_tokens": 8}]}}"#;
    let res = simulate(text, Format::Json, SimOptions::default()).unwrap();
    let r = &res.requests;
    // 3 ms + 600 × 1 µs of ingest; 2.5 ms + 60 µs of way back for a lone request
    assert!((r.engine_arrival_ms[0] - 3.6).abs() < 1e-9, "{}", r.engine_arrival_ms[0]);
    assert!((r.client_first_token_ms[0] - r.first_token_ms[0] - 2.56).abs() < 1e-9);
    for (field, value) in [("request_ms", "-1"), ("token_ms", "\"fast\""), ("report", "\"both\""), ("nonsense", "1")] {
        let bad = format!(
            r#"{{"model": "llama-3-8b", "gpu": "h100", "frontend": {{"{field}": {value}}},
              "workload": {{"requests": [{{"arrival_ms": 0, "prompt_tokens": 6, "output_tokens": 2}}]}}}}"#
        );
        let e = simulate(&bad, Format::Json, SimOptions::default()).unwrap_err();
        assert_eq!(e.path(), Some(format!("frontend.{field}").as_str()), "{e}");
    }
}

#[test]
fn a_session_turn_is_sent_after_the_client_received_the_answer() {
    // Turn 0 (4 tokens, 1 output): ingest 2 + 0.25·4 = 3 ms, prefill [3, 5), its token
    // reaches the client 1 + 0.1·(1 + 1)/2 = 1.1 ms later, at 6.1. The client thinks 10 ms
    // and sends turn 1 (8 tokens) at 16.1; its ingest (2 + 0.25·8 = 4 ms) brings it to the
    // engine at 20.1, and a client timeout counts from 16.1.
    let text = r#"{
  "model": "llama-3-8b", "gpu": "h200",
  "scheduler": {"policy": "vllm", "async_scheduling": false},
  "cost_model": {"kind": "linear", "base_ms": 1.0, "per_prefill_token_ms": 0.25, "per_decode_seq_ms": 0.5},
  "frontend": {"request_ms": 2.0, "prompt_token_us": 250.0, "token_ms": 1.0, "batch_token_us": 100.0},
  "workload": {"timeout_s": 0.006, "requests": [
    {"arrival_ms": 0, "prompt_tokens": 4, "output_tokens": 1, "session_id": "s", "turn": 0},
    {"arrival_ms": 0, "prompt_tokens": 8, "output_tokens": 1, "session_id": "s", "turn": 1, "think_ms": 10}
  ]}
}"#;
    let (s, res) = steps(text);
    let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
    assert!(close(s[0].0, 3.0) && close(s[0].1, 5.0), "{s:?}");
    let r = &res.requests;
    assert!(close(r.client_finish_ms[0], 6.1), "{:?}", r.client_finish_ms);
    assert!(close(r.arrival_ms[1], 16.1), "{:?}", r.arrival_ms);
    assert!(close(r.engine_arrival_ms[1], 20.1), "{:?}", r.engine_arrival_ms);
    // Turn 1's prefill would run [20.1, 23.1): its client gives up at 16.1 + 6 = 22.1,
    // mid-step (a deadline from the engine's arrival, 26.1, would have let it finish).
    assert_eq!((res.summary["finished"].as_u64(), res.summary["rejections"]["timeout"].as_u64()), (Some(1), Some(1)));
    assert!(close(r.finish_ms[1], 22.1), "{:?}", r.finish_ms);
}
