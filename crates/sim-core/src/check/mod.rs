//! Model checking of the scheduler: an explicit-state, breadth-first exploration of every
//! order of arrivals and step completions on a small configuration, running the real
//! engine, scheduler and KV code on every transition ([`explore`]), checking the
//! properties of [`props`] in every state plus deadlock, preemption timeliness and
//! "every request can finish" on the finished graph. A violation comes back as the
//! shortest numbered action sequence with the state change of each step and a scenario
//! that replays it in the ordinary simulator ([`trace`]); [`pnml`] exports the policy's
//! state machine as a Petri net.
//!
//! Limits keep it small and never hanging: at most [`MAX_REQUESTS`] requests,
//! [`MAX_REPLICAS`] replicas and [`MAX_UNITS`] KV units per replica (set
//! `scheduler.num_gpu_blocks`), and the search stops at `max_states` or `max_seconds`
//! with `complete = false`. Arrival times and the cost model of the scenario are ignored
//! (every order is explored); the router's dispatch timeout is not modelled.
//!
//! **Prefix caching is off in every check** (`CheckResult.config.prefix_caching` says so):
//! the packed state keeps how many blocks each request holds but not which cached content
//! the free ones still hold, and with caching on a preempted request re-hits its own freed
//! blocks, so that content would have to be part of the state. A scenario that asks for
//! `enable_prefix_caching = true` is refused with a `ConfigError`; counterexample replays
//! run with caching off too. Client timeouts and sessions (time-driven) are refused as well.
//!
//! With a `topology`, the links named by the scenario's `link_down`/`link_up` events (at
//! most [`MAX_LINKS`], their times ignored) go down and come up at any moment, any number of
//! times, and under `disagg` each KV transfer lands at any moment ([`explore`]). Other event
//! kinds are refused. Counterexamples through these events are described step by step but
//! have no replay scenario (their timing is not solved).

pub mod explore;
mod lp;
pub mod pnml;
pub mod props;
pub mod state;
mod timing;
pub mod trace;

use serde::Serialize;

use crate::api::{build_inner, guard, Format, SimOptions};
use crate::config::Scenario;
use crate::error::{check, Result, SimError};
use crate::perf::CostModelSpec;
use crate::api::resources::{enforce, Part};
use crate::limits::{self, Clock};
use crate::sched::{Bug, Victim};

pub use explore::{Action, Explorer};
pub use props::{Broken, PROPERTIES};
pub use trace::{Counterexample, TraceStep};

/// Most requests a checked scenario may have.
pub const MAX_REQUESTS: usize = 16;
/// Most replicas.
pub const MAX_REPLICAS: u32 = 4;
/// Most KV units per replica.
pub const MAX_UNITS: u64 = 64;
/// Most links explored going down and up (those named by `link_down`/`link_up` events).
pub const MAX_LINKS: usize = 4;

/// Limits and knobs of one check.
#[derive(Debug, Clone, Copy)]
pub struct CheckOptions {
    /// Stop after this many distinct states (≥ 1).
    pub max_states: u64,
    /// Stop after this much wall time (seconds), if given.
    pub max_seconds: Option<f64>,
    /// Preemption timeliness: the most scheduler steps a waiting request may spend while
    /// a less urgent one runs on its replica (policies with priorities).
    pub timeliness_steps: u32,
}

impl Default for CheckOptions {
    fn default() -> Self {
        CheckOptions { max_states: 2_000_000, max_seconds: None, timeliness_steps: 2 }
    }
}

/// The checked configuration, as the result reports it.
#[derive(Debug, Clone, Serialize)]
pub struct CheckedConfig {
    pub policy: String,
    pub inject_bug: Option<String>,
    pub requests: usize,
    pub replicas: usize,
    pub units_per_replica: u32,
    pub block_size: u32,
    pub timeliness_steps: u32,
    /// Whether the timeliness property applies (policies with priority preemption).
    pub timeliness_applies: bool,
    /// Always false: checks (and their replays) run without prefix caching (see the
    /// module documentation).
    pub prefix_caching: bool,
    /// The links explored going down and up (`src–dst`), from the scenario's events.
    pub links: Vec<String>,
}

/// One property's verdict: `pass`, `fail`, `unknown` (search incomplete) or
/// `not_applicable`.
#[derive(Debug, Clone, Serialize)]
pub struct PropertyStatus {
    pub name: &'static str,
    pub status: &'static str,
}

