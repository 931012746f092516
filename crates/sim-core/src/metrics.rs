//! Metrics: per-replica time series with bounded memory, and the run summary.

use serde::Serialize;
use serde_json::{json, Map, Value};

use crate::request::{Client, Req, Status, NO_TIME};

/// Per-replica time series, bucketed at `interval_ms`: means over the time the replica
/// was busy in each bucket (batch size, tokens per step, KV use, queue lengths), the busy
/// fraction, and the prefix-cache lookups of the steps starting in the bucket; buckets where
/// it was idle throughout have no row.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TimeSeries {
    pub interval_ms: f64,
    pub time_ms: Vec<f64>,
    pub replica: Vec<u32>,
    pub batch_size: Vec<f64>,
    pub tokens: Vec<f64>,
    pub kv_usage: Vec<f64>,
    pub waiting: Vec<f64>,
    pub running: Vec<f64>,
    /// Fraction of the bucket the replica's GPUs were executing steps (0–1).
    pub busy: Vec<f64>,
    /// Prefix-cache tokens looked up at first admissions in the bucket.
    pub prefix_queries: Vec<f64>,
    /// Of those, tokens found in the cache.
    pub prefix_hits: Vec<f64>,
    /// `prefix_hits / prefix_queries` (0–1); NaN (null) when nothing was looked up.
    pub prefix_hit_rate: Vec<f64>,
    /// Under autoscaling only: the time-weighted mean number of ready replicas in the
    /// row's bucket (the same for every replica's row of a bucket).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub replicas: Vec<f64>,
}

/// One scheduler step (only with `record_steps`).
#[derive(Debug, Clone, Serialize)]
pub struct StepRecord {
    pub replica: u32,
    pub start_ms: f64,
    pub end_ms: f64,
    /// (request id, tokens scheduled) in schedule order.
    pub scheduled: Vec<(u32, u32)>,
    pub preempted: Vec<u32>,
    pub finished: Vec<u32>,
    pub free_blocks_after: u64,
    /// (request id, tokens found in the prefix cache) for the requests admitted in this
    /// step with a hit: their computed tokens start there (not scheduled, no budget).
    pub cached: Vec<(u32, u32)>,
    /// What the execution-time model priced the step by ([`crate::step_anatomy`] rebuilds its
    /// kernels from it).
    pub shape: StepShape,
}

/// The batch aggregates a step was priced by, and what was added to the model's price.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StepShape {
    /// `(new tokens, tokens already cached)` of each prefill entry, in plan order.
    pub prefill: Vec<(u32, u32)>,
    /// Decoding sequences.
    pub decode_seqs: u64,
    /// Σ over decodes of the KV length after the step.
    pub decode_context_sum: u64,
    /// Σ over all entries of the KV length after the step.
    pub context_sum_after: u64,
    /// Rows through lm_head and the sampler.
    pub sampled: u64,
    /// Σ over decodes of (KV length − 1) · 1024 / block size (per-request block sizes).
    pub decode_blocks_1024: u64,
    /// Speculative decoding: draft tokens verified beside the decodes' own (Σ k); absent
    /// from a step's JSON when 0.
    #[serde(skip_serializing_if = "is_zero_u64")]
    pub spec_tokens: u64,
    /// Multi-LoRA: distinct adapters in the step; absent from a step's JSON when 0.
    #[serde(skip_serializing_if = "is_zero_u64")]
    pub lora_adapters: u64,
    /// Communication priced on the topology for this step (TP AllReduces, PP transfers),
    /// ms; 0 without a topology (the model prices them itself).
    pub comm_ms: f64,
    /// Scheduling-decision latency the step waited for (o1pro, when async dispatch could
    /// not hide it), ms.
    pub decision_ms: f64,
}

