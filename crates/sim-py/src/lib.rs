//! # sim-py
//!
//! The PyO3 binding of `sim-core`, built by maturin into `o1sim._core`. It is glue only:
//! every call goes into the core with the GIL released and panics caught, each core error
//! kind becomes its own Python exception class, and result columns move into numpy arrays
//! without per-request Python objects. The public Python API lives in `python/o1sim`.

use std::panic::{catch_unwind, AssertUnwindSafe};

use numpy::IntoPyArray;
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use sim_core as core;

create_exception!(o1sim._core, SimError, PyException, "Base class of every error the o1sim core reports.");
create_exception!(o1sim._core, ConfigError, SimError, "The scenario is malformed or breaks a rule; `.field` is the dotted path of the offending field ('' for the whole document).");
create_exception!(o1sim._core, InfeasibleError, SimError, "The scenario is well formed but cannot run on the hardware it names.");
create_exception!(o1sim._core, StallError, SimError, "The simulation stopped making progress (work pending, nothing can run).");
create_exception!(o1sim._core, InternalError, SimError, "A bug in o1sim's core (a caught panic or a broken invariant).");
create_exception!(o1sim._core, ResourceError, SimError, "The run would need more memory or time than the scenario's `limits` allow, or the input is larger than o1sim reads; `.field` names the field that drives it.");

/// Newtype around the core's error so it can convert into `PyErr` (orphan rule).
struct PySimError(core::SimError);

impl From<core::SimError> for PySimError {
    fn from(e: core::SimError) -> Self {
        PySimError(e)
    }
}

impl From<PySimError> for PyErr {
    fn from(PySimError(e): PySimError) -> PyErr {
        let message = e.to_string();
        let with_field = |err: PyErr| {
            let path = e.path().unwrap_or_default().to_string();
            Python::attach(|py| {
                // Best effort: the class attribute `field = ""` stays if this fails.
                let _ = err.value(py).setattr("field", path);
                err
            })
        };
        // One arm per kind and no wildcard: a new kind in the core does not compile here
        // until it has its class (the JS names come from the core's own `kind_name`).
        match &e {
            core::SimError::Config { .. } => with_field(ConfigError::new_err(message)),
            core::SimError::Resource { .. } => with_field(ResourceError::new_err(message)),
            core::SimError::Infeasible { .. } => InfeasibleError::new_err(message),
            core::SimError::Stalled { .. } => StallError::new_err(message),
            core::SimError::Internal { .. } => InternalError::new_err(message),
        }
    }
}

type CoreResult<T> = Result<T, PySimError>;

