//! # sim-core
//!
//! The whole o1sim model in pure Rust: scenario validation, hardware/model catalog, memory
//! planning, execution-time model, workloads, KV-cache managers, scheduling policies, the
//! discrete-event engine and metrics. No I/O and no global state: front ends (PyO3, WASM)
//! hand in scenario text and get data back.

pub mod calib;
pub mod catalog;
pub mod check;
mod client;
pub mod config;
mod disagg;
pub mod engine;
pub mod error;
pub mod fabric;
pub mod frontend;
pub mod json;
pub mod kv;
pub mod limits;
pub mod memory;
pub mod metric_info;
pub mod metrics;
pub mod perf;
pub mod policy;
pub mod prefix;
pub mod request;
pub mod registry;
pub mod rng;
pub mod scaling;
pub mod sched;
pub mod search;
mod steady;
pub mod topo;
pub mod workload;

mod api;

pub use api::*;
pub use error::{panic_message, Result, SimError};

/// The layers below the façade ([`api`]), the model checker ([`check`]) and the registry
/// ([`registry`], which gathers the lower modules' lists) must not import them: the engine reports its state through [`engine::InvariantObserver`], and the types
/// both sides share live in the lower module (`SimOptions` in the engine, `StepRecord` and
/// `TimeSeries` in metrics, `Format` in config). These tests read the sources, so a `use`
/// that brings an import circle back fails here.
#[cfg(test)]
mod layering_tests {
    /// The engine, the modules it is made of, and those the façade builds it from.
    const LOWER: &[(&str, &str)] = &[
        ("engine.rs", include_str!("engine.rs")),
        ("disagg.rs", include_str!("disagg.rs")),
        ("client.rs", include_str!("client.rs")),
        ("steady.rs", include_str!("steady.rs")),
        ("scaling/engine.rs", include_str!("scaling/engine.rs")),
        ("metrics.rs", include_str!("metrics.rs")),
        ("config.rs", include_str!("config.rs")),
        ("sched.rs", include_str!("sched.rs")),
        ("kv.rs", include_str!("kv.rs")),
        ("request.rs", include_str!("request.rs")),
        ("fabric/mod.rs", include_str!("fabric/mod.rs")),
        ("fabric/comm.rs", include_str!("fabric/comm.rs")),
        ("fabric/events.rs", include_str!("fabric/events.rs")),
        ("fabric/links.rs", include_str!("fabric/links.rs")),
        ("fabric/placement.rs", include_str!("fabric/placement.rs")),
        ("fabric/transfers.rs", include_str!("fabric/transfers.rs")),
        ("policy.rs", include_str!("policy.rs")),
        ("registry.rs", include_str!("registry.rs")),
        ("frontend.rs", include_str!("frontend.rs")),
        ("limits.rs", include_str!("limits.rs")),
        ("memory.rs", include_str!("memory.rs")),
    ];

    /// Items of the façade (re-exported at the crate root) that a lower layer could reach
    /// through `crate::…` without naming `api`.
    const FACADE: &[&str] = &[
        "Simulation", "simulate", "SimOptions", "Format", "SimResult", "guard", "validate", "build", "Built",
        "StepRecord", "StepShape", "TimeSeries", "Progress", "RequestColumns",
    ];

    /// Code lines (comments and the trailing `#[cfg(test)]` module skipped) of `src` that
    /// reach up into the façade or the checker.
    fn upward_imports(src: &str) -> Vec<String> {
        let code = src.split("#[cfg(test)]\nmod tests").next().unwrap_or(src);
        let ident = |c: char| c.is_alphanumeric() || c == '_';
        code.lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .filter(|l| {
                l.contains("crate::api") || l.contains("crate::check") || l.contains("crate::registry") ||
                    l.contains("crate::{") ||
                    FACADE.iter().any(|name| {
                        let pat = format!("crate::{name}");
                        l.match_indices(&pat).any(|(i, _)| !l[i + pat.len()..].starts_with(ident))
                    })
            })
            .map(|l| l.trim().to_string())
            .collect()
    }

    #[test]
    fn lower_layers_do_not_import_the_facade_or_the_checker() {
        for (file, src) in LOWER {
            assert!(upward_imports(src).is_empty(), "{file} imports upwards: {:?}", upward_imports(src));
        }
    }

    /// `policy.rs` is the bottom of the graph: the parser (`config.rs`), the engine and the
    /// registry read it, so it may name nothing of the crate but the error helpers.
    #[test]
    fn the_policy_registry_imports_only_the_errors() {
        let src = include_str!("policy.rs");
        let code = src.split("#[cfg(test)]\nmod tests").next().unwrap_or(src);
        let reached: Vec<&str> = code
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .flat_map(|l| l.match_indices("crate::").map(move |(i, _)| &l[i..]))
            .filter(|rest| !rest.starts_with("crate::error"))
            .collect();
        assert!(reached.is_empty(), "policy.rs imports {reached:?}");
    }

    #[test]
    fn the_scan_finds_an_upward_import() {
        for bad in ["use crate::api::SimOptions;", "crate::check::props::check_state(self)", "use crate::{Format};",
            "let f = crate::Format::Json;", "crate::registry::presets()"] {
            assert_eq!(upward_imports(bad).len(), 1, "{bad}");
        }
        // A lower module's own items and doc comments are not upward imports.
        assert!(upward_imports("use crate::metrics::TimeSeries;\nuse crate::FormatX;\n/// [`crate::api::build`]").is_empty());
    }
}
