//! The composition root's resource check: the memory a run of a scenario will need,
//! estimated from the scenario *before* anything large is allocated, as parts that each name
//! the field driving them ([`run_parts`]), and the refusal of an estimate over
//! `limits.max_memory_gib` ([`enforce`]). It reads the whole [`Scenario`], so it lives here
//! above the parser rather than in [`crate::limits`] (which the parser imports); the
//! per-item costs are [`crate::limits`]' constants.

use crate::catalog::{GpuInput, ModelInput};
use crate::config::Scenario;
use crate::error::{Result, SimError};
use crate::limits::{
    bytes_text, kv_pool_bytes, queue_capacity, Limits, BYTES_PER_BLOCK, BYTES_PER_LISTED_REQUEST, BYTES_PER_REPLICA,
    BYTES_PER_REQUEST, GIB, WASM_MAX_MEMORY_GIB,
};
use crate::workload::{Len, LoadedTrace};

/// One part of a memory estimate: the field that drives it, its bytes, what it is.
#[derive(Debug, Clone)]
pub struct Part {
    pub field: String,
    pub bytes: u64,
    pub what: String,
}

/// Refuse `parts` when together they exceed `limits`: a `ResourceError` naming the field of
/// the largest part, the estimate (each part) and the limit.
pub fn enforce(parts: &[Part], limits: &Limits) -> Result<()> {
    let total = parts.iter().fold(0u64, |a, p| a.saturating_add(p.bytes));
    let limit = limits.memory_bytes();
    if total <= limit {
        return Ok(());
    }
    let Some(top) = parts.iter().max_by_key(|p| p.bytes) else { return Ok(()) };
    let mut shown: Vec<&Part> = parts.iter().filter(|p| p.bytes > total / 100).collect();
    shown.sort_by_key(|p| std::cmp::Reverse(p.bytes));
    let detail: Vec<String> = shown.iter().map(|p| format!("{} for {}", bytes_text(p.bytes), p.what)).collect();
    Err(SimError::resource(
        &top.field,
        format!(
            "needs about {} ({}), more than {}{}",
            bytes_text(total),
            detail.join(", "),
            if limits.capped_by_process() {
                format!("the {} this process may still use (its memory limit; limits.max_memory_gib sets another)", bytes_text(limit))
            } else {
                format!("limits.max_memory_gib = {} GiB", limit as f64 / GIB)
            },
            if cfg!(target_arch = "wasm32") && limits.max_memory_gib > WASM_MAX_MEMORY_GIB {
                format!(" (at most {WASM_MAX_MEMORY_GIB} GiB in WASM)")
            } else {
                String::new()
            }
        ),
    ))
}

/// The memory check of a run of `scenario` with `blocks` KV blocks per replica and
/// requests of at most `max_model_len` tokens: its estimate within `limits.max_memory_gib`
/// ([`enforce`]), and each replica's KV free list within what one allocation may hold on
/// this target ([`pool_fits`]).
pub fn check_run(scenario: &Scenario, blocks: u32, max_model_len: u32, trace: Option<&LoadedTrace>) -> Result<()> {
    let parts = run_parts(scenario, blocks, max_model_len, trace);
    let units = usable_blocks(scenario, blocks, max_model_len, request_count(scenario, trace).1);
    pool_fits(units, scenario.scheduler.prefix_caching(), &parts[0].field, isize::MAX as u64)?;
    enforce(&parts, &scenario.limits)
}

/// The KV blocks a replica's pool of `blocks` can hand out to `count` requests of at most
/// `max_model_len` tokens each (their whole lengths, at most `blocks`): what its free list
/// stores at most ([`crate::kv::free`]) unless requests run again (preempted with prefix
/// caching, restarted by a fault), when it grows fallibly. Up to 4 blocks a request more
/// than their lengths need (o1pro's blocks of 64 tokens); all of them when the count is
/// not known.
pub fn usable_blocks(scenario: &Scenario, blocks: u32, max_model_len: u32, count: f64) -> u32 {
    if !(count.is_finite() && count > 0.0) {
        return blocks;
    }
    let per = (u64::from(max_model_len) + 64).div_ceil(u64::from(scenario.scheduler.block_size.max(1)));
    (count.ceil() * per as f64).min(f64::from(blocks)) as u32
}

