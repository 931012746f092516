//! # sim-wasm
//!
//! The WASM binding of `sim-core` for `web/o1sim.js` (browser page, Web Worker, Node). It
//! is glue only, with a tiny hand-written ABI instead of wasm-bindgen: JS copies UTF-8 input
//! into memory from [`o1_alloc`], calls one `o1_*` function, which returns 0 (ok) or 1
//! (error), and reads the output text at [`o1_out_ptr`] / [`o1_out_len`]. An error's output
//! is the envelope `{"error": {"name": "ConfigError", "message": …, "field": …}}`, `name`
//! being the class name the Python exceptions use; JS rethrows it as an `Error` of that
//! name. Successful output is the core's own text (`simulate` gives exactly the bytes of
//! Python's `Result.to_json()`).
//!
//! No panic may trap the module: every entry point runs under `catch_unwind` (real
//! unwinding when built with WASM exception handling, see the Makefile), and a panic hook
//! leaves an `InternalError` envelope in the output buffer first, so even a build that
//! aborts lets JS report the message and re-instantiate.
//!
//! The safe functions ([`simulate`], [`validate`], …) hold the logic and are what the native
//! tests exercise; the `extern "C"` exports only move bytes.

use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};

use sim_core::{self as core, Format, SimError, SimOptions};

/// Outcome of one call: `Ok(text)` or an error envelope.
pub type Outcome = Result<String, String>;

/// The JSON error envelope of `e`.
pub fn envelope(e: &SimError) -> String {
    serde_json::json!({"error": {
        "name": e.kind_name(),
        "message": e.to_string(),
        "field": e.path(),
    }})
    .to_string()
}

fn internal(message: impl Into<String>) -> SimError {
    SimError::Internal { message: message.into() }
}

/// Format code of the ABI: 0 = JSON, 1 = TOML.
pub fn format_of(code: u32) -> Result<Format, SimError> {
    match code {
        0 => Ok(Format::Json),
        1 => Ok(Format::Toml),
        other => Err(SimError::config("format", format!("must be 0 (json) or 1 (toml) (got {other})"))),
    }
}

fn text_of(bytes: &[u8]) -> Result<&str, SimError> {
    core::limits::check_input(bytes.len(), "the input")?;
    std::str::from_utf8(bytes).map_err(|e| SimError::config("", format!("input is not UTF-8: {e}")))
}

/// Run `f` with any panic turned into an `InternalError` envelope.
fn guarded(f: impl FnOnce() -> Result<String, SimError>) -> Outcome {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(text)) => Ok(text),
        Ok(Err(e)) => Err(envelope(&e)),
        Err(payload) => {
            Err(envelope(&internal(format!("panic in the simulation core: {}", core::panic_message(&*payload)))))
        }
    }
}

/// Simulate a scenario; the result JSON is the core's `SimResult::to_json()`.
pub fn simulate(input: &[u8], format: u32) -> Outcome {
    guarded(|| {
        let text = text_of(input)?;
        Ok(core::simulate(text, format_of(format)?, SimOptions::default())?.to_json())
    })
}

/// Simulate a scenario recording every scheduler step; the output is the steps JSON
/// (`[{replica, start_ms, end_ms, scheduled, preempted, finished, free_blocks_after,
/// shape}]`, Python's `Result.steps`). The run is the one [`simulate`] makes.
pub fn simulate_steps(input: &[u8], format: u32) -> Outcome {
    guarded(|| {
        let text = text_of(input)?;
        let options = SimOptions { record_steps: true, ..SimOptions::default() };
        Ok(core::simulate(text, format_of(format)?, options)?.steps_json())
    })
}

/// The anatomy of one recorded step (a step of [`simulate_steps`]' output, JSON) under the
/// run's scenario: the core's `{step_ms, graph, pipelined, sms, kernels: {...},
/// recorded_ms}` (Python's `Result.step_anatomy`).
pub fn step_anatomy(scenario: &[u8], format: u32, step: &[u8]) -> Outcome {
    guarded(|| core::step_anatomy(text_of(scenario)?, format_of(format)?, text_of(step)?))
}

/// Validate a scenario: `{"scenario": resolved, "deployment": plan}`.
pub fn validate(input: &[u8], format: u32) -> Outcome {
    guarded(|| core::validate(text_of(input)?, format_of(format)?))
}

/// The catalog (GPUs, models, policies, routers, bug names) as JSON.
pub fn presets() -> Outcome {
    guarded(|| {
        let mut v: serde_json::Value =
            serde_json::from_str(&core::presets_json()).map_err(|e| internal(e.to_string()))?;
        v["bugs"] = serde_json::json!(core::config::BUGS);
        v["status_names"] = serde_json::json!(core::STATUS_NAMES);
        v["reason_names"] = serde_json::json!(core::REASON_NAMES);
        v["trace_formats"] = serde_json::json!(core::workload::TRACE_FORMATS);
        Ok(v.to_string())
    })
}