impl StepShape {
    /// The prefill entries as the cost model takes them.
    pub fn prefill_items(&self) -> Vec<crate::perf::PrefillItem> {
        self.prefill.iter().map(|&(new_tokens, context_before)| crate::perf::PrefillItem { new_tokens, context_before }).collect()
    }

    /// The shape the cost model priced, over `items` ([`StepShape::prefill_items`]).
    pub fn batch<'a>(&self, items: &'a [crate::perf::PrefillItem]) -> crate::perf::BatchShape<'a> {
        crate::perf::BatchShape {
            prefill: items,
            prefill_tokens: items.iter().map(|i| u64::from(i.new_tokens)).sum(),
            decode_seqs: self.decode_seqs,
            decode_context_sum: self.decode_context_sum,
            context_sum_after: self.context_sum_after,
            sampled: self.sampled,
            decode_blocks_1024: self.decode_blocks_1024,
            spec_tokens: self.spec_tokens,
            lora_adapters: self.lora_adapters,
        }
    }
}

fn is_zero_u64(x: &u64) -> bool {
    *x == 0
}

/// Buckets per series before the interval doubles (so memory stays bounded on any run).
const MAX_BUCKETS: usize = 2048;

#[derive(Debug, Clone, Copy, Default)]
struct Bucket {
    weight: f64,
    batch: f64,
    tokens: f64,
    kv: f64,
    waiting: f64,
    running: f64,
    /// Prefix-cache tokens looked up and hit by the steps starting in the bucket (sums).
    queries: f64,
    hits: f64,
}

impl Bucket {
    /// Add `w` ns of step `s` (duration-weighted sums).
    #[inline]
    fn add(&mut self, w: f64, s: &StepSample) {
        self.weight += w;
        self.batch += w * s.batch as f64;
        self.tokens += w * s.tokens as f64;
        self.kv += w * s.kv_usage;
        self.waiting += w * s.waiting as f64;
        self.running += w * s.running as f64;
    }
}

/// A time series of one replica: step-duration-weighted means per bucket. Starts at 10 ms
/// buckets and doubles the interval (merging pairs) whenever it would exceed
/// `MAX_BUCKETS`, so a run of any length keeps ≤ 2048 rows per replica.
#[derive(Debug, Clone)]
pub struct Series {
    interval_ns: u64,
    buckets: Vec<Bucket>,
    /// The bucket the last step ended in, `[cur_lo, cur_hi)` in ns, if it exists in
    /// `buckets` (`cur_hi == 0` when none): a step wholly inside it skips the divisions.
    cur_idx: usize,
    cur_lo: u64,
    cur_hi: u64,
}

impl Default for Series {
    fn default() -> Self {
        Series { interval_ns: 10_000_000, buckets: Vec::new(), cur_idx: 0, cur_lo: 0, cur_hi: 0 }
    }
}

/// What one step looked like, for the series.
#[derive(Debug, Clone, Copy)]
pub struct StepSample {
    pub start_ns: u64,
    pub dur_ns: u64,
    pub batch: u32,
    pub tokens: u32,
    pub kv_usage: f64,
    pub waiting: u32,
    pub running: u32,
    /// Prefix-cache tokens looked up and hit by the step's admissions (first admissions).
    pub prefix_queries: u64,
    pub prefix_hits: u64,
}

impl Series {
    /// Add a step, splitting it over the buckets its `[start, start + dur)` overlaps, each
    /// weighted by the overlap: a bucket's means are over the time the replica was busy in
    /// it, and `weight / interval` is its busy fraction.
    #[inline]
    pub fn record(&mut self, s: &StepSample) {
        let dur = s.dur_ns.max(1);
        let end = s.start_ns.saturating_add(dur);
        // Fast path: the step lies inside the current bucket (the common case, steps being
        // much shorter than a bucket). Same arithmetic as the general path with lo = start,
        // hi = end.
        if s.start_ns >= self.cur_lo && end <= self.cur_hi {
            let b = &mut self.buckets[self.cur_idx];
            b.add((end - s.start_ns) as f64, s);
            b.queries += s.prefix_queries as f64;
            b.hits += s.prefix_hits as f64;
            return;
        }
        self.record_slow(s, end);
    }

