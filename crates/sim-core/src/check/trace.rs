//! Counterexamples: the shortest action sequence to a violation, re-executed step by step
//! to describe each state change, turned into an ordinary scenario (explicit arrival times,
//! a linear cost model) and replayed through the normal simulator to confirm it.

use serde::Serialize;

use crate::api::{SimOptions, Simulation};
use crate::config::Scenario;
use crate::engine::Engine;
use crate::workload::{ExplicitRequest, WorkloadSpec};
use crate::{Result, SimError};

use super::explore::{Action, Explorer};
use super::explore::update_wait;
use super::props::{self, Broken, CAN_FINISH, NO_DEADLOCK};

/// Step duration of the replay scenario's cost model: every step takes exactly 1 ms.
const STEP_NS: u64 = 1_000_000;
/// Gap between consecutive arrivals inside one step of the replay.
const ARRIVAL_GAP_NS: u64 = 1_000;
/// Events a replay may take before it counts as never finishing.
const MAX_REPLAY_EVENTS: u64 = 100_000;

/// One request in a [`Snapshot`].
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RequestState {
    pub id: u32,
    pub status: &'static str,
    /// -1 before dispatch.
    pub replica: i32,
    pub computed: u32,
    pub generated: u32,
    pub units: u32,
}

/// One replica in a [`Snapshot`].
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ReplicaState {
    pub busy: bool,
    pub free_units: u32,
    pub waiting: Vec<u32>,
    pub running: Vec<u32>,
    /// The in-flight step's plan: (request, tokens).
    pub step: Vec<(u32, u32)>,
}

/// The whole model state after a counterexample step.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Snapshot {
    pub requests: Vec<RequestState>,
    pub replicas: Vec<ReplicaState>,
}

fn snapshot(e: &Engine) -> Snapshot {
    Snapshot {
        requests: e
            .reqs
            .iter()
            .map(|r| RequestState {
                id: r.id,
                status: props::status_name(r.status),
                replica: r.replica,
                computed: r.computed,
                generated: r.generated,
                units: r.blocks.len() as u32,
            })
            .collect(),
        replicas: e
            .replicas
            .iter()
            .map(|rep| ReplicaState {
                busy: rep.busy,
                free_units: rep.sched.kv.free_units(),
                waiting: rep.sched.waiting.iter().collect(),
                running: rep.sched.running.clone(),
                step: if rep.busy { rep.sched.plan.clone() } else { Vec::new() },
            })
            .collect(),
    }
}

/// One numbered action of a counterexample and what it changed.
#[derive(Debug, Clone, Serialize)]
pub struct TraceStep {
    /// 1-based.
    pub step: u32,
    /// `arrive` or `complete`.
    pub action: &'static str,
    /// The arriving request (arrive) or the replica whose step completes (complete).
    pub target: u32,
    pub text: String,
    pub changes: Vec<String>,
    /// When the event happens in the replay scenario (ms), if it could be timed.
    pub at_ms: Option<f64>,
    pub state: Snapshot,
}

/// A violated property with its shortest counterexample.
#[derive(Debug, Clone, Serialize)]
pub struct Counterexample {
    pub property: &'static str,
    pub message: String,
    /// Number of actions.
    pub length: usize,
    pub trace: Vec<TraceStep>,
    /// A scenario (JSON) whose simulation performs the same actions in the same order.
    pub replay_scenario: Option<serde_json::Value>,
    /// Why there is no replay scenario, when there is none.
    pub replay_note: Option<String>,
    /// Whether simulating `replay_scenario` (with invariant checks) shows the violation.
    pub reproduced: Option<bool>,
    /// What the replay reported, and after how many events.
    pub replay_message: Option<String>,
    pub replay_events: Option<u64>,
}

