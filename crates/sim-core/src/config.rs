//! The scenario: what a user asks to simulate. Parsed from JSON or TOML text (the front ends
//! read files), with unknown fields rejected and every rule checked up front, so an error
//! names the field path and the rule instead of surfacing mid-run.

use serde::{Deserialize, Serialize};

use crate::catalog::{GpuInput, ModelInput};
use crate::error::{check, Result, SimError};
use crate::frontend::{Frontend, FrontendSpec, NO_FRONTEND, VLLM_FRONTEND};
use crate::limits::Limits;
use crate::perf::{AllToAll, CostModelSpec, Engine};
pub use crate::policy::{Policy, Router};
use crate::scaling::ScalingConfig;
use crate::topo::events::EventSpec;
use crate::topo::TopologyInput;
use crate::workload::WorkloadSpec;

mod speculative;
pub use speculative::{Acceptance, SpecMethod, SpecPlan, Speculative, MAX_SPEC_TOKENS, MTP_DEFAULT_ACCEPTANCE};

/// A whole scenario. Sections mirror the documentation: `seed, model, gpu, deployment,
/// scheduler, workload, cost_model, slo`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Free-form name, echoed in results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Seed of the one PRNG of the run (workload sampling). Same seed ⇒ same bytes.
    #[serde(default)]
    pub seed: u64,
    /// Model preset name, or a table (`preset` plus overrides, or every field).
    pub model: ModelInput,
    /// GPU preset name, or a table (`preset` plus overrides, or every field).
    pub gpu: GpuInput,
    #[serde(default)]
    pub deployment: Deployment,
    #[serde(default)]
    pub scheduler: SchedulerConfig,
    #[serde(default)]
    pub workload: WorkloadSpec,
    /// Execution-time model: `{kind = "roofline"}` (default) or `{kind = "linear", …}`.
    #[serde(default)]
    pub cost_model: CostModelSpec,
    /// Optional latency objectives; goodput counts requests meeting all given ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo: Option<Slo>,
    /// The serving front end between client and engine ([`crate::frontend`]); absent: the
    /// engine's defaults (vLLM's API server for the `vllm` engine, none otherwise).
    #[serde(default, skip_serializing_if = "is_default_frontend")]
    pub frontend: FrontendSpec,
    /// The GPU fabric: a preset name or a table `{preset?, nodes, links, routing?}` (see
    /// [`crate::topo`]). Absent: communication is priced from the GPU's `nvlink_gbps`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<TopologyInput>,
    /// Topology events during the run (needs `topology`), in any order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<EventSpec>,
    /// What the run may use: `{max_memory_gib = 4, max_seconds = 600}` by default. A
    /// scenario whose estimated memory exceeds it is refused before it runs
    /// ([`crate::limits`]).
    #[serde(default, skip_serializing_if = "Limits::is_default")]
    pub limits: Limits,
    /// Autoscaling: replicas join and leave during the run ([`crate::scaling`]);
    /// `deployment.replicas` is the starting count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scaling: Option<ScalingConfig>,
}

/// How model replicas are laid out and how arrivals reach them.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Deployment {
    /// Tensor-parallel degree (GPUs per pipeline stage, one node).
    pub tp: u32,
    /// Pipeline-parallel stages per replica.
    pub pp: u32,
    /// Number of identical replicas.
    pub replicas: u32,
    /// `round_robin`, `least_outstanding_tokens`, `topology_aware` (with a topology:
    /// outstanding tokens weighed by the pace of each replica's links as they are — degraded,
    /// down or shared — and with `disagg` the decode replica with the best route score from
    /// the prefill replica; without a topology as `least_outstanding_tokens`), or one of the
    /// cache-aware routers ([`crate::engine::route`]): `precise_prefix`, `approx_prefix`,
    /// `session_affinity`, `consistent_hash`.
    pub router: Router,
    /// The prefix-aware routers' weighted scorers (llm-d's scheduler composes its scorers
    /// this way): each replica scores `prefix × (share of the prompt's blocks it holds) +
    /// load × (its outstanding tokens, min-max scaled, fewest = 1) + kv_usage × (share of
    /// its KV pool free)`, and the best score wins. Absent: prefix 2, load 1, kv_usage 1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub router_scorers: Option<RouterScorers>,
    /// `precise_prefix` only: how long a replica's KV events (the blocks it stored) take to
    /// reach the router, ms. 0: the router reads each replica's cache as it is.
    #[serde(skip_serializing_if = "is_zero")]
    pub kv_event_delay_ms: f64,
    /// How long an arrival may wait in the router's dispatch queue for room in some
    /// replica's waiting queue before it is rejected ("dispatch queue full"). Seed: 500 ms.
    pub dispatch_timeout_ms: f64,
    /// `disagg` only: the first this many replicas prefill, the others decode.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefill_replicas: Option<u32>,
    /// With a topology: the GPU ids of each replica (`tp·pp` per replica, stage-major).
    /// Absent: automatic (TP inside a node, PP across nodes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub placement: Option<Vec<Vec<String>>>,
    /// Data-parallel attention ranks per replica (vLLM's `--data-parallel-size` with an MoE
    /// model, SGLang's DP attention): each rank runs attention on its own requests with its
    /// own KV cache (TP `tp` inside the rank), and all ranks share the experts. GPUs of one
    /// replica = `dp × tp × pp`.
    #[serde(skip_serializing_if = "is_one")]
    pub dp: u32,
    /// Expert parallelism: 1 (the experts TP-sharded like the dense MLP), or `dp × tp` (vLLM's
    /// `--enable-expert-parallel`: each GPU of a stage holds whole experts, `experts / ep` of
    /// them, and tokens travel to their experts' GPUs and back by all-to-all).
    #[serde(skip_serializing_if = "is_one")]
    pub ep: u32,
    /// Expert-parallel options ([`MoeConfig`]).
    #[serde(skip_serializing_if = "MoeConfig::is_default")]
    pub moe: MoeConfig,
    /// Pools of replicas, each with its own GPU, layout and role (`[[deployment.pools]]`);
    /// empty: one pool of `replicas` replicas of `tp`/`pp`/`dp`/`ep` on the scenario's GPU
    /// (with `disagg`: its first `prefill_replicas` prefill, the others decode).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pools: Vec<Pool>,
}

/// What a pool's replicas do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PoolRole {
    /// Serve whole requests (the router spreads arrivals over every `both` pool's replicas).
    Both,
    /// Prefill only, then hand the KV cache to a decode replica (`disagg`).
    Prefill,
    /// Decode what prefill replicas handed over (`disagg`).
    Decode,
}

/// One pool of identical replicas: its GPU (default: the scenario's `gpu`), how many, and
/// each replica's layout. Each pool is priced with its own GPU's tables or roofline and has
/// its own memory plan (KV blocks); the scheduler's settings are the scenario's.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Pool {
    /// A name unique among the pools (results and errors use it).
    pub name: String,
    #[serde(default = "role_both")]
    pub role: PoolRole,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<GpuInput>,
    #[serde(default = "one")]
    pub replicas: u32,
    #[serde(default = "one")]
    pub tp: u32,
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub pp: u32,
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub dp: u32,
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub ep: u32,
}

fn one() -> u32 {
    1
}

fn role_both() -> PoolRole {
    PoolRole::Both
}

