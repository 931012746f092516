//! Expert parallelism (EP) and data-parallel (DP) attention in the step model.
//!
//! **The replica.** A replica of `dp` attention ranks, each `tp` GPUs, shares one expert
//! group of `ep = dp × tp` GPUs per pipeline stage (vLLM's `--data-parallel-size` with
//! `--enable-expert-parallel`; SGLang's DP attention with DeepEP). The engine schedules the
//! replica's requests as one batch; the step model prices the step of one rank, carrying
//! `1/dp` of the batch (its tokens, its prefills' and decodes' attention, its sampled rows and
//! its scheduler's CPU work: each DP rank is its own engine core), because the ranks run in
//! lockstep — every MoE layer exchanges tokens among all of them — and a balanced load
//! balancer gives each about the same share.
//!
//! **Experts.** Each GPU holds `(experts + redundant) / ep` whole experts (not TP-sharded). A
//! rank's grouped GEMM (DeepGEMM-style, one launch over its local experts) processes the
//! (token, expert) pairs routed to its experts: on average `tokens_per_rank · top_k / tp`, and
//! on the busiest rank [`ExpertBalance::gamma`] times that; every rank waits for the busiest
//! at the combine, so the busiest sets the layer's time.
//!
//! **Load imbalance** ([`ExpertBalance`]) has two parts, both deterministic:
//! - *popularity*: experts are not equally popular. Their loads are modelled as lognormal
//!   with coefficient of variation `expert_load_cv` (quantiles, so no sampling), placed on
//!   the ranks as vLLM and SGLang place them without a balancer — by expert id, which is
//!   unrelated to popularity — and the straggler factor is the expected busiest rank over 64
//!   seeded placements. With `redundant_experts` (EPLB) the hottest experts are replicated
//!   one copy at a time (the expert with the most load per copy next), and the copies are
//!   packed onto the ranks largest first into the least loaded rank with a free slot, as
//!   DeepSeek's EPLB does.
//! - *routing noise*: a batch of N pairs lands on the ranks multinomially, so even perfectly
//!   balanced popularity leaves the busiest of `ep` ranks about `z_ep · √(N · p)` pairs above
//!   its mean (z_ep: the expected maximum of `ep` standard normals, Blom's approximation).
//!   This is what makes EP costly at small batches and what no balancer removes.
//!
//!   The default `expert_load_cv` = 1.36 comes from DeepSeek-R1's routed experts measured by
//!   TensorRT-LLM on 32 GB200 GPUs (EP 32, 8 experts a rank; "Scaling Expert Parallelism in
//!   TensorRT-LLM, part 1", the offline EP load balancer's statistics: per-rank load std
//!   491.65 over a mean of 1,024, averaged over layers): a rank's CV of 0.48 with 8 experts
//!   a rank is an expert CV of 0.48 · √8. The same source's maximum (imbalance ratio
//!   (max − mean) / mean = 1.56 averaged over layers without EPLB, 0.115 with 288 slots on
//!   EP 36) was not used: it checks the model (docs/fidelity.md).
//!
//! **Communication** ([`A2aCosts`]): per MoE layer a *dispatch* (each token's hidden state to
//! the ranks of its experts: FP8 with one FP32 scale per 128 values in DeepEP) and a
//! *combine* (the experts' outputs back, BF16). DeepEP's high-throughput kernels send a token
//! once per destination rank; its low-latency kernels once per expert; the naive
//! alternative all-gathers every rank's tokens before the experts and reduce-scatters after.
//! The busiest rank receives `gamma` times the mean, so the exchange takes that much longer.
//!
//! **Two-batch overlap** (TBO): the step runs as two micro-batches, one's dispatch and combine
//! while the other computes. In steady state a MoE layer costs `2 · max(c, a)` where `c` and
//! `a` are one micro-batch's compute and exchange per layer, plus one exposed exchange for
//! filling the pipeline. At large batches `c ≈ C/2`, `a ≈ A/2`: the layer costs about
//! `max(C, A)` instead of `C + A`. At tiny batches a half batch costs nearly what the whole
//! does (weights are read either way) and the overlap loses. Compute beside a
//! high-throughput exchange runs on the SMs DeepEP's normal kernels leave
//! ([`DEEPEP_NORMAL_SMS`]), so `c` is that much longer there; the overlap is otherwise taken
//! as perfect, which makes TBO's decode gain an upper bound (docs/fidelity.md).

