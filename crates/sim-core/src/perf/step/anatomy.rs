//! A step's anatomy: the kernels the step model prices, one row each, in launch order, on a
//! timeline — what the step's one number is made of.
//!
//! The kernels are the breakdown's operators unrolled: the prologue (embedding, first norm),
//! then every layer's ops (an op of n kernels, e.g. the reference engine's 16-kernel RoPE,
//! gives n rows sharing its time; a model whose layers differ — interleaved experts, local
//! attention — shows its average layer, as the price composes it), attention (one kernel per prefill request, one for all
//! decodes), then lm_head, the sampler and the logits gather. Times follow the same launch
//! model as the step's price ([`super::StepModel::compose`]):
//! * CUDA graph: one replay launch on the CPU, then the kernels back to back on the GPU,
//!   each followed by the in-graph gap;
//! * eager: the CPU launches unit after unit (an op; the prologue, the attention of a layer
//!   and the epilogue as one unit each, as the price treats them) and a kernel starts once
//!   launched and once the GPU is free after the previous one and its gap.
//!
//! Then the pipeline transfers the model prices itself, the scheduler's CPU overhead, and,
//! in front, a scheduling decision the step waited for (o1pro). Communication a topology
//! priced (`comm_s`) is spread over the TP AllReduce kernels (or one transfer row when the
//! replica has none). Streams: `compute`, `communication` (AllReduces, the logits gather,
//! PP transfers), `cpu` (graph launch, decision, scheduler overhead).
//!
//! The SM-occupancy estimate compares a kernel's thread blocks (CTAs) with the GPU's SMs:
//! GEMMs in 128×128 output tiles (64×128 below 128 rows, as CUTLASS picks for skinny
//! problems), elementwise ops one CTA per 1,024 elements, prefill attention one CTA per
//! 128 queries and head (FlashAttention), decode attention one per sequence, KV head and
//! 2,048-token split (flash-decoding), collectives 16 CTAs (NCCL channels). Occupancy is
//! the busy fraction of the SMs over the kernel's waves: `ctas / (⌈ctas / sms⌉ · sms)`.
//! These are estimates of shape, not measurements.

use serde::Serialize;

use crate::calib::Source;

use super::{seqs, BatchShape, Engine, PrefillItem, Mode, Named, StepModel, EAGER_KERNEL_GAP_S, GRAPH_KERNEL_GAP_S};

/// Output tile of a GEMM (rows × columns), and the row tile of skinny GEMMs.
const GEMM_TILE: f64 = 128.0;
const GEMM_TILE_SKINNY: f64 = 64.0;
/// Elements one CTA of an elementwise kernel covers (256 threads × 4).
const ELEMS_PER_CTA: f64 = 1024.0;
/// Queries per CTA of prefill attention.
const PREFILL_QUERY_TILE: f64 = 128.0;
/// KV tokens per CTA of decode attention (flash-decoding split).
const DECODE_SPLIT_TOKENS: f64 = 2048.0;
/// CTAs of a collective (NCCL channels).
const COLLECTIVE_CTAS: f64 = 16.0;

/// Per-kernel columns of an [`Anatomy`] (one entry per kernel, in launch order).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct KernelColumns {
    /// The operator the kernel belongs to (fused groups joined by `+`).
    pub name: Vec<String>,
    /// Transformer layer, 0-based; -1 outside the layers (prologue, epilogue, CPU rows).
    pub layer: Vec<i32>,
    /// Which kernel of its operator (0-based) and how many the operator launches.
    pub part: Vec<u32>,
    pub parts: Vec<u32>,
    /// When its CPU launch completed (eager) or the graph replay was launched, µs.
    pub launched_us: Vec<f64>,
    pub start_us: Vec<f64>,
    pub end_us: Vec<f64>,
    /// `compute`, `communication` or `cpu`.
    pub stream: Vec<&'static str>,
    /// Where its time came from (table, interpolated, roofline, model).
    pub source: Vec<Source>,
    /// Thread blocks it launches (estimate; 0 for CPU rows).
    pub ctas: Vec<f64>,
    /// Busy fraction of the GPU's SMs over its waves (estimate, 0–1; 0 for CPU rows).
    pub sm_occupancy: Vec<f64>,
}