/// A pool as the rest of the scenario sees it, the implicit one included ([`Deployment::pool_views`]).
#[derive(Debug, Clone, PartialEq)]
pub struct PoolView<'a> {
    pub name: String,
    pub role: PoolRole,
    /// `None`: the scenario's GPU.
    pub gpu: Option<&'a GpuInput>,
    pub replicas: u32,
    pub tp: u32,
    pub pp: u32,
    pub dp: u32,
    pub ep: u32,
    /// The field path errors about this pool name (`deployment.pools[1]`, or `deployment`).
    pub path: String,
}

impl Deployment {
    /// Every pool in replica order (prefill pools first under `disagg`): the listed pools, or
    /// the one the top-level fields describe (two under `disagg`: its prefill and decode
    /// replicas).
    pub fn pool_views(&self, disagg: bool) -> Vec<PoolView<'_>> {
        if !self.pools.is_empty() {
            return self
                .pools
                .iter()
                .enumerate()
                .map(|(i, p)| PoolView {
                    name: p.name.clone(),
                    role: p.role,
                    gpu: p.gpu.as_ref(),
                    replicas: p.replicas,
                    tp: p.tp,
                    pp: p.pp,
                    dp: p.dp,
                    ep: p.ep,
                    path: format!("deployment.pools[{i}]"),
                })
                .collect();
        }
        let one = |name: &str, role, replicas| PoolView {
            name: name.to_string(),
            role,
            gpu: None,
            replicas,
            tp: self.tp,
            pp: self.pp,
            dp: self.dp,
            ep: self.ep,
            path: "deployment".to_string(),
        };
        match (disagg, self.prefill_replicas) {
            (true, Some(p)) => vec![one("prefill", PoolRole::Prefill, p), one("decode", PoolRole::Decode, self.replicas.saturating_sub(p))],
            _ => vec![one("default", PoolRole::Both, self.replicas)],
        }
    }

    /// Replicas of every pool.
    pub fn total_replicas(&self) -> u32 {
        if self.pools.is_empty() {
            self.replicas
        } else {
            self.pools.iter().fold(0u32, |a, p| a.saturating_add(p.replicas))
        }
    }

    /// Check the pools (called by [`Scenario::validate_local`]).
    fn validate_pools(&self, disagg: bool) -> Result<()> {
        if self.pools.is_empty() {
            return Ok(());
        }
        let base = Deployment::default();
        for (field, set) in [
            ("replicas", self.replicas != base.replicas),
            ("tp", self.tp != base.tp),
            ("pp", self.pp != base.pp),
            ("dp", self.dp != base.dp),
            ("ep", self.ep != base.ep),
            ("prefill_replicas", self.prefill_replicas.is_some()),
        ] {
            if set {
                return Err(SimError::config(
                    format!("deployment.{field}"),
                    "with deployment.pools each pool sets its own layout: move it into the pools",
                ));
            }
        }
        check::in_range("deployment.pools", self.pools.len() as u32, 1, 64)?;
        let mut names = std::collections::BTreeSet::new();
        let mut seen_decode = false;
        for (i, p) in self.pools.iter().enumerate() {
            let path = format!("deployment.pools[{i}]");
            if p.name.trim().is_empty() || !names.insert(p.name.as_str()) {
                return Err(SimError::config(format!("{path}.name"), format!("must be a name no other pool has (got {:?})", p.name)));
            }
            check::in_range(&format!("{path}.replicas"), p.replicas, 1, 100_000)?;
            check::in_range(&format!("{path}.tp"), p.tp, 1, 64)?;
            check::in_range(&format!("{path}.pp"), p.pp, 1, 64)?;
            check::in_range(&format!("{path}.dp"), p.dp, 1, 1024)?;
            check_ep(&format!("{path}.ep"), p.ep, p.dp, p.tp)?;
            match (disagg, p.role) {
                (false, PoolRole::Prefill | PoolRole::Decode) => {
                    return Err(SimError::config(
                        format!("{path}.role"),
                        "prefill and decode pools hand KV over: use scheduler.policy = \"disagg\" (with a topology), or role = \"both\"",
                    ))
                }
                (true, PoolRole::Both) => {
                    return Err(SimError::config(format!("{path}.role"), "under disagg every pool prefills or decodes"))
                }
                (true, PoolRole::Prefill) if seen_decode => {
                    return Err(SimError::config(format!("{path}.role"), "list the prefill pools before the decode pools"))
                }
                (true, PoolRole::Decode) => seen_decode = true,
                _ => {}
            }
        }
        if disagg && (!seen_decode || self.pools[0].role != PoolRole::Prefill) {
            return Err(SimError::config("deployment.pools", "disagg needs at least one prefill pool and one decode pool"));
        }
        Ok(())
    }
}

/// `ep` is 1 or `dp × tp` (vLLM's `--enable-expert-parallel` spans every GPU of a stage).
fn check_ep(path: &str, ep: u32, dp: u32, tp: u32) -> Result<()> {
    if ep != 1 && ep != dp.saturating_mul(tp) {
        return Err(SimError::config(
            path,
            format!(
                "expert parallelism spans every GPU of a pipeline stage (vLLM's --enable-expert-parallel: ep = dp × tp \
                 = {}); set ep = {} or 1 (got {ep})",
                dp.saturating_mul(tp),
                dp.saturating_mul(tp),
            ),
        ));
    }
    Ok(())
}

fn is_one(x: &u32) -> bool {
    *x == 1
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

/// Weights of the prefix-aware routers' scorers (`[deployment.router_scorers]`).
#[derive(Debug, Clone, Copy, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct RouterScorers {
    /// The share of the prompt's full blocks the replica holds (as the router sees them).
    pub prefix: f64,
    /// Outstanding tokens, min-max scaled over the candidates (the fewest score 1).
    pub load: f64,
    /// The share of the replica's KV pool that is free.
    pub kv_usage: f64,
}

impl Default for RouterScorers {
    /// The weights of llm-d's example scheduler profile (prefix 2, load 1, KV usage 1).
    fn default() -> Self {
        RouterScorers { prefix: 2.0, load: 1.0, kv_usage: 1.0 }
    }
}

/// How an expert-parallel deployment moves tokens and balances experts (`[deployment.moe]`).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct MoeConfig {
    /// Extra expert slots for EPLB-style replication of the most popular experts (DeepSeek's
    /// EPLB; `redundant_experts = 32` on 256 experts gives 288 slots): spread over the EP
    /// ranks, they even out the tokens each rank's experts receive.
    pub redundant_experts: u32,
    /// The dispatch/combine implementation: `auto` (DeepEP's high-throughput kernels for
    /// prefill and mixed steps, its low-latency kernels for decode-only steps, as SGLang's
    /// `--deepep-mode auto`), `high_throughput`, `low_latency`, or `allgather` (the naive
    /// alternative: all-gather the tokens before the experts, reduce-scatter after).
    pub all_to_all: AllToAll,
    /// Two-batch overlap: split each step into two micro-batches so that one's dispatch and
    /// combine run while the other computes (SGLang `--enable-two-batch-overlap`, vLLM's
    /// DBO). Hides communication at large batches; costs extra launches and smaller GEMMs.
    pub two_batch_overlap: bool,
    /// How unevenly the router spreads tokens over the experts: the coefficient of variation
    /// (std / mean) of tokens per expert, 0 = every expert equally popular. `None`: 1.36,
    /// DeepSeek-R1's as TensorRT-LLM measured it ([`crate::perf::ep`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expert_load_cv: Option<f64>,
}

