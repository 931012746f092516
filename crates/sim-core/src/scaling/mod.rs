//! Autoscaling what-ifs (seed §5): a controller in the style of Kubernetes' Horizontal Pod
//! Autoscaler adds and removes replicas while the run goes on.
//!
//! Every `interval_s` (HPA's sync period, default 15 s) the controller reads its metric over
//! the last `window_s`, and, unless `metric / target` is within `tolerance` of 1, asks for
//! `ceil(ready × metric / target)` replicas (HPA's formula), clamped to
//! `min_replicas..=max_replicas`. The ratio applies to the *ready* replicas: replicas still
//! starting are not counted twice while the metric lags their start (HPA likewise leaves
//! pods that are not ready out of its averages).
//!
//! * Scaling up starts replicas that become ready `scale_up_delay_s` later (cold start:
//!   default, the weights one GPU holds read at `weight_load_gbps`, 2 GB/s — a local NVMe or
//!   network volume streaming safetensors; this is the stated assumption). A replica being
//!   drained is taken back first, at once (it is still warm).
//! * Scaling down uses the highest request of the last `stabilization_window_s` (HPA's
//!   scale-down stabilization, default 300 s), waits `scale_down_cooldown_s` after the last
//!   scaling action, and never happens while a replica is starting. A leaving replica takes no
//!   new requests and *drains*: it serves what it holds until empty, then stops. No request
//!   is lost or moved.
//!
//! Metrics: `e2e_p90_ms` (P90 of the end-to-end latency of the requests that finished in the
//! window), `ttft_p90_ms` (P90 TTFT of the requests whose first token came in the window),
//! `queue_length` (requests waiting — in replica queues and the router's — per ready
//! replica, averaged over samples every second) and `kv_usage` (the ready replicas' mean KV
//! use, 0–1, averaged likewise). A window without data (no request finished) makes no
//! decision.
//!
//! The controller is pure bookkeeping over integer nanoseconds; its timers are events of the
//! engine's loop (after step completions, before arrivals at the same instant), so runs stay
//! deterministic and byte-identical across front ends.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::error::{check, Result, SimError};
use crate::metrics::percentile;

/// The metrics the controller can follow.
pub const METRICS: &[&str] = &["e2e_p90_ms", "ttft_p90_ms", "queue_length", "kv_usage"];

/// The scenario's `scaling` section.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ScalingConfig {
    /// Fewest replicas (≥ 1).
    pub min_replicas: u32,
    /// Most replicas (≥ `min_replicas`).
    pub max_replicas: u32,
    /// One of [`METRICS`].
    pub metric: String,
    /// The metric's target value (ms for latencies, requests per replica for
    /// `queue_length`, a fraction for `kv_usage`).
    pub target: f64,
    /// Sliding window the metric is read over, s.
    #[serde(default = "d_window")]
    pub window_s: f64,
    /// How often the controller decides, s (HPA: 15).
    #[serde(default = "d_interval")]
    pub interval_s: f64,
    /// No change while `|metric / target − 1| ≤ tolerance` (HPA: 0.1).
    #[serde(default = "d_tolerance")]
    pub tolerance: f64,
    /// Cold start of a new replica, s (default: weights per GPU / `weight_load_gbps`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_up_delay_s: Option<f64>,
    /// Load bandwidth of one GPU's weights for the default cold start, GB/s.
    #[serde(default = "d_load")]
    pub weight_load_gbps: f64,
    /// No scale-down until this long after the last scaling action, s.
    #[serde(default = "d_cooldown")]
    pub scale_down_cooldown_s: f64,
    /// Scale down to the highest recommendation over this window, s (HPA: 300).
    #[serde(default = "d_stabilization")]
    pub stabilization_window_s: f64,
}

fn d_window() -> f64 {
    60.0
}
fn d_interval() -> f64 {
    15.0
}
fn d_tolerance() -> f64 {
    0.1
}
fn d_load() -> f64 {
    2.0
}
fn d_cooldown() -> f64 {
    60.0
}
fn d_stabilization() -> f64 {
    300.0
}

