//! Hugging Face `config.json` → [`Model`].
//!
//! The keys read are those `transformers` defines for each family (`LlamaConfig`,
//! `MistralConfig`, `MixtralConfig`, `Qwen2Config`, `Qwen3Config`, `Qwen3MoeConfig`,
//! `GemmaConfig`, `Gemma2Config`, `Gemma3TextConfig`, `Llama4TextConfig`,
//! `DeepseekV2Config`, `DeepseekV3Config`, `GptOssConfig`), with their defaults where a key
//! may be absent; every other key is ignored. Kimi-K2's configs name their type `kimi_k2`
//! and are DeepSeek-V3's architecture (`DeepseekV3ForCausalLM`, the same keys). A
//! `quantization_config` whose `quant_method` is `fp8` (DeepSeek-V3, Kimi-K2: block-scaled
//! E4M3) or `mxfp4` (gpt-oss) sets the experts' storage format; other methods are ignored
//! (the scenario's precision prices every weight). Multimodal wrappers
//! (`gemma3`, `llama4`) keep the language model under `text_config`, which is read in their
//! place (the vision tower is not modelled). The core reads no files: the front ends pass
//! the parsed JSON. The model presets are written as the same fields and go through this
//! loader too.
//!
//! Errors name the key (`num_attention_heads`, `text_config.sliding_window`,
//! `layer_types[3]`); the caller prefixes `model.hf_config`.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::model::{Activation, LocalAttention, LocalKind, Mla, Model, WeightFormat, MAX_COUNT};
use crate::error::{check, Result, SimError};

/// The `model_type`s understood, in the order error messages list them.
pub const MODEL_TYPES: [&str; 16] = [
    "llama",
    "mistral",
    "mixtral",
    "qwen2",
    "qwen3",
    "qwen3_moe",
    "gemma",
    "gemma2",
    "gemma3",
    "gemma3_text",
    "llama4",
    "llama4_text",
    "deepseek_v2",
    "deepseek_v3",
    "kimi_k2",
    "gpt_oss",
];

/// `Gemma3TextConfig`'s defaults for the keys the published Gemma 3 multimodal configs
/// (`google/gemma-3-4b-it`, …) leave out of their `text_config`.
const GEMMA3_DEFAULTS: [(&str, u32); 6] = [
    ("num_attention_heads", 8),
    ("num_key_value_heads", 4),
    ("head_dim", 256),
    ("vocab_size", 262_208),
    ("max_position_embeddings", 131_072),
    ("sliding_window", 4096),
];

/// Model families, as `transformers` names their configs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    /// Llama 1/2/3, CodeLlama, Yi (model_type `llama`).
    Llama,
    Mistral,
    Mixtral,
    /// Qwen2 and Qwen2.5.
    Qwen2,
    Qwen3,
    Qwen3Moe,
    Gemma,
    Gemma2,
    Gemma3,
    Llama4,
    /// DeepSeek-V2 and V2-Lite: MLA, shared and routed experts, dense first layers.
    DeepseekV2,
    /// DeepSeek-V3, R1 and Kimi-K2 (model_type `kimi_k2`): V2's layout with the MTP module.
    DeepseekV3,
    /// gpt-oss: attention sinks, every other layer a 128-token window, MXFP4 experts.
    GptOss,
}

impl Family {
    fn of(model_type: &str) -> Option<Family> {
        Some(match model_type {
            "llama" => Family::Llama,
            "mistral" => Family::Mistral,
            "mixtral" => Family::Mixtral,
            "qwen2" => Family::Qwen2,
            "qwen3" => Family::Qwen3,
            "qwen3_moe" => Family::Qwen3Moe,
            "gemma" => Family::Gemma,
            "gemma2" => Family::Gemma2,
            "gemma3" | "gemma3_text" => Family::Gemma3,
            "llama4" | "llama4_text" => Family::Llama4,
            "deepseek_v2" => Family::DeepseekV2,
            "deepseek_v3" | "kimi_k2" => Family::DeepseekV3,
            "gpt_oss" => Family::GptOss,
            _ => return None,
        })
    }

