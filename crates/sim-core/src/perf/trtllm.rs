//! TensorRT-LLM's runtime constants the step model reads (`cost_model.engine = "trtllm"`,
//! v0.20): the CUDA-graph capture list and its padding, the overlap scheduler's host work
//! per request, the FP8 attention speed-up. The engine's composition of a step is in
//! `perf/step/trtllm_ops.rs`.

/// The batch sizes TensorRT-LLM captured CUDA graphs for in the published max-throughput
/// runs, with `enable_padding: true` (`docs/source/performance/perf-overview.md`, v0.20,
/// "The data collected for the v0.20 benchmarks was run with the following file"): a
/// generation-only step of `n` requests replays the graph of the smallest size ≥ `n`.
pub const CAPTURE_BATCH_SIZES: [u32; 15] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 384, 512, 1024, 2048, 4096, 8192];

/// The host's work per scheduled request in one step of the PyTorch backend's executor loop
/// (scheduling, input preparation, the sampler's bookkeeping, responses), s: NVIDIA measured
/// an average `host_step_time` of 45.11 ms per iteration at 1,536 requests per rank
/// (GPT-OSS-120B, GB200, ADP 2, `max_batch_size` 1536, 3,072 concurrent 1k/1k requests;
/// NVIDIA/TensorRT-LLM pull request #10273, the C++ scheduler's figure), 29.4 µs per
/// request. The overlap scheduler hides it behind the GPU unless it is longer.
pub const HOST_SEQ_S: f64 = 45.11e-3 / 1536.0;

/// How much faster FP8 attention runs than BF16 on Hopper when the KV cache is FP8 (the
/// context FMHA then takes FP8 Q, K and V): FlashAttention-3 reaches close to 1.2 PFLOPS in
/// FP8 and up to 740 TFLOPS in BF16 on H100 (Shah et al., arXiv 2407.08608, abstract), a
/// ratio of 1.62. Applied to the BF16 prefill-attention time above the kernel floor.
pub const FP8_FMHA_SPEEDUP: f64 = 1.2e15 / 740e12;

/// The largest batch TensorRT-LLM v0.20 captures a CUDA graph for when it schedules at most
/// `max_batch_size` requests: the largest of [`CAPTURE_BATCH_SIZES`] not above it (0 when
/// none is).
pub fn largest_captured(max_batch_size: u64) -> u64 {
    CAPTURE_BATCH_SIZES.iter().map(|&c| u64::from(c)).filter(|&c| c <= max_batch_size).max().unwrap_or(0)
}

/// The captured batch size a generation-only step of `n` requests runs at: the smallest of
/// [`CAPTURE_BATCH_SIZES`] ≥ `n` (at most the largest captured size, [`largest_captured`]);
/// `n` itself past it (the step then runs eagerly).
pub fn padded_batch(n: u64) -> u64 {
    CAPTURE_BATCH_SIZES.iter().map(|&c| u64::from(c)).find(|&c| c >= n).unwrap_or(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generation_batches_pad_to_the_next_captured_size() {
        assert_eq!(padded_batch(1), 1);
        assert_eq!(padded_batch(3), 4);
        assert_eq!(padded_batch(257), 384);
        assert_eq!(padded_batch(385), 512);
        assert_eq!(padded_batch(875), 1024);
        assert_eq!(padded_batch(8192), 8192);
        assert_eq!(padded_batch(9000), 9000);
        // v0.20 captures the listed sizes up to max_batch_size only
        assert_eq!(largest_captured(640), 512);
        assert_eq!(largest_captured(4096), 4096);
        assert_eq!(largest_captured(20000), 8192);
        assert_eq!(largest_captured(0), 0);
    }
}
