//! Execution-time model: how long one scheduler step of one replica takes.
//!
//! Two models behind [`CostModelSpec`]:
//! * `calibrated` (default) and `roofline`: the reference engine's operators composed into a
//!   step ([`step`]) — per layer the qkv, o, gate_up and down GEMMs at M = tokens in the step,
//!   prefill attention per request by FLOPs, decode attention by KV bytes read, the
//!   elementwise ops, TP all-reduces; then lm_head on the sampled rows; launch cost eager
//!   (a CPU/GPU pipeline) or as one CUDA-graph replay. `calibrated` takes each operator from
//!   the GPU's measured profile ([`crate::calib`]) where there is one and from a roofline with
//!   table-fitted efficiency otherwise; `roofline` ignores the tables (datasheet peaks).
//!   Every number carries its provenance ([`Source`]).
//! * `linear`: an affine function of the batch's token counts (for fits and tests).
//!
//! By file: the step model's parameters and their names (`spec.rs`), the `cost_model` entry
//! and its parser (`cost_spec.rs`), the batch a step prices (`shape.rs`), the composed step
//! (`step.rs`, with `ops.rs` the operators it prices, [`seed`] the seed's fusion and remap
//! rules, `layer_mix.rs` the layer kinds); this file holds [`StepCostModel`], which picks the
//! linear model or the composed step and turns seconds into integer nanoseconds.

pub mod draft;
pub mod ep;
pub mod lora;
mod cost_spec;
mod layer_mix;
mod ops;
pub mod predict;
pub mod seed;
mod shape;
mod spec;
mod step;
pub mod trtllm;
pub mod warmup;

use crate::num::round_u64;
use crate::catalog::{Gpu, Model};
use crate::error::{Result, SimError};
use crate::memory::check_parallelism;

pub use crate::calib::Source;
pub use cost_spec::CostModelSpec;
pub use seed::Fusion;
pub use shape::{BatchShape, PrefillItem};
pub use spec::{
    parse_dtype, parse_engine, parse_fusion, Dtype, Engine, StepSpec, DEFAULT_COMM_LATENCY_US, DEFAULT_KERNEL_FLOOR_US,
    DEFAULT_LAUNCH_US, DTYPE_NAMES, ENGINE_INFO, ENGINE_NAMES, KV_DTYPE_NAMES,
};
pub use ep::AllToAll;
pub use step::{Anatomy, EpModel, KernelColumns, OpCost, StepMemo};

/// Names of the linear components, in [`StepCostModel::breakdown`] order.
const LINEAR_NAMES: [&str; 4] = ["base", "prefill_tokens", "decode_seqs", "context_tokens"];

/// A precomputed execution-time model for one (model, GPU, tp, pp) replica.
#[derive(Debug, Clone)]
pub struct StepCostModel {
    inner: Inner,
    /// Speculative decoding's drafter, run after each step's forward pass ([`draft`]).
    draft: Option<Box<Drafter>>,
    /// Multi-LoRA's kernels in every layer ([`lora`]).
    lora: Option<Box<LoraPart>>,
}

/// The LoRA kernels of a replica: the adapters' shapes on one GPU and the rates they run at.
#[derive(Debug, Clone)]
struct LoraPart {
    shapes: lora::LoraShapes,
    stream_bw: f64,
    flops: f64,
    floor: f64,
    /// DP ranks: each runs its share of the step's rows.
    dp: f64,
}

#[derive(Debug, Clone)]
enum Inner {
    Linear { base_ms: f64, prefill_ms: f64, decode_ms: f64, context_ms: f64 },
    Step(Box<step::StepModel>),
}

impl StepCostModel {
    /// Whether `self` and `other` share the values their step models compute on first use
    /// (clones of one model that neither changed since).
    #[cfg(test)]
    pub(crate) fn shares_first_use_values(&self, other: &StepCostModel) -> bool {
        match (&self.inner, &other.inner) {
            (Inner::Step(a), Inner::Step(b)) => a.shares_cells(b),
            _ => false,
        }
    }