use crate::rng::SimRng;
use crate::topo::collective::Affine;

/// The dispatch/combine implementation of expert parallelism (`deployment.moe.all_to_all`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AllToAll {
    /// DeepEP's high-throughput kernels for steps with prefill work, its low-latency
    /// kernels for decode-only steps (SGLang's `--deepep-mode auto`).
    Auto,
    HighThroughput,
    LowLatency,
    /// All-gather the tokens before the experts, reduce-scatter after (no DeepEP).
    Allgather,
}

impl AllToAll {
    /// The implementation a step runs: `auto` is low-latency for decode-only steps,
    /// high-throughput otherwise.
    pub fn resolve(self, decode_only: bool) -> AllToAll {
        match self {
            AllToAll::Auto if decode_only => AllToAll::LowLatency,
            AllToAll::Auto => AllToAll::HighThroughput,
            m => m,
        }
    }
}

/// SMs DeepEP's normal (high-throughput) kernels hold while they run: `Buffer.num_sms`,
/// default 20 (DeepEP's `deep_ep/buffer.py`; SGLang and Megatron keep the default). Under
/// two-batch overlap the other micro-batch computes on the rest. Its low-latency kernels
/// receive through a hook that holds no SM while waiting (DeepEP's README) and NCCL's
/// all-gather is left at no SMs too: neither slows the overlapped compute here.
pub const DEEPEP_NORMAL_SMS: f64 = 20.0;

/// Seeded placements averaged for the popularity straggler (no balancer).
const PLACEMENTS: u32 = 64;
/// Bytes a dispatched value takes in DeepEP's FP8 dispatch, scales included (one FP32 scale
/// per 128 values).
pub const DISPATCH_BYTES_PER_VALUE: f64 = 1.0 + 4.0 / 128.0;
/// Bytes a combined value takes (BF16).
pub const COMBINE_BYTES_PER_VALUE: f64 = 2.0;
/// The default coefficient of variation of tokens per expert (see the module docs).
pub const DEFAULT_EXPERT_LOAD_CV: f64 = 1.36;

/// The straggler factor of an expert-parallel group: how much more than the mean the busiest
/// rank receives (see the module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct ExpertBalance {
    /// Ranks of the group.
    ep: f64,
    /// The busiest rank's share of the pairs from popularity alone (1/ep when balanced).
    p_max: f64,
    /// Expected maximum of `ep` standard normals.
    z: f64,
}

impl ExpertBalance {
    /// `experts` routed experts over `ep` ranks with `redundant` extra slots; tokens per
    /// expert with coefficient of variation `load_cv` (0: every expert equally popular).
    pub fn new(experts: u32, ep: u32, redundant: u32, load_cv: f64) -> ExpertBalance {
        let ep_f = f64::from(ep.max(1));
        let w = popularity(experts.max(1), load_cv);
        let max_share = if ep <= 1 {
            1.0
        } else if redundant > 0 {
            eplb_max_share(&w, ep, redundant)
        } else {
            unbalanced_max_share(&w, ep)
        };
        let z = if ep <= 1 { 0.0 } else { probit((ep_f - 0.375) / (ep_f + 0.25)) };
        ExpertBalance { ep: ep_f, p_max: max_share, z }
    }

    /// The busiest rank's pairs over the mean rank's when `pairs` (token, expert) pairs are
    /// routed over the group (≥ 1; at most `ep`: one rank cannot get more than all).
    pub fn gamma(&self, pairs: f64) -> f64 {
        if self.ep <= 1.0 || pairs <= 0.0 {
            return 1.0;
        }
        let p = self.p_max;
        let busiest = pairs * p + self.z * libm::sqrt(pairs * p * (1.0 - p));
        (busiest.min(pairs) / (pairs / self.ep)).max(1.0)
    }

    /// The popularity part alone: the busiest rank's share times `ep`.
    pub fn popularity_gamma(&self) -> f64 {
        (self.p_max * self.ep).max(1.0)
    }
}