    #[inline(never)]
    fn record_slow(&mut self, s: &StepSample, end: u64) {
        while ((end - 1) / self.interval_ns) as usize >= MAX_BUCKETS {
            self.coarsen();
        }
        let last = ((end - 1) / self.interval_ns) as usize;
        if self.buckets.len() <= last {
            self.buckets.resize(last + 1, Bucket::default());
        }
        let first = (s.start_ns / self.interval_ns) as usize;
        self.buckets[first].queries += s.prefix_queries as f64;
        self.buckets[first].hits += s.prefix_hits as f64;
        for idx in first..=last {
            let lo = (idx as u64 * self.interval_ns).max(s.start_ns);
            let hi = ((idx as u64 + 1) * self.interval_ns).min(end);
            self.buckets[idx].add((hi - lo) as f64, s);
        }
        self.cur_idx = last;
        self.cur_lo = last as u64 * self.interval_ns;
        self.cur_hi = self.cur_lo.saturating_add(self.interval_ns);
    }

    fn coarsen(&mut self) {
        self.interval_ns *= 2;
        self.cur_hi = 0;
        self.cur_lo = 0;
        let merged = self
            .buckets
            .chunks(2)
            .map(|c| {
                let mut m = c[0];
                if let Some(o) = c.get(1) {
                    m.weight += o.weight;
                    m.batch += o.batch;
                    m.tokens += o.tokens;
                    m.kv += o.kv;
                    m.waiting += o.waiting;
                    m.running += o.running;
                    m.queries += o.queries;
                    m.hits += o.hits;
                }
                m
            })
            .collect();
        self.buckets = merged;
    }

    pub fn interval_ns(&self) -> u64 {
        self.interval_ns
    }

    /// Bring this series to (at least) `interval_ns` so that all replicas share one grid.
    pub fn coarsen_to(&mut self, interval_ns: u64) {
        while self.interval_ns < interval_ns {
            self.coarsen();
        }
    }

    /// Append the non-empty buckets as rows.
    pub fn emit(&self, replica: u32, out: &mut TimeSeries) {
        for (i, b) in self.buckets.iter().enumerate() {
            if b.weight <= 0.0 {
                continue;
            }
            out.time_ms.push((i as u64 * self.interval_ns) as f64 / 1e6);
            out.replica.push(replica);
            out.batch_size.push(b.batch / b.weight);
            out.tokens.push(b.tokens / b.weight);
            out.kv_usage.push(b.kv / b.weight);
            out.waiting.push(b.waiting / b.weight);
            out.running.push(b.running / b.weight);
            out.busy.push((b.weight / self.interval_ns as f64).min(1.0));
            out.prefix_queries.push(b.queries);
            out.prefix_hits.push(b.hits);
            out.prefix_hit_rate.push(if b.queries > 0.0 { b.hits / b.queries } else { f64::NAN });
        }
    }
}

/// Linear-interpolation percentile of sorted data (numpy's default method).
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = q / 100.0 * (sorted.len() - 1) as f64;
    let lo = rank.floor() as usize;
    let hi = (lo + 1).min(sorted.len() - 1);
    let frac = rank - lo as f64;
    sorted[lo] + (sorted[hi] - sorted[lo]) * frac
}

