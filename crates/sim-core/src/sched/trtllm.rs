//! `trtllm`: TensorRT-LLM's in-flight batching, as its batch manager schedules a step
//! (`cpp/tensorrt_llm/batch_manager/capacityScheduler.cpp` and `microBatchScheduler.cpp`,
//! driven by the PyTorch backend's `SimpleScheduler`), rule by rule:
//!
//! 1. The capacity scheduler picks the requests that may run (`scheduler.
//!    capacity_scheduler_policy`), at most `max_batch_size` of them:
//!    * `guaranteed_no_evict` (`GuaranteedNoEvictScheduler`): every request already
//!      generating is taken, in order, and the blocks it may still need to finish (its
//!      whole prompt + maximum output, less the blocks it holds) are set aside from the free
//!      blocks; then waiting requests in FCFS order are taken while their whole length's
//!      blocks fit in what is left — the first that does not fit stops the pass. A running
//!      request therefore never lacks a block and nothing is ever evicted.
//!    * `max_utilization` (`MaxUtilizationScheduler`): one pass over the active requests in
//!      arrival order (a paused request keeps its place), each taken while the blocks this
//!      step needs (a generating request its next token's, a context its whole prompt's)
//!      fit in the free blocks; when one does not fit, the *last started* request from the
//!      end of the list back to the current one is paused — its blocks count as free, and
//!      the pass ends before it — and the same request is tried again; with no started
//!      request left to pause the pass ends. A paused request starts over as a context of
//!      its prompt and the tokens it generated (recompute).
//! 2. The micro-batch scheduler (`MicroBatchScheduler`, context chunking off as
//!    `trtllm-bench` runs it) goes through those requests in that order: a generating one
//!    takes one token, a context its whole remaining length; the first that would pass
//!    `max_num_tokens` ends the step (o1sim lets a context longer than `max_num_tokens`
//!    run alone in an empty step, where TensorRT-LLM refuses the request), and so does the
//!    `max_batch_size`-th request.
//! 3. The step producing a context's last token produces its first output token; requests
//!    join and leave at step boundaries (the engine, as for every policy).
//!
//! The engine sizes a replica's KV cache as TensorRT-LLM's `KvCacheCreator` does
//! ([`crate::memory::plan_memory_free_fraction`]), and when the scenario leaves
//! `max_batch_size` and `max_num_tokens` out it uses what `trtllm-bench` picks for the
//! workload ([`bench_settings`]).

use super::{Admission, Params, SchedState};
use crate::config::CapacityPolicy;
use crate::kv::prefix::Apc;
use crate::request::{Req, Status, NO_TIME};

use crate::config::{TRTLLM_DEFAULT_MAX_BATCH_SIZE as DEFAULT_MAX_BATCH_SIZE, TRTLLM_DEFAULT_MAX_NUM_TOKENS as DEFAULT_MAX_NUM_TOKENS};

/// GPU memory TensorRT-LLM's PyTorch backend holds outside its weights, KV cache and the
/// activations o1sim estimates for its profiling run ([`crate::memory::activation_bytes`]),
/// GiB: CUDA context, the libraries' workspaces and kernel images, the runtime's buffers.
/// From the v0.20 log in NVIDIA/TensorRT-LLM issue #6294 (Llama-3.1-8B FP8 on one 80 GB
/// H100, 81,559 MiB; `max_num_tokens` 23,552, fraction 0.8): the estimation run found room
/// for 860,308 FP8 KV tokens of 64 KiB, so `(total − peak) = 860,308 · 64 KiB / 0.8 =
/// 65.64 GiB` and the peak was 14.01 GiB; less the 8.46 GiB of weights it logged and the
/// 3.08 GiB of activations o1sim estimates for that run leaves 2.47 GiB (unit test
/// `runtime_memory_is_what_the_log_leaves`).
pub const RUNTIME_GIB: f64 = 2.47;

/// What `trtllm-bench throughput` is given and reads to size a run
/// (`tensorrt_llm/bench/build/tuning.py`'s `calc_engine_setting`).
#[derive(Debug, Clone, Copy)]
pub struct BenchInput {
    /// The model's parameters (`ModelConfig.param_count`).
    pub params: f64,
    /// Bytes per weight of the checkpoint's quantisation (FP8 1, NVFP4 0.5, none 2); `None`
    /// for a quantisation the heuristic does not tune (INT8/INT4 weight-only): then the
    /// defaults.
    pub weight_bytes: Option<f64>,
    /// KV bytes one token takes over the whole TP group: `2 · layers · max(tp, kv_heads) ·
    /// head_dim · kv_bytes`.
    pub kv_bytes_per_token: f64,
    /// One GPU's memory, GiB (NVML's total).
    pub gpu_gib: f64,
    pub tp: u32,
    pub pp: u32,
    /// The dataset's mean prompt and output lengths, and its longest prompt.
    pub avg_isl: f64,
    pub avg_osl: f64,
    pub max_isl: u32,
    /// `--kv_cache_free_gpu_mem_fraction`, which the heuristic also reads.
    pub kv_fraction: f64,
}

