//! Resolved workload models and their samplers (validated specs → numbers).

use super::arrival::{ArrivalModel, Stop};
use super::length::{LengthSpec, LENGTH_KINDS};
use super::request::{RequestSpec, MAX_REQUESTS};
use crate::error::{check, Result, SimError};
use crate::rng::SimRng;

/// RNG stream ids: arrivals, prompt lengths and output lengths draw from independent streams
/// of the run seed, so changing one distribution never shifts the others.
pub(super) const STREAM_ARRIVALS: u64 = 1;
pub(super) const STREAM_PROMPT: u64 = 2;
pub(super) const STREAM_OUTPUT: u64 = 3;

/// The typed length distribution (before rounding and clamping).
#[derive(Debug, Clone)]
pub(super) enum LengthDist {
    Fixed(u32),
    Uniform { min: u32, max: u32 },
    Normal { mean: f64, std: f64 },
    LogNormal { mu: f64, sigma: f64 },
    Zipf(Zipf),
}

#[derive(Debug, Clone)]
pub(super) struct LengthModel {
    pub(super) dist: LengthDist,
    /// Inclusive clamp, tokens (lo ≥ 1, lo ≤ hi).
    pub(super) lo: u32,
    pub(super) hi: u32,
}

impl LengthModel {
    /// The shortest length it can give, tokens.
    pub(super) fn min_len(&self) -> u32 {
        match &self.dist {
            LengthDist::Fixed(v) => (*v).clamp(self.lo, self.hi),
            LengthDist::Uniform { min, .. } => *min,
            LengthDist::Zipf(z) => z.min,
            LengthDist::Normal { .. } | LengthDist::LogNormal { .. } => self.lo,
        }
    }

    /// One length in tokens, within `lo..=hi`.
    pub(super) fn sample(&self, rng: &mut SimRng) -> u32 {
        let x = match &self.dist {
            LengthDist::Fixed(v) => return (*v).clamp(self.lo, self.hi),
            LengthDist::Uniform { min, max } => return rng.range_u32(*min, *max),
            LengthDist::Zipf(z) => return z.sample(rng),
            LengthDist::Normal { mean, std } => mean + std * rng.standard_normal(),
            LengthDist::LogNormal { mu, sigma } => libm::exp(mu + sigma * rng.standard_normal()),
        };
        round_clamp(x, self.lo, self.hi)
    }
}

/// Round a real-valued length to the nearest integer and clamp it to `lo..=hi` (NaN → lo).
pub(super) fn round_clamp(x: f64, lo: u32, hi: u32) -> u32 {
    if x.is_nan() {
        return lo;
    }
    let r = x.round();
    if r <= f64::from(lo) {
        lo
    } else if r >= f64::from(hi) {
        hi
    } else {
        r as u32
    }
}

/// Zipf sampler over the integers `min..=max`, P(k) ∝ k^-s, by rejection-inversion
/// (Hörmann & Derflinger 1996): O(1) memory and expected O(1) time for any support size,
/// exact in distribution. Works for every s > 0, including s = 1 (the helper functions
/// below are the continuous limits of `(e^x - 1)/x` and `ln(1 + x)/x` near 0).
#[derive(Debug, Clone)]
pub(super) struct Zipf {
    pub(super) min: u32,
    pub(super) max: u32,
    pub(super) s: f64,
    /// H(min + 1/2) - h(min): lower end of the sampled hat area.
    pub(super) h_lo: f64,
    /// H(max + 1/2): upper end of the sampled hat area.
    pub(super) h_hi: f64,
}

impl Zipf {
    pub(super) fn new(min: u32, max: u32, s: f64) -> Self {
        let mut z = Zipf {
            min,
            max,
            s,
            h_lo: 0.0,
            h_hi: 0.0,
        };
        z.h_lo = z.big_h(f64::from(min) + 0.5) - z.h(f64::from(min));
        z.h_hi = z.big_h(f64::from(max) + 0.5);
        z
    }

    /// The unnormalized density h(x) = x^-s.
    pub(super) fn h(&self, x: f64) -> f64 {
        libm::exp(-self.s * libm::log(x))
    }

    /// H(x) = ∫ h = (x^(1-s) - 1)/(1-s) (ln x when s = 1), computed stably.
    pub(super) fn big_h(&self, x: f64) -> f64 {
        let lx = libm::log(x);
        expm1_over_x((1.0 - self.s) * lx) * lx
    }

    /// The inverse of H.
    pub(super) fn big_h_inv(&self, y: f64) -> f64 {
        let mut t = y * (1.0 - self.s);
        if t < -1.0 {
            // Only reachable through rounding; keeps the logarithm finite.
            t = -1.0;
        }
        libm::exp(log1p_over_x(t) * y)
    }

