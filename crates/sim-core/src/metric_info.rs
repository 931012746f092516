//! The run summary's metrics, each described once: where its value is in the summary, its one
//! label, unit and number format, which way is better, which front ends show it, and the
//! vLLM Prometheus family it corresponds to. [`crate::registry::presets`] exports the table
//! as `summary_metrics`, so the CLI's tables, the dashboard, the page, the HTML report and the
//! Prometheus exporter read the same rows instead of each keeping a list of its own.
//!
//! Adding a summary metric: compute it in [`crate::metrics::summarize`], add its row to
//! [`SUMMARY_METRICS`], and run `make golden`; every front end whose surface the row names
//! shows it. This module imports nothing of the crate: the summary's writer and the registry
//! both read it.

use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};

/// A front end that shows summary metrics (bits of [`MetricInfo::shown`]).
pub mod surface {
    /// `o1sim run`'s summary (every metric worth a line).
    pub const CLI: u8 = 1 << 0;
    /// The comparison tables: `o1sim compare`, the dashboard's Compare tab.
    pub const COMPARE: u8 = 1 << 1;
    /// The dashboard's headline metrics (above its tabs).
    pub const DASHBOARD: u8 = 1 << 2;
    /// The page's summary table.
    pub const PAGE: u8 = 1 << 3;
    /// `o1sim report`'s comparison table.
    pub const REPORT: u8 = 1 << 4;
    /// Every table-like surface.
    pub const ALL: u8 = CLI | COMPARE | DASHBOARD | PAGE | REPORT;
    /// Each surface's name as exported, in bit order; `prometheus` follows them (a row is
    /// exported there when it has a [`super::Prometheus`] family).
    pub const NAMES: [(u8, &str); 5] =
        [(CLI, "cli"), (COMPARE, "compare"), (DASHBOARD, "dashboard"), (PAGE, "page"), (REPORT, "report")];
}

use surface::{ALL, CLI, COMPARE, DASHBOARD, PAGE, REPORT};

/// How a value is written: the shown number is the summary's value × `scale` with `decimals`
/// digits after the point (`percent`: a 0–1 fraction × 100, followed by `%`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Format {
    /// A count, written as a whole number.
    Integer,
    /// A number with `decimals` digits after the point, after multiplying by `scale` (1, or
    /// 0.001 for milliseconds shown in seconds).
    Fixed { decimals: u8, scale: f64 },
    /// A 0–1 fraction as a percentage with `decimals` digits.
    Percent { decimals: u8 },
}

impl Format {
    /// `Fixed` with no scaling.
    pub const fn fixed(decimals: u8) -> Format {
        Format::Fixed { decimals, scale: 1.0 }
    }

    /// `(name, decimals, scale)` as exported.
    fn parts(self) -> (&'static str, u8, f64) {
        match self {
            Format::Integer => ("integer", 0, 1.0),
            Format::Fixed { decimals, scale } => ("fixed", decimals, scale),
            Format::Percent { decimals } => ("percent", decimals, 100.0),
        }
    }
}

/// The kind of a Prometheus metric family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PromType {
    Counter,
    Gauge,
    Histogram,
}

/// The Prometheus family a metric is exported as: vLLM's (v1, `vllm/v1/metrics/loggers.py`;
/// a counter's name without the `_total` its samples get) where vLLM has one, else `o1sim:`'s
/// own. The exporter (`o1sim.exports.prometheus_text`) writes it per engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Prometheus {
    pub name: &'static str,
    #[serde(rename = "type")]
    pub kind: PromType,
}

/// One metric of the run summary.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MetricInfo {
    /// The summary key (`throughput_rps`); for a latency distribution the key of its
    /// `{mean, p50, p90, p99}` object (`ttft_ms`), each statistic at `ttft_ms.p99`.
    pub key: &'static str,
    /// The one label every front end shows (a distribution's statistic: `"{label} {stat}"`).
    pub label: &'static str,
    /// The unit of the shown value: `ms`, `s`, `req/s`, `tok/s`, `%`, `tokens`, or empty where
    /// the label says it (a count, GPU-hours).
    pub unit: &'static str,
    pub format: Format,
    /// `Some(true)`: lower is better (latencies, rejections); `Some(false)`: higher is better
    /// (throughput); `None`: neither (KV use, counts of the workload).
    pub lower_is_better: Option<bool>,
    /// Where a scalar is shown ([`surface`] bits); a distribution gives it per statistic.
    pub shown: u8,
    /// A distribution's statistics, each with where it is shown; empty for a scalar.
    pub stats: &'static [(&'static str, u8)],
    pub prometheus: Option<Prometheus>,
    /// One line: what the number is.
    pub doc: &'static str,
}

