//! Timing a counterexample for its replay. The explorer's orders cover every timing; a
//! replay has one cost model shared by every replica and explicit arrival times, so an
//! order is replayable only if some such timing makes the simulator take its events one
//! at a time, in that order. [`equal_steps`] tries 1 ms steps (always enough on one
//! replica); [`solved`] searches a linear cost model and arrival times with a linear
//! program ([`super::lp`]); [`event_times`] checks a plan on the simulator's own integer
//! nanoseconds. When the shortest counterexample has no such timing (a replica's short
//! step would have to outlast another replica's longer ones), [`shortest_realizable`]
//! looks, best first, for a short order the simulator can take to a violation of the same
//! property.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::engine::Engine;
use crate::request::MAX_TIME_NS;
use crate::perf::{BatchShape, CostModelSpec, StepCostModel};
use crate::{Result, SimError};

use super::explore::{Action, Explorer};
use super::lp;
use super::props::CAN_FINISH;

/// Step duration of the simplest replay's cost model: every step takes exactly 1 ms.
const STEP_NS: u64 = 1_000_000;
/// Gap between consecutive arrivals inside one step of the simplest replay.
const ARRIVAL_GAP_NS: u64 = 1_000;
/// Least gap between consecutive events of a replay timed by a solved cost model (ms).
const LP_GAP_MS: f64 = 1.0;

/// A step started during a counterexample: where and when, what the linear cost model
/// prices it by, and the event that completes it.
#[derive(Debug, Clone, Copy)]
pub(super) struct StepRec {
    pub replica: u32,
    /// The event (0-based) at which it starts, and the one that completes it (if any).
    pub start: usize,
    pub end: Option<usize>,
    /// Its plan's aggregates: prefill tokens, decode sequences, Σ decode context after the
    /// step, Σ context after the step, sampled rows.
    pub shape: [u64; 5],
}

impl StepRec {
    /// The terms the linear cost model multiplies by `[base, prefill, decode, context]`.
    fn terms(&self) -> [f64; 4] {
        [1.0, self.shape[0] as f64, self.shape[1] as f64, self.shape[3] as f64]
    }

    /// The step's duration in the simulator priced by `perf` (its own arithmetic).
    fn duration_ns(&self, perf: &StepCostModel) -> u64 {
        let [prefill_tokens, decode_seqs, decode_context_sum, context_sum_after, sampled] = self.shape;
        // Replays are priced with one block size: per-request blocks (o1pro) see no remap here,
        // which only long contexts (far beyond a checked configuration) would have.
        let shape = BatchShape { prefill: &[], prefill_tokens, decode_seqs, decode_context_sum, context_sum_after, sampled, decode_blocks_1024: 0, spec_tokens: 0, lora_adapters: 0 };
        perf.step_ns(&shape).clamp(1, MAX_TIME_NS)
    }
}

/// Coefficients of the replay's linear cost model (milliseconds).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Linear {
    base_ms: f64,
    per_prefill_token_ms: f64,
    per_decode_seq_ms: f64,
    per_context_token_ms: f64,
}

impl Linear {
    pub fn spec(&self) -> Result<CostModelSpec> {
        let v = serde_json::json!({"kind": "linear", "base_ms": self.base_ms,
            "per_prefill_token_ms": self.per_prefill_token_ms, "per_decode_seq_ms": self.per_decode_seq_ms,
            "per_context_token_ms": self.per_context_token_ms});
        serde_json::from_value(v).map_err(|e| SimError::Internal { message: format!("linear cost model: {e}") })
    }
}

/// How a replay is timed: its cost model and when each arrival event happens (ns, by
/// event; completions are timed by the cost model).
#[derive(Debug, Clone)]
pub(super) struct Plan {
    pub cost: Linear,
    pub arrive_ns: Vec<u64>,
    /// When the requests that never arrive in the trace arrive: after its last event.
    pub later_ns: u64,
}