/// Run `f` (a call into the core) with the GIL released and any panic turned into an
/// `InternalError`, so no panic ever unwinds into Python.
fn guarded<T, F>(py: Python<'_>, f: F) -> CoreResult<T>
where
    F: FnOnce() -> core::Result<T> + Send,
    T: Send,
{
    py.detach(|| match catch_unwind(AssertUnwindSafe(f)) {
        Ok(result) => result.map_err(PySimError),
        Err(payload) => Err(PySimError(core::SimError::Internal { message: panic_message(payload.as_ref()) })),
    })
}

/// Like [`guarded`] for core calls that cannot fail but might still panic.
fn guarded_infallible<T, F>(py: Python<'_>, f: F) -> CoreResult<T>
where
    F: FnOnce() -> T + Send,
    T: Send,
{
    guarded(py, || Ok(f()))
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    format!("panic in the simulation core: {}", core::panic_message(payload))
}

/// A simulation that can be advanced in slices (for progress bars) and then finished.
///
/// `Simulation(text, format="json", record_steps=False)` parses and validates the scenario
/// text; `run_events(n)` advances it; `finish()` runs it to the end and returns the
/// `RunResult` (once: the simulation is consumed).
#[pyclass(module = "o1sim._core")]
struct Simulation {
    /// `None` once finished, or after a panic left the core in an unknown state.
    inner: Option<core::Simulation>,
}

impl Simulation {
    fn inner_mut(&mut self) -> PyResult<&mut core::Simulation> {
        self.inner.as_mut().ok_or_else(|| SimError::new_err("this Simulation was already finished (or failed); create a new one"))
    }
}

#[pymethods]
impl Simulation {
    #[new]
    #[pyo3(signature = (text, format = "json", record_steps = false, check_invariants = false, trace = None))]
    fn new(
        py: Python<'_>,
        text: String,
        format: &str,
        record_steps: bool,
        check_invariants: bool,
        trace: Option<PyRefMut<'_, LoadedTrace>>,
    ) -> PyResult<Self> {
        let format = core::Format::parse(format).map_err(PySimError)?;
        let options = core::SimOptions { record_steps, check_invariants };
        let trace = trace.map(|mut t| t.take()).transpose()?;
        let sim = guarded(py, move || core::Simulation::from_text_with_trace(&text, format, options, trace))?;
        Ok(Simulation { inner: Some(sim) })
    }

    /// Process at most `max_events` events; returns True when the run is complete.
    fn run_events(&mut self, py: Python<'_>, max_events: u64) -> PyResult<bool> {
        let sim = self.inner_mut()?;
        let outcome = guarded(py, || sim.run_events(max_events));
        if let Err(PySimError(core::SimError::Internal { .. })) = &outcome {
            // A panic (or broken invariant) mid-run: never touch that state again.
            self.inner = None;
        }
        Ok(outcome?)
    }

    /// Process at most `max_events` events, pausing early once `finished` requests are done
    /// (progress reports); returns True when the run is complete.
    fn run_until(&mut self, py: Python<'_>, max_events: u64, finished: u64) -> PyResult<bool> {
        let sim = self.inner_mut()?;
        let outcome = guarded(py, || sim.run_until(max_events, finished));
        if let Err(PySimError(core::SimError::Internal { .. })) = &outcome {
            self.inner = None;
        }
        Ok(outcome?)
    }

    /// `(finished_requests, total_requests, now_ms, events)`.
    fn progress(&mut self, py: Python<'_>) -> PyResult<(u64, u64, f64, u64)> {
        let sim = self.inner_mut()?;
        let p = guarded_infallible(py, || sim.progress())?;
        Ok((p.finished_requests, p.total_requests, p.now_ms, p.events))
    }

    /// Run to the end and return the result. The simulation is consumed: later calls raise.
    fn finish(&mut self, py: Python<'_>) -> PyResult<RunResult> {
        let sim = self.inner.take().ok_or_else(|| SimError::new_err("this Simulation was already finished (or failed); create a new one"))?;
        let result = guarded(py, move || sim.finish())?;
        Ok(RunResult { inner: result })
    }

    /// Change the topology now: `json` is a list of events (as in the scenario's `events`)
    /// or a whole topology entry (preset name or table) replacing the current one.
    fn inject_topology(&mut self, py: Python<'_>, json: String) -> PyResult<()> {
        let sim = self.inner_mut()?;
        let outcome = guarded(py, || sim.inject_topology(&json));
        if let Err(PySimError(core::SimError::Internal { .. })) = &outcome {
            self.inner = None;
        }
        Ok(outcome?)
    }

    /// True once `finish()` was called (or a run failed with an internal error).
    #[getter]
    fn finished(&self) -> bool {
        self.inner.is_none()
    }
}

/// Everything one run produced. Serialisations come from the core, so they are the same
/// bytes on every front end.
#[pyclass(module = "o1sim._core", frozen)]
struct RunResult {
    inner: core::SimResult,
}

#[pymethods]
impl RunResult {
    /// The whole result as JSON (summary, request columns, time series).
    fn to_json(&self, py: Python<'_>) -> PyResult<String> {
        Ok(guarded_infallible(py, || self.inner.to_json())?)
    }

    /// The summary metrics as JSON.
    fn summary_json(&self, py: Python<'_>) -> PyResult<String> {
        Ok(guarded_infallible(py, || self.inner.summary_json())?)
    }

    /// The recorded scheduler steps as a JSON list (empty unless `record_steps=True`).
    fn steps_json(&self, py: Python<'_>) -> PyResult<String> {
        Ok(guarded_infallible(py, || self.inner.steps_json())?)
    }

    /// Number of recorded scheduler steps.
    fn num_steps(&self) -> usize {
        self.inner.steps.len()
    }

    /// Per-request columns as numpy arrays; `status` and `reason` are uint8 codes into
    /// `status_names()` / `reason_names()`.
    fn columns<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let r = &self.inner.requests;
        let d = PyDict::new(py);
        d.set_item("request_id", r.request_id.clone().into_pyarray(py))?;
        d.set_item("arrival_ms", r.arrival_ms.clone().into_pyarray(py))?;
        d.set_item("engine_arrival_ms", r.engine_arrival_ms.clone().into_pyarray(py))?;
        d.set_item("first_token_ms", r.first_token_ms.clone().into_pyarray(py))?;
        d.set_item("finish_ms", r.finish_ms.clone().into_pyarray(py))?;
        d.set_item("client_first_token_ms", r.client_first_token_ms.clone().into_pyarray(py))?;
        d.set_item("client_finish_ms", r.client_finish_ms.clone().into_pyarray(py))?;
        d.set_item("prompt_tokens", r.prompt_tokens.clone().into_pyarray(py))?;
        d.set_item("output_tokens", r.output_tokens.clone().into_pyarray(py))?;
        d.set_item("preemptions", r.preemptions.clone().into_pyarray(py))?;
        d.set_item("replica", r.replica.clone().into_pyarray(py))?;
        d.set_item("status", r.status.clone().into_pyarray(py))?;
        d.set_item("reason", r.reason.clone().into_pyarray(py))?;
        d.set_item("cached_tokens", r.cached_tokens.clone().into_pyarray(py))?;
        if !r.kv_load_ms.is_empty() {
            d.set_item("kv_load_ms", r.kv_load_ms.clone().into_pyarray(py))?;
        }
        if !r.adversarial.is_empty() {
            d.set_item("adversarial", r.adversarial.clone().into_pyarray(py))?;
        }
        Ok(d)
    }

    /// Per-replica time-series columns as numpy arrays (one row per replica and bucket).
    fn timeseries_columns<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let t = &self.inner.timeseries;
        let d = PyDict::new(py);
        d.set_item("time_ms", t.time_ms.clone().into_pyarray(py))?;
        d.set_item("replica", t.replica.clone().into_pyarray(py))?;
        d.set_item("batch_size", t.batch_size.clone().into_pyarray(py))?;
        d.set_item("tokens", t.tokens.clone().into_pyarray(py))?;
        d.set_item("kv_usage", t.kv_usage.clone().into_pyarray(py))?;
        d.set_item("waiting", t.waiting.clone().into_pyarray(py))?;
        d.set_item("running", t.running.clone().into_pyarray(py))?;
        d.set_item("busy", t.busy.clone().into_pyarray(py))?;
        d.set_item("prefix_queries", t.prefix_queries.clone().into_pyarray(py))?;
        d.set_item("prefix_hits", t.prefix_hits.clone().into_pyarray(py))?;
        d.set_item("prefix_hit_rate", t.prefix_hit_rate.clone().into_pyarray(py))?;
        if !t.replicas.is_empty() {
            d.set_item("replicas", t.replicas.clone().into_pyarray(py))?;
        }
        Ok(d)
    }

    /// The per-link table as JSON columns, or None without a topology.
    fn links_json(&self, py: Python<'_>) -> PyResult<Option<String>> {
        Ok(guarded_infallible(py, || self.inner.links_json())?)
    }

    /// Bucket width of the time series, in milliseconds.
    #[getter]
    fn timeseries_interval_ms(&self) -> f64 {
        self.inner.timeseries.interval_ms
    }
}