const BASE: MetricInfo = MetricInfo {
    key: "",
    label: "",
    unit: "",
    format: Format::Integer,
    lower_is_better: None,
    shown: CLI,
    stats: &[],
    prometheus: None,
    doc: "",
};

const fn prom(name: &'static str, kind: PromType) -> Option<Prometheus> {
    Some(Prometheus { name, kind })
}

/// A latency distribution's statistics in the CLI's grid, its p50 in the comparison tables
/// and on the page, its p99 everywhere.
const LATENCY_STATS: &[(&str, u8)] =
    &[("mean", CLI), ("p50", CLI | COMPARE | PAGE | REPORT), ("p90", CLI), ("p99", ALL)];
/// A distribution whose tail alone is a headline (E2E).
const TAIL_STATS: &[(&str, u8)] = &[("mean", CLI), ("p50", CLI), ("p90", CLI), ("p99", ALL)];
/// A distribution shown in the CLI's grid only.
const CLI_STATS: &[(&str, u8)] = &[("mean", CLI), ("p50", CLI), ("p90", CLI), ("p99", CLI)];
/// A distribution only exported (Prometheus).
const NO_STATS: &[(&str, u8)] = &[("mean", 0), ("p50", 0), ("p90", 0), ("p99", 0)];

/// Every summary metric, in display order (each front end keeps this order for the rows it
/// shows).
pub const SUMMARY_METRICS: &[MetricInfo] = &[
    MetricInfo { key: "num_requests", label: "Requests", doc: "Requests in the workload.", ..BASE },
    MetricInfo {
        key: "finished",
        label: "Finished",
        lower_is_better: Some(false),
        prometheus: prom("vllm:request_success", PromType::Counter),
        doc: "Requests that finished.",
        ..BASE
    },
    MetricInfo {
        key: "duration_s",
        label: "Simulated duration",
        unit: "s",
        format: Format::fixed(2),
        doc: "Simulated time until the last request finished or was rejected.",
        ..BASE
    },
    MetricInfo {
        key: "ttft_ms",
        label: "TTFT",
        unit: "ms",
        format: Format::fixed(1),
        lower_is_better: Some(true),
        stats: LATENCY_STATS,
        doc: "Time to first token of finished requests (the client's view when a front end is modelled).",
        ..BASE
    },
    MetricInfo {
        key: "tpot_ms",
        label: "TPOT",
        unit: "ms",
        format: Format::fixed(2),
        lower_is_better: Some(true),
        stats: LATENCY_STATS,
        prometheus: prom("vllm:request_time_per_output_token_seconds", PromType::Histogram),
        doc: "Time per output token after the first, per request with more than one output token.",
        ..BASE
    },
    MetricInfo {
        key: "e2e_ms",
        label: "E2E",
        unit: "s",
        format: Format::Fixed { decimals: 2, scale: 1e-3 },
        lower_is_better: Some(true),
        stats: TAIL_STATS,
        doc: "End-to-end latency of finished requests, from sending to the last token.",
        ..BASE
    },
    MetricInfo {
        key: "queueing_ms",
        label: "Queueing",
        unit: "ms",
        format: Format::fixed(1),
        lower_is_better: Some(true),
        stats: CLI_STATS,
        prometheus: prom("vllm:request_queue_time_seconds", PromType::Histogram),
        doc: "Time from a request's arrival at the engine to its first scheduling.",
        ..BASE
    },
    MetricInfo {
        key: "engine_ttft_ms",
        label: "Engine TTFT",
        unit: "ms",
        format: Format::fixed(1),
        lower_is_better: Some(true),
        stats: NO_STATS,
        prometheus: prom("vllm:time_to_first_token_seconds", PromType::Histogram),
        doc: "Time to first token as the engine sees it (from its receipt of the request), as vLLM measures it.",
        ..BASE
    },
    MetricInfo {
        key: "engine_e2e_ms",
        label: "Engine E2E",
        unit: "s",
        format: Format::Fixed { decimals: 2, scale: 1e-3 },
        lower_is_better: Some(true),
        stats: NO_STATS,
        prometheus: prom("vllm:e2e_request_latency_seconds", PromType::Histogram),
        doc: "End-to-end latency as the engine sees it, as vLLM measures it.",
        ..BASE
    },
    MetricInfo {
        key: "throughput_rps",
        label: "Throughput",
        unit: "req/s",
        format: Format::fixed(2),
        lower_is_better: Some(false),
        shown: ALL,
        doc: "Finished requests per simulated second.",
        ..BASE
    },
    MetricInfo {
        key: "output_tokens_per_s",
        label: "Output throughput",
        unit: "tok/s",
        format: Format::fixed(0),
        lower_is_better: Some(false),
        shown: CLI | REPORT,
        prometheus: prom("vllm:generation_tokens", PromType::Counter),
        doc: "Output tokens of finished requests per simulated second (the rate of vLLM's generation-token counter).",
        ..BASE
    },
    MetricInfo {
        key: "total_tokens_per_s",
        label: "Total throughput",
        unit: "tok/s",
        format: Format::fixed(0),
        lower_is_better: Some(false),
        doc: "Prompt and output tokens of finished requests per simulated second.",
        ..BASE
    },
    MetricInfo {
        key: "output_tokens_per_s_per_gpu",
        label: "Output throughput per GPU",
        unit: "tok/s",
        format: Format::fixed(1),
        lower_is_better: Some(false),
        shown: ALL,
        prometheus: prom("o1sim:output_tokens_per_s_per_gpu", PromType::Gauge),
        doc: "Output tokens per second of GPU time held (replicas × TP × PP; under autoscaling the GPU time actually held).",
        ..BASE
    },
    MetricInfo {
        key: "goodput_rps",
        label: "Goodput",
        unit: "req/s",
        format: Format::fixed(2),
        lower_is_better: Some(false),
        shown: ALL,
        doc: "Requests per simulated second that met the scenario's SLO (null without one).",
        ..BASE
    },
    MetricInfo {
        key: "slo_attainment",
        label: "SLO attainment",
        unit: "%",
        format: Format::Percent { decimals: 1 },
        lower_is_better: Some(false),
        shown: CLI | PAGE,
        doc: "Share of all requests that met the scenario's SLO (null without one).",
        ..BASE
    },
    MetricInfo {
        key: "kv_utilization_mean",
        label: "KV-cache use (mean)",
        unit: "%",
        format: Format::Percent { decimals: 1 },
        shown: CLI | COMPARE | PAGE | REPORT,
        prometheus: prom("vllm:kv_cache_usage_perc", PromType::Gauge),
        doc: "Time-weighted mean share of KV blocks in use, over the replica-time held.",
        ..BASE
    },
    MetricInfo {
        key: "kv_utilization_peak",
        label: "KV-cache use (peak)",
        unit: "%",
        format: Format::Percent { decimals: 1 },
        shown: CLI | COMPARE | DASHBOARD | REPORT,
        doc: "Highest share of KV blocks in use on any replica.",
        ..BASE
    },
    MetricInfo {
        key: "fragmentation_mean",
        label: "Fragmentation (mean)",
        unit: "%",
        format: Format::Percent { decimals: 1 },
        lower_is_better: Some(true),
        shown: CLI | COMPARE | REPORT,
        doc: "Time-weighted mean share of reserved KV slots holding no token.",
        ..BASE
    },
    MetricInfo {
        key: "allocation_failures",
        label: "Allocation failures",
        lower_is_better: Some(true),
        doc: "KV allocations that found no free block.",
        ..BASE
    },
    MetricInfo {
        key: "allocation_failure_rate",
        label: "Allocation failure rate",
        unit: "%",
        format: Format::Percent { decimals: 1 },
        lower_is_better: Some(true),
        doc: "Share of KV allocation attempts that failed.",
        ..BASE
    },
    MetricInfo {
        key: "preemptions",
        label: "Preemptions",
        lower_is_better: Some(true),
        shown: ALL,
        prometheus: prom("vllm:num_preemptions", PromType::Counter),
        doc: "Times a running request was preempted (its KV cache freed or swapped).",
        ..BASE
    },
    MetricInfo {
        key: "rejected",
        label: "Rejected",
        lower_is_better: Some(true),
        shown: ALL,
        prometheus: prom("o1sim:requests_rejected", PromType::Counter),
        doc: "Requests rejected (by reason in `rejections`).",
        ..BASE
    },
    MetricInfo {
        key: "prefix_cache_hit_rate",
        label: "Prefix-cache hit rate",
        unit: "%",
        format: Format::Percent { decimals: 1 },
        lower_is_better: Some(false),
        shown: ALL,
        doc: "Share of prompt tokens looked up at first admissions that were found in the prefix cache.",
        ..BASE
    },
    MetricInfo {
        key: "prefix_cache_queries",
        label: "Prefix-cache queries",
        unit: "tokens",
        prometheus: prom("vllm:prefix_cache_queries", PromType::Counter),
        doc: "Prompt tokens looked up in the prefix cache at first admissions.",
        ..BASE
    },
    MetricInfo {
        key: "prefix_cache_hits",
        label: "Prefix-cache hits",
        unit: "tokens",
        lower_is_better: Some(false),
        prometheus: prom("vllm:prefix_cache_hits", PromType::Counter),
        doc: "Of those, tokens found in the cache.",
        ..BASE
    },
    MetricInfo {
        key: "computed_prefill_tokens",
        label: "Computed prefill tokens",
        doc: "Prompt tokens the engine computed (prefix-cache hits and recomputation after preemption included).",
        ..BASE
    },
    MetricInfo { key: "steps", label: "Steps", doc: "Scheduler steps over all replicas.", ..BASE },
    MetricInfo {
        key: "mean_batch_size",
        label: "Mean batch size",
        format: Format::fixed(1),
        doc: "Requests per step, averaged over steps.",
        ..BASE
    },
    MetricInfo { key: "max_batch_size", label: "Max batch size", doc: "Most requests in one step.", ..BASE },
    MetricInfo {
        key: "gpu_busy_fraction",
        label: "GPU busy",
        unit: "%",
        format: Format::Percent { decimals: 1 },
        doc: "Share of the replica-time held that the GPUs were executing steps.",
        ..BASE
    },
    MetricInfo {
        key: "gpu_hours",
        label: "GPU-hours",
        format: Format::fixed(3),
        lower_is_better: Some(true),
        doc: "GPU time held under autoscaling (present only with `scaling`).",
        ..BASE
    },
];