impl MoeConfig {
    pub fn is_default(&self) -> bool {
        *self == MoeConfig::default()
    }
}

impl Default for MoeConfig {
    fn default() -> Self {
        MoeConfig { redundant_experts: 0, all_to_all: AllToAll::Auto, two_batch_overlap: false, expert_load_cv: None }
    }
}


impl Default for Deployment {
    fn default() -> Self {
        Deployment {
            tp: 1,
            pp: 1,
            replicas: 1,
            router: Router::RoundRobin,
            router_scorers: None,
            kv_event_delay_ms: 0.0,
            dispatch_timeout_ms: 500.0,
            prefill_replicas: None,
            placement: None,
            dp: 1,
            ep: 1,
            moe: MoeConfig::default(),
            pools: Vec::new(),
        }
    }
}

/// The bug classes `scheduler.inject_bug` can switch on (model checking only).
pub const BUGS: &[&str] = &["leak_on_preempt", "double_admit", "no_preempt", "drop_on_requeue", "no_seat_preempt"];
/// The values of `scheduler.scheduling_policy` (vLLM's `--scheduling-policy`).
pub const SCHEDULING_POLICIES: &[&str] = &["fcfs", "priority"];

fn is_default_frontend(f: &FrontendSpec) -> bool {
    *f == FrontendSpec::default()
}

/// Scheduler and KV-cache settings of one replica. Policy-specific fields are ignored by
/// the policies that do not use them (documented per field).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct SchedulerConfig {
    /// `orca`, `vllm`, `sarathi`, `o1pro` or `disagg` (vLLM scheduling on separate prefill
    /// and decode replicas; the KV cache moves over the topology between them): see
    /// [`crate::policy`].
    pub policy: Policy,
    /// Tokens per KV block (paged managers; the base unit of the others). Power of two.
    pub block_size: u32,
    /// Most requests running at once (vLLM `max_num_seqs`).
    pub max_num_seqs: u32,
    /// Token budget of one step (vLLM `max_num_batched_tokens`; orca, vllm, o1pro).
    pub max_num_batched_tokens: u32,
    /// Sarathi's fixed per-iteration token budget (decodes + prefill chunks).
    pub chunk_size: u32,
    /// o1pro flow control: most tokens of one request in one iteration (seed: 2048).
    pub max_tokens_per_request: u32,
    /// Fraction of GPU memory the engine may use (weights + activations + KV).
    pub gpu_memory_utilization: f64,
    /// Usable KV blocks per replica, overriding the memory plan.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub num_gpu_blocks: Option<u64>,
    /// Longest prompt + output accepted; defaults to the model's context length.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_model_len: Option<u32>,
    /// Bound of each replica's waiting queue; arrivals beyond it wait in the router's
    /// dispatch queue. Unbounded by default except for `o1pro` (4 × max_num_seqs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_waiting: Option<u32>,
    /// vLLM's async scheduling: the scheduler prepares step n+1 while the GPU runs step n, so
    /// a request that reaches the engine during step n is first scheduled in step n+2 (an
    /// idle engine schedules it at once). Default: on when the cost model prices the `vllm`
    /// engine (vLLM ≥ 0.12 enables it by default), off otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub async_scheduling: Option<bool>,
    /// Model checking only: switch on one known bug class inside the real scheduler
    /// (`leak_on_preempt`, `double_admit`, `no_preempt`, `drop_on_requeue`, `no_seat_preempt`) to show that
    /// `o1sim check` catches it. Absent in every normal scenario.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inject_bug: Option<String>,
    /// Automatic prefix caching (vLLM's `enable_prefix_caching`): full KV blocks stay
    /// cached after their request frees them, and an admission reuses the longest chain of
    /// cached blocks of its prompt ([`crate::kv::prefix`]). Default: on for `vllm`, `sarathi`
    /// and `disagg` (as in vLLM v1) and `o1pro` (a cache per block size); `orca` has no
    /// cache, so `true` is an error there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enable_prefix_caching: Option<bool>,
    /// vLLM's `--scheduling-policy`: `fcfs` (default) or `priority` (the waiting queue by
    /// request `priority`, lower first, then arrival; the preemption victim the running
    /// request with the largest (priority, arrival)). For the policies on vLLM's
    /// scheduler (`vllm`, `sarathi`, `disagg`); `o1pro` has its own priority rules.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheduling_policy: Option<String>,
    /// KV-cache tiers below HBM (vLLM's CPU offloading, LMCache, SGLang's hierarchical
    /// cache): `kv_offload = { cpu_gib = 64 }` or the full form ([`KvOffload`],
    /// [`crate::kv::offload`]). Absent: no tier.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kv_offload: Option<KvOffload>,
    /// Speculative decoding (`speculative = { method = "eagle3", num_tokens = 3,
    /// acceptance_rate = 0.7 }`, [`Speculative`]): decodes verify drafts each step. Absent:
    /// one token per decode step.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub speculative: Option<Speculative>,
    /// Multi-LoRA (with `workload.lora`): most distinct adapters in one step and GPU slots
    /// for them (vLLM's `max_loras`, default 1). A waiting request whose adapter would be
    /// one too many is passed over until a slot frees.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_loras: Option<u32>,
    /// Multi-LoRA: adapters kept in host memory (vLLM's `max_cpu_loras`, default
    /// `max_loras`, at least that); a GPU slot is filled from there over the host link, an
    /// adapter not there is read from disk first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_cpu_loras: Option<u32>,
    /// `trtllm` only: TensorRT-LLM's capacity scheduler (`capacity_scheduler_policy`):
    /// `guaranteed_no_evict` (default, `trtllm-bench`'s) admits a request only when the
    /// blocks of its whole prompt + maximum output fit beside what every running request
    /// may still need; `max_utilization` admits while this step's blocks fit and pauses the
    /// most recently started request when a running one cannot grow.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity_scheduler_policy: Option<CapacityPolicy>,
    /// `trtllm` only: most requests in one step (TensorRT-LLM's `max_batch_size`). Default:
    /// what `trtllm-bench` picks for the workload ([`crate::sched::trtllm::bench_settings`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_batch_size: Option<u32>,
    /// `trtllm` only: most tokens in one step (TensorRT-LLM's `max_num_tokens`); a context
    /// is scheduled whole (no chunking), the first of a step even when it is longer. Default:
    /// `trtllm-bench`'s pick ([`crate::sched::trtllm::bench_settings`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_num_tokens: Option<u32>,
    /// `trtllm` only: the fraction of the memory left after the weights and the profiling
    /// run's peak that becomes KV cache (`kv_cache_free_gpu_mem_fraction`), in (0, 1].
    /// Default 0.90 (`trtllm-bench`'s and `KvCacheConfig`'s).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kv_cache_free_gpu_mem_fraction: Option<f64>,
}

/// TensorRT-LLM's capacity scheduler policies (`scheduler.capacity_scheduler_policy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum CapacityPolicy {
    /// Reserve every admitted request's whole length: a running request never runs out of
    /// blocks, none is ever paused.
    #[default]
    GuaranteedNoEvict,
    /// Admit while this step's blocks fit; pause (recompute later) the most recently started
    /// request when one cannot grow.
    MaxUtilization,
}