impl KernelColumns {
    /// Add one row outside the layers spanning `[start_us, end_us]` on the compute stream,
    /// priced by a model rather than a kernel table (a linear model's step, a drafter's passes).
    pub fn push_span(&mut self, name: String, start_us: f64, end_us: f64) {
        self.name.push(name);
        self.layer.push(-1);
        self.part.push(0);
        self.parts.push(1);
        self.launched_us.push(start_us);
        self.start_us.push(start_us);
        self.end_us.push(end_us);
        self.stream.push("compute");
        self.source.push(Source::Model);
        self.ctas.push(0.0);
        self.sm_occupancy.push(0.0);
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.name.len()
    }

    /// No rows.
    pub fn is_empty(&self) -> bool {
        self.name.is_empty()
    }

    /// A CPU row (outside the layers, one part, no thread blocks) from `start` to `end`, s.
    fn push_cpu(&mut self, name: &str, start: f64, end: f64) {
        self.name.push(name.to_string());
        self.layer.push(-1);
        self.part.push(0);
        self.parts.push(1);
        self.launched_us.push(start * 1e6);
        self.start_us.push(start * 1e6);
        self.end_us.push(end * 1e6);
        self.stream.push("cpu");
        self.source.push(Source::Model);
        self.ctas.push(0.0);
        self.sm_occupancy.push(0.0);
    }
}

/// The kernels of one step on a timeline ([module docs](self)).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Anatomy {
    /// The end of the timeline, ms.
    pub step_ms: f64,
    /// Ran as one CUDA-graph replay (else eager launches).
    pub graph: bool,
    /// The replica is pipelined (pp > 1): the rows are the whole batch's forward pass
    /// through every stage in turn, not the micro-batched pipeline the step's price is.
    pub pipelined: bool,
    /// Streaming multiprocessors of the GPU (the occupancy's denominator).
    pub sms: u32,
    pub kernels: KernelColumns,
}

/// One operator placed in a launch unit.
#[derive(Clone)]
struct Op {
    name: String,
    layer: i32,
    /// Kernels it launches, averaged over the layers (an op only some layers run counts
    /// at its share): it gets ⌈kernels⌉ rows (at least one) and the gaps of `kernels`.
    kernels: f64,
    gpu_s: f64,
    src: Source,
    stream: &'static str,
    ctas: f64,
}

/// Operators the CPU launches together (the price's unit), with their launch cost.
struct Unit {
    cpu_s: f64,
    ops: Vec<Op>,
    /// GPU idle after the unit's kernels (vLLM's piecewise graphs around attention).
    idle_s: f64,
}

fn occupancy(ctas: f64, sms: f64) -> f64 {
    if ctas <= 0.0 || sms <= 0.0 {
        return 0.0;
    }
    let waves = (ctas / sms).ceil();
    ctas / (waves * sms)
}

fn gemm_ctas(m: f64, n: f64) -> f64 {
    let tm = if m < GEMM_TILE { GEMM_TILE_SKINNY } else { GEMM_TILE };
    (m / tm).ceil().max(1.0) * (n / GEMM_TILE).ceil().max(1.0)
}