/// Everything a check produces.
#[derive(Debug, Clone, Serialize)]
pub struct CheckResult {
    /// No violation and the whole state space was explored.
    pub ok: bool,
    pub complete: bool,
    /// Why the search stopped early (`max_states …`, `max_seconds …`), if it did.
    pub stopped: Option<String>,
    pub states: u64,
    pub transitions: u64,
    /// Longest shortest path from the initial state (actions).
    pub max_depth: u32,
    pub elapsed_s: f64,
    pub states_per_s: f64,
    pub memory_mb: f64,
    pub config: CheckedConfig,
    pub properties: Vec<PropertyStatus>,
    /// The first (shortest) violation of each violated property, in [`PROPERTIES`] order.
    pub violations: Vec<Counterexample>,
    pub petri: pnml::PetriSummary,
    pub pnml: String,
}

impl CheckResult {
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// How far a check has come.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct CheckProgress {
    pub states: u64,
    pub transitions: u64,
    pub frontier: u64,
    pub depth: u32,
    pub elapsed_s: f64,
    pub violations: u64,
}

/// The cost model of checks and replays: every step takes exactly 1 ms.
pub(crate) fn linear_1ms() -> Result<CostModelSpec> {
    let v = serde_json::json!({"kind": "linear", "base_ms": 1.0});
    serde_json::from_value(v).map_err(|e| SimError::Internal { message: format!("linear cost model: {e}") })
}

/// A check in progress; advanced in slices (for progress displays), then finished.
pub struct Checker {
    scenario: Scenario,
    x: Explorer,
    opts: CheckOptions,
    config: CheckedConfig,
    preempts: bool,
    started: Clock,
    stopped: Option<String>,
    ended: bool,
}

impl Checker {
    /// Parse, validate against the checker's limits, and set up.
    pub fn from_text(text: &str, format: Format, opts: CheckOptions) -> Result<Checker> {
        guard(|| Checker::new(Scenario::parse(text, format)?, opts))
    }

    /// Set up a check of a parsed scenario.
    pub fn new(scenario: Scenario, opts: CheckOptions) -> Result<Checker> {
        guard(|| Checker::build(scenario, opts))
    }

    fn build(scenario: Scenario, opts: CheckOptions) -> Result<Checker> {
        check::in_range("max_states", opts.max_states, 1, 1 << 32)?;
        check::in_range("timeliness_steps", opts.timeliness_steps, 0, 200)?;
        if let Some(s) = opts.max_seconds {
            check::positive("max_seconds", s)?;
        }
        scenario.validate_local()?;
        if scenario.scaling.is_some() {
            return Err(SimError::config("scaling", "the model checker explores a fixed deployment: remove `scaling`"));
        }
        check::in_range("deployment.replicas", scenario.deployment.replicas, 1, MAX_REPLICAS)
            .map_err(|e| limit(e, "the model checker explores small deployments"))?;
        let units = scenario.scheduler.num_gpu_blocks.ok_or_else(|| {
            SimError::config(
                "scheduler.num_gpu_blocks",
                format!("required by the model checker (a small pool, at most {MAX_UNITS} blocks per replica)"),
            )
        })?;
        check::in_range("scheduler.num_gpu_blocks", units, 1, MAX_UNITS)
            .map_err(|e| limit(e, "the model checker explores small KV pools"))?;
        if scenario.scheduler.enable_prefix_caching == Some(true) {
            return Err(SimError::config(
                "scheduler.enable_prefix_caching",
                "the model checker explores the scheduler without prefix caching (cached block contents are not part \
                 of its state); leave it unset or set it to false",
            ));
        }
        if scenario.scheduler.async_scheduling == Some(true) {
            // A request waiting in a busy replica's inbox for the step after next is timing,
            // which the checker abstracts away (its state would merge distinct inboxes).
            return Err(SimError::config(
                "scheduler.async_scheduling",
                "the model checker explores the scheduler's decisions without step timing, so it cannot model async \
                 scheduling's one-step delay; leave it unset or set it to false",
            ));
        }
        if scenario.workload.timeout_s.is_some() {
            return Err(SimError::config(
                "workload.timeout_s",
                "the model checker explores every order of events without time, so it cannot model client timeouts",
            ));
        }
        let mut sc = scenario.clone();
        sc.cost_model = linear_1ms()?;
        sc.scheduler.enable_prefix_caching = Some(false);
        let built = build_inner(sc, SimOptions::default(), None, true)?;
        let mut engine = built.engine;
        engine.steady_ok = false; // the explorer completes steps itself, one state at a time
        engine.unpriced_steps = true;
        let n = engine.reqs.len();
        if engine.sessions.is_some() {
            return Err(SimError::config(
                "workload",
                "the model checker explores arrivals in every order, so it cannot model session turns sent after another request finishes",
            ));
        }
        if n > MAX_REQUESTS {
            return Err(SimError::config(
                "workload",
                format!("the model checker explores at most {MAX_REQUESTS} requests (got {n})"),
            ));
        }
        if let Some(r) = engine.reqs.iter().find(|r| r.prompt + r.output > u16::MAX as u32) {
            return Err(SimError::config(
                "workload",
                format!("request {}: prompt + output must stay below {} tokens for the model checker", r.id, u16::MAX),
            ));
        }
        let links = explored_links(&scenario, &engine)?;
        // The memory of `max_states` states, before any is stored.
        let per_state = state_bytes(&engine, links.len());
        enforce(
            &[Part {
                field: "max_states".into(),
                bytes: opts.max_states.saturating_mul(per_state),
                what: format!("{} states of about {per_state} B", opts.max_states),
            }],
            &scenario.limits,
        )?;
        let p = engine.params;
        let config = CheckedConfig {
            policy: scenario.scheduler.policy.name().to_string(),
            inject_bug: scenario.scheduler.inject_bug.clone(),
            requests: n,
            replicas: engine.replicas.len(),
            units_per_replica: units as u32,
            block_size: scenario.scheduler.block_size,
            timeliness_steps: opts.timeliness_steps,
            timeliness_applies: p.priority_preemption,
            prefix_caching: false,
            links: Vec::new(),
        };
        let preempts = p.victim != Victim::Never && p.bug != Bug::NoPreempt;
        let k = opts.timeliness_steps.min(200) as u8;
        let x = Explorer::new(engine, k, links);
        let config = CheckedConfig { links: (0..x.links()).map(|i| x.link_label(i as u32)).collect(), ..config };
        Ok(Checker {
            scenario,
            x,
            opts,
            config,
            preempts,
            started: Clock::start(),
            stopped: None,
            ended: false,
        })
    }