/// TensorRT-LLM's own `max_batch_size` when nothing picks it (`BuildConfig.max_batch_size`,
/// which `trtllm-bench` also falls back to for quantisations its heuristic does not tune).
pub const TRTLLM_DEFAULT_MAX_BATCH_SIZE: u32 = 2048;
/// TensorRT-LLM's own `max_num_tokens` when nothing picks it (`BuildConfig.max_num_tokens`).
pub const TRTLLM_DEFAULT_MAX_NUM_TOKENS: u32 = 8192;

/// `kv_cache_free_gpu_mem_fraction`'s default (`trtllm-bench`'s `--kv_cache_free_gpu_mem_fraction`
/// and TensorRT-LLM's `KvCacheConfig.free_gpu_memory_fraction`, both 0.90).
pub const TRTLLM_KV_FRACTION: f64 = 0.90;

/// `[scheduler.kv_offload]`: tiers that keep full KV blocks below the GPU's HBM and load them
/// back on a hit ([`crate::kv::offload`] for the semantics). The simple form `cpu_gib`
/// is one host-DRAM tier of that size per replica; `tiers` lists them, fastest first.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct KvOffload {
    /// A host-DRAM tier of this many GiB per replica (the simple form; not with `tiers`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_gib: Option<f64>,
    /// The tiers below HBM, fastest first: a block evicted from one moves to the next.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tiers: Vec<OffloadTier>,
    /// When a tier load runs: `async` (vLLM's offloading connector: the request waits for
    /// its blocks while the other requests' steps go on) or `blocking` (the step that admits
    /// it waits for the load, stalling the whole batch).
    pub load: OffloadLoad,
}

/// When a tier hit is loaded back into HBM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum OffloadLoad {
    #[default]
    Async,
    Blocking,
}

/// Where a tier keeps its blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OffloadMedium {
    /// Host DRAM, over each GPU's host link (PCIe, or NVLink-C2C on GH200/GB200).
    Cpu,
    /// A local NVMe SSD, through host memory.
    Ssd,
    /// A remote store (Mooncake's store, LMCache's remote backend), over the NIC.
    Remote,
}

/// Eviction order inside one tier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum OffloadEviction {
    /// Least recently stored or hit first (vLLM's `LRUOffloadingManager`).
    #[default]
    Lru,
    /// Oldest stored first, hits do not refresh.
    Fifo,
}

/// One tier of `[scheduler.kv_offload]`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct OffloadTier {
    pub medium: OffloadMedium,
    /// Capacity per replica, GiB.
    pub capacity_gib: f64,
    /// Bandwidth of the tier's path for the whole replica, GB/s each way, shared by its TP ×
    /// PP GPUs (each moves its share of a block). Default: `cpu` each GPU's own host link
    /// from the topology (without one, half the GPU's PCIe figure, or 450 on NVLink-C2C);
    /// `ssd` 6.8 (one PCIe Gen4 NVMe drive's sequential read, Samsung PM9A3's datasheet);
    /// `remote` 50 per GPU (a 400 Gb/s NIC each).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bandwidth_gbps: Option<f64>,
    /// Latency of one transfer, µs. Default: `cpu` the host path's (1 µs without a
    /// topology), `ssd` 80 (NVMe read latency), `remote` 10 (an RDMA round trip and the
    /// store's lookup).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_us: Option<f64>,
    #[serde(default)]
    pub eviction: OffloadEviction,
}

impl SchedulerConfig {
    /// `max_loras`, default 1 (vLLM's).
    pub fn effective_max_loras(&self) -> u32 {
        self.max_loras.unwrap_or(1)
    }

    /// `max_cpu_loras`, default `max_loras` (vLLM's).
    pub fn effective_max_cpu_loras(&self) -> u32 {
        self.max_cpu_loras.unwrap_or(self.effective_max_loras())
    }

    /// Whether prefix caching is on (the field, or the policy's default).
    pub fn prefix_caching(&self) -> bool {
        self.enable_prefix_caching.unwrap_or(self.policy.info().prefix_cache)
    }

    /// vLLM's priority scheduling is on.
    pub fn priority_scheduling(&self) -> bool {
        self.scheduling_policy.as_deref() == Some("priority")
    }

    /// `trtllm`'s KV fraction of the free memory (the field, or [`TRTLLM_KV_FRACTION`]).
    pub fn kv_fraction(&self) -> f64 {
        self.kv_cache_free_gpu_mem_fraction.unwrap_or(TRTLLM_KV_FRACTION)
    }

    /// The `trtllm`-only fields: each given outside `policy = "trtllm"` is an error naming it;
    /// in range otherwise.
    fn validate_trtllm(&self) -> Result<()> {
        let given = [
            ("capacity_scheduler_policy", self.capacity_scheduler_policy.is_some(), "scheduling_policy"),
            ("max_batch_size", self.max_batch_size.is_some(), "max_num_seqs"),
            ("max_num_tokens", self.max_num_tokens.is_some(), "max_num_batched_tokens"),
            ("kv_cache_free_gpu_mem_fraction", self.kv_cache_free_gpu_mem_fraction.is_some(), "gpu_memory_utilization"),
        ];
        if self.policy != Policy::Trtllm {
            if let Some((name, _, theirs)) = given.iter().find(|g| g.1) {
                return Err(SimError::config(
                    format!("scheduler.{name}"),
                    format!(
                        "is TensorRT-LLM's setting and applies to policy = \"trtllm\" (the policy is {}; its own is scheduler.{theirs})",
                        self.policy
                    ),
                ));
            }
            return Ok(());
        }
        if let Some(n) = self.max_batch_size {
            check::in_range("scheduler.max_batch_size", n, 1, 1 << 20)?;
        }
        if let Some(n) = self.max_num_tokens {
            check::in_range("scheduler.max_num_tokens", n, 1, 1 << 24)?;
        }
        if let Some(f) = self.kv_cache_free_gpu_mem_fraction {
            check::finite("scheduler.kv_cache_free_gpu_mem_fraction", f)?;
            if !(f > 0.0 && f <= 1.0) {
                return Err(SimError::config("scheduler.kv_cache_free_gpu_mem_fraction", format!("must be in (0, 1] (got {f})")));
            }
        }
        Ok(())
    }
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            policy: Policy::Vllm,
            block_size: 16,
            max_num_seqs: 256,
            max_num_batched_tokens: 8192,
            chunk_size: 512,
            max_tokens_per_request: 2048,
            gpu_memory_utilization: 0.9,
            num_gpu_blocks: None,
            max_model_len: None,
            max_waiting: None,
            async_scheduling: None,
            inject_bug: None,
            enable_prefix_caching: None,
            scheduling_policy: None,
            kv_offload: None,
            speculative: None,
            max_loras: None,
            max_cpu_loras: None,
            capacity_scheduler_policy: None,
            max_batch_size: None,
            max_num_tokens: None,
            kv_cache_free_gpu_mem_fraction: None,
        }
    }
}

/// Latency objectives (all optional); a request meets the SLO when it finished and meets
/// every objective given.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Slo {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpot_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e2e_ms: Option<f64>,
}

/// Parse a scenario from JSON text. Errors name the field path.
pub fn parse_json(text: &str) -> Result<Scenario> {
    // A UTF-8 byte-order mark (what some Windows editors write first) is not content.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let value: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| SimError::config("", format!("invalid JSON: {e}")))?;
    from_value(value)
}