/// A replica's KV free list with room for `units` blocks handed out (one allocation,
/// [`BYTES_PER_BLOCK`] a block; with prefix caching, `caching`, its free queue:
/// [`queue_capacity`] entries) over `max_bytes` (`isize::MAX`: 2 GiB in WASM, where a
/// larger one is a "capacity overflow" panic) is a `ResourceError` naming `field`.
pub fn pool_fits(units: u32, caching: bool, field: &str, max_bytes: u64) -> Result<()> {
    let entries = if caching { queue_capacity(units) } else { u64::from(units) };
    let bytes = entries * BYTES_PER_BLOCK;
    if bytes <= max_bytes {
        return Ok(());
    }
    Err(SimError::resource(
        field,
        format!(
            "{units} usable KV blocks in one replica need a {} block list, more than one allocation may hold here ({}); \
             lower scheduler.num_gpu_blocks or gpu.hbm_gib",
            bytes_text(bytes),
            bytes_text(max_bytes)
        ),
    ))
}

/// The field that sizes a scenario's KV pools: `scheduler.num_gpu_blocks` when set, else
/// `gpu.hbm_gib` of a GPU given its memory, else `model` for a custom model.
pub fn kv_field(scenario: &Scenario) -> &'static str {
    match (&scenario.scheduler.num_gpu_blocks, &scenario.gpu, &scenario.model) {
        (Some(_), _, _) => "scheduler.num_gpu_blocks",
        (None, GpuInput::Custom(g), _) if g.hbm_gib.is_some() => "gpu.hbm_gib",
        (None, _, ModelInput::Custom(_)) => "model",
        _ => "scheduler.num_gpu_blocks",
    }
}

/// The memory of a run of `scenario` with `blocks` KV blocks per replica and requests of
/// at most `max_model_len` tokens: KV pools (the blocks its requests can use,
/// [`usable_blocks`]), replicas, requests (see the module docs for the per-item costs);
/// `trace`: the rows a front end loaded for `workload.trace`.
pub fn run_parts(scenario: &Scenario, blocks: u32, max_model_len: u32, trace: Option<&LoadedTrace>) -> Vec<Part> {
    let replicas = u64::from(scenario.deployment.total_replicas());
    let caching = scenario.scheduler.prefix_caching();
    let (field, count, per) = request_count(scenario, trace);
    let units = usable_blocks(scenario, blocks, max_model_len, count);
    let mut parts = vec![
        Part {
            field: kv_field(scenario).into(),
            bytes: replicas.saturating_mul(kv_pool_bytes(units, caching)),
            what: format!(
                "{blocks} KV blocks × {replicas} replica(s){}{}",
                if units < blocks { format!(", {units} of them usable by the requests") } else { String::new() },
                if caching { " with prefix caching" } else { "" }
            ),
        },
        Part {
            field: "deployment.replicas".into(),
            bytes: replicas.saturating_mul(BYTES_PER_REPLICA),
            what: format!("{replicas} replicas' time series"),
        },
    ];
    if count.is_finite() && count > 0.0 {
        parts.push(Part {
            field: field.into(),
            bytes: (count * per as f64).min(u64::MAX as f64) as u64,
            what: format!("{count:.0} requests"),
        });
    }
    parts
}

