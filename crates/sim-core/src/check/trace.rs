//! Counterexamples: the shortest action sequence to a violation, re-executed step by step
//! to describe each state change, turned into an ordinary scenario (explicit arrival times,
//! a linear cost model; see [`super::timing`]) and replayed through the normal simulator to
//! confirm it: the replay must go through the counterexample's states, event by event, and
//! break the same property. On several replicas, when no timing of one shared cost model
//! produces the shortest order, the replay follows another order to a violation of the same
//! property (`replay_trace`).

use serde::Serialize;

use crate::api::Simulation;
use crate::config::Scenario;
use crate::engine::Engine;
use crate::workload::{ExplicitRequest, WorkloadSpec};
use crate::{Result, SimError};

use super::explore::update_wait;
use super::explore::{Action, Explorer};
use super::props::{self, Broken, CAN_FINISH, NO_DEADLOCK};
use super::timing::{self, Plan, StepRec};

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
    /// `arrive`, `complete`, `link_down`, `link_up`, `land` (a KV cache arrives, `disagg`)
    /// or `stale` (a dropped step's completion).
    pub action: &'static str,
    /// The arriving request (arrive, land), the replica whose step completes (complete,
    /// stale), or the explored link's index (link_down, link_up).
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
    /// When no timing of a replay produces `trace`'s order (two replicas whose steps would
    /// have to last inconsistently): the shortest order found that a replay can time and
    /// that reaches a violation of the same property; `replay_scenario` follows it instead.
    pub replay_trace: Option<Vec<TraceStep>>,
    /// A scenario (JSON) whose simulation performs the same actions in the same order
    /// (`trace`'s, or `replay_trace`'s when there is one).
    pub replay_scenario: Option<serde_json::Value>,
    /// Why the replay does not follow `trace` (there is no replay scenario, or it follows
    /// `replay_trace`).
    pub replay_note: Option<String>,
    /// Whether simulating `replay_scenario` (with invariant checks) takes the order it
    /// follows, state by state, and shows the violation.
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

/// Re-execute `path` from the initial state, describing every step (without times), and
/// list the steps the replicas start on the way.
fn reexecute(x: &mut Explorer, path: &[Action]) -> (Vec<TraceStep>, Vec<StepRec>) {
    x.load(0);
    let mut steps = Vec::with_capacity(path.len());
    let mut started: Vec<StepRec> = Vec::new();
    for (k, &act) in path.iter().enumerate() {
        let before = snapshot(&x.engine);
        let steps_before: Vec<u64> = x.engine.replicas.iter().map(|r| r.stats.steps).collect();
        let (action, target, text) = match act {
            Action::Arrive(i) => ("arrive", i, format!("request {i} arrives")),
            Action::Complete(r) => ("complete", r, format!("the step on replica {r} completes")),
            Action::LinkDown(k) => ("link_down", k, format!("link {} goes down", x.link_label(k))),
            Action::LinkUp(k) => ("link_up", k, format!("link {} comes up", x.link_label(k))),
            Action::Land(i) => ("land", i, format!("request {i}'s KV cache lands")),
            Action::Stale(r) => ("stale", r, format!("the step replica {r} dropped when it stopped comes due")),
        };
        let _ = x.apply(act);
        timing::record_steps(&x.engine, &steps_before, k, act, &mut started);
        let after = snapshot(&x.engine);
        let changes = describe_changes(&before, &after, &x.engine, &steps_before);
        steps.push(TraceStep { step: k as u32 + 1, action, target, text, changes, at_ms: None, state: after });
    }
    (steps, started)
}

/// The replay scenario: the checked scenario with explicit arrival times, the plan's
/// linear cost model and no dispatch timeout.
fn replay_scenario(base: &Scenario, e: &Engine, path: &[Action], plan: &Plan, property: &str) -> Result<Scenario> {
    let mut arrivals: Vec<Option<u64>> = vec![None; e.reqs.len()];
    for (k, &act) in path.iter().enumerate() {
        if let Action::Arrive(i) = act {
            arrivals[i as usize] = Some(plan.arrive_ns[k]);
        }
    }
    let requests = e
        .reqs
        .iter()
        .map(|r| {
            let t = arrivals[r.id as usize].unwrap_or(plan.later_ns);
            ExplicitRequest {
                arrival_ms: Some(t as f64 / 1e6),
                prompt_tokens: Some(r.prompt),
                output_tokens: Some(r.output),
                priority: (r.priority != 0).then_some(r.priority),
                lora: (r.lora > 0).then(|| u32::from(r.lora) - 1),
                ..Default::default()
            }
        })
        .collect();
    let mut sc = base.clone();
    sc.name = Some(format!("counterexample: {property}"));
    sc.workload = WorkloadSpec { lora: base.workload.lora.clone(), ..WorkloadSpec::explicit(requests) };
    sc.cost_model = plan.cost.spec()?;
    sc.deployment.dispatch_timeout_ms = 1e9;
    // As checked: without prefix caching.
    sc.scheduler.enable_prefix_caching = Some(false);
    Ok(sc)
}

/// What simulating a replay scenario showed.
struct Replayed {
    /// The first violation and the event (instant) it showed at.
    broken: Option<(Broken, u64)>,
    /// The first event after which the simulator's state differed from the trace's.
    diverged: Option<u64>,
}

