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
pub mod metrics;
pub mod perf;
pub mod prefix;
pub mod request;
pub mod rng;
pub mod scaling;
pub mod sched;
pub mod search;
mod steady;
pub mod topo;
pub mod workload;

mod api;

pub use api::*;
pub use error::{Result, SimError};
