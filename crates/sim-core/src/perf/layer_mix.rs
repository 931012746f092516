//! What a step model's layer computes beyond the Llama-style core, per architecture: the
//! share of layers with experts or a dense MLP, the shared expert, q/k/v bias, q/k norms,
//! post-norms, the activation, and the layers with bounded (sliding or chunked) attention.
//! [`super::step`] prices these with the same operators as every other op.

use crate::catalog::{Activation, LocalKind, Model};
use crate::memory::kv_heads_per_gpu;

/// A gated MLP's gate/up GEMM `(k, n)`, down GEMM `(k, n)` and inner width per GPU.
type MlpShape = ((u32, u32), (u32, u32), f64);

/// What differs between the layers of a model and what only some architectures compute,
/// with widths per GPU (see [`Model`]): everything else is the same in every layer.
#[derive(Debug, Clone)]
pub(super) struct LayerMix {
    /// Share of the layers whose MLP is the mixture of experts (1 for an all-MoE model).
    pub(super) moe_share: f64,
    /// Dense layers' gate/up and down GEMMs and their inner width, of an interleaved model.
    pub(super) dense_gate_up: (u32, u32),
    pub(super) dense_down: (u32, u32),
    pub(super) dense_inter_shard: f64,
    /// The shared expert's gate/up and down GEMMs and inner width (Llama 4).
    pub(super) shared: Option<MlpShape>,
    /// Bytes of the q/k/v bias vectors (read by the GEMM's epilogue: no kernel of its own).
    pub(super) qkv_bias_bytes: Option<f64>,
    /// Share of the layers with q/k RMSNorm.
    pub(super) qk_norm_share: f64,
    /// Gemma 2/3: each sub-layer's output normalised too.
    pub(super) post_norms: bool,
    /// Breakdown name of the gated activation (priced as the profile's `silu_mul`).
    pub(super) act: &'static str,
    /// Layers with bounded attention: (kind, window or chunk tokens, share of the layers).
    pub(super) local: Option<(LocalKind, f64, f64)>,
}

impl LayerMix {
    pub(super) fn new(model: &Model, t: u32) -> LayerMix {
        let layers = f64::from(model.layers.max(1));
        let moe_share = if model.experts > 1 { f64::from(model.moe_layers) / layers } else { 0.0 };
        let dense_inter = model.dense_intermediate / t;
        let shared_inter = model.shared_expert_intermediate / t;
        LayerMix {
            moe_share,
            dense_gate_up: (model.hidden, 2 * dense_inter),
            dense_down: (dense_inter, model.hidden),
            dense_inter_shard: f64::from(dense_inter),
            shared: (shared_inter > 0 && moe_share > 0.0)
                .then(|| ((model.hidden, 2 * shared_inter), (shared_inter, model.hidden), f64::from(shared_inter))),
            qkv_bias_bytes: model.qkv_bias.then(|| {
                let (hq, hkv) = (model.heads / t, kv_heads_per_gpu(model, t));
                f64::from((hq + 2 * hkv) * model.head_dim) * 2.0
            }),
            qk_norm_share: f64::from(model.qk_norm_layers) / layers,
            post_norms: model.post_norms,
            act: match model.activation {
                Activation::Silu => "silu_mul",
                Activation::Gelu => "gelu_mul",
            },
            local: model.local_attention.map(|l| (l.kind, f64::from(l.tokens), f64::from(l.layers) / layers)),
        }
    }
}

/// Share of a prefill's causal (query, key) pairs a layer with bounded attention computes:
/// `new` tokens after `context` cached ones attend to `new · (context + new/2)` pairs
/// causally (the convention of [`crate::calib::chunk_flops`]); with
/// * a sliding window of `w` tokens, the tokens before position `w` attend causally to all
///   before them and each later one to exactly `w`;
/// * chunks of `w` tokens, each token attends to its own chunk up to itself: the rest of
///   the chunk `context` ends in, whole chunks, and a tail.
pub(super) fn local_pair_share(kind: LocalKind, w: f64, new: f64, context: f64) -> f64 {
    let full = new * (context + new / 2.0);
    if full <= 0.0 {
        return 1.0;
    }
    let local = match kind {
        LocalKind::Sliding => {
            let below = (w - context).clamp(0.0, new);
            below * (context + below / 2.0) + (new - below) * w
        }
        LocalKind::Chunked => {
            let start = context - (context / w).floor() * w;
            let first = new.min(w - start);
            let rest = new - first;
            let whole = (rest / w).floor();
            let tail = rest - whole * w;
            first * (start + first / 2.0) + whole * w * w / 2.0 + tail * tail / 2.0
        }
    };
    (local / full).min(1.0)
}
