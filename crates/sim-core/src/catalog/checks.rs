//! Field checks the GPU and model records share.

use crate::error::{check, Result, SimError};

/// `value` must be finite and in (0, 1].
pub(crate) fn fraction(path: &str, value: f64) -> Result<()> {
    check::finite(path, value)?;
    if value <= 0.0 || value > 1.0 {
        return Err(SimError::config(
            path,
            format!("must be in (0, 1] (got {value})"),
        ));
    }
    Ok(())
}

/// Whether `d` divides `n` (false for `d == 0`, never panics).
pub(crate) fn divides(d: u32, n: u32) -> bool {
    n.checked_rem(d) == Some(0)
}

/// `value` must be at least 1.
pub(super) fn at_least_one(path: &str, value: u32) -> Result<()> {
    if value < 1 {
        return Err(SimError::config(
            path,
            format!("must be >= 1 (got {value})"),
        ));
    }
    Ok(())
}
