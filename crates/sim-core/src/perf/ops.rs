//! Operator times: each operator's GPU time and eager CPU launch cost, from the GPU's
//! calibration profile where it has the operator, else from a roofline.
//!
//! Profile tables time isolated eager calls: `start event → CPU launches the kernel(s) →
//! kernels run → end event`. With `n` kernels each costing `c` of CPU launch and GPU time `G`
//! split evenly, such a call takes `max(c + G, n·c + G/n)` (a two-stage CPU→GPU pipeline).
//! [`gpu_from_isolated`] inverts that to recover `G`, which is what a CUDA-graph replay pays
//! and what an eager step pays once the CPU runs ahead; `c` is fitted per table as what the
//! smallest measured call exceeds its roofline by. The GPU time is never below the roofline
//! (`kernels × floor + max(bytes / bandwidth, FLOPs / rate)`), so launch-bound table rows
//! cannot pretend the GPU was busy.

use crate::calib::{Profile, Source};
use crate::catalog::Gpu;

use super::seed::{tile_aligned, TileUnit};
use super::{Dtype, StepSpec, DEFAULT_LAUNCH_US};

/// Fraction of the BF16 peak reached by attention on GPUs without tables: an estimate
/// (FlashAttention-3 reports up to 75% on H100 for long sequences; serving batches are shorter).
const ROOFLINE_ATTENTION_EFFICIENCY: f64 = 0.6;

/// GPU time of an attention kernel with almost nothing to do, inside a running forward pass
/// (vLLM engine, GPUs without attention tables), s. Vidur's A100 decode-attention rows
/// (timed in-stream inside sarathi-serve's forward, `profiles/a100-80g.json`) are 6–7 µs at
/// one to eight sequences of 32 tokens; the isolated H100 FlashAttention decode calls of
/// `../shared/data/h100-kernels` lie on `14 µs + bytes / 3.2 TB/s` in their linear range,
/// of which an isolated call's own launch and event overhead is the larger part.
pub const VLLM_ATTENTION_FLOOR_S: f64 = 6.0e-6;
/// Latency of one small all-reduce captured in a CUDA graph between NVLink-connected GPUs,
/// s: ~6 µs for 2 × H100 with CUDA graphs (NVIDIA/nccl issue #1259, `all_reduce_perf -G`,
/// 128 B – 64 KiB), the latency class vLLM's custom all-reduce was written for (vllm-project/
/// vllm pull request #2192).
pub const CUSTOM_ALLREDUCE_LATENCY_S: f64 = 6.0e-6;
/// Fraction of the per-direction NVLink bandwidth collectives reach: H100's ring all-reduce
/// bus bandwidth of 365–370 GB/s of its 450 GB/s (NVIDIA/nccl issue #1455).
pub const NVLINK_EFFICIENCY: f64 = 0.8;
/// vLLM's custom all-reduce handles messages below 8 MiB (`custom_all_reduce.py`'s default
/// `max_size`); larger ones go to NCCL.
const CUSTOM_ALLREDUCE_MAX_BYTES: f64 = 8.0 * 1024.0 * 1024.0;
/// Per-GPU interconnect at or above which GPUs are NVLink (or Infinity Fabric) peers that
/// vLLM's custom all-reduce serves, GB/s; PCIe-only parts (L40S: 64) use NCCL.
pub const NVLINK_MIN_GBPS: f64 = 200.0;

/// GPU time of one op (s), its eager CPU launch cost (s) and where it came from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OpT {
    pub gpu_s: f64,
    pub cpu_s: f64,
    pub src: Source,
}

/// Invert an isolated eager timing `iso` of `n` kernels launched at `c` each into GPU time,
/// never below `roof`.
pub fn gpu_from_isolated(iso: f64, n: f64, c: f64, roof: f64) -> f64 {
    let g = if iso >= (n + 1.0) * c { iso - c } else { n * (iso - n * c) };
    g.max(roof)
}