/// Shortest decision interval and metric window, s: the controller acts on a time grid, and a
/// finer one would only multiply events.
pub const MIN_PERIOD_S: f64 = 0.01;

/// The most replicas an autoscaled deployment may reach (each holds a KV pool).
pub const MAX_SCALED_REPLICAS: u32 = 4096;

impl ScalingConfig {
    /// Check the section against the deployment's starting `replicas`; paths are
    /// `scaling.<field>`.
    pub fn validate(&self, replicas: u32) -> Result<()> {
        check::in_range("scaling.min_replicas", self.min_replicas, 1, MAX_SCALED_REPLICAS)?;
        check::in_range("scaling.max_replicas", self.max_replicas, self.min_replicas, MAX_SCALED_REPLICAS)?;
        if !(self.min_replicas..=self.max_replicas).contains(&replicas) {
            return Err(SimError::config(
                "deployment.replicas",
                format!(
                    "is the starting count under scaling: must be in min_replicas..=max_replicas ({}..={}) (got {replicas})",
                    self.min_replicas, self.max_replicas
                ),
            ));
        }
        if !METRICS.contains(&self.metric.as_str()) {
            return Err(check::unknown_name("scaling.metric", "metric", &self.metric, METRICS));
        }
        check::positive("scaling.target", self.target)?;
        if self.metric == "kv_usage" && self.target > 1.0 {
            return Err(SimError::config("scaling.target", format!("kv_usage is a fraction: must be in (0, 1] (got {})", self.target)));
        }
        let secs = |path: &str, v: f64| -> Result<()> {
            check::finite(path, v)?;
            if !(MIN_PERIOD_S..=1e9).contains(&v) {
                return Err(SimError::config(path, format!("must be in {MIN_PERIOD_S}..=1e9 s (got {v})")));
            }
            Ok(())
        };
        secs("scaling.window_s", self.window_s)?;
        secs("scaling.interval_s", self.interval_s)?;
        check::finite("scaling.tolerance", self.tolerance)?;
        if !(0.0..1.0).contains(&self.tolerance) {
            return Err(SimError::config("scaling.tolerance", format!("must be in [0, 1) (got {})", self.tolerance)));
        }
        if let Some(d) = self.scale_up_delay_s {
            check::non_negative("scaling.scale_up_delay_s", d)?;
            if d > 1e9 {
                return Err(SimError::config("scaling.scale_up_delay_s", format!("must be at most 1e9 s (got {d})")));
            }
        }
        check::positive("scaling.weight_load_gbps", self.weight_load_gbps)?;
        check::non_negative("scaling.scale_down_cooldown_s", self.scale_down_cooldown_s)?;
        check::non_negative("scaling.stabilization_window_s", self.stabilization_window_s)?;
        for (path, v) in [
            ("scaling.scale_down_cooldown_s", self.scale_down_cooldown_s),
            ("scaling.stabilization_window_s", self.stabilization_window_s),
        ] {
            if v > 1e9 {
                return Err(SimError::config(path, format!("must be at most 1e9 s (got {v})")));
            }
        }
        Ok(())
    }
}

/// The followed metric, parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Metric {
    E2eP90,
    TtftP90,
    QueueLength,
    KvUsage,
}

impl Metric {
    fn parse(name: &str) -> Metric {
        match name {
            "ttft_p90_ms" => Metric::TtftP90,
            "queue_length" => Metric::QueueLength,
            "kv_usage" => Metric::KvUsage,
            _ => Metric::E2eP90,
        }
    }
}

/// The first multiple of `period` after `now` (timers stay on their grid after an idle gap).
fn grid_after(now: u64, period: u64) -> u64 {
    (now / period).saturating_add(1).saturating_mul(period)
}

/// Where a replica slot is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    /// Holds no GPUs.
    Off,
    /// Cold-starting (GPUs held), ready at this time.
    Starting(u64),
    /// Serving: the router sends it requests.
    Active,
    /// Leaving: serves what it holds, takes nothing new, stops when empty.
    Draining,
}

