//! The one registry of what a scenario may name: scheduling policies (with each one's label,
//! chart colour and summary), routers, arrival kinds, length-distribution kinds, event
//! kinds, GPUs, models and topology presets. Each list is the one its parser accepts (the
//! policy and router enums of [`crate::policy`], [`crate::workload::ARRIVAL_KINDS`],
//! [`crate::workload::LENGTH_KINDS`], [`crate::topo::events::EVENT_KINDS`], the GPU and
//! model presets of [`crate::catalog`], [`crate::topo::presets::PRESET_NAMES`]); this module
//! only gathers them. Every front end reads its options from here: Python's
//! `o1sim.presets()` (and `o1sim.registry` over it), the CLI, the dashboard, and the page
//! through the WASM module's `presets()`.

use serde_json::{json, Value};

use crate::policy::{Policy, Router};

/// Every scheduling policy's record ([`crate::policy::PolicyInfo`]), in display order.
pub fn policy_info() -> Vec<crate::policy::PolicyInfo> {
    Policy::ALL.iter().map(|p| p.info()).collect()
}

/// The registry as JSON:
/// - `policies`: the co-located policies' names (no topology needed), display order;
/// - `topology_policies`: the names of those that need a topology;
/// - `policy_info`: every policy, `{name, label, color, summary, needs_topology,
///   disaggregated, vllm_scheduler, prefix_cache}`, display order;
/// - `routers`, `arrival_kinds`, `length_kinds`, `scheduling_policies`: names;
/// - `event_kinds`: `{name, label, target}` (`target`: `link` or `gpu`);
/// - `gpus`, `models`: the presets' records; `topologies`: the topology presets' names;
/// - `chart_style`: the charts' conventions besides the policies' colours ([`chart_style`]);
/// - `engines`: the cost model's engines, `{name, label, summary}`;
/// - `summary_metrics`: every metric of the run summary, display order, `{key, label, unit,
///   format, decimals, scale, lower_is_better, shown_in, stats, prometheus, doc}`
///   ([`crate::metric_info`]).
pub fn presets() -> Value {
    let topology_policies: Vec<&str> =
        Policy::ALL.iter().filter(|p| p.info().needs_topology).map(|p| p.name()).collect();
    json!({
        "gpus": crate::catalog::gpu_presets(),
        "models": crate::catalog::model_catalog_json(),
        "policies": Policy::colocated_names(),
        "topology_policies": topology_policies,
        "policy_info": policy_info(),
        "routers": Router::names(),
        "scheduling_policies": crate::config::SCHEDULING_POLICIES,
        "arrival_kinds": crate::workload::ARRIVAL_KINDS,
        "length_kinds": crate::workload::LENGTH_KINDS,
        "event_kinds": crate::topo::events::EVENT_KINDS,
        "topologies": crate::topo::presets::PRESET_NAMES,
        "chart_style": chart_style(),
        "summary_metrics": crate::metric_info::SUMMARY_METRICS,
        "speculative_methods": spec_methods(),
        "engines": engines(),
        "lora_popularities": ["zipf", "uniform"],
    })
}

/// The engines `cost_model.engine` prices ([`crate::perf::ENGINE_INFO`]), each `{name,
/// label, summary}`, in the order the parser lists them.
fn engines() -> Value {
    Value::Array(
        crate::perf::ENGINE_INFO.iter().map(|(name, label, summary)| json!({"name": name, "label": label, "summary": summary})).collect(),
    )
}

/// The speculative-decoding methods (`scheduler.speculative.method`), each `{name,
/// needs_acceptance, needs_draft_model}`: whether the scenario must give `acceptance_rate`
/// (only MTP has a published default) and a `draft_model`.
fn spec_methods() -> Value {
    use crate::config::SpecMethod;
    Value::Array(
        SpecMethod::ALL
            .iter()
            .map(|m| {
                json!({"name": m.name(), "needs_acceptance": *m != SpecMethod::Mtp,
                       "needs_draft_model": *m == SpecMethod::DraftModel})
            })
            .collect(),
    )
}