/// A model check in progress: `Checker(text, format="json", max_states=2_000_000,
/// max_seconds=None, timeliness_steps=2)`; `run(n)` explores about n more states and
/// returns True once the search ended; `finish()` returns the result as JSON (once).
#[pyclass(module = "o1sim._core")]
struct Checker {
    inner: Option<core::check::Checker>,
}

#[pymethods]
impl Checker {
    #[new]
    #[pyo3(signature = (text, format = "json", max_states = 2_000_000, max_seconds = None, timeliness_steps = 2))]
    fn new(
        py: Python<'_>,
        text: String,
        format: &str,
        max_states: u64,
        max_seconds: Option<f64>,
        timeliness_steps: u32,
    ) -> PyResult<Self> {
        let format = core::Format::parse(format).map_err(PySimError)?;
        let opts = core::check::CheckOptions { max_states, max_seconds, timeliness_steps };
        let c = guarded(py, move || core::check::Checker::from_text(&text, format, opts))?;
        Ok(Checker { inner: Some(c) })
    }

    /// Explore about `more_states` more states; True once the search has ended.
    fn run(&mut self, py: Python<'_>, more_states: u64) -> PyResult<bool> {
        let c = self.inner.as_mut().ok_or_else(|| SimError::new_err("this Checker was already finished"))?;
        let outcome = guarded(py, || c.run(more_states));
        if outcome.is_err() {
            self.inner = None;
        }
        Ok(outcome?)
    }