/// Tokens per expert, mean 1: lognormal quantiles at `(i + ½) / n` with coefficient of
/// variation `cv`, in expert-id order scrambled by a fixed permutation-free rule (the quantile
/// index is the expert's rank in popularity; placements shuffle ids, see the callers).
fn popularity(n: u32, cv: f64) -> Vec<f64> {
    let sigma = libm::sqrt(libm::log1p(cv * cv));
    let mut w: Vec<f64> =
        (0..n).map(|i| libm::exp(sigma * probit((f64::from(i) + 0.5) / f64::from(n)))).collect();
    let mean = w.iter().sum::<f64>() / f64::from(n);
    w.iter_mut().for_each(|x| *x /= mean);
    w
}

/// The busiest rank's expected share when experts sit on the ranks in id order (contiguous
/// blocks), ids unrelated to popularity: the mean over [`PLACEMENTS`] seeded shuffles.
fn unbalanced_max_share(w: &[f64], ep: u32) -> f64 {
    let n = w.len();
    let ep = ep as usize;
    let total: f64 = w.iter().sum();
    let mut rng = SimRng::stream(0x0e9b_a1a7, 1);
    let mut order: Vec<usize> = (0..n).collect();
    let mut sum = 0.0;
    for _ in 0..PLACEMENTS {
        for i in (1..n).rev() {
            let j = (rng.next_u64() % (i as u64 + 1)) as usize;
            order.swap(i, j);
        }
        // expert ids i → rank i · ep / n (contiguous blocks; uneven when ep ∤ n)
        let mut loads = vec![0.0; ep];
        for (id, &e) in order.iter().enumerate() {
            loads[id * ep / n] += w[e];
        }
        sum += loads.iter().copied().fold(0.0, f64::max) / total;
    }
    sum / f64::from(PLACEMENTS)
}

/// The busiest rank's share after EPLB: `redundant` copies of the hottest experts (by load
/// per copy), then every copy (its expert's load split evenly among its copies) packed
/// largest first onto the least loaded rank with a free slot (`(n + redundant) / ep` slots a
/// rank, rounded up).
fn eplb_max_share(w: &[f64], ep: u32, redundant: u32) -> f64 {
    let n = w.len();
    let mut copies = vec![1u32; n];
    for _ in 0..redundant {
        let hottest = (0..n)
            .max_by(|&a, &b| (w[a] / f64::from(copies[a])).total_cmp(&(w[b] / f64::from(copies[b]))).then(b.cmp(&a)))
            .unwrap_or(0);
        copies[hottest] += 1;
    }
    let mut slots: Vec<f64> =
        (0..n).flat_map(|e| std::iter::repeat_n(w[e] / f64::from(copies[e]), copies[e] as usize)).collect();
    slots.sort_by(|a, b| b.total_cmp(a));
    let ep = ep as usize;
    let per_rank = slots.len().div_ceil(ep);
    let (mut loads, mut used) = (vec![0.0f64; ep], vec![0usize; ep]);
    for s in slots {
        let r = (0..ep).filter(|&r| used[r] < per_rank).min_by(|&a, &b| loads[a].total_cmp(&loads[b])).unwrap_or(0);
        loads[r] += s;
        used[r] += 1;
    }
    let total: f64 = w.iter().sum();
    loads.iter().copied().fold(0.0, f64::max) / total
}