/// `(max_batch_size, max_num_tokens)` as `trtllm-bench throughput` picks them for the
/// PyTorch backend when the command line does not give them (TensorRT-LLM v0.20–v1.x:
/// `bench/build/tuning.py` and `bench/benchmark/utils/general.py`'s `get_settings`):
/// 1. the KV cache it expects: `fraction · (GPU memory · GPUs − parameters · bytes)`, in
///    requests of `avg_isl + avg_osl` tokens (`kv_bytes_per_token` each);
/// 2. `max_batch_size`: that many requests, at most 4,096, divided by `pp`, rounded up
///    "optimistically": to 32 (at least 64) below 256, to 128 below 1,024, else to 256;
/// 3. `max_num_tokens`: the batch times `1 + avg_isl / avg_osl`, at most 32,768, rounded
///    up to 256 (at least 2,048) below 4,096, to 512 below 8,192, else to 1,024;
/// 4. context chunking being off, `max_num_tokens` is raised to `max_isl + max_batch_size`
///    when smaller.
///
/// Quantisations the heuristic does not tune get TensorRT-LLM's defaults
/// ([`crate::config::TRTLLM_DEFAULT_MAX_BATCH_SIZE`], [`crate::config::TRTLLM_DEFAULT_MAX_NUM_TOKENS`]; step 4
/// still applies). A model that leaves no KV room gets
/// the smallest settings (64 and 2,048); the memory plan then says it does not fit.
pub fn bench_settings(i: &BenchInput) -> (u32, u32) {
    let gib = 1024.0 * 1024.0 * 1024.0;
    let (bs, tokens) = match i.weight_bytes {
        None => (f64::from(DEFAULT_MAX_BATCH_SIZE), f64::from(DEFAULT_MAX_NUM_TOKENS)),
        Some(bytes) => {
            let gpus = f64::from(i.tp.max(1) * i.pp.max(1));
            let available = i.gpu_gib * gpus - i.params * bytes / gib;
            let per_request = i.kv_bytes_per_token / gib * (i.avg_isl + i.avg_osl);
            let requests = if per_request > 0.0 { (available * i.kv_fraction / per_request).max(0.0) } else { 0.0 };
            let raw_bs = requests.min(4096.0) / f64::from(i.pp.max(1));
            let raw_tokens = (raw_bs * (1.0 + i.avg_isl / i.avg_osl.max(1.0))).min(32768.0);
            let up = |x: f64, to: f64| to * libm::ceil(x / to);
            let bs = if raw_bs < 256.0 {
                up(raw_bs, 32.0).max(64.0)
            } else if raw_bs < 1024.0 {
                up(raw_bs, 128.0)
            } else {
                up(raw_bs, 256.0)
            };
            let tokens = if raw_tokens < 4096.0 {
                up(raw_tokens, 256.0).max(2048.0)
            } else if raw_tokens < 8192.0 {
                up(raw_tokens, 512.0)
            } else {
                up(raw_tokens, 1024.0)
            };
            (bs, tokens)
        }
    };
    let bs = bs as u32;
    let tokens = (tokens as u32).max(i.max_isl.saturating_add(bs));
    (bs, tokens)
}

impl SchedState {
    /// One step of the `trtllm` policy (module docs).
    pub(super) fn schedule_trtllm(&mut self, p: &Params, cap: CapacityPolicy, reqs: &mut [Req], apc: &mut Apc, now_ns: u64) {
        schedule(self, p, cap, reqs, apc, now_ns);
    }
}

/// One step of the `trtllm` policy on `st` (module docs).
fn schedule(st: &mut SchedState, p: &Params, cap: CapacityPolicy, reqs: &mut [Req], apc: &mut Apc, now_ns: u64) {
    st.plan.clear();
    st.preempted.clear();
    st.prefill_items.clear();
    st.shape = Default::default();
    st.shape_dirty = false;
    st.budget_left = p.budget;
    st.step_queries = 0;
    st.step_hits = 0;
    st.admitted_hits.clear();
    let (fitting, refused) = match cap {
        CapacityPolicy::GuaranteedNoEvict => no_evict(st, p, reqs),
        CapacityPolicy::MaxUtilization => max_utilization(st, p, reqs, apc),
    };
    let waited = !st.waiting.is_empty();
    let admitted = micro_batch(st, p, reqs, apc, now_ns, &fitting);
    st.admission = if !waited {
        Admission::Empty
    } else if admitted > 0 || !st.preempted.is_empty() {
        Admission::Other
    } else if refused {
        st.kv.note_refusal();
        Admission::Refused
    } else {
        // the seats or the token budget ran out before the head of the queue
        Admission::Stopped
    };
}

