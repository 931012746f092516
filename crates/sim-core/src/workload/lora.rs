//! `workload.lora`: requests served through LoRA adapters (multi-LoRA serving, as vLLM's
//! `--enable-lora` with `max_loras` / `max_cpu_loras` / `max_lora_rank`).
//!
//! `lora = { adapters = 32, rank = 16, popularity = "zipf" }`: each request names one of
//! `adapters` adapters of rank `rank` on `target_modules`, drawn by popularity (Zipf with
//! exponent `zipf_s`: adapter `i` in proportion to `1 / (i + 1)^s`, the skew seen in
//! multi-tenant LoRA serving; or uniform) from a stream of the run's seed of its own (the
//! arrivals and lengths stay those of the same workload without adapters). An explicit
//! request may name its adapter (`lora = 3`, 0-based); a trace's rows draw theirs.

use serde::{Deserialize, Serialize};

use super::Workload;
use crate::error::{check, Result, SimError};
use crate::rng::SimRng;

/// Most adapters a workload may name (the request's adapter is stored in 16 bits).
pub const MAX_ADAPTERS: u32 = 65_535;
/// Largest rank (vLLM's `max_lora_rank` choices end at 512).
pub const MAX_RANK: u32 = 512;
/// The modules an adapter may target: the attention projections and the gated MLP's three.
pub const LORA_MODULES: [&str; 7] = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"];
/// The RNG stream of the adapter draws (distinct from the workload's other streams).
const LORA_STREAM: u64 = 0x10_7A;

/// How requests pick their adapter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Popularity {
    #[default]
    Zipf,
    Uniform,
}

/// `workload.lora` as written.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LoraSpec {
    /// Distinct adapters the requests use (1..=65,535).
    pub adapters: u32,
    /// Rank of every adapter (1..=512; vLLM pads the GPU slots to `max_lora_rank`).
    #[serde(default = "default_rank")]
    pub rank: u32,
    /// `zipf` (default) or `uniform`.
    #[serde(default)]
    pub popularity: Popularity,
    /// Zipf exponent (> 0, at most 10; default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zipf_s: Option<f64>,
    /// Modules the adapters adapt; default all seven ([`LORA_MODULES`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_modules: Option<Vec<String>>,
}

fn default_rank() -> u32 {
    16
}

impl LoraSpec {
    /// Check the section; errors name the field under `lora`.
    pub fn validate(&self) -> Result<()> {
        check::in_range("lora.adapters", self.adapters, 1, MAX_ADAPTERS)?;
        check::in_range("lora.rank", self.rank, 1, MAX_RANK)?;
        if let Some(s) = self.zipf_s {
            if self.popularity != Popularity::Zipf {
                return Err(SimError::config("lora.zipf_s", "only with popularity = \"zipf\""));
            }
            check::positive("lora.zipf_s", s)?;
            if s > 10.0 {
                return Err(SimError::config("lora.zipf_s", format!("at most 10 (got {s})")));
            }
        }
        if let Some(m) = &self.target_modules {
            if m.is_empty() {
                return Err(SimError::config("lora.target_modules", "names no module: leave it out for all seven"));
            }
            for (i, name) in m.iter().enumerate() {
                if !LORA_MODULES.contains(&name.as_str()) {
                    return Err(check::unknown_name(&format!("lora.target_modules[{i}]"), "module", name, &LORA_MODULES));
                }
                if m[..i].contains(name) {
                    return Err(SimError::config(format!("lora.target_modules[{i}]"), format!("{name} is listed twice")));
                }
            }
        }
        Ok(())
    }

    /// Whether module `name` is adapted.
    pub fn targets(&self, name: &str) -> bool {
        self.target_modules.as_ref().is_none_or(|m| m.iter().any(|x| x == name))
    }

    /// Give every request of `w` its adapter (`lora` = index + 1): the one its explicit
    /// request or trace row names (checked against `adapters`), else a draw by popularity
    /// keyed by the request's id. `trace`: the requests came from a trace (errors name its
    /// row, else `requests[i].lora`).
    pub fn assign(&self, w: &mut Workload, seed: u64, trace: bool) -> Result<()> {
        let n = self.adapters as usize;
        // Cumulative weights of the adapters' popularity.
        let s = self.zipf_s.unwrap_or(1.0);
        let mut cdf = Vec::with_capacity(n);
        let mut total = 0.0;
        for i in 0..n {
            total += match self.popularity {
                Popularity::Zipf => 1.0 / libm::pow((i + 1) as f64, s),
                Popularity::Uniform => 1.0,
            };
            cdf.push(total);
        }
        let mut rng = SimRng::stream(seed, LORA_STREAM);
        // Draw in id order so that a request's adapter does not depend on arrival order.
        let mut order: Vec<usize> = (0..w.requests.len()).collect();
        order.sort_by_key(|&i| w.requests[i].id);
        for i in order {
            let r = &mut w.requests[i];
            let u = rng.uniform();
            let pick = match u32::from(r.lora) {
                0 => cdf.partition_point(|&c| c < u * total).min(n - 1),
                named if named > self.adapters => {
                    let (a, id) = (named - 1, r.id);
                    let (field, what) = if trace {
                        ("trace".to_string(), format!("row {} of the trace (request {id}) names adapter {a}", id + 1))
                    } else {
                        (format!("requests[{id}].lora"), format!("adapter {a}"))
                    };
                    return Err(SimError::config(field, format!("{what} of {} (0-based: at most {})", self.adapters, self.adapters - 1)));
                }
                named => named as usize - 1,
            };
            r.lora = (pick + 1) as u16;
        }
        Ok(())
    }
}
