//! Tests of token identity, sessions, shared prefixes and load stages.
use super::*;

const MML: u32 = 1_000_000;

fn parse(json: &str) -> WorkloadSpec {
    serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {json}"))
}

fn gen(json: &str) -> Workload {
    parse(json).generate_workload(7, MML).unwrap_or_else(|e| panic!("{e}: {json}"))
}

fn err(json: &str) -> SimError {
    let w: WorkloadSpec = match serde_json::from_str(json) {
        Ok(w) => w,
        Err(e) => return SimError::config("<serde>", e),
    };
    let e = w.generate_workload(7, MML).expect_err("should fail");
    assert_eq!(e.kind_name(), "ConfigError", "{e}");
    e
}

fn path(json: &str) -> String {
    err(json).path().unwrap_or_default().to_string()
}

/// The segments of request `id`'s prompt.
fn segs(w: &Workload, id: u32) -> Vec<Segment> {
    let r = w.requests.iter().find(|r| r.id == id).expect("id");
    w.segments[r.segs.0 as usize..(r.segs.0 + r.segs.1) as usize].to_vec()
}

fn req(w: &Workload, id: u32) -> RequestSpec {
    *w.requests.iter().find(|r| r.id == id).expect("id")
}

#[test]
fn prefix_groups_share_their_first_tokens_only() {
    let w = gen(r#"{"requests": [
        {"arrival_ms": 0, "prompt_tokens": 100, "output_tokens": 1, "prefix_group": "sys", "prefix_length": 40},
        {"arrival_ms": 1, "prompt_tokens": 60, "output_tokens": 1, "prefix_group": "sys", "prefix_length": 40},
        {"arrival_ms": 2, "prompt_tokens": 60, "output_tokens": 1, "prefix_group": 3, "prefix_length": 40},
        {"arrival_ms": 3, "prompt_tokens": 60, "output_tokens": 1, "prefix_group": "3", "prefix_length": 40},
        {"arrival_ms": 4, "prompt_tokens": 60, "output_tokens": 1}
    ]}"#);
    assert_eq!(segs(&w, 0), segs(&w, 1));
    assert_eq!(segs(&w, 0)[0].len, 40);
    assert_ne!(segs(&w, 0), segs(&w, 2));
    assert_eq!(segs(&w, 2), segs(&w, 3), "3 and \"3\" name one group");
    assert!(segs(&w, 4).is_empty());
    // Sources never collide: the group "1" and the hash id 1 are different content.
    let mixed = gen(r#"{"requests": [
        {"arrival_ms": 0, "prompt_tokens": 512, "output_tokens": 1, "prefix_group": "1", "prefix_length": 512},
        {"arrival_ms": 0, "prompt_tokens": 512, "output_tokens": 1, "hash_ids": [1]}]}"#);
    assert_ne!(segs(&mixed, 0)[0].key, segs(&mixed, 1)[0].key);
}