/// Summary keys that are no headline metric, each with why: a table of their own, a label,
/// or a breakdown a front end shows in its own way. Every other key has a row.
pub const NOT_METRICS: &[(&str, &str)] = &[
    ("rejections", "rejected requests by reason: a table of its own (o1sim:requests_rejected's reason label)"),
    ("latency_view", "a label, not a number: whether the latencies are the client's or the engine's"),
    ("classes", "the metrics per traffic class (normal, adversarial): a summary of its own"),
    ("topology", "the fabric's counters (events, routes, KV transfers): the topology views show them"),
    ("scaling", "the autoscaler's table (events, peak replicas): the scaling views show it"),
    ("kv_offload", "the offload tiers' counters (hits, stores, evictions per tier, load times): a table of its own"),
    ("speculative", "speculative decoding's counters (drafts, accepted, per-position acceptance): a table of its own"),
    ("lora", "the LoRA adapters' counters (loads, loads from disk, load time, slot waits): a table of its own"),
];

impl Serialize for MetricInfo {
    /// `{key, label, unit, format, decimals, scale, lower_is_better, shown_in, stats: [{name,
    /// shown_in}], prometheus: {name, type} | null, doc}`. `shown_in` lists the surfaces by
    /// name (a distribution: those of any statistic), and `prometheus` when exported there.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Stat {
            name: &'static str,
            shown_in: Vec<&'static str>,
        }
        let names = |bits: u8| -> Vec<&'static str> {
            surface::NAMES.iter().filter(|(b, _)| bits & b != 0).map(|(_, n)| *n).collect()
        };
        let mut shown_in = names(self.stats.iter().fold(self.shown_if_scalar(), |a, (_, b)| a | b));
        if self.prometheus.is_some() {
            shown_in.push("prometheus");
        }
        let stats: Vec<Stat> = self.stats.iter().map(|&(name, b)| Stat { name, shown_in: names(b) }).collect();
        let (format, decimals, scale) = self.format.parts();
        let mut m = s.serialize_struct("MetricInfo", 11)?;
        m.serialize_field("key", self.key)?;
        m.serialize_field("label", self.label)?;
        m.serialize_field("unit", self.unit)?;
        m.serialize_field("format", format)?;
        m.serialize_field("decimals", &decimals)?;
        m.serialize_field("scale", &scale)?;
        m.serialize_field("lower_is_better", &self.lower_is_better)?;
        m.serialize_field("shown_in", &shown_in)?;
        m.serialize_field("stats", &stats)?;
        m.serialize_field("prometheus", &self.prometheus)?;
        m.serialize_field("doc", self.doc)?;
        m.end()
    }
}

