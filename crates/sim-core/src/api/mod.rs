//! The front-end facing API: build a simulation from scenario text, run it (whole or in
//! slices), and collect the result as columns and JSON.

mod offload;
mod lora;
mod pools;
mod speculative;
mod trtllm;
pub(crate) mod resources;

use crate::error::{Result, SimError};
use serde::Serialize;

pub use crate::config::Format;
pub use crate::engine::SimOptions;
pub use crate::metrics::{StepRecord, StepShape, TimeSeries};

/// How far a running simulation has come.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Progress { pub finished_requests: u64, pub total_requests: u64, pub now_ms: f64, pub events: u64 }

/// Per-request result columns (one entry per request, in request-id order).
#[derive(Debug, Clone, Default, Serialize)]
pub struct RequestColumns {
    pub request_id: Vec<u32>,
    /// When the client sent it (the workload's arrival).
    pub arrival_ms: Vec<f64>,
    /// When it reached the engine, after the front end's ingest ([`crate::frontend`]).
    pub engine_arrival_ms: Vec<f64>,
    /// When the engine produced its first token; NaN (null in JSON) when it never did.
    pub first_token_ms: Vec<f64>,
    /// When the engine finished (or the request was rejected).
    pub finish_ms: Vec<f64>,
    /// When the client received the first token (NaN when none was produced).
    pub client_first_token_ms: Vec<f64>,
    /// When the client received the last token (NaN unless it finished).
    pub client_finish_ms: Vec<f64>,
    pub prompt_tokens: Vec<u32>,
    pub output_tokens: Vec<u32>,
    pub preemptions: Vec<u32>,
    /// -1 when never assigned to a replica.
    pub replica: Vec<i32>,
    /// Index into [`STATUS_NAMES`].
    pub status: Vec<u8>,
    /// Index into [`REASON_NAMES`].
    pub reason: Vec<u8>,
    /// Prompt tokens found in the prefix cache at the request's first admission (vLLM's
    /// `num_cached_tokens`, the usage's `cached_tokens`); 0 when never admitted.
    pub cached_tokens: Vec<u32>,
    /// Whether each request is an attacker (`workload.adversarial`); empty (and not
    /// written) when the workload has none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub adversarial: Vec<bool>,
    /// Time each request spent loading KV blocks from the offload tiers, ms (0: none);
    /// empty (and not written) without `scheduler.kv_offload`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub kv_load_ms: Vec<f64>,
}

impl RequestColumns {
    /// Columns with room for `n` requests each, reserved once (see [`crate::json::to_string`]
    /// for why growing ones cost more, in WASM above all).
    fn with_capacity(n: usize) -> Self {
        RequestColumns {
            request_id: Vec::with_capacity(n),
            arrival_ms: Vec::with_capacity(n),
            engine_arrival_ms: Vec::with_capacity(n),
            first_token_ms: Vec::with_capacity(n),
            finish_ms: Vec::with_capacity(n),
            client_first_token_ms: Vec::with_capacity(n),
            client_finish_ms: Vec::with_capacity(n),
            prompt_tokens: Vec::with_capacity(n),
            output_tokens: Vec::with_capacity(n),
            preemptions: Vec::with_capacity(n),
            replica: Vec::with_capacity(n),
            status: Vec::with_capacity(n),
            reason: Vec::with_capacity(n),
            cached_tokens: Vec::with_capacity(n),
            adversarial: Vec::new(),
            kv_load_ms: Vec::new(),
        }
    }
}

pub const STATUS_NAMES: &[&str] = &["finished", "rejected"];
/// Why a request was rejected, by [`crate::request::Reason`] code. `timeout`: its client
/// gave up (`workload.timeout_s`); `session aborted`: an earlier turn of its session did
/// not finish, so it was never sent; `template depth`: o1pro's admission control (seed §4.4).
pub const REASON_NAMES: &[&str] = &[
    "",
    "prompt exceeds max_model_len",
    "kv cache too small",
    "dispatch queue full",
    "timeout",
    "session aborted",
    "template depth",
];

/// Everything a run produces.
#[derive(Debug, Clone, Serialize)]
pub struct SimResult {
    /// o1sim version that produced the result.
    pub version: &'static str,
    pub scenario_name: Option<String>,
    /// Per-replica plan: memory, KV blocks, model and GPU as resolved.
    pub deployment: serde_json::Value,
    pub summary: serde_json::Value,
    pub requests: RequestColumns,
    pub timeseries: TimeSeries,
    /// Per-link table (only with a topology): bytes carried and utilisation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub links: Option<crate::fabric::LinkTable>,
    #[serde(skip)]
    pub steps: Vec<StepRecord>,
}

impl SimResult {
    /// The whole result as compact JSON (`serde_json::to_string`'s bytes, see [`crate::json`]).
    pub fn to_json(&self) -> String { crate::json::to_string(self).unwrap_or_default() }
    pub fn summary_json(&self) -> String { crate::json::to_string(&self.summary).unwrap_or_default() }
    pub fn steps_json(&self) -> String { crate::json::to_string(&self.steps).unwrap_or_default() }
    /// The per-link table as JSON columns (`None` without a topology).
    pub fn links_json(&self) -> Option<String> { self.links.as_ref().map(|l| crate::json::to_string(l).unwrap_or_default()) }
}


use crate::catalog::{resolve_gpu, resolve_model};
use crate::config::Scenario;
use crate::engine::Engine;
use crate::metrics::{summarize, Held, SloNs};

/// A scenario checked and resolved: presets expanded, memory planned, requests generated.
pub struct Built {
    pub scenario: Scenario,
    pub deployment: serde_json::Value,
    pub engine: Engine,
}

