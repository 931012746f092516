//! Result JSON: exactly `serde_json::to_string`'s bytes, written faster.
//!
//! A result is mostly columns of floats (time series, per-request times), and most of them
//! are whole numbers (`32.0` sequences in a batch, `0.0` waiting, bucket times `80.0`). serde_json
//! renders every float with the shortest round-trip algorithm (zmij), which on wasm32 pays
//! for 128-bit multiplications in software; a whole number below 10¹⁵ is rendered the same
//! way as its integer followed by `.0`, which [`Compact`] writes directly. Everything else
//! (fractions, large or negative-zero values) goes to serde_json's own code, so the bytes
//! never differ (a test compares both over whole numbers, boundaries and random values).

use serde::Serialize;
use serde_json::ser::{CompactFormatter, Formatter};
use std::io;

/// Whole numbers with magnitude below this are written as `<integer>.0`: serde_json writes
/// them so (it switches to exponent notation only from 10¹⁶ on); kept one decade lower.
const WHOLE_LIMIT: f64 = 1e15;

/// serde_json's compact formatter with a fast path for whole-number floats.
#[derive(Debug, Clone, Copy, Default)]
pub struct Compact;

impl Formatter for Compact {
    #[inline]
    fn write_f64<W: ?Sized + io::Write>(&mut self, writer: &mut W, value: f64) -> io::Result<()> {
        // `value` is finite here (serde_json writes NaN and infinities as null itself).
        if value.abs() < WHOLE_LIMIT {
            let i = value as i64;
            // -0.0 compares equal to 0 but serde_json writes it "-0.0": left to it.
            if i as f64 == value && (i != 0 || value.is_sign_positive()) {
                CompactFormatter.write_i64(writer, i)?;
                return writer.write_all(b".0");
            }
        }
        CompactFormatter.write_f64(writer, value)
    }
}

/// `serde_json::to_string(value)`, byte for byte, with [`Compact`]'s faster floats.
///
/// Written into fixed-size chunks and joined once into a string of the exact length: a
/// single growing buffer doubles (a 132 MiB result had 256 MiB reserved, beside the 128 MiB
/// it had outgrown, and WASM memory never shrinks), where this peaks at twice the text.
pub fn to_string<T: ?Sized + Serialize>(value: &T) -> serde_json::Result<String> {
    let mut out = Chunks::default();
    value.serialize(&mut serde_json::Serializer::with_formatter(&mut out, Compact))?;
    out.full.push(out.open);
    // `concat` reserves the exact total once.
    let text = out.full.concat();
    // serde_json writes UTF-8 only (it escapes nothing into invalid sequences).
    Ok(String::from_utf8(text).unwrap_or_default())
}

/// Bytes of one chunk of [`Chunks`].
const CHUNK: usize = 1 << 20;

/// A writer into chunks of [`CHUNK`] bytes (none ever grows past its first reservation).
#[derive(Default)]
struct Chunks {
    full: Vec<Vec<u8>>,
    open: Vec<u8>,
}

impl io::Write for Chunks {
    fn write(&mut self, mut buf: &[u8]) -> io::Result<usize> {
        let n = buf.len();
        while !buf.is_empty() {
            if self.open.capacity() == 0 {
                // A small first chunk: most texts (a summary, a step) fit it.
                self.open = Vec::with_capacity(if self.full.is_empty() { 4096 } else { CHUNK });
            }
            let room = self.open.capacity() - self.open.len();
            let (now, rest) = buf.split_at(room.min(buf.len()));
            self.open.extend_from_slice(now);
            buf = rest;
            if self.open.len() == self.open.capacity() {
                self.full.push(std::mem::take(&mut self.open));
            }
        }
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn same(v: f64) {
        assert_eq!(to_string(&v).unwrap(), serde_json::to_string(&v).unwrap(), "{v:e}");
    }

    #[test]
    fn floats_are_written_exactly_as_serde_json_writes_them() {
        for v in [
            0.0, -0.0, 1.0, -1.0, 32.0, 80.0, 0.5, -0.5, 1e14, 1e15, -1e15, 1e15 - 1.0, 1e16, 1e17, 1e21, 1e22,
            9007199254740992.0, 9007199254740993.0, 4503599627370496.5, 999999999999999.0, -999999999999999.0,
            123456789.0, 1e-7, 5e-324, f64::MAX, f64::MIN, f64::MIN_POSITIVE, 0.1 + 0.2, 28.7300924875,
        ] {
            same(v);
        }
        // Every whole number near each power of ten and of two, both signs.
        for e in 0..=17 {
            let p = 10f64.powi(e);
            for d in -3..=3 {
                same(p + f64::from(d));
                same(-(p + f64::from(d)));
            }
        }
        for e in 0..=60 {
            let p = (1u64 << e) as f64;
            same(p);
            same(p - 1.0);
            same(-p);
        }
        // Pseudo-random values across magnitudes, whole and not.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let v = f64::from_bits(x);
            if v.is_finite() {
                same(v);
                same(v.trunc());
            }
            let small = (x % 2_000_000_000_000_000) as f64 - 1e15;
            same(small);
            same(small / 8.0);
        }
    }

    #[test]
    fn a_text_over_many_chunks_is_the_same_text() {
        // About 7 MB: the 4 KiB first chunk, then 1 MiB ones, joined at the exact length.
        let v: Vec<f64> = (0..600_000).map(|i| f64::from(i) * 0.37).collect();
        let text = to_string(&v).unwrap();
        assert_eq!(text, serde_json::to_string(&v).unwrap());
        assert!(text.len() > 4 * CHUNK && text.capacity() == text.len());
        assert_eq!(to_string(&Vec::<f64>::new()).unwrap(), "[]");
    }

    #[test]
    fn non_finite_and_structures_match() {
        let v = serde_json::json!({"a": [1.0, -0.0, 2.5, null], "b": {"c": 1e300, "d": 7}});
        assert_eq!(to_string(&v).unwrap(), serde_json::to_string(&v).unwrap());
        let cols = vec![f64::NAN, f64::INFINITY, 3.0];
        assert_eq!(to_string(&cols).unwrap(), serde_json::to_string(&cols).unwrap());
    }
}
