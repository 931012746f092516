//! Answers built from many runs: a run's summary as flat named metrics, service-level
//! objectives over those metrics, the next step of the capacity search, and the cost table
//! of a deployment plan.
//!
//! Everything here is a pure function of JSON values. The front ends run the simulations
//! (Python on threads or a Ray cluster, the page one by one in its Web Worker) and ask these
//! functions what the runs mean, so every front end answers a question the same way, to
//! the byte.

mod capacity;
mod plan;
#[cfg(test)]
mod tests;

pub use capacity::{capacity_next, capacity_next_json, CapacityRequest, CapacityStep, Point};
pub use plan::{default_prices_json, plan_eval, plan_eval_json, FleetPart, PlanConfig, PlanRequest, PlanRow, DEFAULT_PRICES};

use serde::Serialize;
use serde_json::{Map, Value};

use crate::error::{check, Result, SimError};

/// The quantiles a latency distribution of the summary holds (`ttft_ms: {mean, p50, …}`).
const QUANTILES: [&str; 4] = ["mean", "p50", "p90", "p99"];

/// The summary as flat named metrics, in the summary's (sorted) key order: numbers as they
/// are, a latency distribution `ttft_ms: {p99, …}` as `ttft_p99_ms`, another table's numbers
/// as `table_key` (non-alphanumerics of a key become `_`: `rejections_dispatch_queue_full`).
/// Lists and strings are left out. A metric the run could not measure (no finished request
/// has a TTFT) is `null`.
pub fn flat_metrics(summary: &Value) -> Map<String, Value> {
    let mut out = Map::new();
    if let Some(obj) = summary.as_object() {
        flatten_into("", obj, &mut out);
    }
    out
}

fn flatten_into(prefix: &str, obj: &Map<String, Value>, out: &mut Map<String, Value>) {
    for (key, value) in obj {
        let key: String = key.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
        let name = if prefix.is_empty() { key.clone() } else { format!("{prefix}_{key}") };
        match value {
            Value::Number(_) | Value::Null => {
                out.insert(name, value.clone());
            }
            Value::Object(inner) if is_distribution(&key, inner) => {
                let stem = &name[..name.len() - 3];
                for q in QUANTILES {
                    out.insert(format!("{stem}_{q}_ms"), inner[q].clone());
                }
            }
            Value::Object(inner) => flatten_into(&name, inner, out),
            _ => {}
        }
    }
}

fn is_distribution(key: &str, obj: &Map<String, Value>) -> bool {
    key.ends_with("_ms") && QUANTILES.iter().all(|q| obj.contains_key(*q))
}

/// Which way an objective bounds its metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Bound {
    /// The metric must be at most the value (latencies, rejections).
    AtMost,
    /// The metric must be at least the value (goodput, throughput).
    AtLeast,
}

/// One objective: `metric` (a flat metric name) bounded by `value`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Objective {
    pub metric: String,
    pub bound: Bound,
    pub value: f64,
}

/// A service-level objective: every objective must hold for a run to meet it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SloSpec {
    pub objectives: Vec<Objective>,
    /// Per-request thresholds (the scenario's `slo` table) implied by the latency bounds:
    /// the tightest `ttft_*_ms`, `tpot_*_ms` and `e2e_*_ms` bound of each kind. `goodput`
    /// counts the requests meeting the scenario's own `slo`; a front end puts these in a
    /// scenario that has none.
    pub per_request: crate::config::Slo,
    /// Whether an objective reads `slo_attainment` (`goodput`), which needs per-request
    /// thresholds in the scenario.
    pub needs_per_request: bool,
}

/// Every metric name an objective may bound: the flat metrics of a summary (those of an
/// empty run with an SLO, which has every key a plain run reports), plus those only some
/// runs report (autoscaling, topology), and `goodput`.
pub fn known_metrics() -> Vec<String> {
    let slo = Some(crate::metrics::SloNs::default());
    let empty = crate::metrics::summarize(&[], &[], &[], &[], crate::REASON_NAMES, slo, true, Default::default());
    let mut names: Vec<String> = flat_metrics(&empty).keys().cloned().collect();
    names.extend(["goodput", "gpu_hours", "scaling_num_events", "scaling_peak_replicas"].map(String::from));
    names.sort();
    names.dedup();
    names
}

/// The way a metric is bounded when the objective gives a bare number.
fn default_bound(metric: &str) -> Option<Bound> {
    const AT_MOST: &[&str] =
        &["rejected", "preemptions", "allocation_failures", "allocation_failure_rate", "fragmentation_mean", "gpu_hours"];
    const AT_LEAST: &[&str] = &["slo_attainment", "goodput_rps", "throughput_rps", "finished"];
    if metric.ends_with("_ms") || AT_MOST.contains(&metric) || metric.starts_with("rejections_") {
        Some(Bound::AtMost)
    } else if metric.ends_with("_per_s") || AT_LEAST.contains(&metric) {
        Some(Bound::AtLeast)
    } else {
        // Otherwise the way the summary's metric table says is better (a scalar's key is
        // its flat name).
        let row = crate::metric_info::SUMMARY_METRICS.iter().find(|m| m.stats.is_empty() && m.key == metric)?;
        row.lower_is_better.map(|lower| if lower { Bound::AtMost } else { Bound::AtLeast })
    }
}