impl MetricInfo {
    /// [`Self::shown`] for a scalar; nothing for a distribution (its statistics say).
    fn shown_if_scalar(&self) -> u8 {
        if self.stats.is_empty() {
            self.shown
        } else {
            0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_and_keys_are_unique_and_rows_are_complete() {
        let mut labels: Vec<&str> = SUMMARY_METRICS.iter().map(|m| m.label).collect();
        let mut keys: Vec<&str> = SUMMARY_METRICS.iter().map(|m| m.key).collect();
        labels.sort_unstable();
        keys.sort_unstable();
        let (nl, nk) = (labels.len(), keys.len());
        labels.dedup();
        keys.dedup();
        assert_eq!((labels.len(), keys.len()), (nl, nk), "a label or a key is used twice");
        for m in SUMMARY_METRICS {
            assert!(!m.label.is_empty() && !m.doc.is_empty(), "{}: label and doc", m.key);
            assert!(!m.key.contains('.'), "{}: a distribution's key is the object's, its statistics in `stats`", m.key);
            if let Format::Percent { .. } = m.format {
                assert_eq!(m.unit, "%", "{}", m.key);
            }
            if !m.stats.is_empty() {
                assert_eq!(m.shown, CLI, "{}: a distribution says where per statistic (leave `shown` as BASE's)", m.key);
            }
            if let Some(p) = m.prometheus {
                assert!(p.name.starts_with("vllm:") || p.name.starts_with("o1sim:"), "{}", p.name);
                assert!(!p.name.ends_with("_total"), "{}: a counter is named without _total", p.name);
                assert_eq!(p.kind == PromType::Histogram, !m.stats.is_empty(), "{}: histograms are distributions", m.key);
            }
        }
        let names: Vec<&str> = SUMMARY_METRICS.iter().filter_map(|m| m.prometheus.map(|p| p.name)).collect();
        let mut unique = names.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), names.len(), "two rows export one Prometheus family");
    }

