//! Arrival processes: when generated requests (or sessions) start, one rate or stages of
//! rates over time; the `arrival` table as written ([`ArrivalSpec`]) and its model.
//!
//! Without stages the process starts with an arrival at t = 0 and draws i.i.d. gaps until
//! the stop (a count or a duration). With `arrival.stages` each stage `[T, T + duration_s)`
//! is its own process at its own rate, started with an arrival at `T` (as inference-perf
//! runs one load timer per stage), and generation ends with the last stage.
//!
//! `poisson_count` is inference-perf's `constant` load type: a stage of rate r and duration
//! D gets exactly ⌊r·D⌋ arrivals whose gaps are exponential draws scaled to sum to D, so
//! the first arrives after one gap and the last at the stage's end (inference-perf
//! `loadgen/load_timer.py`, `ConstantLoadTimer`). Despite its name that load is
//! Poisson-like, not evenly spaced; o1sim's `constant` is the evenly spaced one.

use serde::{Deserialize, Serialize};

use super::MAX_REQUESTS;
use crate::error::{check, Result, SimError};
use crate::rng::SimRng;

/// Valid values of `arrival.kind` (exported by [`crate::registry`]).
pub const ARRIVAL_KINDS: &[&str] = &["poisson", "gamma", "constant", "poisson_count"];

/// The arrival process of a generated workload (`arrival` in the section).
///
/// Inter-arrival gaps are i.i.d.; the first request arrives at t = 0. With `stages`, each
/// stage is its own process at its own rate (see the module docs).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArrivalSpec {
    /// `"poisson"` (exponential gaps), `"gamma"` (gamma-distributed gaps, burstiness set by
    /// `cv`), `"constant"` (every gap is exactly `1/rate`) or `"poisson_count"` (exactly
    /// rate × duration arrivals per stage at exponential gaps scaled to the stage:
    /// inference-perf's `constant` load type). Required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Mean arrival rate in requests per second (> 0). Required, unless `stages` is given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// Load over time, as inference-perf's `load.stages`: `[{rate, duration_s}, …]`, one
    /// after the other from t = 0; generation ends with the last stage (so `num_requests`
    /// and `duration_s` are not given). Replaces `rate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stages: Option<Vec<StageSpec>>,
    /// Coefficient of variation of the gaps (std / mean, > 0): 1 is Poisson-like, > 1 is
    /// burstier. Required for, and only allowed with, `kind = "gamma"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cv: Option<f64>,
    /// Optional cap on any single inter-arrival gap, in seconds (> 0). Why: Vidur's request
    /// generator caps gaps at `3/rate`; setting this reproduces its traces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_gap_s: Option<f64>,
}

impl ArrivalSpec {
    /// Poisson arrivals at `rate` requests per second.
    pub fn poisson(rate: f64) -> Self {
        ArrivalSpec {
            kind: Some("poisson".into()),
            rate: Some(rate),
            ..Default::default()
        }
    }

    /// Gamma-renewal arrivals at `rate` requests per second with gap coefficient of
    /// variation `cv`.
    pub fn gamma(rate: f64, cv: f64) -> Self {
        ArrivalSpec {
            kind: Some("gamma".into()),
            rate: Some(rate),
            cv: Some(cv),
            ..Default::default()
        }
    }

    /// Evenly spaced arrivals, one every `1/rate` seconds.
    pub fn constant(rate: f64) -> Self {
        ArrivalSpec {
            kind: Some("constant".into()),
            rate: Some(rate),
            ..Default::default()
        }
    }

    /// Arrivals of `kind` in stages of `(rate per second, duration in seconds)`.
    pub fn staged(kind: &str, stages: &[(f64, f64)]) -> Self {
        ArrivalSpec {
            kind: Some(kind.into()),
            stages: Some(stages.iter().map(|&(r, d)| StageSpec::new(r, d)).collect()),
            ..Default::default()
        }
    }
}

/// One stage of load (`arrival.stages[i]`), as inference-perf's `load.stages`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StageSpec {
    /// Mean arrival rate during the stage, requests (or sessions) per second (> 0). Required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// Length of the stage in seconds (> 0). Required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_s: Option<f64>,
}