/// The embedded default scenario (TOML text).
pub fn default_scenario() -> Outcome {
    guarded(|| Ok(core::default_scenario_toml().to_string()))
}

/// The model-check views' starting configuration (TOML text).
pub fn default_check() -> Outcome {
    guarded(|| Ok(core::default_check_toml().to_string()))
}

/// The execution-time model of one step: `request` is JSON `{model, gpu, tp, pp, batch:
/// [{new_tokens, context_tokens, sampled?}], cuda_graphs?, dtype?, kv_dtype?, fusion?,
/// block_size?}` (the fields of Python's `o1sim.predict_step`); the output is the core's
/// `{total_ms, mode, profile, breakdown}`.
pub fn predict_step(request: &[u8]) -> Outcome {
    guarded(|| core::predict_step(text_of(request)?))
}

/// RTMPv2 candidate routes between two nodes: `topology` is JSON (a preset name string or
/// a table `{preset?, nodes, links, routing?}`), `src`/`dst` node ids (plain UTF-8), `down`
/// the links that are down as JSON `[[a, b], …]` (empty = none). The output is the core's
/// list `[{path, bandwidth_gbps, latency_us, score, chosen, frontier}]` (Python's
/// `o1sim.routes`).
pub fn routes(topology: &[u8], src: &[u8], dst: &[u8], down: &[u8]) -> Outcome {
    guarded(|| core::routes_json(text_of(topology)?, text_of(src)?, text_of(dst)?, text_of(down)?))
}

/// Resolve and validate a topology entry (JSON: preset name or table) into its full table
/// `{nodes, links, routing}` (presets expanded): what the page's Topology panel draws.
/// Errors name fields under `topology.` as they would inside a scenario.
pub fn topology(input: &[u8]) -> Outcome {
    guarded(|| core::topology_json(text_of(input)?).map_err(|e| e.under("topology")))
}

/// Read a trace given inline: `spec` is a `workload.trace` table as JSON (`{"format":
/// "auto", "text": …}`); the output is `{"format", "requests", "span_s"}` (the detected
/// format, the requests kept, seconds from the first to the last arrival or null), or the
/// error a run would give, naming the line.
pub fn trace_info(spec: &[u8]) -> Outcome {
    guarded(|| {
        let spec = core::workload::TraceSpec::from_json(text_of(spec)?)?;
        let t = spec.load_inline()?;
        Ok(serde_json::json!({"format": t.format(), "requests": t.len(), "span_s": t.span_s()}).to_string())
    })
}

/// Model-check a (small) scenario; `options` is JSON `{"max_states", "timeliness_steps"}`
/// (both optional). Wall-time limits are the caller's job on wasm (the Worker can be
/// terminated); the result is the core's `CheckResult::to_json()`.
pub fn check(input: &[u8], format: u32, options: &[u8]) -> Outcome {
    guarded(|| {
        let text = text_of(input)?;
        let format = format_of(format)?;
        let mut opts = core::check::CheckOptions::default();
        let raw = text_of(options)?.trim();
        if !raw.is_empty() {
            let o: serde_json::Value =
                serde_json::from_str(raw).map_err(|e| SimError::config("options", e.to_string()))?;
            let Some(map) = o.as_object() else {
                return Err(SimError::config("options", "must be a JSON object"));
            };
            for (k, v) in map {
                let n = v.as_u64().ok_or_else(|| SimError::config(format!("options.{k}"), "must be a non-negative integer"));
                match k.as_str() {
                    // As given: 0 is refused by the core (as from Python), 2^32 and more
                    // by the memory estimate, never wrapped.
                    "max_states" => opts.max_states = n?,
                    "timeliness_steps" => opts.timeliness_steps = u32::try_from(n?).unwrap_or(u32::MAX),
                    other => {
                        return Err(core::error::check::unknown_name(
                            "options",
                            "option",
                            other,
                            &["max_states", "timeliness_steps"],
                        ))
                    }
                }
            }
        }
        Ok(core::check::check(text, format, opts)?.to_json())
    })
}

/// Run a scenario to the end and return only its summary (JSON): what the capacity search
/// and the plan read of a run, without the per-request columns.
pub fn run_summary(input: &[u8], format: u32) -> Outcome {
    guarded(|| {
        let text = text_of(input)?;
        Ok(core::simulate(text, format_of(format)?, SimOptions::default())?.summary_json())
    })
}

/// An SLO (JSON `{metric: bound}`) parsed: `{objectives, per_request, needs_per_request}`.
pub fn slo_spec(input: &[u8]) -> Outcome {
    guarded(|| core::search::slo_spec_json(text_of(input)?))
}

