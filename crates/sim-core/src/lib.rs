//! # sim-core
//!
//! The whole o1sim model in pure Rust: scenario validation, hardware/model catalog, memory
//! planning, execution-time model, workloads, KV-cache managers, scheduling policies, the
//! discrete-event engine and metrics. No I/O and no global state: front ends (PyO3, WASM)
//! hand in scenario text and get data back.

pub mod error;

pub use error::{Result, SimError};

mod api;
pub use api::*;