/// Rates and tables for one GPU, precision and spec.
#[derive(Debug, Clone)]
pub struct Rates {
    pub profile: Option<std::sync::Arc<Profile>>,
    pub dtype: Dtype,
    /// Bytes per KV value.
    pub kv_bytes: f64,
    /// Weight-streaming bandwidth (GEMV, decode KV reads), bytes/s.
    pub stream_bw: f64,
    /// Elementwise bandwidth, bytes read + written per s.
    pub copy_bw: f64,
    /// Large-GEMM rate at `dtype`, FLOP/s.
    pub gemm_flops: f64,
    /// The best GEMM rate the profile measured (FLOP/s): the compute floor under table
    /// GEMMs, so that the floor never exceeds a measured time.
    pub gemm_best_flops: f64,
    /// Attention rate, FLOP/s.
    pub attn_flops: f64,
    /// Per-kernel GPU floor, s.
    pub floor: f64,
    /// GPU floor of an attention kernel priced by the roofline, s (the kernel floor for the
    /// reference engine, [`VLLM_ATTENTION_FLOOR_S`] for vLLM's FlashAttention).
    pub attn_floor: f64,
    /// What an isolated table timing adds to the op's own launch and GPU time (event
    /// records, the synchronising call), s.
    pub iso_overhead: f64,
    /// CPU cost of one eager launch, s.
    pub launch: f64,
    /// Per-direction link bandwidth, bytes/s, and one hop's latency, s.
    pub link_bw: f64,
    pub hop: f64,
    /// Tile unit GEMM dimensions are padded to in roofline estimates.
    pub tile: TileUnit,
    /// Per-operator launch cost and GPU-time envelope on the table grid, computed once per
    /// operator shape (shared by clones).
    memo: Memo,
    /// The rates of each GPU with a shipped profile that this GPU dominates in every
    /// datasheet figure ([`Gpu::dominates`]): an operator never costs more here than there
    /// (the same kernel on hardware at least as capable), whichever engine or method each
    /// profile was measured with. Only for the vLLM engine (whose kernels every profile
    /// estimates; a reference-engine table is that engine's own truth); empty with a user's
    /// own profile (their measurements of their GPU rule) and for the roofline kind.
    pub bounds: Vec<Rates>,
    /// Likewise the profiled GPUs that dominate this one: an operator never costs less here
    /// than there (a variant priced by its datasheet, e.g. an A100 40 GB, is no faster than
    /// the measured A100 80 GB).
    pub floors: Vec<Rates>,
    /// The profile's `gpu_time_scale` (1 without one): every GEMM, attention and
    /// elementwise time is multiplied by it.
    pub scale: f64,
    /// Whether any bound or floor can bind an attention time (decided once: a floor needs
    /// measured attention in a vLLM-like profile, a bound a GPU that is not the reference
    /// engine's); the prefill path, priced per request every step, skips them otherwise.
    attn_bounded: bool,
}

/// Each operator shape's [`Prepared`] data, computed on first use.
type Memo = std::sync::Arc<std::sync::Mutex<Vec<(MemoKey, std::sync::Arc<Prepared>)>>>;

/// An operator shape: a GEMM `(k, n)` or an elementwise op (name, width, kernels, bytes).
#[derive(Debug, Clone, PartialEq)]
enum MemoKey {
    Gemm(u32, u32),
    Elem(String, u64, u64, u64),
}

/// What an operator's table rows give once: launch cost `c`, GPU time per element of a
/// multi-kernel op (from its largest row), and the envelope at each grid point (the least
/// GPU time of that point and every larger one).
#[derive(Debug, Clone)]
struct Prepared {
    c: f64,
    envelope: Vec<f64>,
    /// A GEMM shape without a table: the measured shapes its efficiency comes from, with
    /// their weights ([`Rates::gemm_transfer`]).
    near: Vec<(u32, u32, f64)>,
}

/// Measured GEMM shapes a shape without a table borrows its efficiency from.
const NEAREST_SHAPES: usize = 4;

/// Token counts whose table rows set an op's launch cost (launch-bound sizes).
const SMALL_M: [f64; 4] = [1.0, 8.0, 32.0, 64.0];
/// The elementwise tables' token counts, for the monotone envelope.
const ELEM_M: [f64; 7] = [1.0, 8.0, 64.0, 512.0, 2048.0, 8192.0, 32768.0];
/// The GEMM tables' token counts, for the monotone envelope.
const GEMM_M: [f64; 12] = [1.0, 8.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0, 8192.0, 16384.0];

/// At each point of `grid`, the least `gpu` time of that point and every larger one.
fn suffix_min(grid: &[f64], gpu: impl Fn(f64) -> f64) -> Vec<f64> {
    let mut e: Vec<f64> = grid.iter().map(|&x| gpu(x)).collect();
    for i in (0..e.len().saturating_sub(1)).rev() {
        e[i] = e[i].min(e[i + 1]);
    }
    e
}

/// The monotone (non-decreasing in `m`) envelope of an operator's GPU time measured on the
/// token grid `grid` (`e` = [`suffix_min`] of it): interpolated in log–log space between grid
/// points, never below the continuous `floor`; above the grid, the time itself (`above`:
/// the table's tail throughput).
fn envelope(m: f64, grid: &[f64], e: &[f64], above: impl Fn() -> f64, floor: impl Fn(f64) -> f64) -> f64 {
    let last = grid.len() - 1;
    if m >= grid[last] {
        return above().max(e[last]);
    }
    let i = grid.iter().position(|&x| x > m).unwrap_or(last);
    if i == 0 {
        return e[0].max(floor(m));
    }
    let (x0, x1, lower, upper) = (grid[i - 1], grid[i], e[i - 1], e[i]);
    let t = libm::log(m / x0) / libm::log(x1 / x0);
    let v = if lower > 0.0 { libm::exp(libm::log(lower) + t * (libm::log(upper) - libm::log(lower))) } else { upper * t };
    v.max(floor(m))
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(v[v.len() / 2])
}

