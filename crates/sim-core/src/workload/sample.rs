//! Resolved workload models and their samplers (validated specs → numbers).

use super::*;

/// The validated, typed form of a [`WorkloadSpec`].
pub(super) enum Resolved {
    /// An explicit list, already converted and sorted.
    Explicit(Vec<RequestSpec>),
    /// A generated workload's model.
    Generated(Generated),
}

/// When generation stops.
#[derive(Debug, Clone, Copy)]
pub(super) enum Stop {
    /// After this many requests.
    Count(u64),
    /// At the first arrival at or after this time (seconds).
    Duration(f64),
}

/// The typed inter-arrival gap distribution (seconds).
#[derive(Debug, Clone, Copy)]
pub(super) enum Gap {
    Poisson { rate: f64 },
    Gamma { shape: f64, scale: f64 },
    Constant { gap_s: f64 },
}

#[derive(Debug, Clone, Copy)]
pub(super) struct ArrivalModel {
    /// Mean rate, requests per second (for the duration-mode size check).
    pub(super) rate: f64,
    pub(super) gap: Gap,
    /// Cap on each gap, seconds.
    pub(super) max_gap_s: Option<f64>,
}

impl ArrivalModel {
    /// The next inter-arrival gap in seconds (≥ 0).
    pub(super) fn next_gap(&self, rng: &mut SimRng) -> f64 {
        let g = match self.gap {
            Gap::Poisson { rate } => rng.exponential(rate),
            Gap::Gamma { shape, scale } => rng.gamma(shape, scale),
            Gap::Constant { gap_s } => gap_s,
        };
        match self.max_gap_s {
            Some(cap) if g > cap => cap,
            _ => g,
        }
    }
}

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

#[derive(Debug, Clone)]
pub(super) struct Generated {
    pub(super) arrival: ArrivalModel,
    pub(super) stop: Stop,
    pub(super) prompt: LengthModel,
    pub(super) output: LengthModel,
    pub(super) priority: i32,
}

impl Generated {
    pub(super) fn generate(&self, seed: u64) -> Result<Vec<RequestSpec>> {
        let mut arrivals = SimRng::stream(seed, STREAM_ARRIVALS);
        let mut prompts = SimRng::stream(seed, STREAM_PROMPT);
        let mut outputs = SimRng::stream(seed, STREAM_OUTPUT);
        let capacity = match self.stop {
            Stop::Count(n) => n,
            Stop::Duration(d) => (self.arrival.rate * d).min(MAX_REQUESTS as f64) as u64,
        };
        let mut out = Vec::with_capacity(capacity as usize);
        let mut t_s = 0.0_f64;
        loop {
            let n = out.len() as u64;
            match self.stop {
                Stop::Count(limit) if n >= limit => break,
                Stop::Duration(d) if t_s.is_nan() || t_s >= d => break,
                Stop::Duration(_) if n >= MAX_REQUESTS => {
                    return Err(SimError::config(
                        "duration_s",
                        format!("the arrival process produced more than {MAX_REQUESTS} requests in this duration"),
                    ))
                }
                _ => {}
            }
            out.push(RequestSpec::new(
                n as u32,
                seconds_to_ns(t_s),
                self.prompt.sample(&mut prompts),
                self.output.sample(&mut outputs),
                self.priority,
            ));
            t_s += self.arrival.next_gap(&mut arrivals);
        }
        Ok(out)
    }
}

/// Seconds (f64) to integer nanoseconds, rounded; saturates at the u64 range.
pub(super) fn seconds_to_ns(t_s: f64) -> u64 {
    (t_s * 1e9).round() as u64
}

/// Validate the arrival process.
pub(super) fn resolve_arrival(a: &ArrivalSpec) -> Result<ArrivalModel> {
    let kind = a.kind.as_deref().ok_or_else(|| {
        SimError::config(
            "arrival.kind",
            format!("required: one of {}", ARRIVAL_KINDS.join(", ")),
        )
    })?;
    if !ARRIVAL_KINDS.contains(&kind) {
        return Err(check::unknown_name(
            "arrival.kind",
            "arrival kind",
            kind,
            ARRIVAL_KINDS,
        ));
    }
    let rate = a
        .rate
        .ok_or_else(|| SimError::config("arrival.rate", "required (requests per second)"))?;
    check::positive("arrival.rate", rate)?;
    if let Some(cap) = a.max_gap_s {
        check::positive("arrival.max_gap_s", cap)?;
    }
    let gap = match kind {
        "gamma" => {
            let cv =
                a.cv.ok_or_else(|| SimError::config("arrival.cv", "required for kind 'gamma'"))?;
            check::positive("arrival.cv", cv)?;
            let shape = 1.0 / (cv * cv);
            let scale = 1.0 / (rate * shape);
            if !shape.is_finite() || !scale.is_finite() || scale <= 0.0 {
                return Err(SimError::config(
                    "arrival.cv",
                    format!(
                        "cv = {cv} with rate = {rate} gives an unrepresentable gamma distribution"
                    ),
                ));
            }
            Gap::Gamma { shape, scale }
        }
        other => {
            if a.cv.is_some() {
                return Err(SimError::config(
                    "arrival.cv",
                    format!("only used by kind 'gamma', not '{other}'"),
                ));
            }
            if other == "poisson" {
                Gap::Poisson { rate }
            } else {
                Gap::Constant { gap_s: 1.0 / rate }
            }
        }
    };
    Ok(ArrivalModel {
        rate,
        gap,
        max_gap_s: a.max_gap_s,
    })
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

/// Validate an explicit list and convert it to sorted [`RequestSpec`]s.
pub(super) fn resolve_explicit(list: &[ExplicitRequest], max_model_len: u32) -> Result<Vec<RequestSpec>> {
    if list.is_empty() {
        return Err(SimError::config(
            "requests",
            "must contain at least one request",
        ));
    }
    if list.len() as u64 > MAX_REQUESTS {
        return Err(SimError::config(
            "requests",
            format!(
                "too many requests ({}); the limit is {MAX_REQUESTS}",
                list.len()
            ),
        ));
    }
    let mut out = Vec::with_capacity(list.len());
    for (i, r) in list.iter().enumerate() {
        let path = |field: &str| format!("requests[{i}].{field}");
        let arrival_ms = r
            .arrival_ms
            .ok_or_else(|| SimError::config(path("arrival_ms"), "required (milliseconds)"))?;
        check::non_negative(&path("arrival_ms"), arrival_ms)?;
        let prompt = r
            .prompt_tokens
            .ok_or_else(|| SimError::config(path("prompt_tokens"), "required"))?;
        tokens_at_least_one(&path("prompt_tokens"), prompt)?;
        let output = r
            .output_tokens
            .ok_or_else(|| SimError::config(path("output_tokens"), "required"))?;
        tokens_at_least_one(&path("output_tokens"), output)?;
        let total = u64::from(prompt) + u64::from(output);
        if total > u64::from(max_model_len) {
            return Err(SimError::config(
                path("prompt_tokens"),
                format!(
                    "prompt_tokens + output_tokens = {total} exceeds the model's max_model_len ({max_model_len})"
                ),
            ));
        }
        out.push(RequestSpec::new(i as u32, (arrival_ms * 1e6).round() as u64, prompt, output, r.priority.unwrap_or(0)));
    }
    // Stable order: by arrival, ties by list position.
    out.sort_by_key(|r| (r.arrival_ns, r.id));
    Ok(out)
}
