//! The model presets, each written as the fields of its published Hugging Face
//! `config.json` that the loader reads ([`super::hf`]), so a preset and a user's config go
//! through one loader.
//!
//! Sources: the `config.json` of each repository named in `hf_ids` (the first id), as
//! published on the Hugging Face Hub; only the keys the loader reads are kept. Where the
//! base and instruct repositories differ in a key we keep, the comment says which is used.

use std::sync::OnceLock;

use super::hf::model_from_hf_config;
use super::model::Model;

/// One model preset: its name, the Hugging Face ids that resolve to it (case-insensitive),
/// and its config.
pub struct ModelPreset {
    /// The preset's name (`llama-3.1-8b`).
    pub name: &'static str,
    /// Hugging Face repository ids accepted in its place.
    pub hf_ids: &'static [&'static str],
    /// The relevant fields of its `config.json`.
    pub config: &'static str,
}

/// The model presets, in catalog order (the first five are the original presets, which
/// the goldens use).
pub const MODEL_PRESETS: [ModelPreset; 27] = [
    ModelPreset {
        name: "llama-3-8b",
        hf_ids: &["meta-llama/Meta-Llama-3-8B", "meta-llama/Meta-Llama-3-8B-Instruct"],
        config: r#"{"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
            "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
            "vocab_size": 128256, "max_position_embeddings": 8192,
            "tie_word_embeddings": false, "torch_dtype": "bfloat16"}"#,
    },
    ModelPreset {
        name: "llama-3-70b",
        hf_ids: &["meta-llama/Meta-Llama-3-70B", "meta-llama/Meta-Llama-3-70B-Instruct"],
        config: r#"{"model_type": "llama", "hidden_size": 8192, "intermediate_size": 28672,
            "num_hidden_layers": 80, "num_attention_heads": 64, "num_key_value_heads": 8,
            "vocab_size": 128256, "max_position_embeddings": 8192,
            "tie_word_embeddings": false, "torch_dtype": "bfloat16"}"#,
    },
    ModelPreset {
        name: "llama-3.1-405b",
        hf_ids: &[
            "meta-llama/Llama-3.1-405B",
            "meta-llama/Llama-3.1-405B-Instruct",
            "meta-llama/Meta-Llama-3.1-405B",
            "meta-llama/Meta-Llama-3.1-405B-Instruct",
        ],
        config: r#"{"model_type": "llama", "hidden_size": 16384, "intermediate_size": 53248,
            "num_hidden_layers": 126, "num_attention_heads": 128, "num_key_value_heads": 8,
            "vocab_size": 128256, "max_position_embeddings": 131072,
            "tie_word_embeddings": false, "torch_dtype": "bfloat16"}"#,
    },
    // max_position_embeddings: 32,768 is the native context the model card states (and
    // the Instruct config's value; the base config says 131,072 for YaRN use).
    ModelPreset {
        name: "qwen2.5-72b",
        hf_ids: &["Qwen/Qwen2.5-72B", "Qwen/Qwen2.5-72B-Instruct"],
        config: r#"{"model_type": "qwen2", "hidden_size": 8192, "intermediate_size": 29568,
            "num_hidden_layers": 80, "num_attention_heads": 64, "num_key_value_heads": 8,
            "vocab_size": 152064, "max_position_embeddings": 32768,
            "use_sliding_window": false,
            "tie_word_embeddings": false, "torch_dtype": "bfloat16"}"#,
    },
    ModelPreset {
        name: "mixtral-8x7b",
        hf_ids: &["mistralai/Mixtral-8x7B-v0.1", "mistralai/Mixtral-8x7B-Instruct-v0.1"],
        config: r#"{"model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336,
            "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
            "num_local_experts": 8, "num_experts_per_tok": 2, "sliding_window": null,
            "vocab_size": 32000, "max_position_embeddings": 32768,
            "tie_word_embeddings": false, "torch_dtype": "bfloat16"}"#,
    },
    ModelPreset {
        name: "llama-2-7b",
        hf_ids: &["meta-llama/Llama-2-7b-hf", "meta-llama/Llama-2-7b-chat-hf"],
        config: r#"{"model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008,
            "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
            "vocab_size": 32000, "max_position_embeddings": 4096,
            "tie_word_embeddings": false, "torch_dtype": "float16"}"#,
    },
    ModelPreset {
        name: "llama-2-70b",
        hf_ids: &["meta-llama/Llama-2-70b-hf", "meta-llama/Llama-2-70b-chat-hf"],
        config: r#"{"model_type": "llama", "hidden_size": 8192, "intermediate_size": 28672,
            "num_hidden_layers": 80, "num_attention_heads": 64, "num_key_value_heads": 8,
            "vocab_size": 32000, "max_position_embeddings": 4096,
            "tie_word_embeddings": false, "torch_dtype": "float16"}"#,
    },
    ModelPreset {
        name: "codellama-34b",
        hf_ids: &[
            "codellama/CodeLlama-34b-hf",
            "codellama/CodeLlama-34b-Instruct-hf",
            "codellama/CodeLlama-34b-Python-hf",
            "meta-llama/CodeLlama-34b-hf",
            "meta-llama/CodeLlama-34b-Instruct-hf",
        ],
        config: r#"{"model_type": "llama", "hidden_size": 8192, "intermediate_size": 22016,
            "num_hidden_layers": 48, "num_attention_heads": 64, "num_key_value_heads": 8,
            "vocab_size": 32000, "max_position_embeddings": 16384, "rope_theta": 1000000,
            "tie_word_embeddings": false, "torch_dtype": "bfloat16"}"#,
    },
    ModelPreset {
        name: "llama-3.1-8b",
        hf_ids: &[
            "meta-llama/Llama-3.1-8B",
            "meta-llama/Llama-3.1-8B-Instruct",
            "meta-llama/Meta-Llama-3.1-8B",
            "meta-llama/Meta-Llama-3.1-8B-Instruct",
        ],
        config: r#"{"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
            "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
            "head_dim": 128, "vocab_size": 128256, "max_position_embeddings": 131072,
            "tie_word_embeddings": false, "torch_dtype": "bfloat16"}"#,
    },
    ModelPreset {
        name: "llama-3.1-70b",
        hf_ids: &[
            "meta-llama/Llama-3.1-70B",
            "meta-llama/Llama-3.1-70B-Instruct",
            "meta-llama/Meta-Llama-3.1-70B",
            "meta-llama/Meta-Llama-3.1-70B-Instruct",
        ],
        config: r#"{"model_type": "llama", "hidden_size": 8192, "intermediate_size": 28672,
            "num_hidden_layers": 80, "num_attention_heads": 64, "num_key_value_heads": 8,
            "head_dim": 128, "vocab_size": 128256, "max_position_embeddings": 131072,
            "tie_word_embeddings": false, "torch_dtype": "bfloat16"}"#,
    },
    ModelPreset {
        name: "llama-3.3-70b",
        hf_ids: &["meta-llama/Llama-3.3-70B-Instruct"],
        config: r#"{"model_type": "llama", "hidden_size": 8192, "intermediate_size": 28672,
            "num_hidden_layers": 80, "num_attention_heads": 64, "num_key_value_heads": 8,
            "head_dim": 128, "vocab_size": 128256, "max_position_embeddings": 131072,
            "tie_word_embeddings": false, "torch_dtype": "bfloat16"}"#,
    },
    // The Instruct config (32,768 native context; the base config says 131,072).
    ModelPreset {
        name: "qwen2.5-7b",
        hf_ids: &["Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-7B"],
        config: r#"{"model_type": "qwen2", "hidden_size": 3584, "intermediate_size": 18944,
            "num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 4,
            "vocab_size": 152064, "max_position_embeddings": 32768,
            "use_sliding_window": false,
            "tie_word_embeddings": false, "torch_dtype": "bfloat16"}"#,
    },
    ModelPreset {
        name: "qwen3-14b",
        hf_ids: &["Qwen/Qwen3-14B", "Qwen/Qwen3-14B-Base"],
        config: r#"{"model_type": "qwen3", "hidden_size": 5120, "intermediate_size": 17408,
            "num_hidden_layers": 40, "num_attention_heads": 40, "num_key_value_heads": 8,
            "head_dim": 128, "attention_bias": false, "vocab_size": 151936,
            "max_position_embeddings": 40960, "use_sliding_window": false,
            "tie_word_embeddings": false, "torch_dtype": "bfloat16"}"#,
    },
    ModelPreset {
        name: "qwen3-32b",
        hf_ids: &["Qwen/Qwen3-32B"],
        config: r#"{"model_type": "qwen3", "hidden_size": 5120, "intermediate_size": 25600,
            "num_hidden_layers": 64, "num_attention_heads": 64, "num_key_value_heads": 8,
            "head_dim": 128, "attention_bias": false, "vocab_size": 151936,
            "max_position_embeddings": 40960, "use_sliding_window": false,
            "tie_word_embeddings": false, "torch_dtype": "bfloat16"}"#,
    },
    ModelPreset {
        name: "qwen3-30b-a3b",
        hf_ids: &["Qwen/Qwen3-30B-A3B", "Qwen/Qwen3-30B-A3B-Base"],
        config: r#"{"model_type": "qwen3_moe", "hidden_size": 2048, "intermediate_size": 6144,
            "moe_intermediate_size": 768, "num_experts": 128, "num_experts_per_tok": 8,
            "decoder_sparse_step": 1, "mlp_only_layers": [],
            "num_hidden_layers": 48, "num_attention_heads": 32, "num_key_value_heads": 4,
            "head_dim": 128, "attention_bias": false, "vocab_size": 151936,
            "max_position_embeddings": 40960, "use_sliding_window": false,
            "tie_word_embeddings": false, "torch_dtype": "bfloat16"}"#,
    },
    // The Instruct config's context (128k, as the model card states; the base config's
    // max_position_embeddings is larger than the context it was trained for).
    ModelPreset {
        name: "mistral-nemo-12b",
        hf_ids: &["mistralai/Mistral-Nemo-Instruct-2407", "mistralai/Mistral-Nemo-Base-2407"],
        config: r#"{"model_type": "mistral", "hidden_size": 5120, "intermediate_size": 14336,
            "num_hidden_layers": 40, "num_attention_heads": 32, "num_key_value_heads": 8,
            "head_dim": 128, "sliding_window": null, "vocab_size": 131072,
            "max_position_embeddings": 131072,
            "tie_word_embeddings": false, "torch_dtype": "bfloat16"}"#,
    },
    ModelPreset {
        name: "yi-34b",
        hf_ids: &["01-ai/Yi-34B", "01-ai/Yi-34B-Chat"],
        config: r#"{"model_type": "llama", "hidden_size": 7168, "intermediate_size": 20480,
            "num_hidden_layers": 60, "num_attention_heads": 56, "num_key_value_heads": 8,
            "vocab_size": 64000, "max_position_embeddings": 4096,
            "tie_word_embeddings": false, "torch_dtype": "bfloat16"}"#,
    },
    // The base config (vocabulary 32,000; the Instruct repository's is 32,768).
    ModelPreset {
        name: "mixtral-8x22b",
        hf_ids: &["mistralai/Mixtral-8x22B-v0.1", "mistralai/Mixtral-8x22B-Instruct-v0.1"],
        config: r#"{"model_type": "mixtral", "hidden_size": 6144, "intermediate_size": 16384,
            "num_hidden_layers": 56, "num_attention_heads": 48, "num_key_value_heads": 8,
            "num_local_experts": 8, "num_experts_per_tok": 2, "sliding_window": null,
            "vocab_size": 32000, "max_position_embeddings": 65536,
            "tie_word_embeddings": false, "torch_dtype": "bfloat16"}"#,
    },
    // The language model of the multimodal checkpoint (its text_config): 16 routed experts
    // plus a shared one on every layer, chunked attention (8,192 tokens) on the RoPE layers,
    // every 4th layer global; 10M-token context.
    ModelPreset {
        name: "llama-4-scout",
        hf_ids: &["meta-llama/Llama-4-Scout-17B-16E", "meta-llama/Llama-4-Scout-17B-16E-Instruct"],
        config: r#"{"model_type": "llama4", "tie_word_embeddings": false, "torch_dtype": "bfloat16",
            "text_config": {"model_type": "llama4_text", "hidden_size": 5120,
            "intermediate_size": 8192, "intermediate_size_mlp": 16384,
            "num_hidden_layers": 48, "num_attention_heads": 40, "num_key_value_heads": 8,
            "head_dim": 128, "attention_bias": false, "num_local_experts": 16,
            "num_experts_per_tok": 1, "interleave_moe_layer_step": 1,
            "attention_chunk_size": 8192, "no_rope_layers": [], "use_qk_norm": true,
            "vocab_size": 202048, "max_position_embeddings": 10485760}}"#,
    },
    // The FP8 release (its quantization_config: block-scaled E4M3, 128 × 128), as served.
    // num_nextn_predict_layers = 1: the MTP module the 685B figure includes (served only
    // with `serve_mtp`).
    ModelPreset {
        name: "deepseek-v3",
        hf_ids: &["deepseek-ai/DeepSeek-V3", "deepseek-ai/DeepSeek-V3-Base", "deepseek-ai/DeepSeek-V3-0324"],
        config: r#"{"model_type": "deepseek_v3", "hidden_size": 7168, "intermediate_size": 18432,
            "moe_intermediate_size": 2048, "num_hidden_layers": 61, "num_attention_heads": 128,
            "num_key_value_heads": 128, "n_routed_experts": 256, "n_shared_experts": 1,
            "num_experts_per_tok": 8, "first_k_dense_replace": 3, "moe_layer_freq": 1,
            "num_nextn_predict_layers": 1, "q_lora_rank": 1536, "kv_lora_rank": 512,
            "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
            "hidden_act": "silu", "attention_bias": false, "vocab_size": 129280,
            "max_position_embeddings": 163840,
            "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3",
                "quant_method": "fp8", "weight_block_size": [128, 128]},
            "tie_word_embeddings": false, "torch_dtype": "bfloat16"}"#,
    },
    // DeepSeek-V3's architecture (the same config keys and values).
    ModelPreset {
        name: "deepseek-r1",
        hf_ids: &["deepseek-ai/DeepSeek-R1", "deepseek-ai/DeepSeek-R1-0528", "deepseek-ai/DeepSeek-R1-Zero"],
        config: r#"{"model_type": "deepseek_v3", "hidden_size": 7168, "intermediate_size": 18432,
            "moe_intermediate_size": 2048, "num_hidden_layers": 61, "num_attention_heads": 128,
            "num_key_value_heads": 128, "n_routed_experts": 256, "n_shared_experts": 1,
            "num_experts_per_tok": 8, "first_k_dense_replace": 3, "moe_layer_freq": 1,
            "num_nextn_predict_layers": 1, "q_lora_rank": 1536, "kv_lora_rank": 512,
            "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
            "hidden_act": "silu", "attention_bias": false, "vocab_size": 129280,
            "max_position_embeddings": 163840,
            "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3",
                "quant_method": "fp8", "weight_block_size": [128, 128]},
            "tie_word_embeddings": false, "torch_dtype": "bfloat16"}"#,
    },
    // The July 2025 release (128k context; Kimi-K2-Instruct-0905's config says 262,144).
    // DeepSeek-V3's architecture with 384 experts, 64 heads, one dense layer, no MTP module.
    ModelPreset {
        name: "kimi-k2",
        hf_ids: &["moonshotai/Kimi-K2-Instruct", "moonshotai/Kimi-K2-Base"],
        config: r#"{"model_type": "kimi_k2", "hidden_size": 7168, "intermediate_size": 18432,
            "moe_intermediate_size": 2048, "num_hidden_layers": 61, "num_attention_heads": 64,
            "num_key_value_heads": 64, "n_routed_experts": 384, "n_shared_experts": 1,
            "num_experts_per_tok": 8, "first_k_dense_replace": 1, "moe_layer_freq": 1,
            "num_nextn_predict_layers": 0, "q_lora_rank": 1536, "kv_lora_rank": 512,
            "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
            "hidden_act": "silu", "attention_bias": false, "vocab_size": 163840,
            "max_position_embeddings": 131072,
            "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3",
                "quant_method": "fp8", "weight_block_size": [128, 128]},
            "tie_word_embeddings": false, "torch_dtype": "bfloat16"}"#,
    },
    ModelPreset {
        name: "qwen3-235b-a22b",
        hf_ids: &["Qwen/Qwen3-235B-A22B"],
        config: r#"{"model_type": "qwen3_moe", "hidden_size": 4096, "intermediate_size": 12288,
            "moe_intermediate_size": 1536, "num_experts": 128, "num_experts_per_tok": 8,
            "decoder_sparse_step": 1, "mlp_only_layers": [],
            "num_hidden_layers": 94, "num_attention_heads": 64, "num_key_value_heads": 4,
            "head_dim": 128, "attention_bias": false, "vocab_size": 151936,
            "max_position_embeddings": 40960, "use_sliding_window": false,
            "tie_word_embeddings": false, "torch_dtype": "bfloat16"}"#,
    },
    // MXFP4 experts (its quantization_config), attention sinks, a 128-token window on the
    // even layers (its layer_types).
    ModelPreset {
        name: "gpt-oss-120b",
        hf_ids: &["openai/gpt-oss-120b"],
        config: r#"{"model_type": "gpt_oss", "hidden_size": 2880, "intermediate_size": 2880,
            "num_hidden_layers": 36, "num_attention_heads": 64, "num_key_value_heads": 8,
            "head_dim": 64, "attention_bias": true, "num_local_experts": 128,
            "num_experts_per_tok": 4, "experts_per_token": 4, "sliding_window": 128,
            "layer_types": [
            "sliding_attention", "full_attention", "sliding_attention", "full_attention",
            "sliding_attention", "full_attention", "sliding_attention", "full_attention",
            "sliding_attention", "full_attention", "sliding_attention", "full_attention",
            "sliding_attention", "full_attention", "sliding_attention", "full_attention",
            "sliding_attention", "full_attention", "sliding_attention", "full_attention",
            "sliding_attention", "full_attention", "sliding_attention", "full_attention",
            "sliding_attention", "full_attention", "sliding_attention", "full_attention",
            "sliding_attention", "full_attention", "sliding_attention", "full_attention",
            "sliding_attention", "full_attention", "sliding_attention", "full_attention"],
            "hidden_act": "silu", "vocab_size": 201088, "max_position_embeddings": 131072,
            "quantization_config": {"modules_to_not_convert": ["model.layers.*.self_attn",
                "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"],
                "quant_method": "mxfp4"},
            "tie_word_embeddings": false, "torch_dtype": "bfloat16"}"#,
    },
    ModelPreset {
        name: "gpt-oss-20b",
        hf_ids: &["openai/gpt-oss-20b"],
        config: r#"{"model_type": "gpt_oss", "hidden_size": 2880, "intermediate_size": 2880,
            "num_hidden_layers": 24, "num_attention_heads": 64, "num_key_value_heads": 8,
            "head_dim": 64, "attention_bias": true, "num_local_experts": 32,
            "num_experts_per_tok": 4, "experts_per_token": 4, "sliding_window": 128,
            "layer_types": [
            "sliding_attention", "full_attention", "sliding_attention", "full_attention",
            "sliding_attention", "full_attention", "sliding_attention", "full_attention",
            "sliding_attention", "full_attention", "sliding_attention", "full_attention",
            "sliding_attention", "full_attention", "sliding_attention", "full_attention",
            "sliding_attention", "full_attention", "sliding_attention", "full_attention",
            "sliding_attention", "full_attention", "sliding_attention", "full_attention"],
            "hidden_act": "silu", "vocab_size": 201088, "max_position_embeddings": 131072,
            "quantization_config": {"modules_to_not_convert": ["model.layers.*.self_attn",
                "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"],
                "quant_method": "mxfp4"},
            "tie_word_embeddings": false, "torch_dtype": "bfloat16"}"#,
    },
    // The language model of the multimodal checkpoint (its text_config): 128 routed experts
    // and a shared one on every other layer (interleave_moe_layer_step = 2), a dense MLP of
    // intermediate_size_mlp on the others; chunked attention on the RoPE layers; no q/k norm.
    ModelPreset {
        name: "llama-4-maverick",
        hf_ids: &["meta-llama/Llama-4-Maverick-17B-128E", "meta-llama/Llama-4-Maverick-17B-128E-Instruct"],
        config: r#"{"model_type": "llama4", "tie_word_embeddings": false, "torch_dtype": "bfloat16",
            "text_config": {"model_type": "llama4_text", "hidden_size": 5120,
            "intermediate_size": 8192, "intermediate_size_mlp": 16384,
            "num_hidden_layers": 48, "num_attention_heads": 40, "num_key_value_heads": 8,
            "head_dim": 128, "attention_bias": false, "num_local_experts": 128,
            "num_experts_per_tok": 1, "interleave_moe_layer_step": 2,
            "attention_chunk_size": 8192, "use_qk_norm": false,
            "vocab_size": 202048, "max_position_embeddings": 1048576}}"#,
    },
    // The small member of the Llama 3 tokenizer family: the usual draft model of
    // speculative decoding for Llama-3.1-8B/70B (`scheduler.speculative.draft_model`).
    ModelPreset {
        name: "llama-3.2-1b",
        hf_ids: &["meta-llama/Llama-3.2-1B", "meta-llama/Llama-3.2-1B-Instruct"],
        config: r#"{"model_type": "llama", "hidden_size": 2048, "intermediate_size": 8192,
            "num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8,
            "head_dim": 64, "vocab_size": 128256, "max_position_embeddings": 131072,
            "tie_word_embeddings": true, "torch_dtype": "bfloat16"}"#,
    },
];

/// The presets' models, parsed once.
fn parsed() -> &'static [Model] {
    static MODELS: OnceLock<Vec<Model>> = OnceLock::new();
    MODELS.get_or_init(|| {
        MODEL_PRESETS
            .iter()
            .map(|p| {
                let value: serde_json::Value = serde_json::from_str(p.config).expect("preset configs are valid JSON (tested)");
                let mut m = model_from_hf_config(&value).expect("preset configs load (tested)");
                m.name = p.name.to_string();
                m
            })
            .collect()
    })
}

/// The model presets, in catalog order.
pub fn model_presets() -> Vec<Model> {
    parsed().to_vec()
}

/// Names of the model presets, in catalog order.
pub fn model_preset_names() -> Vec<&'static str> {
    MODEL_PRESETS.iter().map(|p| p.name).collect()
}

/// The preset called `name` or with `name` among its Hugging Face ids (both
/// case-insensitive).
pub fn model_preset(name: &str) -> Option<Model> {
    let i = MODEL_PRESETS.iter().position(|p| {
        p.name.eq_ignore_ascii_case(name) || p.hf_ids.iter().any(|id| id.eq_ignore_ascii_case(name))
    })?;
    parsed().get(i).cloned()
}