/// Check a parsed scenario and build its engine. `scheduler.inject_bug` is refused unless
/// the run checks invariants (a model-check counterexample's replay): a normal run with a
/// bug switched on would only spin or miscount.
pub fn build(scenario: Scenario, options: SimOptions) -> Result<Built> {
    build_with(scenario, options, None)
}

/// Check a workload given directly (not generated from the scenario): request ids are
/// 0..n in any order, the list is sorted by (arrival, id), lengths are at least 1, and each
/// request's segments lie in the arena. Errors name `workload`.
fn check_workload(w: &crate::workload::Workload) -> Result<()> {
    let bad = |m: String| Err(SimError::config("workload", m));
    let n = w.requests.len();
    let mut seen = vec![false; n];
    for (i, s) in w.requests.iter().enumerate() {
        if s.id as usize >= n || std::mem::replace(&mut seen[s.id as usize], true) {
            return bad(format!("request ids must be 0..{n}, each once (entry {i} has id {})", s.id));
        }
        if s.prompt_tokens == 0 || s.output_tokens == 0 {
            return bad(format!("request {}: prompt and output need at least one token", s.id));
        }
        if i > 0 && (w.requests[i - 1].arrival_ns, w.requests[i - 1].id) > (s.arrival_ns, s.id) {
            return bad(format!("requests must be sorted by (arrival, id) (entry {i}, request {})", s.id));
        }
        if (s.segs.0 as u64 + s.segs.1 as u64) > w.segments.len() as u64 {
            return bad(format!("request {}: segments {}..{} are outside the arena of {}", s.id, s.segs.0,
                s.segs.0 as u64 + s.segs.1 as u64, w.segments.len()));
        }
    }
    Ok(())
}

/// [`build`] with a trace a front end has loaded for the scenario's `workload.trace`
/// (given by `path`; see [`crate::workload::trace`]).
pub fn build_with(scenario: Scenario, options: SimOptions, trace: Option<crate::workload::LoadedTrace>) -> Result<Built> {
    build_from(scenario, options, Source::Spec(trace.map(Box::new)), options.check_invariants)
}

/// [`build_with`]; `allow_bug`: accept `scheduler.inject_bug` (the model checker and its
/// replays).
pub(crate) fn build_inner(
    scenario: Scenario,
    options: SimOptions,
    trace: Option<crate::workload::LoadedTrace>,
    allow_bug: bool,
) -> Result<Built> {
    build_from(scenario, options, Source::Spec(trace.map(Box::new)), allow_bug)
}

/// Where a run's requests come from.
enum Source {
    /// Generated from the scenario's `workload` section (with a trace a front end loaded).
    Spec(Option<Box<crate::workload::LoadedTrace>>),
    /// Built by the caller, token identity and sessions included; the section must still
    /// be valid and is read for `timeout_s`.
    Given(crate::workload::Workload),
}