impl StepModel {
    /// Thread blocks of a dense-part or epilogue operator at `m` rows.
    fn ctas_of(&self, name: &str, m: f64) -> f64 {
        let (hq, hkv, hd) = (f64::from(self.hq), f64::from(self.hkv), f64::from(self.hd));
        let top_k = self.moe.map_or(1.0, |x| x.1);
        let elems = |width: f64| (m * width / ELEMS_PER_CTA).ceil().max(1.0);
        match name {
            "qkv" => gemm_ctas(m, f64::from(self.qkv.1)),
            // MLA's projections (their widths on this GPU).
            "fused_qkv_a_proj" => gemm_ctas(m, self.mla.map_or(1.0, |a| f64::from(a.q_lora + a.cached()))),
            "kv_a_proj_with_mqa" => gemm_ctas(m, self.mla.map_or(1.0, |a| f64::from(a.cached()))),
            "q_proj" | "q_b_proj" => gemm_ctas(m, self.mla.map_or(1.0, |a| f64::from(a.hq * a.qk()))),
            "o" => gemm_ctas(m, f64::from(self.o.1)),
            "gate_up" => gemm_ctas(m * top_k, f64::from(self.gate_up.1)),
            "down" => gemm_ctas(m * top_k, f64::from(self.down.1)),
            "dense_gate_up" => gemm_ctas(m, f64::from(self.mix.dense_gate_up.1)),
            "dense_down" => gemm_ctas(m, f64::from(self.mix.dense_down.1)),
            "shared_gate_up" => gemm_ctas(m, f64::from(self.mix.shared.map_or(1, |x| x.0 .1))),
            "shared_down" => gemm_ctas(m, f64::from(self.mix.shared.map_or(1, |x| x.1 .1))),
            "qkv_bias" => 0.0,
            "lm_head" => gemm_ctas(m, f64::from(self.vocab_shard)),
            "moe_router" => gemm_ctas(m, f64::from(self.moe.map_or(1, |x| x.2))),
            "tp_allreduce" | "tp_logits_gather" | "pp_transfer" | "topology_comm" => COLLECTIVE_CTAS,
            "sampler" => elems(f64::from(self.vocab_shard)),
            "moe_permute" => elems(top_k * self.hidden),
            "moe_quant" => elems(self.hidden + top_k * self.expert_inter),
            other => {
                // Elementwise ops, fused or not: the widest member sets the grid.
                other
                    .split('+')
                    .map(|op| match (op, &self.mla) {
                        ("rope_q_and_k", Some(a)) => elems(f64::from((a.hq + 1) * a.rope)),
                        ("rope_q_and_k", None) => elems((hq + hkv) * hd),
                        ("kv_write", Some(a)) => elems(f64::from(a.cached())),
                        ("kv_write", None) => elems(2.0 * hkv * hd),
                        ("q_a_layernorm", Some(a)) => elems(f64::from(a.q_lora)),
                        ("kv_a_layernorm", Some(a)) => elems(f64::from(a.kv_lora)),
                        ("attn_out_transpose", _) => elems(f64::from(self.o.0)),
                        ("silu_mul" | "gelu_mul", _) => elems(self.inter_shard * top_k),
                        ("shared_silu_mul" | "shared_gelu_mul", _) => elems(self.mix.shared.map_or(1.0, |x| x.2)),
                        ("qk_norm", _) => elems(hq * hd),
                        _ => elems(self.hidden),
                    })
                    .fold(1.0, f64::max)
            }
        }
    }

    fn op(&self, n: &Named, layer: i32, m: f64) -> Op {
        let stream = match n.name.as_str() {
            "tp_allreduce" | "tp_logits_gather" => "communication",
            _ => "compute",
        };
        Op {
            name: n.name.clone(),
            layer,
            kernels: n.kernels,
            gpu_s: n.t.gpu_s,
            src: n.t.src,
            stream,
            ctas: self.ctas_of(&n.name, m),
        }
    }

