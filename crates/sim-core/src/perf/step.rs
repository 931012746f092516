//! Composing operators into one step, and the precomputed form the engine calls.
//!
//! One layer of the reference engine, in launch order (elementwise groups in braces, which
//! fusion may merge): `qkv, {rope, kv_write}, ATTENTION, {transpose}, o, [all-reduce],
//! {residual_add, rms_norm}, gate_up, {silu_mul}, down, [all-reduce], {residual_add,
//! rms_norm}` — the trailing norm is the next layer's input norm (or the final norm). Before
//! the layers: the embedding and the first norm; after: lm_head and the sampler on the
//! sampled rows only, plus the logits gather under TP.
//!
//! Multi-head latent attention (DeepSeek-V2/V3, Kimi-K2; DeepSeek-V2 paper §2.1) runs as
//! vLLM's MLA layers do (`vllm/model_executor/layers/mla.py` and the backends of
//! `vllm/v1/attention/backends/mla/`): before attention `fused_qkv_a_proj` (hidden →
//! `q_lora_rank + kv_lora_rank + rope`, every TP rank whole; `q_proj` and
//! `kv_a_proj_with_mqa` without query compression), `q_a_layernorm`, `q_b_proj` (→ the
//! GPU's heads × (nope + rope)), `kv_a_layernorm`, RoPE and the latent's cache write; the
//! attention part then differs by phase — decode absorbs `W_UK` into the queries (one
//! batched GEMM), reads only the cached latents ([`super::ops::Rates::attention_decode_mla`])
//! and applies `W_UV` after (another); prefill up-projects the new tokens' latents (and a
//! prefix's or earlier chunks' cached ones) with `kv_b_proj` (→ heads × (nope + v)) and runs
//! ordinary attention with q/k heads of nope + rope and values of v — then `o`.
//!
//! Launch: a CUDA-graph step costs one replay (one launch) plus the sum of GPU times. An
//! eager step is a two-stage pipeline — the CPU launches kernel after kernel, the GPU runs
//! each once launched and once the previous finished — whose makespan is
//! `max_k (CPU time to launch k + GPU time of k and everything after)`. Layers repeat, so
//! the maximum is found in O(ops of one layer) (see [`eager_s`]).
//!
//! Everything that depends only on the step's token count M (all but attention and the
//! sampled rows) is evaluated exactly on a grid of M (every integer to 64, then 16 points
//! per doubling to 65,536); a step interpolates linearly between neighbours (within 0.2% of
//! the exact sum; tested), so pricing a step costs a few dozen floating-point operations and
//! no logarithm. Decode attention, which depends on the KV tokens read, is tabulated the same
//! way over tokens (with a calibration profile, whose curve costs a log and an exp per
//! lookup): 128 points per doubling, placed where the f64's top mantissa bits change, so
//! finding a point is a shift (within 0.03% of the exact op; tested). A grid point is
//! computed the first time a step needs it (a run visits a few dozen of the 224 dense
//! points), so building a model is cheap and the values are the same whichever step asks
//! first — or whichever run: a model's clones share the points ([`Cells`]), and the pools'
//! cost models are kept for the process, so runs on one model and GPU compute each once.
//! Breakdowns ([`StepModel::breakdown`]) are always exact.

use std::sync::{Arc, OnceLock};

mod anatomy;
mod trtllm_ops;
pub use anatomy::{Anatomy, KernelColumns};
use super::PrefillItem;

use crate::calib::{Source, ELEMENTWISE_OPS};
use crate::catalog::{Gpu, Mla, Model, WeightFormat};
use crate::memory::kv_heads_per_gpu;

use super::layer_mix::{local_pair_share, LayerMix};

use super::ops::{OpT, Rates, NVLINK_MIN_GBPS};
use super::seed::{descriptor_cache, plan_fusion, remap_blocks, sm_clock_hz, ElemCost, FusionPolicy};
use super::spec::Dtype;
use super::{BatchShape, Engine, StepSpec};

/// One line of a step's breakdown: an operator (summed over layers), its time and source.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct OpCost {
    pub op: String,
    pub ms: f64,
    pub source: Source,
}

/// GPU idle time between two dependent kernels launched eagerly, s: on an H200 the steps of
/// `benchmarks/data/h200_steps_c.json` lasted 1.8–2.0 ms longer than the sum of their
/// kernels' times (torch.profiler) over ~965 kernels in a GPU-bound 2,048-token prefill.
const EAGER_KERNEL_GAP_S: f64 = 2.0e-6;
/// The same within one CUDA-graph replay: 0.29–0.30 ms over ~965 kernels of a decode step.
const GRAPH_KERNEL_GAP_S: f64 = 0.3e-6;
/// vLLM's largest CUDA-graph capture size (`max_cudagraph_capture_size`'s default cap).
const VLLM_CAPTURE_MAX_TOKENS: u64 = 512;
/// CPU time of one vLLM V1 engine step outside the forward pass (scheduling, input
/// preparation, output processing), s, and its growth per scheduled request: with async
/// scheduling it overlaps the GPU's previous step and only bounds a step from below. An
/// estimate of the order BLIS's fitted per-step (126 µs) and per-request (4 µs) overheads
/// show (inference-sim, `docs/guide/latency-models.md`), plus input preparation; it never
/// binds for the development runs' models (their decode steps take ≥ 7 ms).
pub const VLLM_STEP_CPU_S: f64 = 0.3e-3;
/// See [`VLLM_STEP_CPU_S`]: per scheduled request, s.
pub const VLLM_SEQ_CPU_S: f64 = 5.0e-6;

/// A replica's expert-parallel group as the step model prices it ([`super::ep`]).
#[derive(Debug, Clone)]
pub struct EpModel {
    /// GPUs of the group (`dp × tp`).
    pub ep: f64,
    /// TP degree inside an attention rank (a rank's tokens are spread over its `tp` GPUs'
    /// experts).
    pub tp: f64,
    /// Expert slots on one GPU, `(experts + redundant) / ep`.
    pub local_slots: f64,
    pub balance: super::ep::ExpertBalance,
    pub all_to_all: super::ep::AllToAll,
    pub two_batch_overlap: bool,
    /// The group's exchange costs without a topology (a topology passes its own).
    pub costs: super::ep::A2aCosts,
    /// No expert parallelism but `dp > 1` (vLLM without `--enable-expert-parallel`): the
    /// experts are TP-sharded over all `dp × tp` GPUs, every GPU runs its slice of every
    /// expert for the whole group's tokens, gathered before and reduce-scattered after.
    pub flat: bool,
}

/// How a step is launched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// One CUDA-graph replay of the whole forward pass.
    Graph,
    /// vLLM's piecewise graphs: each layer's dense part replayed, attention launched eagerly
    /// between the pieces (mixed prefill/decode batches).
    Piecewise,
    /// Every kernel launched from the CPU.
    Eager,
}

const GRID_LINEAR_MAX: usize = 64;
const GRID_PER_DOUBLING: f64 = 16.0;
const GRID_MAX_M: f64 = 65536.0;
/// Decode attention's grid: 2^7 = 128 points per doubling of the KV tokens read, from 1 to
/// 2^26 tokens (a replica's whole KV cache is far below; beyond, the curve is evaluated).
const DECODE_SUB_BITS: u32 = 7;
const DECODE_MAX_LOG2: u32 = 26;
/// Mantissa bits below a decode grid cell's index.
const DECODE_SHIFT: u32 = 52 - DECODE_SUB_BITS;

/// The part of a pure decode step's price that depends only on its sequence count: the
/// dense aggregates, the epilogue, the launch mode and the kernel counts, each exactly as
/// [`StepModel::step_s`] computes them for such a step.
#[derive(Debug, Clone, Copy)]
struct DecodeFixed {
    dense: Agg,
    epi: (f64, f64),
    mode: Mode,
    kernels: (f64, f64),
}

/// Entries of each of [`StepMemo`]'s direct-mapped tables (a power of two).
const MEMO_SLOTS: usize = 256;

/// What the steps of a run repeat beyond pure decodes, remembered by exact key in small
/// direct-mapped tables (an entry holds its whole key; a collision replaces the older
/// entry): a prefill's attention by (new tokens, cached context), and a step's parts other
/// than attention by (tokens, sampled rows, prefill requests, whether it decodes). A hit
/// returns the very values the computation would: they are functions of those keys and of
/// the model. The engine keeps one per pool beside its cost model, made once the model is
/// configured (a model's setters change what it prices), and passes it mutably
/// ([`super::StepCostModel::step_ns_memo`]).
#[derive(Debug, Clone)]
pub struct StepMemo {
    prefill: Box<[Option<(u64, OpT)>]>,
    parts: Box<[Option<(PartsKey, DecodeFixed)>]>,
}

/// A step's key in [`StepMemo`]'s parts table: (tokens, sampled rows, prefill requests and
/// whether it decodes, packed).
type PartsKey = (u64, u64);

impl Default for StepMemo {
    fn default() -> StepMemo {
        StepMemo { prefill: vec![None; MEMO_SLOTS].into(), parts: vec![None; MEMO_SLOTS].into() }
    }
}

impl StepMemo {
    /// The slot of `key` (a multiplicative hash's top bits).
    #[inline]
    fn slot(key: u64) -> usize {
        (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - MEMO_SLOTS.trailing_zeros())) as usize
    }

    /// The value `cell` holds for `key`, else `compute`'s, which then replaces what it held.
    #[inline]
    fn get_or_compute<K: PartialEq + Copy, V: Copy>(cell: &mut Option<(K, V)>, key: K, compute: impl FnOnce() -> V) -> V {
        match cell {
            Some((k, v)) if *k == key => *v,
            _ => {
                let v = compute();
                *cell = Some((key, v));
                v
            }
        }
    }
}

/// Pure decode steps priced from a memo up to this many sequences (larger batches are
/// priced in full; 4,096 entries are ~0.6 MB once all filled).
const FIXED_MAX_SEQS: u32 = 4096;

/// Sums of the M-dependent part of a step (all times s).
#[derive(Debug, Clone, Copy, Default)]
struct Agg {
    g_pre: f64,
    g_post: f64,
    c_pre: f64,
    c_post: f64,
    /// max over ops p before attention of (CPU to launch up to p + GPU from p to attention)
    a_pre: f64,
    /// max over ops p after attention of (CPU to launch from the first post op to p + GPU
    /// from p to the layer's end)
    a_post: f64,
    g_pro: f64,
    c_pro: f64,
    /// Pipeline-stage transfers (GPU, not overlapped).
    pp: f64,
    /// Kernels before / after attention in one layer, and in the prologue.
    k_pre: f64,
    k_post: f64,
    k_pro: f64,
}

impl Agg {
    fn lerp(a: &Agg, b: &Agg, t: f64) -> Agg {
        let l = |x: f64, y: f64| x + t * (y - x);
        Agg {
            g_pre: l(a.g_pre, b.g_pre),
            g_post: l(a.g_post, b.g_post),
            c_pre: l(a.c_pre, b.c_pre),
            c_post: l(a.c_post, b.c_post),
            a_pre: l(a.a_pre, b.a_pre),
            a_post: l(a.a_post, b.a_post),
            g_pro: l(a.g_pro, b.g_pro),
            c_pro: l(a.c_pro, b.c_pro),
            pp: l(a.pp, b.pp),
            k_pre: a.k_pre,
            k_post: a.k_post,
            k_pro: a.k_pro,
        }
    }
}

/// A named op of the dense part with its time and the kernels it launches (both averaged
/// over the layers when only some layers run it).
struct Named {
    name: String,
    t: OpT,
    kernels: f64,
}

impl Named {
    /// The op as run by a `share` of the layers: its times and kernels scaled, so that the
    /// one layer the step model composes is the average of the model's layers.
    fn on_share(mut self, share: f64) -> Named {
        if share != 1.0 {
            self.t.gpu_s *= share;
            self.t.cpu_s *= share;
            self.kernels *= share;
        }
        self
    }
}

/// An elementwise op before fusion: its breakdown name, time, bytes per token of one pass,
/// and kernels unfused.
struct Elem {
    name: &'static str,
    t: OpT,
    bytes_tok: f64,
    kernels: f64,
}