    /// Precompute the model for one replica of `model` on `gpu` with tensor parallelism `tp`
    /// and pipeline parallelism `pp`. Errors: spec problems under `cost_model` (e.g.
    /// `cost_model.base_ms`), invalid model/GPU under `model` / `gpu`, bad
    /// `deployment.tp` / `deployment.pp`, FP8 on a GPU without FP8 tensor cores
    /// (`cost_model.dtype`).
    pub fn new(spec: &CostModelSpec, model: &Model, gpu: &Gpu, tp: u32, pp: u32) -> Result<Self> {
        Self::build(spec, model, gpu, tp, pp, false)
    }

    /// As [`StepCostModel::new`], but TP AllReduce and PP transfer times are left to the
    /// caller ([`StepCostModel::step_ns_plus`] with a topology's collective costs).
    pub fn new_external_comm(spec: &CostModelSpec, model: &Model, gpu: &Gpu, tp: u32, pp: u32) -> Result<Self> {
        Self::build(spec, model, gpu, tp, pp, true)
    }

    fn build(spec: &CostModelSpec, model: &Model, gpu: &Gpu, tp: u32, pp: u32, external_comm: bool) -> Result<Self> {
        spec.validate().map_err(|e| e.under("cost_model"))?;
        model.validate().map_err(|e| e.under("model"))?;
        gpu.validate().map_err(|e| e.under("gpu"))?;
        check_parallelism(model, tp, pp)?;
        let inner = match spec {
            CostModelSpec::Linear { base_ms, per_prefill_token_ms, per_decode_seq_ms, per_context_token_ms } => {
                Inner::Linear {
                    base_ms: *base_ms,
                    prefill_ms: *per_prefill_token_ms,
                    decode_ms: *per_decode_seq_ms,
                    context_ms: *per_context_token_ms,
                }
            }
            CostModelSpec::Calibrated(s) | CostModelSpec::Roofline(s) => {
                if gpu.matrix_unit == crate::catalog::MatrixUnit::Mxu {
                    // A TPU runs a step as one compiled XLA program: CUDA graphs are a GPU option.
                    let why = format!("a GPU-only option: {} runs each step as one compiled XLA program", gpu.name);
                    if s.cuda_graph_max_tokens.is_some() {
                        return Err(SimError::config("cuda_graph_max_tokens", why));
                    }
                    if !s.cuda_graphs {
                        return Err(SimError::config("cuda_graphs", why));
                    }
                }
                if s.dtype == Dtype::Fp8 && gpu.fp8_tflops <= 0.0 {
                    return Err(SimError::config(
                        "cost_model.dtype",
                        format!("fp8 needs FP8 tensor cores; {} has none (fp8_tflops = 0)", gpu.name),
                    ));
                }
                let tables = matches!(spec, CostModelSpec::Calibrated(_));
                Inner::Step(Box::new(step::StepModel::new(s, tables, model, gpu, tp, pp, external_comm)))
            }
        };
        Ok(StepCostModel { inner, draft: None, lora: None })
    }

    /// Data-parallel attention ranks and expert parallelism ([`ep`]): the step of one rank
    /// carrying `1/dp` of the batch, experts whole on each GPU with every MoE layer's
    /// dispatch and combine when `ep > 1`. Errors name the field: a linear cost model has no
    /// layers to split (`deployment.dp` / `deployment.ep`), expert parallelism needs experts
    /// (`deployment.ep`), and pipeline stages under DP/EP are not modelled (`deployment.pp`).
    pub fn with_parallel(mut self, spec: &ep::EpSpec, model: &Model, gpu: &Gpu, pp: u32) -> Result<Self> {
        if spec.dp <= 1 && spec.ep <= 1 {
            return Ok(self);
        }
        let field = if spec.ep > 1 { "deployment.ep" } else { "deployment.dp" };
        if spec.ep > 1 && model.experts <= 1 {
            return Err(SimError::config("deployment.ep", format!("{} has no experts to spread (a dense model)", model.name)));
        }
        if pp > 1 {
            return Err(SimError::config(
                "deployment.pp",
                "pipeline stages with data-parallel attention or expert parallelism are not modelled: use pp = 1",
            ));
        }
        let Inner::Step(s) = &mut self.inner else {
            return Err(SimError::config(field, "needs a layer-level cost model (roofline or calibrated), not the linear one"));
        };
        // Without EP a MoE model's experts are TP-sharded over the whole dp × tp group
        // (vLLM's default for DP with MoE), gathered and reduce-scattered around the experts.
        let flat = spec.ep <= 1 && model.experts > 1;
        let group = if flat { spec.dp.saturating_mul(spec.tp.max(1)) } else { spec.ep };
        let ep = (spec.ep > 1 || flat).then(|| step::EpModel {
            ep: f64::from(group),
            tp: f64::from(spec.tp.max(1)),
            local_slots: if flat { f64::from(model.experts) } else { f64::from(model.experts + spec.redundant_experts) / f64::from(spec.ep) },
            balance: ep::ExpertBalance::new(model.experts, if flat { 1 } else { spec.ep }, spec.redundant_experts, spec.expert_load_cv),
            all_to_all: if flat { ep::AllToAll::Allgather } else { spec.all_to_all },
            two_batch_overlap: spec.two_batch_overlap,
            costs: {
                use crate::topo::collective::{default_a2a, A2aMode};
                ep::A2aCosts {
                    high_throughput: default_a2a(gpu, group, A2aMode::HighThroughput),
                    low_latency: default_a2a(gpu, group, A2aMode::LowLatency),
                    allgather: default_a2a(gpu, group, A2aMode::Allgather),
                }
            },
            flat,
        });
        let expert_width = if flat { model.intermediate / group.max(1) } else { model.intermediate };
        s.set_parallel(expert_width, spec.dp, ep);
        Ok(self)
    }

