//! The shipped calibration profiles: which GPUs have one ([`PROFILED_GPUS`], the one list of
//! their names) and each one's embedded JSON ([`builtin_text`]). Their built snapshots
//! ([`super::snapshot`]) follow the same order.

/// Writes [`PROFILED_GPUS`] and the embedded JSON of each (`profiles/<name>.json`, in the
/// same order) from one list of names.
macro_rules! shipped_profiles {
    ($($gpu:literal),+) => {
        /// Names of the GPUs with a shipped profile.
        pub const PROFILED_GPUS: [&str; [$($gpu),+].len()] = [$($gpu),+];

        /// Each shipped profile's JSON, in [`PROFILED_GPUS`] order.
        const TEXTS: [&str; PROFILED_GPUS.len()] = [$(include_str!(concat!("../../profiles/", $gpu, ".json"))),+];
    };
}

shipped_profiles!("h200", "a100-80g", "h100");

/// Position of `gpu` in [`PROFILED_GPUS`], if a profile ships for it.
pub(super) fn shipped_index(gpu: &str) -> Option<usize> {
    PROFILED_GPUS.iter().position(|g| *g == gpu)
}

/// Embedded profile text of a GPU preset, if one ships.
pub fn builtin_text(gpu: &str) -> Option<&'static str> {
    Some(TEXTS[shipped_index(gpu)?])
}