/// The charts' one language, for the dashboard, the report and the page alike (policies take
/// their colour from [`crate::policy::PolicyInfo`]):
/// - `cdf`: a latency CDF has the latency on a log x axis (an idle and a queued request are
///   orders of magnitude apart; a linear axis squeezes the body against zero) and the fraction
///   of requests, 0..1, on a linear y axis; `units`: TTFT and TPOT in ms, E2E in s;
/// - `otherColors`: names no policy has, in turn; `replicaPalette`: replicas 0, 1, … (Tableau
///   10's first eight);
/// - `heatRamp`: the GPU × time heatmap, idle → busy, interpolated in RGB;
/// - `stepKinds`: scheduler steps by kind.
pub fn chart_style() -> Value {
    json!({
        "cdf": {"x": "log", "y": "linear", "yTitle": "fraction of requests", "yRange": [0, 1],
                "units": {"TTFT": "ms", "TPOT": "ms", "E2E": "s"}},
        "otherColors": ["#555555", "#16a085", "#d35400", "#7f8c8d"],
        "replicaPalette": ["#4c78a8", "#f58518", "#54a24b", "#b279a2", "#e45756", "#72b7b2", "#9d755d", "#bab0ac"],
        "heatRamp": ["#fffaff", "#376ee1"],
        "stepKinds": {"decode": "#2f6fdf", "prefill": "#e0752d", "mixed": "#8e44ad"},
    })
}

#[cfg(test)]
mod tests {
    //! Every name the registry exports is accepted by the scenario parser, and a name the
    //! parser accepts is exported: each list is checked against the parser itself.

    use super::*;
    use crate::config::{parse_json, Scenario};