/// The profile's GEMM rates for tables of `dtype`: (streaming bandwidth from every BF16
/// shape at M = 1, B/s; median throughput at M = 16,384, FLOP/s; best throughput at M ≥
/// 1,024). Each shape answers through its first table, as a lookup by shape does.
///
/// Not inlined, and one shape lookup per table (it used to look each shape up seven times,
/// ~100k comparisons on a Vidur profile): inlined into the step model's constructor, its loop made
/// a browser's WASM engine optimise that whole function during the first simulation.
#[inline(never)]
fn gemm_fit(p: &Profile, dtype: &str) -> (f64, Option<f64>, f64) {
    let (mut bw, mut tail, mut best) = (0.0f64, Vec::new(), 0.0f64);
    for (j, t) in p.gemm.iter().enumerate() {
        let i = p.gemm_index(&t.dtype, t.k, t.n).unwrap_or(j);
        let (k, n) = (f64::from(t.k), f64::from(t.n));
        if t.dtype == "bf16" {
            bw = bw.max(k * n * 2.0 / (p.gemm_at(i, 1.0).0 * 1e-3));
        }
        if t.dtype == dtype {
            let m = 16384.0;
            tail.push(2.0 * m * k * n / (p.gemm_at(i, m).0 * 1e-3));
            for m in [1024.0, 2048.0, 4096.0, 8192.0, 16384.0] {
                best = best.max(2.0 * m * k * n / (p.gemm_at(i, m).0 * 1e-3));
            }
        }
    }
    (bw, median(tail), best)
}

impl Rates {
    /// `use_tables = false` ignores the profile (the `roofline` kind).
    pub fn new(gpu: &Gpu, spec: &StepSpec, use_tables: bool) -> Rates {
        let mut r = Rates::unbounded(gpu, spec, use_tables);
        if use_tables && spec.profile.is_none() && spec.engine.fused() {
            for name in crate::calib::PROFILED_GPUS.iter().filter(|&&n| n != gpu.name) {
                let Some(other) = crate::catalog::gpu_presets().into_iter().find(|g| g.name == *name) else { continue };
                if gpu.dominates(&other) {
                    r.bounds.push(Rates::unbounded(&other, spec, true));
                } else if other.dominates(gpu) {
                    r.floors.push(Rates::unbounded(&other, spec, true));
                }
            }
        }
        let vllm_like = |b: &Rates| b.profile.as_ref().is_none_or(|p| p.in_stream);
        r.attn_bounded = r.bounds.iter().any(vllm_like)
            || r.floors.iter().any(|b| vllm_like(b) && b.profile.as_ref().is_some_and(|p| p.has_attention()));
        r
    }

    /// [`Rates::new`] without the bounds of dominated GPUs.
    fn unbounded(gpu: &Gpu, spec: &StepSpec, use_tables: bool) -> Rates {
        let ce = spec.compute_efficiency.unwrap_or(gpu.compute_efficiency);
        let me = spec.memory_efficiency.unwrap_or(gpu.memory_efficiency);
        let peak = if spec.dtype == Dtype::Fp8 { gpu.fp8_tflops } else { gpu.bf16_tflops };
        let mut r = Rates {
            profile: None,
            dtype: spec.dtype,
            kv_bytes: spec.kv_dtype.weight_bytes(),
            stream_bw: gpu.hbm_tbps * 1e12 * me,
            copy_bw: gpu.hbm_tbps * 1e12 * me,
            gemm_flops: peak * 1e12 * ce,
            gemm_best_flops: peak * 1e12 * ce,
            attn_flops: gpu.bf16_tflops * 1e12 * ROOFLINE_ATTENTION_EFFICIENCY,
            floor: spec.kernel_floor_us * 1e-6,
            attn_floor: match spec.engine {
                super::Engine::Reference => spec.kernel_floor_us * 1e-6,
                super::Engine::Vllm | super::Engine::Trtllm => (spec.kernel_floor_us * 1e-6).max(VLLM_ATTENTION_FLOOR_S),
            },
            iso_overhead: 0.0,
            launch: spec.launch_us.unwrap_or(DEFAULT_LAUNCH_US) * 1e-6,
            link_bw: gpu.nvlink_gbps * 1e9 / 2.0,
            hop: spec.comm_latency_us * 1e-6,
            tile: match gpu.matrix_unit {
                crate::catalog::MatrixUnit::TensorCore => TileUnit::Cuda,
                crate::catalog::MatrixUnit::Mxu => TileUnit::TpuMxu,
            },
            memo: Default::default(),
            bounds: Vec::new(),
            floors: Vec::new(),
            scale: 1.0,
            attn_bounded: false,
        };
        // A given profile was checked when the spec was validated.
        let custom = if use_tables { spec.custom_profile().ok().flatten().map(std::sync::Arc::new) } else { None };
        let profile = if use_tables { custom.or_else(|| gpu.profile_name().and_then(Profile::builtin_shared)) } else { None };
        if let Some(p) = &profile {
            r.fit(p, spec);
            r.scale = p.gpu_time_scale;
        }
        r.profile = profile;
        r
    }

