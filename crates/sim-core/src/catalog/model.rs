//! The transformer record: what each layer computes and holds, whichever family it came
//! from (a preset, a Hugging Face `config.json`, or a hand-written table).

use serde::{Deserialize, Serialize};

use super::checks::{at_least_one, divides};
use crate::error::{Result, SimError};

/// Largest width (hidden size, MLP width, vocabulary, head width) a model may have: 2²⁴.
/// Real models stay two orders of magnitude below; larger values are typing errors, and
/// keeping them bounded keeps every derived width inside `u32`.
pub const MAX_WIDTH: u32 = 1 << 24;
/// Most layers, heads or experts a model may have: 2¹⁶.
pub const MAX_COUNT: u32 = 1 << 16;

/// The gated MLP's activation: `act(gate) · up`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Activation {
    /// SiLU (Llama, Mistral, Qwen, Yi).
    Silu,
    /// GELU, exact or tanh-approximated (Gemma's `gelu_pytorch_tanh`): the same memory
    /// traffic as SiLU·mul, so priced by the same elementwise tables.
    Gelu,
}

/// How a layer with bounded attention bounds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LocalKind {
    /// Each token attends to the last `tokens` tokens, itself included (Mistral, Gemma 2/3).
    Sliding,
    /// Each token attends to the tokens of its own `tokens`-long chunk up to itself
    /// (Llama 4's RoPE layers).
    Chunked,
}

/// Attention bounded to a window on some of the layers; the others see the whole context.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LocalAttention {
    /// Sliding window or chunks.
    pub kind: LocalKind,
    /// Window or chunk length, tokens.
    pub tokens: u32,
    /// How many of the model's layers use it (1..=layers).
    pub layers: u32,
}

/// A decoder-only transformer: RMSNorm, rotary attention with grouped-query KV heads, a
/// gated MLP, optionally a mixture of experts in place of the MLP on some layers.
///
/// Layers may differ (interleaved dense/MoE layers, local/global attention); the record
/// keeps how many layers of each kind there are, which is all the costs and the memory
/// plan depend on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Model {
    /// Preset or user-chosen name (e.g. `llama-3-8b`).
    pub name: String,
    /// Transformer blocks.
    pub layers: u32,
    /// Residual-stream width (model dimension).
    pub hidden: u32,
    /// Query heads.
    pub heads: u32,
    /// Key/value heads (grouped-query attention); divides `heads`.
    pub kv_heads: u32,
    /// Width of one attention head (need not be `hidden / heads`: Gemma, Qwen3).
    pub head_dim: u32,
    /// MLP inner width: per expert on MoE layers, of the MLP on dense models.
    pub intermediate: u32,
    /// Vocabulary size.
    pub vocab: u32,
    /// Longest context the model supports, tokens.
    pub max_context: u32,
    /// Experts per MoE layer; 1 = dense MLP.
    pub experts: u32,
    /// Experts each token is routed to (top-k); 1 for dense models.
    pub experts_per_token: u32,
    /// Whether the lm_head shares the input-embedding matrix (held once in memory).
    pub tied_embeddings: bool,
    /// Layers whose MLP is the mixture of experts (0 for dense models; `layers` unless the
    /// model interleaves dense and MoE layers, as Llama 4 Maverick and some Qwen3-MoE do).
    pub moe_layers: u32,
    /// MLP inner width of the layers without experts (equal to `intermediate` for dense
    /// models; Llama 4's `intermediate_size_mlp`, Qwen3-MoE's `intermediate_size`).
    pub dense_intermediate: u32,
    /// Inner width of the shared expert every token also goes through on MoE layers
    /// (Llama 4); 0 = none.
    pub shared_expert_intermediate: u32,
    /// Whether q, k and v projections carry a bias (Qwen2/2.5).
    pub qkv_bias: bool,
    /// Layers that normalise q and k per head before RoPE (Qwen3, Gemma 3: all; Llama 4:
    /// its RoPE layers); 0 = none.
    pub qk_norm_layers: u32,
    /// Whether each sub-layer's output is normalised too (Gemma 2/3: four RMSNorms a layer
    /// instead of two).
    pub post_norms: bool,
    /// The gated MLP's activation.
    pub activation: Activation,
    /// Attention bounded to a window or chunk on some layers; none = every layer global.
    pub local_attention: Option<LocalAttention>,
}