    /// Use a paged KV cache of `block_size` tokens: decode attention pays the block-table
    /// remap cost ([`seed::remap_s`]). The reference engine's contiguous cache does not
    /// (nor Orca's, which reserves one contiguous region per request: it has no block table).
    pub fn with_block_size(mut self, block_size: u32) -> Self {
        if let Inner::Step(s) = &mut self.inner {
            s.set_block_size(block_size);
        }
        self
    }

    /// The scheduler's `max_num_seqs` (TensorRT-LLM's `max_batch_size`), which sets vLLM's
    /// CUDA-graph capture bound (`min(2 · max_num_seqs, 512)` tokens), or TensorRT-LLM's
    /// largest captured batch ([`trtllm::largest_captured`]), unless the spec gives
    /// `cuda_graph_max_tokens`.
    pub fn with_max_num_seqs(mut self, max_num_seqs: u32) -> Self {
        if let Inner::Step(s) = &mut self.inner {
            s.set_max_num_seqs(max_num_seqs);
        }
        self
    }

    /// Use a paged KV cache where each request has its own block size (o1pro: 16, 32 or 64
    /// tokens by length): decode attention pays the remap cost of the blocks the batch's
    /// requests actually hold, read from [`BatchShape::decode_blocks_1024`].
    pub fn with_per_request_blocks(mut self) -> Self {
        if let Inner::Step(s) = &mut self.inner {
            s.set_per_request_blocks();
        }
        self
    }

    /// Run `drafter` after every step's forward pass (speculative decoding): its passes are
    /// added to each step's price, its line to the breakdown and its kernels' span to the
    /// anatomy.
    pub fn with_drafter(mut self, drafter: Drafter) -> Self {
        self.draft = Some(Box::new(drafter));
        self
    }

    /// Price the LoRA kernels of adapters shaped `shapes` in every step that uses any
    /// ([`BatchShape::lora_adapters`]). A linear cost model has no layers to add them to: its
    /// coefficients are the whole step (the adapters' slots and loads still apply).
    pub fn with_lora(mut self, shapes: lora::LoraShapes) -> Self {
        if let Inner::Step(s) = &self.inner {
            let (stream_bw, flops, floor, dp) = s.lora_rates();
            self.lora = Some(Box::new(LoraPart { shapes, stream_bw, flops, floor, dp }));
        }
        self
    }

    /// Seconds the LoRA kernels add to a step of shape `b` (0 without adapters in it).
    #[inline]
    fn lora_s(&self, b: &BatchShape) -> f64 {
        match &self.lora {
            Some(l) if b.lora_adapters > 0 => {
                l.shapes.step_s(b.tokens() as f64 / l.dp.max(1.0), b.lora_adapters as f64, l.stream_bw, l.flops, l.floor)
            }
            _ => 0.0,
        }
    }