/// The standard normal quantile of `p` ∈ (0, 1), by bisection on `erf` (64 steps: exact to
/// the last bits; called a few hundred times per model).
fn probit(p: f64) -> f64 {
    let (mut lo, mut hi) = (-40.0f64, 40.0f64);
    for _ in 0..64 {
        let mid = 0.5 * (lo + hi);
        if 0.5 * (1.0 + libm::erf(mid / std::f64::consts::SQRT_2)) < p {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// A replica's data-parallel and expert-parallel layout as the cost model takes it (from
/// `deployment.dp`, `deployment.ep` and `[deployment.moe]`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EpSpec {
    pub dp: u32,
    pub tp: u32,
    /// 1, or `dp × tp`.
    pub ep: u32,
    pub redundant_experts: u32,
    pub expert_load_cv: f64,
    pub all_to_all: AllToAll,
    pub two_batch_overlap: bool,
}

/// The exchange costs of one EP group: `a + b · bytes` for the bytes ONE rank sends in total
/// (spread evenly over the others), per implementation.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct A2aCosts {
    pub high_throughput: Affine,
    pub low_latency: Affine,
    pub allgather: Affine,
}

/// One MoE layer's dispatch and combine for a rank of `tokens` tokens, s: `(dispatch,
/// combine)`. `gamma`: the busiest rank's load over the mean (it receives that much more).
// Each argument is one physical quantity of the exchange; a struct for them would only be
// built to be taken apart here.
#[allow(clippy::too_many_arguments)]
pub fn exchange_s(
    costs: &A2aCosts,
    mode: AllToAll,
    decode_only: bool,
    tokens: f64,
    hidden: f64,
    top_k: f64,
    ep: f64,
    gamma: f64,
) -> (f64, f64) {
    if tokens <= 0.0 || ep <= 1.0 {
        return (0.0, 0.0);
    }
    let remote = (ep - 1.0) / ep;
    match mode.resolve(decode_only) {
        AllToAll::Allgather => {
            // every rank's tokens to every rank (BF16), and the outputs reduce-scattered back
            let bytes = tokens * hidden * COMBINE_BYTES_PER_VALUE * (ep - 1.0);
            let t = costs.allgather.at(bytes);
            (t, t)
        }
        AllToAll::LowLatency => {
            // one copy per (token, expert)
            let copies = tokens * top_k * remote * gamma;
            (
                costs.low_latency.at(copies * hidden * DISPATCH_BYTES_PER_VALUE),
                costs.low_latency.at(copies * hidden * COMBINE_BYTES_PER_VALUE),
            )
        }
        _ => {
            // one copy per (token, destination rank): the expected distinct ranks among top-k
            // experts spread over ep ranks
            let ranks = ep * (1.0 - libm::pow(1.0 - 1.0 / ep, top_k));
            let copies = tokens * ranks * remote * gamma;
            (
                costs.high_throughput.at(copies * hidden * DISPATCH_BYTES_PER_VALUE),
                costs.high_throughput.at(copies * hidden * COMBINE_BYTES_PER_VALUE),
            )
        }
    }
}

/// A step's time with two-batch overlap (see the module docs), s: `layers` layers of which
/// `moe_layers` exchange, `c_half` the compute per layer of one micro-batch, `a_half` its
/// exchange per MoE layer, `slowdown` (≥ 1) how much longer compute takes while an exchange
/// runs beside it (the SMs the exchange's kernels hold: [`DEEPEP_NORMAL_SMS`]).
pub fn two_batch_overlap_s(layers: f64, moe_layers: f64, c_half: f64, a_half: f64, slowdown: f64) -> f64 {
    let c_beside = c_half * slowdown;
    (layers - moe_layers) * 2.0 * c_half + moe_layers * 2.0 * c_beside.max(a_half) + c_half.min(a_half)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probit_inverts_the_normal_cdf() {
        for (p, z) in [(0.5, 0.0), (0.975, 1.959_963_984_540_054), (0.001, -3.090_232_306_167_813)] {
            assert!((probit(p) - z).abs() < 1e-9, "{p}");
        }
    }

    #[test]
    fn popularity_has_the_asked_spread() {
        let w = popularity(256, 1.36);
        let mean = w.iter().sum::<f64>() / 256.0;
        let cv = libm::sqrt(w.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / 256.0) / mean;
        assert!((mean - 1.0).abs() < 1e-12);
        // quantiles truncate the lognormal's far tail: the spread is a little under the asked
        assert!((1.15..1.37).contains(&cv), "{cv}");
        assert!(popularity(64, 0.0).iter().all(|&x| (x - 1.0).abs() < 1e-12));
    }

    /// Checked on what the default was not derived from: TensorRT-LLM's imbalance ratios
    /// (max − mean) / mean for DeepSeek-R1, 1.56 at EP 32 without a balancer and 0.115 at
    /// EP 36 with 288 slots (a mean of 1,024 tokens a rank).
    #[test]
    fn the_default_skew_reproduces_the_published_imbalance() {
        let pairs_per_rank = 1024.0;
        let plain = ExpertBalance::new(256, 32, 0, DEFAULT_EXPERT_LOAD_CV).gamma(pairs_per_rank * 32.0) - 1.0;
        assert!((1.2..1.7).contains(&plain), "{plain}");
        let eplb = ExpertBalance::new(256, 36, 32, DEFAULT_EXPERT_LOAD_CV).gamma(pairs_per_rank * 36.0) - 1.0;
        assert!((0.05..0.2).contains(&eplb), "{eplb}");
    }

    #[test]
    fn redundant_experts_and_bigger_batches_even_the_load() {
        let plain = ExpertBalance::new(256, 16, 0, 1.36);
        let eplb = ExpertBalance::new(256, 16, 32, 1.36);
        assert!(eplb.popularity_gamma() < plain.popularity_gamma());
        assert!(plain.gamma(100.0) > plain.gamma(100_000.0));
        assert!(eplb.gamma(1e7) < 1.02);
        // one rank can't get more than everything; a single replica has no imbalance
        assert!(plain.gamma(1.0) <= 16.0);
        assert_eq!(ExpertBalance::new(256, 1, 0, 1.36).gamma(1000.0), 1.0);
        // uniform popularity: only the routing noise
        let flat = ExpertBalance::new(256, 16, 0, 0.0);
        assert!((flat.popularity_gamma() - 1.0).abs() < 1e-9 && flat.gamma(1e9) < 1.001 && flat.gamma(160.0) > 1.3);
    }

    #[test]
    fn two_batch_overlap_helps_large_batches_and_hurts_tiny_ones() {
        // large: a half costs half, exchange comparable to compute
        let (c, a) = (1.0e-3, 0.8e-3);
        assert!(two_batch_overlap_s(61.0, 58.0, c / 2.0, a / 2.0, 1.0) < 61.0 * c + 58.0 * a);
        // tiny: a half costs as much as the whole (weights read either way), exchange small
        let (c, a) = (0.2e-3, 0.05e-3);
        assert!(two_batch_overlap_s(61.0, 58.0, c * 0.98, a * 0.9, 1.0) > 61.0 * c + 58.0 * a);
        // The SMs an exchange holds slow the compute beside it only where compute is the
        // longer of the two.
        let (c_half, a_half) = (1e-3, 0.5e-3);
        let sms = 132.0 / (132.0 - DEEPEP_NORMAL_SMS);
        assert!(two_batch_overlap_s(61.0, 58.0, c_half, a_half, sms) > two_batch_overlap_s(61.0, 58.0, c_half, a_half, 1.0));
        assert_eq!(two_batch_overlap_s(61.0, 58.0, a_half, c_half, sms), two_batch_overlap_s(61.0, 58.0, a_half, c_half, 1.0));
    }

    #[test]
    fn low_latency_sends_per_expert_and_allgather_everything() {
        let costs = A2aCosts {
            high_throughput: Affine { a: 20e-6, b: 1.0 / 40e9 },
            low_latency: Affine { a: 10e-6, b: 1.0 / 40e9 },
            allgather: Affine { a: 20e-6, b: 1.0 / 40e9 },
        };
        let ht = exchange_s(&costs, AllToAll::HighThroughput, false, 4096.0, 7168.0, 8.0, 16.0, 1.0);
        let ll = exchange_s(&costs, AllToAll::LowLatency, false, 4096.0, 7168.0, 8.0, 16.0, 1.0);
        let ag = exchange_s(&costs, AllToAll::Allgather, false, 4096.0, 7168.0, 8.0, 16.0, 1.0);
        assert!(ht.0 < ll.0 && ll.0 < ag.0 && ht.1 < ag.1);
        assert!(ht.1 > ht.0, "combine is BF16, dispatch FP8");
        let auto_decode = exchange_s(&costs, AllToAll::Auto, true, 32.0, 7168.0, 8.0, 16.0, 1.0);
        assert_eq!(auto_decode, exchange_s(&costs, AllToAll::LowLatency, true, 32.0, 7168.0, 8.0, 16.0, 1.0));
        assert_eq!(exchange_s(&costs, AllToAll::Auto, false, 4096.0, 7168.0, 8.0, 1.0, 1.0), (0.0, 0.0));
    }
}