#[test]
fn explicit_identity_errors_name_the_field() {
    let cases = [
        (r#"{"arrival_ms": 0, "prompt_tokens": 10, "output_tokens": 1, "prefix_group": "g", "prefix_length": 11}"#, "requests[0].prefix_length"),
        (r#"{"arrival_ms": 0, "prompt_tokens": 10, "output_tokens": 1, "prefix_length": 5}"#, "requests[0].prefix_group"),
        (r#"{"arrival_ms": 0, "prompt_tokens": 10, "output_tokens": 1, "prefix_group": "g"}"#, "requests[0].prefix_length"),
        (r#"{"arrival_ms": 0, "prompt_tokens": 10, "output_tokens": 1, "prefix_group": "g", "prefix_length": 5, "hash_ids": [1]}"#, "requests[0].hash_ids"),
        (r#"{"arrival_ms": 0, "prompt_tokens": 600, "output_tokens": 1, "hash_ids": [1]}"#, "requests[0].hash_ids"),
        (r#"{"arrival_ms": 0, "prompt_tokens": 10, "output_tokens": 1, "hash_ids": [1], "session_id": "s"}"#, "requests[0].hash_ids"),
        (r#"{"arrival_ms": 0, "prompt_tokens": 10, "output_tokens": 1, "turn": 1}"#, "requests[0].turn"),
        (r#"{"arrival_ms": 0, "prompt_tokens": 10, "output_tokens": 1, "think_ms": 1}"#, "requests[0].think_ms"),
        (r#"{"prompt_tokens": 10, "output_tokens": 1, "session_id": "s"}"#, "requests[0].arrival_ms"),
        (r#"{"arrival_ms": 0, "prompt_tokens": 10, "output_tokens": 1, "session_id": "s", "think_ms": -1}"#, "requests[0].think_ms"),
    ];
    for (r, want) in cases {
        assert_eq!(path(&format!(r#"{{"requests": [{r}]}}"#)), want, "{r}");
    }
    assert!(err(r#"{"requests": [{"arrival_ms": 0, "prompt_tokens": 600, "output_tokens": 1, "hash_ids": [1]}]}"#)
        .to_string()
        .contains("1 ids for a prompt of 600 tokens; with hash_block_tokens = 512 it spans 2 blocks"));
    let e = err(r#"{"requests": [{"arrival_ms": 0, "prompt_tokens": 1, "output_tokens": 1, "hash_ids": [1, "x"]}]}"#);
    assert_eq!(e.path(), Some("<serde>"));
    assert!(e.to_string().contains("invalid type"), "{e}");
    assert_eq!(path(r#"{"hash_block_tokens": 0, "requests": [{"arrival_ms": 0, "prompt_tokens": 1, "output_tokens": 1}]}"#), "hash_block_tokens");
    // With 256-token blocks the same prompt needs three ids.
    gen(r#"{"hash_block_tokens": 256, "requests": [{"arrival_ms": 0, "prompt_tokens": 600, "output_tokens": 1, "hash_ids": [1, 2, 3]}]}"#);
}

#[test]
fn explicit_sessions_chain_their_turns() {
    let w = gen(r#"{"requests": [
        {"arrival_ms": 0, "prompt_tokens": 100, "output_tokens": 20, "session_id": 7, "turn": 0, "prefix_group": "sys", "prefix_length": 30},
        {"prompt_tokens": 150, "output_tokens": 10, "session_id": 7, "turn": 1, "think_ms": 2000},
        {"arrival_ms": 5, "prompt_tokens": 160, "output_tokens": 5, "session_id": "7", "turn": 2}
    ]}"#);
    assert_eq!(segs(&w, 0).iter().map(|s| s.len).collect::<Vec<_>>(), [30, 70]);
    assert_eq!(segs(&w, 1).iter().map(|s| s.len).collect::<Vec<_>>(), [30, 70, 20, 30]);
    assert_eq!(segs(&w, 2).iter().map(|s| s.len).collect::<Vec<_>>(), [30, 70, 20, 30, 10]);
    assert_eq!(segs(&w, 1)[2].key, output_key(0));
    assert_eq!(req(&w, 1).after, Some(After { parent: 0, think_ns: 2_000_000_000 }));
    assert_eq!(req(&w, 1).arrival_ns, 0, "a later turn without arrival_ms waits only for the previous one");
    assert_eq!(req(&w, 2).after, Some(After { parent: 1, think_ns: 0 }));
    assert_eq!(req(&w, 2).arrival_ns, 5_000_000);

    let turns = |a: &str, b: &str| format!(r#"{{"requests": [{{"arrival_ms": 0, "prompt_tokens": 100, "output_tokens": 20, "session_id": "s"{a}}}, {{"arrival_ms": 1, "prompt_tokens": 110, "output_tokens": 1, "session_id": "s"{b}}}]}}"#);
    assert!(err(&turns("", "")).to_string().contains("requests[1].prompt_tokens: 110 is shorter than session 's' so far"));
    assert_eq!(path(&turns(r#", "turn": 1"#, r#", "turn": 1"#)), "requests[1].turn");
    assert_eq!(path(&turns(r#", "turn": 1"#, "")), "requests[1].turn");
    // Listed out of order, turns still chain by number.
    let w = gen(r#"{"requests": [
        {"arrival_ms": 5, "prompt_tokens": 150, "output_tokens": 1, "session_id": "s", "turn": 1},
        {"arrival_ms": 0, "prompt_tokens": 100, "output_tokens": 20, "session_id": "s", "turn": 0}]}"#);
    assert_eq!(req(&w, 0).after, Some(After { parent: 1, think_ns: 0 }));
    assert!(req(&w, 1).after.is_none());
}

#[test]
fn generated_session_turn_lengths_add_up() {
    let w = gen(r#"{
        "arrival": {"kind": "poisson", "rate": 2},
        "sessions": {"count": 50, "turns": {"kind": "uniform", "min": 1, "max": 6},
                     "question": {"kind": "uniform", "min": 10, "max": 300},
                     "output": {"kind": "uniform", "min": 5, "max": 200},
                     "think_s": {"kind": "exponential", "mean": 3}}
    }"#);
    let mut by_id: Vec<RequestSpec> = w.requests.clone();
    by_id.sort_by_key(|r| r.id);
    let (mut sessions, mut checked) = (0, 0);
    let mut history = 0u64; // Σ earlier turns' prompt-new + output tokens
    for r in &by_id {
        let s = segs(&w, r.id);
        match r.after {
            None => {
                sessions += 1;
                history = 0;
                assert_eq!(s.len(), 1);
            }
            Some(a) => {
                let parent = by_id[a.parent as usize];
                assert_eq!(a.parent, r.id - 1, "turns follow each other");
                assert_eq!(r.arrival_ns, parent.arrival_ns, "later turns carry the session start");
                assert_eq!(segs(&w, parent.id)[..], s[..s.len() - 2], "the previous prompt is repeated");
                assert_eq!(s[s.len() - 2], Segment { key: output_key(parent.id), len: parent.output_tokens });
                history += u64::from(parent.output_tokens);
                checked += 1;
            }
        }
        let question = s.last().unwrap().len;
        assert_eq!(u64::from(r.prompt_tokens), history + u64::from(question), "turn prompt = earlier turns + question");
        history += u64::from(question);
    }
    assert_eq!(sessions, 50);
    assert!(checked > 50, "{checked}");
    assert!(by_id.iter().any(|r| r.after.is_some_and(|a| a.think_ns > 0)));

    // A turn that cannot fit ends the session (it is still sent, and rejected).
    let spec = parse(r#"{"arrival": {"kind": "constant", "rate": 1},
        "sessions": {"count": 1, "turns": 10, "question": 100, "output": 100}}"#);
    let w = spec.generate_workload(1, 450).unwrap();
    assert_eq!(w.requests.iter().map(|r| r.prompt_tokens).collect::<Vec<_>>(), [100, 300, 500]);
}

#[test]
fn session_and_stage_rules() {
    let s = |sessions: &str, extra: &str| {
        format!(r#"{{"arrival": {{"kind": "poisson", "rate": 1}}, "sessions": {{{sessions}}}{extra}}}"#)
    };
    let full = r#""count": 3, "turns": 2, "question": 10, "output": 5"#;
    gen(&s(full, ""));
    assert_eq!(path(&s(r#""count": 3, "turns": 0, "question": 10, "output": 5"#, "")), "sessions.turns");
    assert_eq!(path(&s(r#""count": 3, "turns": {"kind": "fixed", "value": 0}, "question": 10, "output": 5"#, "")), "sessions.turns.value");
    assert_eq!(path(&s(r#""count": 3, "question": 10, "output": 5"#, "")), "sessions.turns");
    assert_eq!(path(&s(r#""turns": 2, "question": 10, "output": 5"#, "")), "sessions.count");
    assert_eq!(path(&s(full, r#", "num_requests": 4"#)), "num_requests");
    assert_eq!(path(&s(full, r#", "prompt": {"kind": "fixed", "value": 3}"#)), "prompt");
    assert_eq!(path(&s(r#""count": 3, "turns": 2, "question": 10, "output": 5, "think_s": -1"#, "")), "sessions.think_s");
    assert_eq!(path(&s(r#""count": 3, "turns": 2, "question": 10, "output": 5, "think_s": {"kind": "exp"}"#, "")), "sessions.think_s.kind");
    let e = err(&s(r#""count": 3, "turns": "two", "question": 10, "output": 5"#, ""));
    assert!(e.to_string().contains("a token count or a distribution table"), "{e}");
    // Sessions bounded by duration: starts stop at the end.
    let w = gen(r#"{"arrival": {"kind": "constant", "rate": 2}, "duration_s": 3, "sessions": {"turns": 2, "question": 10, "output": 5}}"#);
    assert_eq!(w.requests.len(), 12);

    let staged = |stages: &str, extra: &str, top: &str| {
        format!(r#"{{"arrival": {{"kind": "constant", "stages": [{stages}]{extra}}}, "prompt": {{"kind": "fixed", "value": 3}}, "output": {{"kind": "fixed", "value": 3}}{top}}}"#)
    };
    let stage = |stages: &str, extra: &str| staged(stages, extra, "");
    assert_eq!(path(&stage(r#"{"rate": 0, "duration_s": 1}"#, "")), "arrival.stages[0].rate");
    assert_eq!(path(&stage(r#"{"rate": 1, "duration_s": 1}, {"rate": 1, "duration_s": -2}"#, "")), "arrival.stages[1].duration_s");
    assert_eq!(path(&stage(r#"{"rate": 1}"#, "")), "arrival.stages[0].duration_s");
    assert_eq!(path(&stage("", "")), "arrival.stages");
    assert_eq!(path(&stage(r#"{"rate": 1, "duration_s": 1}"#, r#", "rate": 2"#)), "arrival.rate");
    assert_eq!(path(&staged(r#"{"rate": 1, "duration_s": 1}"#, "", r#", "num_requests": 3"#)), "num_requests");
    assert_eq!(path(&staged(r#"{"rate": 1, "duration_s": 1}"#, "", r#", "duration_s": 3"#)), "duration_s");
    assert_eq!(path(&stage(r#"{"rate": 1, "duration_s": 1}"#, r#", "max_gap_s": 1"#).replace("constant", "poisson_count")), "arrival.max_gap_s");
}

#[test]
fn stages_change_the_rate_over_time() {
    let times = |kind: &str| -> Vec<f64> {
        gen(&format!(
            r#"{{"arrival": {{"kind": "{kind}", "stages": [{{"rate": 2, "duration_s": 3}}, {{"rate": 4, "duration_s": 1}}]}},
                "prompt": {{"kind": "fixed", "value": 3}}, "output": {{"kind": "fixed", "value": 3}}}}"#
        ))
        .requests
        .iter()
        .map(|r| r.arrival_ns as f64 / 1e9)
        .collect()
    };
    assert_eq!(times("constant"), [0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.25, 3.5, 3.75]);
    let pc = times("poisson_count");
    assert_eq!(pc.len(), 10, "exactly rate × duration per stage");
    assert!(pc[..6].iter().all(|t| *t > 0.0 && *t <= 3.0) && (pc[5] - 3.0).abs() < 1e-9, "{pc:?}");
    assert!(pc[6..].iter().all(|t| *t > 3.0 && *t <= 4.0) && (pc[9] - 4.0).abs() < 1e-9, "{pc:?}");
    // Poisson and gamma: the mean rate of each stage.
    for kind in ["poisson", "gamma\", \"cv\": \"2"] {
        let spec = format!(
            r#"{{"arrival": {{"kind": "{kind}", "stages": [{{"rate": 20, "duration_s": 500}}, {{"rate": 100, "duration_s": 500}}]}},
                "prompt": {{"kind": "fixed", "value": 3}}, "output": {{"kind": "fixed", "value": 3}}}}"#
        )
        .replace("\"cv\": \"2\"", "\"cv\": 2");
        let t: Vec<f64> = gen(&spec).requests.iter().map(|r| r.arrival_ns as f64 / 1e9).collect();
        let first = t.iter().filter(|x| **x < 500.0).count() as f64;
        let second = t.iter().filter(|x| **x >= 500.0).count() as f64;
        assert!((first / 10_000.0 - 1.0).abs() < 0.1, "{kind}: {first}");
        assert!((second / 50_000.0 - 1.0).abs() < 0.05, "{kind}: {second}");
        assert!(t.iter().all(|x| *x < 1000.0));
    }
}

/// The sixteen real vLLM runs' workload (../shared/data/real-vllm-h100/*/results/config.yaml):
/// 10 × 10 prompts, 100-token system prompts, constant load in two stages.
const REAL_RUN: &str = r#"{
    "arrival": {"kind": "poisson_count", "stages": [{"rate": 5, "duration_s": 600}, {"rate": 10, "duration_s": 600}]},
    "shared_prefix": {"groups": 10, "users_per_group": 10, "prefix_tokens": 100, "question": 466, "output": 247}
}"#;

#[test]
fn shared_prefix_cycles_through_shuffled_prompts() {
    let w = gen(REAL_RUN);
    assert_eq!(w.requests.len(), 9000);
    assert!(w.requests.iter().all(|r| r.prompt_tokens == 566 && r.output_tokens == 247 && r.after.is_none()));
    assert_eq!(w.segments.len(), 200, "each prompt's two segments once");
    let prompt = |id: u32| req(&w, id).segs;
    // The n-th request of a stage sends prompt n mod 100; the index restarts per stage.
    assert_eq!(prompt(0), prompt(100));
    assert_eq!(prompt(0), prompt(3000), "stage 2 starts again at the first prompt");
    assert_eq!(prompt(1), prompt(3001));
    let distinct: std::collections::BTreeSet<_> = (0..100).map(prompt).collect();
    assert_eq!(distinct.len(), 100);
    // Ten groups of ten share the system prompt, never the question.
    let systems: std::collections::BTreeMap<u64, usize> = w.segments.chunks(2).fold(Default::default(), |mut m, s| {
        *m.entry(s[0].key).or_default() += 1;
        m
    });
    assert_eq!(systems.len(), 10);
    assert!(systems.values().all(|n| *n == 10));
    let questions: std::collections::BTreeSet<u64> = w.segments.chunks(2).map(|s| s[1].key).collect();
    assert_eq!(questions.len(), 100);
    // Shuffled: the first ten requests are not one group's.
    let first_groups: std::collections::BTreeSet<u64> = (0..10).map(|id| segs(&w, id)[0].key).collect();
    assert!(first_groups.len() > 1);
    // Lengths as distributions: one system length per group.
    let w = gen(r#"{"arrival": {"kind": "constant", "rate": 10}, "num_requests": 40,
        "shared_prefix": {"groups": 4, "users_per_group": 10, "prefix_tokens": {"kind": "uniform", "min": 50, "max": 150},
                          "question": {"kind": "normal", "mean": 100, "std": 20, "min": 1}, "output": 10}}"#);
    for r in &w.requests {
        let s = segs(&w, r.id);
        assert_eq!(r.prompt_tokens, s[0].len + s[1].len);
    }
}

#[test]
fn shared_prefix_multi_turn_grows_each_users_context() {
    let w = gen(r#"{"arrival": {"kind": "constant", "rate": 4}, "num_requests": 12,
        "shared_prefix": {"groups": 2, "users_per_group": 2, "prefix_tokens": 100, "question": 50, "output": 20, "multi_turn": true}}"#);
    // Four users, three rounds each: 2P + Q, then + O + P + Q per round (the session's
    // context starts as the system prompt, and every round resends the whole prompt).
    for id in 0..12u32 {
        let r = req(&w, id);
        let round = id / 4;
        assert_eq!(r.prompt_tokens, 250 + round * 170, "request {id}");
        assert_eq!(r.after.map(|a| a.parent), round.checked_sub(1).map(|_| id - 4));
        assert_eq!(r.arrival_ns, u64::from(id) * 250_000_000, "sent no earlier than its slot");
        let s = segs(&w, id);
        assert_eq!(s.iter().map(|x| u64::from(x.len)).sum::<u64>(), u64::from(r.prompt_tokens));
        if round > 0 {
            assert_eq!(s[..s.len() - 3], segs(&w, id - 4)[..], "repeats the previous prompt");
            assert_eq!(s[s.len() - 3], Segment { key: output_key(id - 4), len: 20 });
        }
    }
    // When a round cannot fit max_model_len the server rejects it and the context stays:
    // the next rounds send the same prompt again.
    let spec = parse(r#"{"arrival": {"kind": "constant", "rate": 4}, "num_requests": 16,
        "shared_prefix": {"groups": 1, "users_per_group": 1, "prefix_tokens": 100, "question": 50, "output": 20, "multi_turn": true}}"#);
    let w = spec.generate_workload(1, 500).unwrap();
    let lens: Vec<u32> = w.requests.iter().map(|r| r.prompt_tokens).collect();
    assert_eq!(lens[..4], [250, 420, 590, 590]);
    assert_eq!(w.requests[3].segs, w.requests[2].segs);
    assert_eq!(w.requests[2].after.map(|a| a.parent), Some(1), "the first rejected round waits for its answer");
    assert!(w.requests[3..].iter().all(|r| r.after.is_none()), "the rest are sent at their slots and rejected");
}

#[test]
fn shared_prefix_rules() {
    let sp = |fields: &str, extra: &str| {
        format!(r#"{{"arrival": {{"kind": "poisson", "rate": 1}}, "num_requests": 5, "shared_prefix": {{{fields}}}{extra}}}"#)
    };
    let full = r#""groups": 2, "users_per_group": 3, "prefix_tokens": 10, "question": 5, "output": 5"#;
    gen(&sp(full, ""));
    assert_eq!(path(&sp(r#""users_per_group": 3, "prefix_tokens": 10, "question": 5, "output": 5"#, "")), "shared_prefix.groups");
    assert_eq!(path(&sp(r#""groups": 0, "users_per_group": 3, "prefix_tokens": 10, "question": 5, "output": 5"#, "")), "shared_prefix.groups");
    assert_eq!(path(&sp(r#""groups": 2, "users_per_group": 3, "prefix_tokens": 0, "question": 5, "output": 5"#, "")), "shared_prefix.prefix_tokens");
    assert_eq!(path(&sp(full, r#", "output": {"kind": "fixed", "value": 3}"#)), "output");
    assert_eq!(path(&sp(full, r#", "sessions": {"count": 1}"#)), "sessions");
    assert_eq!(path(&sp(r#""groups": 2, "users_per_group": 3, "prefix_tokens": 10, "question": 5, "output": 5, "users": 3"#, "")), "<serde>");
    // The other forms refuse the generated fields and the other way round.
    assert_eq!(path(r#"{"trace": {"format": "azure", "text": "x"}, "arrival": {"kind": "poisson", "rate": 1}}"#), "arrival");
    assert_eq!(path(r#"{"arrival": {"kind": "poisson", "rate": 1}, "num_requests": 1, "prompt": {"kind": "fixed", "value": 1}, "output": {"kind": "fixed", "value": 1}, "hash_block_tokens": 16}"#), "hash_block_tokens");
}

#[test]
fn trace_form_is_generated_through_the_loader() {
    let w = gen(r#"{"trace": {"format": "csv", "text": "arrival_ms,prompt_tokens,output_tokens\n0,5,1\n10,6,2\n", "rate_scale": 2}}"#);
    assert_eq!(w.requests.iter().map(|r| (r.arrival_ns, r.prompt_tokens)).collect::<Vec<_>>(), [(0, 5), (5_000_000, 6)]);
    assert_eq!(path(r#"{"trace": {"format": "csv", "path": "t.csv"}}"#), "trace.path");
    // validate() does not need the file for a path-form trace; it checks the options.
    parse(r#"{"trace": {"format": "csv", "path": "t.csv"}}"#).validate(MML).unwrap();
    assert_eq!(
        parse(r#"{"trace": {"format": "cvs", "path": "t.csv"}}"#).validate(MML).unwrap_err().path(),
        Some("trace.format")
    );
    // A loaded trace is used only for the options it was read with.
    let spec = parse(r#"{"trace": {"format": "csv", "path": "t.csv"}}"#);
    let loaded = TraceSpec::inline("csv", "arrival_ms,prompt_tokens,output_tokens\n0,5,1\n").load_inline().unwrap();
    assert_eq!(spec.generate_with(1, MML, Some(loaded.clone())).unwrap().requests.len(), 1);
    let other = parse(r#"{"trace": {"format": "csv", "path": "t.csv", "rate_scale": 3}}"#);
    assert_eq!(other.generate_with(1, MML, Some(loaded)).unwrap_err().path(), Some("trace"));
}