fn build_from(mut scenario: Scenario, options: SimOptions, source: Source, allow_bug: bool) -> Result<Built> {
    scenario.validate_local()?;
    if scenario.scheduler.inject_bug.is_some() && !allow_bug {
        return Err(SimError::config(
            "scheduler.inject_bug",
            "switches on a known bug for the model checker only: use `o1sim check` (o1sim.check); a counterexample's \
             replay scenario runs with invariant checks on (simulate(..., check_invariants=True))",
        ));
    }
    let model = resolve_model(&scenario.model)?;
    let gpu = resolve_gpu(&scenario.gpu)?;
    let max_model_len = scenario.scheduler.max_model_len.unwrap_or(model.max_context);
    if max_model_len > model.max_context {
        return Err(SimError::config(
            "scheduler.max_model_len",
            format!("{} exceeds {}'s context length {}", max_model_len, model.name, model.max_context),
        ));
    }
    let mut pools = pools::build_pools(&scenario, &model, &gpu)?;
    let mut blocks = pools.iter().map(|p| p.blocks).max().unwrap_or(0);
    // The workload's rules first (a ConfigError says more than a size), then the memory of
    // the run, estimated before the requests are generated and the engine allocated (a
    // loaded trace's rows are counted; a generated workload's from its spec; requests the
    // caller built are already in memory).
    scenario.workload.validate(max_model_len).map_err(|e| e.under("workload"))?;
    let workload = match source {
        Source::Given(w) => {
            resources::check_run(&scenario, blocks, max_model_len, None)?;
            check_workload(&w)?;
            w
        }
        Source::Spec(trace) => {
            resources::check_run(&scenario, blocks, max_model_len, trace.as_deref())?;
            // A random arrival process may produce far more than its estimate: at most what
            // the memory limit holds.
            let cap = scenario.limits.memory_bytes() / crate::limits::BYTES_PER_REQUEST;
            scenario
                .workload
                .generate_capped(scenario.seed, max_model_len, trace.map(|t| *t), cap)
                .map_err(|e| e.under("workload"))?
        }
    };
    crate::engine::sessions::check_sessions(&workload.requests)?;
    if trtllm::needs_bench(&scenario) {
        // trtllm-bench sizes the batch from the dataset; the memory plan follows its
        // max_num_tokens (the profiling run's activations).
        trtllm::resolve(&mut scenario, &model, &gpu, &workload.requests);
        pools = pools::build_pools(&scenario, &model, &gpu)?;
        blocks = pools.iter().map(|p| p.blocks).max().unwrap_or(0);
    }
    let (d, s) = (&scenario.deployment, &scenario.scheduler);
    let plan = &pools[0].plan;
    let fabric = match &scenario.topology {
        None => None,
        Some(input) => Some(build_fabric(&scenario, input, &model, plan.kv_bytes_per_token)?),
    };
    let mut deployment = if d.pools.is_empty() {
        let mut j = serde_json::json!({
            "model": model,
            "gpu": gpu,
            "tp": d.tp,
            "pp": d.pp,
            "replicas": d.replicas,
            "gpus": d.dp * d.tp * d.pp * d.replicas,
            "policy": s.policy,
            "prefix_caching": s.prefix_caching(),
            "num_gpu_blocks": blocks,
            "block_size": s.block_size,
            "kv_capacity_tokens": blocks as u64 * s.block_size as u64,
            "max_model_len": max_model_len,
            "memory": plan,
        });
        if d.dp > 1 || d.ep > 1 {
            j["dp"] = serde_json::json!(d.dp);
            j["ep"] = serde_json::json!(d.ep);
        }
        if s.policy == crate::policy::Policy::Trtllm {
            j["trtllm"] = trtllm::deployment_json(&scenario);
        }
        j
    } else {
        serde_json::json!({
            "model": model,
            "replicas": d.total_replicas(),
            "gpus": pools.iter().map(|p| p.gpus_per_replica() * p.replicas).sum::<u32>(),
            "policy": s.policy,
            "prefix_caching": s.prefix_caching(),
            "block_size": s.block_size,
            "max_model_len": max_model_len,
            "pools": pools.iter().map(|p| p.json(s.block_size)).collect::<Vec<_>>(),
        })
    };
    let weights_bytes_per_gpu = plan.weights_gib * (1u64 << 30) as f64;
    let kv_bytes_per_token = plan.kv_bytes_per_token;
    let engine_pools =
        pools.into_iter().map(|p| crate::engine::EnginePool { perf: p.perf, num_blocks: p.blocks, replicas: p.replicas, dp: p.dp }).collect();
    let mut engine = Engine::new(&scenario, engine_pools, max_model_len, workload, options, resources::kv_field(&scenario))?;
    if options.check_invariants {
        engine.set_invariant_observer(crate::check::props::check_invariants);
    }
    if let Some(cfg) = &scenario.scaling {
        engine.attach_scaler(crate::scaling::Autoscaler::new(cfg, d.replicas, d.dp * d.tp * d.pp, weights_bytes_per_gpu));
    }
    if s.policy.info().o1pro_admission {
        let decision_s = crate::perf::seed::o1pro_decision_latency_s(&gpu, d.tp);
        engine.set_decision_latency_ns(crate::num::round_u64(decision_s * 1e9));
    }
    if let Some(f) = fabric {
        let ids = |stages: &Vec<Vec<u32>>| -> Vec<String> {
            stages.iter().flatten().map(|&g| f.topo.nodes[g as usize].id.clone()).collect()
        };
        deployment["placement"] = serde_json::json!(f.placement.iter().map(ids).collect::<Vec<_>>());
        engine.attach_fabric(f);
    }
    if let Some(shapes) = lora::shapes(&scenario, &model, d.tp)? {
        deployment["lora"] = lora::deployment_json(&scenario, &shapes);
        let replicas = engine.replicas.len();
        engine.attach_lora(lora::run(&scenario, &shapes, &gpu, replicas));
    }
    if let Some(r) = speculative::resolve(&scenario, &model)? {
        deployment["speculative"] = speculative::deployment_json(&r);
        engine.attach_spec(&r.plan, scenario.seed);
    }
    if let Some(o) = &s.kv_offload {
        let (offload, tiers_json) = offload::build(o, &scenario, &gpu, kv_bytes_per_token, engine.replicas.len(), engine.reqs.len());
        deployment["kv_offload"] = tiers_json;
        engine.attach_offload(offload);
    }
    Ok(Built { scenario, deployment, engine })
}

/// Most prefill entries a step's anatomy lays out (each is one kernel per layer).
const MAX_ANATOMY_PREFILLS: u32 = 16_384;

/// The anatomy of one recorded step ([`crate::perf::Anatomy`]) as JSON: `step_json` is a
/// step of `steps_json()` (an object with its `shape`; `start_ms`/`end_ms` when present add
/// `recorded_ms`, the duration the run charged) or a bare [`StepShape`]; the scenario is the
/// run's, which gives the cost model. Output: `{step_ms, graph, pipelined, sms, kernels:
/// {name, layer, part, parts, launched_us, start_us, end_us, stream, source, ctas,
/// sm_occupancy}, recorded_ms?}`. Errors name the field under `step` (`step.shape.prefill`).
pub fn step_anatomy(text: &str, format: Format, step_json: &str) -> Result<String> {
    guard(|| {
        let scenario = Scenario::parse(text, format)?;
        scenario.validate_local()?;
        let model = resolve_model(&scenario.model)?;
        let v: serde_json::Value =
            serde_json::from_str(step_json).map_err(|e| SimError::config("step", format!("invalid JSON: {e}")))?;
        // The pool of the step's replica prices it (its own GPU and layout).
        let views = scenario.deployment.pool_views(scenario.scheduler.policy.disaggregated());
        let replica = v.get("replica").and_then(serde_json::Value::as_u64).unwrap_or(0);
        let mut first = 0u64;
        let pool = views
            .iter()
            .find(|p| {
                first += u64::from(p.replicas);
                replica < first
            })
            .unwrap_or(&views[0]);
        let gpu = resolve_gpu(pool.gpu.unwrap_or(&scenario.gpu))?;
        let perf = pools::cost_model(&scenario, &model, &gpu, pool)?;
        let seqs_scale = u64::from(pool.dp);
        let (shape_v, path) = match v.get("shape") {
            Some(sh) => (sh.clone(), "step.shape"),
            None => (v.clone(), "step"),
        };
        let shape: StepShape = serde_path_to_error::deserialize(shape_v).map_err(|e| {
            let p = e.path().to_string();
            SimError::config(if p == "." { path.to_string() } else { format!("{path}.{p}") }, e.into_inner().to_string())
        })?;
        for (name, x) in [("comm_ms", shape.comm_ms), ("decision_ms", shape.decision_ms)] {
            crate::error::check::non_negative(&format!("{path}.{name}"), x)?;
        }
        // Counts a step of this scenario can hold (a step has at most max_num_seqs entries,
        // of at most max_model_len tokens each); past them the shape is not a step's.
        let seqs = u64::from(scenario.scheduler.max_num_seqs) * seqs_scale;
        let tokens = seqs * u64::from(scenario.scheduler.max_model_len.unwrap_or(model.max_context).max(1));
        for (name, x, limit) in [
            ("decode_seqs", shape.decode_seqs, seqs),
            ("sampled", shape.sampled, seqs),
            ("decode_context_sum", shape.decode_context_sum, tokens),
            ("context_sum_after", shape.context_sum_after, tokens),
            ("decode_blocks_1024", shape.decode_blocks_1024, tokens * 1024),
        ] {
            if x > limit {
                return Err(SimError::config(format!("{path}.{name}"), format!("{x} is more than a step of this scenario holds ({limit})")));
            }
        }
        // Each prefill entry is a kernel per layer.
        let most = scenario.scheduler.max_num_seqs.min(MAX_ANATOMY_PREFILLS) as usize;
        if shape.prefill.len() > most {
            return Err(SimError::config(
                format!("{path}.prefill"),
                format!("{} prefill entries: a step of this scenario holds at most {most}", shape.prefill.len()),
            ));
        }
        let items = shape.prefill_items();
        let b = shape.batch(&items);
        let a = perf.anatomy(&b, shape.comm_ms * 1e-3, shape.decision_ms * 1e-3);
        let mut out = serde_json::to_value(&a).map_err(|e| SimError::Internal { message: e.to_string() })?;
        if let (Some(s), Some(e)) = (v.get("start_ms").and_then(|x| x.as_f64()), v.get("end_ms").and_then(|x| x.as_f64())) {
            out["recorded_ms"] = serde_json::json!(e - s);
        }
        Ok(crate::json::to_string(&out).unwrap_or_default())
    })
}