    fn is_gemma(self) -> bool {
        matches!(self, Family::Gemma | Family::Gemma2 | Family::Gemma3)
    }

    fn is_deepseek(self) -> bool {
        matches!(self, Family::DeepseekV2 | Family::DeepseekV3)
    }
}

/// A config being read: the language model's keys (`text`, under `prefix`) and, for
/// multimodal wrappers, the outer keys (`outer`) that may hold `tie_word_embeddings` and
/// `torch_dtype`.
struct Cfg<'a> {
    text: &'a Map<String, Value>,
    outer: &'a Map<String, Value>,
    prefix: &'static str,
    /// Values `transformers` fills in for keys the family's published configs omit.
    defaults: &'static [(&'static str, u32)],
}

impl Cfg<'_> {
    fn path(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }

    /// The value of `key`, `None` when absent or `null`.
    fn get(&self, key: &str) -> Option<&Value> {
        self.text.get(key).filter(|v| !v.is_null())
    }

    /// `key` in the language model's keys, else the wrapper's.
    fn get_either(&self, key: &str) -> Option<(String, &Value)> {
        match self.get(key) {
            Some(v) => Some((self.path(key), v)),
            None => self.outer.get(key).filter(|v| !v.is_null()).map(|v| (key.to_string(), v)),
        }
    }

    /// An integer `key` in `lo..=u32::MAX`; `None` when absent (and without a default).
    fn uint(&self, key: &str, lo: u32) -> Result<Option<u32>> {
        match self.get(key) {
            None => Ok(self.defaults.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)),
            Some(v) => as_uint(&self.path(key), v, lo).map(Some),
        }
    }

    /// A size (an integer >= 1) that must be present.
    fn size(&self, key: &str) -> Result<u32> {
        self.uint(key, 1)?.ok_or_else(|| SimError::config(self.path(key), "is required"))
    }

    fn boolean(&self, key: &str) -> Result<Option<bool>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(v) => Err(SimError::config(self.path(key), format!("must be true or false (got {v})"))),
        }
    }

    /// A list of integers in `0..len` (layer indices).
    fn layer_list(&self, key: &str, len: u32) -> Result<Option<Vec<u32>>> {
        let Some(v) = self.get(key) else { return Ok(None) };
        let Value::Array(items) = v else {
            return Err(SimError::config(self.path(key), format!("must be a list of layer indices (got {v})")));
        };
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let p = format!("{}[{i}]", self.path(key));
            let x = as_uint(&p, item, 0)?;
            if x >= len {
                return Err(SimError::config(p, format!("must be a layer index < num_hidden_layers = {len} (got {x})")));
            }
            out.push(x);
        }
        Ok(Some(out))
    }
}

fn as_uint(path: &str, v: &Value, lo: u32) -> Result<u32> {
    let bad = || SimError::config(path, format!("must be an integer in {lo}..={} (got {v})", u32::MAX));
    let n = v.as_u64().ok_or_else(bad)?;
    let n = u32::try_from(n).map_err(|_| bad())?;
    if n < lo {
        return Err(bad());
    }
    Ok(n)
}

