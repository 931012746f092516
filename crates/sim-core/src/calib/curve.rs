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

use super::Source;

/// Relative distance under which a query counts as hitting a measured point.
const HIT_REL: f64 = 1e-9;

/// Measured points of one operator shape, sorted by `x`, with logs precomputed.
#[derive(Debug, Clone)]
pub struct Curve {
    x: Vec<f64>,
    lx: Vec<f64>,
    ly: Vec<f64>,
    /// Above the last point: scale linearly with `x` (times) or hold the last value (ratios).
    linear_above: bool,
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
        let mut c = Curve { x: Vec::new(), lx: Vec::new(), ly: Vec::new(), linear_above: true };
        let mut i = 0;
        while i < pts.len() {
            let mut j = i;
            let mut sum = 0.0;
            while j < pts.len() && pts[j].0 == pts[i].0 {
                sum += libm::log(pts[j].1);
                j += 1;
            }
            c.x.push(pts[i].0);
            c.lx.push(libm::log(pts[i].0));
            c.ly.push(sum / (j - i) as f64);
            i = j;
        }
        Some(c)
    }

    /// Like [`Curve::new`] for a ratio (e.g. FP8 time / BF16 time): held flat on both sides
    /// of the measured range.
    pub fn ratio(points: &[(f64, f64)]) -> Option<Curve> {
        Curve::new(points).map(|c| Curve { linear_above: false, ..c })
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
            if !self.linear_above {
                return (y, Source::Interpolated);
            }
            return (y * x / self.x[last], Source::Roofline);
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
    fn duplicates_merge_by_geometric_mean() {
        let c = Curve::new(&[(2.0, 4.0), (2.0, 9.0)]).unwrap();
        assert!((c.eval(2.0).0 - 6.0).abs() < 1e-9);
        assert!(Curve::new(&[(0.0, 1.0)]).is_none());
    }
}
