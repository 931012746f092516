//! One error type for the whole core. Each variant is a *kind* that the front ends map to
//! its own exception class (Python) or `Error.name` (JS), so callers can catch precisely.

use std::fmt;

/// Every failure the core can report. Nothing in the core panics on bad input; it returns
/// one of these instead.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SimError {
    /// The scenario is malformed or violates a rule. `path` is the dotted field path
    /// (`scheduler.block_size`, `workload.requests[3].prompt_tokens`), empty for the whole
    /// document (e.g. a syntax error).
    #[error("{}", format_config(path, message))]
    Config { path: String, message: String },
    /// The scenario is well formed but cannot run on the hardware it names (a model larger
    /// than the GPUs, no room for a single KV block).
    #[error("{message}")]
    Infeasible { message: String },
    /// The simulation stopped making progress (work pending, nothing can ever run). A
    /// correct policy never produces this; it is reported instead of hanging.
    #[error("{message}")]
    Stalled { message: String },
    /// The run would need more than the scenario's `limits` allow (memory estimated before
    /// allocating, wall time), or the input is larger than o1sim reads. `path` names the
    /// field that drives it (`workload.num_requests`, `scheduler.num_gpu_blocks`,
    /// `limits.max_seconds`; empty for the whole input).
    #[error("{}", format_config(path, message))]
    Resource { path: String, message: String },
    /// A bug in the core (a caught panic, a broken invariant).
    #[error("internal error: {message}")]
    Internal { message: String },
}

fn format_config(path: &str, message: &str) -> String {
    if path.is_empty() {
        message.to_string()
    } else {
        format!("{path}: {message}")
    }
}

impl SimError {
    /// A configuration error at `path`.
    pub fn config(path: impl Into<String>, message: impl fmt::Display) -> Self {
        SimError::Config { path: path.into(), message: message.to_string() }
    }

    /// A resource error at `path` (see [`SimError::Resource`]).
    pub fn resource(path: impl Into<String>, message: impl fmt::Display) -> Self {
        SimError::Resource { path: path.into(), message: message.to_string() }
    }

    /// The class name the front ends use for this kind (`ConfigError`, …).
    pub fn kind_name(&self) -> &'static str {
        match self {
            SimError::Config { .. } => "ConfigError",
            SimError::Infeasible { .. } => "InfeasibleError",
            SimError::Stalled { .. } => "StallError",
            SimError::Resource { .. } => "ResourceError",
            SimError::Internal { .. } => "InternalError",
        }
    }

    /// The field path of a configuration or resource error, if any.
    pub fn path(&self) -> Option<&str> {
        match self {
            SimError::Config { path, .. } | SimError::Resource { path, .. } => Some(path),
            _ => None,
        }
    }

    /// Prefix the path of a configuration error with `prefix` (used when a sub-section is
    /// validated on its own and then placed in the scenario).
    pub fn under(self, prefix: &str) -> Self {
        let join = |path: String| match (prefix.is_empty(), path.is_empty()) {
            (true, _) => path,
            (false, true) => prefix.to_string(),
            (false, false) if path.starts_with('[') => format!("{prefix}{path}"),
            (false, false) => format!("{prefix}.{path}"),
        };
        match self {
            SimError::Config { path, message } => SimError::Config { path: join(path), message },
            // A resource error names its field too (one found inside a section).
            SimError::Resource { path, message } => SimError::Resource { path: join(path), message },
            other => other,
        }
    }
}

/// The text of a caught panic's payload: `panic!` gives a `&str` or a `String`; any other
/// payload (`std::panic::panic_any`) reads "unknown panic payload". Every front end turns a
/// panic into an `InternalError` with it (pass `&*payload`, not the `Box` itself, which
/// would be taken for the payload).
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s
    } else {
        "unknown panic payload"
    }
}

/// Result alias used across the core.
pub type Result<T, E = SimError> = std::result::Result<T, E>;

/// Small validation helpers: each returns a `Config` error naming `path` and the rule.
pub mod check {
    use super::{Result, SimError};

    /// `value` must be finite and > 0.
    pub fn positive(path: &str, value: f64) -> Result<()> {
        finite(path, value)?;
        if value <= 0.0 {
            return Err(SimError::config(path, format!("must be > 0 (got {value})")));
        }
        Ok(())
    }

    /// `value` must be finite and >= 0.
    pub fn non_negative(path: &str, value: f64) -> Result<()> {
        finite(path, value)?;
        if value < 0.0 {
            return Err(SimError::config(path, format!("must be >= 0 (got {value})")));
        }
        Ok(())
    }

    /// `value` must be a finite number (not NaN, not ±inf).
    pub fn finite(path: &str, value: f64) -> Result<()> {
        if !value.is_finite() {
            return Err(SimError::config(path, format!("must be a finite number (got {value})")));
        }
        Ok(())
    }

    /// `value` must lie in `lo..=hi`.
    pub fn in_range<T: PartialOrd + std::fmt::Display>(path: &str, value: T, lo: T, hi: T) -> Result<()> {
        if value < lo || value > hi {
            return Err(SimError::config(path, format!("must be in {lo}..={hi} (got {value})")));
        }
        Ok(())
    }

    /// An unknown name: the error lists the closest valid names.
    pub fn unknown_name(path: &str, what: &str, got: &str, valid: &[&str]) -> SimError {
        let mut scored: Vec<(f64, &str)> =
            valid.iter().map(|v| (strsim::normalized_damerau_levenshtein(got, v), *v)).collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(b.1)));
        let close: Vec<&str> = scored.iter().filter(|(s, _)| *s >= 0.4).take(3).map(|(_, v)| *v).collect();
        let hint = if close.is_empty() {
            format!("valid: {}", valid.join(", "))
        } else {
            format!("did you mean {}? (valid: {})", close.join(" or "), valid.join(", "))
        };
        SimError::config(path, format!("unknown {what} '{got}'; {hint}"))
    }
}

#[cfg(test)]
mod tests {
    use super::panic_message;

    #[test]
    fn panic_message_reads_str_and_string_payloads() {
        let caught = |f: fn()| std::panic::catch_unwind(f).unwrap_err();
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let literal = caught(|| panic!("static text"));
        let formatted = caught(|| panic!("formatted {}", 42));
        let other = caught(|| std::panic::panic_any(7u32));
        std::panic::set_hook(prev);
        assert_eq!(panic_message(&*literal), "static text");
        assert_eq!(panic_message(&*formatted), "formatted 42");
        assert_eq!(panic_message(&*other), "unknown panic payload");
    }
}
