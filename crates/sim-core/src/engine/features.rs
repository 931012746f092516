//! Attaching the optional per-run features that live beside the engine's state and reading
//! their counters: speculative decoding's acceptance ([`super::speculative`]) and multi-LoRA's
//! adapter slots ([`super::lora`]). (Their types live in their own files, which import
//! nothing of the engine: `mod.rs` holds them without a circle.)

use super::lora::{LoraRun, LoraStats};
use super::speculative::{SpecRun, SpecStats};
use super::Engine;
use crate::config::SpecPlan;

impl Engine {
    /// Speculate with `plan` (from [`crate::api::build`]). Steady decode runs assume one token
    /// per decode step, so they are off.
    pub(crate) fn attach_spec(&mut self, plan: &SpecPlan, seed: u64) {
        self.spec = Some(Box::new(SpecRun::new(plan, seed)));
        self.steady_ok = false;
    }

    /// The run's speculation counters, if it speculates.
    pub fn spec_stats(&self) -> Option<&SpecStats> {
        self.spec.as_deref().map(|s| &s.stats)
    }
}

impl Engine {
    /// Serve adapters with `run` (from [`crate::api::build`]). Steady decode runs are off: the
    /// scheduler re-plans every step (a passed-over request may join when a slot frees).
    pub(crate) fn attach_lora(&mut self, run: LoraRun) {
        self.lora = Some(Box::new(run));
        self.steady_ok = false;
    }

    /// The run's LoRA counters, and the scheduler's slot waits over every replica.
    pub fn lora_stats(&self) -> Option<(&LoraStats, u64)> {
        let waits = self.replicas.iter().map(|r| r.sched.lora_waits).sum();
        self.lora.as_deref().map(|l| (&l.stats, waits))
    }
}