/// The composed model of one replica.
#[derive(Debug, Clone)]
pub struct StepModel {
    r: Rates,
    /// The routed experts' GEMM rates when the checkpoint stores them in another format than
    /// the spec's weights ([`Model::expert_format`], see [`expert_dtype`]); `None`: `r`.
    experts_r: Option<Box<Rates>>,
    /// The experts run W8A8 with block scales (an FP8 checkpoint on FP8 tensor cores): the
    /// activations are quantised per 1 × 128 group before each of the two grouped GEMMs.
    expert_quant: bool,
    /// `lm_head`'s GEMM rates when they differ from `r`: TensorRT-LLM serving a ModelOpt FP8
    /// checkpoint, whose `lm_head` stays BF16 (`trtllm_ops`); `None`: `r`.
    head_r: Option<Box<Rates>>,
    /// The GPU's block-remap constants (descriptor cache entries, miss cycles, SM clock),
    /// resolved from its name once.
    remap_consts: (f64, f64, f64),
    layers: f64,
    tp: f64,
    pp: f64,
    hidden: f64,
    vocab_shard: u32,
    hq: u32,
    hkv: u32,
    hd: u32,
    qkv: (u32, u32),
    o: (u32, u32),
    gate_up: (u32, u32),
    down: (u32, u32),
    /// MoE: (experts, top_k, router width); None for dense models.
    moe: Option<(f64, f64, u32)>,
    inter_shard: f64,
    /// One expert's inner width on a GPU: `inter_shard` when the experts are TP-sharded, the
    /// whole width under expert parallelism.
    expert_inter: f64,
    /// Data-parallel attention ranks: the step of one rank carries `1/dp` of the replica's
    /// batch ([`super::ep`]).
    dp: f64,
    /// Expert parallelism ([`super::ep`]); `None`: the experts are TP-sharded.
    ep: Option<Box<EpModel>>,
    /// How the layers differ and what only some architectures compute.
    mix: LayerMix,
    /// Multi-head latent attention, with its widths on this GPU (`hq`, `hkv` and `hd` are
    /// then the prefill attention's view: `hq` heads of K and V after the up-projection, of
    /// width `(qk + v) / 2`, which gives its FLOPs and bytes).
    mla: Option<MlaDims>,
    /// Kernels each elementwise op ([`ELEMENTWISE_OPS`], in that order) launches in the
    /// engine the profile's tables come from: the profile's count, else the reference's.
    elem_kernels: [f64; ELEMENTWISE_OPS.len()],
    fusion: FusionPolicy,
    graphs: bool,
    graph_max_tokens: u64,
    cpu_overhead: f64,
    /// Tokens per KV block of a paged cache with one block size; 0 for a contiguous cache
    /// (no block table, no remap) and for per-request blocks (see `per_request_blocks`).
    block_size: f64,
    /// `1 / block_size` when the block size is a power of two (then exact), else 0.
    inv_block: f64,
    /// Each request has its own block size: the remap reads the batch's
    /// [`BatchShape::decode_blocks_1024`].
    per_request_blocks: bool,
    /// The GPU's streaming multiprocessors (a step anatomy's occupancy estimate).
    sms: f64,
    grid_m: Vec<f64>,
    /// What is computed on first use, shared by clones ([`Cells`]).
    cells: Arc<Cells>,
    /// Launch cost of the decode attention kernel and its lookup, cached at build.
    decode_cpu: f64,
    prefill_cpu: f64,
    /// A topology prices the TP AllReduces and PP transfers ([`crate::topo::collective`]):
    /// the model keeps only the collectives' kernel floor and launches.
    external_comm: bool,
    /// The engine priced ([`Engine`]).
    engine: Engine,
    /// The TP group's GPUs are NVLink peers (vLLM's custom all-reduce applies).
    nvlink: bool,
    /// Whether the spec fixed `cuda_graph_max_tokens` (else vLLM's capture bound follows
    /// `max_num_seqs`, [`StepModel::set_max_num_seqs`]).
    graph_bound_given: bool,
    /// GPU time of an attention call with nothing to do, s (what merging calls saves).
    attn_floor: f64,
    /// First-use compilation stalls ([`super::warmup`]).
    warmup: super::warmup::WarmupSpec,
}

/// What a [`StepModel`] computes on first use: values that depend only on the model's
/// other fields. Clones share them (`Arc`), so a cost model built once (and kept for the
/// process by `api/pools.rs`) fills them once for every run that uses it; every method that
/// changes a field gives the model fresh cells, so no cell is shared by models that differ.
#[derive(Debug)]
struct Cells {
    /// The dense part's aggregates at each grid point.
    grid: Vec<OnceLock<Agg>>,
    /// (GPU, CPU) of the epilogue at each grid point of sampled rows.
    epi: Vec<OnceLock<(f64, f64)>>,
    /// Decode attention's GPU time (s) at each point of its token grid; empty without a
    /// profile (the roofline is a line: evaluated directly).
    decode_grid: Vec<OnceLock<f64>>,
    /// What a pure decode step of `n` sequences costs apart from its attention, by `n`
    /// ([`StepModel::decode_fixed`]); sized by [`StepModel::set_max_num_seqs`], empty before.
    fixed: Vec<OnceLock<DecodeFixed>>,
}

/// MLA's widths as one GPU runs them: its `hq` query heads (TP splits the heads; the
/// latent and the RoPE key are whole on every GPU).
#[derive(Debug, Clone, Copy)]
struct MlaDims {
    hq: u32,
    q_lora: u32,
    kv_lora: u32,
    nope: u32,
    rope: u32,
    v: u32,
}

impl MlaDims {
    fn new(m: &Mla, hq: u32) -> MlaDims {
        MlaDims { hq, q_lora: m.q_lora_rank, kv_lora: m.kv_lora_rank, nope: m.qk_nope_head_dim, rope: m.qk_rope_head_dim, v: m.v_head_dim }
    }

    /// Width of one head's query and key.
    fn qk(&self) -> u32 {
        self.nope + self.rope
    }

    /// Values one token caches per layer.
    fn cached(&self) -> u32 {
        self.kv_lora + self.rope
    }

    /// `kv_b_proj`'s output on this GPU: each head's key (no RoPE part) and value.
    fn up(&self) -> u32 {
        self.hq * (self.nope + self.v)
    }
}

/// The precision the routed experts' GEMMs run at, from the checkpoint's expert format on
/// `gpu` (`weights`: the spec's, used without a format):
/// - FP8 (block-scaled E4M3, DeepSeek-V3 / Kimi-K2) runs W8A8 on FP8 tensor cores (DeepGEMM,
///   vLLM's block-scaled CUTLASS/Triton MoE); without them (A100, L4 …) weight-only at the
///   BF16 rate (vLLM's Marlin FP8 path), priced as `int8`: 1 byte per weight, BF16 math;
/// - MXFP4 (gpt-oss) runs weight-only with BF16 math on GPUs before Blackwell (vLLM's
///   Triton `matmul_ogs` / Marlin MXFP4 kernels), priced as `int4` (0.5 bytes per weight
///   against MXFP4's 0.53: the E8M0 scales are left out). Blackwell's native FP4 tensor
///   cores are not modelled: a B200 prices it the same way, an upper bound on its time;
/// - BF16 at the BF16 rate.
pub fn expert_dtype(format: Option<WeightFormat>, weights: Dtype, gpu: &Gpu) -> Dtype {
    match format {
        None => weights,
        Some(WeightFormat::Bf16) => Dtype::Bf16,
        Some(WeightFormat::Fp8) if gpu.fp8_tflops > 0.0 => Dtype::Fp8,
        Some(WeightFormat::Fp8) => Dtype::Int8,
        Some(WeightFormat::Mxfp4) => Dtype::Int4,
    }
}

/// The token counts of the step-time grid: every M up to [`GRID_LINEAR_MAX`], then
/// [`GRID_PER_DOUBLING`] points per doubling up to [`GRID_MAX_M`].
///
/// This and [`empty_cells`] are kept out of [`StepModel::new`] (`inline(never)`): their
/// loops run thousands of times per simulation, which makes a browser's WASM engine send
/// the function holding them to its optimising compiler while the first simulation runs;
/// small, they compile in a moment, where `new` with them inlined took ~25 ms of a 2-core
/// machine's CPU for code that runs once.
#[inline(never)]
fn grid_points() -> Vec<f64> {
    let ratio = libm::exp2(1.0 / GRID_PER_DOUBLING);
    let mut out = Vec::new();
    let mut m = 1.0;
    while m <= GRID_MAX_M {
        out.push(m);
        m = if out.len() < GRID_LINEAR_MAX { m + 1.0 } else { m * ratio };
    }
    out
}

/// `n` cells to be filled on first use.
#[inline(never)]
fn empty_cells<T>(n: usize) -> Vec<OnceLock<T>> {
    (0..n).map(|_| OnceLock::new()).collect()
}

impl StepModel {
    /// `external_comm`: leave the TP AllReduce and PP transfer times to the caller (a
    /// topology); their kernel floors and launches stay.
    ///
    /// Long because of the `StepModel` literal (one field a line, two thirds of the body):
    /// each field is a shape derived once from the model, GPU and TP degree, and keeping
    /// them in one literal keeps every shape's derivation beside its name.
    pub fn new(spec: &StepSpec, use_tables: bool, model: &Model, gpu: &crate::catalog::Gpu, tp: u32, pp: u32, external_comm: bool) -> StepModel {
        let mut r = Rates::new(gpu, spec, use_tables);
        let experts_dtype = expert_dtype(model.expert_format, spec.dtype, gpu);
        let experts_r = (model.experts > 1 && experts_dtype != spec.dtype)
            .then(|| Box::new(Rates::new(gpu, &StepSpec { dtype: experts_dtype, ..spec.clone() }, use_tables)));
        let t = tp.max(1);
        // TP collectives run over NVLink while the TP group fits one NVLink domain.
        r.link_bw = gpu.link_gbps(t) * 1e9 / 2.0;
        let hq = model.heads / t;
        let mla = model.mla.map(|m| MlaDims::new(&m, hq));
        // MLA's prefill attends over hq up-projected K/V heads; q/k of qk wide, v of v wide.
        let hd = mla.map_or(model.head_dim, |a| (a.qk() + a.v) / 2);
        let hkv = if mla.is_some() { hq } else { kv_heads_per_gpu(model, t) };
        let inter = model.intermediate / t;
        let moe = (model.experts > 1).then(|| (f64::from(model.experts), f64::from(model.experts_per_token), model.experts));
        let fusion = FusionPolicy {
            granularity: spec.fusion,
            latency_threshold_s: spec.fusion_latency_threshold_ms * 1e-3,
            memory_coalesce: spec.memory_coalesce,
            gpu_supports: true,
        };
        let elem_kernels =
            ELEMENTWISE_OPS.map(|(op, reference)| r.profile.as_ref().and_then(|p| p.kernels(op)).unwrap_or(reference));
        let mut s = StepModel {
            remap_consts: {
                let (entries, cycles) = descriptor_cache(gpu);
                (entries, cycles, sm_clock_hz(gpu))
            },
            layers: f64::from(model.layers),
            tp: f64::from(t),
            pp: f64::from(pp.max(1)),
            hidden: f64::from(model.hidden),
            vocab_shard: model.vocab.div_ceil(t),
            hq,
            hkv,
            hd,
            qkv: (model.hidden, (hq + 2 * hkv) * hd),
            o: (mla.map_or(hq * hd, |a| hq * a.v), model.hidden),
            gate_up: (model.hidden, 2 * inter),
            down: (inter, model.hidden),
            moe,
            inter_shard: f64::from(inter),
            expert_inter: f64::from(inter),
            dp: 1.0,
            ep: None,
            mix: LayerMix::new(model, t),
            mla,
            elem_kernels,
            fusion,
            graphs: spec.cuda_graphs,
            graph_max_tokens: spec.cuda_graph_max_tokens.map_or(
                match spec.engine {
                    Engine::Vllm => VLLM_CAPTURE_MAX_TOKENS,
                    Engine::Reference => u64::MAX,
                    Engine::Trtllm => u64::from(super::trtllm::CAPTURE_BATCH_SIZES[super::trtllm::CAPTURE_BATCH_SIZES.len() - 1]),
                },
                u64::from,
            ),
            cpu_overhead: spec.cpu_overhead_ms * 1e-3,
            block_size: 0.0,
            inv_block: 0.0,
            per_request_blocks: false,
            sms: f64::from(gpu.sms),
            grid_m: Vec::new(),
            cells: Arc::new(Cells { grid: Vec::new(), epi: Vec::new(), decode_grid: Vec::new(), fixed: Vec::new() }),
            decode_cpu: 0.0,
            prefill_cpu: 0.0,
            external_comm,
            engine: spec.engine,
            nvlink: t <= gpu.nvlink_gpus && gpu.link_gbps(t) >= NVLINK_MIN_GBPS,
            graph_bound_given: spec.cuda_graph_max_tokens.is_some(),
            attn_floor: 0.0,
            warmup: spec.warmup.clone(),
            r,
            experts_r,
            expert_quant: model.experts > 1 && experts_dtype == Dtype::Fp8 && model.expert_format == Some(WeightFormat::Fp8),
            head_r: (spec.engine == Engine::Trtllm && spec.dtype != Dtype::Bf16)
                .then(|| Box::new(Rates::new(gpu, &StepSpec { dtype: Dtype::Bf16, ..spec.clone() }, use_tables))),
        };
        s.attn_floor = s.decode_op(0.0, 0.0).gpu_s;
        s.decode_cpu = s.r.attention_decode(hkv, hd, 1.0).cpu_s;
        s.prefill_cpu = s.r.attention_prefill(hq, hkv, hd, 1.0, 0.0).cpu_s;
        s.grid_m = grid_points();
        s.renew_cells(0);
        s
    }