    /// `(states, transitions, frontier, depth, elapsed_s, violations)`.
    fn progress(&self) -> PyResult<(u64, u64, u64, u32, f64, u64)> {
        let c = self.inner.as_ref().ok_or_else(|| SimError::new_err("this Checker was already finished"))?;
        let p = c.progress();
        Ok((p.states, p.transitions, p.frontier, p.depth, p.elapsed_s, p.violations))
    }

    /// Run to the end (or a limit) and return the result as JSON; the checker is consumed.
    fn finish(&mut self, py: Python<'_>) -> PyResult<String> {
        let c = self.inner.take().ok_or_else(|| SimError::new_err("this Checker was already finished"))?;
        Ok(guarded(py, move || c.finish().map(|r| r.to_json()))?)
    }
}

/// An incremental trace reader: `TraceLoader(spec)` takes a scenario's `workload.trace`
/// table as JSON; `feed(chunk)` parses the next bytes of the file (False once no more are
/// wanted); `finish()` checks the whole trace and returns the `LoadedTrace` (once).
#[pyclass(module = "o1sim._core")]
struct TraceLoader {
    inner: Option<core::workload::TraceReader>,
}

#[pymethods]
impl TraceLoader {
    #[new]
    fn new(py: Python<'_>, spec: String) -> PyResult<Self> {
        let reader = guarded(py, move || core::workload::TraceReader::new(&core::workload::TraceSpec::from_json(&spec)?))?;
        Ok(TraceLoader { inner: Some(reader) })
    }

    /// Parse the next chunk; False once no more input is wanted.
    fn feed(&mut self, py: Python<'_>, chunk: &[u8]) -> PyResult<bool> {
        let r = self.inner.as_mut().ok_or_else(|| SimError::new_err("this TraceLoader was already finished"))?;
        let outcome = guarded(py, || r.feed(chunk));
        if outcome.is_err() {
            self.inner = None;
        }
        Ok(outcome?)
    }

    /// The format in use (detected for `auto` once the first line was read), or None.
    #[getter]
    fn format(&self) -> Option<&'static str> {
        self.inner.as_ref().and_then(|r| r.format())
    }

    /// Check the whole trace and return it; the loader is consumed.
    fn finish(&mut self, py: Python<'_>) -> PyResult<LoadedTrace> {
        let r = self.inner.take().ok_or_else(|| SimError::new_err("this TraceLoader was already finished"))?;
        let t = guarded(py, move || r.finish())?;
        Ok(LoadedTrace { format: t.format(), requests: t.len(), span_s: t.span_s(), inner: Some(t) })
    }
}

/// A parsed trace for one `Simulation(..., trace=...)` (it moves into the simulation).
#[pyclass(module = "o1sim._core")]
struct LoadedTrace {
    inner: Option<core::workload::LoadedTrace>,
    format: &'static str,
    requests: usize,
    span_s: Option<f64>,
}

impl LoadedTrace {
    fn take(&mut self) -> PyResult<core::workload::LoadedTrace> {
        self.inner.take().ok_or_else(|| SimError::new_err("this LoadedTrace was already used by a simulation; load the trace again"))
    }
}

#[pymethods]
impl LoadedTrace {
    /// The trace's format (the detected one for `auto`).
    #[getter]
    fn format(&self) -> &'static str {
        self.format
    }

    /// Number of requests kept.
    fn __len__(&self) -> usize {
        self.requests
    }

    /// Seconds from the first to the last arrival (rate_scale applied), or None when the
    /// arrivals are generated (a vLLM result without start times).
    #[getter]
    fn span_s(&self) -> Option<f64> {
        self.span_s
    }

    /// True once a simulation took the requests.
    #[getter]
    fn used(&self) -> bool {
        self.inner.is_none()
    }
}

/// Names of the bug classes `scheduler.inject_bug` accepts (model checking).
/// What this process may still allocate, bytes (0 clears it): the default
/// `limits.max_memory_gib` is at most this (the Python layer reads it from the OS).
#[pyfunction]
fn set_memory_ceiling(bytes: u64) {
    core::limits::set_memory_ceiling(bytes);
}

