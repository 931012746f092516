//! One measured curve `y(x)` (time vs tokens, FLOPs or bytes), interpolated piecewise
//! linearly in log–log space.
//!
//! Why log–log: operator times span four decades of tokens and their shape is a power law
//! piece by piece (flat while launch- or latency-bound, slope 1 once throughput-bound, slope 2
//! for attention over sequence length), so straight lines between measured points in log
//! space follow the data far better than lines in linear space.
//!
//! Outside the measured range the curve does not extrapolate its end slopes (noise there
//! would be amplified): below the first point it stays at the first time (a floor: launch
//! or latency bound), above the last it scales linearly with `x` from the last point, i.e.
//! keeps the largest measured size's throughput — the roofline fitted to the table's tail.
//! Ratio curves (an FP8 time over the BF16 time of the same shape) are the exception: a
//! falling ratio keeps falling along its last segment, down to a floor (see [`Curve::ratio`]).

use std::borrow::Cow;

use super::Source;

/// Relative distance under which a query counts as hitting a measured point.
const HIT_REL: f64 = 1e-9;

/// Measured points of one operator shape, sorted by `x`, with logs precomputed.
#[derive(Debug, Clone)]
pub struct Curve {
    x: Cow<'static, [f64]>,
    lx: Cow<'static, [f64]>,
    ly: Cow<'static, [f64]>,
    /// Above the last point: scale linearly with `x` (times) or follow [`Above::Ratio`].
    above: Above,
}

/// What a curve does above its largest measured point.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Above {
    /// Scale linearly with `x`: the largest measured size's throughput.
    Linear,
    /// A ratio: continue the last segment's log–log slope while it falls (the faster
    /// kernel still gaining as the work grows), never below `floor`; a rising or flat last
    /// segment holds the last value.
    Ratio { floor: f64 },
}

impl Curve {
    /// Build from `(x, y)` points with `x > 0`, `y > 0` (others are dropped). Points at the
    /// same `x` are merged by their geometric mean. `None` when no point is left.
    pub fn new(points: &[(f64, f64)]) -> Option<Curve> {
        let mut pts: Vec<(f64, f64)> = points
            .iter()
            .copied()
            .filter(|(x, y)| *x > 0.0 && *y > 0.0 && x.is_finite() && y.is_finite())
            .collect();
        if pts.is_empty() {
            return None;
        }
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (mut x, mut lx, mut ly) = (Vec::new(), Vec::new(), Vec::new());
        let mut i = 0;
        while i < pts.len() {
            let mut j = i;
            let mut sum = 0.0;
            while j < pts.len() && pts[j].0 == pts[i].0 {
                sum += libm::log(pts[j].1);
                j += 1;
            }
            x.push(pts[i].0);
            lx.push(libm::log(pts[i].0));
            ly.push(sum / (j - i) as f64);
            i = j;
        }
        Some(Curve { x: x.into(), lx: lx.into(), ly: ly.into(), above: Above::Linear })
    }

    /// Like [`Curve::new`] for a ratio (e.g. FP8 time / BF16 time): held flat below the
    /// measured range; above it a falling ratio continues its last segment's slope down to
    /// `floor` (for FP8 over BF16: the best BF16 rate measured over the best FP8 rate — the
    /// ratio two saturated GEMMs approach; no floor when it is not a positive number), a
    /// rising one holds its last value. Why: the FP8/BF16 ratio of the H200 tables still
    /// falls between their two largest sizes (0.65 → 0.57 typical from 4,096 to 16,384
    /// tokens), so holding it flat overestimated every FP8 GEMM beyond the table
    /// (leave-one-out of the 40 largest FP8 rows: 14.1% → 9.2% mean error).
    pub fn ratio(points: &[(f64, f64)], floor: f64) -> Option<Curve> {
        let floor = if floor.is_finite() && floor > 0.0 { floor } else { 0.0 };
        Curve::new(points).map(|c| Curve { above: Above::Ratio { floor }, ..c })
    }

    /// A curve over points prepared ahead of time (a shipped profile's snapshot): `x`
    /// ascending, `lx = ln x`, `ly = ln y`, exactly as [`Curve::new`] leaves them;
    /// `ratio_floor`: `None` for a time, `Some(floor)` for [`Curve::ratio`]'s.
    pub fn from_static(x: &'static [f64], lx: &'static [f64], ly: &'static [f64], ratio_floor: Option<f64>) -> Curve {
        debug_assert!(!x.is_empty() && x.len() == lx.len() && x.len() == ly.len());
        let above = ratio_floor.map_or(Above::Linear, |floor| Above::Ratio { floor });
        Curve { x: Cow::Borrowed(x), lx: Cow::Borrowed(lx), ly: Cow::Borrowed(ly), above }
    }

    /// What [`Curve::from_static`] takes: `(x, ln x, ln y, ratio floor)`.
    pub fn parts(&self) -> (&[f64], &[f64], &[f64], Option<f64>) {
        let floor = match self.above {
            Above::Linear => None,
            Above::Ratio { floor } => Some(floor),
        };
        (&self.x, &self.lx, &self.ly, floor)
    }

    /// Smallest measured `x`.
    pub fn x_min(&self) -> f64 {
        self.x[0]
    }

    /// Largest measured `x`.
    pub fn x_max(&self) -> f64 {
        self.x[self.x.len() - 1]
    }

    /// Value at the smallest measured `x`.
    pub fn y_first(&self) -> f64 {
        libm::exp(self.ly[0])
    }

