//! A token-length distribution as the section writes it ([`LengthSpec`]: `prompt`, `output`,
//! and the lengths of the other forms); `sample.rs` validates it into a sampler.

use serde::{Deserialize, Serialize};

/// Valid values of `prompt.kind` / `output.kind` (exported by [`crate::registry`]).
pub const LENGTH_KINDS: &[&str] = &["fixed", "uniform", "normal", "lognormal", "zipf"];

/// A token-length distribution (`prompt` or `output` in the section).
///
/// Samples are rounded to the nearest integer, then clamped to ≥ 1 and to `min`/`max`.
/// Which fields apply depends on `kind`:
///
/// | kind        | required             | optional clamps |
/// |-------------|----------------------|-----------------|
/// | `fixed`     | `value`              | `min`, `max`    |
/// | `uniform`   | `min`, `max` (support, integers inclusive) | — |
/// | `normal`    | `mean`, `std`        | `min`, `max`    |
/// | `lognormal` | `mean`, `sigma`      | `min`, `max`    |
/// | `zipf`      | `min`, `max` (support), `s` | —        |
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LengthSpec {
    /// One of `fixed`, `uniform`, `normal`, `lognormal`, `zipf`. Required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// `fixed`: the length in tokens (≥ 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<u32>,
    /// Lower bound in tokens (≥ 1): the support's minimum for `uniform`/`zipf`, a clamp
    /// otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<u32>,
    /// Upper bound in tokens (≥ `min`): the support's maximum for `uniform`/`zipf`, a clamp
    /// otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<u32>,
    /// `normal`: the mean in tokens; `lognormal`: the *arithmetic* mean in tokens (> 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean: Option<f64>,
    /// `normal`: standard deviation in tokens (≥ 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub std: Option<f64>,
    /// `lognormal`: standard deviation of ln(length), dimensionless (≥ 0). The log-space
    /// mean is derived as `mu = ln(mean) - sigma²/2` so that `mean` stays the arithmetic mean.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sigma: Option<f64>,
    /// `zipf`: exponent (> 0), P(k) ∝ k^-s over the integers `min..=max`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s: Option<f64>,
}

impl LengthSpec {
    /// Every request has exactly `value` tokens.
    pub fn fixed(value: u32) -> Self {
        LengthSpec {
            kind: Some("fixed".into()),
            value: Some(value),
            ..Default::default()
        }
    }

    /// Uniform over the integers `min..=max`.
    pub fn uniform(min: u32, max: u32) -> Self {
        LengthSpec {
            kind: Some("uniform".into()),
            min: Some(min),
            max: Some(max),
            ..Default::default()
        }
    }

    /// Normal with `mean` and `std` in tokens.
    pub fn normal(mean: f64, std: f64) -> Self {
        LengthSpec {
            kind: Some("normal".into()),
            mean: Some(mean),
            std: Some(std),
            ..Default::default()
        }
    }

    /// Log-normal with arithmetic `mean` in tokens and log-space `sigma`.
    pub fn lognormal(mean: f64, sigma: f64) -> Self {
        LengthSpec {
            kind: Some("lognormal".into()),
            mean: Some(mean),
            sigma: Some(sigma),
            ..Default::default()
        }
    }

    /// Zipf over `min..=max` with exponent `s`.
    pub fn zipf(min: u32, max: u32, s: f64) -> Self {
        LengthSpec {
            kind: Some("zipf".into()),
            min: Some(min),
            max: Some(max),
            s: Some(s),
            ..Default::default()
        }
    }

    /// The same distribution with clamps `min`/`max` (tokens) set.
    pub fn clamped(mut self, min: Option<u32>, max: Option<u32>) -> Self {
        self.min = min;
        self.max = max;
        self
    }

    /// `(field name, present)` in a fixed order, for the "field not used by this kind" check.
    pub(super) fn present_fields(&self) -> [(&'static str, bool); 7] {
        [
            ("value", self.value.is_some()),
            ("min", self.min.is_some()),
            ("max", self.max.is_some()),
            ("mean", self.mean.is_some()),
            ("std", self.std.is_some()),
            ("sigma", self.sigma.is_some()),
            ("s", self.s.is_some()),
        ]
    }
}