    /// The anatomy of a step of batch `b` (see the [module docs](self)). `comm_s`: the
    /// communication a topology priced for it (0 without one); `decision_s`: the decision
    /// latency it waited for.
    pub fn anatomy(&self, b: &BatchShape, comm_s: f64, decision_s: f64) -> Anatomy {
        if self.dp > 1.0 {
            // One rank's step: every dp-th prefill and 1/dp of the decodes ([`super::super::ep`]).
            let k = self.dp as usize;
            let prefill: Vec<PrefillItem> = b.prefill.iter().step_by(k).copied().collect();
            let div = |x: u64| x.div_ceil(k as u64);
            let rank = BatchShape {
                prefill: &prefill,
                prefill_tokens: prefill.iter().map(|p| u64::from(p.new_tokens)).sum(),
                decode_seqs: div(b.decode_seqs),
                decode_context_sum: div(b.decode_context_sum),
                context_sum_after: div(b.context_sum_after),
                sampled: div(b.sampled),
                decode_blocks_1024: div(b.decode_blocks_1024),
                spec_tokens: div(b.spec_tokens),
                lora_adapters: b.lora_adapters,
            };
            return self.rank_anatomy(&rank, b.prefill.is_empty(), comm_s, decision_s);
        }
        self.rank_anatomy(b, b.prefill.is_empty(), comm_s, decision_s)
    }

    /// The anatomy of one rank's step `b` (`decode_only`: the replica's step has no prefill
    /// work, which picks the exchange kernels).
    fn rank_anatomy(&self, b: &BatchShape, decode_only: bool, comm_s: f64, decision_s: f64) -> Anatomy {
        let mode = self.mode(b);
        let graph = mode != Mode::Eager;
        let vllm = self.engine == Engine::Vllm;
        // vLLM's piecewise graphs (mixed batches): the GPU waits for attention's eager
        // launch between the pieces of each layer, twice.
        let piece_gap = if vllm && mode == Mode::Piecewise { 2.0 * EAGER_KERNEL_GAP_S } else { 0.0 };
        let mut units = self.launch_units(b, piece_gap, comm_s);
        self.add_exchanges(&mut units, b, decode_only);
        let (kernels, end_s) = self.timeline(&units, b, graph, self.engine.fused(), decision_s);
        Anatomy { step_ms: end_s * 1e3, graph, pipelined: self.pp > 1.0, sms: self.sms as u32, kernels }
    }

    /// The step's launch units in order: the prologue, each layer's operators before
    /// attention, attention (followed by `piece_gap` of idle GPU), after attention, the
    /// epilogue, the pipeline transfer, with the topology's communication spread over them.
    fn launch_units(&self, b: &BatchShape, piece_gap: f64, comm_s: f64) -> Vec<Unit> {
        let (m, s) = self.trtllm_rows(b, self.mode(b), b.tokens() as f64, b.sampled as f64);
        let mut units: Vec<Unit> = Vec::new();
        if m == 0.0 && s == 0.0 {
            return units;
        }
        let (pre, post, pro, pp) = self.dense(m);
        units.push(Unit { cpu_s: pro.iter().map(|o| o.t.cpu_s).sum(), ops: pro.iter().map(|o| self.op(o, -1, m)).collect(), idle_s: 0.0 });
        let attention = self.attention_unit(b);
        for layer in 0..self.layers as i32 {
            for o in &pre {
                units.push(Unit { cpu_s: o.t.cpu_s, ops: vec![self.op(o, layer, m)], idle_s: 0.0 });
            }
            let (cpu_s, ops) = &attention;
            units.push(Unit { cpu_s: *cpu_s, ops: ops.iter().map(|o| Op { layer, ..o.clone() }).collect(), idle_s: piece_gap });
            for o in &post {
                units.push(Unit { cpu_s: o.t.cpu_s, ops: vec![self.op(o, layer, m)], idle_s: 0.0 });
            }
        }
        let epi = self.epilogue(s);
        units.push(Unit { cpu_s: epi.iter().map(|o| o.t.cpu_s).sum(), ops: epi.iter().map(|o| self.op(o, -1, s)).collect(), idle_s: 0.0 });
        if pp > 0.0 {
            let ctas = COLLECTIVE_CTAS;
            units.push(Unit { cpu_s: 0.0, ops: vec![Op { name: "pp_transfer".into(), layer: -1, kernels: 1.0, gpu_s: pp, src: Source::Model, stream: "communication", ctas }], idle_s: 0.0 });
        }
        self.spread_comm(&mut units, comm_s);
        units
    }