    pub(super) fn sample(&self, rng: &mut SimRng) -> u32 {
        loop {
            // u is uniform over (h_lo, h_hi]: the hat area of all k in min..=max.
            let u = self.h_hi + rng.uniform() * (self.h_lo - self.h_hi);
            let x = self.big_h_inv(u);
            let k_f = (x + 0.5).floor();
            let k = if k_f <= f64::from(self.min) {
                self.min
            } else if k_f >= f64::from(self.max) {
                self.max
            } else {
                k_f as u32
            };
            // Accept when u falls in the part of k's hat slice whose area is exactly h(k).
            // For k = min this always holds (u > h_lo).
            let kf = f64::from(k);
            if u >= self.big_h(kf + 0.5) - self.h(kf) {
                return k;
            }
        }
    }
}

/// (e^x - 1)/x, continuous at 0.
pub(super) fn expm1_over_x(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        libm::expm1(x) / x
    } else {
        1.0 + x * 0.5 * (1.0 + x / 3.0 * (1.0 + 0.25 * x))
    }
}

/// ln(1 + x)/x, continuous at 0.
pub(super) fn log1p_over_x(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        libm::log1p(x) / x
    } else {
        1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x))
    }
}

/// A plain generated workload: an arrival process and two length distributions.
#[derive(Debug, Clone)]
pub(super) struct Generated {
    pub(super) arrival: ArrivalModel,
    pub(super) stop: Stop,
    pub(super) prompt: LengthModel,
    pub(super) output: LengthModel,
    pub(super) priority: i32,
}

impl Generated {
    /// The requests; at most `cap` (≤ [`MAX_REQUESTS`]: past it a `ResourceError`).
    pub(super) fn generate(&self, seed: u64, cap: u64) -> Result<Vec<RequestSpec>> {
        let mut arrivals = SimRng::stream(seed, STREAM_ARRIVALS);
        let mut prompts = SimRng::stream(seed, STREAM_PROMPT);
        let mut outputs = SimRng::stream(seed, STREAM_OUTPUT);
        let mut out = Vec::with_capacity(self.arrival.expected(self.stop) as usize);
        let bound = match self.stop {
            Stop::Stages => "arrival.stages",
            _ => "duration_s",
        };
        self.arrival.for_each(&mut arrivals, self.stop, |t_s, _| {
            let n = out.len() as u64;
            if n >= cap {
                return Err(too_many(bound, cap));
            }
            out.push(RequestSpec::new(
                n as u32,
                seconds_to_ns(t_s),
                self.prompt.sample(&mut prompts),
                self.output.sample(&mut outputs),
                self.priority,
            ));
            Ok(true)
        })?;
        Ok(out)
    }
}

/// The error for an arrival process that produced more than `cap` requests: a config error
/// at the hard limit, a resource error below it (the run's memory limit set it).
pub(super) fn too_many(field: &str, cap: u64) -> SimError {
    if cap >= MAX_REQUESTS {
        SimError::config(field, format!("the arrival process produced more than {MAX_REQUESTS} requests in this duration"))
    } else {
        SimError::resource(
            field,
            format!(
                "the arrival process produced more than {cap} requests, the most limits.max_memory_gib holds \
                 (a random process can far exceed its expected count: lower arrival.cv or the rates, or raise the limit)"
            ),
        )
    }
}

/// Seconds (f64) to integer nanoseconds, rounded; saturates at the u64 range.
pub(super) fn seconds_to_ns(t_s: f64) -> u64 {
    (t_s * 1e9).round() as u64
}

/// A required token count (≥ 1) at `prefix.name`.
pub(super) fn required_tokens(prefix: &str, name: &str, value: Option<u32>, kind: &str) -> Result<u32> {
    let v = value.ok_or_else(|| {
        SimError::config(
            format!("{prefix}.{name}"),
            format!("required for kind '{kind}'"),
        )
    })?;
    tokens_at_least_one(&format!("{prefix}.{name}"), v)?;
    Ok(v)
}

/// A token count must be ≥ 1.
pub(super) fn tokens_at_least_one(path: &str, v: u32) -> Result<()> {
    if v < 1 {
        return Err(SimError::config(
            path,
            format!("must be >= 1 token (got {v})"),
        ));
    }
    Ok(())
}

/// A required finite real at `prefix.name`.
pub(super) fn required_real(prefix: &str, name: &str, value: Option<f64>, kind: &str) -> Result<f64> {
    value.ok_or_else(|| {
        SimError::config(
            format!("{prefix}.{name}"),
            format!("required for kind '{kind}'"),
        )
    })
}