#[pyfunction]
fn bug_names() -> Vec<&'static str> {
    core::config::BUGS.to_vec()
}

/// Names of the request status codes (index = code).
#[pyfunction]
fn status_names() -> Vec<&'static str> {
    core::STATUS_NAMES.to_vec()
}

/// Names of the rejection reason codes (index = code; "" = none).
#[pyfunction]
fn reason_names() -> Vec<&'static str> {
    core::REASON_NAMES.to_vec()
}

/// Validate a scenario text; returns the resolved scenario (presets expanded) as JSON.
/// `trace` (used up) is the loaded trace of a `workload.trace` given by path.
#[pyfunction]
#[pyo3(signature = (text, format = "json", trace = None))]
fn validate(py: Python<'_>, text: String, format: &str, trace: Option<PyRefMut<'_, LoadedTrace>>) -> PyResult<String> {
    let format = core::Format::parse(format).map_err(PySimError)?;
    let trace = trace.map(|mut t| t.take()).transpose()?;
    Ok(guarded(py, move || core::validate_with_trace(&text, format, trace))?)
}

/// The trace formats `workload.trace.format` accepts.
#[pyfunction]
fn trace_formats() -> Vec<&'static str> {
    core::workload::TRACE_FORMATS.to_vec()
}

/// The catalog (GPUs, models, policies) as JSON.
#[pyfunction]
fn presets_json(py: Python<'_>) -> PyResult<String> {
    Ok(guarded_infallible(py, core::presets_json)?)
}

