//! Warm-up: one-time host stalls of kernels compiled on their first use while serving
//! (`cost_model.warmup`).
//!
//! vLLM runs an MoE layer's experts with one Triton kernel (`fused_moe_kernel`) whose tile
//! configuration it picks per step from a tuned table keyed by token counts: the key nearest
//! to the step's token count M (ties to the smaller key). Each configuration is a separate
//! Triton compilation (its tile sizes are `constexpr`), and each step launches the kernel
//! twice with different `constexpr`s (the gate/up GEMM and the down GEMM with the routing
//! weights applied), so a configuration first met while serving stalls its step for two
//! compilations on the host. Start-up compiles only what it runs: the memory-profiling pass
//! at `max_num_batched_tokens`, every CUDA-graph capture size (`[1, 2, 4]`, multiples of 8
//! up to 256, of 16 above, up to the capture bound) and a dummy pass at
//! `min(max_num_seqs, max_num_batched_tokens)` tokens. Eager (mixed prefill) steps above the
//! capture bound meet the others: with the development runs' limits, the configurations
//! keyed 512, 1024 and 1536 (docs/fidelity.md, "Warm-up").
//!
//! The model: per replica, a bit per configuration of [`WarmupSpec::moe_config_batches`],
//! set for those start-up covered; a step that needs an unset one pays
//! [`WarmupSpec::moe_config_compile_ms`] once and sets it. O(1) per step (a binary search
//! over at most 64 keys, no allocation; nothing at all for graph-replayed steps).

use std::fmt;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};

use crate::error::{check, Result, SimError};

/// The token counts of vLLM's tuned fused-MoE tables: the batch sizes its tuning script
/// (`benchmarks/kernels/benchmark_moe.py`) sweeps, the keys of e.g.
/// `fused_moe/configs/E=8,N=7168,device_name=NVIDIA_H100_80GB_HBM3.json` (Mixtral-8x7B at TP2).
pub const VLLM_MOE_CONFIG_BATCHES: [u32; 18] =
    [1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 256, 512, 1024, 1536, 2048, 3072, 4096];

/// Host stall of a step that meets a fused-MoE configuration not compiled yet, ms: two
/// Triton compilations (the kernel's two launches), ~0.65 s each, the order of public reports
/// (about a second per Triton compilation). Fitted to the `codegen` run of Mixtral-8x7B TP2
/// only (its first load stage's p99.9 and maximum TTFT, 1,358 and 1,994 ms, over five arrival
/// seeds; `benchmarks/warmup.py`) and shown on the `general` and `roleplay` runs it did not
/// see (docs/fidelity.md, "Warm-up").
pub const DEFAULT_MOE_CONFIG_COMPILE_MS: f64 = 1300.0;

/// At most this many configuration keys (one bit each in a replica's `u64`).
pub const MAX_MOE_CONFIG_BATCHES: usize = 64;

/// `cost_model.warmup`: `true` / `false`, or a table of the constants (`enabled` defaults
/// to true there).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WarmupSpec {
    /// Model the first-use stalls (default true; only the `vllm` engine's MoE layers have any).
    pub enabled: bool,
    /// Host stall of the first step that needs a fused-MoE configuration start-up did not
    /// compile, ms.
    pub moe_config_compile_ms: f64,
    /// The tuned table's keys (token counts), strictly increasing, at most 64.
    pub moe_config_batches: Vec<u32>,
}

impl Default for WarmupSpec {
    fn default() -> Self {
        WarmupSpec {
            enabled: true,
            moe_config_compile_ms: DEFAULT_MOE_CONFIG_COMPILE_MS,
            moe_config_batches: VLLM_MOE_CONFIG_BATCHES.to_vec(),
        }
    }
}

impl WarmupSpec {
    /// Check the constants; paths are relative to `cost_model` (`warmup.moe_config_compile_ms`).
    pub fn validate(&self) -> Result<()> {
        check::non_negative("warmup.moe_config_compile_ms", self.moe_config_compile_ms)?;
        let b = &self.moe_config_batches;
        if b.is_empty() || b.len() > MAX_MOE_CONFIG_BATCHES {
            return Err(SimError::config(
                "warmup.moe_config_batches",
                format!("must list 1 to {MAX_MOE_CONFIG_BATCHES} token counts (got {})", b.len()),
            ));
        }
        if b[0] == 0 || b.windows(2).any(|w| w[0] >= w[1]) {
            return Err(SimError::config(
                "warmup.moe_config_batches",
                format!("must be positive token counts in strictly increasing order (got {b:?})"),
            ));
        }
        Ok(())
    }
}

/// Input form of the table.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWarmup {
    enabled: Option<bool>,
    moe_config_compile_ms: Option<f64>,
    moe_config_batches: Option<Vec<u32>>,
}

struct WarmupVisitor;

