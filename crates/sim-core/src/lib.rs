//! # sim-core
//!
//! The whole o1sim model in pure Rust: scenario validation, hardware/model catalog, memory
//! planning, execution-time model, workloads, KV-cache managers, scheduling policies, the
//! discrete-event engine and metrics. No I/O and no global state: front ends (PyO3, WASM)
//! hand in scenario text and get data back.

pub mod calib;
pub mod catalog;
pub mod check;
pub mod config;
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
pub mod num;
pub mod perf;
pub mod policy;
pub mod request;
pub mod registry;
pub mod rng;
pub mod scaling;
pub mod sched;
pub mod search;
pub mod topo;
pub mod workload;

mod api;

pub use api::*;
pub use error::{panic_message, Result, SimError};

// The module graph (no import circle, no import up a layer) is checked from the sources by
// `tests/module_graph.rs`.