    /// Seconds the drafter and the LoRA kernels add to a step of shape `b` (0 without
    /// speculation or adapters).
    #[inline]
    fn extra_s(&self, b: &BatchShape) -> f64 {
        self.draft.as_ref().map_or(0.0, |d| d.step_s(b)) + self.lora_s(b)
    }

    /// One forward pass of this model over `b`, s, as a replica runs it alone (DP/EP ranks
    /// and pipelines included; no drafter): what a drafter's network costs per pass.
    pub(crate) fn forward_s(&self, b: &BatchShape) -> f64 {
        if b.is_empty() {
            return 0.0;
        }
        match &self.inner {
            Inner::Linear { .. } => self.linear_ms(b).iter().sum::<f64>() * 1e-3,
            Inner::Step(s) if s.dp_ranks() > 0 => s.ep_step_s(b, None),
            Inner::Step(s) if s.stages() > 1 => s.pipeline_s(b, s.micro_batches(b), None),
            Inner::Step(s) => s.step_s(b),
        }
    }

    /// Duration of the step in integer nanoseconds (computed in f64, rounded once). 0 for an
    /// empty batch, ≥ 1 ns otherwise. No allocation for steps up to 65,536 tokens;
    /// O(`prefill.len()`) work.
    #[inline]
    pub fn step_ns(&self, b: &BatchShape) -> u64 {
        self.priced_ns(b, None)
    }

    /// [`StepCostModel::step_ns`] with what mixed steps repeat (a prefill's attention, the
    /// parts other than attention) taken from `memo`, the caller's for this model: the same
    /// value to the bit.
    #[inline]
    pub fn step_ns_memo(&self, b: &BatchShape, memo: &mut StepMemo) -> u64 {
        self.priced_ns(b, Some(memo))
    }

    /// [`StepCostModel::step_ns`], through `memo` when given.
    #[inline]
    fn priced_ns(&self, b: &BatchShape, memo: Option<&mut StepMemo>) -> u64 {
        if b.is_empty() {
            return 0;
        }
        let seconds = match &self.inner {
            Inner::Linear { .. } => self.linear_ms(b).iter().sum::<f64>() * 1e-3,
            Inner::Step(s) if s.stages() > 1 => s.pipeline_s(b, s.micro_batches(b), None),
            Inner::Step(s) => s.step_s_memo(b, memo),
        } + self.extra_s(b);
        round_u64(seconds * 1e9).max(1)
    }

    /// [`StepCostModel::step_ns`] plus `extra_s` seconds (communication priced on a
    /// topology), rounded once.
    pub fn step_ns_plus(&self, b: &BatchShape, extra_s: f64) -> u64 {
        if b.is_empty() {
            return 0;
        }
        let seconds = match &self.inner {
            Inner::Linear { .. } => self.linear_ms(b).iter().sum::<f64>() * 1e-3,
            Inner::Step(s) => s.step_s(b),
        } + extra_s
            + self.extra_s(b);
        round_u64(seconds * 1e9).max(1)
    }

    /// The first-use compilation stalls of this replica's steps ([`warmup`]), given the
    /// scheduler's token budget and seats of one rank; `None` when nothing can stall.
    pub fn warmup_plan(&self, budget: u32, max_num_seqs: u32) -> Option<warmup::WarmupPlan> {
        match &self.inner {
            Inner::Step(s) => s.warmup_plan(budget, max_num_seqs),
            Inner::Linear { .. } => None,
        }
    }

    /// Data-parallel ranks of a DP/EP replica; 0 when it has neither (and for a linear model).
    pub fn dp(&self) -> u32 {
        match &self.inner {
            Inner::Step(s) => s.dp_ranks(),
            Inner::Linear { .. } => 0,
        }
    }

    /// A DP/EP step on a topology: one rank's share plus `extra_s` (its TP all-reduces on
    /// the routes), each MoE layer's exchange priced on `a2a` (the replica's group on the
    /// topology as the links are now).
    pub fn step_ns_ep(&self, b: &BatchShape, extra_s: f64, a2a: Option<&ep::A2aCosts>) -> u64 {
        if b.is_empty() {
            return 0;
        }
        let seconds = match &self.inner {
            Inner::Linear { .. } => self.linear_ms(b).iter().sum::<f64>() * 1e-3,
            Inner::Step(s) => s.ep_step_s(b, a2a),
        } + extra_s
            + self.extra_s(b);
        round_u64(seconds * 1e9).max(1)
    }