/// `{mean, p50, p90, p99}` of `values` (null entries when empty). The mean sums in the
/// given order; each percentile is [`percentile`]'s, from the two order statistics around
/// its rank found by selection (O(n) each, no sort).
pub fn dist(mut values: Vec<f64>) -> Value {
    if values.is_empty() {
        return json!({"mean": null, "p50": null, "p90": null, "p99": null});
    }
    let mean = values.iter().sum::<f64>() / values.len() as f64;
    // Each selection leaves everything above its rank to its right, so the next (higher)
    // percentile only searches that part.
    let n = values.len();
    let p50 = percentile_select_from(&mut values, 0, 50.0);
    let p90 = percentile_select_from(&mut values, rank_floor(n, 50.0), 90.0);
    let p99 = percentile_select_from(&mut values, rank_floor(n, 90.0), 99.0);
    json!({"mean": mean, "p50": p50, "p90": p90, "p99": p99})
}

fn rank_floor(n: usize, q: f64) -> usize {
    (q / 100.0 * (n - 1) as f64).floor() as usize
}

/// [`percentile`] of unsorted data, reordering it: the value at the rank's floor by
/// selection, the next order statistic as the least value above it.
#[cfg(test)]
fn percentile_select(v: &mut [f64], q: f64) -> f64 {
    percentile_select_from(v, 0, q)
}

/// [`percentile_select`] where `v[from..]` is known to hold the values from rank `from` up
/// (an earlier selection at rank `from` put them there).
fn percentile_select_from(v: &mut [f64], from: usize, q: f64) -> f64 {
    let rank = q / 100.0 * (v.len() - 1) as f64;
    let lo = rank.floor() as usize;
    let frac = rank - lo as f64;
    let (_, a, right) = v[from..].select_nth_unstable_by(lo - from, f64::total_cmp);
    let a = *a;
    if frac == 0.0 || right.is_empty() {
        return a;
    }
    let b = right.iter().copied().fold(f64::INFINITY, f64::min);
    a + (b - a) * frac
}

/// Per-replica accumulators the engine keeps for the summary.
#[derive(Debug, Clone, Default)]
pub struct ReplicaStats {
    pub steps: u64,
    pub busy_ns: u64,
    /// Σ kv_usage · step duration.
    pub kv_usage_ns: f64,
    pub kv_peak: f64,
    /// Σ fragmentation · step duration over steps holding KV, and that duration.
    pub frag_ns: f64,
    pub frag_weight_ns: f64,
    pub prefill_tokens: u64,
    pub decode_tokens: u64,
    pub max_batch: u32,
    /// Σ batch size over steps.
    pub batch_sum: u64,
    /// Prefix-cache tokens looked up and hit at first admissions (vLLM's
    /// `prefix_cache_queries` / `prefix_cache_hits`).
    pub prefix_queries: u64,
    pub prefix_hits: u64,
}

/// Latency SLO thresholds in ns (None = not set).
#[derive(Debug, Clone, Copy, Default)]
pub struct SloNs {
    pub ttft: Option<f64>,
    pub tpot: Option<f64>,
    pub e2e: Option<f64>,
}

/// The GPUs a run held, for the metrics per GPU and per held replica-time.
#[derive(Debug, Clone, Copy, Default)]
pub struct Held {
    /// GPUs per replica (DP × TP × PP; the mean over a deployment's pools).
    pub gpus_per_replica: f64,
    /// Under autoscaling: Σ replica-time holding GPUs (ns). `None` (or 0): every replica
    /// for the whole run.
    pub replica_ns: Option<f64>,
}