/// Parse a scenario from TOML text. Errors name the field path.
pub fn parse_toml(text: &str) -> Result<Scenario> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let value: toml::Value = toml::from_str(text).map_err(|e| toml_error(text, &e))?;
    from_value(toml_to_json("", value)?)
}

/// A TOML syntax error as one line: where, and what (the parser's own text quotes the
/// offending line, which can be megabytes long).
fn toml_error(text: &str, e: &toml::de::Error) -> SimError {
    let message = e.message().trim().replace('\n', "; ");
    match e.span() {
        Some(span) => {
            let before = &text.as_bytes()[..span.start.min(text.len())];
            let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
            let column = before.iter().rev().take_while(|&&b| b != b'\n').count() + 1;
            SimError::config("", format!("invalid TOML at line {line}, column {column}: {message}"))
        }
        None => SimError::config("", format!("invalid TOML: {message}")),
    }
}

/// TOML → JSON value, rejecting NaN/inf (which JSON cannot carry) with their path, and
/// datetimes (no field takes one).
fn toml_to_json(path: &str, v: toml::Value) -> Result<serde_json::Value> {
    use serde_json::Value as J;
    let join = |k: &str| if path.is_empty() { k.to_string() } else { format!("{path}.{k}") };
    Ok(match v {
        toml::Value::String(s) => J::String(s),
        toml::Value::Integer(i) => J::from(i),
        toml::Value::Float(f) => {
            check::finite(path, f)?;
            J::from(f)
        }
        toml::Value::Boolean(b) => J::Bool(b),
        toml::Value::Datetime(_) => return Err(SimError::config(path, "dates are not accepted here")),
        toml::Value::Array(a) => J::Array(
            a.into_iter().enumerate().map(|(i, x)| toml_to_json(&format!("{path}[{i}]"), x)).collect::<Result<_>>()?,
        ),
        toml::Value::Table(t) => {
            let mut m = serde_json::Map::new();
            for (k, x) in t {
                let p = join(&k);
                m.insert(k, toml_to_json(&p, x)?);
            }
            J::Object(m)
        }
    })
}

fn from_value(value: serde_json::Value) -> Result<Scenario> {
    let scenario: Scenario = serde_path_to_error::deserialize(value).map_err(|e| {
        let mut path = e.path().to_string();
        if path == "." {
            path.clear();
        }
        let msg = e.inner().to_string();
        // serde reports an unknown field at its parent; name the field itself.
        if let Some(rest) = msg.strip_prefix("unknown field `") {
            if let Some(field) = rest.split('`').next() {
                if !path.ends_with(field) {
                    path = if path.is_empty() { field.to_string() } else { format!("{path}.{field}") };
                }
            }
        }
        SimError::config(path, plain_message(&msg))
    })?;
    Ok(scenario)
}

/// serde's messages in plain words: `invalid type: floating point `1000.0`, expected u64` →
/// `expected a whole number, got 1000.0`; `unknown field `blok_size`, expected one of …` →
/// `unknown field 'blok_size'; did you mean block_size? (valid: …)`. Other messages pass.
pub fn plain_message(msg: &str) -> String {
    let ticked = |s: &str| -> Vec<String> { s.split('`').skip(1).step_by(2).map(str::to_string).collect() };
    for (prefix, what) in [("unknown field `", "field"), ("unknown variant `", "kind")] {
        if let Some(rest) = msg.strip_prefix(prefix) {
            let got = rest.split('`').next().unwrap_or_default();
            let valid = rest.split_once(", expected").map(|(_, e)| ticked(e)).unwrap_or_default();
            if valid.is_empty() {
                return format!("unknown {what} '{got}' (no fields are accepted here)");
            }
            let names: Vec<&str> = valid.iter().map(String::as_str).collect();
            return match check::unknown_name("", what, got, &names) {
                SimError::Config { message, .. } => message,
                other => other.to_string(),
            };
        }
    }
    for prefix in ["invalid type: ", "invalid value: "] {
        let Some(rest) = msg.strip_prefix(prefix) else { continue };
        let Some((got, expected)) = rest.rsplit_once(", expected ") else { continue };
        let got = match got.split_once(' ') {
            Some(("floating", r)) | Some(("integer", r)) | Some(("boolean", r)) => {
                r.trim_start_matches("point ").trim_matches('`').to_string()
            }
            Some(("string", r)) => format!("the text {r}"),
            _ => match got {
                "map" => "a table".to_string(),
                "sequence" => "a list".to_string(),
                "null" | "unit value" => "nothing (null)".to_string(),
                other => other.to_string(),
            },
        };
        let expected = match expected {
            "u8" | "u16" | "u32" | "u64" | "usize" => {
                let max = match expected {
                    "u8" => u64::from(u8::MAX),
                    "u16" => u64::from(u16::MAX),
                    "u32" => u64::from(u32::MAX),
                    _ => u64::MAX,
                };
                if prefix == "invalid value: " {
                    format!("a whole number from 0 to {max}")
                } else {
                    "a whole number".to_string()
                }
            }
            "i8" | "i16" | "i32" | "i64" | "isize" => "a whole number".to_string(),
            "f32" | "f64" => "a number".to_string(),
            "a boolean" => "true or false".to_string(),
            "a sequence" => "a list".to_string(),
            "a map" => "a table".to_string(),
            e if e.starts_with("struct ") || e.starts_with("internally tagged enum") => "a table".to_string(),
            other => other.to_string(),
        };
        return format!("expected {expected}, got {got}");
    }
    msg.to_string()
}

/// Input format of a scenario text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format { Json, Toml }

impl Format {
    /// `"json"` or `"toml"`.
    pub fn parse(s: &str) -> Result<Format> {
        match s { "json" => Ok(Format::Json), "toml" => Ok(Format::Toml),
            other => Err(SimError::config("format", format!("must be 'json' or 'toml' (got '{other}')"))) }
    }
}

impl Scenario {
    /// Parse from text in the given format (at most [`crate::limits::MAX_INPUT_BYTES`]).
    pub fn parse(text: &str, format: Format) -> Result<Scenario> {
        crate::limits::check_input(text.len(), "the scenario text")?;
        match format {
            Format::Json => parse_json(text),
            Format::Toml => parse_toml(text),
        }
    }

    /// Whether the cost model prices the production `vllm` engine.
    pub fn prices_vllm(&self) -> bool {
        matches!(&self.cost_model, CostModelSpec::Calibrated(s) | CostModelSpec::Roofline(s) if s.engine == Engine::Vllm)
    }

    /// The front end in effect: the `[frontend]` section over the engine's defaults: vLLM's
    /// API server ([`VLLM_FRONTEND`], or what a calibration profile measured) for the `vllm`
    /// engine, none otherwise.
    pub fn effective_frontend(&self) -> Frontend {
        let mut base = if self.prices_vllm() { VLLM_FRONTEND } else { NO_FRONTEND };
        if let CostModelSpec::Calibrated(s) = &self.cost_model {
            if let Ok(Some(p)) = s.custom_profile() {
                if let (Some(f), true) = (&p.frontend, self.prices_vllm()) {
                    base = f.resolve(base);
                }
            }
        }
        self.frontend.resolve(base)
    }

