//! Speculative decoding at a step's completion: how many of a request's drafts the target
//! accepts ([`crate::config::Speculative`] for the setting, [`crate::sched`] for the `1 + k`
//! tokens scheduled, [`crate::perf::draft`] for the drafter's price).
//!
//! Draft `i` of a verify is accepted, given drafts `0..i` were, with the plan's conditional
//! probability; the first rejection ends the accepted prefix, and the target's own token
//! (the correction, or the bonus token after a full accept) is kept too — vLLM's rejection
//! sampler. The draw for request `r`'s draft at output position `g + i` is
//! [`crate::rng::unit_hash`] of `(seed, r, g + i)`: a request accepts the same tokens in any
//! batch, on any replica, in every front end.

use crate::config::SpecPlan;
use crate::rng::unit_hash;

/// Run-wide counters (the summary's `speculative`).
#[derive(Debug, Clone, Default)]
pub struct SpecStats {
    /// Decode entries that verified at least one draft.
    pub verifies: u64,
    /// Drafts verified.
    pub drafts: u64,
    /// Drafts accepted.
    pub accepted: u64,
    /// Per draft position: verifies that reached it, and accepted it.
    pub drafted_at: Vec<u64>,
    pub accepted_at: Vec<u64>,
}

/// The speculation of a run.
#[derive(Debug, Clone)]
pub struct SpecRun {
    /// P(draft i accepted | drafts before it accepted).
    conditional: Vec<f64>,
    seed: u64,
    pub stats: SpecStats,
}

impl SpecRun {
    pub fn new(plan: &SpecPlan, seed: u64) -> SpecRun {
        let k = plan.k as usize;
        SpecRun {
            conditional: plan.conditional(),
            seed,
            stats: SpecStats { drafted_at: vec![0; k], accepted_at: vec![0; k], ..SpecStats::default() },
        }
    }

    /// Drafts request `id` keeps of the `drafts` it verified after producing `generated`
    /// output tokens (its accepted prefix), counted in the stats.
    pub fn accept(&mut self, id: u32, generated: u32, drafts: u32) -> u32 {
        let st = &mut self.stats;
        st.verifies += 1;
        st.drafts += u64::from(drafts);
        let drafts = drafts.min(self.conditional.len() as u32);
        for d in &mut st.drafted_at[..drafts as usize] {
            *d += 1;
        }
        let mut kept = 0;
        for i in 0..drafts {
            let u = unit_hash(self.seed, u64::from(id), u64::from(generated + i));
            if u >= self.conditional[i as usize] {
                break;
            }
            st.accepted_at[i as usize] += 1;
            kept += 1;
        }
        st.accepted += u64::from(kept);
        kept
    }
}
