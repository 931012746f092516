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

/// Multi-head latent attention (DeepSeek-V2 paper §2.1, "Multi-Head Latent Attention"; the
/// keys of `DeepseekV2Config`/`DeepseekV3Config`): keys and values are compressed into one
/// latent vector per token of `kv_lora_rank` values, which is all the KV cache holds besides
/// a shared `qk_rope_head_dim`-wide RoPE key; queries are optionally compressed too.
/// Per layer: `q_a` (hidden → `q_lora_rank`) and `q_b` (`q_lora_rank` → heads ·
/// (`qk_nope_head_dim` + `qk_rope_head_dim`)), or one `q` projection when `q_lora_rank` is 0;
/// `kv_a` (hidden → `kv_lora_rank` + `qk_rope_head_dim`); `kv_b` (`kv_lora_rank` → heads ·
/// (`qk_nope_head_dim` + `v_head_dim`)); `o` (heads · `v_head_dim` → hidden).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mla {
    /// Rank of the query compression; 0 = queries projected directly (DeepSeek-V2-Lite).
    pub q_lora_rank: u32,
    /// Width of the compressed key/value latent each token caches per layer.
    pub kv_lora_rank: u32,
    /// Width of each head's query/key part without RoPE.
    pub qk_nope_head_dim: u32,
    /// Width of the decoupled RoPE query part per head, and of the one RoPE key per token.
    pub qk_rope_head_dim: u32,
    /// Width of each head's value.
    pub v_head_dim: u32,
}

impl Mla {
    /// Values one token caches per layer: the latent and the RoPE key.
    pub fn cached_values(&self) -> u32 {
        self.kv_lora_rank.saturating_add(self.qk_rope_head_dim)
    }

    /// Width of each head's query and key (`qk_nope_head_dim + qk_rope_head_dim`).
    /// (Saturating: a config is read before its widths are checked.)
    pub fn qk_head_dim(&self) -> u32 {
        self.qk_nope_head_dim.saturating_add(self.qk_rope_head_dim)
    }
}

/// Storage format of a checkpoint's expert weights, when it differs from the rest of the
/// model's: its bytes per parameter replace the scenario's weight precision for the routed
/// experts in the memory plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WeightFormat {
    /// 16-bit weights (2 bytes per parameter).
    Bf16,
    /// FP8 E4M3 with block scales (DeepSeek-V3, Kimi-K2: `quant_method = "fp8"`, one FP32
    /// scale per 128 × 128 block): 1 byte per parameter (the scales add 4 bytes per 16,384
    /// parameters, 0.02%, left out).
    Fp8,
    /// OCP MXFP4 (gpt-oss: `quant_method = "mxfp4"`): 4-bit E2M1 values with one 8-bit
    /// scale per 32, 4.25 bits per parameter (OCP Microscaling Formats spec v1.0, §5; the
    /// gpt-oss model card, "Quantization").
    Mxfp4,
}

impl WeightFormat {
    /// Bytes per parameter.
    pub fn bytes(self) -> f64 {
        match self {
            WeightFormat::Bf16 => 2.0,
            WeightFormat::Fp8 => 1.0,
            WeightFormat::Mxfp4 => 4.25 / 8.0,
        }
    }
}

/// A decoder-only transformer: RMSNorm, rotary attention with grouped-query KV heads (or
/// multi-head latent attention), a gated MLP, optionally a mixture of experts in place of
/// the MLP on some layers.
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
    /// Multi-head latent attention (DeepSeek-V2/V3, Kimi-K2) in place of grouped-query
    /// attention; `head_dim` is then its q/k head width and `kv_heads` is not used.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mla: Option<Mla>,
    /// A learned sink logit per head in every attention softmax (gpt-oss): `heads`
    /// parameters a layer.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub attention_sinks: bool,
    /// The routed experts' storage format when the checkpoint sets it (MXFP4 in gpt-oss,
    /// FP8 in DeepSeek-V3 and Kimi-K2); none = the scenario's weight precision.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expert_format: Option<WeightFormat>,
    /// Multi-token-prediction modules the checkpoint holds (`num_nextn_predict_layers`;
    /// DeepSeek-V3: 1). Not part of the model's forward pass: counted only with `serve_mtp`.
    #[serde(skip_serializing_if = "is_zero")]
    pub mtp_layers: u32,
    /// Whether the server loads the MTP modules (an optional extra layer each, for
    /// speculative decoding): off by default. When on, [`Model::params`] and the memory plan
    /// count them.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub serve_mtp: bool,
}

fn is_zero(x: &u32) -> bool {
    *x == 0
}

