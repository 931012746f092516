//! Resource limits as part of validation: a scenario's `limits` section, the memory a run
//! will need estimated from the scenario *before* anything large is allocated, and a wall
//! clock. A scenario over its limits is refused with a `ResourceError` naming the field that
//! drives the estimate, the estimate and the limit, instead of the process dying on an
//! allocation failure (Rust aborts on those: no `catch_unwind` sees them).
//!
//! The estimates are per-item costs measured on this code (native, release, peak RSS over
//! growing runs, 2026-12-01): a generated request costs about 215 B through a run plus
//! about 130 B of result JSON; an explicit request about 40 B more while it is parsed into
//! the scenario; a KV block its requests can use 4 B per replica (its free-list entry), 4.5 B
//! with prefix caching ([`kv_pool_bytes`]: its free queue's entry with room for the queue's
//! holes, reserved up front; blocks no request can reach cost nothing, [`crate::kv::free`]);
//! a replica up to 250 kB
//! (its time series at 2,048 buckets, the result's columns of them); a model-checker state
//! about 1.5× its packed bytes plus 60 B of index and graph and 8 B per transition. Where an
//! estimate cannot be exact (a duration-bounded workload's random count, the recorded step
//! log, the checker's growth), and for the KV pools (the largest single allocations),
//! allocation is fallible (`try_reserve`) and a failure is the same `ResourceError`.
//!
//! Text inputs are capped at [`MAX_INPUT_BYTES`] before parsing (parsing takes about 13 B
//! per JSON byte and 36 B per TOML byte at peak).

use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use crate::error::{check, Result, SimError};

/// Largest scenario text accepted (64 MiB): about 1 GiB at peak to parse as JSON, 2.3 GiB
/// as TOML. Front ends never read more than this from a file.
pub const MAX_INPUT_BYTES: usize = 64 << 20;

/// Default of `limits.max_memory_gib`: fits a laptop with 8 GB alongside the front end.
pub const DEFAULT_MAX_MEMORY_GIB: f64 = 4.0;
/// Default of `limits.max_seconds`: ten minutes of the run's own CPU time ([`Clock`]).
pub const DEFAULT_MAX_SECONDS: f64 = 600.0;
/// A WASM module addresses 4 GiB at most, shared with its input and output text: the
/// memory limit there is at most this.
pub const WASM_MAX_MEMORY_GIB: f64 = 3.0;

/// Bytes a generated request costs through a run, result JSON included. Measured on a
/// million short requests (llama-3-8b, 8 replicas): 340 B natively (RSS through Python),
/// 384–393 B in WASM (module growth: the JSON text is built inside it, and memory it outgrew
/// stays reserved), so WASM counts more.
pub const BYTES_PER_REQUEST: u64 = if cfg!(target_arch = "wasm32") { 448 } else { 384 };
/// More bytes per request of an explicit list (its parsed entry).
pub const BYTES_PER_LISTED_REQUEST: u64 = 40;
/// Bytes per KV block handed out per replica (its free-list entry; a held block is an entry
/// of its request's table instead; a block never handed out costs nothing). With prefix
/// caching more: [`kv_pool_bytes`].
pub const BYTES_PER_BLOCK: u64 = 4;
/// Bytes per replica at most: its time series (2,048 buckets) and their result columns.
pub const BYTES_PER_REPLICA: u64 = 256 << 10;

pub(crate) const GIB: f64 = (1u64 << 30) as f64;

/// The scenario's `limits` section: what one run may use.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Memory the run may use, GiB (estimated before it starts; default 4). In WASM at most
    /// [`WASM_MAX_MEMORY_GIB`].
    pub max_memory_gib: f64,
    /// Wall time the run may take, seconds (default 600). Not enforced in WASM, which has
    /// no clock without imports: the page runs simulations in a Worker it can stop.
    pub max_seconds: f64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_memory_gib: DEFAULT_MAX_MEMORY_GIB, max_seconds: DEFAULT_MAX_SECONDS }
    }
}

impl Limits {
    /// Whether these are the defaults (then the section is left out when serialized).
    pub fn is_default(&self) -> bool {
        *self == Limits::default()
    }

    /// `max_memory_gib` in (0, 1024], `max_seconds` in (0, 10⁷].
    pub fn validate(&self) -> Result<()> {
        check::positive("limits.max_memory_gib", self.max_memory_gib)?;
        check::in_range("limits.max_memory_gib", self.max_memory_gib, 0.0, 1024.0)?;
        check::positive("limits.max_seconds", self.max_seconds)?;
        check::in_range("limits.max_seconds", self.max_seconds, 0.0, 1e7)?;
        Ok(())
    }