    /// Whether `self` and `other` share their cells ([`Cells`]).
    #[cfg(test)]
    pub(crate) fn shares_cells(&self, other: &StepModel) -> bool {
        Arc::ptr_eq(&self.cells, &other.cells)
    }

    /// Fresh cells (nothing computed yet), `fixed` sized for `fixed` sequence counts: after
    /// any change of a field, which the cells' values may depend on ([`Cells`]).
    fn renew_cells(&mut self, fixed: usize) {
        let decode = self.r.profile.as_ref().is_some_and(|p| p.has_attention()) || !self.r.bounds.is_empty() || !self.r.floors.is_empty();
        self.cells = Arc::new(Cells {
            grid: empty_cells(self.grid_m.len()),
            epi: empty_cells(self.grid_m.len()),
            decode_grid: if decode { empty_cells((DECODE_MAX_LOG2 << DECODE_SUB_BITS) as usize + 1) } else { Vec::new() },
            fixed: empty_cells(fixed),
        });
    }

    /// Exact GPU time (s) of one layer's decode attention reading `tokens` cached tokens.
    fn decode_exact_s(&self, tokens: f64) -> f64 {
        self.decode_op(tokens, self.decode_cpu).gpu_s
    }

    /// One layer's decode attention over `tokens` cached tokens at launch cost `c`: the
    /// KV heads' K and V read, or with MLA the latent ([`super::ops::Rates::attention_decode_mla`]).
    #[inline]
    fn decode_op(&self, tokens: f64, c: f64) -> OpT {
        match &self.mla {
            None => self.r.attention_decode_given_cpu(self.hkv, self.hd, tokens, c),
            Some(a) => self.r.attention_decode_mla_given_cpu(a.hq, a.kv_lora, a.rope, tokens, c),
        }
    }

    /// Decode attention's GPU time (s) at `tokens`, interpolated linearly on its grid. Point
    /// `i` sits at the f64 whose exponent and top [`DECODE_SUB_BITS`] mantissa bits are `i`
    /// (offset by the exponent bias), so the cell of `tokens` is its bits shifted, and the
    /// weight of the next point its remaining mantissa bits (both exact).
    #[inline]
    fn decode_s(&self, tokens: f64) -> f64 {
        if self.cells.decode_grid.is_empty() || !(1.0..(1u64 << DECODE_MAX_LOG2) as f64).contains(&tokens) {
            return self.decode_exact_s(tokens);
        }
        let bits = tokens.to_bits();
        let i = ((bits >> DECODE_SHIFT) - (1023 << DECODE_SUB_BITS)) as usize;
        let t = (bits & ((1 << DECODE_SHIFT) - 1)) as f64 * (1.0 / (1u64 << DECODE_SHIFT) as f64);
        let (a, b) = (self.decode_point(i), self.decode_point(i + 1));
        a + t * (b - a)
    }

    /// Decode attention's GPU time at grid point `i` (see [`StepModel::decode_s`]).
    #[inline]
    fn decode_point(&self, i: usize) -> f64 {
        *self.cells.decode_grid[i].get_or_init(|| {
            let x = f64::from_bits((i as u64 + (1023 << DECODE_SUB_BITS)) << DECODE_SHIFT);
            self.decode_exact_s(x)
        })
    }

    /// The dense aggregates at grid point `i`.
    #[inline]
    fn grid_at(&self, i: usize) -> &Agg {
        self.cells.grid[i].get_or_init(|| {
            let m = self.grid_m[i];
            self.agg(&self.dense(m))
        })
    }

    /// The epilogue (GPU s, CPU s) at grid point `i`.
    #[inline]
    fn epi_at(&self, i: usize) -> (f64, f64) {
        *self.cells.epi[i].get_or_init(|| self.epilogue_sum(self.grid_m[i]))
    }

    /// Use a paged KV cache of `block_size` tokens (adds the block-table remap cost, §2.5).
    pub fn set_block_size(&mut self, block_size: u32) {
        self.block_size = f64::from(block_size);
        self.inv_block = if block_size.is_power_of_two() { 1.0 / self.block_size } else { 0.0 };
        self.per_request_blocks = false;
        self.renew_cells(self.cells.fixed.len());
    }

    /// Use a paged KV cache with per-request block sizes (o1pro).
    pub fn set_per_request_blocks(&mut self) {
        self.block_size = 0.0;
        self.inv_block = 0.0;
        self.per_request_blocks = true;
        self.renew_cells(self.cells.fixed.len());
    }

    /// The scheduler's `max_num_seqs`: vLLM captures CUDA graphs up to
    /// `min(2 · max_num_seqs, 512)` tokens (`CompilationConfig`'s default capture sizes)
    /// unless the spec set `cuda_graph_max_tokens`.
    pub fn set_max_num_seqs(&mut self, max_num_seqs: u32) {
        if self.engine == Engine::Vllm && !self.graph_bound_given {
            self.graph_max_tokens = (2 * u64::from(max_num_seqs)).min(VLLM_CAPTURE_MAX_TOKENS);
        }
        if self.engine == Engine::Trtllm && !self.graph_bound_given {
            // the captured sizes up to max_batch_size (perf/trtllm.rs)
            self.graph_max_tokens = super::trtllm::largest_captured(u64::from(max_num_seqs));
        }
        self.renew_cells(max_num_seqs.min(FIXED_MAX_SEQS) as usize + 1);
    }

    /// Expert parallelism and data-parallel attention ([`super::ep`]): `dp` attention ranks;
    /// with `ep`, each GPU holds whole experts (their full inner width `intermediate`) and a
    /// rank's step exchanges its tokens with the group every MoE layer.
    pub fn set_parallel(&mut self, intermediate: u32, dp: u32, ep: Option<EpModel>) {
        self.dp = f64::from(dp.max(1));
        if ep.is_some() {
            self.gate_up = (self.hidden as u32, 2 * intermediate);
            self.down = (intermediate, self.hidden as u32);
            self.expert_inter = f64::from(intermediate);
        }
        self.ep = ep.map(Box::new);
        self.renew_cells(self.cells.fixed.len());
    }

    /// (Token, expert) pairs the busiest GPU's experts process when each rank carries `m`
    /// tokens: the group's mean, `m · top_k / tp`, times the straggler factor at the group's
    /// `m · dp · top_k` pairs; with TP-flattened experts all of the group's pairs (each GPU
    /// holds a slice of every expert).
    #[inline]
    fn routed_rows(&self, m: f64) -> f64 {
        let top_k = self.moe.map_or(1.0, |x| x.1);
        match &self.ep {
            Some(ep) if ep.flat => m * self.dp * top_k,
            Some(ep) => ep.balance.gamma(m * self.dp * top_k) * m * top_k / ep.tp,
            None => m * top_k,
        }
    }