/// The embedded default scenario (TOML text).
#[pyfunction]
fn default_scenario_toml(py: Python<'_>) -> PyResult<&'static str> {
    Ok(guarded_infallible(py, core::default_scenario_toml)?)
}

/// The model-check views' starting configuration (TOML text).
#[pyfunction]
fn default_check_toml(py: Python<'_>) -> PyResult<&'static str> {
    Ok(guarded_infallible(py, core::default_check_toml)?)
}

/// Predict one step's execution time (JSON request → JSON prediction).
#[pyfunction]
fn predict_step_json(py: Python<'_>, request: String) -> PyResult<String> {
    Ok(guarded(py, move || core::predict_step(&request))?)
}

/// A GPU's calibration rows against the model (JSON), or None without a shipped profile.
#[pyfunction]
fn calibration_fidelity_json(py: Python<'_>, gpu: String) -> PyResult<Option<String>> {
    Ok(guarded_infallible(py, move || core::calibration_fidelity(&gpu))?)
}

/// RTMPv2 candidates between two nodes (topology JSON: preset name or table) as JSON;
/// `down`: JSON list of `[a, b]` links that are down.
#[pyfunction]
#[pyo3(signature = (topology, src, dst, down = "[]"))]
fn routes_json(py: Python<'_>, topology: String, src: String, dst: String, down: &str) -> PyResult<String> {
    let down = down.to_owned();
    Ok(guarded(py, move || core::routes_json(&topology, &src, &dst, &down))?)
}

/// A topology (JSON: preset name or table) validated and expanded to its full table (JSON).
#[pyfunction]
fn topology_json(py: Python<'_>, topology: String) -> PyResult<String> {
    Ok(guarded(py, move || core::topology_json(&topology))?)
}

/// The anatomy of one recorded step (JSON: a step of `steps_json()` or its shape) under
/// the run's scenario, as JSON columns.
#[pyfunction]
#[pyo3(signature = (text, format, step))]
fn step_anatomy_json(py: Python<'_>, text: String, format: &str, step: String) -> PyResult<String> {
    let format = core::Format::parse(format).map_err(PySimError)?;
    Ok(guarded(py, move || core::step_anatomy(&text, format, &step))?)
}

/// Names of the topology presets.
#[pyfunction]
fn topology_presets() -> Vec<&'static str> {
    core::topology_presets()
}

/// Run a scenario to the end and return only its summary (JSON): what a sweep keeps of a
/// run, without building the per-request tables in Python.
#[pyfunction]
#[pyo3(signature = (text, format = "json"))]
fn run_summary_json(py: Python<'_>, text: String, format: &str) -> PyResult<String> {
    let format = core::Format::parse(format).map_err(PySimError)?;
    Ok(guarded(py, move || core::simulate(&text, format, core::SimOptions::default()).map(|r| r.summary_json()))?)
}

/// A summary (JSON) as flat named metrics (`ttft_p99_ms`, …), JSON.
#[pyfunction]
fn flat_metrics_json(py: Python<'_>, summary: String) -> PyResult<String> {
    Ok(guarded(py, move || core::search::flat_metrics_json(&summary))?)
}

/// An SLO (JSON `{metric: bound}`) parsed: `{objectives, per_request, needs_per_request}`.
#[pyfunction]
fn slo_spec_json(py: Python<'_>, slo: String) -> PyResult<String> {
    Ok(guarded(py, move || core::search::slo_spec_json(&slo))?)
}

/// `{"slo", "summary"}` → `{"meets", "misses", "metrics"}` (JSON).
#[pyfunction]
fn slo_eval_json(py: Python<'_>, request: String) -> PyResult<String> {
    Ok(guarded(py, move || core::search::slo_eval_json(&request))?)
}

/// The capacity search's next step (JSON request → JSON step).
#[pyfunction]
fn capacity_next_json(py: Python<'_>, request: String) -> PyResult<String> {
    Ok(guarded(py, move || core::search::capacity_next_json(&request))?)
}

/// A plan's cost table (JSON request → `{"rows", "cheapest"}`).
#[pyfunction]
fn plan_eval_json(py: Python<'_>, request: String) -> PyResult<String> {
    Ok(guarded(py, move || core::search::plan_eval_json(&request))?)
}

/// The default GPU prices with their sources (JSON).
#[pyfunction]
fn default_prices_json() -> String {
    core::search::default_prices_json()
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("SimError", py.get_type::<SimError>())?;
    let config_error = py.get_type::<ConfigError>();
    // Every ConfigError has `.field`, even one raised from Python code.
    config_error.setattr("field", "")?;
    m.add("ConfigError", config_error)?;
    m.add("InfeasibleError", py.get_type::<InfeasibleError>())?;
    m.add("StallError", py.get_type::<StallError>())?;
    m.add("InternalError", py.get_type::<InternalError>())?;
    let resource_error = py.get_type::<ResourceError>();
    resource_error.setattr("field", "")?;
    m.add("ResourceError", resource_error)?;
    m.add_class::<Simulation>()?;
    m.add_class::<RunResult>()?;
    m.add_class::<Checker>()?;
    m.add_class::<TraceLoader>()?;
    m.add_class::<LoadedTrace>()?;
    m.add_function(wrap_pyfunction!(trace_formats, m)?)?;
    m.add_function(wrap_pyfunction!(bug_names, m)?)?;
    m.add_function(wrap_pyfunction!(set_memory_ceiling, m)?)?;
    m.add_function(wrap_pyfunction!(status_names, m)?)?;
    m.add_function(wrap_pyfunction!(reason_names, m)?)?;
    m.add_function(wrap_pyfunction!(validate, m)?)?;
    m.add_function(wrap_pyfunction!(presets_json, m)?)?;
    m.add_function(wrap_pyfunction!(default_scenario_toml, m)?)?;
    m.add_function(wrap_pyfunction!(default_check_toml, m)?)?;
    m.add_function(wrap_pyfunction!(predict_step_json, m)?)?;
    m.add_function(wrap_pyfunction!(calibration_fidelity_json, m)?)?;
    m.add_function(wrap_pyfunction!(routes_json, m)?)?;
    m.add_function(wrap_pyfunction!(topology_json, m)?)?;
    m.add_function(wrap_pyfunction!(step_anatomy_json, m)?)?;
    m.add_function(wrap_pyfunction!(topology_presets, m)?)?;
    m.add_function(wrap_pyfunction!(run_summary_json, m)?)?;
    m.add_function(wrap_pyfunction!(flat_metrics_json, m)?)?;
    m.add_function(wrap_pyfunction!(slo_spec_json, m)?)?;
    m.add_function(wrap_pyfunction!(slo_eval_json, m)?)?;
    m.add_function(wrap_pyfunction!(capacity_next_json, m)?)?;
    m.add_function(wrap_pyfunction!(plan_eval_json, m)?)?;
    m.add_function(wrap_pyfunction!(default_prices_json, m)?)?;
    Ok(())
}