/// Parse a Hugging Face `config.json` (already parsed as JSON) into a [`Model`] named after
/// its `_name_or_path` (else its `model_type`). Error paths are relative to the config
/// (`num_attention_heads`); callers prefix them.
pub fn model_from_hf_config(config: &Value) -> Result<Model> {
    let Value::Object(top) = config else {
        return Err(SimError::config("", format!("must be a config.json object (got {})", kind(config))));
    };
    let (text, prefix) = match top.get("text_config") {
        Some(Value::Object(t)) => (t, "text_config."),
        Some(v) if !v.is_null() => {
            return Err(SimError::config("text_config", format!("must be an object (got {})", kind(v))));
        }
        _ => (top, ""),
    };
    let cfg = Cfg { text, outer: top, prefix, defaults: &[] };
    // The language model's own type when a wrapper names it, else the outer one.
    let (type_path, model_type) = match cfg.get("model_type").or_else(|| top.get("model_type")) {
        Some(Value::String(s)) => {
            let p = if cfg.get("model_type").is_some() { cfg.path("model_type") } else { "model_type".into() };
            (p, s.clone())
        }
        Some(v) => return Err(SimError::config("model_type", format!("must be a string (got {v})"))),
        None => return Err(SimError::config("model_type", format!("is required (one of {})", MODEL_TYPES.join(", ")))),
    };
    let family = Family::of(&model_type)
        .ok_or_else(|| check::unknown_name(&type_path, "model_type", &model_type, &MODEL_TYPES))?;
    // Gemma 3's multimodal configs list only what differs from Gemma3TextConfig's defaults.
    let cfg = if family == Family::Gemma3 { Cfg { defaults: &GEMMA3_DEFAULTS, ..cfg } } else { cfg };
    let mut keys = KeyMap::default();
    let model = read(&cfg, family, &model_type, &mut keys)?;
    // Cross-field rules, reported at the config key the offending field came from.
    model.validate().map_err(|e| keys.translate(e))?;
    Ok(model)
}