    /// The units laid out in time: every kernel's launch, start and end (a unit's kernels
    /// start once the GPU is free and the CPU has launched them; eagerly launched units cost
    /// their CPU time first, a graph replay one launch), then the CPU rows that bound the
    /// step. Returns the kernels and the step's end, s.
    fn timeline(&self, units: &[Unit], b: &BatchShape, graph: bool, overlap: bool, decision_s: f64) -> (KernelColumns, f64) {
        let mut k = KernelColumns::default();
        let mut t0 = 0.0;
        if decision_s > 0.0 {
            k.push_cpu("scheduler_decision", 0.0, decision_s);
            t0 = decision_s;
        }
        let (gap, mut cpu, mut gpu) = if graph && overlap {
            // async scheduling (vLLM), the overlap scheduler (TensorRT-LLM): the replay was
            // launched while the previous step ran
            (GRAPH_KERNEL_GAP_S, t0, t0)
        } else if graph {
            k.push_cpu("graph_launch", t0, t0 + self.r.launch);
            (GRAPH_KERNEL_GAP_S, t0 + self.r.launch, t0 + self.r.launch)
        } else {
            (EAGER_KERNEL_GAP_S, t0, t0)
        };
        for u in units {
            if !graph {
                cpu += u.cpu_s;
            }
            let mut t = gpu.max(cpu);
            for o in &u.ops {
                let rows = o.kernels.ceil().max(1.0) as u32;
                let each = o.gpu_s / f64::from(rows);
                let gap_each = if o.name == "pp_transfer" || o.name == "topology_comm" { 0.0 } else { gap * o.kernels / f64::from(rows) };
                for part in 0..rows {
                    k.name.push(o.name.clone());
                    k.layer.push(o.layer);
                    k.part.push(part);
                    k.parts.push(rows);
                    k.launched_us.push(cpu * 1e6);
                    k.start_us.push(t * 1e6);
                    k.end_us.push((t + each) * 1e6);
                    k.stream.push(o.stream);
                    k.source.push(o.src);
                    k.ctas.push(o.ctas);
                    k.sm_occupancy.push(occupancy(o.ctas, self.sms));
                    t += each + gap_each;
                }
            }
            gpu = t + u.idle_s;
        }
        if overlap {
            // The engine's CPU work per step bounds it from below (async scheduling).
            let bound = t0 + self.host_bound_s(seqs(b));
            if bound > gpu {
                k.push_cpu("cpu_bound", gpu, bound);
                gpu = bound;
            }
        }
        if self.cpu_overhead > 0.0 {
            k.push_cpu("cpu_overhead", gpu, gpu + self.cpu_overhead);
            gpu += self.cpu_overhead;
        }
        (k, gpu)
    }

    /// Attention of one layer as one launch unit: its CPU cost and one op per kernel (each
    /// prefill request, then the decodes together), remap included.
    fn attention_unit(&self, b: &BatchShape) -> (f64, Vec<Op>) {
        if self.mla.is_some() {
            return self.mla_attention_ops(b);
        }
        let (cpu, ops) = self.attention_calls(b);
        if self.engine == Engine::Trtllm {
            // TensorRT-LLM: one context FMHA kernel over the step's prefills, one XQA kernel
            // over its generation requests
            let mut named = Vec::new();
            let (_, cpu_s) = self.attention_trtllm(b, 1.0, Some(&mut named));
            let prefill_ctas: f64 = ops.iter().filter(|o| o.name == "attention_prefill").map(|o| o.ctas).sum();
            let decode_ctas: f64 = ops.iter().filter(|o| o.name == "attention_decode").map(|o| o.ctas).sum();
            let ops = named
                .into_iter()
                .map(|n| {
                    let ctas = if n.name == "attention_context" { prefill_ctas } else { decode_ctas };
                    Op { name: n.name, layer: -1, kernels: 1.0, gpu_s: n.t.gpu_s, src: n.t.src, stream: "compute", ctas }
                })
                .collect();
            return (cpu_s, ops);
        }
        if self.engine != Engine::Vllm || ops.len() < 2 {
            return (cpu, ops);
        }
        // vLLM: one FlashAttention varlen call per layer over every request of the step.
        let (gpu_s, cpu_s) = self.attention_vllm(b, None, None);
        let src = ops.iter().map(|o| o.src).max().unwrap_or(Source::Table);
        let ctas = ops.iter().map(|o| o.ctas).sum();
        (cpu_s, vec![Op { name: "attention".into(), layer: -1, kernels: 1.0, gpu_s, src, stream: "compute", ctas }])
    }