    /// Rates fitted to the profile: streaming bandwidth from the smallest-M GEMMs of the
    /// largest weights, GEMM rate as the median of each table's largest-M throughput,
    /// attention rate from the largest prefill, launch cost from single-kernel elementwise
    /// floors (unless the spec sets it).
    fn fit(&mut self, p: &Profile, spec: &StepSpec) {
        let table_dtype = if self.dtype == Dtype::Fp8 { "fp8" } else { "bf16" };
        self.iso_overhead = p.isolated_overhead_s;
        let (bw, tail, best) = gemm_fit(p, table_dtype);
        if bw > 0.0 {
            self.stream_bw = bw;
        }
        if let Some(f) = tail {
            self.gemm_flops = f;
            self.gemm_best_flops = best.max(f);
        }
        if p.copy_bps > 0.0 {
            self.copy_bw = p.copy_bps;
        }
        if p.has_attention() {
            let seq = 32768.0;
            let (ms, _) = p.attention_prefill(32, 128, seq);
            self.attn_flops = crate::calib::prefill_flops(32, 128, seq) / (ms * 1e-3);
        }
        // In-stream rows hold no launch cost to fit: the default (or the spec's) stays.
        if spec.launch_us.is_none() && !p.in_stream {
            let floors: Vec<f64> = ["residual_add", "attn_out_transpose", "kv_write", "rms_norm"]
                .iter()
                .filter_map(|op| p.elementwise(op, 1.0).map(|(ms, _)| self.iso_s(ms) - self.floor))
                .collect();
            if let Some(c) = median(floors) {
                self.launch = c.max(0.0);
            }
        }
    }

