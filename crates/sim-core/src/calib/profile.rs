//! A GPU's calibration profile ready for lookups ([`Profile`]): its GEMM tables, its
//! attention and elementwise curves, and the lookups the step model makes into them, with the
//! operator-size formulas the tables are indexed by. Building one (from JSON or a table-less
//! base) is in [`super::build`], a shipped one's static snapshot in [`super::snapshot`], the
//! leave-one-out check in [`super::fidelity`].

use super::curve::Curve;
use super::raw::RawProfile;
use super::shipped::builtin_text;
use super::source::Source;

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
    pub(super) curve: Curve,
    /// Index of the BF16 table `curve` is a ratio to.
    pub(super) base: Option<usize>,
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
    pub(super) prefill: Option<Curve>,
    /// Chunked-prefill attention over FLOPs (context > 0), all layouts merged.
    pub(super) chunk: Option<Curve>,
    /// The chunk kernel with no earlier context, over FLOPs.
    pub(super) chunk_fresh: Option<Curve>,
    /// Decode attention over K+V bytes read per layer.
    pub(super) decode: Option<Curve>,
    /// Elementwise ops over elements (tokens × width), all widths merged, by op name.
    pub(super) elementwise: Vec<(String, Curve)>,
    /// The same per op and width, over tokens: used for that exact width where its measured
    /// points around the query are at most [`OWN_WIDTH_GAP`] apart (widths of one op disagree
    /// at equal element counts; a sparse grid of one width interpolates worse than all widths'
    /// points together).
    pub(super) elementwise_width: Vec<(String, u32, Curve)>,
    /// The tables as parsed (for [`Profile::fidelity`]); a shipped profile parses them from
    /// its embedded JSON ([`builtin_text`]) on first use. (Read only there, so a build that
    /// never asks for fidelity, such as the WASM module, carries no JSON.)
    pub(super) raw: std::sync::OnceLock<RawProfile>,
}

/// The elementwise ops the step model composes, each with the kernels it launches in the
/// reference engine (RoPE ~16 small kernels per its README, `silu(g) * u` unfused 2, the
/// others 1). A profile's `kernels` may name these ops to give its own engine's counts.
pub const ELEMENTWISE_OPS: [(&str, f64); 6] =
    [("rms_norm", 1.0), ("rope_q_and_k", 16.0), ("kv_write", 1.0), ("attn_out_transpose", 1.0), ("residual_add", 1.0), ("silu_mul", 2.0)];

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
    /// The tables this profile was built from.
    pub(super) fn raw(&self) -> &RawProfile {
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
        self.gemm.iter().position(|g| g.k == k && g.n == n && g.dtype == dtype) // the string last: most tables differ in shape
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
}