/// The topology side of a scenario: resolve, place, price, resolve the events.
fn build_fabric(
    scenario: &Scenario,
    input: &crate::topo::TopologyInput,
    model: &crate::catalog::Model,
    kv_bytes_per_token_gpu: f64,
) -> Result<crate::fabric::Fabric> {
    use crate::topo::{events, placement, Topology};
    let topo = Topology::from_input(input).map_err(|e| e.under("topology"))?;
    let d = &scenario.deployment;
    let views = d.pool_views(scenario.scheduler.policy.disaggregated());
    let v0 = &views[0];
    if let Some(v) = views.iter().find(|v| (v.tp, v.pp, v.dp, v.ep) != (v0.tp, v0.pp, v0.dp, v0.ep)) {
        return Err(SimError::config(
            format!("{}.tp", v.path),
            "on a topology every pool has the same tp, pp, dp and ep (pools of different layouts are not placed yet)",
        ));
    }
    let par = crate::memory::Parallel { tp: v0.tp, pp: v0.pp, dp: v0.dp, ep: v0.ep, redundant_experts: d.moe.redundant_experts };
    let total = d.total_replicas();
    let placement = match &d.placement {
        Some(lists) => placement::explicit(&topo, lists, &par, total)?,
        None => placement::auto(&topo, &par, total)?,
    };
    // Each replica on its own pool's GPU.
    let gpus: Vec<&crate::catalog::GpuInput> =
        views.iter().flat_map(|v| std::iter::repeat_n(v.gpu.unwrap_or(&scenario.gpu), v.replicas as usize)).collect();
    check_placed_gpus(&topo, &placement, &gpus)?;
    let evs = events::resolve(&topo, &scenario.events)?;
    let prefill: u32 = views.iter().filter(|v| v.role == crate::config::PoolRole::Prefill).map(|v| v.replicas).sum();
    crate::fabric::Fabric::new(topo, evs, placement, par, model.hidden, model.layers, kv_bytes_per_token_gpu, prefill as usize)
}