    /// The prepared table data of one operator shape, computed on first use (outside the
    /// lock: preparing a shape may price others; the result is the same whoever computes it).
    fn prepared(&self, key: MemoKey, make: impl FnOnce() -> Prepared) -> std::sync::Arc<Prepared> {
        let found = {
            let memo = self.memo.lock().unwrap_or_else(|e| e.into_inner());
            memo.iter().find(|(k, _)| *k == key).map(|(_, p)| p.clone())
        };
        if let Some(p) = found {
            return p;
        }
        let p = std::sync::Arc::new(make());
        let mut memo = self.memo.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, q)) = memo.iter().find(|(k, _)| *k == key) {
            return q.clone();
        }
        memo.push((key, p.clone()));
        p
    }

    /// An isolated table time (ms) less the measurement's own overhead, s.
    #[inline]
    fn iso_s(&self, ms: f64) -> f64 {
        (ms * 1e-3 - self.iso_overhead).max(0.0)
    }

    /// Roofline GPU time of `x[m,k] @ W[k,n]` at this precision, s.
    pub fn gemm_roof(&self, m: f64, k: f64, n: f64) -> f64 {
        self.gemm_roof_at(m, k, n, self.gemm_flops)
    }

    fn gemm_roof_at(&self, m: f64, k: f64, n: f64, flops: f64) -> f64 {
        let (mp, kp, np) = tile_aligned(m, k, n, self.tile);
        let act = if self.dtype == Dtype::Fp8 { 1.0 } else { 2.0 };
        let bytes = k * n * self.dtype.weight_bytes() + m * k * act + m * n * 2.0;
        self.floor + (bytes / self.stream_bw).max(2.0 * mp * kp * np / flops)
    }

    /// An operator's time here, no more than on any dominated profiled GPU
    /// ([`Rates::bounds`]) and no less than on any dominating one ([`Rates::floors`]); a
    /// bound that binds is flagged `model`. (With `min` taken first and `max` last, a GPU
    /// dominating another is never priced above it whenever either has a profile.)
    /// A floor is a measured time: a table row, between rows, or past the last row at that
    /// row's rate (labelled `roofline`; a floor that stopped at the last row would let the
    /// time drop as the batch grows past it). A dominating GPU's own datasheet roofline is
    /// below this one's and never binds; its analytical sub-models (`model`) say nothing. Attention and
    /// elementwise ops (`engine_ops`) of a GPU whose profile times the reference engine (an
    /// isolated-timing profile, e.g. our H200's PyTorch SDPA and unfused ops: not vLLM's
    /// kernels) bound nothing across GPUs; GEMMs are cuBLAS either way.
    #[inline]
    fn bounded(&self, own: OpT, engine_ops: bool, other: impl Fn(&Rates) -> OpT) -> OpT {
        // (a reference-engine profile's engine ops are skipped before they are priced)
        let skip = |b: &Rates| engine_ops && b.profile.as_ref().is_some_and(|p| !p.in_stream);
        let mut t = own;
        for b in &self.bounds {
            if skip(b) {
                continue;
            }
            let x = other(b);
            if x.gpu_s < t.gpu_s {
                t.gpu_s = x.gpu_s;
                t.src = Source::Model;
            }
        }
        for b in &self.floors {
            if skip(b) {
                continue;
            }
            let x = other(b);
            if x.src <= Source::Roofline && x.gpu_s > t.gpu_s {
                t.gpu_s = x.gpu_s;
                t.src = Source::Model;
            }
        }
        t
    }

    /// One single-kernel elementwise op as a fused engine (vLLM) runs it: the profile's
    /// table where its engine ran `op` as one kernel too, else one kernel moving `bytes_tok`
    /// per token at the copy bandwidth (a multi-kernel table, such as the reference engine's
    /// 16-kernel RoPE, times other work).
    pub fn fused_elementwise(&self, op: &str, m: f64, width: f64, bytes_tok: f64) -> OpT {
        self.scaled(self.bounded(self.fused_elementwise_own(op, m, width, bytes_tok), true, |b| b.fused_elementwise_own(op, m, width, bytes_tok)))
    }

    fn fused_elementwise_own(&self, op: &str, m: f64, width: f64, bytes_tok: f64) -> OpT {
        let reference = crate::calib::ELEMENTWISE_OPS.iter().find(|(o, _)| *o == op).map_or(1.0, |(_, k)| *k);
        let kernels = self.profile.as_ref().and_then(|p| p.kernels(op)).unwrap_or(reference);
        if kernels <= 1.0 {
            self.elementwise_own(op, m, width, 1.0, bytes_tok)
        } else {
            OpT { gpu_s: self.floor + m * bytes_tok / self.copy_bw, cpu_s: self.launch, src: Source::Roofline }
        }
    }

    /// A kernel time at this machine's speed ([`Rates::scale`]).
    #[inline]
    fn scaled(&self, mut t: OpT) -> OpT {
        t.gpu_s *= self.scale;
        t
    }

    /// One GEMM of `m` tokens through weights `k × n`. A profiled GPU without GEMM tables
    /// of this precision (H100's Vidur profile has no FP8 rows) neither bounds nor floors it:
    /// its price there would be a datasheet roofline, not a measurement.
    pub fn gemm(&self, m: f64, k: u32, n: u32) -> OpT {
        let own = self.gemm_own(m, k, n);
        let table = if self.dtype == Dtype::Fp8 { "fp8" } else { "bf16" };
        let measured = |b: &Rates| b.profile.as_ref().is_some_and(|p| p.gemm.iter().any(|t| t.dtype == table));
        self.scaled(self.bounded(own, false, |b| if measured(b) { b.gemm_own(m, k, n) } else { own }))
    }

    fn gemm_own(&self, m: f64, k: u32, n: u32) -> OpT {
        let (kf, nf) = (f64::from(k), f64::from(n));
        let roof = self.gemm_roof(m, kf, nf);
        let table = if self.dtype == Dtype::Fp8 { "fp8" } else { "bf16" };
        let Some(p) = self.profile.as_ref().filter(|p| p.gemm(table, k, n, m).is_some()) else {
            if let Some(t) = self.profile.as_ref().and_then(|p| self.gemm_transfer(p, table, m, k, n)) {
                return t;
            }
            return OpT { gpu_s: roof, cpu_s: self.launch, src: Source::Roofline };
        };
        let iso = |m: f64| p.gemm(table, k, n, m).map_or(0.0, |v| self.iso_s(v.0));
        let (_, src) = p.gemm(table, k, n, m).unwrap_or((0.0, Source::Model));
        // Under a measured time, the floor is the best measured rate (the median tail rate
        // would sit above well-measured mid-size rows).
        let floor = |x: f64| self.gemm_roof_at(x, kf, nf, self.gemm_best_flops);
        let prep = self.prepared(MemoKey::Gemm(k, n), || {
            // Launch cost: what the small-M rows exceed their roofline by (median: one noisy
            // row must not set it).
            let c = if p.in_stream {
                0.0 // the rows are GPU times already
            } else {
                median(SMALL_M.iter().map(|&x| iso(x) - self.gemm_roof(x, kf, nf)).collect()).unwrap_or(0.0).max(0.0)
            };
            let gpu = |x: f64| gpu_from_isolated(iso(x), 1.0, c, floor(x));
            Prepared { c, envelope: suffix_min(&GEMM_M, gpu), near: Vec::new() }
        });
        // More rows never take less time: a row measured slower than a larger one is noise.
        let above = || gpu_from_isolated(iso(m), 1.0, prep.c, floor(m));
        let mut g = envelope(m, &GEMM_M, &prep.envelope, above, floor);
        let mut src = src;
        if matches!(self.dtype, Dtype::Int8 | Dtype::Int4) {
            // Weight-only: the BF16 kernel minus the weight bytes not read, never below the
            // compute roof (dequantised math runs at the BF16 rate).
            let saved = kf * nf * (2.0 - self.dtype.weight_bytes()) / self.stream_bw;
            g = (g - saved).max(roof);
            src = Source::Model;
        }
        OpT { gpu_s: g, cpu_s: self.launch, src }
    }

    /// A GEMM shape the profile has no table of (a model nobody profiled on this GPU): its
    /// roofline times the efficiency the profile measured on the [`NEAREST_SHAPES`] shapes
    /// nearest in weight size (log K·N; weights 1 / (distance + 0.05)), at the same M. The
    /// roofline alone misses small shapes' fixed costs and the soft ridge between the
    /// memory- and compute-bound regimes: predicting each Vidur-profiled model's GEMMs from
    /// the other models' tables this way errs 7.3% (H100) and 6.6% (A100) on average over
    /// every row, against 14.4% and 12.5% for the roofline at the profile's fitted rates
    /// (leave-one-model-out over 1,449 and 1,608 rows). Monotone in M (envelope on the
    /// table grid), flagged `interpolated`. None when the profile has no table of `dtype`.
    fn gemm_transfer(&self, p: &Profile, dtype: &str, m: f64, k: u32, n: u32) -> Option<OpT> {
        let (kf, nf) = (f64::from(k), f64::from(n));
        let efficiency = |near: &[(u32, u32, f64)], x: f64| {
            let (mut sum, mut weights) = (0.0, 0.0);
            for &(ki, ni, w) in near {
                let (kg, ng) = (f64::from(ki), f64::from(ni));
                sum += w * self.gemm_own(x, ki, ni).gpu_s / self.gemm_roof(x, kg, ng);
                weights += w;
            }
            sum / weights
        };
        let prep = self.prepared(MemoKey::Gemm(k, n), || {
            let lw = libm::log(kf * nf);
            let mut shapes: Vec<(f64, u32, u32)> = p
                .gemm
                .iter()
                .filter(|t| t.dtype == dtype)
                .map(|t| ((libm::log(f64::from(t.k) * f64::from(t.n)) - lw).abs(), t.k, t.n))
                .collect();
            shapes.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
            shapes.dedup_by(|a, b| a.1 == b.1 && a.2 == b.2);
            let near: Vec<(u32, u32, f64)> = shapes.iter().take(NEAREST_SHAPES).map(|&(d, ki, ni)| (ki, ni, 1.0 / (d + 0.05))).collect();
            let envelope = if near.is_empty() { Vec::new() } else { suffix_min(&GEMM_M, |x| efficiency(&near, x) * self.gemm_roof(x, kf, nf)) };
            Prepared { c: 0.0, envelope, near }
        });
        if prep.near.is_empty() {
            return None;
        }
        let floor = |x: f64| self.gemm_roof_at(x, kf, nf, self.gemm_best_flops);
        let g = envelope(m, &GEMM_M, &prep.envelope, || efficiency(&prep.near, m) * self.gemm_roof(m, kf, nf), floor);
        Some(OpT { gpu_s: g, cpu_s: self.launch, src: Source::Interpolated })
    }

    /// An elementwise op over `m` tokens of `width` elements that launches `kernels` kernels
    /// and moves `bytes_tok` bytes per token in one pass.
    pub fn elementwise(&self, op: &str, m: f64, width: f64, kernels: f64, bytes_tok: f64) -> OpT {
        self.scaled(self.bounded(self.elementwise_own(op, m, width, kernels, bytes_tok), true, |b| b.elementwise_own(op, m, width, kernels, bytes_tok)))
    }

    fn elementwise_own(&self, op: &str, m: f64, width: f64, kernels: f64, bytes_tok: f64) -> OpT {
        let roof = |m: f64| kernels * self.floor + m * bytes_tok / self.copy_bw;
        let hit = self.profile.as_ref().and_then(|p| Some((p, p.elementwise(op, m * width)?.1)));
        match hit {
            Some((p, src)) => {
                let at = |tokens: f64| p.elementwise_at(op, tokens, width).map_or(0.0, |v| self.iso_s(v.0));
                let key = MemoKey::Elem(op.to_string(), width.to_bits(), kernels.to_bits(), bytes_tok.to_bits());
                let gpu_with = |t: f64, c: f64, per_elem: f64| {
                    let iso = at(t);
                    if kernels <= 1.0 || iso >= 2.0 * kernels * c {
                        gpu_from_isolated(iso, kernels, c, roof(t))
                    } else {
                        // Rows of a multi-kernel op near its launch floor (n·c) hide its GPU
                        // time: inverting them multiplies their noise by the kernel count.
                        // There, the GPU time per element of its largest (GPU-bound) row.
                        (kernels * self.floor + t * width * per_elem).max(roof(t))
                    }
                };
                let per_elem_of = |c: f64| {
                    p.elementwise_tail(op).map_or(0.0, |(e, ms)| ((self.iso_s(ms) - c - kernels * self.floor) / e).max(0.0))
                };
                let prep = self.prepared(key, || {
                    // At the launch-bound floor iso = n·c + G/n with G the roofline; the median
                    // over the small-M rows (one may even lack the kernel: a transpose of one
                    // token is a view).
                    let c = if p.in_stream {
                        0.0 // the rows are GPU times already
                    } else {
                        median(SMALL_M.iter().map(|&t| (at(t) - roof(t) / kernels) / kernels).collect()).unwrap_or(0.0).max(0.0)
                    };
                    let pe = per_elem_of(c);
                    Prepared { c, envelope: suffix_min(&ELEM_M, |t| gpu_with(t, c, pe)), near: Vec::new() }
                });
                let c = prep.c;
                // More tokens never take less time: a row slower than a larger one is noise.
                let g = envelope(m, &ELEM_M, &prep.envelope, || gpu_with(m, c, per_elem_of(c)), roof);
                let cpu = if p.in_stream { kernels * self.launch } else { kernels * c };
                OpT { gpu_s: g, cpu_s: cpu, src }
            }
            None => OpT { gpu_s: roof(m), cpu_s: kernels * self.launch, src: Source::Roofline },
        }
    }

    /// Causal prefill attention of one request: `new` tokens over `context` earlier ones,
    /// with `hq` query and `hkv` KV heads of width `hd` on this GPU.
    pub fn attention_prefill(&self, hq: u32, hkv: u32, hd: u32, new: f64, context: f64) -> OpT {
        // The launch cost: the isolated time of a one-token prefill above the kernel floor
        // (in-stream rows hold none: the default launch).
        let c = self
            .profile
            .as_ref()
            .filter(|p| p.has_attention() && !p.in_stream)
            .map_or(self.launch, |p| (self.iso_s(p.attention_prefill(hq, hd, 1.0).0) - self.floor).max(0.0));
        self.attention_prefill_given_cpu(hq, hkv, hd, new, context, c)
    }

    /// [`Rates::attention_prefill`] given its launch cost `c` (`attention_prefill(..).cpu_s`,
    /// which depends only on the head layout), saving one curve evaluation per request.
    #[inline]
    pub fn attention_prefill_given_cpu(&self, hq: u32, hkv: u32, hd: u32, new: f64, context: f64, c: f64) -> OpT {
        let own = self.attention_prefill_own(hq, hkv, hd, new, context, c);
        if !self.attn_bounded {
            return self.scaled(own);
        }
        self.scaled(self.bounded(own, true, |b| b.attention_prefill(hq, hkv, hd, new, context)))
    }

    #[inline]
    fn attention_prefill_own(&self, hq: u32, hkv: u32, hd: u32, new: f64, context: f64, c: f64) -> OpT {
        let flops = crate::calib::chunk_flops(hq, hd, new, context);
        let bytes = (context + new) * crate::calib::kv_bytes(hkv, hd, 1.0) * self.kv_bytes / 2.0
            + 2.0 * new * f64::from(hq * hd) * 2.0;
        let roof = self.attn_floor + (flops / self.attn_flops).max(bytes / self.stream_bw);
        let Some(p) = self.profile.as_ref().filter(|p| p.has_attention()) else {
            return OpT { gpu_s: roof, cpu_s: self.launch, src: Source::Roofline };
        };
        let (iso_ms, src) =
            if context > 0.0 { p.attention_chunk(hq, hd, new, context) } else { p.attention_prefill(hq, hd, new) };
        if p.in_stream {
            return OpT { gpu_s: (iso_ms * 1e-3).max(roof), cpu_s: c, src };
        }
        OpT { gpu_s: gpu_from_isolated(self.iso_s(iso_ms), 1.0, c, roof), cpu_s: c, src }
    }

    /// Batched decode attention reading `tokens` cached tokens of `hkv` KV heads of width
    /// `hd` (one query each) in one layer.
    pub fn attention_decode(&self, hkv: u32, hd: u32, tokens: f64) -> OpT {
        // The launch cost: the isolated time of an empty decode above the kernel floor.
        let c = self
            .profile
            .as_ref()
            .filter(|p| p.has_attention() && !p.in_stream)
            .map_or(self.launch, |p| (self.iso_s(p.attention_decode(0.0).0) - self.floor).max(0.0));
        self.attention_decode_given_cpu(hkv, hd, tokens, c)
    }

    /// [`Rates::attention_decode`] given its launch cost `c` (`attention_decode(..).cpu_s`,
    /// which does not depend on `tokens`), saving one curve evaluation per call.
    #[inline]
    pub fn attention_decode_given_cpu(&self, hkv: u32, hd: u32, tokens: f64, c: f64) -> OpT {
        let own = self.attention_decode_own(hkv, hd, tokens, c);
        if !self.attn_bounded {
            return self.scaled(own);
        }
        self.scaled(self.bounded(own, true, |b| b.attention_decode(hkv, hd, tokens)))
    }

    #[inline]
    fn attention_decode_own(&self, hkv: u32, hd: u32, tokens: f64, c: f64) -> OpT {
        let bytes = crate::calib::kv_bytes(hkv, hd, tokens) * self.kv_bytes / 2.0;
        let roof = self.attn_floor + bytes / self.stream_bw;
        let Some(p) = self.profile.as_ref().filter(|p| p.has_attention()) else {
            return OpT { gpu_s: roof, cpu_s: self.launch, src: Source::Roofline };
        };
        let (iso_ms, mut src) = p.attention_decode(bytes);
        if self.kv_bytes != 2.0 {
            src = src.max(Source::Model);
        }
        let gpu_s = if p.in_stream { (iso_ms * 1e-3).max(roof) } else { gpu_from_isolated(self.iso_s(iso_ms), 1.0, c, roof) };
        OpT { gpu_s, cpu_s: c, src }
    }

    /// Batched decode attention of multi-head latent attention as vLLM's MLA backends run
    /// it (`vllm/v1/attention/backends/mla/`: FlashMLA, CUTLASS MLA, Triton MLA): the
    /// up-projection `W_UK` absorbed into each query beforehand and `W_UV` applied
    /// afterwards (DeepSeek-V2 paper §2.1.2, "absorbed"), so the kernel reads only each
    /// cached token's latent and RoPE key — `latent + rope` values, shared by the `hq`
    /// heads of this GPU — and computes for each head a score over `latent + rope` and a
    /// weighted sum over `latent`: `2 · hq · (2 · latent + rope)` FLOPs per cached token
    /// (a multiply-add is two). Priced as the profile's decode curve at those bytes (an MLA
    /// kernel streams its latent as FlashAttention streams K and V; source at least
    /// `model`), never below the roofline `max(bytes / bandwidth, FLOPs / attention rate)`:
    /// with many heads per GPU (DeepSeek-V3's 128 at TP 1) the kernel is compute-bound.
    pub fn attention_decode_mla(&self, hq: u32, latent: u32, rope: u32, tokens: f64) -> OpT {
        let c = self
            .profile
            .as_ref()
            .filter(|p| p.has_attention() && !p.in_stream)
            .map_or(self.launch, |p| (self.iso_s(p.attention_decode(0.0).0) - self.floor).max(0.0));
        self.attention_decode_mla_given_cpu(hq, latent, rope, tokens, c)
    }

    /// [`Rates::attention_decode_mla`] given its launch cost `c`.
    #[inline]
    pub fn attention_decode_mla_given_cpu(&self, hq: u32, latent: u32, rope: u32, tokens: f64, c: f64) -> OpT {
        let own = self.attention_decode_mla_own(hq, latent, rope, tokens, c);
        if !self.attn_bounded {
            return self.scaled(own);
        }
        self.scaled(self.bounded(own, true, |b| b.attention_decode_mla(hq, latent, rope, tokens)))
    }

    #[inline]
    fn attention_decode_mla_own(&self, hq: u32, latent: u32, rope: u32, tokens: f64, c: f64) -> OpT {
        let bytes = tokens * f64::from(latent + rope) * self.kv_bytes;
        let flops = 2.0 * f64::from(hq) * f64::from(2 * latent + rope) * tokens;
        let roof = self.attn_floor + (bytes / self.stream_bw).max(flops / self.attn_flops);
        let Some(p) = self.profile.as_ref().filter(|p| p.has_attention()) else {
            return OpT { gpu_s: roof, cpu_s: self.launch, src: Source::Roofline };
        };
        let (iso_ms, src) = p.attention_decode(bytes);
        let gpu_s = if p.in_stream { (iso_ms * 1e-3).max(roof) } else { gpu_from_isolated(self.iso_s(iso_ms), 1.0, c, roof) };
        OpT { gpu_s, cpu_s: c, src: src.max(Source::Model) }
    }

    /// Ring all-reduce of `bytes` over `tp` GPUs (one kernel).
    pub fn allreduce(&self, tp: f64, bytes: f64) -> OpT {
        let ring = 2.0 * (tp - 1.0) / tp;
        OpT {
            gpu_s: self.floor + ring * bytes / self.link_bw + 2.0 * (tp - 1.0) * self.hop,
            cpu_s: self.launch,
            src: Source::Model,
        }
    }

    /// vLLM's all-reduce of `bytes` over `tp` GPUs: between NVLink peers (`nvlink`) and
    /// below 8 MiB its custom kernel (`csrc/custom_all_reduce.cuh`): one stage (every GPU
    /// reads its `tp − 1` peers' buffers) for 2 GPUs, or below 512 KiB on up to 4 and 256 KiB
    /// on up to 8; otherwise two stages (reduce-scatter then all-gather, `2(tp−1)/tp` of the
    /// bytes each way), each after one [`CUSTOM_ALLREDUCE_LATENCY_S`]; elsewhere NCCL's ring
    /// at [`NVLINK_EFFICIENCY`] of the link.
    pub fn allreduce_vllm(&self, tp: f64, bytes: f64, nvlink: bool) -> OpT {
        let bw = self.link_bw * NVLINK_EFFICIENCY;
        let gpu_s = if nvlink && tp <= 8.0 && bytes < CUSTOM_ALLREDUCE_MAX_BYTES {
            let one_stage = tp <= 2.0 || (tp <= 4.0 && bytes < 512.0 * 1024.0) || bytes < 256.0 * 1024.0;
            if one_stage {
                CUSTOM_ALLREDUCE_LATENCY_S + (tp - 1.0) * bytes / bw
            } else {
                2.0 * CUSTOM_ALLREDUCE_LATENCY_S + 2.0 * (tp - 1.0) / tp * bytes / bw
            }
        } else {
            self.floor + 2.0 * (tp - 1.0) / tp * bytes / bw + 2.0 * (tp - 1.0) * self.hop
        };
        OpT { gpu_s, cpu_s: self.launch, src: Source::Model }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inverse_of_the_launch_pipeline() {
        // one kernel: subtract the launch gap
        assert!((gpu_from_isolated(50e-6, 1.0, 20e-6, 0.0) - 30e-6).abs() < 1e-12);
        // 16 kernels, launch bound (iso ≈ n·c): the GPU part is small
        let g = gpu_from_isolated(0.41e-3, 16.0, 25e-6, 40e-6);
        assert!(g < 0.2e-3, "{g}");
        // 16 kernels, GPU bound: only the first launch shows
        assert!((gpu_from_isolated(1.76e-3, 16.0, 25e-6, 0.0) - 1.735e-3).abs() < 1e-9);
        // never below the roofline
        assert_eq!(gpu_from_isolated(10e-6, 1.0, 20e-6, 3e-6), 3e-6);
    }
}