/// Equal 1 ms steps, each arrival 1 µs after the event before it. Enough on one replica;
/// on several, an order may need unequal steps.
pub(super) fn equal_steps(path: &[Action], started: &[StepRec]) -> Plan {
    let mut times = vec![0u64; path.len()];
    let mut now = 0u64;
    for (k, &act) in path.iter().enumerate() {
        let t = match act {
            Action::Arrive(_) => now + ARRIVAL_GAP_NS,
            Action::Complete(_) => match started.iter().find(|s| s.end == Some(k)) {
                Some(s) => times[s.start] + STEP_NS,
                None => now,
            },
            // Not timed (see `untimed`): such orders are refused before they get here.
            _ => now,
        };
        times[k] = t;
        now = t;
    }
    let cost = Linear { base_ms: STEP_NS as f64 / 1e6, per_prefill_token_ms: 0.0, per_decode_seq_ms: 0.0, per_context_token_ms: 0.0 };
    Plan { cost, arrive_ns: times, later_ns: now + 1_000 * STEP_NS }
}

/// The linear program of timing an order: variables the four cost coefficients and the
/// arrival times (ms, in order), every event at least `LP_GAP_MS` after the one before it,
/// every step still running at the end finishing after the last event.
struct Program {
    /// Each event's time as a linear form over the variables.
    time: Vec<Vec<f64>>,
    /// Constraints `row · x ≥ LP_GAP_MS`.
    rows: Vec<Vec<f64>>,
    /// The end of each step still running at the end, as a linear form.
    running_ends: Vec<Vec<f64>>,
}

impl Program {
    fn new(path: &[Action], started: &[StepRec]) -> std::result::Result<Program, String> {
        let arrivals = path.iter().filter(|a| matches!(a, Action::Arrive(_))).count();
        let vars = 4 + arrivals;
        let mut time: Vec<Vec<f64>> = Vec::with_capacity(path.len());
        let mut next_arrival = 4;
        let end_of = |time: &[Vec<f64>], s: &StepRec| {
            let mut f = time[s.start].clone();
            for (f, t) in f.iter_mut().zip(s.terms()) {
                *f += t;
            }
            f
        };
        for (k, &act) in path.iter().enumerate() {
            let form = match act {
                Action::Arrive(_) => {
                    let mut form = vec![0.0; vars];
                    form[next_arrival] = 1.0;
                    next_arrival += 1;
                    form
                }
                Action::Complete(r) => {
                    let s = started
                        .iter()
                        .find(|s| s.end == Some(k))
                        .ok_or_else(|| format!("step {}: replica {r} completes a step that never started", k + 1))?;
                    end_of(&time, s)
                }
                _ => return Err(UNTIMED.to_string()),
            };
            time.push(form);
        }
        let diff = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x - y).collect::<Vec<f64>>();
        let zero = vec![0.0; vars];
        let mut rows = Vec::with_capacity(path.len() + 2);
        for k in 0..path.len() {
            rows.push(diff(&time[k], if k == 0 { &zero } else { &time[k - 1] }));
        }
        let last = time.last().unwrap_or(&zero);
        let running_ends: Vec<Vec<f64>> = started.iter().filter(|s| s.end.is_none()).map(|s| end_of(&time, s)).collect();
        for end in &running_ends {
            rows.push(diff(end, last));
        }
        Ok(Program { time, rows, running_ends })
    }

    fn vars(&self) -> usize {
        self.rows.first().map_or(4, |r| r.len())
    }

    /// The smallest `row · x` (how much slack the tightest constraint leaves).
    fn least(&self, x: &[f64]) -> f64 {
        self.rows.iter().map(|r| dot(r, x)).fold(f64::INFINITY, f64::min)
    }

    /// A solution that makes the last event as early as possible; `None` if none.
    fn solve(&self) -> Option<Vec<f64>> {
        let vars = self.vars();
        let zero = vec![0.0; vars];
        let last = self.time.last().unwrap_or(&zero);
        lp::minimise(last, &self.rows, &vec![LP_GAP_MS; self.rows.len()])
    }
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Why an order through link events, KV arrivals or completions of dropped steps has no
/// replay: their times in a simulation come from the fabric (transfer durations, a dropped
/// step's length), which the replay's linear cost model does not set.
pub(super) const UNTIMED: &str = "the order goes through link events, KV arrivals or completions of dropped steps, \
     whose timing a replay does not solve (the trace shows the order)";

/// Whether every action of `path` is an arrival or a completion (the events a replay times).
pub(super) fn timed_kinds(path: &[Action]) -> bool {
    path.iter().all(|a| matches!(a, Action::Arrive(_) | Action::Complete(_)))
}

/// Why [`solved`] fails.
const NO_TIMING: &str = "no linear cost model (base, per prefill token, per decode sequence, per context token) and \
     arrival times make the simulator take these events in this order: the replicas' steps would have to \
     last inconsistently";

