//! Tests of the Hugging Face `config.json` loader on one sample config per family
//! (`tests/data/hf_configs/`) and on broken ones.
use super::*;
use serde_json::{json, Value};

macro_rules! sample {
    ($file:literal) => {
        include_str!(concat!("../../../../tests/data/hf_configs/", $file))
    };
}

/// Every sample: (file, its text, the published parameter count of the text model when
/// the repository holds only it, with the source).
type Sample = (&'static str, &'static str, Option<(f64, &'static str)>);

const SAMPLES: [Sample; 16] = [
    ("llama-3.1-8b.json", sample!("llama-3.1-8b.json"), Some((8_030_261_248.0, "Hub"))),
    ("yi-34b.json", sample!("yi-34b.json"), Some((34_388_917_248.0, "Hub"))),
    ("mistral-7b-v0.1.json", sample!("mistral-7b-v0.1.json"), Some((7_241_732_096.0, "Hub; card: 7.3B"))),
    ("mistral-nemo-instruct-2407.json", sample!("mistral-nemo-instruct-2407.json"), Some((12_247_782_400.0, "Hub"))),
    ("mixtral-8x7b-v0.1.json", sample!("mixtral-8x7b-v0.1.json"), Some((46.7e9, "card"))),
    ("qwen2.5-7b-instruct.json", sample!("qwen2.5-7b-instruct.json"), Some((7.61e9, "card"))),
    ("qwen3-14b.json", sample!("qwen3-14b.json"), Some((14.8e9, "card"))),
    ("qwen3-30b-a3b.json", sample!("qwen3-30b-a3b.json"), Some((30.5e9, "card"))),
    ("gemma-7b.json", sample!("gemma-7b.json"), Some((8_537_680_896.0, "Hub; card: 8.5B"))),
    ("gemma-2-9b.json", sample!("gemma-2-9b.json"), Some((9_241_705_984.0, "Hub"))),
    ("gemma-3-1b-it.json", sample!("gemma-3-1b-it.json"), Some((999_885_952.0, "Hub"))),
    // Multimodal checkpoints: their published counts include the vision tower.
    ("gemma-3-4b-it.json", sample!("gemma-3-4b-it.json"), None),
    ("llama-4-scout-17b-16e.json", sample!("llama-4-scout-17b-16e.json"), None),
    // DeepSeek-V2 paper, table of released models / DeepSeek-V2-Lite model card: 15.7B total.
    ("deepseek-v2-lite.json", sample!("deepseek-v2-lite.json"), Some((15.7e9, "DeepSeek-V2-Lite card: 15.7B"))),
    // Without the MTP module, which is off unless served.
    ("deepseek-v3.json", sample!("deepseek-v3.json"), Some((671e9, "DeepSeek-V3 card: 671B main model"))),
    ("gpt-oss-20b.json", sample!("gpt-oss-20b.json"), Some((20.91e9, "gpt-oss model card, table 1: 20.91B"))),
];

fn load(text: &str) -> Model {
    let v: Value = serde_json::from_str(text).unwrap();
    resolve_model(&ModelInput::Custom(ModelFields { hf_config: Some(v), ..Default::default() })).unwrap()
}

fn sample(file: &str) -> Model {
    load(SAMPLES.iter().find(|s| s.0 == file).unwrap().1)
}

#[test]
fn a_config_of_each_family_loads_with_its_published_size() {
    for (file, text, published) in SAMPLES {
        let m = load(text);
        if let Some((count, source)) = published {
            let err = (m.params() - count).abs() / count;
            assert!(err < 0.01, "{file}: {} vs {count} ({source})", m.params());
        }
    }
}

#[test]
fn each_family_maps_to_what_its_layers_compute() {
    let l = sample("llama-3.1-8b.json");
    assert_eq!(l, Model { name: "llama".into(), ..resolve_model(&"llama-3.1-8b".into()).unwrap() });

    let mistral = sample("mistral-7b-v0.1.json");
    assert_eq!(mistral.local_attention, Some(LocalAttention { kind: LocalKind::Sliding, tokens: 4096, layers: 32 }));
    assert_eq!(sample("mistral-nemo-instruct-2407.json").head_dim, 128);

    let q = sample("qwen2.5-7b-instruct.json");
    assert!(q.qkv_bias && q.local_attention.is_none()); // use_sliding_window = false
    assert_eq!(sample("qwen3-14b.json").qk_norm_layers, 40);
    let moe = sample("qwen3-30b-a3b.json");
    assert_eq!((moe.experts, moe.experts_per_token, moe.intermediate, moe.moe_layers), (128, 8, 768, 48));

    let g1 = sample("gemma-7b.json");
    assert!(g1.tied_embeddings && !g1.post_norms);
    assert_eq!((g1.head_dim, g1.activation), (256, Activation::Gelu));
    let g2 = sample("gemma-2-9b.json");
    assert!(g2.post_norms && g2.tied_embeddings);
    assert_eq!(g2.local_attention, Some(LocalAttention { kind: LocalKind::Sliding, tokens: 4096, layers: 21 }));
    let g3 = sample("gemma-3-1b-it.json");
    // 26 layers, every 6th global: 22 sliding over 512 tokens; q/k norm everywhere.
    assert_eq!(g3.local_attention, Some(LocalAttention { kind: LocalKind::Sliding, tokens: 512, layers: 22 }));
    assert_eq!(g3.qk_norm_layers, 26);
    // The multimodal wrapper's sparse text_config takes Gemma3TextConfig's defaults.
    let g3mm = sample("gemma-3-4b-it.json");
    assert_eq!((g3mm.layers, g3mm.hidden, g3mm.heads, g3mm.kv_heads, g3mm.head_dim), (34, 2560, 8, 4, 256));
    assert_eq!((g3mm.vocab, g3mm.local_attention.unwrap().layers, g3mm.local_attention.unwrap().tokens), (262_208, 29, 1024));

    let scout = sample("llama-4-scout-17b-16e.json");
    assert_eq!(scout, Model { name: "llama4_text".into(), ..resolve_model(&"llama-4-scout".into()).unwrap() });
}

#[test]
fn deepseek_and_gpt_oss_configs_map_to_their_layers() {
    // DeepSeek-V3: MLA, 3 dense layers then 58 MoE layers of 256 routed experts and one
    // shared expert, an MTP module (not served by default), FP8 experts.
    let v3 = sample("deepseek-v3.json");
    assert_eq!(v3, Model { name: "deepseek_v3".into(), ..resolve_model(&"deepseek-v3".into()).unwrap() });
    assert_eq!(v3.mla, Some(Mla { q_lora_rank: 1536, kv_lora_rank: 512, qk_nope_head_dim: 128, qk_rope_head_dim: 64, v_head_dim: 128 }));
    assert_eq!((v3.head_dim, v3.moe_layers, v3.dense_intermediate, v3.shared_expert_intermediate), (192, 58, 18432, 2048));
    assert_eq!((v3.mtp_layers, v3.serve_mtp, v3.expert_format), (1, false, Some(WeightFormat::Fp8)));
    // Kimi-K2's type name reads as DeepSeek-V3's.
    let mut k: Value = serde_json::from_str(sample!("deepseek-v3.json")).unwrap();
    k["model_type"] = json!("kimi_k2");
    assert_eq!(load(&k.to_string()).mla, v3.mla);
    // DeepSeek-V2-Lite: no query compression (q_lora_rank null), two shared experts, 6 of 64.
    let lite = sample("deepseek-v2-lite.json");
    let mla = lite.mla.unwrap();
    assert_eq!((mla.q_lora_rank, mla.kv_lora_rank, lite.heads, lite.moe_layers), (0, 512, 16, 26));
    assert_eq!((lite.experts, lite.experts_per_token, lite.shared_expert_intermediate), (64, 6, 2 * 1408));
    assert_eq!((lite.expert_format, lite.mtp_layers), (None, 0));
    // DeepSeek-V2-Lite's card: 2.4B activated (the input embedding left out).
    let active = lite.active_params() - lite.embedding_params();
    assert!((active - 2.4e9).abs() < 0.01 * 2.4e9 + 0.05e9, "{active}");
    // moe_layer_freq = 2 from layer 1 on: layers 2, 4, …, 26.
    let mut v: Value = serde_json::from_str(sample!("deepseek-v2-lite.json")).unwrap();
    v["moe_layer_freq"] = json!(2);
    assert_eq!(load(&v.to_string()).moe_layers, 13);
    // gpt-oss-20b: sinks, every other layer a 128-token window, MXFP4 experts, q/k/v bias.
    let oss = sample("gpt-oss-20b.json");
    assert_eq!(oss, Model { name: "gpt_oss".into(), ..resolve_model(&"gpt-oss-20b".into()).unwrap() });
    assert!(oss.attention_sinks && oss.qkv_bias && oss.mla.is_none());
    assert_eq!(oss.local_attention, Some(LocalAttention { kind: LocalKind::Sliding, tokens: 128, layers: 12 }));
    assert_eq!((oss.experts, oss.experts_per_token, oss.expert_format), (32, 4, Some(WeightFormat::Mxfp4)));
    // Without layer_types, GptOssConfig's default: the even layers slide.
    let mut o: Value = serde_json::from_str(sample!("gpt-oss-20b.json")).unwrap();
    o.as_object_mut().unwrap().remove("layer_types");
    o.as_object_mut().unwrap().remove("num_experts_per_tok");
    let m = load(&o.to_string());
    assert_eq!((m.local_attention.unwrap().layers, m.experts_per_token), (12, 4));
    // A quant_method o1sim does not model leaves the weights at the scenario's precision.
    o["quantization_config"] = json!({"quant_method": "awq", "bits": 4});
    assert_eq!(load(&o.to_string()).expert_format, None);
}

#[test]
fn bad_mla_mtp_and_quantization_keys_are_named() {
    let v3: Value = serde_json::from_str(sample!("deepseek-v3.json")).unwrap();
    let with = |key: &str, value: Value| {
        let mut v = v3.clone();
        v[key] = value;
        bad(v)
    };
    let without = |key: &str| {
        let mut v = v3.clone();
        v.as_object_mut().unwrap().remove(key);
        bad(v)
    };
    for key in ["kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim", "n_routed_experts", "moe_intermediate_size", "num_experts_per_tok"] {
        let (path, msg) = without(key);
        assert_eq!(path, format!("model.hf_config.{key}"), "{msg}");
        assert!(msg.contains("is required"), "{msg}");
    }
    for (key, value) in [
        ("kv_lora_rank", json!(0)),
        ("kv_lora_rank", json!(1u64 << 30)),
        ("q_lora_rank", json!(0)),
        ("q_lora_rank", json!("1536")),
        ("qk_rope_head_dim", json!(-64)),
        ("v_head_dim", json!(0)),
        ("v_head_dim", json!(1u32 << 20)),
        ("n_shared_experts", json!(1u64 << 31)),
        ("num_nextn_predict_layers", json!(1u64 << 20)),
        ("moe_layer_freq", json!(0)),
        ("first_k_dense_replace", json!(61)),
        ("attention_bias", json!(true)),
        ("quantization_config", json!([1])),
    ] {
        let (path, msg) = with(key, value.clone());
        assert_eq!(path, format!("model.hf_config.{key}"), "{key} = {value}: {msg}");
    }
    assert_eq!(with("quantization_config", json!({"fmt": "e4m3"})).0, "model.hf_config.quantization_config.quant_method");
    assert_eq!(with("quantization_config", json!({"quant_method": 8})).0, "model.hf_config.quantization_config.quant_method");
    let (path, msg) = with("quantization_config", json!({"quant_method": "fp8", "weight_block_size": [128]}));
    assert_eq!(path, "model.hf_config.quantization_config.weight_block_size", "{msg}");
    // gpt-oss: the two top-k keys must agree.
    let mut o: Value = serde_json::from_str(sample!("gpt-oss-20b.json")).unwrap();
    o["experts_per_token"] = json!(2);
    let (path, msg) = bad(o.clone());
    assert_eq!(path, "model.hf_config.experts_per_token", "{msg}");
    o.as_object_mut().unwrap().remove("num_experts_per_tok");
    o["experts_per_token"] = json!(33);
    assert_eq!(bad(o.clone()).0, "model.hf_config.experts_per_token");
    o.as_object_mut().unwrap().remove("experts_per_token");
    assert_eq!(bad(o).0, "model.hf_config.num_experts_per_tok");
}

#[test]
fn model_tables_check_the_new_fields() {
    let over = |f: ModelFields| resolve_model(&ModelInput::Custom(ModelFields { preset: Some("deepseek-v3".into()), ..f }));
    let path = |r: Result<Model>| r.unwrap_err().path().map(str::to_string);
    let mla = resolve_model(&"deepseek-v3".into()).unwrap().mla.unwrap();
    assert_eq!(path(over(ModelFields { mla: Some(Mla { kv_lora_rank: 0, ..mla }), ..Default::default() })), Some("model.mla.kv_lora_rank".into()));
    assert_eq!(path(over(ModelFields { mla: Some(Mla { v_head_dim: 0, ..mla }), ..Default::default() })), Some("model.mla.v_head_dim".into()));
    assert_eq!(path(over(ModelFields { head_dim: Some(128), ..Default::default() })), Some("model.head_dim".into()));
    assert_eq!(path(over(ModelFields { qkv_bias: Some(true), ..Default::default() })), Some("model.qkv_bias".into()));
    assert_eq!(path(over(ModelFields { qk_norm_layers: Some(61), ..Default::default() })), Some("model.qk_norm_layers".into()));
    // A new mla table sets the head width it implies.
    let wider = over(ModelFields { mla: Some(Mla { qk_nope_head_dim: 64, ..mla }), ..Default::default() }).unwrap();
    assert_eq!(wider.head_dim, 128);
    // The MTP module can only be served where there is one.
    let kimi = |f: ModelFields| resolve_model(&ModelInput::Custom(ModelFields { preset: Some("kimi-k2".into()), ..f }));
    assert_eq!(path(kimi(ModelFields { serve_mtp: Some(true), ..Default::default() })), Some("model.serve_mtp".into()));
    assert!(kimi(ModelFields { serve_mtp: Some(true), mtp_layers: Some(1), ..Default::default() }).is_ok());
    // An expert format needs experts; a dense preset refuses it.
    let dense = ModelFields { preset: Some("llama-3-8b".into()), expert_format: Some(WeightFormat::Fp8), ..Default::default() };
    assert_eq!(path(resolve_model(&ModelInput::Custom(dense))), Some("model.expert_format".into()));
    // TOML spellings.
    #[derive(serde::Deserialize)]
    struct Doc {
        model: ModelInput,
    }
    let doc: Doc = toml::from_str("[model]\npreset = \"gpt-oss-20b\"\nexpert_format = \"bf16\"\nattention_sinks = false\n").unwrap();
    let m = resolve_model(&doc.model).unwrap();
    assert_eq!((m.expert_format, m.attention_sinks), (Some(WeightFormat::Bf16), false));
    let doc: Doc = toml::from_str(
        "[model]\npreset = \"deepseek-v3\"\nserve_mtp = true\n[model.mla]\nq_lora_rank = 0\nkv_lora_rank = 256\nqk_nope_head_dim = 128\nqk_rope_head_dim = 64\nv_head_dim = 128\n",
    )
    .unwrap();
    let m = resolve_model(&doc.model).unwrap();
    assert_eq!((m.mla.unwrap().kv_lora_rank, m.serve_mtp), (256, true));
    assert!(toml::from_str::<Doc>("[model]\npreset = \"deepseek-v3\"\n[model.mla]\nkv_rank = 1\n").is_err());
}

#[test]
fn interleaved_moe_layers_and_explicit_layer_lists() {
    // Llama 4 Maverick's layout: every 2nd layer MoE, the others a dense MLP of
    // intermediate_size_mlp; a shared expert on the MoE layers.
    let mut v: Value = serde_json::from_str(sample!("llama-4-scout-17b-16e.json")).unwrap();
    v["text_config"]["interleave_moe_layer_step"] = json!(2);
    v["text_config"]["num_local_experts"] = json!(128);
    let m = load(&v.to_string());
    assert_eq!((m.moe_layers, m.dense_intermediate, m.intermediate, m.shared_expert_intermediate), (24, 16384, 8192, 8192));
    // Qwen3-MoE with dense layers listed.
    let mut q: Value = serde_json::from_str(sample!("qwen3-30b-a3b.json")).unwrap();
    q["mlp_only_layers"] = json!([0, 1, 47]);
    let m = load(&q.to_string());
    assert_eq!((m.moe_layers, m.dense_intermediate), (45, 6144));
    // layer_types, as newer transformers write them, decide local layers.
    let mut g: Value = serde_json::from_str(sample!("gemma-2-9b.json")).unwrap();
    let types: Vec<&str> = (0..42).map(|i| if i < 40 { "sliding_attention" } else { "full_attention" }).collect();
    g["layer_types"] = json!(types);
    assert_eq!(load(&g.to_string()).local_attention.unwrap().layers, 40);
    // Qwen2 with its sliding window switched on: layers from max_window_layers on.
    let mut q2: Value = serde_json::from_str(sample!("qwen2.5-7b-instruct.json")).unwrap();
    q2["use_sliding_window"] = json!(true);
    q2["max_window_layers"] = json!(20);
    assert_eq!(load(&q2.to_string()).local_attention, Some(LocalAttention { kind: LocalKind::Sliding, tokens: 131072, layers: 8 }));
}

#[test]
fn table_fields_override_a_config() {
    let v: Value = serde_json::from_str(sample!("mistral-7b-v0.1.json")).unwrap();
    let m = resolve_model(&ModelInput::Custom(ModelFields {
        hf_config: Some(v.clone()),
        name: Some("mistral-short".into()),
        max_context: Some(8192),
        ..Default::default()
    }))
    .unwrap();
    assert_eq!((m.name.as_str(), m.max_context, m.layers), ("mistral-short", 8192, 32));
    // TOML form, as a scenario file holds it inline.
    #[derive(serde::Deserialize)]
    struct Doc {
        model: ModelInput,
    }
    let doc: Doc = toml::from_str(
        "[model.hf_config]\nmodel_type = \"llama\"\nhidden_size = 64\nintermediate_size = 128\nnum_hidden_layers = 2\nnum_attention_heads = 4\nvocab_size = 1000\nmax_position_embeddings = 512\n",
    )
    .unwrap();
    let m = resolve_model(&doc.model).unwrap();
    assert_eq!((m.kv_heads, m.head_dim, m.name.as_str()), (4, 16, "llama"));
    // preset and hf_config together are refused.
    let err = resolve_model(&ModelInput::Custom(ModelFields {
        preset: Some("llama-3-8b".into()),
        hf_config: Some(v),
        ..Default::default()
    }))
    .unwrap_err();
    assert_eq!(err.path(), Some("model.hf_config"));
}

/// The error path of loading `config` (a `config.json` value).
fn bad(config: Value) -> (String, String) {
    let err = resolve_model(&ModelInput::Custom(ModelFields { hf_config: Some(config), ..Default::default() })).unwrap_err();
    assert_eq!(err.kind_name(), "ConfigError", "{err}");
    (err.path().unwrap_or_default().to_string(), err.to_string())
}

#[test]
fn bad_configs_name_the_key() {
    let base: Value = serde_json::from_str(sample!("llama-3.1-8b.json")).unwrap();
    let with = |key: &str, value: Value| {
        let mut v = base.clone();
        v[key] = value;
        bad(v)
    };
    let without = |key: &str| {
        let mut v = base.clone();
        v.as_object_mut().unwrap().remove(key);
        bad(v)
    };
    // Missing keys.
    for key in ["num_attention_heads", "hidden_size", "num_hidden_layers", "intermediate_size", "vocab_size", "max_position_embeddings"] {
        let (path, msg) = without(key);
        assert_eq!(path, format!("model.hf_config.{key}"), "{msg}");
        assert!(msg.contains("is required"), "{msg}");
    }
    let (path, msg) = without("model_type");
    assert_eq!(path, "model.hf_config.model_type", "{msg}");
    // Unknown type: named, with the supported ones.
    let (path, msg) = with("model_type", json!("falcon"));
    assert_eq!(path, "model.hf_config.model_type");
    assert!(msg.contains("falcon") && msg.contains("qwen3_moe") && msg.contains("deepseek_v3"), "{msg}");
    let (_, msg) = with("model_type", json!("lama"));
    assert!(msg.contains("did you mean llama"), "{msg}");
    // Nonsense sizes.
    for (key, value) in [
        ("num_attention_heads", json!(0)),
        ("hidden_size", json!(-4096)),
        ("hidden_size", json!(4096.5)),
        ("num_hidden_layers", json!("32")),
        ("vocab_size", json!(1e12)),
        ("intermediate_size", json!(true)),
    ] {
        let (path, msg) = with(key, value.clone());
        assert_eq!(path, format!("model.hf_config.{key}"), "{value}: {msg}");
    }
    // Sizes that are integers but not a model (a huge layer count is refused before any
    // per-layer rule walks it).
    let mut q: Value = serde_json::from_str(sample!("qwen3-30b-a3b.json")).unwrap();
    q["num_hidden_layers"] = json!(4_000_000_000u32);
    assert_eq!(bad(q).0, "model.hf_config.num_hidden_layers");
    assert_eq!(with("hidden_size", json!(1u64 << 30)).0, "model.hf_config.hidden_size");
    assert_eq!(with("num_key_value_heads", json!(5)).0, "model.hf_config.num_key_value_heads");
    let (path, msg) = {
        let mut v = base.clone();
        v["num_attention_heads"] = json!(30);
        v.as_object_mut().unwrap().remove("num_key_value_heads");
        v["hidden_size"] = json!(4096);
        bad(v)
    };
    assert_eq!(path, "model.hf_config.num_attention_heads", "{msg}");
    assert!(msg.contains("head_dim"), "{msg}");
    assert_eq!(with("torch_dtype", json!("int3")).0, "model.hf_config.torch_dtype");
    assert_eq!(with("hidden_act", json!("relu6")).0, "model.hf_config.hidden_act");
    assert_eq!(with("tie_word_embeddings", json!("no")).0, "model.hf_config.tie_word_embeddings");
    // Not an object at all.
    assert_eq!(bad(json!([1, 2])).0, "model.hf_config");
    assert_eq!(bad(json!({"model_type": "llama4", "text_config": 3})).0, "model.hf_config.text_config");
}

#[test]
fn bad_moe_and_window_keys_are_named() {
    let mixtral: Value = serde_json::from_str(sample!("mixtral-8x7b-v0.1.json")).unwrap();
    let mut v = mixtral.clone();
    v["num_experts_per_tok"] = json!(9);
    assert_eq!(bad(v).0, "model.hf_config.num_experts_per_tok");
    let mut v = mixtral.clone();
    v.as_object_mut().unwrap().remove("num_local_experts");
    assert_eq!(bad(v).0, "model.hf_config.num_local_experts");
    let mut v = mixtral;
    v["sliding_window"] = json!(0);
    assert_eq!(bad(v).0, "model.hf_config.sliding_window");

    let scout: Value = serde_json::from_str(sample!("llama-4-scout-17b-16e.json")).unwrap();
    let mut v = scout.clone();
    v["text_config"].as_object_mut().unwrap().remove("hidden_size");
    assert_eq!(bad(v).0, "model.hf_config.text_config.hidden_size");
    let mut v = scout.clone();
    v["text_config"]["interleave_moe_layer_step"] = json!(0);
    assert_eq!(bad(v).0, "model.hf_config.text_config.interleave_moe_layer_step");
    let mut v = scout.clone();
    v["text_config"]["no_rope_layers"] = json!([1, 0]);
    assert_eq!(bad(v).0, "model.hf_config.text_config.no_rope_layers");
    let mut v = scout;
    v["text_config"]["model_type"] = json!("llama5_text");
    assert_eq!(bad(v).0, "model.hf_config.text_config.model_type");

    let mut q: Value = serde_json::from_str(sample!("qwen3-30b-a3b.json")).unwrap();
    q["mlp_only_layers"] = json!([0, 48]);
    assert_eq!(bad(q).0, "model.hf_config.mlp_only_layers[1]");
    let mut g: Value = serde_json::from_str(sample!("gemma-2-9b.json")).unwrap();
    g["layer_types"] = json!(["sliding_attention", "full"]);
    assert_eq!(bad(g).0, "model.hf_config.layer_types");
}

#[test]
fn every_preset_config_loads() {
    for p in MODEL_PRESETS {
        let v: Value = serde_json::from_str(p.config).unwrap_or_else(|e| panic!("{}: {e}", p.name));
        hf::model_from_hf_config(&v).unwrap_or_else(|e| panic!("{}: {e}", p.name));
    }
}