/// Simulate `sim` event by event with every invariant checked; the first violation and
/// the number of events (instants) it took, and whether the states met on the way are
/// the trace's (`expected`, one per event).
fn replay(mut sim: Simulation, k: u8, expected: &[Snapshot]) -> Result<Replayed> {
    let timeliness = sim.engine().params.priority_preemption;
    let mut wait = vec![0u8; sim.engine().reqs.len()];
    let mut diverged = None;
    for event in 1..=MAX_REPLAY_EVENTS {
        let steps_before: Vec<u64> = sim.engine().replicas.iter().map(|r| r.stats.steps).collect();
        let outcome = sim.run_events(1);
        let e = sim.engine();
        if diverged.is_none() && expected.get(event as usize - 1).is_some_and(|s| *s != snapshot(e)) {
            diverged = Some(event);
        }
        let broken = |b: Broken| Ok(Replayed { broken: Some((b, event)), diverged });
        if let Err(b) = props::check_state(e) {
            return broken(b);
        }
        let done = match outcome {
            Ok(done) => done,
            Err(SimError::Stalled { message }) => return broken(Broken { property: NO_DEADLOCK, message }),
            Err(other) => return Err(other),
        };
        if timeliness {
            if let Some(b) = update_wait(e, &steps_before, &mut wait, k) {
                return broken(b);
            }
        }
        if done {
            return Ok(Replayed { broken: None, diverged });
        }
    }
    let message = format!("the simulation did not finish within {MAX_REPLAY_EVENTS} events");
    Ok(Replayed { broken: Some((Broken { property: CAN_FINISH, message }, MAX_REPLAY_EVENTS)), diverged })
}

/// A replay ready to run: its scenario, the simulation built from it, and when each of
/// the order's events happens in it (ns).
type Timed = (Scenario, Simulation, Vec<u64>);

/// Time `path` for a replay: equal 1 ms steps if they keep its order, else a solved linear
/// cost model; `Err(why)` when neither does.
fn time_path(x: &Explorer, base: &Scenario, path: &[Action], started: &[StepRec], property: &str) -> Result<std::result::Result<Timed, String>> {
    if !timing::timed_kinds(path) {
        return Ok(Err(timing::UNTIMED.to_string()));
    }
    let mut why = String::new();
    for plan in [Ok(timing::equal_steps(path, started)), timing::solved(path, started)] {
        let plan = match plan {
            Ok(p) => p,
            Err(w) => return Ok(Err(w)),
        };
        let sc = replay_scenario(base, &x.engine, path, &plan, property)?;
        let sim = Simulation::for_replay(sc.clone())?;
        match timing::event_times(&plan, path, started, sim.engine().perf()) {
            Ok(times) => return Ok(Ok((sc, sim, times))),
            Err(w) => why = w,
        }
    }
    Ok(Err(why))
}

/// Build the full counterexample for a violation found at `state`.
pub fn counterexample(x: &mut Explorer, base: &Scenario, broken: &Broken, state: u32, k: u8) -> Result<Counterexample> {
    let path = x.path_to(state);
    let (mut trace, started) = reexecute(x, &path);
    let mut cx = Counterexample {
        property: broken.property,
        message: broken.message.clone(),
        length: path.len(),
        trace: Vec::new(),
        replay_trace: None,
        replay_scenario: None,
        replay_note: None,
        reproduced: None,
        replay_message: None,
        replay_events: None,
    };
    let (timed, replayed_len) = match time_path(x, base, &path, &started, broken.property)? {
        Ok(t) => {
            for (s, ns) in trace.iter_mut().zip(&t.2) {
                s.at_ms = Some(*ns as f64 / 1e6);
            }
            (t, path.len())
        }
        Err(why) => {
            // Another order to a violation of the same property, one the simulator can take.
            let alt = timing::shortest_realizable(x, broken.property, state, path.len());
            let alt = match alt {
                Some(alt) => alt,
                None => {
                    cx.replay_note = Some(format!(
                        "{why}; and no order of at most {} actions that a replay can time reaches a {} violation",
                        path.len() + timing::SEARCH_EXTRA,
                        broken.property
                    ));
                    cx.trace = trace;
                    return Ok(cx);
                }
            };
            let (mut alt_trace, alt_started) = reexecute(x, &alt);
            let t = match time_path(x, base, &alt, &alt_started, broken.property)? {
                Ok(t) => t,
                Err(w) => {
                    cx.replay_note = Some(format!("{why}; the alternative order found could not be timed: {w}"));
                    cx.trace = trace;
                    return Ok(cx);
                }
            };
            for (s, ns) in alt_trace.iter_mut().zip(&t.2) {
                s.at_ms = Some(*ns as f64 / 1e6);
            }
            cx.replay_note = Some(format!(
                "{why}; the replay follows instead the shortest order found that a replay can time ({} actions, in replay_trace)",
                alt.len()
            ));
            cx.replay_trace = Some(alt_trace);
            (t, alt.len())
        }
    };
    let (sc, sim, _) = timed;
    cx.replay_scenario = Some(serde_json::to_value(&sc).map_err(|e| SimError::Internal { message: e.to_string() })?);
    let followed = cx.replay_trace.as_ref().unwrap_or(&trace);
    let expected: Vec<Snapshot> = followed.iter().map(|s| s.state.clone()).collect();
    let outcome = replay(sim, k, &expected)?;
    // A state that cannot finish shows in a simulation as a stall or a run that never ends.
    let expected_property = |p: &str| p == broken.property || (broken.property == CAN_FINISH && p == NO_DEADLOCK);
    match (outcome.broken, outcome.diverged) {
        (_, Some(event)) if event <= replayed_len as u64 => {
            cx.reproduced = Some(false);
            cx.replay_message = Some(format!("the simulation left the counterexample's order at event {event}"));
        }
        (Some((b, events)), _) => {
            cx.reproduced = Some(expected_property(b.property));
            cx.replay_message = Some(format!("{}: {}", b.property, b.message));
            cx.replay_events = Some(events);
        }
        (None, _) => {
            cx.reproduced = Some(false);
            cx.replay_message = Some("the replay finished without a violation".into());
        }
    }
    cx.trace = trace;
    Ok(cx)
}