impl Model {
    /// Total parameter count: the embedding table and the lm_head (counted once when tied),
    /// the final RMSNorm, and every layer ([`Model::params_per_dense_layer`] for the layers
    /// without experts, [`Model::params_per_moe_layer`] for the others); plus the MTP
    /// modules ([`Model::mtp_params`]) when `serve_mtp` is on.
    pub fn params(&self) -> f64 {
        let main = self.main_params();
        if self.serve_mtp {
            main + self.mtp_params()
        } else {
            main
        }
    }

    /// [`Model::params`] without the MTP modules.
    fn main_params(&self) -> f64 {
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

    /// Parameters the forward pass of one token goes through: attention, the dense layers'
    /// MLPs, on MoE layers the router, the top-k routed experts and the shared experts, the
    /// norms, the lm_head and the embedding table (whole, as Mistral, Qwen and Meta count
    /// it; DeepSeek, Moonshot and OpenAI leave the input embedding out of their "activated"
    /// figures: subtract [`Model::embedding_params`] to compare). The MTP modules are not
    /// part of a token's forward pass and are never counted.
    pub fn active_params(&self) -> f64 {
        if self.experts <= 1 {
            return self.main_params();
        }
        self.main_params() - self.idle_expert_params()
    }

    /// The parameters of the input embedding table (`vocab × hidden`).
    pub fn embedding_params(&self) -> f64 {
        f64::from(self.vocab) * f64::from(self.hidden)
    }

    /// The routed experts a token does not go through, over the MoE layers.
    fn idle_expert_params(&self) -> f64 {
        let idle = f64::from(self.experts - self.experts_per_token)
            * 3.0
            * f64::from(self.hidden)
            * f64::from(self.intermediate);
        f64::from(self.moe_layers) * idle
    }

    /// Parameters of the routed experts (gate, up and down of every expert on every MoE
    /// layer, and on the MTP modules' layers when they are served): the weights expert
    /// parallelism spreads over its ranks and `expert_format` stores. The router and the
    /// shared experts are not among them (every rank runs them).
    pub fn expert_params(&self) -> f64 {
        if self.experts <= 1 {
            return 0.0;
        }
        let per_layer = f64::from(self.experts) * 3.0 * f64::from(self.hidden) * f64::from(self.intermediate);
        let mtp = if self.serve_mtp && self.moe_layers > 0 { self.mtp_layers } else { 0 };
        f64::from(self.moe_layers + mtp) * per_layer
    }

    /// Parameters of the MTP modules as the checkpoint stores them (DeepSeek-V3 technical
    /// report §2.2 and its checkpoint's layer 61): each one transformer layer (an MoE layer
    /// when the model has experts), the projection of the concatenated hidden state and
    /// embedding (`2·hidden × hidden`), three RMSNorms (`enorm`, `hnorm`, the head's norm),
    /// and its own copies of the embedding table and the output head (vLLM's
    /// `DeepSeekMTP` loads them as its `embed_tokens` and `shared_head.head`). DeepSeek-V3's:
    /// 13.5B of the 685B its card quotes with them (671B without).
    pub fn mtp_params(&self) -> f64 {
        if self.mtp_layers == 0 {
            return 0.0;
        }
        let hidden = f64::from(self.hidden);
        let layer = if self.experts > 1 && self.moe_layers > 0 { self.params_per_moe_layer() } else { self.params_per_dense_layer() };
        let own = layer + 2.0 * hidden * hidden + 3.0 * hidden + 2.0 * self.embedding_params();
        f64::from(self.mtp_layers) * own
    }

    /// Attention (q, k, v, o and their biases, or MLA's projections and their two latent
    /// RMSNorms; gpt-oss's sinks) and RMSNorm weights of one layer.
    fn attention_and_norms(&self) -> (f64, f64) {
        let hidden = f64::from(self.hidden);
        let norms = if self.post_norms { 4.0 } else { 2.0 } * hidden;
        let sinks = if self.attention_sinks { f64::from(self.heads) } else { 0.0 };
        if let Some(mla) = &self.mla {
            return (self.mla_params(mla) + sinks, norms);
        }
        let head_dim = f64::from(self.head_dim);
        let q = hidden * f64::from(self.heads) * head_dim;
        let kv = 2.0 * hidden * f64::from(self.kv_heads) * head_dim;
        let o = f64::from(self.heads) * head_dim * hidden;
        let bias = if self.qkv_bias {
            f64::from(self.heads + 2 * self.kv_heads) * head_dim
        } else {
            0.0
        };
        (q + kv + o + bias + sinks, norms)
    }

    /// MLA's weights of one layer (see [`Mla`]): `q_a` with its RMSNorm and `q_b` (or one
    /// `q` projection), `kv_a` with its RMSNorm, `kv_b` and `o`.
    fn mla_params(&self, mla: &Mla) -> f64 {
        let hidden = f64::from(self.hidden);
        let heads = f64::from(self.heads);
        let (ql, kl) = (f64::from(mla.q_lora_rank), f64::from(mla.kv_lora_rank));
        let q_out = heads * f64::from(mla.qk_head_dim());
        let q = if mla.q_lora_rank > 0 { hidden * ql + ql + ql * q_out } else { hidden * q_out };
        let kv_a = hidden * f64::from(mla.cached_values()) + kl;
        let kv_b = kl * heads * f64::from(mla.qk_nope_head_dim + mla.v_head_dim);
        let o = heads * f64::from(mla.v_head_dim) * hidden;
        q + kv_a + kv_b + o
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
    /// (`2 · layers · kv_heads · head_dim · dtype_bytes`; with MLA the latent and RoPE key,
    /// `layers · (kv_lora_rank + qk_rope_head_dim) · dtype_bytes`). Layers with local
    /// attention hold every token too, as vLLM's paged cache allocates them (their attention
    /// reads only the window).
    pub fn kv_bytes_per_token(&self, dtype_bytes: f64) -> f64 {
        if let Some(mla) = &self.mla {
            return f64::from(self.layers) * f64::from(mla.cached_values()) * dtype_bytes;
        }
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
        if let Some(mla) = &self.mla {
            self.validate_mla(mla)?;
        }
        if self.expert_format.is_some() && self.experts <= 1 {
            return Err(SimError::config("expert_format", "sets the experts' weights: needs experts > 1 (got experts = 1)"));
        }
        at_most("mtp_layers", self.mtp_layers, MAX_COUNT)?;
        if self.serve_mtp && self.mtp_layers == 0 {
            return Err(SimError::config("serve_mtp", "the model has no MTP module to serve (mtp_layers = 0)"));
        }
        Ok(())
    }

    /// MLA's widths, and what MLA replaces: its q/k head width is `head_dim`; q/k/v biases
    /// and per-head q/k norms belong to grouped-query attention.
    fn validate_mla(&self, mla: &Mla) -> Result<()> {
        for (path, value) in [
            ("mla.q_lora_rank", mla.q_lora_rank),
            ("mla.kv_lora_rank", mla.kv_lora_rank),
            ("mla.qk_nope_head_dim", mla.qk_nope_head_dim),
            ("mla.qk_rope_head_dim", mla.qk_rope_head_dim),
            ("mla.v_head_dim", mla.v_head_dim),
        ] {
            at_most(path, value, MAX_WIDTH)?;
        }
        at_least_one("mla.kv_lora_rank", mla.kv_lora_rank)?;
        at_least_one("mla.v_head_dim", mla.v_head_dim)?;
        if mla.qk_head_dim() < 1 {
            return Err(SimError::config("mla.qk_nope_head_dim", "qk_nope_head_dim + qk_rope_head_dim must be >= 1 (got 0)"));
        }
        // The widest projection outputs (q_b, kv_b, the absorbed W_UK) stay real models'.
        let heads = u64::from(self.heads);
        for (path, width) in [
            ("mla.qk_nope_head_dim", heads * u64::from(mla.qk_head_dim())),
            ("mla.v_head_dim", heads * u64::from(mla.qk_nope_head_dim + mla.v_head_dim)),
            ("mla.kv_lora_rank", heads * u64::from(mla.kv_lora_rank)),
        ] {
            if width > u64::from(MAX_WIDTH) {
                return Err(SimError::config(path, format!("gives a projection {width} wide (heads × width), over {MAX_WIDTH}: not a real model")));
            }
        }
        if self.head_dim != mla.qk_head_dim() {
            return Err(SimError::config(
                "head_dim",
                format!(
                    "must be mla.qk_nope_head_dim + mla.qk_rope_head_dim = {} for an MLA model (got {})",
                    mla.qk_head_dim(),
                    self.head_dim
                ),
            ));
        }
        if self.qkv_bias {
            return Err(SimError::config("qkv_bias", "q/k/v biases are grouped-query attention's: not supported with mla"));
        }
        if self.qk_norm_layers > 0 {
            return Err(SimError::config("qk_norm_layers", "per-head q/k norms are grouped-query attention's: must be 0 with mla"));
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
/// (false), `activation` (silu), `local_attention` (none), `mla` (none), `attention_sinks`
/// (false), `expert_format` (none), `mtp_layers` (0), `serve_mtp` (false); `head_dim`
/// defaults to `mla`'s q/k head width when `mla` is given. Overriding `layers` of a preset
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
    /// Overrides [`Model::mla`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mla: Option<Mla>,
    /// Overrides [`Model::attention_sinks`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attention_sinks: Option<bool>,
    /// Overrides [`Model::expert_format`] (`"bf16"`, `"fp8"` or `"mxfp4"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expert_format: Option<WeightFormat>,
    /// Overrides [`Model::mtp_layers`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtp_layers: Option<u32>,
    /// Overrides [`Model::serve_mtp`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serve_mtp: Option<bool>,
}