    /// Attention of one layer as separate calls: each prefill request's, then the decodes'.
    fn attention_calls(&self, b: &BatchShape) -> (f64, Vec<Op>) {
        let (mut cpu, mut ops) = (0.0, Vec::new());
        let (hq, hkv) = (f64::from(self.hq), f64::from(self.hkv));
        for item in b.prefill {
            let t = self.prefill_attention(f64::from(item.new_tokens), f64::from(item.context_before));
            cpu += t.cpu_s;
            let ctas = (f64::from(item.new_tokens) / PREFILL_QUERY_TILE).ceil().max(1.0) * hq;
            ops.push(Op { name: "attention_prefill".into(), layer: -1, kernels: 1.0, gpu_s: t.gpu_s, src: t.src, stream: "compute", ctas });
        }
        if b.decode_seqs > 0 {
            let tokens = b.decode_context_sum.saturating_sub(b.decode_seqs) as f64;
            let src = self.decode_op(tokens, self.decode_cpu).src;
            let gpu_s = self.decode_attention_s(b, tokens, 1.0, true);
            cpu += self.decode_cpu;
            let seqs = b.decode_seqs as f64;
            let splits = (tokens / seqs / DECODE_SPLIT_TOKENS).ceil().max(1.0);
            ops.push(Op { name: "attention_decode".into(), layer: -1, kernels: 1.0, gpu_s, src, stream: "compute", ctas: seqs * hkv * splits });
        }
        (cpu, ops)
    }

    /// MLA's attention part of one layer as one launch unit: its GEMMs and kernels in order
    /// ([`StepModel::mla_attention`]), with their thread blocks (prefill attention as
    /// FlashAttention's tiles over the `hq` heads, the latent decode one CTA per sequence,
    /// 2,048-token split and 64 heads, as FlashMLA tiles heads).
    fn mla_attention_ops(&self, b: &BatchShape) -> (f64, Vec<Op>) {
        let Some(a) = self.mla else { return (0.0, Vec::new()) };
        let mut named = Vec::new();
        let (_, cpu) = self.mla_attention(&a, b, 1.0, Some(&mut named));
        let new: f64 = b.prefill.iter().map(|i| f64::from(i.new_tokens)).sum();
        let context: f64 = b.prefill.iter().map(|i| f64::from(i.context_before)).sum();
        let seqs = b.decode_seqs as f64;
        let tokens = b.decode_context_sum.saturating_sub(b.decode_seqs) as f64;
        let hq = f64::from(a.hq);
        let ops = named
            .iter()
            .map(|n| {
                let ctas = match n.name.as_str() {
                    "kv_b_proj" => gemm_ctas(new, f64::from(a.up())) + if context > 0.0 { gemm_ctas(context, f64::from(a.up())) } else { 0.0 },
                    "attention_prefill" => b.prefill.iter().map(|i| (f64::from(i.new_tokens) / PREFILL_QUERY_TILE).ceil().max(1.0) * hq).sum(),
                    "w_uk_absorb" => gemm_ctas(seqs, f64::from(a.hq * a.kv_lora)),
                    "w_uv_up" => gemm_ctas(seqs, f64::from(a.hq * a.v)),
                    _ => seqs.max(1.0) * (tokens / seqs.max(1.0) / DECODE_SPLIT_TOKENS).ceil().max(1.0) * (hq / 64.0).ceil(),
                };
                Op { name: n.name.clone(), layer: -1, kernels: n.kernels, gpu_s: n.t.gpu_s, src: n.t.src, stream: "compute", ctas }
            })
            .collect();
        (cpu, ops)
    }

