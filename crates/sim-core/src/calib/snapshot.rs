//! Shipped profiles as static data: each built once, ahead of time, from its JSON into the
//! curves [`Profile`] looks up (`builtin.rs`, generated; a test keeps it equal to what
//! parsing the JSON gives).
//!
//! Why: parsing a profile's JSON and building its curves took the browser's first
//! simulation on a profiled GPU about 13 ms (the parser and builder run once, on baseline
//! code, and their hot loops sent large functions to the optimising compiler while the
//! simulation ran). From static data a shipped profile costs a few small allocations. The
//! raw tables stay embedded for [`Profile::fidelity`], parsed only when asked for.
//!
//! Regenerate after changing a profile: `make profiles` (`UPDATE_PROFILES=1 cargo test -p
//! sim-core --lib calib::snapshot`).

use super::curve::Curve;
use super::profile::{GemmTable, Profile};
use super::shipped::{shipped_index, PROFILED_GPUS};

// Generated numbers: logs that happen to equal ln 2 etc. are data, not constants to name.
#[rustfmt::skip]
#[allow(clippy::approx_constant, clippy::excessive_precision, clippy::unreadable_literal)]
mod builtin;
mod data;

pub use data::{CurveData, GemmData, ProfileData};

/// Each shipped profile's snapshot, in [`PROFILED_GPUS`] order.
static SNAPSHOTS: [&ProfileData; PROFILED_GPUS.len()] = [&builtin::H200, &builtin::A100_80G, &builtin::H100];

/// The snapshot of shipped profile `gpu` (a name of [`PROFILED_GPUS`]).
pub fn get(gpu: &str) -> Option<&'static ProfileData> {
    Some(SNAPSHOTS[shipped_index(gpu)?])
}

/// The static name of a shipped profile's snapshot in `builtin.rs`.
#[cfg(test)]
fn static_name(gpu: &str) -> String {
    gpu.to_uppercase().replace('-', "_")
}

/// `builtin.rs` for these profiles (name, profile built from its JSON).
#[cfg(test)]
fn render(profiles: &[(&str, &Profile)]) -> String {
    use std::fmt::Write;
    fn nums(v: &[f64]) -> String {
        // `{:?}` is the shortest text that reads back as the same f64.
        let items: Vec<String> = v.iter().map(|x| format!("{x:?}")).collect();
        format!("&[{}]", items.join(", "))
    }
    fn curve(c: &Curve) -> String {
        let (x, lx, ly, floor) = c.parts();
        let floor = floor.map_or("None".to_string(), |f| format!("Some({f:?})"));
        format!("C {{\n        x: {},\n        lx: {},\n        ly: {},\n        ratio_floor: {floor},\n    }}", nums(x), nums(lx), nums(ly))
    }
    fn opt(c: &Option<Curve>) -> String {
        c.as_ref().map_or("None".to_string(), |c| format!("Some({})", curve(c)))
    }
    let mut s = String::from(
        "//! Generated from crates/sim-core/profiles/*.json by `make profiles` (see snapshot.rs): do not edit.\n\nuse super::{CurveData as C, GemmData as G, ProfileData as P};\n",
    );
    for (gpu, p) in profiles {
        let _ = write!(
            s,
            "\npub static {}: P = P {{\n    gpu: {:?},\n    source: {:?},\n    copy_bps: {:?},\n    gemm_flops: {:?},\n    isolated_overhead_s: {:?},\n    in_stream: {},\n    kernels: &[{}],\n    gemm: &[\n",
            static_name(gpu), p.gpu, p.source, p.copy_bps, p.gemm_flops, p.isolated_overhead_s, p.in_stream,
            p.kernels.iter().map(|(op, n)| format!("({op:?}, {n:?})")).collect::<Vec<_>>().join(", ")
        );
        for g in &p.gemm {
            let base = g.base.map_or("None".to_string(), |b| format!("Some({b})"));
            let _ = writeln!(
                s,
                "    G {{ dtype: {:?}, op: {:?}, label: {:?}, k: {}, n: {}, base: {base}, curve: {} }},",
                g.dtype, g.op, g.label, g.k, g.n, curve(&g.curve)
            );
        }
        let _ = write!(
            s,
            "    ],\n    prefill: {},\n    chunk: {},\n    chunk_fresh: {},\n    decode: {},\n    elementwise: &[\n",
            opt(&p.prefill), opt(&p.chunk), opt(&p.chunk_fresh), opt(&p.decode)
        );
        for (op, c) in &p.elementwise {
            let _ = writeln!(s, "    ({op:?}, {}),", curve(c));
        }
        s.push_str("    ],\n    elementwise_width: &[\n");
        for (op, w, c) in &p.elementwise_width {
            let _ = writeln!(s, "    ({op:?}, {w}, {}),", curve(c));
        }
        s.push_str("    ],\n};\n");
    }
    s
}

impl Profile {
    /// The shipped profile of GPU preset `gpu`, if any.
    pub fn builtin(gpu: &str) -> Option<Profile> {
        Some(Profile::from_data(get(gpu)?))
    }

    /// [`Profile::builtin`], parsed once per process and shared: the embedded text is a
    /// constant, and so is what it parses to (every simulation on a profiled GPU used to parse
    /// its JSON and take the logs of every point again).
    pub fn builtin_shared(gpu: &str) -> Option<std::sync::Arc<Profile>> {
        type Slot = std::sync::OnceLock<Option<std::sync::Arc<Profile>>>;
        static SLOTS: [Slot; PROFILED_GPUS.len()] = [const { Slot::new() }; PROFILED_GPUS.len()];
        let i = shipped_index(gpu)?;
        SLOTS[i].get_or_init(|| Profile::builtin(gpu).map(std::sync::Arc::new)).clone()
    }