/// One scaling action.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScaleEvent {
    /// When the controller decided, s.
    pub time_s: f64,
    /// Replicas provisioned (ready + starting) before, and after.
    pub from: u32,
    pub to: u32,
    /// The metric's value that decided it (its windowed reading).
    pub metric: f64,
    /// When the last replica it started becomes ready, s (scale-ups with a cold start).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready_s: Option<f64>,
    /// The replicas started or taken back (up), or told to drain (down).
    pub replicas: Vec<u32>,
}

/// What the controller needs of the engine at a decision or a sample.
#[derive(Debug, Clone, Copy)]
pub struct Load {
    /// Requests waiting in replica queues (ready and draining) and the router's queue.
    pub waiting: u64,
    /// Σ KV use (0–1) over the ready replicas.
    pub kv_sum: f64,
}

/// The controller's state during a run.
#[derive(Debug, Clone)]
pub struct Autoscaler {
    cfg: ScalingConfig,
    metric: Metric,
    /// The earliest time a starting replica becomes ready (`u64::MAX`: none starts).
    next_ready_ns: u64,
    interval_ns: u64,
    window_ns: u64,
    sample_ns: u64,
    delay_ns: u64,
    cooldown_ns: u64,
    stabilization_ns: u64,
    /// GPUs one replica holds (tp · pp).
    gpus_per_replica: u32,
    pub slots: Vec<Slot>,
    /// When each provisioned slot started holding GPUs.
    held_since: Vec<u64>,
    /// Σ slot-time holding GPUs of slots that stopped (ns).
    held_ns_done: u128,
    next_decision_ns: u64,
    next_sample_ns: u64,
    /// (time, latency ms) of the followed requests, oldest first.
    latencies: VecDeque<(u64, f64)>,
    /// (time, value) of queue/KV samples, oldest first.
    samples: VecDeque<(u64, f64)>,
    /// (time, recommendation) for the scale-down stabilization.
    recommendations: VecDeque<(u64, u32)>,
    last_action_ns: Option<u64>,
    /// The last instant something happened in the engine (an arrival, a step completed).
    last_activity_ns: u64,
    /// How long after the last activity the controller's timers keep running: long enough to
    /// scale down to `min_replicas` (window + cool-down + stabilization + two intervals).
    idle_span_ns: u64,
    pub events: Vec<ScaleEvent>,
    /// (time, ready replicas) at every change, for the time series.
    pub ready_steps: Vec<(u64, u32)>,
    peak_provisioned: u32,
}

impl Autoscaler {
    /// A controller for `slots` replica slots of which the first `start` are ready.
    /// `weights_bytes_per_gpu` sets the default cold start.
    pub fn new(cfg: &ScalingConfig, start: u32, gpus_per_replica: u32, weights_bytes_per_gpu: f64) -> Autoscaler {
        let ns = |s: f64| (s * 1e9).round() as u64;
        let delay_s = cfg.scale_up_delay_s.unwrap_or(weights_bytes_per_gpu / (cfg.weight_load_gbps * 1e9));
        let slots = (0..cfg.max_replicas).map(|i| if i < start { Slot::Active } else { Slot::Off }).collect();
        let interval_ns = ns(cfg.interval_s).max(1);
        Autoscaler {
            interval_ns,
            window_ns: ns(cfg.window_s).max(1),
            sample_ns: interval_ns.min(1_000_000_000),
            delay_ns: ns(delay_s),
            cooldown_ns: ns(cfg.scale_down_cooldown_s),
            stabilization_ns: ns(cfg.stabilization_window_s),
            gpus_per_replica,
            slots,
            held_since: vec![0; cfg.max_replicas as usize],
            held_ns_done: 0,
            next_decision_ns: interval_ns,
            next_sample_ns: 0,
            latencies: VecDeque::new(),
            samples: VecDeque::new(),
            recommendations: VecDeque::new(),
            last_action_ns: None,
            last_activity_ns: 0,
            idle_span_ns: ns(cfg.window_s + cfg.scale_down_cooldown_s + cfg.stabilization_window_s + 2.0 * cfg.interval_s),
            events: Vec::new(),
            ready_steps: vec![(0, start)],
            peak_provisioned: start,
            metric: Metric::parse(&cfg.metric),
            next_ready_ns: u64::MAX,
            cfg: cfg.clone(),
        }
    }

