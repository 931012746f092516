//! Building a [`Profile`]: parsing its JSON (or TOML) form and checking it, a profile on the
//! shipped or roofline base, and the curves built from the raw tables (optionally without one
//! row, for leave-one-out).

use super::curve::Curve;
use super::profile::{chunk_flops, kv_bytes, prefill_flops, GemmTable, Profile, ELEMENTWISE_OPS};
use super::raw::RawProfile;
use super::shipped::PROFILED_GPUS;
use crate::error::{Result, SimError};

/// Most kernels a profile may say one elementwise op launches.
const MAX_OP_KERNELS: u32 = 64;

/// One table row excluded while building (for leave-one-out): (section, table, row).
pub(super) type Exclude = Option<(&'static str, usize, usize)>;

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

impl Profile {
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

    pub(super) fn build(raw: RawProfile, ex: Exclude) -> Option<Profile> {
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
}