/// Which config key each model field came from, to report [`Model::validate`]'s errors
/// at the key the user wrote.
#[derive(Default)]
struct KeyMap(BTreeMap<&'static str, String>);

impl KeyMap {
    fn set(&mut self, field: &'static str, key: String) {
        self.0.insert(field, key);
    }

    fn translate(&self, e: SimError) -> SimError {
        match e {
            SimError::Config { path, message } => {
                let key = self.0.get(path.as_str()).cloned().unwrap_or(path);
                SimError::Config { path: key, message }
            }
            other => other,
        }
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// The fields of a [`Model`] from a config: its sizes ([`dims`]), its MLP and experts
/// ([`mlp`]), then attention's extras (bias, bounded windows, q/k norms), the activation,
/// tied embeddings and the dtype check, each in the order their errors are reported.
fn read(cfg: &Cfg, family: Family, model_type: &str, keys: &mut KeyMap) -> Result<Model> {
    for (field, key) in [
        ("layers", "num_hidden_layers"),
        ("hidden", "hidden_size"),
        ("heads", "num_attention_heads"),
        ("kv_heads", "num_key_value_heads"),
        ("head_dim", "head_dim"),
        ("vocab", "vocab_size"),
        ("max_context", "max_position_embeddings"),
        ("experts_per_token", "num_experts_per_tok"),
    ] {
        keys.set(field, cfg.path(key));
    }
    let mla = if family.is_deepseek() { Some(mla(cfg, keys)?) } else { None };
    let Dims { layers, hidden, heads, kv_heads, head_dim, vocab, max_context } = dims(cfg, keys, mla.map(|m| m.qk_head_dim()))?;
    let Mlp { intermediate, experts, experts_per_token, moe_layers, dense_intermediate, shared_expert_intermediate } =
        mlp(cfg, family, layers, keys)?;

    let qkv_bias = match family {
        // Qwen2's q, k and v projections always carry a bias.
        Family::Qwen2 => true,
        Family::Mistral | Family::Mixtral => false,
        // transformers' GptOssConfig: attention_bias defaults to true.
        Family::GptOss => cfg.boolean("attention_bias")?.unwrap_or(true),
        Family::DeepseekV2 | Family::DeepseekV3 => {
            if cfg.boolean("attention_bias")?.unwrap_or(false) {
                return Err(SimError::config(cfg.path("attention_bias"), "biases on MLA's projections are not supported (got true)"));
            }
            false
        }
        _ => cfg.boolean("attention_bias")?.unwrap_or(false),
    };
    let local_attention = local_attention(cfg, family, layers, keys)?;
    let qk_norm_layers = match family {
        Family::Qwen3 | Family::Qwen3Moe | Family::Gemma3 => layers,
        // Llama 4 normalises q and k (an L2 norm) on its RoPE layers only.
        Family::Llama4 if cfg.boolean("use_qk_norm")?.unwrap_or(true) => rope_layers(cfg, layers)?,
        _ => 0,
    };
    let activation = activation(cfg, family)?;
    let tied_embeddings = match cfg.get_either("tie_word_embeddings") {
        Some((_, Value::Bool(b))) => *b,
        Some((p, v)) => return Err(SimError::config(p, format!("must be true or false (got {v})"))),
        // transformers' defaults: Gemma ties, the others do not.
        None => family.is_gemma(),
    };
    check_dtype(cfg)?;
    let expert_format = if experts > 1 { expert_format(cfg, keys)? } else { None };
    let mtp_layers = if family.is_deepseek() {
        keys.set("mtp_layers", cfg.path("num_nextn_predict_layers"));
        cfg.uint("num_nextn_predict_layers", 0)?.unwrap_or(0)
    } else {
        0
    };
    let name = match cfg.get_either("_name_or_path") {
        Some((_, Value::String(s))) if !s.trim().is_empty() => s.clone(),
        _ => model_type.to_string(),
    };
    Ok(Model {
        name,
        layers,
        hidden,
        heads,
        kv_heads,
        head_dim,
        intermediate,
        vocab,
        max_context,
        experts,
        experts_per_token,
        tied_embeddings,
        moe_layers,
        dense_intermediate,
        shared_expert_intermediate,
        qkv_bias,
        qk_norm_layers,
        post_norms: matches!(family, Family::Gemma2 | Family::Gemma3),
        activation,
        local_attention,
        mla,
        attention_sinks: family == Family::GptOss,
        expert_format,
        mtp_layers,
        serve_mtp: false,
    })
}

/// MLA's widths (`DeepseekV2Config`'s keys). `q_lora_rank` = null means no query
/// compression (DeepSeek-V2-Lite); every key must be present, as the published configs have
/// them.
fn mla(cfg: &Cfg, keys: &mut KeyMap) -> Result<Mla> {
    for (field, key) in [
        ("mla.q_lora_rank", "q_lora_rank"),
        ("mla.kv_lora_rank", "kv_lora_rank"),
        ("mla.qk_nope_head_dim", "qk_nope_head_dim"),
        ("mla.qk_rope_head_dim", "qk_rope_head_dim"),
        ("mla.v_head_dim", "v_head_dim"),
        ("head_dim", "qk_nope_head_dim"),
    ] {
        keys.set(field, cfg.path(key));
    }
    let q_lora_rank = match cfg.text.get("q_lora_rank") {
        None => return Err(SimError::config(cfg.path("q_lora_rank"), "is required (null for queries projected without compression)")),
        Some(Value::Null) => 0,
        Some(v) => as_uint(&cfg.path("q_lora_rank"), v, 1)?,
    };
    let uint0 = |key: &str| -> Result<u32> { cfg.uint(key, 0)?.ok_or_else(|| SimError::config(cfg.path(key), "is required")) };
    Ok(Mla {
        q_lora_rank,
        kv_lora_rank: cfg.size("kv_lora_rank")?,
        qk_nope_head_dim: uint0("qk_nope_head_dim")?,
        qk_rope_head_dim: uint0("qk_rope_head_dim")?,
        v_head_dim: cfg.size("v_head_dim")?,
    })
}

/// The experts' storage format a `quantization_config` sets: `fp8` (block-scaled E4M3 with
/// `weight_block_size`, DeepSeek-V3 and Kimi-K2, every linear layer's weights) or `mxfp4`
/// (gpt-oss, the experts only: its `modules_to_not_convert` keeps attention, router,
/// embedding and head in BF16). Another `quant_method` is not read (none).
fn expert_format(cfg: &Cfg, keys: &mut KeyMap) -> Result<Option<WeightFormat>> {
    let Some((path, q)) = cfg.get_either("quantization_config") else { return Ok(None) };
    keys.set("expert_format", format!("{path}.quant_method"));
    let Value::Object(q) = q else {
        return Err(SimError::config(path, format!("must be an object (got {})", kind(q))));
    };
    let method = match q.get("quant_method") {
        Some(Value::String(s)) => s.as_str(),
        Some(v) => return Err(SimError::config(format!("{path}.quant_method"), format!("must be a string (got {v})"))),
        None => return Err(SimError::config(format!("{path}.quant_method"), "is required")),
    };
    Ok(match method {
        "fp8" => {
            if let Some(b) = q.get("weight_block_size").filter(|v| !v.is_null()) {
                let p = format!("{path}.weight_block_size");
                let ok = matches!(b, Value::Array(d) if d.len() == 2 && d.iter().all(|x| x.as_u64().is_some_and(|n| (1..=u64::from(u32::MAX)).contains(&n))));
                if !ok {
                    return Err(SimError::config(p, format!("must be two block sizes >= 1, [rows, columns] (got {b})")));
                }
            }
            Some(WeightFormat::Fp8)
        }
        "mxfp4" => Some(WeightFormat::Mxfp4),
        _ => None,
    })
}

/// A model's sizes: layers, widths, heads and the vocabulary and context.
struct Dims {
    layers: u32,
    hidden: u32,
    heads: u32,
    kv_heads: u32,
    head_dim: u32,
    vocab: u32,
    max_context: u32,
}

/// The layer count (bounded), hidden size, attention heads (query, key/value, their width:
/// `mla_head_dim`, MLA's q/k head width, when the model has MLA), vocabulary and context
/// length.
fn dims(cfg: &Cfg, keys: &mut KeyMap, mla_head_dim: Option<u32>) -> Result<Dims> {
    let layers = cfg.size("num_hidden_layers")?;
    // Bounded before any per-layer rule walks the layers.
    if layers > MAX_COUNT {
        return Err(SimError::config(cfg.path("num_hidden_layers"), format!("must be <= {MAX_COUNT} (got {layers})")));
    }
    let hidden = cfg.size("hidden_size")?;
    let heads = cfg.size("num_attention_heads")?;
    // transformers: a missing num_key_value_heads means multi-head attention.
    let kv_heads = match cfg.uint("num_key_value_heads", 1)? {
        Some(n) => n,
        None => {
            keys.set("kv_heads", cfg.path("num_attention_heads"));
            heads
        }
    };
    if heads % kv_heads != 0 {
        return Err(SimError::config(
            cfg.path("num_key_value_heads"),
            format!("must divide num_attention_heads ({heads}) (got {kv_heads})"),
        ));
    }
    let head_dim = match mla_head_dim {
        Some(d) => Ok(Some(d)),
        None => cfg.uint("head_dim", 1),
    };
    let head_dim = match head_dim? {
        Some(d) => d,
        None if hidden % heads == 0 => hidden / heads,
        None => {
            return Err(SimError::config(
                cfg.path("num_attention_heads"),
                format!("must divide hidden_size ({hidden}) when head_dim is not given (got {heads})"),
            ))
        }
    };
    let vocab = cfg.size("vocab_size")?;
    let max_context = cfg.size("max_position_embeddings")?;
    Ok(Dims { layers, hidden, heads, kv_heads, head_dim, vocab, max_context })
}

/// A model's MLP widths and experts.
struct Mlp {
    intermediate: u32,
    experts: u32,
    experts_per_token: u32,
    moe_layers: u32,
    dense_intermediate: u32,
    shared_expert_intermediate: u32,
}

/// MLP widths and experts, by the family's keys: the routed experts' width, the dense
/// layers' width where it differs, and the shared experts (Llama 4's one; DeepSeek's
/// `n_shared_experts`, which vLLM runs as one MLP `n_shared_experts × moe_intermediate_size`
/// wide).
fn mlp(cfg: &Cfg, family: Family, layers: u32, keys: &mut KeyMap) -> Result<Mlp> {
    let (experts_key, expert_width_key, dense_width_key) = match family {
        Family::Mixtral | Family::Llama4 | Family::GptOss => ("num_local_experts", "intermediate_size", "intermediate_size_mlp"),
        Family::Qwen3Moe => ("num_experts", "moe_intermediate_size", "intermediate_size"),
        Family::DeepseekV2 | Family::DeepseekV3 => ("n_routed_experts", "moe_intermediate_size", "intermediate_size"),
        _ => ("", "intermediate_size", "intermediate_size"),
    };
    keys.set("intermediate", cfg.path(expert_width_key));
    keys.set("dense_intermediate", cfg.path(dense_width_key));
    if !experts_key.is_empty() {
        keys.set("experts", cfg.path(experts_key));
        keys.set("moe_layers", cfg.path(experts_key));
    }
    let intermediate = cfg.size(expert_width_key)?;
    let (experts, experts_per_token, moe_layers) = if experts_key.is_empty() {
        (1, 1, 0)
    } else {
        let experts = cfg.size(experts_key)?;
        let top_k = match family {
            Family::GptOss => gpt_oss_top_k(cfg, keys)?,
            _ => cfg.size("num_experts_per_tok")?,
        };
        (experts, top_k, moe_layer_count(cfg, family, layers, keys)?)
    };
    let dense_intermediate = if moe_layers < layers && dense_width_key != expert_width_key {
        cfg.size(dense_width_key)?
    } else {
        intermediate
    };
    let shared_expert_intermediate = match family {
        // Llama 4: one shared expert as wide as a routed one.
        Family::Llama4 if moe_layers > 0 => intermediate,
        Family::DeepseekV2 | Family::DeepseekV3 if moe_layers > 0 => {
            keys.set("shared_expert_intermediate", cfg.path("n_shared_experts"));
            let shared = cfg.uint("n_shared_experts", 0)?.unwrap_or(0);
            shared.checked_mul(intermediate).ok_or_else(|| {
                SimError::config(cfg.path("n_shared_experts"), format!("× moe_intermediate_size must fit in 32 bits (got {shared})"))
            })?
        }
        _ => 0,
    };
    Ok(Mlp { intermediate, experts, experts_per_token, moe_layers, dense_intermediate, shared_expert_intermediate })
}

/// gpt-oss's top-k: `num_experts_per_tok` (`GptOssConfig`'s key), else `experts_per_token`
/// (the name its published configs also carry); both, they must agree.
fn gpt_oss_top_k(cfg: &Cfg, keys: &mut KeyMap) -> Result<u32> {
    match (cfg.uint("num_experts_per_tok", 1)?, cfg.uint("experts_per_token", 1)?) {
        (Some(a), Some(b)) if a != b => Err(SimError::config(
            cfg.path("experts_per_token"),
            format!("must equal num_experts_per_tok ({a}) (got {b})"),
        )),
        (Some(a), _) => Ok(a),
        (None, Some(b)) => {
            keys.set("experts_per_token", cfg.path("experts_per_token"));
            Ok(b)
        }
        (None, None) => Err(SimError::config(cfg.path("num_experts_per_tok"), "is required (or experts_per_token)")),
    }
}

/// How many layers of a mixture-of-experts model route to experts: Qwen3-MoE's every
/// `decoder_sparse_step`-th layer not in `mlp_only_layers`, Llama 4's `moe_layers` (or every
/// `interleave_moe_layer_step`-th), DeepSeek's from `first_k_dense_replace` on (every
/// `moe_layer_freq`-th), every layer otherwise.
fn moe_layer_count(cfg: &Cfg, family: Family, layers: u32, keys: &mut KeyMap) -> Result<u32> {
    Ok(match family {
        Family::Qwen3Moe => {
            keys.set("moe_layers", cfg.path("decoder_sparse_step"));
            let step = cfg.uint("decoder_sparse_step", 1)?.unwrap_or(1);
            let dense_only = cfg.layer_list("mlp_only_layers", layers)?.unwrap_or_default();
            (0..layers).filter(|i| !dense_only.contains(i) && (i + 1) % step == 0).count() as u32
        }
        // DeepSeek (vLLM's and transformers' DeepseekV2DecoderLayer): layer i routes to
        // experts when i >= first_k_dense_replace and i % moe_layer_freq == 0.
        Family::DeepseekV2 | Family::DeepseekV3 => {
            keys.set("moe_layers", cfg.path("first_k_dense_replace"));
            let first = cfg.uint("first_k_dense_replace", 0)?.unwrap_or(0);
            let freq = cfg.uint("moe_layer_freq", 1)?.unwrap_or(1);
            (first..layers).filter(|i| i % freq == 0).count() as u32
        }
        Family::Llama4 => match cfg.layer_list("moe_layers", layers)? {
            Some(list) => {
                keys.set("moe_layers", cfg.path("moe_layers"));
                let mut list = list;
                list.sort_unstable();
                list.dedup();
                list.len() as u32
            }
            None => {
                keys.set("moe_layers", cfg.path("interleave_moe_layer_step"));
                // transformers: moe_layers = range(step - 1, layers, step).
                layers / cfg.uint("interleave_moe_layer_step", 1)?.unwrap_or(1)
            }
        },
        _ => layers,
    })
}

/// Llama 4's layers with RoPE: `no_rope_layers[i] == 1`, or by default all but every
/// `no_rope_layer_interval`-th (4) layer.
fn rope_layers(cfg: &Cfg, layers: u32) -> Result<u32> {
    match cfg.get("no_rope_layers") {
        Some(Value::Array(flags)) if !flags.is_empty() => {
            let path = cfg.path("no_rope_layers");
            if flags.len() != layers as usize {
                return Err(SimError::config(
                    path,
                    format!("must have one entry per layer ({layers}) (got {})", flags.len()),
                ));
            }
            let mut rope = 0;
            for (i, f) in flags.iter().enumerate() {
                match as_uint(&format!("{path}[{i}]"), f, 0)? {
                    0 => {}
                    1 => rope += 1,
                    x => return Err(SimError::config(format!("{path}[{i}]"), format!("must be 0 or 1 (got {x})"))),
                }
            }
            Ok(rope)
        }
        Some(Value::Array(_)) | None => {
            let interval = cfg.uint("no_rope_layer_interval", 1)?.unwrap_or(4);
            Ok(layers - layers / interval)
        }
        Some(v) => Err(SimError::config(cfg.path("no_rope_layers"), format!("must be a list of 0/1 per layer (got {v})"))),
    }
}

/// The layers with bounded attention and their window, by the family's rule or, when the
/// config lists them, its `layer_types`.
fn local_attention(cfg: &Cfg, family: Family, layers: u32, keys: &mut KeyMap) -> Result<Option<LocalAttention>> {
    let sliding = |count: u32, keys: &mut KeyMap| -> Result<Option<LocalAttention>> {
        keys.set("local_attention.tokens", cfg.path("sliding_window"));
        if count == 0 {
            return Ok(None);
        }
        let tokens = cfg.size("sliding_window")?;
        Ok(Some(LocalAttention { kind: LocalKind::Sliding, tokens, layers: count }))
    };
    if let Some(v) = cfg.get("layer_types") {
        let path = cfg.path("layer_types");
        let Value::Array(types) = v else {
            return Err(SimError::config(path, format!("must be a list of layer types (got {v})")));
        };
        if types.len() != layers as usize {
            return Err(SimError::config(path, format!("must have one entry per layer ({layers}) (got {})", types.len())));
        }
        let (mut slide, mut chunk) = (0u32, 0u32);
        for (i, t) in types.iter().enumerate() {
            match t.as_str() {
                Some("full_attention") => {}
                Some("sliding_attention") => slide += 1,
                Some("chunked_attention") => chunk += 1,
                _ => {
                    return Err(SimError::config(
                        format!("{path}[{i}]"),
                        format!("must be full_attention, sliding_attention or chunked_attention (got {t})"),
                    ))
                }
            }
        }
        if slide > 0 && chunk > 0 {
            return Err(SimError::config(path, "mixes sliding and chunked layers: not supported"));
        }
        if chunk > 0 {
            keys.set("local_attention.tokens", cfg.path("attention_chunk_size"));
            let tokens = cfg.size("attention_chunk_size")?;
            return Ok(Some(LocalAttention { kind: LocalKind::Chunked, tokens, layers: chunk }));
        }
        return sliding(slide, keys);
    }
    match family {
        Family::Mistral | Family::Mixtral => {
            if cfg.get("sliding_window").is_some() {
                sliding(layers, keys)
            } else {
                Ok(None)
            }
        }
        Family::Qwen2 | Family::Qwen3 | Family::Qwen3Moe => {
            if !cfg.boolean("use_sliding_window")?.unwrap_or(false) {
                return Ok(None);
            }
            // transformers: layers from max_window_layers on slide (default 28).
            let from = cfg.uint("max_window_layers", 0)?.unwrap_or(28).min(layers);
            sliding(layers - from, keys)
        }
        // Gemma 2: the even layers slide. gpt-oss likewise (GptOssConfig's default
        // layer_types: sliding, full, sliding, …).
        Family::Gemma2 | Family::GptOss => sliding(layers.div_ceil(2), keys),
        // Gemma 3: all but every sliding_window_pattern-th (6) layer slide.
        Family::Gemma3 => {
            let pattern = cfg.uint("sliding_window_pattern", 1)?.unwrap_or(6);
            sliding(layers - layers / pattern, keys)
        }
        Family::Llama4 => match cfg.uint("attention_chunk_size", 1)? {
            Some(tokens) => {
                keys.set("local_attention.tokens", cfg.path("attention_chunk_size"));
                let count = rope_layers(cfg, layers)?;
                Ok((count > 0).then_some(LocalAttention { kind: LocalKind::Chunked, tokens, layers: count }))
            }
            None => Ok(None),
        },
        Family::Llama | Family::Gemma | Family::DeepseekV2 | Family::DeepseekV3 => Ok(None),
    }
}

/// `hidden_activation` (Gemma) or `hidden_act`.
fn activation(cfg: &Cfg, family: Family) -> Result<Activation> {
    let key = if family.is_gemma() && cfg.get("hidden_activation").is_some() { "hidden_activation" } else { "hidden_act" };
    match cfg.get(key) {
        None => Ok(if family.is_gemma() { Activation::Gelu } else { Activation::Silu }),
        Some(Value::String(s)) => match s.as_str() {
            "silu" | "swish" => Ok(Activation::Silu),
            "gelu" | "gelu_pytorch_tanh" | "gelu_new" | "gelu_fast" | "gelu_tanh" => Ok(Activation::Gelu),
            other => Err(check::unknown_name(
                &cfg.path(key),
                "activation",
                other,
                &["silu", "swish", "gelu", "gelu_pytorch_tanh", "gelu_new", "gelu_fast"],
            )),
        },
        Some(v) => Err(SimError::config(cfg.path(key), format!("must be a string (got {v})"))),
    }
}

/// `torch_dtype` (or `dtype`, its newer name) must be a floating type a server loads. It
/// does not change the bytes per weight: vLLM's default `dtype = "auto"` serves float32
/// checkpoints in 16 bits too, and `cost_model.dtype` sets the precision simulated.
fn check_dtype(cfg: &Cfg) -> Result<()> {
    for key in ["torch_dtype", "dtype"] {
        match cfg.get_either(key) {
            None => {}
            Some((_, Value::String(s))) if ["float16", "bfloat16", "float32"].contains(&s.as_str()) => {}
            Some((p, v)) => {
                return Err(SimError::config(p, format!("must be float16, bfloat16 or float32 (got {v})")));
            }
        }
    }
    Ok(())
}
