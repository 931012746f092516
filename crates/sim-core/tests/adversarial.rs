//! Adversarial traffic (seed §4.4): attackers mixed into a workload, o1pro's admission
//! control of deep templates, metrics per class, and bad input named by field.

use serde_json::{json, Value};
use sim_core::{simulate, Format, SimOptions, SimResult};

/// Llama-3-8B on one H100, 200 normal requests at 8 req/s, plus `adversarial`.
fn run(policy: &str, adversarial: Option<Value>) -> Result<SimResult, sim_core::SimError> {
    let mut v = json!({
        "seed": 11, "model": "llama-3-8b", "gpu": "h100",
        "scheduler": {"policy": policy},
        "workload": {"num_requests": 200, "arrival": {"kind": "poisson", "rate": 8.0},
                     "prompt": {"kind": "lognormal", "mean": 600, "sigma": 0.6, "max": 4000},
                     "output": {"kind": "uniform", "min": 16, "max": 200}}
    });
    if let Some(a) = adversarial {
        v["workload"]["adversarial"] = a;
    }
    simulate(&v.to_string(), Format::Json, SimOptions::default())
}

fn class<'a>(r: &'a SimResult, name: &str) -> &'a Value {
    &r.summary["classes"][name]
}

#[test]
fn attackers_are_added_as_their_share_and_reported_as_a_class() {
    let plain = run("vllm", None).unwrap();
    assert!(plain.summary.get("classes").is_none());
    assert!(!plain.to_json().contains("\"adversarial\""));
    let r = run("vllm", Some(json!({"share": 0.2, "kind": "flood", "start_s": 5.0, "duration_s": 2.0}))).unwrap();
    // 0.2 of all requests: 200 normal + 50 attackers.
    assert_eq!(r.summary["num_requests"], 250);
    assert_eq!(class(&r, "normal")["num_requests"], 200);
    assert_eq!(class(&r, "adversarial")["num_requests"], 50);
    let req = &r.requests;
    let attackers: Vec<usize> = (0..req.request_id.len()).filter(|&i| req.adversarial[i]).collect();
    assert_eq!(attackers.len(), 50);
    assert!(attackers.iter().all(|&i| req.request_id[i] >= 200 && (5_000.0..=7_000.0).contains(&req.arrival_ms[i])));
    // The normal requests are the plain run's, by id and arrival.
    assert_eq!(&req.arrival_ms[..200], &plain.requests.arrival_ms[..]);
}

#[test]
fn o1pro_rejects_deep_templates_at_arrival_and_vllm_serves_them() {
    let deep = json!({"share": 0.25, "kind": "deep_template"});
    let o1 = run("o1pro", Some(deep.clone())).unwrap();
    let adv = class(&o1, "adversarial");
    assert!(adv["num_requests"].as_u64().unwrap() > 0);
    assert_eq!(adv["rejected"], adv["num_requests"]);
    assert_eq!(adv["rejections"]["template depth"], adv["num_requests"]);
    assert_eq!(class(&o1, "normal")["rejections"]["template depth"], 0);
    let v = run("vllm", Some(deep)).unwrap();
    assert_eq!(class(&v, "adversarial")["rejected"], 0);
    // A depth of 8 passes o1pro's check; 9 does not.
    let explicit = |depth: i64| {
        let text = json!({"model": "llama-3-8b", "gpu": "h100", "scheduler": {"policy": "o1pro"},
            "workload": {"requests": [{"arrival_ms": 0, "prompt_tokens": 100, "output_tokens": 10, "template_depth": depth}]}});
        simulate(&text.to_string(), Format::Json, SimOptions::default()).unwrap()
    };
    assert_eq!(explicit(8).summary["finished"], 1);
    assert_eq!(explicit(9).summary["rejections"]["template depth"], 1);
}

#[test]
fn bad_adversarial_input_names_the_field() {
    let path = |a: Value| run("o1pro", Some(a)).unwrap_err().path().map(str::to_string);
    for share in [-0.1, 1.0, 1.5] {
        assert_eq!(path(json!({"share": share, "kind": "flood"})), Some("workload.adversarial.share".into()), "{share}");
    }
    assert_eq!(path(json!({"kind": "flood"})), Some("workload.adversarial.share".into()));
    assert_eq!(path(json!({"share": 0.1, "kind": "dos"})), Some("workload.adversarial.kind".into()));
    for depth in [-1, 70_000, i64::MAX] {
        assert_eq!(path(json!({"share": 0.1, "kind": "deep_template", "template_depth": depth})),
                   Some("workload.adversarial.template_depth".into()), "{depth}");
    }
    assert_eq!(path(json!({"share": 0.1, "kind": "flood", "template_depth": 12})), Some("workload.adversarial.template_depth".into()));
    assert_eq!(path(json!({"share": 0.1, "kind": "long_prompt", "prompt_tokens": 9000})), Some("workload.adversarial.prompt_tokens".into()));
    assert_eq!(path(json!({"share": 0.1, "kind": "flood", "duration_s": 0})), Some("workload.adversarial.duration_s".into()));
    assert_eq!(path(json!({"share": 0.1, "kind": "flood", "colour": 1})), Some("workload.adversarial.colour".into()));
    let explicit = |depth: Value| {
        let text = json!({"model": "llama-3-8b", "gpu": "h100",
            "workload": {"requests": [{"arrival_ms": 0, "prompt_tokens": 100, "output_tokens": 10},
                                      {"arrival_ms": 1, "prompt_tokens": 100, "output_tokens": 10, "template_depth": depth}]}});
        simulate(&text.to_string(), Format::Json, SimOptions::default()).unwrap_err()
    };
    for d in [json!(-3), json!(1_000_000), json!(2.5), json!("deep")] {
        assert_eq!(explicit(d.clone()).path(), Some("workload.requests[1].template_depth"), "{d}");
    }
}