fn describe_changes(before: &Snapshot, after: &Snapshot, e: &Engine, steps_before: &[u64]) -> Vec<String> {
    let mut out = Vec::new();
    for (b, a) in before.requests.iter().zip(&after.requests) {
        if b.status != a.status {
            let place = if a.replica >= 0 && matches!(a.status, "waiting" | "running") {
                format!(" on replica {}", a.replica)
            } else {
                String::new()
            };
            out.push(format!("request {}: {} → {}{place}", a.id, b.status, a.status));
        }
        if (b.computed, b.generated) != (a.computed, a.generated) {
            out.push(format!(
                "request {}: computed {} → {}, generated {} → {}",
                a.id, b.computed, a.computed, b.generated, a.generated
            ));
        }
        if b.units != a.units {
            out.push(format!("request {}: holds {} → {} KV units", a.id, b.units, a.units));
        }
    }
    for (i, rep) in e.replicas.iter().enumerate() {
        if rep.stats.steps != steps_before[i] {
            let plan: Vec<String> = rep.sched.plan.iter().map(|&(id, n)| format!("request {id} ×{n}")).collect();
            out.push(format!("replica {i} starts a step: {}", plan.join(", ")));
            for &id in &rep.sched.preempted {
                out.push(format!("replica {i} preempts request {id}"));
            }
        }
        let (b, a) = (before.replicas[i].free_units, after.replicas[i].free_units);
        if b != a {
            out.push(format!("replica {i}: free units {b} → {a}"));
        }
    }
    out
}

/// Re-execute `path` from the initial state, describing every step, and time it for the
/// replay: `Some(arrival times by request)` when the order can be produced with 1 ms steps.
fn reexecute(x: &mut Explorer, path: &[Action]) -> (Vec<TraceStep>, std::result::Result<Vec<Option<u64>>, String>) {
    x.load(0);
    let reps = x.engine.replicas.len();
    let mut arrivals: Vec<Option<u64>> = vec![None; x.engine.reqs.len()];
    let mut busy_until: Vec<Option<u64>> = vec![None; reps];
    let mut now = 0u64;
    let mut timing: std::result::Result<(), String> = Ok(());
    let mut steps = Vec::with_capacity(path.len());
    for (k, &act) in path.iter().enumerate() {
        let before = snapshot(&x.engine);
        let steps_before: Vec<u64> = x.engine.replicas.iter().map(|r| r.stats.steps).collect();
        // The time of this event in the replay.
        let t = match act {
            Action::Arrive(_) => now + ARRIVAL_GAP_NS,
            Action::Complete(r) => busy_until[r as usize].unwrap_or(now),
        };
        let clash = busy_until
            .iter()
            .enumerate()
            .any(|(i, b)| b.is_some_and(|b| b <= t && act != Action::Complete(i as u32)));
        if timing.is_ok() && (clash || t <= now && k > 0) {
            timing = Err(format!(
                "step {} cannot be timed with equal 1 ms steps (another replica's step would end first)",
                k + 1
            ));
        }
        now = t;
        let (action, target, text) = match act {
            Action::Arrive(i) => {
                arrivals[i as usize] = Some(t);
                ("arrive", i, format!("request {i} arrives"))
            }
            Action::Complete(r) => {
                busy_until[r as usize] = None;
                ("complete", r, format!("the step on replica {r} completes"))
            }
        };
        let _ = x.apply(act);
        for (i, rep) in x.engine.replicas.iter().enumerate() {
            if rep.stats.steps != steps_before[i] {
                busy_until[i] = Some(t + STEP_NS);
            }
        }
        let after = snapshot(&x.engine);
        let changes = describe_changes(&before, &after, &x.engine, &steps_before);
        steps.push(TraceStep {
            step: k as u32 + 1,
            action,
            target,
            text,
            changes,
            at_ms: timing.is_ok().then_some(t as f64 / 1e6),
            state: after,
        });
    }
    if timing.is_err() {
        for s in &mut steps {
            s.at_ms = None;
        }
    }
    (steps, timing.map(|_| arrivals))
}