    /// The cold start of a new replica, s.
    pub fn delay_s(&self) -> f64 {
        self.delay_ns as f64 / 1e9
    }

    /// Is `rep` ready to take new requests?
    #[inline]
    pub fn routable(&self, rep: usize) -> bool {
        self.slots[rep] == Slot::Active
    }

    fn count(&self, f: impl Fn(&Slot) -> bool) -> u32 {
        self.slots.iter().filter(|s| f(s)).count() as u32
    }

    fn ready(&self) -> u32 {
        self.count(|s| *s == Slot::Active)
    }

    fn provisioned(&self) -> u32 {
        self.count(|s| matches!(s, Slot::Active | Slot::Starting(_)))
    }

    /// The next instant the controller acts: a decision, a sample, a replica becoming ready.
    /// Something happened in the engine at `now` (an arrival, a step completed).
    #[inline]
    pub fn note_activity(&mut self, now: u64) {
        self.last_activity_ns = now;
    }

    /// The next instant the controller acts, if any: a replica becoming ready, and a decision
    /// or a sample unless nothing has happened in the engine for longer than the idle span
    /// (enough to scale down after the traffic stopped). An idle engine's clock may then jump
    /// to the next event, a step that lasts for ages makes no timer fire each interval, and
    /// the decision grid resumes at the next activity.
    #[inline]
    pub fn next_time(&self) -> Option<u64> {
        let ready = (self.next_ready_ns != u64::MAX).then_some(self.next_ready_ns);
        if self.next_decision_ns.min(self.next_sample_ns).saturating_sub(self.last_activity_ns) > self.idle_span_ns {
            return ready;
        }
        let t = self.next_decision_ns.min(self.next_ready_ns);
        Some(if self.follows_load() { t.min(self.next_sample_ns) } else { t })
    }

    #[inline]
    fn follows_load(&self) -> bool {
        matches!(self.metric, Metric::QueueLength | Metric::KvUsage)
    }

    fn update_next_ready(&mut self) {
        self.next_ready_ns = self
            .slots
            .iter()
            .filter_map(|s| if let Slot::Starting(at) = s { Some(*at) } else { None })
            .min()
            .unwrap_or(u64::MAX);
    }

    /// Note a request that finished (`e2e_ms`) or produced its first token (`ttft_ms`).
    #[inline]
    pub fn on_finish(&mut self, now: u64, e2e_ms: f64) {
        if self.metric == Metric::E2eP90 {
            self.latencies.push_back((now, e2e_ms));
        }
    }

    #[inline]
    pub fn on_first_token(&mut self, now: u64, ttft_ms: f64) {
        if self.metric == Metric::TtftP90 {
            self.latencies.push_back((now, ttft_ms));
        }
    }

    /// Replicas that become ready at `now` (to be offered work by the engine).
    pub fn ready_now(&mut self, now: u64) -> Vec<usize> {
        let mut out = Vec::new();
        for (i, s) in self.slots.iter_mut().enumerate() {
            if matches!(*s, Slot::Starting(at) if at <= now) {
                *s = Slot::Active;
                out.push(i);
            }
        }
        if !out.is_empty() {
            self.note_ready(now);
        }
        self.update_next_ready();
        out
    }

    fn note_ready(&mut self, now: u64) {
        let ready = self.ready();
        match self.ready_steps.last_mut() {
            Some((t, r)) if *t == now => *r = ready,
            _ => self.ready_steps.push((now, ready)),
        }
    }

