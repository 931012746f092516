//! The capacity search: the highest arrival rate at which a deployment meets an SLO.
//!
//! A bracketing search on the rate, driven by the front end: it asks [`capacity_next`] which
//! rates to run, runs them (every seed), says which met the SLO, and asks again. The search
//! first brackets the answer by doubling (or halving) from the start rate, then narrows the
//! bracket `[lo, hi)` — `lo` the highest rate that met the SLO below `hi`, the lowest that
//! did not — by evaluating `parallel` evenly spaced rates inside it per round (bisection
//! when `parallel` is 1), until `hi − lo ≤ tolerance · lo`. The answer is `lo`: a rate that
//! met the SLO, within `tolerance` (relative) of the lowest one found failing.
//!
//! Latency grows with load but not strictly (a different rate draws different arrival
//! times), so a point can pass above one that failed: the bracket always uses the lowest
//! failing rate, so the answer is never above a failure.

use serde::{Deserialize, Serialize};

use crate::error::{check, Result, SimError};

/// What the search knows: its settings and every rate run so far.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CapacityRequest {
    /// The first rate to try, req/s (the scenario's own rate).
    pub start_rate: f64,
    /// Relative width of the final bracket (default 0.02: the answer is within 2% of the
    /// lowest failing rate found).
    #[serde(default = "default_tolerance")]
    pub tolerance: f64,
    /// Rates to propose per round (≥ 1): the front end's free workers.
    #[serde(default = "one")]
    pub parallel: u32,
    /// Below this, the SLO counts as unreachable (default `start_rate / 1024`).
    #[serde(default)]
    pub min_rate: Option<f64>,
    /// Above this, the search stops climbing (default `start_rate · 1024`).
    #[serde(default)]
    pub max_rate: Option<f64>,
    /// Rates evaluated so far and whether each met the SLO (on every seed).
    #[serde(default)]
    pub points: Vec<Point>,
}

fn default_tolerance() -> f64 {
    0.02
}

fn one() -> u32 {
    1
}

/// One evaluated rate.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Point {
    pub rate: f64,
    pub meets: bool,
}

/// The search's answer to one request.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum CapacityStep {
    /// Run these rates next.
    Run { rates: Vec<f64> },
    /// Bracketed: `rate` met the SLO, `hi` (≤ `rate · (1 + tolerance)`) did not.
    Found { rate: f64, lo: f64, hi: f64 },
    /// Even `min_rate` misses the SLO: no sustainable rate (`rate` is null).
    None { rate: Option<f64>, lowest_tried: f64, message: String },
    /// Every rate up to `max_rate` met the SLO: the capacity is at least `rate`.
    AboveMax { rate: f64, message: String },
}

/// The next step of the search ([module docs](self)).
pub fn capacity_next(req: &CapacityRequest) -> Result<CapacityStep> {
    check::positive("start_rate", req.start_rate)?;
    check::finite("tolerance", req.tolerance)?;
    if !(req.tolerance > 0.0 && req.tolerance < 1.0) {
        return Err(SimError::config("tolerance", format!("must be in (0, 1) (got {})", req.tolerance)));
    }
    check::in_range("parallel", req.parallel, 1, 1024)?;
    let min_rate = req.min_rate.unwrap_or(req.start_rate / 1024.0);
    let max_rate = req.max_rate.unwrap_or(req.start_rate * 1024.0);
    check::positive("min_rate", min_rate)?;
    check::positive("max_rate", max_rate)?;
    if min_rate > req.start_rate || max_rate < req.start_rate {
        return Err(SimError::config(
            "start_rate",
            format!("must lie in min_rate..=max_rate ({min_rate}..={max_rate}) (got {})", req.start_rate),
        ));
    }
    for (i, p) in req.points.iter().enumerate() {
        check::positive(&format!("points[{i}].rate"), p.rate)?;
    }
    let m = req.parallel as usize;
    if req.points.is_empty() {
        // Around the start: m = 1 tries it alone; more workers also try above and below.
        let below = (m - 1) / 2;
        return Ok(CapacityStep::Run {
            rates: (0..m).map(|k| clamp(req.start_rate * pow2(k as i32 - below as i32), min_rate, max_rate)).collect(),
        });
    }
    let lowest_fail = req.points.iter().filter(|p| !p.meets).map(|p| p.rate).min_by(f64::total_cmp);
    let best_pass_below = |hi: f64| req.points.iter().filter(|p| p.meets && p.rate < hi).map(|p| p.rate).max_by(f64::total_cmp);
    let step = match lowest_fail {
        None => {
            let top = req.points.iter().map(|p| p.rate).max_by(f64::total_cmp).unwrap_or(req.start_rate);
            if top >= max_rate {
                let message = format!("met the SLO at every rate tried, up to max_rate = {max_rate} req/s");
                return Ok(CapacityStep::AboveMax { rate: top, message });
            }
            CapacityStep::Run { rates: ladder(top, 2.0, m, min_rate, max_rate) }
        }
        Some(hi) => match best_pass_below(hi) {
            None => {
                if hi <= min_rate {
                    let message = format!(
                        "no rate meets the SLO: it is missed even at {hi} req/s (min_rate); the latency of a \
                         lone request exceeds a bound, or the bound is too tight for this deployment"
                    );
                    return Ok(CapacityStep::None { rate: None, lowest_tried: hi, message });
                }
                CapacityStep::Run { rates: ladder(hi, 0.5, m, min_rate, max_rate) }
            }
            Some(lo) if hi - lo <= req.tolerance * lo => return Ok(CapacityStep::Found { rate: lo, lo, hi }),
            Some(lo) => CapacityStep::Run { rates: (1..=m).map(|i| lo + (hi - lo) * i as f64 / (m + 1) as f64).collect() },
        },
    };
    Ok(step)
}

/// `m` rates from `from` by repeated factors, clamped, without repeats.
fn ladder(from: f64, factor: f64, m: usize, lo: f64, hi: f64) -> Vec<f64> {
    let mut rates: Vec<f64> = Vec::with_capacity(m);
    let mut r = from;
    for _ in 0..m {
        r = clamp(r * factor, lo, hi);
        if rates.last() != Some(&r) {
            rates.push(r);
        }
    }
    rates
}

fn clamp(r: f64, lo: f64, hi: f64) -> f64 {
    r.max(lo).min(hi)
}

fn pow2(k: i32) -> f64 {
    if k >= 0 {
        (1u64 << k) as f64
    } else {
        1.0 / (1u64 << -k) as f64
    }
}

/// JSON entry point: a [`CapacityRequest`] → a [`CapacityStep`] (`{"status": "run",
/// "rates": [...]}`, `found`, `none` or `above_max`).
pub fn capacity_next_json(request_json: &str) -> Result<String> {
    crate::guard(|| {
        let req: CapacityRequest = super::parse_request(request_json)?;
        let step = capacity_next(&req)?;
        serde_json::to_string(&step).map_err(|e| SimError::Internal { message: e.to_string() })
    })
}