/// Build the summary object of a finished run. `client`: the headline TTFT, TPOT and E2E
/// (and the SLO) are client-side, measured from the client's send to its receipt of the
/// first and last tokens ([`crate::frontend`]); else engine-side. The engine-side TTFT and
/// E2E are always in `engine_ttft_ms` / `engine_e2e_ms`. `client_times`: the front end's
/// delays by request id (empty: none). `held`: the GPU time the KV use, busy fraction and
/// per-GPU throughput are over. Each key a front end shows has its row in
/// [`crate::metric_info::SUMMARY_METRICS`] (or is one of its `NOT_METRICS`).
#[allow(clippy::too_many_arguments)]
pub fn summarize(
    reqs: &[Req],
    client_times: &[Client],
    stats: &[ReplicaStats],
    kv: &[(u64, u64)], // (allocation_failures, allocation_attempts) per replica
    reason_names: &[&str],
    slo: Option<SloNs>,
    client: bool,
    held: Held,
) -> Value {
    let ms = |ns: u64| ns as f64 / 1e6;
    // Sized once (a column doubling as it grows holds up to twice its values, and in WASM
    // what it outgrew stays reserved).
    let n = reqs.len();
    let with_n = || Vec::<f64>::with_capacity(n);
    let (mut ttft, mut tpot, mut e2e, mut queue) = (with_n(), with_n(), with_n(), with_n());
    let engine_n = if client_times.is_empty() { 0 } else { n };
    let (mut engine_ttft, mut engine_e2e) = (Vec::with_capacity(engine_n), Vec::with_capacity(engine_n));
    let (mut finished, mut rejected, mut preemptions, mut out_tokens, mut in_tokens) = (0u64, 0u64, 0u64, 0u64, 0u64);
    let mut good = 0u64;
    let mut rejections = vec![0u64; reason_names.len()];
    let mut end_ns = 0u64;
    for r in reqs {
        preemptions += r.preemptions as u64;
        match r.status {
            Status::Finished => {
                finished += 1;
                out_tokens += r.output as u64;
                in_tokens += r.prompt as u64;
                end_ns = end_ns.max(r.finish_ns);
                if !client_times.is_empty() {
                    engine_ttft.push(ms(r.first_token_ns - r.arrival_ns));
                    engine_e2e.push(ms(r.finish_ns - r.arrival_ns));
                }
                // client-side: from the send to the receipt of the first and last tokens
                let c = client_times.get(r.id as usize).copied().unwrap_or_default();
                let (start, first, last) = if client {
                    (r.arrival_ns - u64::from(c.ingest_ns), r.first_token_ns + u64::from(c.out_first_ns), r.finish_ns + u64::from(c.out_last_ns))
                } else {
                    (r.arrival_ns, r.first_token_ns, r.finish_ns)
                };
                let t = ms(first - start);
                let e = ms(last - start);
                ttft.push(t);
                e2e.push(e);
                if r.first_sched_ns != NO_TIME {
                    queue.push(ms(r.first_sched_ns - r.arrival_ns));
                }
                let tp = (r.output > 1).then(|| ms(last - first) / (r.output - 1) as f64);
                if let Some(tp) = tp {
                    tpot.push(tp);
                }
                if let Some(s) = slo {
                    let ok = s.ttft.is_none_or(|x| t <= x)
                        && s.e2e.is_none_or(|x| e <= x)
                        && s.tpot.is_none_or(|x| tp.is_none_or(|v| v <= x));
                    good += ok as u64;
                }
            }
            Status::Rejected => {
                rejected += 1;
                rejections[r.reason as usize] += 1;
                end_ns = end_ns.max(r.finish_ns);
            }
            _ => {}
        }
    }
    let span_s = end_ns as f64 / 1e9;
    let per_s = |x: f64| if span_s > 0.0 { x / span_s } else { 0.0 };
    let n_rep = stats.len().max(1) as f64;
    let span_ns = end_ns.max(1) as f64;
    // The replica-time GPUs were held: every replica for the whole run, or what the
    // autoscaler held (not every slot for the whole run).
    let replica_ns = match held.replica_ns {
        Some(h) if h > 0.0 => h,
        _ => span_ns * n_rep,
    };
    let gpu_s = replica_ns * held.gpus_per_replica / 1e9;
    let kv_mean = stats.iter().map(|s| s.kv_usage_ns).sum::<f64>() / replica_ns;
    let kv_peak = stats.iter().map(|s| s.kv_peak).fold(0.0, f64::max);
    let (fw, fs) = stats.iter().fold((0.0, 0.0), |a, s| (a.0 + s.frag_weight_ns, a.1 + s.frag_ns));
    let failures: u64 = kv.iter().map(|k| k.0).sum();
    let attempts: u64 = kv.iter().map(|k| k.1).sum();
    let mut rej = Map::new();
    for (i, name) in reason_names.iter().enumerate().skip(1) {
        rej.insert((*name).to_string(), json!(rejections[i]));
    }
    // without a front end the engine's latencies are the client's: one sort each
    let (ttft, e2e) = (dist(ttft), dist(e2e));
    let (engine_ttft, engine_e2e) =
        if client_times.is_empty() { (ttft.clone(), e2e.clone()) } else { (dist(engine_ttft), dist(engine_e2e)) };
    let steps: u64 = stats.iter().map(|s| s.steps).sum();
    let busy: u64 = stats.iter().map(|s| s.busy_ns).sum();
    let queries: u64 = stats.iter().map(|s| s.prefix_queries).sum();
    let hits: u64 = stats.iter().map(|s| s.prefix_hits).sum();
    json!({
        "num_requests": reqs.len(),
        "finished": finished,
        "rejected": rejected,
        "rejections": rej,
        "duration_s": span_s,
        "throughput_rps": per_s(finished as f64),
        "output_tokens_per_s": per_s(out_tokens as f64),
        "output_tokens_per_s_per_gpu": if span_s > 0.0 && gpu_s > 0.0 { out_tokens as f64 / gpu_s } else { 0.0 },
        "total_tokens_per_s": per_s((out_tokens + in_tokens) as f64),
        "goodput_rps": slo.map(|_| per_s(good as f64)),
        "slo_attainment": slo.map(|_| if reqs.is_empty() { 0.0 } else { good as f64 / reqs.len() as f64 }),
        "latency_view": if client { "client" } else { "engine" },
        "ttft_ms": ttft,
        "tpot_ms": dist(tpot),
        "e2e_ms": e2e,
        "engine_ttft_ms": engine_ttft,
        "engine_e2e_ms": engine_e2e,
        "queueing_ms": dist(queue),
        "kv_utilization_mean": kv_mean,
        "kv_utilization_peak": kv_peak,
        "fragmentation_mean": if fw > 0.0 { fs / fw } else { 0.0 },
        "allocation_failures": failures,
        "allocation_failure_rate": if attempts > 0 { failures as f64 / attempts as f64 } else { 0.0 },
        "preemptions": preemptions,
        "computed_prefill_tokens": stats.iter().map(|s| s.prefill_tokens).sum::<u64>(),
        "prefix_cache_queries": queries,
        "prefix_cache_hits": hits,
        "prefix_cache_hit_rate": if queries > 0 { hits as f64 / queries as f64 } else { 0.0 },
        "steps": steps,
        "mean_batch_size": if steps > 0 { stats.iter().map(|s| s.batch_sum).sum::<u64>() as f64 / steps as f64 } else { 0.0 },
        "max_batch_size": stats.iter().map(|s| s.max_batch).max().unwrap_or(0),
        "gpu_busy_fraction": busy as f64 / replica_ns,
    })
}