    /// Whether async scheduling is on ([`SchedulerConfig::async_scheduling`]).
    pub fn effective_async_scheduling(&self) -> bool {
        self.scheduler.async_scheduling.unwrap_or_else(|| self.prices_vllm())
    }

    /// The policy's effective waiting-queue bound.
    pub fn effective_max_waiting(&self) -> Option<u32> {
        match self.scheduler.max_waiting {
            Some(n) => Some(n),
            None if self.scheduler.policy.info().o1pro_admission => Some(self.scheduler.max_num_seqs.saturating_mul(4)),
            None => None,
        }
    }

    /// `[scheduler.kv_offload]`: one form, sizes and rates in range, on a policy whose
    /// prefix cache the tiers extend (vLLM's scheduler, co-located).
    fn validate_offload(&self, o: &KvOffload) -> Result<()> {
        let s = &self.scheduler;
        const P: &str = "scheduler.kv_offload";
        if !s.policy.info().vllm_scheduler || s.policy.disaggregated() {
            let ok: Vec<&str> =
                Policy::ALL.iter().filter(|p| p.info().vllm_scheduler && !p.disaggregated()).map(|p| p.name()).collect();
            return Err(SimError::config(
                P,
                format!("offload tiers extend vLLM's prefix cache: they apply to {} (the policy is {})", ok.join(", "), s.policy),
            ));
        }
        if !self.deployment.pools.is_empty() {
            return Err(SimError::config(P, "offload tiers with deployment.pools are not modelled yet: one pool (replicas of one GPU type)"));
        }
        if !s.prefix_caching() {
            return Err(SimError::config(P, "offload tiers keep prefix-cached blocks: set scheduler.enable_prefix_caching = true (or remove it)"));
        }
        let max_gib = 1e6;
        match (o.cpu_gib, o.tiers.is_empty()) {
            (Some(_), false) => {
                return Err(SimError::config(format!("{P}.tiers"), "give either cpu_gib (one host-DRAM tier) or tiers, not both"))
            }
            (None, true) => return Err(SimError::config(P, "names no tier: set cpu_gib = 64 (GiB of host DRAM per replica) or list tiers")),
            (Some(g), true) => {
                check::positive(&format!("{P}.cpu_gib"), g)?;
                if g > max_gib {
                    return Err(SimError::config(format!("{P}.cpu_gib"), format!("must be at most {max_gib} GiB (got {g})")));
                }
            }
            (None, false) => {}
        }
        if o.tiers.len() > 4 {
            return Err(SimError::config(format!("{P}.tiers"), format!("at most 4 tiers (got {})", o.tiers.len())));
        }
        for (i, t) in o.tiers.iter().enumerate() {
            let at = |f: &str| format!("{P}.tiers[{i}].{f}");
            check::positive(&at("capacity_gib"), t.capacity_gib)?;
            if t.capacity_gib > max_gib {
                return Err(SimError::config(at("capacity_gib"), format!("must be at most {max_gib} GiB (got {})", t.capacity_gib)));
            }
            if let Some(b) = t.bandwidth_gbps {
                check::positive(&at("bandwidth_gbps"), b)?;
                if b > 1e5 {
                    return Err(SimError::config(at("bandwidth_gbps"), format!("must be at most 1e5 GB/s (got {b})")));
                }
            }
            if let Some(l) = t.latency_us {
                check::non_negative(&at("latency_us"), l)?;
                if l > 1e9 {
                    return Err(SimError::config(at("latency_us"), format!("must be at most 1e9 µs (got {l})")));
                }
            }
        }
        Ok(())
    }

    /// `[scheduler.speculative]`: its own rules ([`Speculative::plan`]), on vLLM's scheduler,
    /// without pipeline stages (vLLM runs speculative decoding with PP = 1).
    fn validate_speculative(&self, sp: &Speculative) -> Result<()> {
        let s = &self.scheduler;
        const P: &str = "scheduler.speculative";
        if !s.policy.info().vllm_scheduler {
            let ok: Vec<&str> = Policy::ALL.iter().filter(|p| p.info().vllm_scheduler).map(|p| p.name()).collect();
            return Err(SimError::config(
                P,
                format!("drafts are verified by vLLM's scheduler: it applies to {} (the policy is {})", ok.join(", "), s.policy),
            ));
        }
        if self.deployment.pool_views(s.policy.disaggregated()).iter().any(|v| v.pp > 1) {
            return Err(SimError::config(P, "not with pipeline stages (vLLM runs speculative decoding with pp = 1)"));
        }
        if s.inject_bug.is_some() {
            return Err(SimError::config(P, "the model checker explores one-token decodes: remove speculative or inject_bug"));
        }
        sp.plan().map(|_| ())
    }

    /// Multi-LoRA: `scheduler.max_loras` / `max_cpu_loras` only with `workload.lora`, on
    /// vLLM's scheduler; `1 ≤ max_loras ≤ max_cpu_loras`.
    fn validate_lora(&self) -> Result<()> {
        let s = &self.scheduler;
        if self.workload.lora.is_none() {
            for (name, v) in [("max_loras", s.max_loras), ("max_cpu_loras", s.max_cpu_loras)] {
                if v.is_some() {
                    return Err(SimError::config(format!("scheduler.{name}"), "sizes the LoRA adapters' slots: add workload.lora (adapters, rank)"));
                }
            }
            return Ok(());
        }
        if !s.policy.info().vllm_scheduler {
            let ok: Vec<&str> = Policy::ALL.iter().filter(|p| p.info().vllm_scheduler).map(|p| p.name()).collect();
            return Err(SimError::config(
                "workload.lora",
                format!("adapter slots are vLLM's scheduler's rule: LoRA applies to {} (the policy is {})", ok.join(", "), s.policy),
            ));
        }
        let max = s.effective_max_loras();
        check::in_range("scheduler.max_loras", max, 1, 1024)?;
        if let Some(c) = s.max_cpu_loras {
            check::in_range("scheduler.max_cpu_loras", c, 1, 1 << 20)?;
            if c < max {
                return Err(SimError::config("scheduler.max_cpu_loras", format!("must be at least max_loras ({max}) (got {c})")));
            }
        }
        Ok(())
    }

    /// The router's own settings: scorers and KV-event delay only where they apply. (With
    /// prefix caching off a prefix-aware router finds no prefix anywhere and routes by its
    /// load and KV-usage scorers: `compare` runs every policy, and some have no cache.)
    fn validate_router(&self) -> Result<()> {
        let d = &self.deployment;
        let prefix = d.router.prefix_aware();
        if let Some(w) = d.router_scorers {
            if !prefix {
                return Err(SimError::config(
                    "deployment.router_scorers",
                    format!("weighs the prefix-aware routers' scores (precise_prefix, approx_prefix); the router is {}", d.router),
                ));
            }
            for (name, x) in [("prefix", w.prefix), ("load", w.load), ("kv_usage", w.kv_usage)] {
                let path = format!("deployment.router_scorers.{name}");
                check::non_negative(&path, x)?;
                if x > 1e6 {
                    return Err(SimError::config(&path, format!("a weight of at most 1e6 (got {x})")));
                }
            }
            if w.prefix + w.load + w.kv_usage == 0.0 {
                return Err(SimError::config("deployment.router_scorers", "every weight is 0: give at least one scorer a weight"));
            }
        }
        check::non_negative("deployment.kv_event_delay_ms", d.kv_event_delay_ms)?;
        if d.kv_event_delay_ms > 0.0 && d.router != Router::PrecisePrefix {
            return Err(SimError::config(
                "deployment.kv_event_delay_ms",
                format!("delays the KV events precise_prefix reads; the router is {}", d.router),
            ));
        }
        if d.kv_event_delay_ms > 1e9 {
            return Err(SimError::config("deployment.kv_event_delay_ms", format!("must be at most 1e9 ms (got {})", d.kv_event_delay_ms)));
        }
        Ok(())
    }