    /// The memory limit in bytes on this target: at most [`WASM_MAX_MEMORY_GIB`] in WASM,
    /// and, when the scenario leaves `max_memory_gib` at its default, at most what the
    /// front end said the process may use ([`set_memory_ceiling`]).
    pub fn memory_bytes(&self) -> u64 {
        let gib = if cfg!(target_arch = "wasm32") { self.max_memory_gib.min(WASM_MAX_MEMORY_GIB) } else { self.max_memory_gib };
        let bytes = (gib * GIB) as u64;
        match memory_ceiling() {
            Some(c) if self.max_memory_gib == DEFAULT_MAX_MEMORY_GIB => bytes.min(c),
            _ => bytes,
        }
    }

    /// Whether [`Limits::memory_bytes`] is the process's ceiling rather than `max_memory_gib`.
    pub fn capped_by_process(&self) -> bool {
        memory_ceiling().is_some_and(|c| self.max_memory_gib == DEFAULT_MAX_MEMORY_GIB && c < (self.max_memory_gib * GIB) as u64)
    }
}

/// What this process may still allocate, bytes (0: not known), set by a front end from the
/// operating system (the address-space limit less what is mapped, a cgroup's `memory.max`
/// less its use, the memory available): the default memory limit is at most this.
static CEILING: AtomicU64 = AtomicU64::new(0);

/// Set the process's memory ceiling ([`Limits::memory_bytes`]); 0 clears it.
pub fn set_memory_ceiling(bytes: u64) {
    CEILING.store(bytes, Ordering::Relaxed);
}

/// The process's memory ceiling, if a front end set one.
pub fn memory_ceiling() -> Option<u64> {
    match CEILING.load(Ordering::Relaxed) {
        0 => None,
        c => Some(c),
    }
}

/// Human-readable bytes (`17.2 GiB`, `310 MiB`, `12 kiB`).
pub fn bytes_text(b: u64) -> String {
    let b = b as f64;
    if b >= GIB {
        format!("{:.1} GiB", b / GIB)
    } else if b >= (1u64 << 20) as f64 {
        format!("{:.0} MiB", b / (1u64 << 20) as f64)
    } else {
        format!("{:.0} kiB", (b / 1024.0).max(1.0))
    }
}

/// A text input over [`MAX_INPUT_BYTES`] is refused before it is parsed.
pub fn check_input(len: usize, what: &str) -> Result<()> {
    if len > MAX_INPUT_BYTES {
        return Err(SimError::resource(
            "",
            format!(
                "{what} is {} long, more than the {} o1sim reads (use a generated workload instead of a very long \
                 explicit request list)",
                bytes_text(len as u64),
                bytes_text(MAX_INPUT_BYTES as u64)
            ),
        ));
    }
    Ok(())
}

/// Holes (units taken out of its middle by cache hits) a prefix-caching pool that has
/// handed out `blocks` units lets its free queue hold before it packs them away: an eighth
/// of those units, at least 1,024. The queue then never stores more than `blocks` plus
/// these entries (units never handed out are not stored, [`crate::kv::free`]).
pub fn queue_holes_max(blocks: u32) -> u32 {
    (blocks / 8).max(1024)
}

/// Entries of a prefix-caching pool's free queue at most once it has handed out `blocks`
/// units, reserved before they are handed out (so that freeing never grows it, which would
/// double it): every unit handed out free, plus the holes ([`queue_holes_max`]).
pub fn queue_capacity(blocks: u32) -> u64 {
    u64::from(blocks) + u64::from(queue_holes_max(blocks))
}

/// Entries of a prefix-caching pool's free queue per count of holes it keeps while it packs
/// them away (4 B a chunk).
pub const PACK_CHUNK: usize = 256;

/// Bytes one replica's KV pool takes at most once it has handed out `blocks` units (its
/// size does not count: units never handed out are not stored): its free stack, 4 B a unit
/// ([`BYTES_PER_BLOCK`]); with prefix caching its free queue instead (4 B an entry,
/// [`queue_capacity`], about 4.5 B a unit) and, while the queue is packed, 4 B per
/// [`PACK_CHUNK`] entries.
pub fn kv_pool_bytes(blocks: u32, caching: bool) -> u64 {
    if caching {
        let entries = queue_capacity(blocks);
        entries * BYTES_PER_BLOCK + (entries / PACK_CHUNK as u64 + 1) * 4
    } else {
        u64::from(blocks) * BYTES_PER_BLOCK
    }
}