/// Metrics per traffic class when the workload mixes attackers in (`workload.adversarial`):
/// `{normal: …, adversarial: …}`, each with its request count, finished and rejected
/// requests, rejections by reason, and TTFT / TPOT / E2E distributions (ms).
pub fn class_summary(reqs: &[Req], reason_names: &[&str]) -> Value {
    let one = |adversarial: bool| {
        let (mut ttft, mut tpot, mut e2e) = (Vec::new(), Vec::new(), Vec::new());
        let (mut n, mut finished, mut rejected) = (0u64, 0u64, 0u64);
        let mut rejections = vec![0u64; reason_names.len()];
        for r in reqs.iter().filter(|r| r.adversarial == adversarial) {
            n += 1;
            match r.status {
                Status::Finished => {
                    finished += 1;
                    ttft.push((r.first_token_ns - r.arrival_ns) as f64 / 1e6);
                    e2e.push((r.finish_ns - r.arrival_ns) as f64 / 1e6);
                    if r.output > 1 {
                        tpot.push((r.finish_ns - r.first_token_ns) as f64 / 1e6 / (r.output - 1) as f64);
                    }
                }
                Status::Rejected => {
                    rejected += 1;
                    rejections[r.reason as usize] += 1;
                }
                _ => {}
            }
        }
        let mut rej = Map::new();
        for (i, name) in reason_names.iter().enumerate().skip(1) {
            rej.insert((*name).to_string(), json!(rejections[i]));
        }
        json!({"num_requests": n, "finished": finished, "rejected": rejected, "rejections": rej,
               "ttft_ms": dist(ttft), "tpot_ms": dist(tpot), "e2e_ms": dist(e2e)})
    };
    json!({"normal": one(false), "adversarial": one(true)})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selection_gives_the_sorted_percentiles() {
        let mut x = 0.7f64;
        let mut v: Vec<f64> = (0..1001).map(|_| { x = (x * 3.7 + 0.13) % 1.0; x * 100.0 }).collect();
        v.extend([5.0, 5.0, 5.0]);
        let mut sorted = v.clone();
        sorted.sort_by(f64::total_cmp);
        for q in [0.0, 1.0, 50.0, 90.0, 99.0, 99.9, 100.0] {
            assert_eq!(percentile_select(&mut v.clone(), q), percentile(&sorted, q), "{q}");
        }
        assert_eq!(percentile_select(&mut [3.0], 99.0), 3.0);
        let d = dist(v.clone());
        for (k, q) in [("p50", 50.0), ("p90", 90.0), ("p99", 99.0)] {
            assert_eq!(d[k].as_f64().unwrap(), percentile(&sorted, q), "{k}");
        }
        let d = dist(vec![2.0]);
        assert_eq!(d["p99"].as_f64().unwrap(), 2.0);
    }

    #[test]
    fn percentile_matches_numpy_linear() {
        let v = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(percentile(&v, 50.0), 2.5);
        assert!((percentile(&v, 99.0) - 3.97).abs() < 1e-12);
        assert_eq!(percentile(&[7.0], 90.0), 7.0);
    }

    #[test]
    fn a_step_is_split_over_the_buckets_it_spans() {
        let mut s = Series::default(); // 10 ms buckets
        s.record(&StepSample {
            start_ns: 5_000_000,
            dur_ns: 25_000_000,
            batch: 4,
            tokens: 4,
            kv_usage: 0.5,
            waiting: 2,
            running: 4,
            prefix_queries: 100,
            prefix_hits: 64,
        });
        let mut ts = TimeSeries::default();
        s.emit(0, &mut ts);
        assert_eq!(ts.time_ms, vec![0.0, 10.0, 20.0]);
        assert_eq!(ts.busy, vec![0.5, 1.0, 1.0]);
        assert_eq!(ts.batch_size, vec![4.0, 4.0, 4.0]);
        // Lookups count once, in the bucket where the step starts.
        assert_eq!(ts.prefix_queries, vec![100.0, 0.0, 0.0]);
        assert_eq!(ts.prefix_hit_rate[0], 0.64);
        assert!(ts.prefix_hit_rate[1].is_nan());
    }

    #[test]
    fn series_stays_bounded() {
        let mut s = Series::default();
        for i in 0..100_000u64 {
            s.record(&StepSample {
                start_ns: i * 50_000_000,
                dur_ns: 1,
                batch: 1,
                tokens: 1,
                kv_usage: 0.5,
                waiting: 0,
                running: 1,
                prefix_queries: 0,
                prefix_hits: 0,
            });
        }
        assert!(s.buckets.len() <= MAX_BUCKETS);
        assert!(s.interval_ns > 10_000_000);
    }
}