/// `{"slo", "summary"}` → `{"meets", "misses", "metrics"}`.
pub fn slo_eval(input: &[u8]) -> Outcome {
    guarded(|| core::search::slo_eval_json(text_of(input)?))
}

/// The capacity search's next step (Python's `o1sim.capacity` takes the same steps).
pub fn capacity_next(input: &[u8]) -> Outcome {
    guarded(|| core::search::capacity_next_json(text_of(input)?))
}

/// A plan's cost table: `{"rows", "cheapest"}`.
pub fn plan_eval(input: &[u8]) -> Outcome {
    guarded(|| core::search::plan_eval_json(text_of(input)?))
}

/// The default GPU prices with their sources.
pub fn default_prices() -> Outcome {
    guarded(|| Ok(core::search::default_prices_json()))
}

// ---------------------------------------------------------------------------------------
// The raw ABI (wasm32 only does this matter, but it compiles everywhere for tests).

thread_local! {
    /// Output of the last call (read by JS through `o1_out_ptr`/`o1_out_len`).
    static OUT: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

fn publish(outcome: Outcome) -> u32 {
    let (code, text) = match outcome {
        Ok(t) => (0, t),
        Err(t) => (1, t),
    };
    OUT.with(|o| {
        if let Ok(mut o) = o.try_borrow_mut() {
            *o = text.into_bytes();
        }
    });
    code
}

/// # Safety
/// `ptr..ptr+len` must be memory from [`o1_alloc`] that JS filled (or `len == 0`).
unsafe fn input<'a>(ptr: *const u8, len: usize) -> &'a [u8] {
    if len == 0 || ptr.is_null() {
        &[]
    } else {
        std::slice::from_raw_parts(ptr, len)
    }
}

fn install_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // Before unwinding (or aborting, in a build without exception handling) leave an
        // InternalError envelope where JS reads output, so a trap still has a message.
        std::panic::set_hook(Box::new(|info| {
            let what = core::panic_message(info.payload());
            let at = info.location().map(|l| format!(" at {}:{}", l.file(), l.line())).unwrap_or_default();
            let e = internal(format!("panic in the simulation core: {what}{at}"));
            OUT.with(|o| {
                if let Ok(mut o) = o.try_borrow_mut() {
                    *o = envelope(&e).into_bytes();
                }
            });
        }));
    });
}

/// Allocate `len` bytes for JS to write input into; null when they cannot be had (JS then
/// reports a `ResourceError`; an infallible allocation would trap the module).
#[no_mangle]
pub extern "C" fn o1_alloc(len: usize) -> *mut u8 {
    install_hook();
    let mut v = Vec::<u8>::new();
    if len > core::limits::MAX_INPUT_BYTES || v.try_reserve_exact(len).is_err() {
        return std::ptr::null_mut();
    }
    let p = v.as_mut_ptr();
    std::mem::forget(v);
    p
}

/// Largest input (bytes) the module reads; JS refuses longer text before copying it in.
#[no_mangle]
pub extern "C" fn o1_max_input() -> usize {
    core::limits::MAX_INPUT_BYTES
}

/// Free memory from [`o1_alloc`].
///
/// # Safety
/// `ptr`/`len` must come from one `o1_alloc(len)` call and be freed once.
#[no_mangle]
pub unsafe extern "C" fn o1_free(ptr: *mut u8, len: usize) {
    if !ptr.is_null() {
        drop(Vec::from_raw_parts(ptr, 0, len));
    }
}

/// Address of the last call's output.
#[no_mangle]
pub extern "C" fn o1_out_ptr() -> *const u8 {
    OUT.with(|o| o.try_borrow().map(|o| o.as_ptr()).unwrap_or(std::ptr::null()))
}

/// Length in bytes of the last call's output.
#[no_mangle]
pub extern "C" fn o1_out_len() -> usize {
    OUT.with(|o| o.try_borrow().map(|o| o.len()).unwrap_or(0))
}

/// Release the last output (a large result can be tens of MB).
#[no_mangle]
pub extern "C" fn o1_out_clear() {
    OUT.with(|o| {
        if let Ok(mut o) = o.try_borrow_mut() {
            *o = Vec::new();
        }
    });
}

/// ABI version: JS refuses a module with another one.
#[no_mangle]
pub extern "C" fn o1_abi_version() -> u32 {
    1
}

/// See [`simulate`].
///
/// # Safety
/// See [`input`].
#[no_mangle]
pub unsafe extern "C" fn o1_simulate(ptr: *const u8, len: usize, format: u32) -> u32 {
    install_hook();
    publish(simulate(input(ptr, len), format))
}

/// See [`simulate_steps`].
///
/// # Safety
/// See [`input`].
#[no_mangle]
pub unsafe extern "C" fn o1_simulate_steps(ptr: *const u8, len: usize, format: u32) -> u32 {
    install_hook();
    publish(simulate_steps(input(ptr, len), format))
}