/// `min <= max`, reported at `prefix.max`.
pub(super) fn ordered(prefix: &str, min: u32, max: u32) -> Result<()> {
    if min > max {
        return Err(SimError::config(
            format!("{prefix}.max"),
            format!("must be >= min ({min}) (got {max})"),
        ));
    }
    Ok(())
}

/// Validate a length distribution found at `prefix` (`prompt` or `output`).
pub(super) fn resolve_length(spec: &LengthSpec, prefix: &str) -> Result<LengthModel> {
    let kind = spec.kind.as_deref().ok_or_else(|| {
        SimError::config(
            format!("{prefix}.kind"),
            format!("required: one of {}", LENGTH_KINDS.join(", ")),
        )
    })?;
    // The list is the one exported to the front ends: a kind must be in it to be accepted.
    if !LENGTH_KINDS.contains(&kind) {
        return Err(check::unknown_name(&format!("{prefix}.kind"), "length distribution kind", kind, LENGTH_KINDS));
    }
    let allowed: &[&str] = match kind {
        "fixed" => &["value", "min", "max"],
        "uniform" => &["min", "max"],
        "normal" => &["mean", "std", "min", "max"],
        "lognormal" => &["mean", "sigma", "min", "max"],
        "zipf" => &["min", "max", "s"],
        other => {
            return Err(check::unknown_name(
                &format!("{prefix}.kind"),
                "length distribution kind",
                other,
                LENGTH_KINDS,
            ))
        }
    };
    if let Some((name, _)) = spec
        .present_fields()
        .iter()
        .find(|(name, present)| *present && !allowed.contains(name))
    {
        return Err(SimError::config(
            format!("{prefix}.{name}"),
            format!(
                "not used by kind '{kind}' (it takes: {})",
                allowed.join(", ")
            ),
        ));
    }

    // Clamps for the kinds where min/max are optional.
    let clamps = || -> Result<(u32, u32)> {
        let lo = spec.min.unwrap_or(1);
        let hi = spec.max.unwrap_or(u32::MAX);
        if spec.min.is_some() {
            tokens_at_least_one(&format!("{prefix}.min"), lo)?;
        }
        if spec.max.is_some() {
            tokens_at_least_one(&format!("{prefix}.max"), hi)?;
        }
        ordered(prefix, lo, hi)?;
        Ok((lo, hi))
    };

    let (dist, lo, hi) = match kind {
        "fixed" => {
            let v = required_tokens(prefix, "value", spec.value, kind)?;
            let (lo, hi) = clamps()?;
            (LengthDist::Fixed(v), lo, hi)
        }
        "uniform" => {
            let min = required_tokens(prefix, "min", spec.min, kind)?;
            let max = required_tokens(prefix, "max", spec.max, kind)?;
            ordered(prefix, min, max)?;
            (LengthDist::Uniform { min, max }, min, max)
        }
        "normal" => {
            let mean = required_real(prefix, "mean", spec.mean, kind)?;
            check::positive(&format!("{prefix}.mean"), mean)?;
            let std = required_real(prefix, "std", spec.std, kind)?;
            check::non_negative(&format!("{prefix}.std"), std)?;
            let (lo, hi) = clamps()?;
            (LengthDist::Normal { mean, std }, lo, hi)
        }
        "lognormal" => {
            let mean = required_real(prefix, "mean", spec.mean, kind)?;
            check::positive(&format!("{prefix}.mean"), mean)?;
            let sigma = required_real(prefix, "sigma", spec.sigma, kind)?;
            check::non_negative(&format!("{prefix}.sigma"), sigma)?;
            let mu = libm::log(mean) - 0.5 * sigma * sigma;
            check::finite(&format!("{prefix}.sigma"), mu).map_err(|_| {
                SimError::config(
                    format!("{prefix}.sigma"),
                    format!("too large (got {sigma})"),
                )
            })?;
            let (lo, hi) = clamps()?;
            (LengthDist::LogNormal { mu, sigma }, lo, hi)
        }
        _ => {
            // zipf (the kind was matched above)
            let min = required_tokens(prefix, "min", spec.min, kind)?;
            let max = required_tokens(prefix, "max", spec.max, kind)?;
            ordered(prefix, min, max)?;
            let s = required_real(prefix, "s", spec.s, kind)?;
            check::positive(&format!("{prefix}.s"), s)?;
            (LengthDist::Zipf(Zipf::new(min, max, s)), min, max)
        }
    };
    Ok(LengthModel { dist, lo, hi })
}
