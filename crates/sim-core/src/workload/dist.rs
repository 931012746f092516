//! Small value types of the workload section that accept a shorthand: a token length that
//! is a number or a distribution table ([`Len`]), a duration in seconds that is a number or
//! a distribution table ([`SecondsSpec`]), and a name that is a string or an integer
//! ([`IdValue`]). Each deserializes by hand so a wrong type is reported at its field
//! ("expected a token count or a table {kind = …}") rather than as serde's "did not match any
//! variant of untagged enum".

use std::fmt;

use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

use super::sample::{resolve_length, tokens_at_least_one, LengthModel};
use super::length::LengthSpec;
use crate::error::{check, Result, SimError};
use crate::rng::SimRng;

/// A token length: a fixed count (`question = 466`) or a distribution (`question = {kind =
/// "normal", mean = 466, std = 40}`, the fields of [`LengthSpec`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Len {
    /// Exactly this many tokens (≥ 1).
    Tokens(u32),
    /// Drawn from this distribution.
    Dist(LengthSpec),
}

impl Len {
    /// Validate at `path` into a sampler.
    pub(super) fn resolve(&self, path: &str) -> Result<LengthModel> {
        match self {
            Len::Tokens(v) => {
                tokens_at_least_one(path, *v)?;
                resolve_length(&LengthSpec::fixed(*v), path)
            }
            Len::Dist(spec) => resolve_length(spec, path),
        }
    }
}

impl<'de> Deserialize<'de> for Len {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Len;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a token count or a distribution table {kind = …}")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> std::result::Result<Len, E> {
                u32::try_from(v).map(Len::Tokens).map_err(|_| E::custom(format!("{v} tokens is out of range")))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> std::result::Result<Len, E> {
                u64::try_from(v).map_err(|_| E::custom(format!("must be >= 1 token (got {v})"))).and_then(|v| self.visit_u64(v))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> std::result::Result<Len, E> {
                if v.fract() == 0.0 && (0.0..=f64::from(u32::MAX)).contains(&v) {
                    Ok(Len::Tokens(v as u32))
                } else {
                    Err(E::custom(format!("a token count must be a whole number (got {v})")))
                }
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> std::result::Result<Len, A::Error> {
                LengthSpec::deserialize(de::value::MapAccessDeserializer::new(map)).map(Len::Dist)
            }
        }
        d.deserialize_any(V)
    }
}

/// A name that is a string or an integer (`prefix_group`, `session_id`). `3` and `"3"`
/// name the same group: identity is the decimal text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum IdValue {
    Int(i64),
    Str(String),
}

impl IdValue {
    /// The canonical text of the name.
    pub fn text(&self) -> std::borrow::Cow<'_, str> {
        match self {
            IdValue::Int(n) => n.to_string().into(),
            IdValue::Str(s) => s.as_str().into(),
        }
    }
}

impl From<&str> for IdValue {
    fn from(s: &str) -> Self {
        IdValue::Str(s.to_string())
    }
}

impl From<i64> for IdValue {
    fn from(n: i64) -> Self {
        IdValue::Int(n)
    }
}