/// The `ResourceError` naming `field` of an allocation of `bytes` for `what` that failed.
pub fn out_of_memory(field: &str, bytes: u64, what: &str) -> SimError {
    SimError::resource(
        field,
        format!(
            "could not allocate {} more for {what} (the machine is out of memory; lower the scenario's size or \
             limits.max_memory_gib)",
            bytes_text(bytes)
        ),
    )
}

/// `Vec::try_reserve` as a `ResourceError` naming `field`.
pub fn try_reserve<T>(v: &mut Vec<T>, more: usize, field: &str, what: &str) -> Result<()> {
    v.try_reserve(more)
        .map_err(|_| out_of_memory(field, (more.saturating_mul(std::mem::size_of::<T>())) as u64, what))
}

/// The CPU time a run or a check spends: its thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`)
/// while it runs, so that a run on a slow or busy machine is not stopped for time other
/// processes took (wall time would be), and time between two slices of a run (the front
/// end's own work) is not counted ([`Clock::pause`], [`Clock::resume`]). Off Unix, wall
/// time. `std::time::Instant` panics on wasm32-unknown-unknown (no clock without imports),
/// so there the time reads 0: time limits never fire and the front end bounds the work
/// itself (the page runs it in a Worker it can terminate).
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    /// Seconds counted before the present stretch.
    spent: f64,
    /// The clock's reading when the present stretch began; `None` while paused.
    since: Option<f64>,
}

/// The calling thread's CPU time, s.
#[cfg(unix)]
fn now_s() -> f64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

/// Wall time since the first reading, s (no thread CPU clock here).
#[cfg(all(not(unix), not(all(target_arch = "wasm32", target_os = "unknown"))))]
fn now_s() -> f64 {
    static EPOCH: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    EPOCH.get_or_init(std::time::Instant::now).elapsed().as_secs_f64()
}

#[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
fn now_s() -> f64 {
    0.0
}

impl Clock {
    /// Start counting now.
    pub fn start() -> Clock {
        Clock { spent: 0.0, since: Some(now_s()) }
    }

    /// Seconds counted so far.
    pub fn elapsed_s(&self) -> f64 {
        self.spent + self.since.map_or(0.0, |t| (now_s() - t).max(0.0))
    }

    /// Stop counting (the run returned to its caller).
    pub fn pause(&mut self) {
        self.spent = self.elapsed_s();
        self.since = None;
    }

    /// Count again (the run goes on, perhaps on another thread).
    pub fn resume(&mut self) {
        if self.since.is_none() {
            self.since = Some(now_s());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run's clock counts its own CPU time: not the time it waits (on a busy machine, for
    /// the CPU), and not the time it is paused between two slices.
    #[cfg(unix)]
    #[test]
    fn the_clock_counts_the_run_s_own_cpu_time_only_while_it_runs() {
        let mut run = Clock::start();
        std::thread::sleep(std::time::Duration::from_millis(300));
        assert!(run.elapsed_s() < 0.2, "slept 0.3 s, counted {}", run.elapsed_s());
        // Work while paused is not counted; work after resuming is.
        run.pause();
        let counted = run.elapsed_s();
        let work = Clock::start();
        let mut x = 1u64;
        while work.elapsed_s() < 0.05 {
            x = std::hint::black_box(x.wrapping_mul(3).wrapping_add(1));
        }
        assert_eq!(run.elapsed_s(), counted);
        run.resume();
        let resumed = Clock::start();
        while resumed.elapsed_s() < 0.05 {
            x = std::hint::black_box(x.wrapping_mul(3).wrapping_add(1));
        }
        assert!(run.elapsed_s() >= counted + 0.05, "{} after {counted}", run.elapsed_s());
    }

    #[test]
    fn limits_are_validated() {
        let l = Limits { max_memory_gib: 0.0, ..Limits::default() };
        assert_eq!(l.validate().unwrap_err().path(), Some("limits.max_memory_gib"));
        let l = Limits { max_seconds: f64::INFINITY, ..Limits::default() };
        assert_eq!(l.validate().unwrap_err().path(), Some("limits.max_seconds"));
        assert!(Limits::default().validate().is_ok() && Limits::default().is_default());
    }

    #[test]
    fn inputs_over_the_cap_are_refused() {
        assert!(check_input(MAX_INPUT_BYTES, "the scenario").is_ok());
        let e = check_input(MAX_INPUT_BYTES + 1, "the scenario").unwrap_err();
        assert_eq!(e.kind_name(), "ResourceError");
        assert!(e.to_string().contains("64 MiB"), "{e}");
    }
}
