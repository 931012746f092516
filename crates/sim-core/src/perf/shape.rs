//! What the execution-time model prices: the shape of one scheduler step of one replica
//! ([`BatchShape`], its prefill requests [`PrefillItem`]).

/// One request in the prefill phase this step.
#[derive(Debug, Clone, Copy)]
pub struct PrefillItem {
    /// Prompt (or recomputed) tokens processed this step.
    pub new_tokens: u32,
    /// Tokens whose KV is already cached before this step (prefix hits, earlier chunks).
    pub context_before: u32,
}

/// Aggregate description of one scheduler step of one replica.
#[derive(Debug, Clone, Copy, Default)]
pub struct BatchShape<'a> {
    /// Requests below their (re)prefill target: tokens this step + KV already there.
    pub prefill: &'a [PrefillItem],
    /// Σ `new_tokens` over `prefill`.
    pub prefill_tokens: u64,
    /// Requests producing their next output token from a 1-token decode.
    pub decode_seqs: u64,
    /// Σ over decode requests of KV length after the step (including the new token).
    pub decode_context_sum: u64,
    /// Σ over all scheduled requests of KV length after the step, this step's tokens included.
    pub context_sum_after: u64,
    /// Rows that go through lm_head + sampling (decodes + prefills completing their prompt).
    pub sampled: u64,
    /// Σ over decode requests of the KV tokens read (context after the step − 1) divided by
    /// the request's own block size, in 1/1024 blocks: `(ctx − 1) · 1024 / block`, exact
    /// because block sizes are powers of two ≤ 1024. Only a cache with per-request block
    /// sizes (o1pro, [`StepCostModel::with_per_request_blocks`](super::StepCostModel::with_per_request_blocks)) reads it; 0 elsewhere.
    pub decode_blocks_1024: u64,
    /// Speculative decoding: Σ over decode requests of the draft tokens verified with their
    /// next token (a decode of `1 + k` query tokens adds `k`). Each is one more row through
    /// every dense layer and lm_head, and one more query of the decode's attention; 0
    /// without speculation.
    pub spec_tokens: u64,
    /// Multi-LoRA: distinct adapters the step's requests use (0: no LoRA). Every row of the
    /// step goes through the LoRA kernels, which read each adapter's weights once.
    pub lora_adapters: u64,
}

impl BatchShape<'_> {
    /// Rows through the dense layers: prefill tokens, one per decode, and the drafts verified.
    #[inline]
    pub fn tokens(&self) -> u64 {
        self.prefill_tokens + self.decode_seqs + self.spec_tokens
    }

    pub(super) fn is_empty(&self) -> bool {
        self.prefill.is_empty()
            && self.prefill_tokens == 0
            && self.decode_seqs == 0
            && self.sampled == 0
    }
}