/// Blocks `r` still needs to reach its whole length (prompt + maximum output).
fn to_completion(st: &SchedState, r: &Req) -> u64 {
    let whole = st.kv.units_for(r.prompt.saturating_add(r.output), r.req_block);
    u64::from(whole).saturating_sub(r.blocks.len() as u64)
}

/// `GuaranteedNoEvictScheduler`: the running requests, then the waiting ones whose whole
/// length fits beside every running request's remaining blocks. Returns the fitting
/// requests in order and whether the head of the queue was refused for want of blocks.
fn no_evict(st: &SchedState, p: &Params, reqs: &[Req]) -> (Vec<u32>, bool) {
    let max = p.max_num_seqs as usize;
    let mut fitting = Vec::with_capacity(st.running.len().min(max) + 8);
    let mut avail = i64::from(st.kv.free_units());
    for &id in &st.running {
        if fitting.len() >= max {
            break;
        }
        fitting.push(id);
        avail -= to_completion(st, &reqs[id as usize]) as i64;
    }
    let mut refused = false;
    for id in st.waiting.iter() {
        if fitting.len() >= max {
            break;
        }
        let need = to_completion(st, &reqs[id as usize]) as i64;
        if need > avail {
            refused = true;
            break;
        }
        avail -= need;
        fitting.push(id);
    }
    (fitting, refused)
}

/// `MaxUtilizationScheduler` over the running and waiting requests merged in arrival order:
/// each taken while this step's blocks fit, the last started request paused (its blocks
/// freed now, it waits again at its arrival place) when one does not. Returns the fitting
/// requests in order and whether a waiting request was refused for want of blocks.
fn max_utilization(st: &mut SchedState, p: &Params, reqs: &mut [Req], apc: &mut Apc) -> (Vec<u32>, bool) {
    // (arrival order, id, started): the active requests as TensorRT-LLM lists them
    let mut items: Vec<(i64, u32, bool)> = Vec::with_capacity(st.running.len() + st.waiting.len().min(4096));
    items.extend(st.running.iter().map(|&id| (reqs[id as usize].order, id, true)));
    let seats = p.max_num_seqs as usize;
    // Waiting requests beyond the seats can never be taken this step.
    items.extend(st.waiting.iter().take(seats).map(|id| (reqs[id as usize].order, id, false)));
    items.sort_unstable();
    let bs = |r: &Req, len: u32| u64::from(st.kv.units_for(len.max(1), r.req_block));
    let mut avail = u64::from(st.kv.free_units());
    let (mut taken, mut end, mut i) = (0u64, items.len(), 0usize);
    let mut fitting = Vec::with_capacity(items.len());
    let mut paused = Vec::new();
    let mut refused = false;
    while i < end {
        let (_, id, started) = items[i];
        let r = &reqs[id as usize];
        let len = if started && !r.in_prefill() { r.computed + 1 } else { r.num_tokens() };
        let need = bs(r, len).saturating_sub(r.blocks.len() as u64);
        if fitting.len() < seats && taken + need <= avail {
            taken += need;
            fitting.push(id);
            i += 1;
            continue;
        }
        match (i..end).rev().find(|&j| items[j].2) {
            Some(j) => {
                let victim = items[j].1;
                avail += reqs[victim as usize].blocks.len() as u64;
                paused.push(victim);
                end = j;
            }
            None => {
                refused = !started && fitting.len() < seats;
                break;
            }
        }
    }
    for &id in &paused {
        pause(st, p, reqs, apc, id);
    }
    (fitting, refused)
}

/// Pause a started request (`max_utilization`): free its blocks, reset its progress (it
/// recomputes its prompt and the tokens it generated), back to the waiting queue at its
/// arrival place.
fn pause(st: &mut SchedState, p: &Params, reqs: &mut [Req], apc: &mut Apc, id: u32) {
    if let Some(pos) = st.running.iter().position(|&x| x == id) {
        st.running.remove(pos);
    }
    let r = &mut reqs[id as usize];
    apc.release(&mut st.kv, r, None);
    r.blocks = Vec::new();
    st.used_slots -= u64::from(r.computed);
    r.computed = 0;
    r.preemptions += 1;
    r.status = Status::Waiting;
    let key = SchedState::waiting_key(p, r);
    st.waiting.insert(key, id);
    st.preempted.push(id);
}

