//! The cost side of a deployment plan: what each configuration costs, which are feasible,
//! the cheapest, and the Pareto front of cost against tail latency.

use serde::{Deserialize, Serialize};

use crate::error::{check, Result, SimError};

/// Default GPU prices, US dollars per GPU-hour: on-demand list prices of specialty GPU
/// clouds (not hyperscalers, which list the same GPUs at 1.5–3×), each with its source.
/// Give your own with `prices`; these only set a scale for comparing configurations. GPU
/// presets without a sourced figure here (the PCIe and NVL variants) need a price.
pub const DEFAULT_PRICES: &[(&str, f64, &str)] = &[
    ("a100-80g", 1.30, "midpoint of the specialty-cloud range $1.10–1.50 (Mercatus AI, Cloud GPU pricing, May 2026)"),
    ("a100-40g", 1.29, "on-demand list price (Jarvislabs, H100 vs A100, updated Apr 2026)"),
    ("h100", 3.00, "midpoint of the specialty-cloud range $2.50–3.50 (Mercatus AI, Cloud GPU pricing, May 2026)"),
    ("h200", 4.00, "midpoint of the specialty-cloud range $3.50–4.50 (Mercatus AI, Cloud GPU pricing, May 2026)"),
    ("l40s", 1.77, "median on-demand price of six providers (Modal, NVIDIA L40S price, Aug 2025)"),
    ("b200", 5.25, "midpoint of the specialized-cloud on-demand average $4.50–6.00 (Lyceum, B200 cloud pricing, Mar 2026)"),
    ("mi300x", 1.99, "median on-demand price across providers (Cliff Center, AMD inference economics, May 2026)"),
];

/// What the cost table needs to know of one configuration.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanConfig {
    /// The GPU's name (a preset name, or the name of a custom GPU given a price).
    pub gpu: String,
    /// GPUs held on average over the run (tp · pp · replicas; less under autoscaling).
    pub gpus: f64,
    /// Did every seed meet the SLO? (false when the run failed.)
    pub meets: bool,
    /// The latency the Pareto front trades against cost (mean over seeds), ms.
    #[serde(default)]
    pub latency_ms: Option<f64>,
    /// Prompt + output tokens per second (mean over seeds).
    #[serde(default)]
    pub tokens_per_s: Option<f64>,
    /// Output tokens per second (mean over seeds).
    #[serde(default)]
    pub output_tokens_per_s: Option<f64>,
    /// A fleet of several GPU types (a deployment of pools): each part's GPUs at its own
    /// GPU's price; empty: all `gpus` are `gpu`.
    #[serde(default)]
    pub fleet: Vec<FleetPart>,
}

/// Part of a mixed fleet: `gpus` GPUs of type `gpu`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FleetPart {
    pub gpu: String,
    pub gpus: f64,
}

/// The plan's question: configurations (in the front end's order) and prices.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanRequest {
    pub configs: Vec<PlanConfig>,
    /// $ per GPU-hour by GPU name, over [`DEFAULT_PRICES`].
    #[serde(default)]
    pub prices: std::collections::BTreeMap<String, f64>,
}

/// One configuration's costs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanRow {
    pub usd_per_hour: f64,
    /// Cost of a million prompt + output tokens at the throughput reached (null without
    /// throughput).
    pub usd_per_million_tokens: Option<f64>,
    pub usd_per_million_output_tokens: Option<f64>,
    /// Prompt + output tokens per second per GPU held (null without throughput).
    pub tokens_per_s_per_gpu: Option<f64>,
    pub feasible: bool,
    /// On the Pareto front of (usd_per_hour, latency_ms) among the feasible ones: no other
    /// feasible configuration is at most as expensive and at most as slow, and better in one.
    pub pareto: bool,
}

/// Price every configuration; returns the rows (same order) and the index of the cheapest
/// feasible one (ties: lower latency, then the earlier).
pub fn plan_eval(req: &PlanRequest) -> Result<(Vec<PlanRow>, Option<usize>)> {
    for (name, p) in &req.prices {
        check::non_negative(&format!("prices.{name}"), *p)?;
    }
    let price_of = |gpu: &str, i: usize| -> Result<f64> {
        if let Some(p) = req.prices.get(gpu) {
            return Ok(*p);
        }
        DEFAULT_PRICES.iter().find(|(n, _, _)| *n == gpu).map(|(_, p, _)| *p).ok_or_else(|| {
            SimError::config(format!("configs[{i}].gpu"), format!("no price for GPU '{gpu}': give one in prices, e.g. {{\"{gpu}\": 2.5}}"))
        })
    };
    let mut rows = Vec::with_capacity(req.configs.len());
    for (i, c) in req.configs.iter().enumerate() {
        check::non_negative(&format!("configs[{i}].gpus"), c.gpus)?;
        let usd_per_hour = if c.fleet.is_empty() {
            c.gpus * price_of(&c.gpu, i)?
        } else {
            let mut sum = 0.0;
            for (j, part) in c.fleet.iter().enumerate() {
                check::non_negative(&format!("configs[{i}].fleet[{j}].gpus"), part.gpus)?;
                sum += part.gpus * price_of(&part.gpu, i).map_err(|e| match e {
                    SimError::Config { message, .. } => SimError::config(format!("configs[{i}].fleet[{j}].gpu"), message),
                    e => e,
                })?;
            }
            sum
        };
        let per_million = |tps: Option<f64>| tps.filter(|t| *t > 0.0).map(|t| usd_per_hour / (t * 3600.0) * 1e6);
        rows.push(PlanRow {
            usd_per_hour,
            usd_per_million_tokens: per_million(c.tokens_per_s),
            usd_per_million_output_tokens: per_million(c.output_tokens_per_s),
            tokens_per_s_per_gpu: c.tokens_per_s.filter(|_| c.gpus > 0.0).map(|t| t / c.gpus),
            feasible: c.meets,
            pareto: false,
        });
    }
    // Feasible ones by (cost, latency, index); a config is on the front when it is faster
    // than every cheaper-or-equal one before it.
    let lat = |i: usize| req.configs[i].latency_ms.unwrap_or(f64::INFINITY);
    let mut order: Vec<usize> = (0..rows.len()).filter(|&i| rows[i].feasible).collect();
    order.sort_by(|&a, &b| rows[a].usd_per_hour.total_cmp(&rows[b].usd_per_hour).then(lat(a).total_cmp(&lat(b))).then(a.cmp(&b)));
    let mut best_latency = f64::INFINITY;
    for &i in &order {
        if lat(i) < best_latency {
            rows[i].pareto = true;
            best_latency = lat(i);
        }
    }
    Ok((rows, order.first().copied()))
}

/// JSON entry point: a [`PlanRequest`] → `{"rows": [PlanRow], "cheapest": index | null}`.
pub fn plan_eval_json(request_json: &str) -> Result<String> {
    crate::guard(|| {
        let req: PlanRequest = super::parse_request(request_json)?;
        let (rows, cheapest) = plan_eval(&req)?;
        Ok(serde_json::json!({"rows": rows, "cheapest": cheapest}).to_string())
    })
}

/// The default prices as JSON: `{gpu: {"usd_per_hour": p, "source": "..."}}`.
pub fn default_prices_json() -> String {
    let map: serde_json::Map<String, serde_json::Value> = DEFAULT_PRICES
        .iter()
        .map(|(n, p, s)| ((*n).to_string(), serde_json::json!({"usd_per_hour": p, "source": s})))
        .collect();
    serde_json::Value::Object(map).to_string()
}