    /// Pipeline stages of a replica priced by the step model (1 for a linear model, which
    /// has no stages).
    pub fn stages(&self) -> u32 {
        match &self.inner {
            Inner::Linear { .. } => 1,
            Inner::Step(s) => s.stages(),
        }
    }

    /// Micro-batches a pipelined step (`stages() > 1`) of this batch is split into: one per
    /// stage, at most one per sequence ([`step::StepModel::micro_batches`]).
    pub fn micro_batches(&self, b: &BatchShape) -> u32 {
        match &self.inner {
            Inner::Linear { .. } => 1,
            Inner::Step(s) => s.micro_batches(b),
        }
    }

    /// A pipelined step (pp > 1) whose communication a topology prices: `allreduce_s` the
    /// TP AllReduces of one micro-batch over all stages, `xfer_s` one micro-batch's routed
    /// transfer across one stage boundary ([`step::StepModel::pipeline_s`]).
    pub fn step_ns_pipeline(&self, b: &BatchShape, mb: u32, allreduce_s: f64, xfer_s: f64) -> u64 {
        if b.is_empty() {
            return 0;
        }
        let seconds = match &self.inner {
            Inner::Linear { .. } => self.linear_ms(b).iter().sum::<f64>() * 1e-3 + allreduce_s * f64::from(mb) + xfer_s,
            Inner::Step(s) => s.pipeline_s(b, mb, Some((allreduce_s, xfer_s))),
        } + self.extra_s(b);
        round_u64(seconds * 1e9).max(1)
    }

    /// The step's duration broken down by operator (summed over layers), with each line's
    /// source, and whether it ran as a CUDA graph. Linear: `base, prefill_tokens,
    /// decode_seqs, context_tokens` (source `model`). The lines sum to the step's exact
    /// time, which `step_ns` matches within 0.2% (it interpolates the dense part on a grid).
    pub fn breakdown(&self, b: &BatchShape) -> (Vec<OpCost>, bool) {
        let (mut ops, graph) = self.breakdown_target(b);
        if let Some(d) = self.draft.as_ref().filter(|_| !b.is_empty()) {
            ops.push(OpCost { op: format!("drafter ({}, k = {})", d.method.name(), d.k), ms: d.step_s(b) * 1e3, source: Source::Model });
        }
        if let Some(l) = self.lora.as_ref().filter(|_| b.lora_adapters > 0) {
            let op = format!("lora (rank {}, {} adapters)", l.shapes.rank(), b.lora_adapters);
            ops.push(OpCost { op, ms: self.lora_s(b) * 1e3, source: Source::Model });
        }
        (ops, graph)
    }

    fn breakdown_target(&self, b: &BatchShape) -> (Vec<OpCost>, bool) {
        match &self.inner {
            Inner::Linear { .. } => {
                let ms = self.linear_ms(b);
                let empty = b.is_empty();
                let ops = LINEAR_NAMES
                    .iter()
                    .zip(ms)
                    .map(|(n, v)| OpCost { op: n.to_string(), ms: if empty { 0.0 } else { v }, source: Source::Model })
                    .collect();
                (ops, false)
            }
            Inner::Step(s) if !b.is_empty() => s.breakdown(b),
            Inner::Step(_) => (Vec::new(), false),
        }
    }

    /// The step's kernels on a timeline ([`Anatomy`]): `comm_s` is the communication a
    /// topology priced for it, `decision_s` the scheduling decision it waited for. A linear
    /// model has no kernels: one `linear_model` row spans its price.
    pub fn anatomy(&self, b: &BatchShape, comm_s: f64, decision_s: f64) -> Anatomy {
        let mut a = self.anatomy_target(b, comm_s, decision_s);
        if let Some(d) = self.draft.as_ref().filter(|_| !b.is_empty()) {
            // The drafter's passes follow the target's forward pass on the compute stream.
            let ms = d.step_s(b) * 1e3;
            let start = a.step_ms * 1e3;
            let name = format!("drafter ({}, {} pass{})", d.method.name(), d.k, if d.k == 1 { "" } else { "es" });
            a.kernels.push_span(name, start, start + ms * 1e3);
            a.step_ms += ms;
        }
        if let Some(l) = self.lora.as_ref().filter(|_| b.lora_adapters > 0) {
            // The LoRA kernels run beside each adapted projection; on the timeline they are
            // one span of their summed time after the layers.
            let ms = self.lora_s(b) * 1e3;
            let start = a.step_ms * 1e3;
            let name = format!("lora kernels (rank {}, {} adapters, {} a layer)", l.shapes.rank(), b.lora_adapters, l.shapes.kernels_per_layer());
            a.kernels.push_span(name, start, start + ms * 1e3);
            a.step_ms += ms;
        }
        a
    }