/// `MicroBatchScheduler` without context chunking over the fitting requests, in order: a
/// generating request takes one token, a context its whole remaining length, until one
/// would pass the token budget or the batch is full. Waiting requests it schedules are
/// admitted (they are the head of the queue, in order). Returns how many were admitted.
fn micro_batch(st: &mut SchedState, p: &Params, reqs: &mut [Req], apc: &mut Apc, now_ns: u64, fitting: &[u32]) -> u32 {
    let (mut tokens, mut count, mut admitted) = (0u64, 0u32, 0u32);
    for &id in fitting {
        let r = &reqs[id as usize];
        let waiting = r.status == Status::Waiting;
        // a waiting request is a context of its whole length (its prefill target is set
        // when it is admitted)
        let context = waiting || r.in_prefill();
        let n = if context { r.num_tokens() - r.computed } else { 1 };
        if tokens + u64::from(n) > u64::from(p.budget) && !(tokens == 0 && context) {
            break;
        }
        let r = &mut reqs[id as usize];
        if !st.kv.grow(&mut r.blocks, r.computed + n, r.req_block) {
            // The capacity pass counted these blocks: only a pool the scenario shrank below
            // a request (never-fit requests are refused at arrival) gets here.
            break;
        }
        if waiting {
            if st.waiting.peek() == Some(id) {
                st.waiting.pop();
            } else {
                st.waiting.remove(id);
            }
            r.status = Status::Running;
            r.prefill_target = r.num_tokens();
            if r.first_sched_ns == NO_TIME {
                r.first_sched_ns = now_ns;
                apc.set_cached_tokens(id, 0);
            }
            // TensorRT-LLM lists active requests in arrival order.
            let order = r.order;
            let at = st.running.partition_point(|&x| reqs[x as usize].order <= order);
            st.running.insert(at, id);
            admitted += 1;
        }
        st.push_plan(&reqs[id as usize], n);
        tokens += u64::from(n);
        count += 1;
        if count >= p.max_num_seqs {
            break;
        }
    }
    st.budget_left = p.budget.saturating_sub(tokens.min(u64::from(u32::MAX)) as u32);
    admitted
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(isl: f64, osl: f64, gpu_gib: f64, params: f64, kv: f64, tp: u32) -> BenchInput {
        BenchInput {
            params,
            weight_bytes: Some(1.0),
            kv_bytes_per_token: kv,
            gpu_gib,
            tp,
            pp: 1,
            avg_isl: isl,
            avg_osl: osl,
            max_isl: isl as u32,
            kv_fraction: 0.95,
        }
    }

    #[test]
    fn runtime_memory_is_what_the_log_leaves() {
        // NVIDIA/TensorRT-LLM issue #6294's v0.20 log (module constant's docs)
        let gib = crate::memory::GIB;
        let total = 81_559.0 / 1024.0;
        let free = 860_308.0 * 65_536.0 / 0.8 / gib;
        let model = crate::catalog::resolve_model(&"llama-3.1-8b".into()).unwrap();
        let activation = crate::memory::activation_bytes(&model, 1, 23_552) / gib;
        let left = total - free - 8.46 - activation;
        assert!((left - RUNTIME_GIB).abs() < 0.01, "{left}");
    }

    #[test]
    fn bench_settings_follow_trtllm_bench() {
        // Llama-3.1-8B FP8 (8.03e9 parameters, FP8 KV: 2·32·8·128 bytes a token), one H200.
        let kv8 = 2.0 * 32.0 * 8.0 * 128.0;
        // 128/128: the KV holds far more than 4,096 requests: 4,096 and 4,096 · 2 tokens.
        assert_eq!(bench_settings(&input(128.0, 128.0, 139.8, 8.03e9, kv8, 1)), (4096, 8192));
        // 2048/128: ~950 requests of 2,176 tokens → 1,024 (to 128); 950 · 17 → 16,384.
        let (bs, tokens) = bench_settings(&input(2048.0, 128.0, 139.8, 8.03e9, kv8, 1));
        assert_eq!(bs, 1024);
        assert_eq!(tokens, 16384);
        // 20000/2000: ~94 requests → 96 (to 32); 2,048 tokens raised to the prompt + 96.
        let (bs, tokens) = bench_settings(&input(20000.0, 2000.0, 139.8, 8.03e9, kv8, 1));
        assert_eq!((bs, tokens), (96, 20096));
        // Not tuned: the library defaults, raised for a long prompt.
        let untuned = BenchInput { weight_bytes: None, ..input(20000.0, 2000.0, 139.8, 8.03e9, kv8, 1) };
        assert_eq!(bench_settings(&untuned), (2048, 22048));
        // No room for the KV cache: the smallest settings.
        assert_eq!(bench_settings(&input(128.0, 128.0, 80.0, 1e12, kv8, 1)), (64, 2048));
    }
}
