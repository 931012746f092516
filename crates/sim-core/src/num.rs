//! Number helpers every layer may use (the ground floor: it imports nothing of the crate).

/// `x.round() as u64` (half away from zero; `as` saturating, NaN → 0) without the libm call:
/// `x - trunc(x)` is exact, so comparing it with ½ decides the rounding exactly.
#[inline]
pub fn round_u64(x: f64) -> u64 {
    let t = x as u64;
    if x - t as f64 >= 0.5 {
        t.saturating_add(1)
    } else {
        t
    }
}

#[cfg(test)]
mod round_tests {
    #[test]
    fn round_u64_matches_round_as() {
        let xs = [
            0.0, -0.0, 0.49999999999999994, 0.5, 1.5, 2.5, 2.4999999999999996, -0.5, -0.7, -3.2, 1e15 + 0.5,
            4503599627370495.5, 4503599627370496.0, 9007199254740993.0, 1.8446744073709552e19, 1e30, f64::INFINITY,
            f64::NEG_INFINITY, f64::NAN, 12345678.499999, 12345678.5, 7.0e-9,
        ];
        for &x in &xs {
            assert_eq!(super::round_u64(x), x.round() as u64, "{x}");
        }
        let mut v = 0.123_f64;
        for _ in 0..100_000 {
            v = (v * 1.37 + 0.25) % 1e12;
            for x in [v, v.floor() + 0.5, v * 1e-3] {
                assert_eq!(super::round_u64(x), x.round() as u64, "{x}");
            }
        }
    }
}