impl<'de> Visitor<'de> for WarmupVisitor {
    type Value = WarmupSpec;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("true, false or a table such as { moe_config_compile_ms = 1300 }")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> std::result::Result<WarmupSpec, E> {
        Ok(WarmupSpec { enabled: v, ..WarmupSpec::default() })
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> std::result::Result<WarmupSpec, A::Error> {
        let raw = RawWarmup::deserialize(de::value::MapAccessDeserializer::new(map))?;
        let d = WarmupSpec::default();
        Ok(WarmupSpec {
            enabled: raw.enabled.unwrap_or(true),
            moe_config_compile_ms: raw.moe_config_compile_ms.unwrap_or(d.moe_config_compile_ms),
            moe_config_batches: raw.moe_config_batches.unwrap_or(d.moe_config_batches),
        })
    }
}

impl<'de> Deserialize<'de> for WarmupSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        d.deserialize_any(WarmupVisitor)
    }
}

/// The key of `keys` (sorted) nearest to `m`, ties to the smaller: vLLM's
/// `min(configs.keys(), key=lambda x: abs(x - M))` over keys in increasing order.
fn nearest(keys: &[u32], m: u64) -> usize {
    let i = keys.partition_point(|&k| u64::from(k) < m);
    if i == 0 {
        return 0;
    }
    if i == keys.len() {
        return i - 1;
    }
    if m - u64::from(keys[i - 1]) <= u64::from(keys[i]) - m {
        i - 1
    } else {
        i
    }
}

/// vLLM's CUDA-graph capture sizes up to `bound` (`CompilationConfig`'s default list:
/// 1, 2, 4, then multiples of 8 up to 256 and of 16 above).
fn capture_sizes(bound: u64) -> impl Iterator<Item = u64> {
    [1, 2, 4].into_iter().chain((8..=256).step_by(8)).chain((272..=bound.max(272)).step_by(16)).filter(move |&s| s <= bound)
}

/// One pool's warm-up: which configurations start-up compiled, and the stall of the others.
#[derive(Debug, Clone, PartialEq)]
pub struct WarmupPlan {
    keys: Box<[u32]>,
    /// Bits of the configurations compiled at start-up.
    covered: u64,
    /// Steps of at most this many tokens replay a captured CUDA graph (padded to a capture
    /// size, all compiled at start-up); 0 without graphs.
    graph_max_tokens: u64,
    /// Tokens of one DP rank's step: the step's tokens divided by this (≥ 1).
    ranks: u64,
    stall_ns: u64,
}

/// What start-up ran, for [`WarmupPlan::new`].
#[derive(Debug, Clone, Copy)]
pub struct Startup {
    /// CUDA graphs captured (vLLM without `enforce_eager`), up to this many tokens; 0: none.
    pub graph_max_tokens: u64,
    /// The memory-profiling pass: `max_num_batched_tokens` of one rank.
    pub profile_tokens: u64,
    /// One rank's `max_num_seqs` (the sampler's dummy pass runs `min(this, profile_tokens)`).
    pub max_num_seqs: u64,
    /// DP ranks sharing a step's tokens (1 without DP).
    pub ranks: u64,
}

impl WarmupPlan {
    /// The plan for `spec` given what start-up ran; `None` when disabled or nothing can stall.
    pub fn new(spec: &WarmupSpec, start: Startup) -> Option<WarmupPlan> {
        if !spec.enabled || spec.moe_config_batches.is_empty() {
            return None;
        }
        let keys: Box<[u32]> = spec.moe_config_batches.iter().copied().take(MAX_MOE_CONFIG_BATCHES).collect();
        let mut covered = 0u64;
        let mut cover = |m: u64| covered |= 1u64 << nearest(&keys, m.max(1));
        cover(start.profile_tokens);
        cover(start.max_num_seqs.min(start.profile_tokens));
        for s in capture_sizes(start.graph_max_tokens) {
            cover(s);
        }
        let all = if keys.len() == 64 { u64::MAX } else { (1u64 << keys.len()) - 1 };
        let stall_ns = crate::num::round_u64(spec.moe_config_compile_ms * 1e6);
        if covered == all || stall_ns == 0 {
            return None;
        }
        Some(WarmupPlan { keys, covered, graph_max_tokens: start.graph_max_tokens, ranks: start.ranks.max(1), stall_ns })
    }