impl StageSpec {
    /// A stage of `rate` per second lasting `duration_s` seconds.
    pub fn new(rate: f64, duration_s: f64) -> Self {
        StageSpec { rate: Some(rate), duration_s: Some(duration_s) }
    }
}

/// When generation stops.
#[derive(Debug, Clone, Copy)]
pub(super) enum Stop {
    /// After this many arrivals.
    Count(u64),
    /// At the first arrival at or after this time (seconds).
    Duration(f64),
    /// At the end of the last stage.
    Stages,
}

/// The shape of the gaps; the rate comes from the stage.
#[derive(Debug, Clone, Copy)]
pub(super) enum GapKind {
    Poisson,
    /// Gamma-distributed gaps with this coefficient of variation.
    Gamma { cv: f64 },
    Constant,
    /// Exactly ⌊rate·duration⌋ arrivals per stage, exponential gaps scaled to the duration.
    PoissonCount,
}

#[derive(Debug, Clone)]
pub(super) struct ArrivalModel {
    pub(super) kind: GapKind,
    /// Mean rate, per second, without stages (unused with them).
    pub(super) rate: f64,
    /// `(rate per second, duration in seconds)` of each stage; empty without stages.
    pub(super) stages: Vec<(f64, f64)>,
    /// Cap on each gap, seconds.
    pub(super) max_gap_s: Option<f64>,
}

impl ArrivalModel {
    /// The next gap in seconds (≥ 0) at `rate`.
    fn next_gap(&self, rate: f64, rng: &mut SimRng) -> f64 {
        let g = match self.kind {
            GapKind::Poisson => rng.exponential(rate),
            GapKind::Gamma { cv } => {
                let shape = 1.0 / (cv * cv);
                rng.gamma(shape, 1.0 / (rate * shape))
            }
            GapKind::Constant => 1.0 / rate,
            GapKind::PoissonCount => unreachable!("poisson_count draws whole stages"),
        };
        match self.max_gap_s {
            Some(cap) if g > cap => cap,
            _ => g,
        }
    }

    /// The expected number of arrivals under `stop` (an allocation hint).
    pub(super) fn expected(&self, stop: Stop) -> u64 {
        let n = match stop {
            Stop::Count(n) => n as f64,
            Stop::Duration(d) => self.rate * d,
            Stop::Stages => self.stages.iter().map(|(r, d)| r * d).sum(),
        };
        n.min(MAX_REQUESTS as f64) as u64
    }

    /// Call `f(time_s, stage)` for every arrival in time order until `stop`, or until `f`
    /// returns false. `stage` is 0 without stages.
    pub(super) fn for_each(&self, rng: &mut SimRng, stop: Stop, mut f: impl FnMut(f64, u32) -> Result<bool>) -> Result<()> {
        if self.stages.is_empty() {
            if let GapKind::PoissonCount = self.kind {
                let (n, d) = match stop {
                    Stop::Count(n) => (n, n as f64 / self.rate),
                    Stop::Duration(d) => ((self.rate * d) as u64, d),
                    Stop::Stages => unreachable!("no stages"),
                };
                return scaled_phase(rng, 0.0, d, n, 0, &mut f).map(|_| ());
            }
            let mut t_s = 0.0_f64;
            let mut n = 0_u64;
            loop {
                match stop {
                    Stop::Count(limit) if n >= limit => break,
                    Stop::Duration(d) if t_s.is_nan() || t_s >= d => break,
                    _ => {}
                }
                if !f(t_s, 0)? {
                    break;
                }
                n += 1;
                t_s += self.next_gap(self.rate, rng);
            }
            return Ok(());
        }
        let mut start_s = 0.0_f64;
        for (k, &(rate, d)) in self.stages.iter().enumerate() {
            let end_s = start_s + d;
            if let GapKind::PoissonCount = self.kind {
                if !scaled_phase(rng, start_s, d, (rate * d) as u64, k as u32, &mut f)? {
                    return Ok(());
                }
            } else {
                let mut t_s = start_s;
                while t_s < end_s {
                    if !f(t_s, k as u32)? {
                        return Ok(());
                    }
                    t_s += self.next_gap(rate, rng);
                }
            }
            start_s = end_s;
        }
        Ok(())
    }
}

