//! How well a profile predicts its own tables ([`Profile::fidelity`]): every measured row
//! against the full profile and against the profile rebuilt without that row.

use serde::Serialize;

use super::profile::{kv_bytes, Profile};

impl Profile {
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