    /// MLP GEMM `k × n` at `m` tokens; MoE: grouped over the active experts by routed
    /// tokens. The reference engine runs one GEMM per active expert; vLLM's fused MoE kernel
    /// runs them all in one launch, priced as one GEMM through the active experts' weights
    /// side by side (`k × n·active` at the tokens per expert: the same bytes and FLOPs, at
    /// the efficiency of a weight that large).
    fn mlp_gemm(&self, m: f64, (k, n): (u32, u32)) -> OpT {
        let r = self.experts_r.as_deref().unwrap_or(&self.r);
        match self.moe {
            None => self.r.gemm(m, k, n),
            Some((experts, top_k, _)) => {
                let (pairs, slots) = match &self.ep {
                    Some(ep) => (self.routed_rows(m), ep.local_slots),
                    None => (m * top_k, experts),
                };
                let active = slots.min(pairs).max(1.0);
                if self.engine.fused() {
                    return r.gemm(pairs / active, k, (f64::from(n) * active) as u32);
                }
                let one = r.gemm(pairs / active, k, n);
                OpT { gpu_s: active * one.gpu_s, cpu_s: one.cpu_s, src: one.src }
            }
        }
    }
    /// The MLP part of a layer at `m` tokens, after attention, into `post`: the dense MLP
    /// of layers without experts, then the MoE layers' router, token permutation, experts
    /// (through the fused kernel's GEMMs) and shared expert, each at its share of the
    /// layers. `mlp` builds a gated MLP `gate_up, act, down` as the engine runs it.
    fn mlp_part(&self, m: f64, mlp: &dyn Fn([&'static str; 3], OpT, OpT, f64) -> Vec<Named>, post: &mut Vec<Named>) {
        let (mix, r, h) = (&self.mix, &self.r, self.hidden);
        let top_k = self.moe.map_or(1.0, |x| x.1);
        let g = |name: &str, t: OpT| Named { name: name.to_string(), t, kernels: 1.0 };
        if mix.moe_share < 1.0 {
            // Layers without experts (all of a dense model's).
            let (names, inter) = if self.moe.is_some() {
                (["dense_gate_up", "", "dense_down"], mix.dense_inter_shard)
            } else {
                (["gate_up", "", "down"], self.inter_shard)
            };
            let (gu, dn) = if self.moe.is_some() { (mix.dense_gate_up, mix.dense_down) } else { (self.gate_up, self.down) };
            let ops = mlp(names, r.gemm(m, gu.0, gu.1), r.gemm(m, dn.0, dn.1), inter);
            post.extend(ops.into_iter().map(|o| o.on_share(1.0 - mix.moe_share)));
        }
        if let Some((_, _, width)) = self.moe {
            let router = r.gemm(m, self.hidden as u32, width);
            // token permutation in and out (top-k, block alignment; read + write the hidden
            // state per routed copy) and the weighted sum of the experts' outputs
            let routed = if self.ep.is_some() { self.routed_rows(m) } else { m * top_k };
            let perm = OpT { gpu_s: 2.0 * r.floor + 4.0 * routed * h * 2.0 / r.copy_bw, cpu_s: 2.0 * r.launch, src: Source::Model };
            let mut ops = vec![g("moe_router", router), Named { name: "moe_permute".into(), t: perm, kernels: 2.0 }];
            let width = if self.ep.is_some() { self.expert_inter * routed / m.max(1e-9) } else { self.inter_shard * top_k };
            if self.expert_quant {
                // Block-scaled FP8 experts (DeepSeek-V3's checkpoint; DeepGEMM / vLLM's
                // `per_token_group_quant_fp8`): the hidden states and the activated inner
                // states quantised per 1 × 128 group — read 2 bytes, write 1 plus an FP32
                // scale per 128 — before the two grouped GEMMs.
                let values = m * h + m * width;
                let t = OpT { gpu_s: 2.0 * r.floor + values * (3.0 + 4.0 / 128.0) / r.copy_bw, cpu_s: 2.0 * r.launch, src: Source::Model };
                ops.push(Named { name: "moe_quant".into(), t, kernels: 2.0 });
            }
            ops.extend(mlp(["gate_up", "", "down"], self.mlp_gemm(m, self.gate_up), self.mlp_gemm(m, self.down), width));
            if let Some((gu, dn, inter)) = mix.shared {
                // The shared expert: a dense MLP every token also goes through.
                let act = if mix.act == "silu_mul" { "shared_silu_mul" } else { "shared_gelu_mul" };
                ops.extend(mlp(["shared_gate_up", act, "shared_down"], r.gemm(m, gu.0, gu.1), r.gemm(m, dn.0, dn.1), inter));
            }
            post.extend(ops.into_iter().map(|o| o.on_share(mix.moe_share)));
        }
    }


    /// The dense ops of one layer at `m` tokens, before and after attention, fusion applied;
    /// and the prologue (embedding, first norm) and stage transfers. Ops only some layers
    /// run (the MoE or the dense MLP of an interleaved model, q/k norms) count at their
    /// share of the layers.
    ///
    /// Long because it lists one layer's ops in kernel order (attention projections, norm,
    /// MLP, collectives); that order is what the fusion policy merges over, so the list reads
    /// top to bottom as the layer runs. The MLA projections and the MLP are already their
    /// own functions (`mla_projection`, `mlp_part`).
    fn dense(&self, m: f64) -> (Vec<Named>, Vec<Named>, Vec<Named>, f64) {
        if self.engine == Engine::Trtllm {
            return self.dense_trtllm(m);
        }
        if self.engine == Engine::Vllm {
            return self.dense_vllm(m);
        }
        let h = self.hidden;
        let (hq, hkv, hd) = (f64::from(self.hq), f64::from(self.hkv), f64::from(self.hd));
        let mix = &self.mix;
        let r = &self.r;
        // An elementwise op named `name`, priced by the profile's `op` tables.
        let el_as = |name: &'static str, op: &'static str, width: f64, bytes_tok: f64| {
            let kernels = self.kernels_of(op);
            Elem { name, t: r.elementwise(op, m, width, kernels, bytes_tok), bytes_tok, kernels }
        };
        let el = |op: &'static str, width: f64, bytes_tok: f64| el_as(op, op, width, bytes_tok);
        let rms = || el("rms_norm", h, 4.0 * h);
        let add = || el("residual_add", h, 6.0 * h);
        let qk = (hq + hkv) * hd;
        let g = |name: &str, t: OpT| Named { name: name.to_string(), t, kernels: 1.0 };
        let mut pre = Vec::new();
        if let Some(a) = &self.mla {
            // MLA's projections, in vLLM's order (see the module docs); the norms and RoPE
            // are elementwise groups the fusion policy may merge.
            let one = |e: Elem| self.fuse(m, vec![e], &[]);
            pre.extend(self.mla_projection(a, m, |name, q, norm| match norm {
                Some(width) => one(el_as(name, "rms_norm", width, 4.0 * width)),
                None => vec![g(name, q)],
            }));
            let (rope, cache) = (f64::from((a.hq + 1) * a.rope), f64::from(a.cached()));
            pre.extend(self.fuse(m, vec![el("rope_q_and_k", rope, 4.0 * rope), el("kv_write", cache, cache * (2.0 + r.kv_bytes))], &[cache * 2.0]));
        } else {
            pre.push(g("qkv", r.gemm(m, self.qkv.0, self.qkv.1)));
            if let Some(bytes) = mix.qkv_bias_bytes {
                // Added in the qkv GEMM's epilogue: the bias read once, no kernel.
                pre.push(Named { name: "qkv_bias".into(), t: OpT { gpu_s: bytes / r.stream_bw, cpu_s: 0.0, src: Source::Roofline }, kernels: 0.0 });
            }
            if mix.qk_norm_share > 0.0 {
                // One RMSNorm over each head of q, one over each head of k.
                let norms = vec![el_as("qk_norm", "rms_norm", hq * hd, 4.0 * hq * hd), el_as("qk_norm", "rms_norm", hkv * hd, 4.0 * hkv * hd)];
                pre.extend(self.fuse(m, norms, &[]).into_iter().map(|o| o.on_share(mix.qk_norm_share)));
            }
            pre.extend(self.fuse(m, vec![el("rope_q_and_k", qk, 4.0 * qk), el("kv_write", 2.0 * hkv * hd, 2.0 * hkv * hd * (2.0 + r.kv_bytes))], &[2.0 * hkv * hd * 2.0]));
        }
        // The attention output before `o`: heads × head width (MLA: × v).
        let att_out = f64::from(self.o.0);
        let mut post = self.fuse(m, vec![el("attn_out_transpose", att_out, 4.0 * att_out)], &[]);
        post.push(g("o", r.gemm(m, self.o.0, self.o.1)));
        let ar = (self.tp > 1.0).then(|| {
            if self.external_comm {
                OpT { gpu_s: r.floor, cpu_s: r.launch, src: Source::Model }
            } else {
                r.allreduce(self.tp, m * h * 2.0)
            }
        });
        if let Some(a) = ar {
            post.push(g("tp_allreduce", a));
        }
        // The residual add and the next norm; Gemma 2/3 normalise the sub-layer's output first.
        let add_norm = || {
            if mix.post_norms {
                self.fuse(m, vec![rms(), add(), rms()], &[2.0 * h, 2.0 * h])
            } else {
                self.fuse(m, vec![add(), rms()], &[2.0 * h])
            }
        };
        post.extend(add_norm());
        // The gated MLP `gate_up, act, down` at inner width `inter` (per token, all copies).
        let mlp = |names: [&'static str; 3], gate_up: OpT, down: OpT, inter: f64| {
            let act = if names[1].is_empty() { mix.act } else { names[1] };
            let mut ops = vec![g(names[0], gate_up)];
            ops.extend(self.fuse(m, vec![el_as(act, "silu_mul", inter, 6.0 * inter)], &[]));
            ops.push(g(names[2], down));
            ops
        };
        self.mlp_part(m, &mlp, &mut post);
        if let Some(a) = ar {
            post.push(g("tp_allreduce", a));
        }
        post.extend(add_norm());
        let embed = OpT { gpu_s: r.floor + m * 4.0 * h / r.copy_bw, cpu_s: r.launch, src: Source::Roofline };
        let first_norm = rms();
        let pro = vec![g("embedding", embed), Named { name: first_norm.name.into(), t: first_norm.t, kernels: first_norm.kernels }];
        let pp = if self.external_comm { 0.0 } else { (self.pp - 1.0) * (m * h * 2.0 / r.link_bw + r.hop) };
        (pre, post, pro, pp)
    }

    /// The dense ops of one layer as vLLM launches them — `qkv, [q/k norms], rotary (q and
    /// k), cache write, ATTENTION, o, [all-reduce], residual add + RMSNorm, [router, permute],
    /// gate_up, activation·mul, down, [shared expert], [all-reduce], residual add + RMSNorm` —
    /// one kernel each (Gemma's extra post-norms one more), with the layer mix of the
    /// architecture as [`StepModel::dense`] has it.
    fn dense_vllm(&self, m: f64) -> (Vec<Named>, Vec<Named>, Vec<Named>, f64) {
        let h = self.hidden;
        let (hq, hkv, hd) = (f64::from(self.hq), f64::from(self.hkv), f64::from(self.hd));
        let mix = &self.mix;
        let r = &self.r;
        let g = |name: &str, t: OpT| Named { name: name.to_string(), t, kernels: 1.0 };
        // breakdown name, the profile op that prices it, width, bytes per token
        let el = |name: &str, op: &str, width: f64, bytes_tok: f64| g(name, self.vllm_elem(op, m, width, bytes_tok));
        let qk = (hq + hkv) * hd;
        let kv = 2.0 * hkv * hd;
        let add_norm = || {
            // the fused kernel also reads and writes the residual stream
            let mut t = self.vllm_elem("rms_norm", m, h, 4.0 * h);
            t.gpu_s += m * 4.0 * h / r.copy_bw * r.scale;
            let fused = g("add_rms_norm", t);
            if mix.post_norms {
                vec![el("rms_norm", "rms_norm", h, 4.0 * h), fused]
            } else {
                vec![fused]
            }
        };
        let mut pre = Vec::new();
        if let Some(a) = &self.mla {
            // MLA's projections as vLLM's MLA layer runs them (see the module docs).
            pre.extend(self.mla_projection(a, m, |name, q, norm| match norm {
                Some(width) => vec![el(name, "rms_norm", width, 4.0 * width)],
                None => vec![g(name, q)],
            }));
            let (rope, cache) = (f64::from((a.hq + 1) * a.rope), f64::from(a.cached()));
            pre.push(el("rope_q_and_k", "rope_q_and_k", rope, 4.0 * rope));
            // concat_and_cache_mla: the latent and the RoPE key.
            pre.push(el("kv_write", "kv_write", cache, cache * (2.0 + r.kv_bytes)));
        } else {
            pre.push(g("qkv", r.gemm(m, self.qkv.0, self.qkv.1)));
            if let Some(bytes) = mix.qkv_bias_bytes {
                // Added in the qkv GEMM's epilogue: the bias read once, no kernel.
                pre.push(Named { name: "qkv_bias".into(), t: OpT { gpu_s: bytes / r.stream_bw, cpu_s: 0.0, src: Source::Roofline }, kernels: 0.0 });
            }
            if mix.qk_norm_share > 0.0 {
                // One RMSNorm over each head of q, one over each head of k.
                pre.push(el("qk_norm", "rms_norm", hq * hd, 4.0 * hq * hd).on_share(mix.qk_norm_share));
                pre.push(el("qk_norm", "rms_norm", hkv * hd, 4.0 * hkv * hd).on_share(mix.qk_norm_share));
            }
            pre.push(el("rope_q_and_k", "rope_q_and_k", qk, 4.0 * qk));
            pre.push(el("kv_write", "kv_write", kv, kv * (2.0 + r.kv_bytes)));
        }
        let mut post = vec![g("o", r.gemm(m, self.o.0, self.o.1))];
        let ar = (self.tp > 1.0).then(|| {
            if self.external_comm {
                OpT { gpu_s: r.floor, cpu_s: r.launch, src: Source::Model }
            } else {
                r.allreduce_vllm(self.tp, m * h * 2.0, self.nvlink)
            }
        });
        if let Some(a) = ar {
            post.push(g("tp_allreduce", a));
        }
        post.extend(add_norm());
        // The gated MLP `gate_up, act, down` at inner width `inter` (per token, all copies).
        let mlp = |names: [&'static str; 3], gate_up: OpT, down: OpT, inter: f64| {
            let act = if names[1].is_empty() { mix.act } else { names[1] };
            vec![g(names[0], gate_up), el(act, "silu_mul", inter, 6.0 * inter), g(names[2], down)]
        };
        self.mlp_part(m, &mlp, &mut post);
        if let Some(a) = ar {
            post.push(g("tp_allreduce", a));
        }
        post.extend(add_norm());
        let embed = OpT { gpu_s: r.floor + m * 4.0 * h / r.copy_bw, cpu_s: r.launch, src: Source::Roofline };
        let pro = vec![g("embedding", embed), el("rms_norm", "rms_norm", h, 4.0 * h)];
        let pp = if self.external_comm { 0.0 } else { (self.pp - 1.0) * (m * h * 2.0 / r.link_bw + r.hop) };
        (pre, post, pro, pp)
    }

    /// MLA's projections before attention at `m` tokens, in vLLM's order
    /// (`DeepseekV2MLAAttention` with `MultiHeadLatentAttentionWrapper`): `fused_qkv_a_proj`
    /// (hidden → `q_lora + kv_lora + rope`, replicated on every TP rank), `q_a_layernorm`,
    /// `q_b_proj` (→ `hq` heads × (nope + rope)), `kv_a_layernorm`; without query
    /// compression `q_proj` (hidden → `hq` × (nope + rope)) and `kv_a_proj_with_mqa`. `op`
    /// turns each into the engine's ops: a GEMM (its time) or an RMSNorm (its width, `Some`).
    fn mla_projection(&self, a: &MlaDims, m: f64, mut op: impl FnMut(&'static str, OpT, Option<f64>) -> Vec<Named>) -> Vec<Named> {
        let r = &self.r;
        let h = self.hidden as u32;
        let none = OpT { gpu_s: 0.0, cpu_s: 0.0, src: Source::Model };
        let mut out = Vec::new();
        if a.q_lora > 0 {
            out.extend(op("fused_qkv_a_proj", r.gemm(m, h, a.q_lora + a.cached()), None));
            out.extend(op("q_a_layernorm", none, Some(f64::from(a.q_lora))));
            out.extend(op("q_b_proj", r.gemm(m, a.q_lora, a.hq * a.qk()), None));
        } else {
            out.extend(op("q_proj", r.gemm(m, h, a.hq * a.qk()), None));
            out.extend(op("kv_a_proj_with_mqa", r.gemm(m, h, a.cached()), None));
        }
        out.extend(op("kv_a_layernorm", none, Some(f64::from(a.kv_lora))));
        out
    }

    /// MLA's attention part of one layer for the batch's requests split over `k`
    /// micro-batches (1 for a whole step): (GPU s, CPU s), and its ops for a breakdown or an
    /// anatomy when asked. As vLLM's `MLACommonImpl` runs it:
    /// * prefills: `kv_b_proj` up-projects the new tokens' latents (one GEMM for every
    ///   request's) and, when requests have cached context (a prefix hit, earlier chunks),
    ///   those tokens' latents read back from the cache (another, over all of them); then
    ///   ordinary attention ([`StepModel::prefill_attention`] over `hq` K/V heads) — vLLM's
    ///   one varlen call for all the prefills (the fixed cost of the merged calls saved, as
    ///   [`StepModel::attention_vllm`]), the reference engine's one per request;
    /// * decodes: `W_UK` absorbed into the queries (`q_nope · W_UK`, a GEMM of the decode
    ///   tokens through `nope × hq·kv_lora`), the latent attention
    ///   ([`StepModel::decode_attention_s`], block remap included), and `W_UV` applied to its
    ///   output (`kv_lora × hq·v`), as the `W_UK_T` bmm and `_v_up_proj` of vLLM.
    fn mla_attention(&self, a: &MlaDims, b: &BatchShape, k: f64, detail: Option<&mut Vec<Named>>) -> (f64, f64) {
        let r = &self.r;
        let vllm = self.engine.fused();
        let (mut g, mut c) = (0.0, 0.0);
        let mut ops: Vec<Named> = Vec::new();
        let want = detail.is_some();
        let mut push = |name: &str, t: OpT, kernels: f64| {
            if want {
                ops.push(Named { name: name.to_string(), t, kernels });
            }
        };
        if !b.prefill.is_empty() {
            let (mut new, mut context) = (0.0, 0.0);
            let (mut sum, mut longest, mut cpu) = (0.0, 0.0f64, 0.0);
            let mut src = Source::Table;
            for item in b.prefill {
                let (n, ctx) = (f64::from(item.new_tokens), f64::from(item.context_before));
                let t = self.prefill_attention(n, ctx);
                new += n;
                context += ctx;
                sum += t.gpu_s / k;
                longest = longest.max(t.gpu_s / k);
                cpu += t.cpu_s / k;
                src = src.max(t.src);
            }
            let mut up = r.gemm(new / k, a.kv_lora, a.up());
            let mut up_kernels = 1.0;
            if context > 0.0 {
                let ctx = r.gemm(context / k, a.kv_lora, a.up());
                up = OpT { gpu_s: up.gpu_s + ctx.gpu_s, cpu_s: up.cpu_s + ctx.cpu_s, src: up.src.max(ctx.src) };
                up_kernels = 2.0;
            }
            let calls = b.prefill.len() as f64 / k;
            let att = if vllm {
                OpT { gpu_s: (sum - (calls - 1.0).max(0.0) * self.attn_floor).max(longest), cpu_s: self.prefill_cpu, src }
            } else {
                OpT { gpu_s: sum, cpu_s: cpu, src }
            };
            g += up.gpu_s + att.gpu_s;
            c += up.cpu_s + att.cpu_s;
            push("kv_b_proj", up, up_kernels);
            push("attention_prefill", att, if vllm { 1.0 } else { b.prefill.len() as f64 });
        }
        if b.decode_seqs > 0 {
            // Every query row (a decode's token and its drafts) is absorbed and up-projected.
            let seqs = (b.decode_seqs + b.spec_tokens) as f64 / k;
            // KV read excludes the token written this step.
            let tokens = b.decode_context_sum.saturating_sub(b.decode_seqs) as f64 / k;
            let uk = r.gemm(seqs, a.nope, a.hq * a.kv_lora);
            let uv = r.gemm(seqs, a.kv_lora, a.hq * a.v);
            let att = OpT { gpu_s: self.decode_attention_s(b, tokens, k, want), ..self.decode_op(tokens, self.decode_cpu) };
            g += uk.gpu_s + att.gpu_s + uv.gpu_s;
            c += uk.cpu_s + att.cpu_s + uv.cpu_s;
            push("w_uk_absorb", uk, 1.0);
            push("attention_decode", att, 1.0);
            push("w_uv_up", uv, 1.0);
        }
        if let Some(d) = detail {
            d.extend(ops);
        }
        (g, c)
    }

    /// Kernels of MLA's attention part in one layer ([`StepModel::mla_attention`]).
    fn mla_kernels(&self, b: &BatchShape) -> f64 {
        let mut n = 0.0;
        if !b.prefill.is_empty() {
            let calls = if self.engine.fused() { 1.0 } else { b.prefill.len() as f64 };
            let context = b.prefill.iter().any(|i| i.context_before > 0);
            n += calls + if context { 2.0 } else { 1.0 };
        }
        if b.decode_seqs > 0 {
            n += 3.0;
        }
        n
    }

    /// One of vLLM's single-kernel elementwise ops: the profile's table where its engine ran
    /// the op as one kernel too, else one kernel moving `bytes_tok` per token at the copy
    /// bandwidth (a multi-kernel table, such as the reference engine's 16-kernel RoPE, times
    /// other work).
    fn vllm_elem(&self, op: &str, m: f64, width: f64, bytes_tok: f64) -> OpT {
        self.r.fused_elementwise(op, m, width, bytes_tok)
    }

    /// Apply the fusion policy to one elementwise group; `handoff[i]` = bytes per token op i
    /// hands to op i+1.
    fn fuse(&self, m: f64, ops: Vec<Elem>, handoff: &[f64]) -> Vec<Named> {
        let costs: Vec<ElemCost> = ops
            .iter()
            .enumerate()
            .map(|(i, e)| ElemCost { gpu_s: e.t.gpu_s, kernels: 1.0, bytes: m * e.bytes_tok, handoff_bytes: m * handoff.get(i).copied().unwrap_or(0.0) })
            .collect();
        let (kernels, _) = plan_fusion(&costs, &self.fusion, self.r.floor, self.r.copy_bw);
        kernels
            .into_iter()
            .map(|k| {
                let names: Vec<&str> = k.ops.iter().map(|&i| ops[i].name).collect();
                let unchanged = k.ops.len() == 1 && (k.gpu_s - ops[k.ops[0]].t.gpu_s).abs() <= 0.0;
                let (t, kernels) = if unchanged {
                    (ops[k.ops[0]].t, ops[k.ops[0]].kernels)
                } else {
                    (OpT { gpu_s: k.gpu_s, cpu_s: self.r.launch, src: Source::Model }, 1.0)
                };
                Named { name: names.join("+"), t, kernels }
            })
            .collect()
    }

    fn agg(&self, (pre, post, pro, pp): &(Vec<Named>, Vec<Named>, Vec<Named>, f64)) -> Agg {
        let mut a = Agg { pp: *pp, ..Agg::default() };
        (a.g_pre, a.c_pre, a.a_pre) = launch_overlap(pre);
        (a.g_post, a.c_post, a.a_post) = launch_overlap(post);
        a.g_pro = pro.iter().map(|o| o.t.gpu_s).sum();
        a.c_pro = pro.iter().map(|o| o.t.cpu_s).sum();
        let count = |ops: &[Named]| ops.iter().map(|o| o.kernels).sum::<f64>();
        (a.k_pre, a.k_post, a.k_pro) = (count(pre), count(post), count(pro));
        a
    }

    /// Kernels one elementwise op of the profile's tables launches unfused.
    fn kernels_of(&self, op: &str) -> f64 {
        match ELEMENTWISE_OPS.iter().position(|(name, _)| *name == op) {
            Some(i) => self.elem_kernels[i],
            None => 1.0,
        }
    }

    /// Kernels of a step's attention in one layer (one per prefill request, one for all
    /// decodes) and of its epilogue.
    fn other_kernels(&self, b: &BatchShape, sampled: f64) -> (f64, f64) {
        let calls = b.prefill.len() as f64 + if b.decode_seqs > 0 { 1.0 } else { 0.0 };
        // vLLM: one varlen call for every request of the step
        let att = if self.mla.is_some() {
            self.mla_kernels(b)
        } else if self.engine == Engine::Trtllm {
            // the context FMHA and the XQA kernel
            f64::from(u8::from(!b.prefill.is_empty()) + u8::from(b.decode_seqs > 0))
        } else if self.engine == Engine::Vllm {
            calls.min(1.0)
        } else {
            calls
        };
        let epi = if sampled > 0.0 { 2.0 + if self.tp > 1.0 { 1.0 } else { 0.0 } } else { 0.0 };
        (att, epi)
    }

    /// lm_head, sampler and the logits gather for `s` sampled rows, each (name, op).
    fn epilogue(&self, s: f64) -> Vec<Named> {
        if s <= 0.0 {
            return Vec::new();
        }
        let r = &self.r;
        let v = f64::from(self.vocab_shard);
        let mut out = vec![
            Named { name: "lm_head".into(), t: self.head_r.as_deref().unwrap_or(r).gemm(s, self.hidden as u32, self.vocab_shard), kernels: 1.0 },
            Named {
                name: "sampler".into(),
                t: OpT { gpu_s: r.floor + s * v * 2.0 / r.copy_bw, cpu_s: r.launch, src: Source::Roofline },
                kernels: 1.0,
            },
        ];
        if self.tp > 1.0 {
            let bytes = s * v * 2.0 * (self.tp - 1.0);
            let t = OpT { gpu_s: r.floor + bytes / r.link_bw + (self.tp - 1.0) * r.hop, cpu_s: r.launch, src: Source::Model };
            out.push(Named { name: "tp_logits_gather".into(), t, kernels: 1.0 });
        }
        out
    }

    fn epilogue_sum(&self, s: f64) -> (f64, f64) {
        self.epilogue(s).iter().fold((0.0, 0.0), |(g, c), o| (g + o.t.gpu_s, c + o.t.cpu_s))
    }

    /// Grid position of `m`: (index of the point at or below, weight of the next).
    #[inline(always)]
    fn locate(&self, m: f64) -> Option<(usize, f64)> {
        if !(1.0..=GRID_MAX_M).contains(&m) {
            return None;
        }
        let i = if m <= GRID_LINEAR_MAX as f64 {
            (m as usize).saturating_sub(1)
        } else {
            self.geometric_index(m)
        };
        let next = (i + 1).min(self.grid_m.len() - 1);
        let span = self.grid_m[next] - self.grid_m[i];
        Some((i, if span > 0.0 { (m - self.grid_m[i]) / span } else { 0.0 }))
    }

    /// For `m` in (64, 65,536]: the last grid point at or below `m`, without a logarithm.
    /// The bits of an f64 read as an integer are a piecewise-linear log2 that never exceeds
    /// the true one by more than 0.09 (exact at powers of two); the guess is then moved to the
    /// exact point by comparisons with the stored grid (0–2 steps), so the result is the
    /// binary search's.
    #[inline(always)]
    fn geometric_index(&self, m: f64) -> usize {
        const MANTISSA: f64 = (1u64 << 52) as f64;
        let log2_approx = m.to_bits() as f64 / MANTISSA - 1023.0;
        let above = ((log2_approx - 6.0) * GRID_PER_DOUBLING).max(0.0) as usize;
        let g = &self.grid_m;
        let mut i = (GRID_LINEAR_MAX - 1 + above).min(g.len() - 1);
        while i + 1 < g.len() && g[i + 1] <= m {
            i += 1;
        }
        while i > 0 && g[i] > m {
            i -= 1;
        }
        i
    }

    /// Block-remap cost of one layer's decode attention over the batch's decode requests,
    /// divided among `k` micro-batches, when the layer reads `t` of their `tokens` cached
    /// tokens (a local layer reads its window); 0 for a contiguous cache (see
    /// [`super::seed::remap_s`]).
    #[inline]
    fn remap(&self, b: &BatchShape, tokens: f64, t: f64, k: f64) -> f64 {
        let (entries, cycles, clock) = self.remap_consts;
        // (x / 1 is x: the division, on every decode step's critical path, only when split.)
        let seqs = if k == 1.0 { b.decode_seqs as f64 } else { b.decode_seqs as f64 / k };
        if self.per_request_blocks {
            // A local layer walks the blocks of its window only: the same share of them.
            let read = if tokens > 0.0 { t / tokens } else { 1.0 };
            let blocks = b.decode_blocks_1024 as f64 / 1024.0 / k * read;
            remap_blocks(blocks, seqs, entries, cycles, clock)
        } else if self.block_size > 0.0 && seqs > 0.0 {
            // `remap_with`'s arithmetic; a power-of-two block size divides exactly as its
            // reciprocal multiplies (`inv_block`), off the step's critical path.
            let blocks = if self.inv_block > 0.0 { t * self.inv_block } else { t / self.block_size };
            remap_blocks(blocks, seqs, entries, cycles, clock)
        } else {
            0.0
        }
    }

    /// Prefill attention of `new` tokens after `context` cached ones in one layer, averaged
    /// over the layers: global layers attend to the whole context; local ones run the same
    /// kernel over the (query, key) pairs their window or chunk leaves
    /// ([`local_pair_share`]): the kernel's floor stays, its work scales with the pairs.
    fn prefill_attention(&self, new: f64, context: f64) -> OpT {
        let full = self.r.attention_prefill_given_cpu(self.hq, self.hkv, self.hd, new, context, self.prefill_cpu);
        match self.mix.local {
            None => full,
            Some((kind, window, share)) => {
                let pairs = local_pair_share(kind, window, new, context);
                if pairs >= 1.0 {
                    return full;
                }
                let local = self.r.floor + (full.gpu_s - self.r.floor).max(0.0) * pairs;
                OpT { gpu_s: (1.0 - share) * full.gpu_s + share * local, ..full }
            }
        }
    }

    /// [`StepModel::prefill_attention`] of one prefill request, from the memo when it was
    /// priced before.
    #[inline]
    fn prefill_attention_of(&self, item: &PrefillItem, memo: Option<&mut StepMemo>) -> OpT {
        let Some(memo) = memo else {
            return self.prefill_attention(f64::from(item.new_tokens), f64::from(item.context_before));
        };
        let key = (u64::from(item.new_tokens) << 32) | u64::from(item.context_before);
        StepMemo::get_or_compute(&mut memo.prefill[StepMemo::slot(key)], key, || {
            self.prefill_attention(f64::from(item.new_tokens), f64::from(item.context_before))
        })
    }

    /// Decode attention's GPU time (s) in one layer, averaged over the layers, for the
    /// batch's decodes split over `k` micro-batches: `b.decode_seqs / k` sequences reading
    /// `tokens` cached tokens (with the block-remap cost). A local layer reads at most its
    /// window of each sequence: `min(tokens, seqs · w)`, exact when every sequence is longer
    /// than the window or none is (the step sees only the sum).
    fn decode_attention_s(&self, b: &BatchShape, tokens: f64, k: f64, exact: bool) -> f64 {
        let seqs = b.decode_seqs as f64 / k;
        let one = |t: f64| {
            let remap = self.remap(b, tokens, t, k);
            let att = if exact { self.decode_op(t, self.decode_cpu).gpu_s } else { self.decode_s(t) };
            self.verify_attention_s(b, t, att) + remap
        };
        match self.mix.local {
            None => one(tokens),
            Some((_, window, share)) => (1.0 - share) * one(tokens) + share * one(tokens.min(seqs * window)),
        }
    }

    /// Decode attention with the drafts of speculative decoding verified in the same call
    /// (`b.spec_tokens > 0`): each sequence's `1 + k` queries read its KV once, so the
    /// kernel stays bound by the KV read (`att`, s) until the queries' FLOPs — `2 · hq ·
    /// (qk + v)` per query and cached token, MLA's over the latent — take longer at the
    /// GPU's attention rate (the roofline's other side; FlashAttention and FlashMLA run a
    /// q-length of `1 + k` as one decode). Unchanged without drafts.
    #[inline]
    fn verify_attention_s(&self, b: &BatchShape, tokens: f64, att: f64) -> f64 {
        if b.spec_tokens == 0 || b.decode_seqs == 0 {
            return att;
        }
        let queries = (b.decode_seqs + b.spec_tokens) as f64 / b.decode_seqs as f64;
        let per_pair = match &self.mla {
            Some(a) => 2.0 * f64::from(a.hq) * f64::from(a.cached() + a.kv_lora),
            None => 4.0 * f64::from(self.hq) * f64::from(self.hd),
        };
        att.max(self.attn_floor + tokens * queries * per_pair / self.r.attn_flops)
    }

    /// Attention of one layer: (GPU s, CPU s), and the ops for a breakdown when asked.
    fn attention(&self, b: &BatchShape, detail: Option<&mut Vec<Named>>, memo: Option<&mut StepMemo>) -> (f64, f64) {
        if let Some(a) = &self.mla {
            return self.mla_attention(a, b, 1.0, detail);
        }
        if self.engine == Engine::Trtllm {
            return self.attention_trtllm(b, 1.0, detail);
        }
        if self.engine == Engine::Vllm {
            return self.attention_vllm(b, detail, memo);
        }
        self.attention_reference(b, detail, memo)
    }

    /// vLLM's one FlashAttention varlen call per layer over every request of the step: the
    /// work of each request's prefill and of the decodes adds up, their calls' fixed cost is
    /// paid once ([`StepModel::attn_floor`] saved per merged call).
    fn attention_vllm(&self, b: &BatchShape, detail: Option<&mut Vec<Named>>, mut memo: Option<&mut StepMemo>) -> (f64, f64) {
        let (mut sum, mut longest, mut calls) = (0.0, 0.0f64, 0.0);
        let mut src = Source::Table;
        for item in b.prefill {
            let t = self.prefill_attention_of(item, memo.as_deref_mut());
            sum += t.gpu_s;
            longest = longest.max(t.gpu_s);
            calls += 1.0;
            src = src.max(t.src);
        }
        if b.decode_seqs > 0 {
            // KV read excludes the token written this step.
            let tokens = b.decode_context_sum.saturating_sub(b.decode_seqs) as f64;
            let exact = detail.is_some();
            if exact {
                src = src.max(self.decode_op(tokens, self.decode_cpu).src);
            }
            let t = self.decode_attention_s(b, tokens, 1.0, exact);
            sum += t;
            longest = longest.max(t);
            calls += 1.0;
        }
        if calls == 0.0 {
            return (0.0, 0.0);
        }
        // One call (a pure decode step): the sum is that call's time, nothing is saved.
        let g = if calls == 1.0 { longest } else { longest.max(sum - (calls - 1.0) * self.attn_floor) };
        if let Some(d) = detail {
            d.push(Named { name: "attention".into(), t: OpT { gpu_s: g, cpu_s: self.decode_cpu, src }, kernels: 1.0 });
        }
        (g, self.decode_cpu)
    }

    /// The reference engine's attention: one call per prefill request, one for all decodes.
    fn attention_reference(&self, b: &BatchShape, mut detail: Option<&mut Vec<Named>>, mut memo: Option<&mut StepMemo>) -> (f64, f64) {
        let (mut g, mut c) = (0.0, 0.0);
        let mut pre = OpT { gpu_s: 0.0, cpu_s: 0.0, src: Source::Table };
        for item in b.prefill {
            let t = self.prefill_attention_of(item, memo.as_deref_mut());
            pre.gpu_s += t.gpu_s;
            pre.cpu_s += t.cpu_s;
            pre.src = pre.src.max(t.src);
        }
        g += pre.gpu_s;
        c += pre.cpu_s;
        if !b.prefill.is_empty() {
            if let Some(d) = detail.as_deref_mut() {
                d.push(Named { name: "attention_prefill".into(), t: pre, kernels: 1.0 });
            }
        }
        if b.decode_seqs > 0 {
            // KV read excludes the token written this step.
            let tokens = b.decode_context_sum.saturating_sub(b.decode_seqs) as f64;
            c += self.decode_cpu;
            match detail {
                Some(d) => {
                    let mut t = self.decode_op(tokens, self.decode_cpu);
                    t.gpu_s = self.decode_attention_s(b, tokens, 1.0, true);
                    g += t.gpu_s;
                    d.push(Named { name: "attention_decode".into(), t, kernels: 1.0 });
                }
                None => g += self.decode_attention_s(b, tokens, 1.0, false),
            }
        }
        (g, c)
    }

    fn mode(&self, b: &BatchShape) -> Mode {
        self.mode_at(b.tokens(), !b.prefill.is_empty())
    }

    /// The launch mode of a step of `tokens` tokens (`mixed`: with prefill work): a graph
    /// replay within the capture bound (vLLM: piecewise for mixed batches), else eager.
    fn mode_at(&self, tokens: u64, mixed: bool) -> Mode {
        if !self.graphs || tokens > self.graph_max_tokens || (mixed && self.engine == Engine::Trtllm) {
            // TensorRT-LLM captures generation-only batches; a step with context runs eagerly
            Mode::Eager
        } else if mixed && self.engine == Engine::Vllm {
            Mode::Piecewise
        } else {
            Mode::Graph
        }
    }

    /// Step time (s) from the aggregates; `(k_att, k_epi)`: kernels of attention per layer
    /// and of the epilogue; `seqs`: requests in the step. Every kernel is followed by the
    /// GPU's idle gap between dependent kernels (eager or within a graph).
    fn compose(&self, a: &Agg, epi: (f64, f64), att: (f64, f64), mode: Mode, kernels: (f64, f64), seqs: f64) -> f64 {
        let (forward, cpu) = self.compose_parts(a, epi, att, mode, kernels, seqs);
        forward.max(cpu)
    }

    /// (the forward pass plus PP transfers and the fixed CPU overhead, s; the CPU bound of an
    /// async-scheduled engine, s: vLLM's step cannot be shorter than its scheduler's CPU work,
    /// 0 for the reference engine).
    #[inline]
    fn compose_parts(&self, a: &Agg, (ge, ce): (f64, f64), (ga, ca): (f64, f64), mode: Mode, (k_att, k_epi): (f64, f64), seqs: f64) -> (f64, f64) {
        let l = self.layers;
        let forward = if mode != Mode::Eager {
            let kernels = a.k_pro + l * (a.k_pre + k_att + a.k_post) + k_epi;
            if self.engine.fused() {
                // async scheduling (vLLM) or the overlap scheduler (TensorRT-LLM): the replay
                // is launched while the previous step runs; a vLLM piecewise step waits for
                // the eager attention launch between pieces
                let pieces = if mode == Mode::Piecewise { l * 2.0 * EAGER_KERNEL_GAP_S } else { 0.0 };
                a.g_pro + l * (a.g_pre + ga + a.g_post) + ge + GRAPH_KERNEL_GAP_S * kernels + pieces
            } else {
                self.r.launch + a.g_pro + l * (a.g_pre + ga + a.g_post) + ge + GRAPH_KERNEL_GAP_S * kernels
            }
        } else {
            let gap = EAGER_KERNEL_GAP_S;
            let g = Agg {
                g_pre: a.g_pre + gap * a.k_pre,
                a_pre: a.a_pre + gap * a.k_pre,
                g_post: a.g_post + gap * a.k_post,
                a_post: a.a_post + gap * a.k_post,
                g_pro: a.g_pro + gap * a.k_pro,
                ..*a
            };
            eager_s(&g, (ga + gap * k_att, ca), (ge + gap * k_epi, ce), l)
        };
        (forward + a.pp + self.cpu_overhead, self.host_bound_s(seqs))
    }

    /// The engine's own CPU work for a step of `seqs` requests, which an engine that
    /// prepares step n+1 while the GPU runs step n cannot go below, s: vLLM's async
    /// scheduling ([`VLLM_STEP_CPU_S`], [`VLLM_SEQ_CPU_S`]), TensorRT-LLM's overlap
    /// scheduler ([`super::trtllm::HOST_SEQ_S`]); 0 for the synchronous reference engine.
    #[inline]
    fn host_bound_s(&self, seqs: f64) -> f64 {
        match self.engine {
            Engine::Vllm => VLLM_STEP_CPU_S + VLLM_SEQ_CPU_S * seqs,
            Engine::Trtllm => super::trtllm::HOST_SEQ_S * seqs,
            Engine::Reference => 0.0,
        }
    }

    /// Per-token aggregates of the dense ops at `m` tokens: grid-interpolated inside the
    /// grid, computed directly outside it.
    #[inline]
    fn dense_at(&self, m: f64) -> Agg {
        match self.locate(m) {
            Some((i, t)) => Agg::lerp(self.grid_at(i), self.grid_at((i + 1).min(self.cells.grid.len() - 1)), t),
            None if m <= 0.0 => Agg::default(),
            None => self.agg(&self.dense(m)),
        }
    }

    /// lm_head + sampler (GPU s, CPU s) for `s` sampled rows, grid-interpolated likewise.
    #[inline]
    fn epilogue_at(&self, s: f64) -> (f64, f64) {
        match self.locate(s) {
            Some((i, t)) => {
                let (a, c) = (self.epi_at(i), self.epi_at((i + 1).min(self.cells.epi.len() - 1)));
                (a.0 + t * (c.0 - a.0), a.1 + t * (c.1 - a.1))
            }
            None => self.epilogue_sum(s),
        }
    }

    /// Duration of the step, s (grid-interpolated dense part).
    pub fn step_s(&self, b: &BatchShape) -> f64 {
        self.step_s_memo(b, None)
    }

    /// [`StepModel::step_s`], with what mixed steps repeat taken from `memo` when given.
    pub fn step_s_memo(&self, b: &BatchShape, mut memo: Option<&mut StepMemo>) -> f64 {
        if self.dp > 1.0 || self.ep.is_some() {
            return self.ep_step_s(b, None);
        }
        if let Some(f) = self.decode_fixed(b) {
            let att = self.attention(b, None, None);
            return self.compose(&f.dense, f.epi, att, f.mode, f.kernels, seqs(b));
        }
        let f = self.step_parts(b, memo.as_deref_mut());
        let att = self.attention(b, None, memo);
        self.compose(&f.dense, f.epi, att, f.mode, f.kernels, seqs(b))
    }

    /// [`StepModel::fixed_parts`] of any step, from the memo when a step with the same
    /// tokens, sampled rows, prefill requests and decodes was priced before. Those decide
    /// them except with MLA (its kernel count reads the decodes' shape) and under
    /// TensorRT-LLM (its padded rows read the sequence count and drafts): computed then.
    #[inline]
    fn step_parts(&self, b: &BatchShape, memo: Option<&mut StepMemo>) -> DecodeFixed {
        // (Sampled rows and prefill requests beyond what the key packs: priced in full.)
        let keyed = self.mla.is_none() && self.engine != Engine::Trtllm && b.sampled < 1 << 32 && b.prefill.len() < 1 << 31;
        let Some(memo) = memo.filter(|_| keyed) else {
            return self.fixed_parts(b);
        };
        let tokens = b.tokens();
        let shape = (b.sampled << 32) | ((b.prefill.len() as u64) << 1) | u64::from(b.decode_seqs > 0);
        StepMemo::get_or_compute(&mut memo.parts[StepMemo::slot(tokens ^ shape.rotate_left(17))], (tokens, shape), || self.fixed_parts(b))
    }

    /// The parts of `b`'s price other than attention.
    #[inline]
    fn fixed_parts(&self, b: &BatchShape) -> DecodeFixed {
        let mode = self.mode(b);
        let (m, s) = self.trtllm_rows(b, mode, b.tokens() as f64, b.sampled as f64);
        DecodeFixed { dense: self.dense_at(m), epi: self.epilogue_at(s), mode, kernels: self.other_kernels(b, s) }
    }

    /// A pure decode step's parts other than attention, from the memo: a step of `n`
    /// sequences, each decoding one token and sampled, no prefill, no drafts (then the
    /// tokens, the sampled rows, the launch mode, TensorRT-LLM's padded rows and the kernel
    /// counts are all functions of `n`, so the first such step's parts are every one's).
    /// `None` for any other step, beyond the memo, or with MLA (its kernel count reads the
    /// shape).
    #[inline]
    fn decode_fixed(&self, b: &BatchShape) -> Option<&DecodeFixed> {
        if !b.prefill.is_empty() || b.prefill_tokens != 0 || b.spec_tokens != 0 || b.sampled != b.decode_seqs || self.mla.is_some() {
            return None;
        }
        let cell = self.cells.fixed.get(usize::try_from(b.decode_seqs).ok()?)?;
        Some(cell.get_or_init(|| self.fixed_parts(b)))
    }

    /// What LoRA kernels are priced with ([`super::lora`]): the streaming bandwidth, the
    /// large-GEMM rate and the kernel floor, and the DP ranks that share a step's rows.
    pub(super) fn lora_rates(&self) -> (f64, f64, f64, f64) {
        (self.r.stream_bw, self.r.gemm_flops, self.r.floor, self.dp)
    }

    /// The warm-up plan of this replica's steps given the scheduler's per-rank token budget
    /// and seats ([`super::warmup`]): the `vllm` engine's fused-MoE configurations; `None`
    /// for a dense model, another engine, or warm-up off.
    pub fn warmup_plan(&self, budget: u32, max_num_seqs: u32) -> Option<super::warmup::WarmupPlan> {
        if self.engine != Engine::Vllm || self.moe.is_none() {
            return None;
        }
        super::warmup::WarmupPlan::new(
            &self.warmup,
            super::warmup::Startup {
                graph_max_tokens: if self.graphs { self.graph_max_tokens } else { 0 },
                profile_tokens: u64::from(budget),
                max_num_seqs: u64::from(max_num_seqs),
                ranks: u64::from(self.dp_ranks().max(1)),
            },
        )
    }

    /// Data-parallel attention ranks of a DP/EP replica (`deployment.dp`); 0 without DP or EP.
    pub fn dp_ranks(&self) -> u32 {
        if self.dp > 1.0 || self.ep.is_some() {
            self.dp as u32
        } else {
            0
        }
    }

    /// Pipeline stages (`deployment.pp`).
    pub fn stages(&self) -> u32 {
        self.pp as u32
    }

    /// Micro-batches of a pipelined step (pp > 1): `pp`, one per stage — the fewest that
    /// keep every stage busy in steady state (as vLLM's one-batch-per-stage "virtual
    /// engines") — but no more than the sequences in the batch (a sequence is not split).
    pub fn micro_batches(&self, b: &BatchShape) -> u32 {
        let seqs = b.prefill.len() as u64 + b.decode_seqs;
        (self.pp as u64).min(seqs).max(1) as u32
    }

    /// Duration (s) of a step of a PP replica run as a pipeline of `mb` micro-batches.
    ///
    /// Each micro-batch carries 1/mb of the batch: its dense part is priced at m/mb tokens,
    /// its attention at 1/mb of the prefills' and as a decode of 1/mb of the sequences and
    /// their KV, its lm_head and sampling at 1/mb of the sampled rows. Its forward pass
    /// through the whole model, F (plus the TP AllReduces of all stages when a topology
    /// prices them: `comm = Some((allreduce_s, xfer_s))`, both for one micro-batch), is
    /// split evenly over the stages (equal layer slices; embedding and lm_head are spread
    /// with them), τ = F / pp; each stage boundary costs x per micro-batch (the routed
    /// send/recv, else the model's link). The step lasts
    /// `pipeline_makespan([τ; pp], [x; pp − 1], mb)` = Σ τ + Σ x + (mb − 1) · max(τ, x),
    /// plus the scheduler's CPU overhead once.
    pub fn pipeline_s(&self, b: &BatchShape, mb: u32, comm: Option<(f64, f64)>) -> f64 {
        let k = f64::from(mb.max(1));
        let m = b.tokens() as f64 / k;
        let s = b.sampled as f64 / k;
        let (mut dense, epi, (ga, ca)) = self.share_parts(b, k);
        let model_xfer = if self.pp > 1.0 { dense.pp / (self.pp - 1.0) } else { 0.0 };
        dense.pp = 0.0;
        let mode = self.mode_at(m as u64, !b.prefill.is_empty());
        let mut forward = self.compose(&dense, epi, (ga, ca), mode, self.other_kernels(b, s), seqs(b) / k) - self.cpu_overhead;
        let xfer = match comm {
            Some((ar, x)) => {
                forward += ar;
                x
            }
            None => model_xfer,
        };
        let stages = self.pp.max(1.0) as usize;
        let tau = vec![forward / self.pp.max(1.0); stages];
        let x = vec![xfer; stages - 1];
        crate::topo::collective::pipeline_makespan(&tau, &x, mb) + self.cpu_overhead
    }

    /// The parts of a step carrying `1/k` of batch `b` (a pipeline micro-batch, one DP rank's
    /// share): the dense aggregates at `m/k` tokens, the epilogue at `1/k` of the sampled rows,
    /// and attention: `1/k` of the prefills' (summed over sequences) and a decode over `1/k`
    /// of the sequences and their KV.
    fn share_parts(&self, b: &BatchShape, k: f64) -> (Agg, (f64, f64), (f64, f64)) {
        let m = b.tokens() as f64 / k;
        let s = b.sampled as f64 / k;
        let dense = self.dense_at(m);
        let epi = self.epilogue_at(s);
        let (mut ga, mut ca) = (0.0, 0.0);
        if let Some(a) = &self.mla {
            (ga, ca) = self.mla_attention(a, b, k, None);
        } else if self.engine == Engine::Trtllm {
            (ga, ca) = self.attention_trtllm(b, k, None);
        } else {
            for item in b.prefill {
                let t = self.prefill_attention(f64::from(item.new_tokens), f64::from(item.context_before));
                ga += t.gpu_s / k;
                ca += t.cpu_s / k;
            }
            if b.decode_seqs > 0 {
                let tokens = b.decode_context_sum.saturating_sub(b.decode_seqs) as f64 / k;
                ga += self.decode_attention_s(b, tokens, k, false);
                ca += self.decode_cpu;
            }
        }
        if self.engine == Engine::Vllm && self.mla.is_none() {
            // one call per layer for a share's requests: their fixed costs merge
            let calls = (b.prefill.len() as f64 + if b.decode_seqs > 0 { 1.0 } else { 0.0 }) / k;
            ga = (ga - (calls - 1.0).max(0.0) * self.attn_floor).max(self.attn_floor.min(ga));
            ca = ca.min(self.decode_cpu);
        }
        (dense, epi, (ga, ca))
    }

    /// One DP rank's step carrying `1/k` of `b` (a rank's share, or half of it under
    /// two-batch overlap), s, without the expert exchange.
    fn rank_compute_s(&self, b: &BatchShape, k: f64) -> f64 {
        let (dense, epi, att) = self.share_parts(b, k);
        let m = b.tokens() as f64 / k;
        let mode = self.mode_at(libm::ceil(m) as u64, !b.prefill.is_empty());
        self.compose(&dense, epi, att, mode, self.other_kernels(b, b.sampled as f64 / k), seqs(b) / k)
    }

    /// The expert exchange of one MoE layer for a rank carrying `m` tokens, s: (dispatch,
    /// combine), on `costs` (a topology's) or the group's own.
    fn exchange(&self, b: &BatchShape, m: f64, costs: Option<&super::ep::A2aCosts>) -> (f64, f64) {
        let Some(ep) = &self.ep else { return (0.0, 0.0) };
        let top_k = self.moe.map_or(1.0, |x| x.1);
        let gamma = ep.balance.gamma(m * self.dp * top_k);
        super::ep::exchange_s(costs.unwrap_or(&ep.costs), ep.all_to_all, b.prefill.is_empty(), m, self.hidden, top_k, ep.ep, gamma)
    }

    /// A step of a DP/EP replica ([`super::ep`]), s: one rank's share of the batch, plus each
    /// MoE layer's dispatch and combine (`costs`: a topology's, else the group's own), or the
    /// two micro-batches' overlap of them.
    pub fn ep_step_s(&self, b: &BatchShape, costs: Option<&super::ep::A2aCosts>) -> f64 {
        self.ep_rank_s(b, self.dp, costs).0
    }

    /// (the step, its compute alone), s, of a rank carrying `1/k` of `b` (`k = dp` for a
    /// replica's batch, 1 for a rank's own).
    fn ep_rank_s(&self, b: &BatchShape, k: f64, costs: Option<&super::ep::A2aCosts>) -> (f64, f64) {
        let m = b.tokens() as f64 / k;
        let moe_layers = self.layers * self.mix.moe_share;
        let compute = self.rank_compute_s(b, k);
        let (d, c) = self.exchange(b, m, costs);
        match &self.ep {
            Some(ep) if ep.two_batch_overlap && m >= 2.0 => {
                let half = self.rank_compute_s(b, 2.0 * k) / self.layers;
                let (dh, ch) = self.exchange(b, m / 2.0, costs);
                let slowdown = match ep.all_to_all.resolve(b.prefill.is_empty()) {
                    super::ep::AllToAll::HighThroughput => self.sms / (self.sms - super::ep::DEEPEP_NORMAL_SMS).max(1.0),
                    _ => 1.0,
                };
                (super::ep::two_batch_overlap_s(self.layers, moe_layers, half, dh + ch, slowdown), compute)
            }
            _ => (compute + moe_layers * (d + c), compute),
        }
    }

    /// Exact per-op breakdown (ms, summed over layers); the lines sum to the exact total.
    pub fn breakdown(&self, b: &BatchShape) -> (Vec<OpCost>, bool) {
        let mode = self.mode(b);
        let (m, s) = self.trtllm_rows(b, mode, b.tokens() as f64, b.sampled as f64);
        let dense = self.dense(m);
        let a = self.agg(&dense);
        let epi_ops = self.epilogue(s);
        let epi = self.epilogue_sum(s);
        let mut att_ops = Vec::new();
        let att = self.attention(b, Some(&mut att_ops), None);
        let graph = mode != Mode::Eager;
        let (forward, cpu) = self.compose_parts(&a, epi, att, mode, self.other_kernels(b, s), seqs(b));
        let mut out: Vec<OpCost> = Vec::new();
        fn add(out: &mut Vec<OpCost>, name: &str, s: f64, src: Source) {
            match out.iter_mut().find(|o| o.op == name) {
                Some(o) => {
                    o.ms += s * 1e3;
                    o.source = o.source.max(src);
                }
                None => out.push(OpCost { op: name.to_string(), ms: s * 1e3, source: src }),
            }
        }
        let (pre, post, pro, pp) = &dense;
        for o in pro {
            add(&mut out, &o.name, o.t.gpu_s, o.t.src);
        }
        for o in pre.iter().chain(att_ops.iter()).chain(post.iter()) {
            add(&mut out, &o.name, self.layers * o.t.gpu_s, o.t.src);
        }
        for o in &epi_ops {
            add(&mut out, &o.name, o.t.gpu_s, o.t.src);
        }
        if *pp > 0.0 {
            add(&mut out, "pp_transfer", *pp, Source::Model);
        }
        if self.cpu_overhead > 0.0 {
            add(&mut out, "cpu_overhead", self.cpu_overhead, Source::Model);
        }
        let gpu: f64 = out.iter().map(|o| o.ms).sum::<f64>() * 1e-3;
        // replay launch (graph) or exposed CPU launches (eager), and the GPU's gaps between kernels
        let gaps = if self.engine.fused() && graph { "kernel_gaps" } else if graph { "graph_launch" } else { "launch_exposed" };
        add(&mut out, gaps, (forward - gpu).max(0.0), Source::Model);
        if cpu > forward {
            // async scheduling: the engine's CPU work per step outlasts the GPU's
            add(&mut out, "cpu_bound", cpu - forward, Source::Model);
        }
        (out, graph)
    }
}

/// Requests in a step.
#[inline]
fn seqs(b: &BatchShape) -> f64 {
    (b.prefill.len() as u64 + b.decode_seqs) as f64
}

/// Makespan of an eager step (see the module docs): prologue op, `l` identical layers with
/// attention `(ga, ca)` between the pre and post parts, epilogue `(ge, ce)`.
fn eager_s(a: &Agg, (ga, ca): (f64, f64), (ge, ce): (f64, f64), l: f64) -> f64 {
    let cl = a.c_pre + ca + a.c_post;
    let gl = a.g_pre + ga + a.g_post;
    let within = (a.a_pre + ga + a.g_post).max(a.c_pre + ca + a.g_post).max(a.c_pre + ca + a.a_post);
    let pro = a.c_pro + a.g_pro + l * gl + ge;
    let layers = a.c_pro + (l - 1.0).max(0.0) * cl.max(gl) + within + ge;
    let epi = a.c_pro + l * cl + ce + ge;
    pro.max(layers).max(epi)
}

/// For a run of eager kernels: (Σ GPU s, Σ CPU launch s, and the run's length when each
/// kernel waits for its launch: max over k of the launches up to k plus the GPU time from k on).
fn launch_overlap(ops: &[Named]) -> (f64, f64, f64) {
    let g: f64 = ops.iter().map(|o| o.t.gpu_s).sum();
    let (mut c, mut suffix, mut longest) = (0.0, g, 0.0f64);
    for o in ops {
        c += o.t.cpu_s;
        longest = longest.max(c + suffix);
        suffix -= o.t.gpu_s;
    }
    (g, c, longest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{resolve_gpu, resolve_model};

    fn model_8b() -> StepModel {
        let (m, g) = (resolve_model(&"llama-3-8b".into()).unwrap(), resolve_gpu(&"h200".into()).unwrap());
        StepModel::new(&StepSpec::default(), true, &m, &g, 1, 1, false)
    }

    /// A pure decode step priced from the memo costs, to the bit, what pricing it in full
    /// does, for every engine, with and without CUDA graphs, across the capture bound, and
    /// in either order of first use; other steps are priced in full.
    #[test]
    fn memoized_decode_steps_are_priced_to_the_bit() {
        let (m, g) = (resolve_model(&"llama-3-8b".into()).unwrap(), resolve_gpu(&"h100".into()).unwrap());
        for engine in [Engine::Vllm, Engine::Reference, Engine::Trtllm] {
            for graphs in [true, false] {
                let spec = StepSpec { engine, cuda_graphs: graphs, ..StepSpec::default() };
                let full = StepModel::new(&spec, true, &m, &g, 2, 1, false);
                let mut memo = full.clone();
                memo.set_max_num_seqs(300);
                let mut full = full;
                full.set_max_num_seqs(300);
                full.renew_cells(0); // no memo: every step priced in full
                memo.set_block_size(16);
                full.set_block_size(16);
                let item = [PrefillItem { new_tokens: 200, context_before: 64 }];
                for pass in 0..2 {
                    for n in [1u64, 2, 7, 64, 65, 128, 255, 256, 257, 300, 301, 4000] {
                        let n = if pass == 0 { n } else { 301 - n.min(300) };
                        for ctx in [n, n * 100 + 3, n * 2_000] {
                            let decode = BatchShape {
                                prefill: &[],
                                prefill_tokens: 0,
                                decode_seqs: n,
                                decode_context_sum: ctx,
                                context_sum_after: ctx,
                                sampled: n,
                                decode_blocks_1024: 0,
                                spec_tokens: 0,
                                lora_adapters: 0,
                            };
                            assert_eq!(memo.step_s(&decode).to_bits(), full.step_s(&decode).to_bits(), "{engine:?} graphs {graphs} n {n} ctx {ctx}");
                            let mixed = BatchShape { prefill: &item, prefill_tokens: 200, sampled: n + 1, ..decode };
                            assert_eq!(memo.step_s(&mixed).to_bits(), full.step_s(&mixed).to_bits());
                            let drafts = BatchShape { spec_tokens: 2 * n, ..decode };
                            assert_eq!(memo.step_s(&drafts).to_bits(), full.step_s(&drafts).to_bits());
                        }
                    }
                }
                assert!(memo.cells.fixed.iter().filter(|c| c.get().is_some()).count() > 10, "the memo was used");
            }
        }
    }

    /// Mixed and prefill steps priced through a [`StepMemo`] cost, to the bit, what pricing
    /// them without one does: for every engine, a dense model, one with local layers, an MoE
    /// model and one with MLA, over more keys than the memo has slots (so entries are
    /// replaced), each shape priced twice (the second from the memo).
    #[test]
    fn steps_priced_through_the_memo_cost_the_same_to_the_bit() {
        let g = resolve_gpu(&"h100".into()).unwrap();
        for name in ["llama-3-8b", "gpt-oss-20b", "mixtral-8x7b", "deepseek-v3"] {
            let m = resolve_model(&name.into()).unwrap();
            for engine in [Engine::Vllm, Engine::Reference, Engine::Trtllm] {
                let mut s = StepModel::new(&StepSpec { engine, ..StepSpec::default() }, true, &m, &g, 1, 1, false);
                s.set_max_num_seqs(256);
                s.set_block_size(16);
                let mut memo = StepMemo::default();
                let mut used = 0;
                for pass in 0..2 {
                    for k in 0..600u32 {
                        let items = [
                            PrefillItem { new_tokens: 1 + (k * 37) % 2048, context_before: (k * 101) % 3000 },
                            PrefillItem { new_tokens: 512, context_before: 0 },
                        ];
                        let prefill = &items[..1 + (k % 3 == 0) as usize];
                        let new: u64 = prefill.iter().map(|p| u64::from(p.new_tokens)).sum();
                        let n = u64::from(k % 5) * 13;
                        let b = BatchShape {
                            prefill,
                            prefill_tokens: new,
                            decode_seqs: n,
                            decode_context_sum: n * 700,
                            context_sum_after: n * 700 + new,
                            sampled: n + u64::from(k % 2),
                            decode_blocks_1024: 0,
                            spec_tokens: 0,
                            lora_adapters: 0,
                        };
                        let with = s.step_s_memo(&b, Some(&mut memo));
                        assert_eq!(with.to_bits(), s.step_s(&b).to_bits(), "{name} {engine:?} pass {pass} k {k}");
                        used += 1;
                    }
                }
                assert!(used > 2 * MEMO_SLOTS);
                // TensorRT-LLM's and MLA's steps are priced in full (see `step_parts`).
                if engine != Engine::Trtllm && m.mla.is_none() {
                    assert!(memo.parts.iter().filter(|e| e.is_some()).count() > MEMO_SLOTS / 2, "{name} {engine:?}: the memo was used");
                    assert!(memo.prefill.iter().filter(|e| e.is_some()).count() > MEMO_SLOTS / 2, "{name} {engine:?}");
                }
            }
        }
    }

    #[test]
    fn grid_index_is_the_binary_search() {
        let s = model_8b();
        let search = |m: f64| s.grid_m.partition_point(|&x| x <= m) - 1;
        let mut probes: Vec<f64> = Vec::new();
        for &g in &s.grid_m[GRID_LINEAR_MAX - 1..] {
            for d in [-1e-9, 0.0, 1e-9, 0.5, 1.0] {
                probes.push(g * (1.0 + d));
                probes.push(g + d);
                probes.push(g.floor() + d);
            }
        }
        probes.extend((65..=70_000).map(f64::from));
        for m in probes.into_iter().filter(|&m| m > GRID_LINEAR_MAX as f64 && m <= GRID_MAX_M) {
            assert_eq!(s.geometric_index(m), search(m), "m = {m}");
        }
    }

    /// The block-table remap a decode step pays is `seed::remap_with`'s to the bit: for
    /// block sizes that are powers of two (priced through the exact reciprocal) and others,
    /// with the decodes whole or split over micro-batches.
    #[test]
    fn step_remap_is_the_seed_remap_to_the_bit() {
        let mut s = model_8b();
        let (entries, cycles, clock) = s.remap_consts;
        let mut priced = 0;
        for bs in [1u32, 8, 16, 24, 32, 48, 64, 100, 128, 256, 1000] {
            s.set_block_size(bs);
            for seqs in [0u64, 1, 3, 64, 255, 4096] {
                let b = BatchShape {
                    prefill: &[],
                    prefill_tokens: 0,
                    decode_seqs: seqs,
                    decode_context_sum: 0,
                    context_sum_after: 0,
                    sampled: seqs,
                    decode_blocks_1024: 0,
                    spec_tokens: 0,
                    lora_adapters: 0,
                };
                for k in [1.0, 2.0, 3.0] {
                    for t in [0.0, 1.0, 17.0, 1000.0, 123_457.0, 9.9e6, 3.3e9] {
                        let want = super::super::seed::remap_with(t, seqs as f64 / k, f64::from(bs), entries, cycles, clock);
                        assert_eq!(s.remap(&b, t, t, k).to_bits(), want.to_bits(), "block {bs}, {seqs} seqs / {k}, {t} tokens");
                        priced += usize::from(want > 0.0);
                    }
                }
            }
        }
        assert!(priced > 100, "the cases reach the misses ({priced})");
    }

    #[test]
    fn decode_attention_grid_is_within_three_hundredths_of_a_percent() {
        for (name, tp) in [("llama-3-8b", 1), ("llama-3-70b", 4), ("llama-3-70b", 8), ("mixtral-8x7b", 2), ("deepseek-v3", 8), ("deepseek-v3", 1)] {
            let (m, g) = (resolve_model(&name.into()).unwrap(), resolve_gpu(&"h200".into()).unwrap());
            let s = StepModel::new(&StepSpec::default(), true, &m, &g, tp, 1, false);
            assert!(!s.cells.decode_grid.is_empty());
            let mut x = 1.0f64;
            while x < 7e7 {
                for v in [x, x + 0.5, x / 3.0] {
                    let (a, e) = (s.decode_s(v), s.decode_exact_s(v));
                    assert!((a / e - 1.0).abs() < 3e-4, "{name} tp{tp} at {v}: {a} vs {e}");
                }
                x = (x * 1.0007).floor() + 1.0;
            }
            // Integers below 128 and the points themselves are exact.
            for v in (1..128).map(f64::from).chain([4096.0, 4128.0, 1048576.0]) {
                assert_eq!(s.decode_s(v), s.decode_exact_s(v), "{v}");
            }
        }
        // Without attention tables (nor a profiled GPU's to bound it) the roofline line is
        // evaluated directly.
        let m = resolve_model(&"llama-3-8b".into()).unwrap();
        for (gpu, spec) in [("l40s", StepSpec::reference()), ("h100", StepSpec::reference())] {
            let g = resolve_gpu(&gpu.into()).unwrap();
            assert!(StepModel::new(&spec, true, &m, &g, 1, 1, false).cells.decode_grid.is_empty(), "{gpu}");
        }
    }

    #[test]
    fn lazy_grid_points_equal_the_eager_ones() {
        // Whatever order steps ask in, a grid point is the exact composition at its M.
        let s = model_8b();
        for i in [300usize.min(s.grid_m.len() - 1), 0, 63, 64, 150, 17] {
            let m = s.grid_m[i];
            let exact = s.agg(&s.dense(m));
            let lazy = s.grid_at(i);
            assert_eq!(format!("{lazy:?}"), format!("{exact:?}"), "point {i}");
            assert_eq!(s.epi_at(i), s.epilogue_sum(m));
        }
    }
}