impl<'de> Deserialize<'de> for IdValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = IdValue;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string or an integer")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> std::result::Result<IdValue, E> {
                Ok(IdValue::Int(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> std::result::Result<IdValue, E> {
                i64::try_from(v).map(IdValue::Int).map_err(|_| E::custom(format!("{v} is out of range")))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<IdValue, E> {
                Ok(IdValue::Str(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

/// The longest duration a sample takes: the engine's horizon (10⁹ s).
const MAX_SECONDS: f64 = 1e9;

/// Valid values of a seconds distribution's `kind`.
const SECONDS_KINDS: &[&str] = &["fixed", "uniform", "exponential", "normal", "lognormal"];

/// A duration in seconds (`think_s`): a number (`think_s = 2.5`) or a table. Samples are
/// clamped to ≥ 0 and to `min`/`max` when given.
///
/// | kind          | required       | optional clamps |
/// |---------------|----------------|-----------------|
/// | `fixed`       | `value`        | —               |
/// | `uniform`     | `min`, `max`   | —               |
/// | `exponential` | `mean`         | `min`, `max`    |
/// | `normal`      | `mean`, `std`  | `min`, `max`    |
/// | `lognormal`   | `mean` (arithmetic), `sigma` (of ln) | `min`, `max` |
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum SecondsSpec {
    /// Exactly this many seconds (≥ 0).
    Fixed(f64),
    /// Drawn from this distribution.
    Dist(SecondsDist),
}

/// The table form of a [`SecondsSpec`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecondsDist {
    /// One of `fixed`, `uniform`, `exponential`, `normal`, `lognormal`. Required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// `fixed`: the duration in seconds (≥ 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
    /// Lower bound in seconds (≥ 0): the support's minimum for `uniform`, a clamp otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,
    /// Upper bound in seconds (≥ `min`): the support's maximum for `uniform`, a clamp otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
    /// Mean in seconds (> 0 for `exponential`/`lognormal`, ≥ 0 for `normal`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean: Option<f64>,
    /// `normal`: standard deviation in seconds (≥ 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub std: Option<f64>,
    /// `lognormal`: standard deviation of ln(duration) (≥ 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sigma: Option<f64>,
}

impl<'de> Deserialize<'de> for SecondsSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = SecondsSpec;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a number of seconds or a distribution table {kind = …}")
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> std::result::Result<SecondsSpec, E> {
                Ok(SecondsSpec::Fixed(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> std::result::Result<SecondsSpec, E> {
                Ok(SecondsSpec::Fixed(v as f64))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> std::result::Result<SecondsSpec, E> {
                Ok(SecondsSpec::Fixed(v as f64))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> std::result::Result<SecondsSpec, A::Error> {
                SecondsDist::deserialize(de::value::MapAccessDeserializer::new(map)).map(SecondsSpec::Dist)
            }
        }
        d.deserialize_any(V)
    }
}

/// A validated seconds distribution.
#[derive(Debug, Clone)]
pub(super) struct SecondsModel {
    dist: SecondsDistKind,
    lo: f64,
    hi: f64,
}

#[derive(Debug, Clone)]
enum SecondsDistKind {
    Fixed(f64),
    Uniform { min: f64, max: f64 },
    Exponential { rate: f64 },
    Normal { mean: f64, std: f64 },
    LogNormal { mu: f64, sigma: f64 },
}

impl SecondsModel {
    /// One duration in seconds, within `lo..=hi` (≥ 0).
    pub(super) fn sample(&self, rng: &mut SimRng) -> f64 {
        let x = match self.dist {
            SecondsDistKind::Fixed(v) => v,
            SecondsDistKind::Uniform { min, max } => min + (max - min) * rng.uniform(),
            SecondsDistKind::Exponential { rate } => rng.exponential(rate),
            SecondsDistKind::Normal { mean, std } => mean + std * rng.standard_normal(),
            SecondsDistKind::LogNormal { mu, sigma } => libm::exp(mu + sigma * rng.standard_normal()),
        };
        if x.is_nan() {
            self.lo
        } else {
            x.clamp(self.lo, self.hi).min(MAX_SECONDS)
        }
    }
}

impl SecondsSpec {
    /// Validate at `path` into a sampler.
    pub(super) fn resolve(&self, path: &str) -> Result<SecondsModel> {
        let spec = match self {
            SecondsSpec::Fixed(v) => {
                check::finite(path, *v)?;
                check::in_range(path, *v, 0.0, MAX_SECONDS)?;
                return Ok(SecondsModel { dist: SecondsDistKind::Fixed(*v), lo: 0.0, hi: f64::MAX });
            }
            SecondsSpec::Dist(d) => d,
        };
        let at = |f: &str| format!("{path}.{f}");
        let kind = spec
            .kind
            .as_deref()
            .ok_or_else(|| SimError::config(at("kind"), format!("required: one of {}", SECONDS_KINDS.join(", "))))?;
        let allowed: &[&str] = match kind {
            "fixed" => &["value"],
            "uniform" => &["min", "max"],
            "exponential" => &["mean", "min", "max"],
            "normal" => &["mean", "std", "min", "max"],
            "lognormal" => &["mean", "sigma", "min", "max"],
            other => return Err(check::unknown_name(&at("kind"), "distribution kind", other, SECONDS_KINDS)),
        };
        let present = [
            ("value", spec.value),
            ("min", spec.min),
            ("max", spec.max),
            ("mean", spec.mean),
            ("std", spec.std),
            ("sigma", spec.sigma),
        ];
        for (name, v) in present {
            if let Some(v) = v {
                if !allowed.contains(&name) {
                    return Err(SimError::config(at(name), format!("not used by kind '{kind}' (it takes: {})", allowed.join(", "))));
                }
                check::finite(&at(name), v)?;
            }
        }
        let need = |name: &str, v: Option<f64>| v.ok_or_else(|| SimError::config(at(name), format!("required for kind '{kind}'")));
        let lo = spec.min.unwrap_or(0.0);
        let hi = spec.max.unwrap_or(f64::MAX);
        check::non_negative(&at("min"), lo)?;
        if hi < lo {
            return Err(SimError::config(at("max"), format!("must be >= min ({lo}) (got {hi})")));
        }
        let dist = match kind {
            "fixed" => {
                let v = need("value", spec.value)?;
                check::non_negative(&at("value"), v)?;
                SecondsDistKind::Fixed(v)
            }
            "uniform" => SecondsDistKind::Uniform { min: need("min", spec.min)?, max: need("max", spec.max)? },
            "exponential" => {
                let mean = need("mean", spec.mean)?;
                check::positive(&at("mean"), mean)?;
                SecondsDistKind::Exponential { rate: 1.0 / mean }
            }
            "normal" => {
                let mean = need("mean", spec.mean)?;
                check::non_negative(&at("mean"), mean)?;
                let std = need("std", spec.std)?;
                check::non_negative(&at("std"), std)?;
                SecondsDistKind::Normal { mean, std }
            }
            _ => {
                let mean = need("mean", spec.mean)?;
                check::positive(&at("mean"), mean)?;
                let sigma = need("sigma", spec.sigma)?;
                check::non_negative(&at("sigma"), sigma)?;
                let mu = libm::log(mean) - 0.5 * sigma * sigma;
                check::finite(&at("sigma"), mu)?;
                SecondsDistKind::LogNormal { mu, sigma }
            }
        };
        Ok(SecondsModel { dist, lo, hi })
    }
}