/// `n` arrivals in `[start_s, start_s + d]` with exponential gaps scaled to sum to `d`
/// (the first after one gap, the last at the end). Two passes over a cloned generator, so
/// no gap list is held. Returns false when `f` asked to stop.
fn scaled_phase(rng: &mut SimRng, start_s: f64, d: f64, n: u64, stage: u32, f: &mut impl FnMut(f64, u32) -> Result<bool>) -> Result<bool> {
    if n == 0 {
        return Ok(true);
    }
    let mut probe = rng.clone();
    let total: f64 = (0..n).map(|_| probe.exponential(1.0)).sum();
    let scale = d / total;
    let mut t = 0.0;
    for _ in 0..n {
        t += rng.exponential(1.0);
        if !f(start_s + t * scale, stage)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Validate the arrival process.
pub(super) fn resolve_arrival(a: &ArrivalSpec) -> Result<ArrivalModel> {
    let kind = a
        .kind
        .as_deref()
        .ok_or_else(|| SimError::config("arrival.kind", format!("required: one of {}", ARRIVAL_KINDS.join(", "))))?;
    if !ARRIVAL_KINDS.contains(&kind) {
        return Err(check::unknown_name("arrival.kind", "arrival kind", kind, ARRIVAL_KINDS));
    }
    let mut stages = Vec::new();
    let rate = match (&a.stages, a.rate) {
        (Some(_), Some(_)) => {
            return Err(SimError::config("arrival.rate", "cannot be combined with arrival.stages (each stage has its own rate)"))
        }
        (None, None) => return Err(SimError::config("arrival.rate", "required (requests per second), or give arrival.stages")),
        (None, Some(rate)) => {
            check::positive("arrival.rate", rate)?;
            rate
        }
        (Some(list), None) => {
            if list.is_empty() {
                return Err(SimError::config("arrival.stages", "must contain at least one stage"));
            }
            let mut expected = 0.0;
            for (i, s) in list.iter().enumerate() {
                let at = |f: &str| format!("arrival.stages[{i}].{f}");
                let rate = s.rate.ok_or_else(|| SimError::config(at("rate"), "required (per second)"))?;
                check::positive(&at("rate"), rate)?;
                let d = s.duration_s.ok_or_else(|| SimError::config(at("duration_s"), "required (seconds)"))?;
                check::positive(&at("duration_s"), d)?;
                expected += rate * d;
                stages.push((rate, d));
            }
            if expected > MAX_REQUESTS as f64 {
                return Err(SimError::config(
                    "arrival.stages",
                    format!("Σ rate × duration_s = {expected} expected arrivals, more than the limit of {MAX_REQUESTS}"),
                ));
            }
            stages.iter().map(|(r, _)| *r).fold(0.0, f64::max)
        }
    };
    if let Some(cap) = a.max_gap_s {
        check::positive("arrival.max_gap_s", cap)?;
        if kind == "poisson_count" {
            return Err(SimError::config("arrival.max_gap_s", "not used by kind 'poisson_count' (its gaps are scaled to the stage)"));
        }
    }
    let kind = match kind {
        "gamma" => {
            let cv = a.cv.ok_or_else(|| SimError::config("arrival.cv", "required for kind 'gamma'"))?;
            check::positive("arrival.cv", cv)?;
            let shape = 1.0 / (cv * cv);
            let min_rate = if stages.is_empty() { rate } else { stages.iter().map(|(r, _)| *r).fold(f64::MAX, f64::min) };
            for r in [rate, min_rate] {
                let scale = 1.0 / (r * shape);
                if !shape.is_finite() || !scale.is_finite() || scale <= 0.0 {
                    return Err(SimError::config(
                        "arrival.cv",
                        format!("cv = {cv} with rate = {r} gives an unrepresentable gamma distribution"),
                    ));
                }
            }
            GapKind::Gamma { cv }
        }
        other => {
            if a.cv.is_some() {
                return Err(SimError::config("arrival.cv", format!("only used by kind 'gamma', not '{other}'")));
            }
            match other {
                "poisson" => GapKind::Poisson,
                "constant" => GapKind::Constant,
                "poisson_count" => GapKind::PoissonCount,
                other => return Err(check::unknown_name("arrival.kind", "arrival kind", other, ARRIVAL_KINDS)),
            }
        }
    };
    Ok(ArrivalModel { kind, rate, stages, max_gap_s: a.max_gap_s })
}