impl Model {
    /// Total parameter count: the embedding table and the lm_head (counted once when tied),
    /// the final RMSNorm, and every layer ([`Model::params_per_dense_layer`] for the layers
    /// without experts, [`Model::params_per_moe_layer`] for the others).
    pub fn params(&self) -> f64 {
        let embed = f64::from(self.vocab) * f64::from(self.hidden);
        let lm_head = if self.tied_embeddings { 0.0 } else { embed };
        let final_norm = f64::from(self.hidden);
        let dense_layers = f64::from(self.layers - self.moe_layers.min(self.layers));
        let qk_norms = f64::from(self.qk_norm_layers) * 2.0 * f64::from(self.head_dim);
        embed
            + lm_head
            + final_norm
            + dense_layers * self.params_per_dense_layer()
            + f64::from(self.moe_layers) * self.params_per_moe_layer()
            + qk_norms
    }

    /// Parameters the forward pass of one token reads (the routed experts and the shared
    /// expert only, on MoE layers): the "active" parameters model cards quote.
    pub fn active_params(&self) -> f64 {
        if self.experts <= 1 {
            return self.params();
        }
        let idle = f64::from(self.experts - self.experts_per_token)
            * 3.0
            * f64::from(self.hidden)
            * f64::from(self.intermediate);
        self.params() - f64::from(self.moe_layers) * idle
    }

    /// Attention (q, k, v, o and their biases) and RMSNorm weights of one layer.
    fn attention_and_norms(&self) -> (f64, f64) {
        let hidden = f64::from(self.hidden);
        let head_dim = f64::from(self.head_dim);
        let q = hidden * f64::from(self.heads) * head_dim;
        let kv = 2.0 * hidden * f64::from(self.kv_heads) * head_dim;
        let o = f64::from(self.heads) * head_dim * hidden;
        let bias = if self.qkv_bias {
            f64::from(self.heads + 2 * self.kv_heads) * head_dim
        } else {
            0.0
        };
        let norms = if self.post_norms { 4.0 } else { 2.0 } * hidden;
        (q + kv + o + bias, norms)
    }

    /// Parameters of a layer without experts: attention, the gated MLP (gate, up, down at
    /// `dense_intermediate`) and the RMSNorm weights (q/k norms are counted by
    /// [`Model::params`]).
    pub fn params_per_dense_layer(&self) -> f64 {
        let (attn, norms) = self.attention_and_norms();
        let mlp = 3.0 * f64::from(self.hidden) * f64::from(self.dense_intermediate);
        attn + mlp + norms
    }

    /// Parameters of an MoE layer: attention, every expert's gate/up/down, the router
    /// (`hidden × experts`), the shared expert if any, and the RMSNorm weights.
    pub fn params_per_moe_layer(&self) -> f64 {
        let (attn, norms) = self.attention_and_norms();
        let hidden = f64::from(self.hidden);
        let experts = f64::from(self.experts);
        let mlp = experts * 3.0 * hidden * f64::from(self.intermediate);
        let router = hidden * experts;
        let shared = 3.0 * hidden * f64::from(self.shared_expert_intermediate);
        attn + mlp + router + norms + shared
    }

    /// Bytes of K and V cache one token occupies across all layers of the whole model
    /// (`2 · layers · kv_heads · head_dim · dtype_bytes`). Layers with local attention hold
    /// every token too, as vLLM's paged cache allocates them (their attention reads only
    /// the window).
    pub fn kv_bytes_per_token(&self, dtype_bytes: f64) -> f64 {
        2.0 * f64::from(self.layers)
            * f64::from(self.kv_heads)
            * f64::from(self.head_dim)
            * dtype_bytes
    }

