//! What the JSON-scenario integration tests share: run a scenario, or expect its error.

use serde_json::Value;
use sim_core::{simulate, Format, SimError, SimOptions, SimResult};

/// Run `v` to its result (a failure panics with the error).
pub fn run(v: &Value) -> SimResult {
    simulate(&v.to_string(), Format::Json, SimOptions::default()).unwrap_or_else(|e| panic!("{e}"))
}

/// The error `v` must end in (a run that succeeds panics).
pub fn err(v: &Value) -> SimError {
    match simulate(&v.to_string(), Format::Json, SimOptions::default()) {
        Ok(_) => panic!("should fail: {v}"),
        Err(e) => e,
    }
}