    const BASE: &str = r#"{"model": "llama-3-8b", "gpu": "h100",
        "workload": {"num_requests": 4, "arrival": {"kind": "poisson", "rate": 1},
                     "prompt": {"kind": "fixed", "value": 8}, "output": {"kind": "fixed", "value": 4}}}"#;

    fn with(path: &[&str], value: Value) -> String {
        let mut v: Value = serde_json::from_str(BASE).unwrap();
        let mut at = &mut v;
        for k in &path[..path.len() - 1] {
            at = &mut at[*k];
        }
        at[path[path.len() - 1]] = value;
        v.to_string()
    }

    /// Parse, validate and build as `o1sim validate` does: the first error's text.
    fn accepts(text: &str) -> Result<Scenario, String> {
        crate::validate(text, crate::config::Format::Json).map_err(|e| e.to_string())?;
        parse_json(text).map_err(|e| e.to_string())
    }

    fn names(v: &Value) -> Vec<String> {
        v.as_array().unwrap().iter().map(|x| x.as_str().or(x["name"].as_str()).unwrap().to_string()).collect()
    }

    /// Near misses of a valid name: each must be refused.
    fn near_misses(name: &str) -> Vec<String> {
        vec![format!("{name}x"), name[1..].to_string(), name.to_uppercase(), format!(" {name}"), String::new()]
    }

    #[test]
    fn speculative_methods_are_what_the_parser_accepts() {
        let reg = presets();
        for m in reg["speculative_methods"].as_array().unwrap() {
            let name = m["name"].as_str().unwrap();
            let mut sp = json!({"method": name, "num_tokens": 2});
            if m["needs_acceptance"] == json!(true) {
                sp["acceptance_rate"] = json!(0.6);
            }
            if m["needs_draft_model"] == json!(true) {
                sp["draft_model"] = json!("llama-3-8b");
            }
            let s = parse_json(&with(&["scheduler", "speculative"], sp)).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(s.scheduler.speculative.map(|x| x.method.name()), Some(name));
            for bad in near_misses(name) {
                assert!(parse_json(&with(&["scheduler", "speculative"], json!({"method": bad, "num_tokens": 2}))).is_err(), "{bad}");
            }
        }
        assert_eq!(names(&reg["speculative_methods"]), crate::config::SpecMethod::ALL.map(|m| m.name().to_string()).to_vec());
    }

    #[test]
    fn policies_and_routers_are_what_the_parser_accepts() {
        let reg = presets();
        let mut all = names(&reg["policies"]);
        all.extend(names(&reg["topology_policies"]));
        assert_eq!(all, names(&reg["policy_info"]), "policy_info lists the same policies in the same order");
        for name in &all {
            let s = parse_json(&with(&["scheduler", "policy"], json!(name))).expect(name);
            assert_eq!(s.scheduler.policy.name(), name);
            let info = &reg["policy_info"].as_array().unwrap().iter().find(|p| p["name"] == json!(name)).unwrap();
            assert_eq!(info["needs_topology"], json!(names(&reg["topology_policies"]).contains(name)));
            for bad in near_misses(name) {
                if !all.contains(&bad) {
                    assert!(parse_json(&with(&["scheduler", "policy"], json!(bad))).is_err(), "{bad:?}");
                }
            }
        }
        let routers = names(&reg["routers"]);
        for name in &routers {
            accepts(&with(&["deployment", "router"], json!(name))).expect(name);
            for bad in near_misses(name) {
                assert!(parse_json(&with(&["deployment", "router"], json!(bad))).is_err(), "{bad:?}");
            }
        }
    }

    #[test]
    fn every_exported_arrival_and_length_kind_parses_and_no_other() {
        let reg = presets();
        for kind in names(&reg["arrival_kinds"]) {
            let mut a = json!({"kind": kind, "rate": 2});
            if kind == "gamma" {
                a["cv"] = json!(2);
            }
            let text = if kind == "poisson_count" {
                let mut v: Value = serde_json::from_str(&with(&["workload", "arrival"], a)).unwrap();
                v["workload"].as_object_mut().unwrap().remove("num_requests");
                v["workload"]["duration_s"] = json!(2);
                v.to_string()
            } else {
                with(&["workload", "arrival"], a)
            };
            accepts(&text).unwrap_or_else(|e| panic!("arrival kind {kind}: {e}"));
            for bad in near_misses(&kind) {
                let e = accepts(&with(&["workload", "arrival"], json!({"kind": bad, "rate": 2}))).unwrap_err();
                assert!(e.starts_with("workload.arrival.kind: unknown arrival kind"), "{bad:?}: {e}");
            }
        }
        let fields = |kind: &str| match kind {
            "fixed" => json!({"kind": kind, "value": 8}),
            "uniform" => json!({"kind": kind, "min": 4, "max": 8}),
            "normal" => json!({"kind": kind, "mean": 8, "std": 2}),
            "lognormal" => json!({"kind": kind, "mean": 8, "sigma": 0.5}),
            "zipf" => json!({"kind": kind, "min": 1, "max": 8, "s": 1.1}),
            other => panic!("length kind {other} has no sample here: add one"),
        };
        for kind in names(&reg["length_kinds"]) {
            accepts(&with(&["workload", "prompt"], fields(&kind))).unwrap_or_else(|e| panic!("length kind {kind}: {e}"));
            for bad in near_misses(&kind) {
                let e = accepts(&with(&["workload", "prompt"], json!({"kind": bad, "value": 8}))).unwrap_err();
                assert!(e.starts_with("workload.prompt.kind: unknown length distribution kind"), "{bad:?}: {e}");
            }
        }
    }

    #[test]
    fn event_kinds_are_the_variants_serde_accepts() {
        let reg = presets();
        let exported = names(&reg["event_kinds"]);
        // serde's own list of the enum's variants, from its error for an unknown one.
        let err = serde_json::from_value::<crate::topo::events::EventSpec>(json!({"kind": "nope", "at_s": 0}))
            .unwrap_err()
            .to_string();
        let listed: Vec<String> =
            err.split_once("expected one of").unwrap().1.split('`').skip(1).step_by(2).map(str::to_string).collect();
        assert_eq!(exported, listed, "EVENT_KINDS and EventSpec's variants differ");
        for kind in &exported {
            let ev = json!({"kind": kind, "at_s": 1, "src": "a", "dst": "b", "node": "g", "bandwidth_gbps": 1});
            // Fields a kind does not take are refused (deny_unknown_fields): drop them one by one.
            let mut parsed = None;
            for drop in [&[][..], &["node"], &["src", "dst", "bandwidth_gbps"], &["node", "bandwidth_gbps"]] {
                let mut e = ev.clone();
                drop.iter().for_each(|k| {
                    e.as_object_mut().unwrap().remove(*k);
                });
                if let Ok(spec) = serde_json::from_value::<crate::topo::events::EventSpec>(e) {
                    parsed = Some(spec);
                    break;
                }
            }
            assert_eq!(parsed.expect(kind).kind(), kind);
        }
        for k in reg["event_kinds"].as_array().unwrap() {
            assert!(["link", "gpu"].contains(&k["target"].as_str().unwrap()) && !k["label"].as_str().unwrap().is_empty());
        }
    }

    /// Every row of `summary_metrics` names a value of a real run's summary (a number or
    /// null; a distribution: its object with every statistic), and every key of the summary
    /// has a row or is one of `NOT_METRICS` (with why).
    #[test]
    fn every_summary_metric_has_one_row_and_every_row_a_value() {
        use crate::metric_info::{NOT_METRICS, SUMMARY_METRICS};
        let golden = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/golden/");
        // An autoscaling run has every key a plain run has, and gpu_hours.
        let scaled = std::fs::read_to_string(format!("{golden}scaling_step.toml")).unwrap();
        let plain = crate::default_scenario_toml();
        for text in [scaled.as_str(), plain] {
            let r = crate::simulate(text, crate::config::Format::Toml, crate::SimOptions::default()).unwrap();
            let summary = r.summary.as_object().unwrap();
            for key in summary.keys() {
                let rows = SUMMARY_METRICS.iter().filter(|m| m.key == key).count();
                let not = NOT_METRICS.iter().any(|(k, why)| k == key && !why.is_empty());
                assert!(rows + usize::from(not) == 1, "summary key {key}: {rows} row(s); give it one, or a reason in NOT_METRICS");
            }
            for m in SUMMARY_METRICS {
                let Some(v) = summary.get(m.key) else {
                    assert!(m.key == "gpu_hours" && text == plain, "{}: not in the summary", m.key);
                    continue;
                };
                if m.stats.is_empty() {
                    assert!(v.is_number() || v.is_null(), "{}: {v}", m.key);
                } else {
                    for (stat, _) in m.stats {
                        assert!(v[*stat].is_number(), "{}.{stat}: {v}", m.key);
                    }
                }
            }
        }
        let exported = presets()["summary_metrics"].as_array().unwrap().len();
        assert_eq!(exported, SUMMARY_METRICS.len());
    }

    #[test]
    fn gpus_models_and_topologies_resolve() {
        let reg = presets();
        let gpus = names(&reg["gpus"]);
        assert_eq!(gpus, crate::catalog::gpu_preset_names(), "the names the parser suggests");
        for g in &gpus {
            assert_eq!(&crate::catalog::resolve_gpu(&g.as_str().into()).unwrap().name, g);
        }
        assert!(crate::catalog::resolve_gpu(&"h2000".into()).is_err());
        for m in names(&reg["models"]) {
            assert_eq!(crate::catalog::resolve_model(&m.as_str().into()).unwrap().name, m);
        }
        for t in names(&reg["topologies"]) {
            crate::topo::Topology::from_json(&json!(t).to_string()).unwrap_or_else(|e| panic!("topology {t}: {e}"));
        }
        assert!(crate::topo::Topology::from_json("\"hgx-h2000\"").is_err());
    }
}
