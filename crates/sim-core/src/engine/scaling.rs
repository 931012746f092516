//! The engine's side of autoscaling: timers in the event loop, routing only to ready
//! replicas, draining, and what the result reports.

use super::Engine;
use crate::scaling::{Autoscaler, Load, Slot};

impl Engine {
    /// Put the run under an autoscaler (the engine was built with its slots).
    pub(crate) fn attach_scaler(&mut self, scaler: Autoscaler) {
        self.scaler = Some(Box::new(scaler));
    }

    /// The autoscaler's work at this instant (after step completions, before arrivals):
    /// started replicas that are now ready, a load sample, a decision. Replicas told to
    /// leave stop taking requests and drain; an empty one stops at once.
    pub(crate) fn scaling_instant(&mut self) {
        let Some(mut sc) = self.scaler.take() else { return };
        let now = self.now_ns;
        for rep in sc.ready_now(now) {
            self.mark(rep); // offered work as soon as the router sends it some
        }
        if sc.sample_due(now) {
            let mut load = Load { waiting: self.dispatch.len() as u64, kv_sum: 0.0 };
            for (i, r) in self.replicas.iter().enumerate() {
                match sc.slots[i] {
                    Slot::Active => {
                        load.waiting += r.sched.waiting.len() as u64;
                        load.kv_sum += r.sched.kv.used_units() as f64 / r.sched.kv.total().max(1) as f64;
                    }
                    Slot::Draining => load.waiting += r.sched.waiting.len() as u64,
                    _ => {}
                }
            }
            sc.sample(now, load);
        }
        if sc.decision_due(now) {
            let replicas = &self.replicas;
            for rep in sc.decide(now, |i| replicas[i].outstanding_tokens) {
                let r = &self.replicas[rep];
                if !r.busy && r.sched.waiting.is_empty() && r.sched.running.is_empty() {
                    sc.drained(rep, now);
                }
            }
        }
        self.scaler = Some(sc);
    }

    /// After a step of `rep` completed: a draining replica left with nothing stops.
    pub(crate) fn check_drained(&mut self, rep: usize) {
        let r = &self.replicas[rep];
        if let Some(sc) = self.scaler.as_mut() {
            if sc.slots[rep] == Slot::Draining && r.sched.waiting.is_empty() && r.sched.running.is_empty() {
                sc.drained(rep, self.now_ns);
            }
        }
    }
}
