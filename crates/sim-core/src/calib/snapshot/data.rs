//! The shapes of a shipped profile's static snapshot: what `builtin.rs` (generated) is
//! written in, and `Profile::from_data` reads into a [`Profile`](crate::calib::Profile).

/// One [`Curve`](crate::calib::Curve): see [`Curve::from_static`](crate::calib::Curve::from_static).
#[derive(Debug)]
pub struct CurveData {
    pub x: &'static [f64],
    pub lx: &'static [f64],
    pub ly: &'static [f64],
    pub ratio_floor: Option<f64>,
}

/// One [`GemmTable`](crate::calib::GemmTable).
#[derive(Debug)]
pub struct GemmData {
    pub dtype: &'static str,
    pub op: &'static str,
    pub label: &'static str,
    pub k: u32,
    pub n: u32,
    pub curve: CurveData,
    pub base: Option<usize>,
}

/// A built [`Profile`](crate::calib::Profile), less its raw tables.
#[derive(Debug)]
pub struct ProfileData {
    pub gpu: &'static str,
    pub source: &'static str,
    pub copy_bps: f64,
    pub gemm_flops: f64,
    pub isolated_overhead_s: f64,
    pub in_stream: bool,
    pub kernels: &'static [(&'static str, f64)],
    pub gemm: &'static [GemmData],
    pub prefill: Option<CurveData>,
    pub chunk: Option<CurveData>,
    pub chunk_fresh: Option<CurveData>,
    pub decode: Option<CurveData>,
    pub elementwise: &'static [(&'static str, CurveData)],
    pub elementwise_width: &'static [(&'static str, u32, CurveData)],
}