    /// Explore about `more_states` more states; `true` once the search has ended (whole
    /// graph explored, or a limit reached).
    pub fn run(&mut self, more_states: u64) -> Result<bool> {
        if self.ended {
            return Ok(true);
        }
        // Saturating: on 32-bit targets (WASM) 2^32 must not wrap to 0.
        let max = usize::try_from(self.opts.max_states).unwrap_or(usize::MAX);
        let more = usize::try_from(more_states).unwrap_or(usize::MAX);
        let x = &mut self.x;
        let ended = guard(|| Ok(x.run(more, max)))?;
        let limit = self.scenario.limits.memory_bytes();
        let seconds = self.opts.max_seconds.map_or(self.scenario.limits.max_seconds, |s| s.min(self.scenario.limits.max_seconds));
        if ended {
            self.ended = true;
            if !self.x.is_complete() {
                self.stopped = Some(format!("max_states reached ({max} states)"));
            }
        } else if self.x.memory_bytes() as u64 * 3 / 2 > limit {
            // The next growth of its tables would pass the limit: stop, as at max_states.
            self.ended = true;
            self.stopped = Some(format!(
                "limits.max_memory_gib reached ({} held, {} states)",
                limits::bytes_text(self.x.memory_bytes() as u64),
                self.x.states()
            ));
        } else if self.started.elapsed_s() >= seconds {
            self.ended = true;
            self.stopped = Some(format!("max_seconds reached ({seconds} s)"));
        }
        Ok(self.ended)
    }

    pub fn progress(&self) -> CheckProgress {
        CheckProgress {
            states: self.x.states() as u64,
            transitions: self.x.transitions,
            frontier: self.x.frontier() as u64,
            depth: self.x.max_depth,
            elapsed_s: self.started.elapsed_s(),
            violations: self.x.found.len() as u64,
        }
    }

    /// Run to the end (unless already ended) and build the result: counterexamples with
    /// their replays, property verdicts, the Petri net.
    pub fn finish(mut self) -> Result<CheckResult> {
        while !self.run(1 << 16)? {}
        let elapsed_s = self.started.elapsed_s();
        guard(move || self.result(elapsed_s))
    }