    /// Check the rules of the sections this module owns (model/gpu/workload/cost model are
    /// checked by their own modules when the scenario is built).
    pub fn validate_local(&self) -> Result<()> {
        let d = &self.deployment;
        check::in_range("deployment.tp", d.tp, 1, 64)?;
        check::in_range("deployment.pp", d.pp, 1, 64)?;
        check::in_range("deployment.replicas", d.replicas, 1, 100_000)?;
        check::in_range("deployment.dp", d.dp, 1, 1024)?;
        check_ep("deployment.ep", d.ep, d.dp, d.tp)?;
        d.validate_pools(self.scheduler.policy.disaggregated())?;
        if let Some(x) = d.moe.expert_load_cv {
            check::finite("deployment.moe.expert_load_cv", x)?;
            if !(0.0..=10.0).contains(&x) {
                return Err(SimError::config(
                    "deployment.moe.expert_load_cv",
                    format!("the coefficient of variation of tokens per expert: from 0 (uniform) to 10 (got {x})"),
                ));
            }
        }
        if d.moe.redundant_experts > 0 && d.pool_views(false).iter().all(|p| p.ep == 1) {
            return Err(SimError::config(
                "deployment.moe.redundant_experts",
                "redundant experts balance expert-parallel ranks: set deployment.ep (dp × tp) too",
            ));
        }
        check::non_negative("deployment.dispatch_timeout_ms", d.dispatch_timeout_ms)?;
        self.validate_router()?;
        if let Some(sc) = &self.scaling {
            if !d.pools.is_empty() {
                return Err(SimError::config("scaling", "autoscaling a deployment of pools is not modelled: one pool (no deployment.pools)"));
            }
            sc.validate(d.replicas)?;
            if self.topology.is_some() || self.scheduler.policy.info().needs_topology {
                return Err(SimError::config(
                    "scaling",
                    "autoscaling runs without a topology (replicas joining a fabric are not modelled): remove \
                     `topology` or `scaling`",
                ));
            }
        }
        if d.dispatch_timeout_ms > 1e12 {
            return Err(SimError::config(
                "deployment.dispatch_timeout_ms",
                format!("must be at most 1e12 ms, about 31.7 years (got {})", d.dispatch_timeout_ms),
            ));
        }

        let s = &self.scheduler;
        if !(1..=1024).contains(&s.block_size) || !s.block_size.is_power_of_two() {
            return Err(SimError::config(
                "scheduler.block_size",
                format!("must be a power of two in 1..=1024 (got {})", s.block_size),
            ));
        }
        check::in_range("scheduler.max_num_seqs", s.max_num_seqs, 1, 1 << 20)?;
        check::in_range("scheduler.max_num_batched_tokens", s.max_num_batched_tokens, 1, 1 << 24)?;
        check::in_range("scheduler.chunk_size", s.chunk_size, 1, 1 << 24)?;
        check::in_range("scheduler.max_tokens_per_request", s.max_tokens_per_request, 1, 1 << 24)?;
        check::finite("scheduler.gpu_memory_utilization", s.gpu_memory_utilization)?;
        if !(s.gpu_memory_utilization > 0.0 && s.gpu_memory_utilization <= 1.0) {
            return Err(SimError::config(
                "scheduler.gpu_memory_utilization",
                format!("must be in (0, 1] (got {})", s.gpu_memory_utilization),
            ));
        }
        if let Some(n) = s.num_gpu_blocks {
            check::in_range("scheduler.num_gpu_blocks", n, 1, 1 << 32)?;
        }
        if let Some(n) = s.max_model_len {
            check::in_range("scheduler.max_model_len", n, 2, 1 << 24)?;
        }
        if let Some(n) = s.max_waiting {
            check::in_range("scheduler.max_waiting", n, 1, 1 << 30)?;
        }
        if let Some(b) = &s.inject_bug {
            if !BUGS.contains(&b.as_str()) {
                return Err(check::unknown_name("scheduler.inject_bug", "bug", b, BUGS));
            }
        }
        if s.enable_prefix_caching == Some(true) && !s.policy.info().prefix_cache {
            let why = if s.policy == Policy::Trtllm {
                "o1sim does not model TensorRT-LLM's KV block reuse (trtllm-bench runs with enable_block_reuse = False)"
            } else {
                "reserves contiguous KV per request and has no prefix cache"
            };
            return Err(SimError::config(
                "scheduler.enable_prefix_caching",
                format!("{} {why} (remove the field or set it to false)", s.policy),
            ));
        }
        s.validate_trtllm()?;
        if let Some(sp) = &s.scheduling_policy {
            if !SCHEDULING_POLICIES.contains(&sp.as_str()) {
                return Err(check::unknown_name("scheduler.scheduling_policy", "scheduling policy", sp, SCHEDULING_POLICIES));
            }
            if !s.policy.info().vllm_scheduler {
                let vllm: Vec<&str> = Policy::ALL.iter().filter(|p| p.info().vllm_scheduler).map(|p| p.name()).collect();
                return Err(SimError::config(
                    "scheduler.scheduling_policy",
                    format!(
                        "only applies to the policies on vLLM's scheduler ({}); {} orders its queue itself",
                        vllm.join(", "),
                        s.policy
                    ),
                ));
            }
        }
        if let Some(o) = &s.kv_offload {
            self.validate_offload(o)?;
        }
        if let Some(sp) = &s.speculative {
            self.validate_speculative(sp)?;
        }
        self.validate_lora()?;
        self.limits.validate()?;
        if let Some(slo) = &self.slo {
            for (name, v) in [("ttft_ms", slo.ttft_ms), ("tpot_ms", slo.tpot_ms), ("e2e_ms", slo.e2e_ms)] {
                if let Some(v) = v {
                    check::positive(&format!("slo.{name}"), v)?;
                }
            }
        }
        self.cost_model.validate().map_err(|e| e.under("cost_model"))?;
        self.frontend.validate().map_err(|e| e.under("frontend"))?;
        if self.topology.is_none() {
            if !self.events.is_empty() {
                return Err(SimError::config("events", "topology events need a `topology` section"));
            }
            if d.placement.is_some() {
                return Err(SimError::config("deployment.placement", "needs a `topology` section"));
            }
            if s.policy.info().needs_topology {
                return Err(SimError::config("scheduler.policy", format!("{} moves KV over the topology: add a `topology` section", s.policy)));
            }
        }
        let disagg = s.policy.disaggregated();
        match (disagg && d.pools.is_empty(), d.prefill_replicas) {
            (true, Some(p)) => check::in_range("deployment.prefill_replicas", p, 1, d.replicas.saturating_sub(1).max(1))?,
            (true, None) => {
                return Err(SimError::config("deployment.prefill_replicas", format!("{} needs prefill_replicas (the rest decode)", s.policy)))
            }
            (false, Some(_)) => {
                let split: Vec<String> = Policy::ALL.iter().filter(|p| p.disaggregated()).map(|p| format!("\"{p}\"")).collect();
                return Err(SimError::config(
                    "deployment.prefill_replicas",
                    format!("only applies to scheduler.policy = {}", split.join(" or ")),
                ));
            }
            (false, None) => {}
        }
        if disagg && d.pools.is_empty() && d.replicas < 2 {
            return Err(SimError::config("deployment.replicas", format!("{} needs at least 2 replicas (prefill and decode)", s.policy)));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: &str = r#"{"model": "llama-3-8b", "gpu": "h200"}"#;

    fn with(patch: &str) -> String {
        let mut base: serde_json::Value = serde_json::from_str(MIN).unwrap();
        let p: serde_json::Value = serde_json::from_str(patch).unwrap();
        for (k, v) in p.as_object().unwrap() {
            base[k] = v.clone();
        }
        base.to_string()
    }

    fn err(text: &str) -> SimError {
        let s = parse_json(text).and_then(|s| s.validate_local().map(|_| s));
        s.expect_err("should fail")
    }

    #[test]
    fn a_byte_order_mark_is_not_content() {
        let toml = "\u{feff}model = \"llama-3-8b\"\ngpu = \"h200\"\n";
        assert_eq!(parse_toml(toml).unwrap(), parse_toml(&toml[3..]).unwrap());
        let json = format!("\u{feff}{MIN}");
        assert_eq!(parse_json(&json).unwrap(), parse_json(MIN).unwrap());
    }

    #[test]
    fn block_size_rule_names_field() {
        let e = err(&with(r#"{"scheduler": {"block_size": 24}}"#));
        assert_eq!(e.to_string(), "scheduler.block_size: must be a power of two in 1..=1024 (got 24)");
    }

    #[test]
    fn unknown_field_named_with_path() {
        let e = err(&with(r#"{"scheduler": {"blok_size": 16}}"#));
        assert_eq!(e.path(), Some("scheduler.blok_size"));
    }

    #[test]
    fn unknown_policy_suggests_closest() {
        let e = err(&with(r#"{"scheduler": {"policy": "vlm"}}"#));
        assert_eq!(e.path(), Some("scheduler.policy"));
        assert!(e.to_string().contains("did you mean vllm"), "{e}");
    }

    #[test]
    fn unknown_bug_suggests_closest() {
        let e = err(&with(r#"{"scheduler": {"inject_bug": "leak_on_preemt"}}"#));
        assert_eq!(e.path(), Some("scheduler.inject_bug"));
        assert!(e.to_string().contains("did you mean leak_on_preempt"), "{e}");
    }

    #[test]
    fn toml_nan_is_rejected_with_path() {
        let e = parse_toml("model='llama-3-8b'\ngpu='h200'\n[scheduler]\ngpu_memory_utilization=nan\n").unwrap_err();
        assert_eq!(e.path(), Some("scheduler.gpu_memory_utilization"));
    }

    #[test]
    fn type_errors_read_in_plain_words() {
        let e = err(&with(r#"{"workload": {"num_requests": 1000.0}}"#));
        assert_eq!(e.to_string(), "workload.num_requests: expected a whole number, got 1000.0");
        let e = err(&with(r#"{"deployment": {"tp": -1}}"#));
        assert_eq!(e.to_string(), "deployment.tp: expected a whole number from 0 to 4294967295, got -1");
        let e = err(&with(r#"{"deployment": {"tp": "four"}}"#));
        assert_eq!(e.to_string(), "deployment.tp: expected a whole number, got the text \"four\"");
        let e = err(&with(r#"{"scheduler": {"gpu_memory_utilization": [1]}}"#));
        assert_eq!(e.to_string(), "scheduler.gpu_memory_utilization: expected a number, got a list");
        let e = err(&with(r#"{"deployment": {"router": true}}"#));
        assert_eq!(e.to_string(), "deployment.router: expected a string, got true");
    }

    #[test]
    fn unknown_fields_suggest_the_closest() {
        let e = err(&with(r#"{"scheduler": {"blok_size": 16}}"#));
        assert!(e.to_string().starts_with("scheduler.blok_size: unknown field 'blok_size'; did you mean block_size"), "{e}");
        let e = err(&with(r#"{"schedulr": {}}"#));
        assert!(e.to_string().contains("did you mean scheduler"), "{e}");
        let e = err(&with(r#"{"limits": {"max_memory": 1}}"#));
        assert!(e.to_string().contains("did you mean max_memory_gib"), "{e}");
    }

    #[test]
    fn wrong_type_names_field() {
        let e = err(&with(r#"{"deployment": {"tp": "four"}}"#));
        assert_eq!(e.path(), Some("deployment.tp"));
    }

    #[test]
    fn trtllm_settings_apply_to_its_policy_only_and_name_their_field() {
        for (field, value) in [
            ("max_batch_size", "64"),
            ("max_num_tokens", "4096"),
            ("capacity_scheduler_policy", "\"max_utilization\""),
            ("kv_cache_free_gpu_mem_fraction", "0.95"),
        ] {
            let e = err(&with(&format!(r#"{{"scheduler": {{"policy": "vllm", "{field}": {value}}}}}"#)));
            assert_eq!(e.path(), Some(format!("scheduler.{field}").as_str()), "{e}");
            assert!(e.to_string().contains("policy = \"trtllm\""), "{e}");
            let ok = format!(r#"{{"scheduler": {{"policy": "trtllm", "{field}": {value}}}}}"#);
            parse_json(&with(&ok)).unwrap().validate_local().unwrap();
        }
        let e = err(&with(r#"{"scheduler": {"policy": "trtllm", "capacity_scheduler_policy": "max_util"}}"#));
        assert_eq!(e.path(), Some("scheduler.capacity_scheduler_policy"));
        assert!(e.to_string().contains("max_utilization"), "{e}");
        let e = err(&with(r#"{"scheduler": {"policy": "trtllm", "kv_cache_free_gpu_mem_fraction": 1.5}}"#));
        assert_eq!(e.path(), Some("scheduler.kv_cache_free_gpu_mem_fraction"));
        let e = err(&with(r#"{"scheduler": {"policy": "trtllm", "max_batch_size": 0}}"#));
        assert_eq!(e.path(), Some("scheduler.max_batch_size"));
        let e = err(&with(r#"{"scheduler": {"policy": "trtllm", "enable_prefix_caching": true}}"#));
        assert_eq!(e.path(), Some("scheduler.enable_prefix_caching"));
        assert!(e.to_string().contains("block reuse"), "{e}");
        let e = err(&with(r#"{"cost_model": {"engine": "trtllm", "fusion": "fine"}}"#));
        assert_eq!(e.path(), Some("cost_model.fusion"));
        assert!(e.to_string().contains("TensorRT-LLM"), "{e}");
        let e = err(&with(r#"{"cost_model": {"engine": "trtlm"}}"#));
        assert!(e.to_string().contains("did you mean trtllm"), "{e}");
    }

    #[test]
    fn zero_blocks_and_bad_utilization() {
        assert_eq!(err(&with(r#"{"scheduler": {"num_gpu_blocks": 0}}"#)).path(), Some("scheduler.num_gpu_blocks"));
        assert_eq!(
            err(&with(r#"{"scheduler": {"gpu_memory_utilization": 1.5}}"#)).path(),
            Some("scheduler.gpu_memory_utilization")
        );
    }
}