/// The requests a run of `scenario` will have at most (an estimate where random): the
/// field that drives the count, the count and the bytes per request.
fn request_count(scenario: &Scenario, trace: Option<&LoadedTrace>) -> (&'static str, f64, u64) {
    let w = &scenario.workload;
    let traced = w.trace.as_ref().map(|t| match (trace, &t.text) {
        (Some(loaded), _) => loaded.len() as f64,
        // An inline trace: about a row per line (its text is capped at MAX_INPUT_BYTES).
        (None, Some(text)) => text.bytes().filter(|&b| b == b'\n').count() as f64 + 1.0,
        (None, None) => 0.0,
    });
    match (&w.requests, w.num_requests, w.duration_s) {
        _ if traced.is_some() => ("workload.trace", traced.unwrap_or(0.0), BYTES_PER_REQUEST + BYTES_PER_LISTED_REQUEST),
        (Some(list), _, _) => ("workload.requests", list.len() as f64, BYTES_PER_REQUEST + BYTES_PER_LISTED_REQUEST),
        (None, Some(n), _) => ("workload.num_requests", n as f64, BYTES_PER_REQUEST),
        (None, None, Some(d)) => {
            // A random count: its mean and six standard deviations (Poisson-like), or the
            // count the gap cap forces, whichever is larger.
            let a = w.arrival.as_ref();
            let mean = a.and_then(|a| a.rate).unwrap_or(0.0) * d;
            let forced = a.and_then(|a| a.max_gap_s).map_or(0.0, |g| d / g);
            ("workload.duration_s", (mean + 6.0 * mean.sqrt() + 16.0).max(forced), BYTES_PER_REQUEST)
        }
        (None, None, None) => {
            // Staged arrivals: Σ rate × duration; sessions: their count × their longest
            // conversation (the turns' fixed value or `max`; 64 when unbounded).
            let staged: f64 = w.arrival.as_ref().and_then(|a| a.stages.as_ref()).map_or(0.0, |st| {
                st.iter().map(|s| s.rate.unwrap_or(0.0).max(0.0) * s.duration_s.unwrap_or(0.0).max(0.0)).sum()
            });
            let sessions = w.sessions.as_ref().map_or(0.0, |s| {
                let turns = match &s.turns {
                    Some(Len::Tokens(n)) => f64::from(*n),
                    Some(Len::Dist(d)) => d.max.or(d.value).map_or(64.0, f64::from),
                    None => 1.0,
                };
                s.count.unwrap_or(0) as f64 * turns
            });
            ("workload", staged + sessions, BYTES_PER_REQUEST)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pool_over_one_allocation_names_its_field() {
        // WASM's isize::MAX: 460,791,544 blocks (gpu.hbm_gib = 1e6) fit, 10^9 do not.
        let wasm = i32::MAX as u64;
        assert!(pool_fits(460_791_544, false, "gpu.hbm_gib", wasm).is_ok());
        let e = pool_fits(1_000_000_000, false, "scheduler.num_gpu_blocks", wasm).unwrap_err();
        assert_eq!((e.kind_name(), e.path()), ("ResourceError", Some("scheduler.num_gpu_blocks")));
        assert!(e.to_string().contains("3.7 GiB") && e.to_string().contains("2.0 GiB"), "{e}");
        assert!(pool_fits(u32::MAX, false, "scheduler.num_gpu_blocks", isize::MAX as u64).is_ok() || cfg!(target_pointer_width = "32"));
        // With prefix caching the free queue has room for its holes (an eighth more): the
        // same pool still fits, one of 480 M blocks does not.
        assert!(pool_fits(460_791_544, true, "gpu.hbm_gib", wasm).is_ok());
        assert!(pool_fits(480_000_000, false, "gpu.hbm_gib", wasm).is_ok());
        assert!(pool_fits(480_000_000, true, "gpu.hbm_gib", wasm).is_err());
    }

    #[test]
    fn a_caching_pool_counts_its_queue_and_its_holes() {
        // 4 B a unit, 4.5 with the queue's room for holes (and 4 B per 256 entries when it
        // packs them); small pools have room for 1,024 holes at least.
        assert_eq!(kv_pool_bytes(1 << 20, false), 4 << 20);
        let entries = (1 << 20) + (1 << 17);
        assert_eq!(kv_pool_bytes(1 << 20, true), entries * 4 + (entries / 256 + 1) * 4);
        assert_eq!(kv_pool_bytes(64, true), (64 + 1024) * 4 + 4 * 5);
    }

    /// A pool is charged for the blocks its requests can use, not its size: 10⁹ blocks and
    /// 20 requests of at most 8,192 tokens are 20 × 516 blocks (o1pro's rounding included).
    #[test]
    fn a_pool_is_charged_for_the_blocks_its_requests_can_use() {
        let text = r#"{"model": "llama-3-8b", "gpu": "h200", "scheduler": {"num_gpu_blocks": 1000000000},
            "workload": {"num_requests": 20, "prompt": {"kind": "fixed", "value": 100}, "output": {"kind": "fixed", "value": 10}}}"#;
        let sc = crate::config::parse_json(text).unwrap();
        assert_eq!(usable_blocks(&sc, 1_000_000_000, 8192, 20.0), 20 * 516);
        assert_eq!(usable_blocks(&sc, 5_000, 8192, 20.0), 5_000, "at most the pool");
        assert_eq!(usable_blocks(&sc, 5_000, 8192, 0.0), 5_000, "a count not known: the pool");
        let parts = run_parts(&sc, 1_000_000_000, 8192, None);
        assert_eq!(parts[0].field, "scheduler.num_gpu_blocks");
        assert_eq!(parts[0].bytes, kv_pool_bytes(20 * 516, sc.scheduler.prefix_caching()));
        assert!(parts[0].bytes < 100 << 10 && parts[0].what.contains("10320 of them usable"), "{parts:?}");
        assert!(check_run(&sc, u32::MAX, 8192, None).is_ok());
    }

    #[test]
    fn an_estimate_over_the_limit_names_the_largest_part() {
        let parts = [
            Part { field: "workload.num_requests".into(), bytes: 3 << 30, what: "requests".into() },
            Part { field: "scheduler.num_gpu_blocks".into(), bytes: 2 << 30, what: "KV blocks".into() },
        ];
        let e = enforce(&parts, &Limits::default()).unwrap_err();
        assert_eq!(e.kind_name(), "ResourceError");
        assert_eq!(e.path(), Some("workload.num_requests"));
        let m = e.to_string();
        assert!(m.contains("5.0 GiB") && m.contains("3.0 GiB for requests") && m.contains("max_memory_gib = 4 GiB"), "{m}");
        assert!(enforce(&parts[1..], &Limits::default()).is_ok());
    }
}
