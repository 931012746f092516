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

pub mod explore;
mod lp;
pub mod pnml;
pub mod props;
pub mod state;
mod timing;
pub mod trace;

use serde::Serialize;

use crate::api::{build, guard, Format, SimOptions};
use crate::config::Scenario;
use crate::error::{check, Result, SimError};
use crate::perf::CostModelSpec;
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

/// Wall clock of a check. `std::time::Instant` panics on wasm32-unknown-unknown (no clock
/// without imports), so there the elapsed time reads 0: `max_seconds` never fires and the
/// front end bounds a check itself (the page runs it in a Worker it can terminate).
#[derive(Debug, Clone, Copy)]
struct Clock {
    #[cfg(not(all(target_arch = "wasm32", target_os = "unknown")))]
    started: std::time::Instant,
}

impl Clock {
    fn start() -> Clock {
        Clock {
            #[cfg(not(all(target_arch = "wasm32", target_os = "unknown")))]
            started: std::time::Instant::now(),
        }
    }

    fn elapsed_s(&self) -> f64 {
        #[cfg(not(all(target_arch = "wasm32", target_os = "unknown")))]
        return self.started.elapsed().as_secs_f64();
        #[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
        return 0.0;
    }
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
        let mut sc = scenario.clone();
        sc.cost_model = linear_1ms()?;
        let built = build(sc, SimOptions::default())?;
        let mut engine = built.engine;
        engine.steady_ok = false; // the explorer completes steps itself, one state at a time
        engine.unpriced_steps = true;
        let n = engine.reqs.len();
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
        let p = engine.params;
        let config = CheckedConfig {
            policy: scenario.scheduler.policy.clone(),
            inject_bug: scenario.scheduler.inject_bug.clone(),
            requests: n,
            replicas: engine.replicas.len(),
            units_per_replica: units as u32,
            block_size: scenario.scheduler.block_size,
            timeliness_steps: opts.timeliness_steps,
            timeliness_applies: p.priority_preemption,
        };
        let preempts = p.victim != Victim::Never && p.bug != Bug::NoPreempt;
        let k = opts.timeliness_steps.min(200) as u8;
        Ok(Checker {
            scenario,
            x: Explorer::new(engine, k),
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
        let max = self.opts.max_states as usize;
        let x = &mut self.x;
        let ended = guard(|| Ok(x.run(more_states.min(usize::MAX as u64) as usize, max)))?;
        if ended {
            self.ended = true;
            if !self.x.is_complete() {
                self.stopped = Some(format!("max_states reached ({max} states)"));
            }
        } else if let Some(s) = self.opts.max_seconds {
            if self.started.elapsed_s() >= s {
                self.ended = true;
                self.stopped = Some(format!("max_seconds reached ({s} s)"));
            }
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