    /// A shipped profile from its snapshot (its JSON is parsed only if its raw tables are
    /// asked for).
    fn from_data(d: &'static ProfileData) -> Profile {
        let curve = |c: &'static CurveData| Curve::from_static(c.x, c.lx, c.ly, c.ratio_floor);
        Profile {
            gpu: d.gpu.to_string(),
            source: d.source.to_string(),
            copy_bps: d.copy_bps,
            gemm_flops: d.gemm_flops,
            isolated_overhead_s: d.isolated_overhead_s,
            in_stream: d.in_stream,
            kernels: d.kernels.iter().map(|(op, n)| (op.to_string(), *n)).collect(),
            gpu_time_scale: 1.0,
            frontend: None,
            gemm: d
                .gemm
                .iter()
                .map(|g| GemmTable {
                    dtype: g.dtype.to_string(),
                    op: g.op.to_string(),
                    label: g.label.to_string(),
                    k: g.k,
                    n: g.n,
                    curve: curve(&g.curve),
                    base: g.base,
                })
                .collect(),
            prefill: d.prefill.as_ref().map(curve),
            chunk: d.chunk.as_ref().map(curve),
            chunk_fresh: d.chunk_fresh.as_ref().map(curve),
            decode: d.decode.as_ref().map(curve),
            elementwise: d.elementwise.iter().map(|(op, c)| (op.to_string(), curve(c))).collect(),
            elementwise_width: d.elementwise_width.iter().map(|(op, w, c)| (op.to_string(), *w, curve(c))).collect(),
            raw: std::sync::OnceLock::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{builtin_text, Profile, PROFILED_GPUS};
    use super::*;

    fn parsed(gpu: &str) -> Profile {
        Profile::parse(builtin_text(gpu).unwrap()).unwrap()
    }

    /// `builtin.rs` is what the shipped JSON builds to (UPDATE_PROFILES=1 rewrites it).
    #[test]
    fn snapshot_matches_the_shipped_json() {
        let built: Vec<(&str, Profile)> = PROFILED_GPUS.iter().map(|g| (*g, parsed(g))).collect();
        let refs: Vec<(&str, &Profile)> = built.iter().map(|(g, p)| (*g, p)).collect();
        let text = render(&refs);
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/calib/snapshot/builtin.rs");
        if std::env::var_os("UPDATE_PROFILES").is_some() {
            std::fs::write(path, &text).unwrap();
        }
        let shipped = std::fs::read_to_string(path).unwrap();
        assert!(shipped == text, "src/calib/snapshot/builtin.rs is stale: run `make profiles` and review the diff");
    }

    /// Every lookup of a shipped profile answers bit for bit as the parsed JSON does.
    #[test]
    fn snapshot_profiles_answer_as_the_parsed_ones() {
        for gpu in PROFILED_GPUS {
            let (a, b) = (Profile::builtin(gpu).unwrap(), parsed(gpu));
            // The snapshots and the embedded JSON follow PROFILED_GPUS' order.
            assert_eq!((a.gpu.as_str(), b.gpu.as_str()), (gpu, gpu));
            assert_eq!((a.gemm.len(), a.elementwise.len(), a.elementwise_width.len()), (b.gemm.len(), b.elementwise.len(), b.elementwise_width.len()));
            for (x, y) in a.gemm.iter().zip(&b.gemm) {
                assert_eq!((&x.dtype, &x.op, &x.label, x.k, x.n, x.base), (&y.dtype, &y.op, &y.label, y.k, y.n, y.base));
                assert_eq!(x.curve.parts(), y.curve.parts(), "{gpu} {}", x.label);
            }
            for (x, y) in a.elementwise_width.iter().zip(&b.elementwise_width) {
                assert_eq!((&x.0, x.1, x.2.parts()), (&y.0, y.1, y.2.parts()));
            }
            let m = [0.5, 1.0, 3.0, 100.0, 2048.0, 5000.0, 16384.0, 50000.0];
            for t in &a.gemm {
                for &m in &m {
                    assert_eq!(a.gemm(&t.dtype, t.k, t.n, m).map(|v| v.0.to_bits()), b.gemm(&t.dtype, t.k, t.n, m).map(|v| v.0.to_bits()));
                }
            }
            for x in [1e3, 1e6, 1e9, 1e12, 1e15] {
                assert_eq!(a.attention_decode(x).0.to_bits(), b.attention_decode(x).0.to_bits());
                assert_eq!(a.attention_prefill(32, 128, x.sqrt()).0.to_bits(), b.attention_prefill(32, 128, x.sqrt()).0.to_bits());
                for (op, _) in &a.elementwise {
                    assert_eq!(a.elementwise(op, x).map(|v| v.0.to_bits()), b.elementwise(op, x).map(|v| v.0.to_bits()));
                }
            }
            assert_eq!((&a.gpu, &a.source, a.copy_bps, a.gemm_flops, a.isolated_overhead_s, a.in_stream, &a.kernels), (&b.gpu, &b.source, b.copy_bps, b.gemm_flops, b.isolated_overhead_s, b.in_stream, &b.kernels));
            // The raw tables come from the embedded JSON on demand (for leave-one-out).
            assert_eq!((a.raw().gemm.len(), a.raw().elementwise.len()), (b.raw().gemm.len(), b.raw().elementwise.len()));
        }
    }
}