    /// Spread communication a topology priced over the TP AllReduce kernels (each carries
    /// the same bytes), or add it as one transfer when the replica has none.
    /// Expert parallelism: each MoE layer's dispatch before its experts' GEMMs and combine
    /// after them, on the communication stream, at the layers' MoE share like the ops they
    /// surround (under two-batch overlap, only the part the other micro-batch's compute does
    /// not hide).
    fn add_exchanges(&self, units: &mut Vec<Unit>, b: &BatchShape, decode_only: bool) {
        let Some(ep) = &self.ep else { return };
        let m = b.tokens() as f64;
        let top_k = self.moe.map_or(1.0, |x| x.1);
        let gamma = ep.balance.gamma(m * self.dp * top_k);
        let (d, c) = super::super::ep::exchange_s(&ep.costs, ep.all_to_all, decode_only, m, self.hidden, top_k, ep.ep, gamma);
        let share = self.mix.moe_share;
        // Two-batch overlap: the exchanges' exposed part only; when the two half batches cost
        // more than the overlap saves, one row for the excess (the split's smaller GEMMs
        // and extra launches).
        let (mut exposed, mut split_s) = (1.0, 0.0);
        if ep.two_batch_overlap && m >= 2.0 {
            let (total, compute) = self.ep_rank_s(b, 1.0, None);
            let exchange = self.layers * share * (d + c);
            exposed = ((total - compute) / exchange.max(1e-12)).clamp(0.0, 1.0);
            split_s = (total - compute - exchange).max(0.0);
        }
        let op = |name: &str, t: f64, layer: i32| Op {
            name: name.into(),
            layer,
            kernels: share,
            gpu_s: t * share * exposed,
            src: Source::Model,
            stream: "communication",
            ctas: COLLECTIVE_CTAS,
        };
        let mut out = Vec::with_capacity(units.len() + 2 * self.layers as usize);
        for u in units.drain(..) {
            let layer = u.ops.first().map_or(-1, |o| o.layer);
            let name = u.ops.first().map(|o| o.name.clone()).unwrap_or_default();
            if name == "gate_up" && layer >= 0 {
                out.push(Unit { cpu_s: 0.0, ops: vec![op("moe_dispatch", d, layer)], idle_s: 0.0 });
            }
            let after = name == "down" && layer >= 0;
            out.push(u);
            if after {
                out.push(Unit { cpu_s: 0.0, ops: vec![op("moe_combine", c, layer)], idle_s: 0.0 });
            }
        }
        if split_s > 0.0 {
            let op = Op { name: "two_batch_split".into(), layer: -1, kernels: 1.0, gpu_s: split_s, src: Source::Model, stream: "compute", ctas: 0.0 };
            out.push(Unit { cpu_s: 0.0, ops: vec![op], idle_s: 0.0 });
        }
        *units = out;
    }

    fn spread_comm(&self, units: &mut Vec<Unit>, comm_s: f64) {
        if comm_s <= 0.0 {
            return;
        }
        let count = units.iter().flat_map(|u| &u.ops).filter(|o| o.name == "tp_allreduce").count();
        if count == 0 {
            let op = Op { name: "topology_comm".into(), layer: -1, kernels: 1.0, gpu_s: comm_s, src: Source::Model, stream: "communication", ctas: COLLECTIVE_CTAS };
            units.push(Unit { cpu_s: 0.0, ops: vec![op], idle_s: 0.0 });
            return;
        }
        let each = comm_s / count as f64;
        for o in units.iter_mut().flat_map(|u| u.ops.iter_mut()).filter(|o| o.name == "tp_allreduce") {
            o.gpu_s += each;
        }
    }
}