/// Search a linear cost model and arrival times that produce the order `path`: the
/// [`Program`] solved with the last event as early as possible. `Err(why)` when no linear
/// cost model can order the events so (the program is infeasible).
pub(super) fn solved(path: &[Action], started: &[StepRec]) -> std::result::Result<Plan, String> {
    let prog = Program::new(path, started)?;
    let x = prog.solve().ok_or_else(|| NO_TIMING.to_string())?;
    // Coefficients to the nanosecond; arrival times to the nanosecond.
    let ms = |v: f64| (v * 1e6).round() / 1e6;
    let cost = Linear {
        base_ms: ms(x[0]),
        per_prefill_token_ms: ms(x[1]),
        per_decode_seq_ms: ms(x[2]),
        per_context_token_ms: ms(x[3]),
    };
    let arrive_ns = prog.time.iter().map(|f| (dot(f, &x) * 1e6).round().max(0.0) as u64).collect();
    let last_ms = prog.time.last().map_or(0.0, |f| dot(f, &x));
    let end_ms = prog.running_ends.iter().map(|f| dot(f, &x)).fold(last_ms, f64::max);
    Ok(Plan { cost, arrive_ns, later_ns: ((end_ms + 1_000.0) * 1e6).round() as u64 })
}

/// Whether `path` can be timed, given a solution `parent` of the order without its last
/// action: first by extending that solution (doubled, so that a new arrival fits half a
/// gap after the event before it), then by solving. The solution, scaled so that its
/// tightest constraint is met exactly.
fn timeable(path: &[Action], started: &[StepRec], parent: &[f64]) -> Option<Vec<f64>> {
    let prog = Program::new(path, started).ok()?;
    let mut x: Vec<f64> = parent.iter().map(|v| 2.0 * v).collect();
    if x.len() < prog.vars() {
        let before = path.len().checked_sub(2).map_or(0.0, |k| dot(&prog.time[k], &x));
        x.resize(prog.vars(), 0.0);
        *x.last_mut()? = before + LP_GAP_MS;
    }
    let least = prog.least(&x);
    let x = if x.len() == prog.vars() && least >= LP_GAP_MS { x } else { prog.solve()? };
    let least = prog.least(&x);
    Some(if least.is_finite() && least > 0.0 { x.iter().map(|v| v * LP_GAP_MS / least).collect() } else { x })
}

/// The times (ns) at which the simulator performs the trace's events under `plan`, its
/// steps priced by `perf` (the replay's own model); `Err(why)` unless they come one at a
/// time in the trace's order, every step still running finishes after the last event and
/// the requests that never arrive in the trace arrive after it.
pub(super) fn event_times(plan: &Plan, path: &[Action], started: &[StepRec], perf: &StepCostModel) -> std::result::Result<Vec<u64>, String> {
    let mut times = vec![0u64; path.len()];
    for (k, &act) in path.iter().enumerate() {
        times[k] = match act {
            Action::Arrive(_) => plan.arrive_ns[k],
            Action::Complete(_) => match started.iter().find(|s| s.end == Some(k)) {
                Some(s) => times[s.start].saturating_add(s.duration_ns(perf)),
                None => return Err(format!("step {} completes a step that never started", k + 1)),
            },
            _ => return Err(UNTIMED.to_string()),
        };
        if k > 0 && times[k] <= times[k - 1] {
            return Err(format!("step {} would not come after step {k}", k + 1));
        }
    }
    let last = times.last().copied().unwrap_or(0);
    for s in started.iter().filter(|s| s.end.is_none()) {
        if times[s.start].saturating_add(s.duration_ns(perf)) <= last {
            return Err(format!("the step replica {} starts at step {} would end within the trace", s.replica, s.start + 1));
        }
    }
    if plan.later_ns <= last {
        return Err("a request that arrives after the trace would arrive within it".into());
    }
    Ok(times)
}

/// Mark the step `act` completes and add the steps the replicas started, after action
/// number `k` (0-based) was applied to `e` (`steps_before`: each replica's step count
/// before it).
pub(super) fn record_steps(e: &Engine, steps_before: &[u64], k: usize, act: Action, started: &mut Vec<StepRec>) {
    if let Action::Complete(r) = act {
        if let Some(s) = started.iter_mut().find(|s| s.replica == r && s.end.is_none()) {
            s.end = Some(k);
        }
    }
    for (i, rep) in e.replicas.iter().enumerate() {
        if rep.stats.steps != steps_before[i] {
            let sh = rep.sched.shape;
            let shape = [sh.prefill_tokens, sh.decode_seqs, sh.decode_ctx, sh.ctx_after, sh.sampled];
            started.push(StepRec { replica: i as u32, start: k, end: None, shape });
        }
    }
}