    /// The stall of a step of `tokens` tokens on a replica that compiled `compiled` since
    /// start-up (updated; start with 0), ns.
    #[inline]
    pub fn stall(&self, compiled: &mut u64, tokens: u64) -> u64 {
        let m = tokens.div_ceil(self.ranks);
        if m == 0 || m <= self.graph_max_tokens {
            return 0;
        }
        let bit = 1u64 << nearest(&self.keys, m);
        if (*compiled | self.covered) & bit != 0 {
            return 0;
        }
        *compiled |= bit;
        self.stall_ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev_run() -> Startup {
        // the development runs: max_num_batched_tokens 2048, max_num_seqs 128 (graphs to 256)
        Startup { graph_max_tokens: 256, profile_tokens: 2048, max_num_seqs: 128, ranks: 1 }
    }

    fn key_of(p: &WarmupPlan, m: u64) -> u32 {
        p.keys[nearest(&p.keys, m)]
    }

    #[test]
    fn nearest_key_ties_to_the_smaller() {
        let k = VLLM_MOE_CONFIG_BATCHES;
        assert_eq!(k[nearest(&k, 1)], 1);
        assert_eq!(k[nearest(&k, 3)], 2); // 2 and 4 tie
        assert_eq!(k[nearest(&k, 384)], 256); // 256 and 512 tie
        assert_eq!(k[nearest(&k, 385)], 512);
        assert_eq!(k[nearest(&k, 768)], 512);
        assert_eq!(k[nearest(&k, 769)], 1024);
        assert_eq!(k[nearest(&k, 1792)], 1536);
        assert_eq!(k[nearest(&k, 1793)], 2048);
        assert_eq!(k[nearest(&k, 100_000)], 4096);
    }

    #[test]
    fn startup_covers_the_captured_sizes_the_profile_pass_and_the_dummy_pass() {
        let p = WarmupPlan::new(&WarmupSpec::default(), dev_run()).unwrap();
        let uncovered: Vec<u32> = (0..p.keys.len()).filter(|&i| p.covered & (1 << i) == 0).map(|i| p.keys[i]).collect();
        assert_eq!(uncovered, [512, 1024, 1536, 3072, 4096]);
        // eager: only the profile pass (2048) and the dummy pass (128)
        let eager = WarmupPlan::new(&WarmupSpec::default(), Startup { graph_max_tokens: 0, ..dev_run() }).unwrap();
        let covered: Vec<u32> = (0..eager.keys.len()).filter(|&i| eager.covered & (1 << i) != 0).map(|i| eager.keys[i]).collect();
        assert_eq!(covered, [128, 2048]);
    }

    #[test]
    fn a_stall_once_per_configuration_per_replica() {
        let p = WarmupPlan::new(&WarmupSpec::default(), dev_run()).unwrap();
        let ns = crate::num::round_u64(DEFAULT_MOE_CONFIG_COMPILE_MS * 1e6);
        let (mut a, mut b) = (0, 0);
        // graph-replayed and start-up covered steps never stall
        for m in [0, 1, 7, 100, 256, 257, 300, 384, 1793, 2048] {
            assert_eq!(p.stall(&mut a, m), 0, "m = {m}");
        }
        assert_eq!(a, 0);
        assert_eq!(p.stall(&mut a, 500), ns);
        assert_eq!(key_of(&p, 500), 512);
        // the same configuration again (another M of its range): no stall
        assert_eq!(p.stall(&mut a, 700), 0);
        assert_eq!(p.stall(&mut a, 385), 0);
        assert_eq!(p.stall(&mut a, 1000), ns);
        assert_eq!(p.stall(&mut a, 1500), ns);
        assert_eq!(p.stall(&mut a, 1100), 0);
        // every configuration once: five stalls in all, then none
        assert_eq!(p.stall(&mut a, 3000), ns);
        assert_eq!(p.stall(&mut a, 5000), ns);
        for m in (1..6000).step_by(37) {
            assert_eq!(p.stall(&mut a, m), 0, "m = {m}");
        }
        // another replica compiles for itself
        assert_eq!(p.stall(&mut b, 600), ns);
        assert_eq!(p.stall(&mut b, 600), 0);
    }

    #[test]
    fn data_parallel_ranks_split_the_step() {
        let p = WarmupPlan::new(&WarmupSpec::default(), Startup { ranks: 2, ..dev_run() }).unwrap();
        let mut a = 0;
        assert_eq!(p.stall(&mut a, 1000), 1_300_000_000); // 500 a rank: the 512 configuration
        assert_eq!(p.stall(&mut a, 600), 0); // 300 a rank: graphs
    }

    #[test]
    fn off_zero_or_all_covered_means_no_plan() {
        assert!(WarmupPlan::new(&WarmupSpec { enabled: false, ..WarmupSpec::default() }, dev_run()).is_none());
        assert!(WarmupPlan::new(&WarmupSpec { moe_config_compile_ms: 0.0, ..WarmupSpec::default() }, dev_run()).is_none());
        let small = WarmupSpec { moe_config_batches: vec![1, 64, 256, 2048], ..WarmupSpec::default() };
        assert!(WarmupPlan::new(&small, dev_run()).is_none());
    }

    #[test]
    fn bad_constants_name_their_field() {
        let bad = |s: WarmupSpec| s.validate().unwrap_err().path().map(str::to_string);
        let d = WarmupSpec::default;
        assert_eq!(bad(WarmupSpec { moe_config_compile_ms: -1.0, ..d() }).as_deref(), Some("warmup.moe_config_compile_ms"));
        assert_eq!(bad(WarmupSpec { moe_config_compile_ms: f64::NAN, ..d() }).as_deref(), Some("warmup.moe_config_compile_ms"));
        for b in [vec![], vec![0, 4], vec![4, 4], vec![8, 4], (1..=65).collect()] {
            assert_eq!(bad(WarmupSpec { moe_config_batches: b, ..d() }).as_deref(), Some("warmup.moe_config_batches"));
        }
        d().validate().unwrap();
    }
}