    /// `y(x)` and where it came from: `Table` on a measured point, `Interpolated` inside the
    /// range or below it (held at the floor), `Roofline` above it (the tail's throughput).
    /// The measured range `(first x, last x)`.
    pub fn range(&self) -> (f64, f64) {
        (self.x[0], self.x[self.x.len() - 1])
    }

    /// How far apart the measured points around `x` are (`x_right / x_left`; 1 on a point),
    /// for `x` inside the measured range; `None` outside it.
    pub fn gap(&self, x: f64) -> Option<f64> {
        let (lo, hi) = self.range();
        if !(lo..=hi).contains(&x) {
            return None;
        }
        let i = self.x.partition_point(|&p| p < x);
        if i < self.x.len() && (self.x[i] - x).abs() <= HIT_REL * x {
            return Some(1.0);
        }
        Some(self.x[i] / self.x[i - 1])
    }

    /// The largest measured point `(x, y)`.
    pub fn last(&self) -> (f64, f64) {
        let i = self.x.len() - 1;
        (self.x[i], libm::exp(self.ly[i]))
    }

    pub fn eval(&self, x: f64) -> (f64, Source) {
        let n = self.x.len();
        if x.is_nan() || x <= 0.0 {
            return (self.y_first(), Source::Interpolated);
        }
        if x <= self.x[0] {
            let src = if (x - self.x[0]).abs() <= HIT_REL * self.x[0] { Source::Table } else { Source::Interpolated };
            return (self.y_first(), src);
        }
        let last = n - 1;
        if x >= self.x[last] {
            let y = libm::exp(self.ly[last]);
            if (x - self.x[last]).abs() <= HIT_REL * self.x[last] {
                return (y, Source::Table);
            }
            return match self.above {
                Above::Linear => (y * x / self.x[last], Source::Roofline),
                Above::Ratio { floor } => {
                    let slope = if last > 0 { (self.ly[last] - self.ly[last - 1]) / (self.lx[last] - self.lx[last - 1]) } else { 0.0 };
                    if slope >= 0.0 || y <= floor {
                        return (y, Source::Interpolated);
                    }
                    let along = libm::exp(self.ly[last] + slope * (libm::log(x) - self.lx[last]));
                    (along.max(floor), Source::Interpolated)
                }
            };
        }
        // first index with x[i] >= x (i in 1..=last)
        let i = self.x.partition_point(|&v| v < x);
        if (self.x[i] - x).abs() <= HIT_REL * x {
            return (libm::exp(self.ly[i]), Source::Table);
        }
        let lq = libm::log(x);
        let t = (lq - self.lx[i - 1]) / (self.lx[i] - self.lx[i - 1]);
        (libm::exp(self.ly[i - 1] + t * (self.ly[i] - self.ly[i - 1])), Source::Interpolated)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hits_interpolates_in_log_space_and_extends() {
        let c = Curve::new(&[(1.0, 10.0), (100.0, 1000.0), (4.0, 10.0)]).unwrap();
        let (y, s) = c.eval(4.0);
        assert!((y - 10.0).abs() < 1e-9 && s == Source::Table);
        // between 4 and 100 the log-log line has slope log(100)/log(25)
        let (y, s) = c.eval(10.0);
        assert_eq!(s, Source::Interpolated);
        let expect = libm::exp(libm::log(10.0) + libm::log(2.5) / libm::log(25.0) * libm::log(100.0));
        assert!((y - expect).abs() < 1e-9, "{y} {expect}");
        let (y, s) = c.eval(0.5);
        assert!((y - 10.0).abs() < 1e-9 && s == Source::Interpolated);
        assert_eq!(c.eval(1.0).1, Source::Table);
        let (y, s) = c.eval(200.0);
        assert_eq!(s, Source::Roofline);
        assert!((y - 2000.0).abs() < 1e-6);
    }

    #[test]
    fn ratio_follows_a_falling_last_segment_down_to_its_floor() {
        // 0.8 at 1,024 → 0.64 at 4,096: slope log(0.8)/log(4) per log-x.
        let c = Curve::ratio(&[(1024.0, 0.8), (4096.0, 0.64)], 0.55).unwrap();
        let (y, s) = c.eval(8192.0);
        assert_eq!(s, Source::Interpolated);
        assert!((y - 0.64 * libm::sqrt(0.8)).abs() < 1e-12, "{y}");
        assert!((c.eval(1e6).0 - 0.55).abs() < 1e-12, "held at the floor");
        assert!((c.eval(512.0).0 - 0.8).abs() < 1e-12, "flat below");
        // A rising last segment, or one already under the floor, holds its last value.
        let up = Curve::ratio(&[(1024.0, 0.6), (4096.0, 0.7)], 0.5).unwrap();
        assert!((up.eval(65536.0).0 - 0.7).abs() < 1e-12);
        let under = Curve::ratio(&[(1024.0, 0.6), (4096.0, 0.5)], 0.55).unwrap();
        assert!((under.eval(65536.0).0 - 0.5).abs() < 1e-12);
        // No usable floor (NaN): the slope alone; a single point holds.
        let free = Curve::ratio(&[(1.0, 1.0), (2.0, 0.5)], f64::NAN).unwrap();
        assert!((free.eval(4.0).0 - 0.25).abs() < 1e-12);
        assert!((Curve::ratio(&[(8.0, 0.7)], 0.5).unwrap().eval(64.0).0 - 0.7).abs() < 1e-12);
    }

    #[test]
    fn duplicates_merge_by_geometric_mean() {
        let c = Curve::new(&[(2.0, 4.0), (2.0, 9.0)]).unwrap();
        assert!((c.eval(2.0).0 - 6.0).abs() < 1e-9);
        assert!(Curve::new(&[(0.0, 1.0)]).is_none());
    }
}