/// The replay scenario: the checked scenario with the explicit arrival times, 1 ms steps,
/// and no dispatch timeout. Requests that never arrive in the trace arrive 1 s after it.
fn replay_scenario(base: &Scenario, e: &Engine, arrivals: &[Option<u64>], property: &str) -> Result<Scenario> {
    let last = arrivals.iter().flatten().max().copied().unwrap_or(0);
    let requests = e
        .reqs
        .iter()
        .map(|r| {
            let t = arrivals[r.id as usize].unwrap_or(last + 1_000 * STEP_NS);
            ExplicitRequest {
                arrival_ms: Some(t as f64 / 1e6),
                prompt_tokens: Some(r.prompt),
                output_tokens: Some(r.output),
                priority: (r.priority != 0).then_some(r.priority),
            }
        })
        .collect();
    let mut sc = base.clone();
    sc.name = Some(format!("counterexample: {property}"));
    sc.workload = WorkloadSpec::explicit(requests);
    sc.cost_model = super::linear_1ms()?;
    sc.deployment.dispatch_timeout_ms = 1e9;
    Ok(sc)
}

/// Simulate `scenario` event by event with every invariant checked; the first violation
/// and the number of events (instants) it took.
pub fn replay(scenario: Scenario, k: u8) -> Result<Option<(Broken, u64)>> {
    let mut sim = Simulation::new(scenario, SimOptions::default())?;
    let timeliness = sim.engine().params.priority_preemption;
    let mut wait = vec![0u8; sim.engine().reqs.len()];
    for event in 1..=MAX_REPLAY_EVENTS {
        let steps_before: Vec<u64> = sim.engine().replicas.iter().map(|r| r.stats.steps).collect();
        let outcome = sim.run_events(1);
        let e = sim.engine();
        if let Err(b) = props::check_state(e) {
            return Ok(Some((b, event)));
        }
        let done = match outcome {
            Ok(done) => done,
            Err(SimError::Stalled { message }) => return Ok(Some((Broken { property: NO_DEADLOCK, message }, event))),
            Err(other) => return Err(other),
        };
        if timeliness {
            if let Some(b) = update_wait(e, &steps_before, &mut wait, k) {
                return Ok(Some((b, event)));
            }
        }
        if done {
            return Ok(None);
        }
    }
    let message = format!("the simulation did not finish within {MAX_REPLAY_EVENTS} events");
    Ok(Some((Broken { property: CAN_FINISH, message }, MAX_REPLAY_EVENTS)))
}

/// Build the full counterexample for a violation found at `state`.
pub fn counterexample(x: &mut Explorer, base: &Scenario, broken: &Broken, state: u32, k: u8) -> Result<Counterexample> {
    let path = x.path_to(state);
    let (trace, timing) = reexecute(x, &path);
    let mut cx = Counterexample {
        property: broken.property,
        message: broken.message.clone(),
        length: path.len(),
        trace,
        replay_scenario: None,
        replay_note: None,
        reproduced: None,
        replay_message: None,
        replay_events: None,
    };
    match timing {
        Err(note) => cx.replay_note = Some(note),
        Ok(arrivals) => {
            let sc = replay_scenario(base, &x.engine, &arrivals, broken.property)?;
            cx.replay_scenario = Some(serde_json::to_value(&sc).map_err(|e| SimError::Internal { message: e.to_string() })?);
            let outcome = replay(sc, k)?;
            // A state that cannot finish shows in a simulation as a stall or a run that
            // never ends.
            let expected = |p: &str| p == broken.property || (broken.property == CAN_FINISH && p == NO_DEADLOCK);
            match outcome {
                Some((b, events)) => {
                    cx.reproduced = Some(expected(b.property));
                    cx.replay_message = Some(format!("{}: {}", b.property, b.message));
                    cx.replay_events = Some(events);
                }
                None => {
                    cx.reproduced = Some(false);
                    cx.replay_message = Some("the replay finished without a violation".into());
                }
            }
        }
    }
    Ok(cx)
}