    /// Check every field; error paths are relative (`heads`), callers prefix them (`model`).
    pub fn validate(&self) -> Result<()> {
        if self.name.trim().is_empty() {
            return Err(SimError::config("name", "must not be empty"));
        }
        for (path, value, max) in [
            ("layers", self.layers, MAX_COUNT),
            ("hidden", self.hidden, MAX_WIDTH),
            ("heads", self.heads, MAX_COUNT),
            ("kv_heads", self.kv_heads, MAX_COUNT),
            ("head_dim", self.head_dim, MAX_WIDTH),
            ("intermediate", self.intermediate, MAX_WIDTH),
            ("dense_intermediate", self.dense_intermediate, MAX_WIDTH),
            ("vocab", self.vocab, MAX_WIDTH),
            ("max_context", self.max_context, u32::MAX),
            ("experts", self.experts, MAX_COUNT),
            ("experts_per_token", self.experts_per_token, MAX_COUNT),
        ] {
            at_least_one(path, value)?;
            at_most(path, value, max)?;
        }
        at_most("shared_expert_intermediate", self.shared_expert_intermediate, MAX_WIDTH)?;
        if !divides(self.kv_heads, self.heads) {
            return Err(SimError::config(
                "heads",
                format!(
                    "must be a multiple of kv_heads (got heads={}, kv_heads={})",
                    self.heads, self.kv_heads
                ),
            ));
        }
        let qkv_width = u64::from(self.heads + 2 * self.kv_heads) * u64::from(self.head_dim);
        if qkv_width > u64::from(MAX_WIDTH) {
            return Err(SimError::config(
                "head_dim",
                format!(
                    "(heads + 2·kv_heads) · head_dim = {qkv_width} exceeds {MAX_WIDTH}: not a real model"
                ),
            ));
        }
        if self.experts_per_token > self.experts {
            return Err(SimError::config(
                "experts_per_token",
                format!(
                    "must be <= experts (got experts_per_token={}, experts={})",
                    self.experts_per_token, self.experts
                ),
            ));
        }
        match (self.experts > 1, self.moe_layers) {
            (true, 0) => {
                return Err(SimError::config("moe_layers", "must be >= 1 when experts > 1 (got 0)"))
            }
            (false, n) if n > 0 => {
                return Err(SimError::config(
                    "moe_layers",
                    format!("must be 0 for a dense model (experts = 1) (got {n})"),
                ))
            }
            _ => {}
        }
        at_most("moe_layers", self.moe_layers, self.layers)?;
        if self.shared_expert_intermediate > 0 && self.experts <= 1 {
            return Err(SimError::config(
                "shared_expert_intermediate",
                "a shared expert needs experts > 1 (got experts = 1)",
            ));
        }
        at_most("qk_norm_layers", self.qk_norm_layers, self.layers)?;
        if let Some(local) = &self.local_attention {
            at_least_one("local_attention.tokens", local.tokens)?;
            at_least_one("local_attention.layers", local.layers)?;
            at_most("local_attention.layers", local.layers, self.layers)?;
        }
        Ok(())
    }
}

fn at_most(path: &str, value: u32, max: u32) -> Result<()> {
    if value > max {
        return Err(SimError::config(path, format!("must be <= {max} (got {value})")));
    }
    Ok(())
}

/// Table form of a `model` entry. Every field is optional. With `preset` or `hf_config`,
/// the other fields override what those give; without either, all structural fields are
/// required. Fields with defaults when neither is given: `name` ("custom"), `experts` (1),
/// `experts_per_token` (1, required when `experts > 1`), `tied_embeddings` (false),
/// `moe_layers` (`layers` for MoE, else 0), `dense_intermediate` (`intermediate`),
/// `shared_expert_intermediate` (0), `qkv_bias` (false), `qk_norm_layers` (0), `post_norms`
/// (false), `activation` (silu), `local_attention` (none). Overriding `layers` of a preset
/// keeps the preset's share of MoE, q/k-norm and local-attention layers. Units as in
/// [`Model`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelFields {
    /// Preset to start from (a name or a Hugging Face id); the other fields override it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<String>,
    /// A Hugging Face `config.json`, parsed (the front ends read a path given here); the
    /// other fields override what it gives.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hf_config: Option<serde_json::Value>,
    /// Overrides [`Model::name`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Overrides [`Model::layers`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layers: Option<u32>,
    /// Overrides [`Model::hidden`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hidden: Option<u32>,
    /// Overrides [`Model::heads`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heads: Option<u32>,
    /// Overrides [`Model::kv_heads`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_heads: Option<u32>,
    /// Overrides [`Model::head_dim`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_dim: Option<u32>,
    /// Overrides [`Model::intermediate`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intermediate: Option<u32>,
    /// Overrides [`Model::vocab`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vocab: Option<u32>,
    /// Overrides [`Model::max_context`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_context: Option<u32>,
    /// Overrides [`Model::experts`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub experts: Option<u32>,
    /// Overrides [`Model::experts_per_token`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub experts_per_token: Option<u32>,
    /// Overrides [`Model::tied_embeddings`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tied_embeddings: Option<bool>,
    /// Overrides [`Model::moe_layers`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moe_layers: Option<u32>,
    /// Overrides [`Model::dense_intermediate`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dense_intermediate: Option<u32>,
    /// Overrides [`Model::shared_expert_intermediate`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_expert_intermediate: Option<u32>,
    /// Overrides [`Model::qkv_bias`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qkv_bias: Option<bool>,
    /// Overrides [`Model::qk_norm_layers`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qk_norm_layers: Option<u32>,
    /// Overrides [`Model::post_norms`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub post_norms: Option<bool>,
    /// Overrides [`Model::activation`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub activation: Option<Activation>,
    /// Overrides [`Model::local_attention`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_attention: Option<LocalAttention>,
}