    #[test]
    fn a_row_serializes_with_its_surfaces_by_name() {
        let tpot = SUMMARY_METRICS.iter().find(|m| m.key == "tpot_ms").unwrap();
        let v = serde_json::to_value(tpot).unwrap();
        assert_eq!(v["shown_in"], serde_json::json!(["cli", "compare", "dashboard", "page", "report", "prometheus"]));
        assert_eq!(v["stats"][3], serde_json::json!({"name": "p99", "shown_in": ["cli", "compare", "dashboard", "page", "report"]}));
        assert_eq!(v["prometheus"], serde_json::json!({"name": "vllm:request_time_per_output_token_seconds", "type": "histogram"}));
        assert_eq!((v["format"].as_str(), v["decimals"].as_u64()), (Some("fixed"), Some(2)));
        let kv = serde_json::to_value(SUMMARY_METRICS.iter().find(|m| m.key == "kv_utilization_peak").unwrap()).unwrap();
        assert_eq!((v["lower_is_better"].clone(), kv["lower_is_better"].clone()), (serde_json::json!(true), serde_json::Value::Null));
        assert_eq!((kv["format"].as_str(), kv["scale"].as_f64(), kv["stats"].as_array().map(Vec::len)), (Some("percent"), Some(100.0), Some(0)));
    }

    /// The bottom of the graph, like `policy.rs`: the summary's writer (`metrics.rs`) and the
    /// registry read this table, so it names nothing of the crate.
    #[test]
    fn the_table_imports_nothing_of_the_crate() {
        let src = include_str!("metric_info.rs");
        let code = src.split("#[cfg(test)]\nmod tests").next().unwrap_or(src);
        let reached: Vec<&str> =
            code.lines().filter(|l| !l.trim_start().starts_with("//")).filter(|l| l.contains("crate::")).collect();
        assert!(reached.is_empty(), "metric_info.rs imports {reached:?}");
    }
}