/// Every GPU a replica is placed on must be the GPU the scenario prices its steps with: a
/// topology node that names another GPU (an L40S node under `gpu = "h200"`) is refused,
/// naming the node, instead of being priced silently as the scenario's GPU. A custom GPU
/// counts as its `preset` (overrides of a preset are still that GPU), else as its `name`;
/// nodes that name no GPU are taken to be the scenario's.
fn check_placed_gpus(
    topo: &crate::topo::Topology,
    placement: &crate::topo::placement::Placement,
    gpus: &[&crate::catalog::GpuInput],
) -> Result<()> {
    use crate::catalog::GpuInput;
    for (r, stages) in placement.iter().enumerate() {
        let priced = match gpus.get(r) {
            Some(GpuInput::Preset(name)) => name.as_str(),
            Some(GpuInput::Custom(f)) => f.preset.as_deref().or(f.name.as_deref()).unwrap_or("custom"),
            None => continue,
        };
        for &n in stages.iter().flatten() {
            let node = &topo.nodes[n as usize];
            let Some(named) = node.gpu.as_deref() else { continue };
            if named != priced {
                return Err(SimError::config(
                    "gpu",
                    format!(
                        "replica {r} is placed on topology node {:?}, a {named}, but its pool prices every step as \
                         a {priced}: set the pool's gpu = {named:?} or place the replica on {priced} nodes \
                         (deployment.placement)",
                        node.id
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Run `f`, turning a panic into `SimError::Internal` so none crosses into a front end.
pub fn guard<T>(f: impl FnOnce() -> Result<T>) -> Result<T> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => Err(SimError::Internal { message: crate::error::panic_message(&*p).to_string() }),
    }
}

/// A simulation that can be advanced in slices (for progress bars) or run to the end.
pub struct Simulation {
    built: Built,
    done: bool,
    /// The CPU time spent building and running it, against `limits.max_seconds`.
    started: crate::limits::Clock,
}

/// Events between two looks at the wall clock (a few milliseconds of work).
const CLOCK_EVENTS: u64 = 1 << 16;

impl Simulation {
    /// Parse, validate and build.
    pub fn from_text(text: &str, format: Format, options: SimOptions) -> Result<Simulation> {
        guard(|| Simulation::new(Scenario::parse(text, format)?, options))
    }

    /// Build from a parsed scenario.
    pub fn new(scenario: Scenario, options: SimOptions) -> Result<Simulation> {
        Simulation::with_trace(scenario, options, None)
    }

    /// Build a model-check counterexample's replay (its `scheduler.inject_bug` allowed: the
    /// replay checks every invariant itself).
    pub(crate) fn for_replay(scenario: Scenario) -> Result<Simulation> {
        let started = crate::limits::Clock::start();
        guard(|| Ok(Simulation { built: build_inner(scenario, SimOptions::default(), None, true)?, done: false, started })).map(Simulation::paused)
    }

    /// Parse, validate and build with a loaded trace for the scenario's `workload.trace`
    /// (a front end read its `path` through a [`crate::workload::TraceReader`]).
    pub fn from_text_with_trace(
        text: &str,
        format: Format,
        options: SimOptions,
        trace: Option<crate::workload::LoadedTrace>,
    ) -> Result<Simulation> {
        guard(|| Simulation::with_trace(Scenario::parse(text, format)?, options, trace))
    }

    /// Build from a parsed scenario and a loaded trace.
    pub fn with_trace(scenario: Scenario, options: SimOptions, trace: Option<crate::workload::LoadedTrace>) -> Result<Simulation> {
        let started = crate::limits::Clock::start();
        guard(|| Ok(Simulation { built: build_with(scenario, options, trace)?, done: false, started })).map(Simulation::paused)
    }

    /// Build from a parsed scenario and requests made by the caller (with token identity
    /// and session dependencies), instead of the scenario's own workload section, which
    /// must still be valid and is read for `timeout_s`.
    pub fn with_workload(scenario: Scenario, workload: crate::workload::Workload, options: SimOptions) -> Result<Simulation> {
        let started = crate::limits::Clock::start();
        guard(|| Ok(Simulation { built: build_from(scenario, options, Source::Given(workload), options.check_invariants)?, done: false, started })).map(Simulation::paused)
    }

    /// Built: the clock stops until the run goes on.
    fn paused(mut self) -> Simulation {
        self.started.pause();
        self
    }

    /// Process at most `max_events` events; `true` when the run is complete.
    pub fn run_events(&mut self, max_events: u64) -> Result<bool> {
        self.run_until(max_events, u64::MAX)
    }

    /// Process at most `max_events` events, pausing early (at the end of an instant) once
    /// `finished` requests are finished or rejected, so that a progress display hears of
    /// every step of its own size; `true` when the run is complete. A run past
    /// `limits.max_seconds` of its own CPU time ([`crate::limits::Clock`]) stops with a
    /// `ResourceError`.
    pub fn run_until(&mut self, max_events: u64, finished: u64) -> Result<bool> {
        self.started.resume();
        let done = self.run_slices(max_events, finished);
        self.started.pause();
        done
    }

    fn run_slices(&mut self, max_events: u64, finished: u64) -> Result<bool> {
        let mut left = max_events;
        while !self.done && left > 0 && self.built.engine.done_requests < finished {
            let limit = self.built.scenario.limits.max_seconds;
            let elapsed = self.started.elapsed_s();
            if elapsed > limit {
                let e = &self.built.engine;
                return Err(SimError::resource(
                    "limits.max_seconds",
                    format!(
                        "the run used more than {limit} s of its own CPU time ({elapsed:.1} s; {} of {} requests \
                         done, {:.3} s simulated); time other processes took on a busy machine is not counted",
                        e.done_requests,
                        e.reqs.len(),
                        e.now_ns as f64 / 1e9
                    ),
                ));
            }
            let slice = left.min(CLOCK_EVENTS);
            left -= slice;
            let engine = &mut self.built.engine;
            engine.pause_at_done = finished;
            self.done = guard(|| engine.run_events(slice))?;
        }
        Ok(self.done)
    }

    pub fn progress(&self) -> Progress {
        let e = &self.built.engine;
        Progress {
            finished_requests: e.done_requests,
            total_requests: e.reqs.len() as u64,
            now_ms: e.now_ns as f64 / 1e6,
            events: e.events,
        }
    }

    /// Run to the end.
    pub fn run(&mut self) -> Result<()> {
        while !self.run_events(u64::MAX)? {}
        Ok(())
    }

    /// Change the topology of a running simulation at its current time: `json` is either a
    /// list of events (as in the scenario's `events`; times before now apply now) or a whole
    /// topology entry (preset name or table) that replaces the current one (the placement's
    /// GPU ids must exist in it). Routes are re-evaluated, in-flight transfers re-costed,
    /// replicas that lost a peer stopped and their requests moved, stopped replicas whose
    /// group is connected again restarted.
    pub fn inject_topology(&mut self, json: &str) -> Result<()> {
        guard(|| {
            self.built.engine.inject_topology(json)?;
            self.done = false;
            Ok(())
        })
    }

    /// The engine (for invariant checks in tests and the model checker).
    pub fn engine(&self) -> &Engine {
        &self.built.engine
    }

    /// The engine, writable (unit tests that swap a part for a reference version).
    #[cfg(test)]
    pub(crate) fn engine_mut(&mut self) -> &mut Engine {
        &mut self.built.engine
    }

    /// Run to the end (if needed) and collect the result.
    pub fn finish(mut self) -> Result<SimResult> {
        self.run()?;
        guard(|| Ok(collect(self.built)))
    }
}

fn collect(built: Built) -> SimResult {
    let Built { scenario, deployment, mut engine } = built;
    let end_ns = engine.reqs.iter().map(|r| r.finish_ns).filter(|&t| t != crate::request::NO_TIME).max().unwrap_or(0);
    let fabric = engine.fabric.take();
    // What the results keep of the prefix cache (tokens hit per request, the offload tier's
    // counters); the rest of the engine's per-request state goes before the summary's and
    // the columns' arrays are made (a request's peak bytes: its record, its columns).
    let cached: Vec<u32> = engine.reqs.iter().map(|r| engine.apc.cached_tokens(r.id)).collect();
    let offload = engine.apc.offload.take();
    engine.apc = Default::default();
    engine.arrival_order = Vec::new();
    engine.deadlines = Default::default();
    let reqs = &engine.reqs;
    let ms = |ns: u64| if ns == crate::request::NO_TIME { f64::NAN } else { ns as f64 / 1e6 };
    let interval = engine.replicas.iter().map(|r| r.series.interval_ns()).max().unwrap_or(10_000_000);
    let mut ts = TimeSeries { interval_ms: interval as f64 / 1e6, ..Default::default() };
    let stats: Vec<_> = engine.replicas.iter().map(|r| r.stats.clone()).collect();
    let kv: Vec<_> = engine
        .replicas
        .iter()
        .map(|r| (r.sched.kv.allocation_failures, r.sched.kv.allocation_attempts))
        .collect();
    for (i, rep) in engine.replicas.iter().enumerate() {
        let mut s = rep.series.clone();
        s.coarsen_to(interval);
        s.emit(i as u32, &mut ts);
    }
    let slo = scenario.slo.as_ref().map(|s| SloNs { ttft: s.ttft_ms, tpot: s.tpot_ms, e2e: s.e2e_ms });
    let held = Held {
        // the deployment's GPUs over its replicas (pools may differ)
        gpus_per_replica: deployment["gpus"].as_f64().unwrap_or(0.0)
            / f64::from(scenario.deployment.total_replicas().max(1)),
        replica_ns: engine.scaler.as_ref().map(|sc| sc.replica_ns(end_ns)),
    };
    let mut summary = summarize(reqs, &engine.client, &stats, &kv, REASON_NAMES, slo, engine.frontend.report_client, held);
    // The columns after the summary: the summary's sorted copies are gone by then (a
    // request's peak bytes are its engine record plus its columns, not both plus those).
    let mut cols = RequestColumns { cached_tokens: cached, ..RequestColumns::with_capacity(reqs.len()) };
    for r in reqs {
        let c = engine.client.get(r.id as usize).copied().unwrap_or_default();
        cols.request_id.push(r.id);
        cols.arrival_ms.push(ms(r.arrival_ns - u64::from(c.ingest_ns)));
        cols.engine_arrival_ms.push(ms(r.arrival_ns));
        cols.first_token_ms.push(ms(r.first_token_ns));
        cols.finish_ms.push(ms(r.finish_ns));
        let later = |t: u64, d: u32| if t == crate::request::NO_TIME { t } else { t + u64::from(d) };
        cols.client_first_token_ms.push(ms(later(r.first_token_ns, c.out_first_ns)));
        let done = r.status == crate::request::Status::Finished;
        cols.client_finish_ms.push(if done { ms(later(r.finish_ns, c.out_last_ns)) } else { f64::NAN });
        cols.prompt_tokens.push(r.prompt);
        cols.output_tokens.push(r.output);
        cols.preemptions.push(r.preemptions);
        cols.replica.push(r.replica);
        cols.status.push(if r.status == crate::request::Status::Finished { 0 } else { 1 });
        cols.reason.push(r.reason as u8);
    }
    if let Some(sc) = engine.scaler.as_ref() {
        scaling_results(sc, end_ns, &mut summary, &mut ts);
    }
    if reqs.iter().any(|r| r.adversarial) {
        summary["classes"] = crate::metrics::class_summary(reqs, REASON_NAMES);
        cols.adversarial = reqs.iter().map(|r| r.adversarial).collect();
    }
    if let Some((st, waits)) = engine.lora_stats() {
        summary["lora"] = lora::summary(st, waits);
    }
    if let Some(st) = engine.spec_stats() {
        summary["speculative"] = speculative::summary(st);
    }
    if let Some(off) = offload.as_deref() {
        cols.kv_load_ms = off.load_ns.iter().map(|&n| n as f64 / 1e6).collect();
        summary["kv_offload"] = offload::summary(off, &summary);
    }
    let links = fabric.map(|mut f| {
        summary["topology"] = topology_summary(&f);
        f.link_table(end_ns)
    });
    SimResult {
        version: env!("CARGO_PKG_VERSION"),
        scenario_name: scenario.name.clone(),
        deployment,
        summary,
        requests: cols,
        timeseries: ts,
        links,
        steps: engine.steps_log,
    }
}

/// Under autoscaling: `gpu_hours` and the `scaling` table added to the summary (whose KV
/// use, busy fraction and per-GPU throughput [`summarize`] took over the replica-time
/// actually held), and the time series' `replicas` column.
fn scaling_results(sc: &crate::scaling::Autoscaler, end_ns: u64, summary: &mut serde_json::Value, ts: &mut TimeSeries) {
    let (gpu_hours, table) = sc.summary(end_ns);
    summary["gpu_hours"] = serde_json::json!(gpu_hours);
    summary["scaling"] = table;
    let width = (ts.interval_ms * 1e6).round() as u64;
    ts.replicas = ts
        .time_ms
        .iter()
        .map(|&t| {
            let lo = (t * 1e6).round() as u64;
            sc.mean_ready(lo, lo + width)
        })
        .collect();
}

fn topology_summary(f: &crate::fabric::Fabric) -> serde_json::Value {
    let mut v = serde_json::to_value(&f.stats).unwrap_or_default();
    let mut ms = f.stats.kv_transfer_ms.clone();
    ms.sort_by(f64::total_cmp);
    let pick = |q: f64| if ms.is_empty() { f64::NAN } else { ms[((ms.len() - 1) as f64 * q).round() as usize] };
    let mean = if ms.is_empty() { f64::NAN } else { ms.iter().sum::<f64>() / ms.len() as f64 };
    v["kv_transfer_ms"] = serde_json::json!({"mean": mean, "p50": pick(0.5), "p99": pick(0.99)});
    v["alive_replicas"] = serde_json::json!(f.alive.iter().filter(|&&a| a).count());
    v["events_not_reached"] = serde_json::json!(f.events_not_reached());
    v
}

/// Parse, build and run a scenario to the end.
pub fn simulate(text: &str, format: Format, options: SimOptions) -> Result<SimResult> {
    Simulation::from_text(text, format, options)?.finish()
}

/// Validate a scenario; returns the resolved scenario and deployment plan as JSON.
pub fn validate(text: &str, format: Format) -> Result<String> {
    validate_with_trace(text, format, None)
}

/// [`validate`] with a loaded trace for the scenario's `workload.trace`.
pub fn validate_with_trace(text: &str, format: Format, trace: Option<crate::workload::LoadedTrace>) -> Result<String> {
    guard(|| {
        let built = build_with(Scenario::parse(text, format)?, SimOptions::default(), trace)?;
        let v = serde_json::json!({"scenario": built.scenario, "deployment": built.deployment});
        Ok(v.to_string())
    })
}

/// Predict one step's execution time: a JSON request (`model`, `gpu`, `tp`, `batch` of
/// `{new_tokens, context_tokens}`, optional `cuda_graphs`, `dtype`, `kv_dtype`, `fusion`,
/// `block_size`) → JSON `{total_ms, mode, profile, breakdown: [{op, ms, source}]}`. The
/// simulator prices every step with the same model.
pub fn predict_step(request_json: &str) -> Result<String> {
    guard(|| {
        let req: crate::perf::predict::PredictRequest = {
            let de = &mut serde_json::Deserializer::from_str(request_json);
            serde_path_to_error::deserialize(de).map_err(|e| {
                let path = e.path().to_string();
                SimError::config(if path == "." { String::new() } else { path }, e.into_inner())
            })?
        };
        let p = crate::perf::predict::predict(&req)?;
        serde_json::to_string(&p).map_err(|e| SimError::Internal { message: e.to_string() })
    })
}

/// Every row of a GPU's calibration profile against the model: `[{kind, key, measured_ms,
/// predicted_ms, loo_ms}]` (leave-one-out: the row's table rebuilt without it). `None` when
/// the GPU has no shipped profile.
pub fn calibration_fidelity(gpu: &str) -> Option<String> {
    crate::calib::Profile::builtin(gpu).map(|p| serde_json::to_string(&p.fidelity()).unwrap_or_default())
}

/// The catalog (GPUs, models, policies, routers) as JSON.
pub fn presets_json() -> String {
    crate::registry::presets().to_string()
}

/// RTMPv2 candidates between two nodes of a topology (JSON: a preset name string or a
/// table) → JSON list of `{path, bandwidth_gbps, latency_us, score, chosen, frontier}`,
/// shortest latency first.
///
/// `down_json` lists links that are down: a JSON array of `[a, b]` node-id pairs (either
/// order; empty text means none). They go down in that order as the simulator's `link_down`
/// events do, after the pair was routed on the full topology (see
/// [`crate::topo::route::candidates_view`]); when they disconnect the pair the list is
/// empty. Errors: `down` (not a list), `down[i]` (not a pair of ids, an unknown id, two
/// nodes without a link between them).
pub fn routes_json(topology_json: &str, src: &str, dst: &str, down_json: &str) -> Result<String> {
    guard(|| {
        let t = crate::topo::Topology::from_json(topology_json)?;
        let (a, b) = (t.node("src", src)?, t.node("dst", dst)?);
        if a == b {
            return Err(SimError::config("dst", "must differ from src"));
        }
        let down = down_links(&t, down_json)?;
        let v = crate::topo::route::candidates_view(&t, a, b, &down);
        serde_json::to_string(&v).map_err(|e| SimError::Internal { message: e.to_string() })
    })
}

/// The link indices of a `down` list (see [`routes_json`]), checked against `t`.
fn down_links(t: &crate::topo::Topology, down_json: &str) -> Result<Vec<u32>> {
    if down_json.trim().is_empty() {
        return Ok(Vec::new());
    }
    let v: serde_json::Value = serde_json::from_str(down_json).map_err(|e| SimError::config("down", e.to_string()))?;
    let Some(items) = v.as_array() else {
        return Err(SimError::config("down", "must be a list of [src, dst] node-id pairs"));
    };
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let path = format!("down[{i}]");
        let pair = match item.as_array().map(Vec::as_slice) {
            Some([x, y]) => x.as_str().zip(y.as_str()),
            _ => None,
        };
        let Some((x, y)) = pair else {
            return Err(SimError::config(path, format!("must be a pair [src, dst] of node ids (got {item})")));
        };
        let (na, nb) = (t.node(&path, x)?, t.node(&path, y)?);
        let l = t.link_between(na, nb).ok_or_else(|| SimError::config(&path, format!("no link between '{x}' and '{y}'")))?;
        out.push(l);
    }
    Ok(out)
}

/// Resolve and validate a topology (JSON: preset name or table) → its full table as JSON
/// (`{nodes, links, routing}`; presets expanded), for editors and drawings.
pub fn topology_json(topology_json: &str) -> Result<String> {
    guard(|| {
        let t = crate::topo::Topology::from_json(topology_json)?;
        serde_json::to_string(&t.to_table()).map_err(|e| SimError::Internal { message: e.to_string() })
    })
}

/// The topology preset names.
pub fn topology_presets() -> Vec<&'static str> {
    crate::topo::presets::PRESET_NAMES.to_vec()
}

/// The embedded default scenario (TOML): Llama-3-70B, TP 4, two replicas on 8×H200,
/// Azure-conversation-like lengths.
pub fn default_scenario_toml() -> &'static str {
    include_str!("../../scenarios/default.toml")
}

/// The small configuration the model-check views start from (TOML): six requests with mixed
/// priorities, one replica, 16 KV blocks of 4 tokens.
pub fn default_check_toml() -> &'static str {
    include_str!("../../scenarios/check_default.toml")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precision_changes_the_memory_plan() {
        let base = r#"{"model": "llama-3-70b", "gpu": "h100", "deployment": {"tp": 4}"#;
        let plan = |cost: &str| -> serde_json::Value {
            let text = format!("{base}, \"cost_model\": {cost}}}");
            serde_json::from_str::<serde_json::Value>(&validate(&text, Format::Json).unwrap()).unwrap()["deployment"]
                .clone()
        };
        let bf16 = plan(r#"{"kind": "calibrated"}"#);
        let fp8_kv = plan(r#"{"kind": "calibrated", "kv_dtype": "fp8"}"#);
        let int4 = plan(r#"{"kind": "calibrated", "dtype": "int4"}"#);
        let blocks = |v: &serde_json::Value| v["num_gpu_blocks"].as_u64().unwrap();
        assert_eq!(blocks(&fp8_kv), 2 * blocks(&bf16), "an FP8 KV cache holds twice the tokens");
        assert!(blocks(&int4) > blocks(&bf16), "INT4 weights leave more room for KV");
        let w = |v: &serde_json::Value| v["memory"]["weights_gib"].as_f64().unwrap();
        assert!((w(&int4) * 4.0 - w(&bf16)).abs() < 1e-9);
    }

    #[test]
    fn guard_turns_a_panic_into_an_internal_error() {
        let r: Result<()> = guard(|| panic!("boom"));
        assert_eq!(r, Err(SimError::Internal { message: "boom".into() }));
        assert_eq!(r.unwrap_err().kind_name(), "InternalError");
    }

    #[test]
    fn a_run_in_slices_gives_the_same_bytes_as_one_run() {
        // The Python front end runs in slices to show progress; results must not depend on it.
        let text = default_scenario_toml();
        let whole = simulate(text, Format::Toml, SimOptions::default()).unwrap().to_json();
        let mut sim = Simulation::from_text(text, Format::Toml, SimOptions::default()).unwrap();
        let mut slices = 0;
        while !sim.run_events(97).unwrap() {
            slices += 1;
        }
        assert!(slices > 10);
        assert_eq!(sim.progress().finished_requests, sim.progress().total_requests);
        assert_eq!(sim.finish().unwrap().to_json(), whole);
    }

    #[test]
    fn progress_pauses_at_every_twentieth_of_the_requests() {
        // One step can finish many requests: pausing on the done count, not on events,
        // keeps every report within 5% of the previous one, and the bytes unchanged.
        let text = default_scenario_toml();
        let whole = simulate(text, Format::Toml, SimOptions::default()).unwrap().to_json();
        let mut sim = Simulation::from_text(text, Format::Toml, SimOptions::default()).unwrap();
        let total = sim.progress().total_requests;
        let step = total / 20;
        let mut last = 0;
        while !sim.run_until(u64::MAX, last + step).unwrap() {
            let now = sim.progress().finished_requests;
            assert!(now > last && now - last <= step + 256, "{last} -> {now}");
            last = now;
        }
        assert_eq!(sim.finish().unwrap().to_json(), whole);
    }

    #[test]
    fn a_run_past_its_wall_time_limit_stops_with_a_resource_error() {
        let text = format!("{}\n[limits]\nmax_seconds = 1e-9\n", default_scenario_toml());
        let e = simulate(&text, Format::Toml, SimOptions::default()).map(|_| ()).unwrap_err();
        assert_eq!((e.kind_name(), e.path()), ("ResourceError", Some("limits.max_seconds")), "{e}");
    }

    #[test]
    fn inject_bug_is_for_the_model_checker_only() {
        let text = default_scenario_toml().replace("policy = \"vllm\"", "policy = \"orca\"\ninject_bug = \"double_admit\"");
        let e = simulate(&text, Format::Toml, SimOptions::default()).map(|_| ()).unwrap_err();
        assert_eq!(e.path(), Some("scheduler.inject_bug"), "{e}");
        assert_eq!(validate(&text, Format::Toml).unwrap_err().path(), Some("scheduler.inject_bug"));
    }

    #[test]
    fn default_scenario_is_valid_and_separates_policies() {
        let text = default_scenario_toml();
        let mut p99 = Vec::new();
        for policy in crate::policy::Policy::colocated_names() {
            let t = text.replace("policy = \"vllm\"", &format!("policy = \"{policy}\""));
            let r = simulate(&t, Format::Toml, SimOptions::default()).unwrap();
            assert_eq!(r.summary["finished"], 2000, "{policy}");
            p99.push(r.summary["tpot_ms"]["p99"].as_f64().unwrap());
        }
        // Sarathi's small chunks must show a clearly flatter TPOT tail than vLLM.
        assert!(p99[2] < 0.8 * p99[1], "{p99:?}");
    }
}