    fn anatomy_target(&self, b: &BatchShape, comm_s: f64, decision_s: f64) -> Anatomy {
        match &self.inner {
            Inner::Step(s) => s.anatomy(b, comm_s, decision_s),
            Inner::Linear { .. } => {
                let ms = if b.is_empty() { 0.0 } else { self.linear_ms(b).iter().sum::<f64>() } + (comm_s + decision_s) * 1e3;
                let mut k = KernelColumns::default();
                k.push_span("linear_model".into(), 0.0, ms * 1e3);
                Anatomy { step_ms: ms, graph: false, pipelined: false, sms: 0, kernels: k }
            }
        }
    }

    fn linear_ms(&self, b: &BatchShape) -> [f64; 4] {
        match self.inner {
            Inner::Linear { base_ms, prefill_ms, decode_ms, context_ms } => [
                base_ms,
                prefill_ms * b.prefill_tokens as f64,
                decode_ms * b.decode_seqs as f64,
                context_ms * b.context_sum_after as f64,
            ],
            Inner::Step(_) => [0.0; 4],
        }
    }
}

/// Speculative decoding's drafter of one replica ([`draft`]).
#[derive(Debug, Clone)]
pub struct Drafter {
    pub method: draft::SpecMethod,
    pub k: u32,
    net: Option<StepCostModel>,
}

impl Drafter {
    /// The drafter of `method` with `k` drafts for a replica of `target` on `gpu` at `tp`:
    /// its network's step model built from the scenario's cost model (`net` from
    /// [`draft::draft_network`]); `parallel` applies the replica's DP/EP layout to it.
    pub fn new(
        method: draft::SpecMethod,
        k: u32,
        net: Option<&Model>,
        spec: &CostModelSpec,
        gpu: &Gpu,
        tp: u32,
        parallel: impl FnOnce(StepCostModel, &Model) -> Result<StepCostModel>,
    ) -> Result<Drafter> {
        let net = match net {
            None => None,
            Some(m) => Some(parallel(StepCostModel::new(spec, m, gpu, tp, 1)?, m)?),
        };
        Ok(Drafter { method, k, net })
    }

    /// Seconds the drafter adds to a step of shape `b` (after the target's forward pass):
    /// its first pass over the step's tokens and `k − 1` passes of one token per sampling
    /// sequence, or the n-gram proposer's scan.
    pub fn step_s(&self, b: &BatchShape) -> f64 {
        // Sequences that sampled a token this step (each drafts for the next one).
        let seqs = b.sampled.saturating_sub(b.spec_tokens);
        if seqs == 0 {
            return 0.0;
        }
        let Some(net) = &self.net else {
            return draft::NGRAM_NS_PER_TOKEN * 1e-9 * b.context_sum_after as f64;
        };
        // The first pass reads every token the target processed; only each sequence's last
        // position goes through the head.
        let first = BatchShape { sampled: seqs, ..*b };
        let entries = (b.prefill.len() as u64 + b.decode_seqs).max(1);
        let per_seq = b.context_sum_after / entries;
        let next = BatchShape {
            prefill: &[],
            prefill_tokens: 0,
            decode_seqs: seqs,
            decode_context_sum: seqs * (per_seq + 1),
            context_sum_after: seqs * (per_seq + 1),
            sampled: seqs,
            decode_blocks_1024: 0,
            spec_tokens: 0,
            lora_adapters: 0,
        };
        net.forward_s(&first) + f64::from(self.k.saturating_sub(1)) * net.forward_s(&next)
    }
}

#[cfg(test)]
mod arch_tests;
#[cfg(test)]
mod tests;