    /// A sample of the load, when one is due at `now`.
    pub fn sample_due(&self, now: u64) -> bool {
        self.follows_load() && now >= self.next_sample_ns
    }

    pub fn sample(&mut self, now: u64, load: Load) {
        let ready = self.ready().max(1) as f64;
        let v = if self.metric == Metric::QueueLength { load.waiting as f64 / ready } else { load.kv_sum / ready };
        self.samples.push_back((now, v));
        self.next_sample_ns = grid_after(now, self.sample_ns);
    }

    pub fn decision_due(&self, now: u64) -> bool {
        now >= self.next_decision_ns
    }

    /// The metric over the window ending at `now`, if the window has data.
    fn reading(&mut self, now: u64) -> Option<f64> {
        let since = now.saturating_sub(self.window_ns);
        if self.follows_load() {
            while self.samples.front().is_some_and(|(t, _)| *t < since) {
                self.samples.pop_front();
            }
            let n = self.samples.len();
            (n > 0).then(|| self.samples.iter().map(|(_, v)| v).sum::<f64>() / n as f64)
        } else {
            while self.latencies.front().is_some_and(|(t, _)| *t < since) {
                self.latencies.pop_front();
            }
            if self.latencies.is_empty() {
                return None;
            }
            let mut v: Vec<f64> = self.latencies.iter().map(|(_, x)| *x).collect();
            v.sort_by(f64::total_cmp);
            Some(percentile(&v, 90.0))
        }
    }

    /// Decide at `now`. Returns the replicas to drain (the engine stops routing to them; it
    /// calls [`Autoscaler::drained`] when each is empty); starts and un-drains are applied
    /// here. `outstanding(i)` is replica i's outstanding tokens (the least loaded drains).
    pub fn decide(&mut self, now: u64, outstanding: impl Fn(usize) -> u64) -> Vec<usize> {
        self.next_decision_ns = grid_after(now, self.interval_ns);
        let Some(value) = self.reading(now) else { return Vec::new() };
        let ready = self.ready();
        let provisioned = self.provisioned();
        let ratio = value / self.cfg.target;
        let (lo, hi) = (self.cfg.min_replicas, self.cfg.max_replicas);
        let raw = if (ratio - 1.0).abs() <= self.cfg.tolerance {
            None
        } else {
            let want = (f64::from(ready) * ratio).ceil();
            Some(if want.is_finite() { (want.max(0.0).min(f64::from(hi))) as u32 } else { hi }.clamp(lo, hi))
        };
        // Scale-down stabilization: the highest recommendation in the window (a no-change
        // reading recommends what is provisioned).
        let rec = raw.unwrap_or(provisioned);
        self.recommendations.push_back((now, rec));
        let since = now.saturating_sub(self.stabilization_ns);
        while self.recommendations.front().is_some_and(|(t, _)| *t < since) {
            self.recommendations.pop_front();
        }
        let Some(desired) = raw else { return Vec::new() };
        let mut drain = Vec::new();
        if desired > provisioned {
            let mut add = desired - provisioned;
            let mut ready_at = None;
            let mut changed = Vec::new();
            for i in 0..self.slots.len() {
                if add == 0 {
                    break;
                }
                if self.slots[i] == Slot::Draining {
                    self.slots[i] = Slot::Active; // still warm: back at once
                    changed.push(i as u32);
                    add -= 1;
                }
            }
            for i in 0..self.slots.len() {
                if add == 0 {
                    break;
                }
                if self.slots[i] == Slot::Off {
                    let at = now.saturating_add(self.delay_ns);
                    self.slots[i] = if self.delay_ns == 0 { Slot::Active } else { Slot::Starting(at) };
                    self.held_since[i] = now;
                    ready_at = Some(at);
                    changed.push(i as u32);
                    add -= 1;
                }
            }
            self.note_ready(now);
            self.update_next_ready();
            self.last_action_ns = Some(now);
            let to = self.provisioned();
            self.peak_provisioned = self.peak_provisioned.max(to);
            let ready_s = ready_at.filter(|_| self.delay_ns > 0).map(|t| t as f64 / 1e9);
            changed.sort_unstable();
            self.events.push(ScaleEvent { time_s: now as f64 / 1e9, from: provisioned, to, metric: value, ready_s, replicas: changed });
        } else {
            let stabilized = self.recommendations.iter().map(|(_, r)| *r).max().unwrap_or(desired).max(lo);
            let cooled = self.last_action_ns.is_none_or(|t| now.saturating_sub(t) >= self.cooldown_ns);
            let starting = self.slots.iter().any(|s| matches!(s, Slot::Starting(_)));
            if stabilized < provisioned && cooled && !starting {
                let n = (provisioned - stabilized) as usize;
                let mut actives: Vec<usize> = (0..self.slots.len()).filter(|&i| self.slots[i] == Slot::Active).collect();
                // The least loaded leaves first (it drains soonest); ties: the highest index.
                actives.sort_by_key(|&i| (outstanding(i), std::cmp::Reverse(i)));
                for &i in actives.iter().take(n) {
                    self.slots[i] = Slot::Draining;
                    drain.push(i);
                }
                drain.sort_unstable();
                self.note_ready(now);
                self.last_action_ns = Some(now);
                let to = self.provisioned();
                let replicas = drain.iter().map(|&i| i as u32).collect();
                self.events.push(ScaleEvent { time_s: now as f64 / 1e9, from: provisioned, to, metric: value, ready_s: None, replicas });
            }
        }
        drain
    }