/// See [`step_anatomy`].
///
/// # Safety
/// See [`input`], for both buffers.
#[no_mangle]
pub unsafe extern "C" fn o1_step_anatomy(ptr: *const u8, len: usize, format: u32, step_ptr: *const u8, step_len: usize) -> u32 {
    install_hook();
    publish(step_anatomy(input(ptr, len), format, input(step_ptr, step_len)))
}

/// See [`validate`].
///
/// # Safety
/// See [`input`].
#[no_mangle]
pub unsafe extern "C" fn o1_validate(ptr: *const u8, len: usize, format: u32) -> u32 {
    install_hook();
    publish(validate(input(ptr, len), format))
}

/// See [`check`].
///
/// # Safety
/// See [`input`], for both buffers.
#[no_mangle]
pub unsafe extern "C" fn o1_check(ptr: *const u8, len: usize, format: u32, opt_ptr: *const u8, opt_len: usize) -> u32 {
    install_hook();
    publish(check(input(ptr, len), format, input(opt_ptr, opt_len)))
}

/// See [`predict_step`].
///
/// # Safety
/// See [`input`].
#[no_mangle]
pub unsafe extern "C" fn o1_predict_step(ptr: *const u8, len: usize) -> u32 {
    install_hook();
    publish(predict_step(input(ptr, len)))
}

/// See [`routes`].
///
/// # Safety
/// See [`input`], for all four buffers.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn o1_routes(
    t_ptr: *const u8,
    t_len: usize,
    s_ptr: *const u8,
    s_len: usize,
    d_ptr: *const u8,
    d_len: usize,
    down_ptr: *const u8,
    down_len: usize,
) -> u32 {
    install_hook();
    publish(routes(input(t_ptr, t_len), input(s_ptr, s_len), input(d_ptr, d_len), input(down_ptr, down_len)))
}

/// See [`topology`].
///
/// # Safety
/// See [`input`].
#[no_mangle]
pub unsafe extern "C" fn o1_topology(ptr: *const u8, len: usize) -> u32 {
    install_hook();
    publish(topology(input(ptr, len)))
}

/// See [`run_summary`].
///
/// # Safety
/// See [`input`].
#[no_mangle]
pub unsafe extern "C" fn o1_run_summary(ptr: *const u8, len: usize, format: u32) -> u32 {
    install_hook();
    publish(run_summary(input(ptr, len), format))
}

/// See [`slo_spec`].
///
/// # Safety
/// See [`input`].
#[no_mangle]
pub unsafe extern "C" fn o1_slo_spec(ptr: *const u8, len: usize) -> u32 {
    install_hook();
    publish(slo_spec(input(ptr, len)))
}

/// See [`slo_eval`].
///
/// # Safety
/// See [`input`].
#[no_mangle]
pub unsafe extern "C" fn o1_slo_eval(ptr: *const u8, len: usize) -> u32 {
    install_hook();
    publish(slo_eval(input(ptr, len)))
}

/// See [`capacity_next`].
///
/// # Safety
/// See [`input`].
#[no_mangle]
pub unsafe extern "C" fn o1_capacity_next(ptr: *const u8, len: usize) -> u32 {
    install_hook();
    publish(capacity_next(input(ptr, len)))
}

/// See [`plan_eval`].
///
/// # Safety
/// See [`input`].
#[no_mangle]
pub unsafe extern "C" fn o1_plan_eval(ptr: *const u8, len: usize) -> u32 {
    install_hook();
    publish(plan_eval(input(ptr, len)))
}

/// See [`default_prices`].
#[no_mangle]
pub extern "C" fn o1_default_prices() -> u32 {
    install_hook();
    publish(default_prices())
}

/// See [`trace_info`].
///
/// # Safety
/// See [`input`].
#[no_mangle]
pub unsafe extern "C" fn o1_trace_info(ptr: *const u8, len: usize) -> u32 {
    install_hook();
    publish(trace_info(input(ptr, len)))
}

/// See [`presets`].
#[no_mangle]
pub extern "C" fn o1_presets() -> u32 {
    install_hook();
    publish(presets())
}

/// See [`default_scenario`].
#[no_mangle]
pub extern "C" fn o1_default_scenario() -> u32 {
    install_hook();
    publish(default_scenario())
}

/// See [`default_check`].
#[no_mangle]
pub extern "C" fn o1_default_check() -> u32 {
    install_hook();
    publish(default_check())
}

/// Trigger a panic inside a guarded call (tests prove no trap reaches JS).
#[no_mangle]
pub extern "C" fn o1_test_panic() -> u32 {
    install_hook();
    publish(guarded(|| panic!("o1_test_panic")))
}