/// How many more actions than the shortest counterexample [`shortest_realizable`] allows.
pub(super) const SEARCH_EXTRA: usize = 16;
/// Most orders [`shortest_realizable`] extends before it gives up.
const SEARCH_NODES: usize = 20_000;

/// One order of [`shortest_realizable`]'s search: the state it reaches, how (the order
/// before it and its last action), the steps it started and a timing of it.
struct Node {
    state: u32,
    parent: usize,
    act: Action,
    depth: usize,
    started: Vec<StepRec>,
    /// A solution of its [`Program`].
    x: Vec<f64>,
}

/// A short order of actions from the initial state that a replay can time (see
/// [`solved`]) and that breaks `property` (for `can_finish`: reaches `target`), at most
/// `shortest + SEARCH_EXTRA` actions long. Best first over the explored graph: orders by
/// length plus the state's distance to a violating state of that property (in the graph,
/// whatever the timing: a lower bound), longer first among equals; only orders that can
/// still be timed are extended (a prefix that cannot be timed has no timed extension).
/// Each state is entered by the first order that reaches it, so a shorter order through a
/// state entered earlier by a differently timed one can be missed: the result is the
/// shortest found, not always the shortest. `None` when nothing is found within the
/// bounds ([`SEARCH_NODES`] orders extended).
pub(super) fn shortest_realizable(x: &mut Explorer, property: &str, target: u32, shortest: usize) -> Option<Vec<Action>> {
    let targets = if property == CAN_FINISH { vec![target] } else { x.violating_states(property) };
    let dist = x.distances_to(&targets);
    let max_len = shortest + SEARCH_EXTRA;
    let start = Node { state: 0, parent: usize::MAX, act: Action::Arrive(0), depth: 0, started: Vec::new(), x: vec![0.0; 4] };
    let mut nodes = vec![start];
    let mut entered = vec![false; x.states()];
    entered[0] = true;
    // (length + distance, longer first, arrival order).
    let mut queue = BinaryHeap::from([Reverse((dist[0] as usize, usize::MAX, 0usize))]);
    let mut steps_before = Vec::new();
    let mut extended = 0;
    while let Some(Reverse((_, _, ni))) = queue.pop() {
        let (state, depth) = (nodes[ni].state, nodes[ni].depth);
        extended += 1;
        if extended > SEARCH_NODES {
            return None;
        }
        let mut prefix = Vec::with_capacity(depth + 1);
        let mut at = ni;
        while nodes[at].parent != usize::MAX {
            prefix.push(nodes[at].act);
            at = nodes[at].parent;
        }
        prefix.reverse();
        x.load(state);
        for act in x.enabled_actions() {
            x.load(state);
            steps_before.clear();
            steps_before.extend(x.engine.replicas.iter().map(|r| r.stats.steps));
            let broken = x.apply(act);
            let id = x.current_id();
            let hit = match &broken {
                _ if property == CAN_FINISH => id == Some(target),
                Some(b) => b.property == property,
                None => false,
            };
            let reaches = id.is_some_and(|id| (dist[id as usize] as usize).saturating_add(depth + 1) <= max_len);
            if !hit && (broken.is_some() || !reaches) {
                continue;
            }
            let Some(id) = id else { continue };
            if !hit && (x.is_leaf(id) || entered[id as usize]) {
                continue;
            }
            let mut started = nodes[ni].started.clone();
            record_steps(&x.engine, &steps_before, depth, act, &mut started);
            let mut path = prefix.clone();
            path.push(act);
            let Some(sol) = timeable(&path, &started, &nodes[ni].x) else { continue };
            if hit {
                return Some(path);
            }
            entered[id as usize] = true;
            let f = depth + 1 + dist[id as usize] as usize;
            nodes.push(Node { state: id, parent: ni, act, depth: depth + 1, started, x: sol });
            queue.push(Reverse((f, usize::MAX - (depth + 1), nodes.len() - 1)));
        }
    }
    None
}