    fn result(mut self, elapsed_s: f64) -> Result<CheckResult> {
        let complete = self.x.is_complete();
        let k = self.opts.timeliness_steps.min(200) as u8;
        let mut found = self.x.found.clone();
        found.sort_by_key(|f| PROPERTIES.iter().position(|p| *p == f.broken.property));
        let mut violations = Vec::with_capacity(found.len());
        for f in &found {
            violations.push(trace::counterexample(&mut self.x, &self.scenario, &f.broken, f.state, k)?);
        }
        let properties = PROPERTIES
            .iter()
            .map(|&name| {
                let status = if found.iter().any(|f| f.broken.property == name) {
                    "fail"
                } else if name == props::TIMELINESS && !self.config.timeliness_applies {
                    "not_applicable"
                } else if complete {
                    "pass"
                } else {
                    "unknown"
                };
                PropertyStatus { name, status }
            })
            .collect();
        let units = self.config.units_per_replica as u64 * self.config.replicas as u64;
        let markings = self.x.markings();
        let petri = pnml::summarise(self.preempts, self.config.requests as u64, units, &markings);
        let name = format!("o1sim {} scheduler", self.config.policy);
        let pnml = pnml::to_pnml(&name, self.preempts, self.config.requests as u64, units);
        let states = self.x.states() as u64;
        Ok(CheckResult {
            ok: violations.is_empty() && complete,
            complete,
            stopped: self.stopped,
            states,
            transitions: self.x.transitions,
            max_depth: self.x.max_depth,
            elapsed_s,
            states_per_s: if elapsed_s > 0.0 { states as f64 / elapsed_s } else { 0.0 },
            memory_mb: self.x.memory_bytes() as f64 / 1e6,
            config: self.config,
            properties,
            violations,
            petri,
            pnml,
        })
    }
}

/// The topology links the check takes down and up: those the scenario's `link_down` and
/// `link_up` events name (each once, in order of first mention). Other kinds are refused.
fn explored_links(scenario: &Scenario, engine: &crate::engine::Engine) -> Result<Vec<u32>> {
    use crate::topo::events::{Action as A, EventSpec};
    let Some(f) = engine.fabric.as_ref() else { return Ok(Vec::new()) };
    let mut order: Vec<(usize, u32)> = Vec::new();
    for (i, spec) in scenario.events.iter().enumerate() {
        if !matches!(spec, EventSpec::LinkDown { .. } | EventSpec::LinkUp { .. }) {
            return Err(SimError::config(
                format!("events[{i}].kind"),
                "the model checker explores link_down and link_up events only (set_link and remove_gpu: run the simulator)",
            ));
        }
    }
    for (i, spec) in scenario.events.iter().enumerate() {
        let one = crate::topo::events::resolve(&f.topo, std::slice::from_ref(spec))
            .map_err(|e| reindex(e, i))?;
        if let Some(crate::topo::events::TopoEvent { action: A::LinkDown(l) | A::LinkUp(l), .. }) = one.first() {
            if !order.iter().any(|x| x.1 == *l) {
                order.push((i, *l));
            }
        }
    }
    if order.len() > MAX_LINKS {
        return Err(SimError::config(
            format!("events[{}]", order[MAX_LINKS].0),
            format!("the model checker explores at most {MAX_LINKS} links going down and up (this event names a fifth)"),
        ));
    }
    Ok(order.into_iter().map(|x| x.1).collect())
}

/// Bytes one explored state costs, about: its packed bytes (twice, for the growth of the
/// store), the index, parent, action, depth and flags, and the edges to its successors (at
/// most one per request, replica and link).
fn state_bytes(e: &crate::engine::Engine, links: usize) -> u64 {
    let (n, reps) = (e.reqs.len() as u64, e.replicas.len() as u64);
    let packed = n * 10 + reps * 13 + 2 + if links > 0 { 2 } else { 0 };
    2 * packed + 64 + 8 * (n + reps + links as u64)
}

/// An error about `events[0]` of a one-event list, about `events[i]` of the scenario.
fn reindex(e: SimError, i: usize) -> SimError {
    match e {
        SimError::Config { path, message } => {
            SimError::Config { path: path.replacen("events[0]", &format!("events[{i}]"), 1), message }
        }
        other => other,
    }
}

fn limit(e: SimError, why: &str) -> SimError {
    match e {
        SimError::Config { path, message } => SimError::Config { path, message: format!("{message}: {why}") },
        other => other,
    }
}

/// Parse a scenario and check it to the end (or a limit).
pub fn check(text: &str, format: Format, opts: CheckOptions) -> Result<CheckResult> {
    Checker::from_text(text, format, opts)?.finish()
}

#[cfg(test)]
mod tests;