    /// A draining replica served its last request at `now`: it stops holding GPUs.
    pub fn drained(&mut self, rep: usize, now: u64) {
        if self.slots[rep] == Slot::Draining {
            self.slots[rep] = Slot::Off;
            self.held_ns_done += u128::from(now.saturating_sub(self.held_since[rep]));
        }
    }

    /// Σ replica-time holding GPUs up to `end` (ns).
    pub fn replica_ns(&self, end: u64) -> f64 {
        let open: u128 = self
            .slots
            .iter()
            .enumerate()
            .filter(|(_, s)| **s != Slot::Off)
            .map(|(i, _)| u128::from(end.saturating_sub(self.held_since[i])))
            .sum();
        (self.held_ns_done + open) as f64
    }

    /// The summary's `scaling` table and `gpu_hours` up to `end_ns`.
    pub fn summary(&self, end_ns: u64) -> (f64, Value) {
        let gpu_hours = self.replica_ns(end_ns) * f64::from(self.gpus_per_replica) / 3.6e12;
        let ready: Vec<u32> = self.ready_steps.iter().map(|(_, r)| *r).collect();
        let v = json!({
            "metric": self.cfg.metric,
            "target": self.cfg.target,
            "scale_up_delay_s": self.delay_s(),
            "num_events": self.events.len(),
            "peak_replicas": self.peak_provisioned,
            "min_ready_replicas": ready.iter().copied().min().unwrap_or(0),
            "final_replicas": self.provisioned() + self.count(|s| *s == Slot::Draining),
            "replica_hours": self.replica_ns(end_ns) / 3.6e12,
            "events": self.events,
        });
        (gpu_hours, v)
    }

    /// Time-weighted mean of ready replicas over `[lo, hi)` ns.
    pub fn mean_ready(&self, lo: u64, hi: u64) -> f64 {
        if hi <= lo {
            return f64::from(self.ready_steps.last().map_or(0, |s| s.1));
        }
        let mut acc = 0.0;
        for (k, &(t, r)) in self.ready_steps.iter().enumerate() {
            let next = self.ready_steps.get(k + 1).map_or(u64::MAX, |s| s.0);
            let (a, b) = (t.max(lo), next.min(hi));
            if b > a {
                acc += f64::from(r) * (b - a) as f64;
            }
        }
        acc / (hi - lo) as f64
    }
}

#[cfg(test)]
mod tests;