/// Parse an SLO: a JSON object `{metric: bound}` where a bound is a number (a latency or a
/// rejection count at most it; goodput, throughput at least it) or `{"max": x}` /
/// `{"min": x}`. `goodput` is `slo_attainment`: the fraction of all requests that finished
/// within the per-request thresholds, in (0, 1]. Errors name `field.metric`.
pub fn parse_slo(value: &Value, field: &str) -> Result<SloSpec> {
    let Some(obj) = value.as_object() else {
        return Err(SimError::config(field, "must be a table of metric bounds, e.g. {\"ttft_p99_ms\": 2000}"));
    };
    if obj.is_empty() {
        return Err(SimError::config(field, "give at least one objective, e.g. {\"ttft_p99_ms\": 2000}"));
    }
    let known = known_metrics();
    let known_refs: Vec<&str> = known.iter().map(String::as_str).collect();
    let mut spec = SloSpec { objectives: Vec::new(), per_request: crate::config::Slo::default(), needs_per_request: false };
    for (name, bound) in obj {
        let path = format!("{field}.{name}");
        if !known.contains(name) {
            return Err(check::unknown_name(&path, "metric", name, &known_refs));
        }
        let metric = if name == "goodput" { "slo_attainment" } else { name.as_str() };
        let (way, v) = match bound {
            Value::Number(n) => {
                let Some(way) = default_bound(metric) else {
                    return Err(SimError::config(&path, "say which way it is bounded: {\"max\": x} or {\"min\": x}"));
                };
                (way, n.as_f64().unwrap_or(f64::NAN))
            }
            Value::Object(m) if m.len() == 1 && (m.contains_key("max") || m.contains_key("min")) => {
                let (k, v) = m.iter().next().expect("one entry");
                let way = if k == "max" { Bound::AtMost } else { Bound::AtLeast };
                let Some(v) = v.as_f64() else {
                    return Err(SimError::config(format!("{path}.{k}"), format!("must be a number (got {v})")));
                };
                (way, v)
            }
            other => {
                return Err(SimError::config(&path, format!("must be a number or {{\"max\": x}} / {{\"min\": x}} (got {other})")))
            }
        };
        check::finite(&path, v)?;
        if metric == "slo_attainment" {
            if !(v > 0.0 && v <= 1.0) {
                return Err(SimError::config(&path, format!("is a fraction of requests: must be in (0, 1] (got {v})")));
            }
            spec.needs_per_request = true;
        } else if metric.ends_with("_ms") {
            check::positive(&path, v)?;
        }
        if way == Bound::AtMost {
            let slot = match metric.split('_').next() {
                Some("ttft") => Some(&mut spec.per_request.ttft_ms),
                Some("tpot") => Some(&mut spec.per_request.tpot_ms),
                Some("e2e") => Some(&mut spec.per_request.e2e_ms),
                _ => None,
            };
            if let Some(slot) = slot.filter(|_| metric.ends_with("_ms")) {
                *slot = Some(slot.map_or(v, |old: f64| old.min(v)));
            }
        }
        spec.objectives.push(Objective { metric: metric.to_string(), bound: way, value: v });
    }
    Ok(spec)
}

/// A failed objective of one run: the metric's value (`null` when the run could not
/// measure it, which fails any bound) against its bound.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Miss {
    pub metric: String,
    pub value: Option<f64>,
    pub bound: Bound,
    pub limit: f64,
}

/// Check a run's summary against an SLO; returns the objectives it misses (none: it meets
/// the SLO).
pub fn slo_misses(spec: &SloSpec, summary: &Value) -> Vec<Miss> {
    let flat = flat_metrics(summary);
    let mut misses = Vec::new();
    for o in &spec.objectives {
        let value = flat.get(&o.metric).and_then(Value::as_f64);
        let ok = value.is_some_and(|v| match o.bound {
            Bound::AtMost => v <= o.value,
            Bound::AtLeast => v >= o.value,
        });
        if !ok {
            misses.push(Miss { metric: o.metric.clone(), value, bound: o.bound, limit: o.value });
        }
    }
    misses
}

/// JSON entry point: the SLO `slo_json` parsed, as `{objectives, per_request,
/// needs_per_request}` (errors name `slo.<metric>`).
pub fn slo_spec_json(slo_json: &str) -> Result<String> {
    crate::guard(|| {
        let v: Value = serde_json::from_str(slo_json).map_err(|e| SimError::config("slo", format!("invalid JSON: {e}")))?;
        let spec = parse_slo(&v, "slo")?;
        serde_json::to_string(&spec).map_err(|e| SimError::Internal { message: e.to_string() })
    })
}

/// JSON entry point: `{"slo": {...}, "summary": {...}}` → `{"meets": bool, "misses": [...],
/// "metrics": {flat metrics}}`.
pub fn slo_eval_json(request_json: &str) -> Result<String> {
    crate::guard(|| {
        let v: Value = serde_json::from_str(request_json).map_err(|e| SimError::config("", format!("invalid JSON: {e}")))?;
        let spec = parse_slo(v.get("slo").unwrap_or(&Value::Null), "slo")?;
        let summary = v.get("summary").filter(|s| s.is_object()).ok_or_else(|| SimError::config("summary", "required: a run's summary"))?;
        let misses = slo_misses(&spec, summary);
        let out = serde_json::json!({"meets": misses.is_empty(), "misses": misses, "metrics": flat_metrics(summary)});
        Ok(out.to_string())
    })
}

/// JSON entry point: a summary's [`flat_metrics`] as a JSON object.
pub fn flat_metrics_json(summary_json: &str) -> Result<String> {
    crate::guard(|| {
        let v: Value =
            serde_json::from_str(summary_json).map_err(|e| SimError::config("summary", format!("invalid JSON: {e}")))?;
        Ok(Value::Object(flat_metrics(&v)).to_string())
    })
}

/// Parse a JSON request with path-named errors.
fn parse_request<T: serde::de::DeserializeOwned>(json: &str) -> Result<T> {
    let de = &mut serde_json::Deserializer::from_str(json);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        SimError::config(if path == "." { String::new() } else { path }, e.into_inner())
    })
}
