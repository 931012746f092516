//! Tests of `catalog`.
use super::*;

fn rel(a: f64, b: f64) -> f64 {
    (a - b).abs() / b
}

/// The published parameter count of every preset (the Hugging Face Hub's count of each
/// repository's safetensors weights, "Model size" on its page, unless said otherwise).
const PUBLISHED_PARAMS: [(&str, f64, &str); 27] = [
    ("llama-3-8b", 8_030_261_248.0, "meta-llama/Meta-Llama-3-8B (Hub; model card: 8B)"),
    ("llama-3-70b", 70_553_706_496.0, "meta-llama/Meta-Llama-3-70B (Hub; model card: 70B)"),
    ("llama-3.1-405b", 405_853_388_800.0, "meta-llama/Llama-3.1-405B (Hub; model card: 405B)"),
    ("qwen2.5-72b", 72.7e9, "Qwen/Qwen2.5-72B model card: 72.7B"),
    ("mixtral-8x7b", 46.7e9, "Mixtral of Experts paper / model card: 46.7B total"),
    ("llama-2-7b", 6_738_415_616.0, "meta-llama/Llama-2-7b-hf (Hub: 6.74B; model card: 7B)"),
    ("llama-2-70b", 68_976_648_192.0, "meta-llama/Llama-2-70b-hf (Hub: 69B; model card: 70B)"),
    ("codellama-34b", 33_743_970_304.0, "codellama/CodeLlama-34b-hf (Hub: 33.7B; model card: 34B)"),
    ("llama-3.1-8b", 8_030_261_248.0, "meta-llama/Llama-3.1-8B (Hub; model card: 8B)"),
    ("llama-3.1-70b", 70_553_706_496.0, "meta-llama/Llama-3.1-70B (Hub; model card: 70B)"),
    ("llama-3.3-70b", 70_553_706_496.0, "meta-llama/Llama-3.3-70B-Instruct (Hub; model card: 70B)"),
    ("qwen2.5-7b", 7.61e9, "Qwen/Qwen2.5-7B-Instruct model card: 7.61B"),
    ("qwen3-14b", 14.8e9, "Qwen/Qwen3-14B model card: 14.8B"),
    ("qwen3-32b", 32.8e9, "Qwen/Qwen3-32B model card: 32.8B"),
    ("qwen3-30b-a3b", 30.5e9, "Qwen/Qwen3-30B-A3B model card: 30.5B total, 3.3B activated"),
    ("mistral-nemo-12b", 12_247_782_400.0, "mistralai/Mistral-Nemo-Instruct-2407 (Hub: 12.2B; model card: 12B)"),
    ("yi-34b", 34_388_917_248.0, "01-ai/Yi-34B (Hub: 34.4B; model card: 34B)"),
    ("mixtral-8x22b", 141e9, "mistralai/Mixtral-8x22B-v0.1 model card: 141B total, 39B active"),
    // The model card's "109B total" includes the vision encoder, which o1sim does not hold
    // (text serving): the Hub's count of the multimodal checkpoint is 108,641,793,536.
    ("llama-4-scout", 108_641_793_536.0, "meta-llama/Llama-4-Scout-17B-16E (Hub, with vision; card: 109B total)"),
    // Without the MTP module (off by default); 685B with it (tested below).
    ("deepseek-v3", 671e9, "DeepSeek-V3 technical report (arXiv 2412.19437) and model card: 671B total"),
    ("deepseek-r1", 671e9, "deepseek-ai/DeepSeek-R1 model card: 671B total"),
    // The Hub's count; the model card rounds it to 1T, the Kimi K2 technical report
    // (arXiv 2507.20534) says 1.04T, 1.3% above this architecture's weights.
    ("kimi-k2", 1_026.5e9, "moonshotai/Kimi-K2-Instruct (Hub: 1026.5B; card: 1T)"),
    ("qwen3-235b-a22b", 235e9, "Qwen/Qwen3-235B-A22B model card: 235B total"),
    ("gpt-oss-120b", 116.83e9, "gpt-oss-120b & gpt-oss-20b model card (OpenAI, 2025), table 1: 116.83B total"),
    ("gpt-oss-20b", 20.91e9, "gpt-oss model card, table 1: 20.91B total"),
    // The language model only (o1sim serves text); the card's 400B.
    ("llama-4-maverick", 400e9, "meta-llama/Llama-4-Maverick-17B-128E model card: 400B total"),
    ("llama-3.2-1b", 1.23e9, "meta-llama/Llama-3.2-1B model card: 1.23B (tied embeddings)"),
];

#[test]
fn every_preset_is_within_one_percent_of_its_published_parameter_count() {
    let names = model_preset_names();
    assert_eq!(names.len(), PUBLISHED_PARAMS.len());
    for (name, published, source) in PUBLISHED_PARAMS {
        assert!(names.contains(&name), "{name} has no preset");
        let m = resolve_model(&name.into()).unwrap();
        let err = rel(m.params(), published);
        assert!(err < 0.01, "{name}: {} params vs {published} published ({source}): {:.2}% off", m.params(), err * 100.0);
    }
    // Active parameters of the MoE presets, as their cards state them (rounded to 0.1B or,
    // for Scout and Mixtral 8x22B, to 1B).
    let active = |n: &str| resolve_model(&n.into()).unwrap().active_params();
    assert!(rel(active("mixtral-8x7b"), 12.9e9) < 0.01, "{}", active("mixtral-8x7b"));
    assert!(rel(active("qwen3-30b-a3b"), 3.3e9) < 0.02, "{}", active("qwen3-30b-a3b"));
    assert!(rel(active("mixtral-8x22b"), 39e9) < 0.02, "{}", active("mixtral-8x22b"));
    assert!(rel(active("llama-4-scout"), 17e9) < 0.02, "{}", active("llama-4-scout"));
}

/// |measured − published| within 1% of the published figure plus half the unit it is
/// rounded to (a card's "37B" stands for anything from 36.5B to 37.5B).
fn near(measured: f64, published: f64, unit: f64) -> bool {
    (measured - published).abs() <= 0.01 * published + unit / 2.0
}

#[test]
fn frontier_presets_total_and_active_parameters_match_their_cards() {
    // (preset, total, its rounding unit, active, its unit, whether the vendor's active
    // figure counts the input embedding table, source). DeepSeek, Moonshot and OpenAI leave
    // the embedding lookup out of their "activated" counts (gpt-oss's card: 5.13B = 36
    // layers' attention, router and 4 experts + the unembedding); Qwen and Meta count it.
    let cards: [(&str, f64, f64, f64, f64, bool, &str); 7] = [
        ("deepseek-v3", 671e9, 1e9, 37e9, 1e9, false, "DeepSeek-V3 technical report §1/§4.2 and model card: 671B total, 37B activated"),
        ("deepseek-r1", 671e9, 1e9, 37e9, 1e9, false, "deepseek-ai/DeepSeek-R1 model card: 671B total, 37B activated"),
        ("kimi-k2", 1_026.5e9, 0.1e9, 32e9, 1e9, false, "Hub count 1026.5B; moonshotai/Kimi-K2-Instruct model card: 32B activated"),
        ("qwen3-235b-a22b", 235e9, 1e9, 22e9, 1e9, true, "Qwen/Qwen3-235B-A22B model card: 235B total, 22B activated"),
        ("gpt-oss-120b", 116.83e9, 0.01e9, 5.13e9, 0.01e9, false, "gpt-oss model card, table 1: 116.83B total, 5.13B active"),
        ("gpt-oss-20b", 20.91e9, 0.01e9, 3.61e9, 0.01e9, false, "gpt-oss model card, table 1: 20.91B total, 3.61B active"),
        ("llama-4-maverick", 400e9, 1e9, 17e9, 1e9, true, "meta-llama/Llama-4-Maverick-17B-128E model card: 17B active, 400B total"),
    ];
    for (name, total, total_unit, active, active_unit, with_embedding, source) in cards {
        let m = resolve_model(&name.into()).unwrap();
        let measured = m.active_params() - if with_embedding { 0.0 } else { m.embedding_params() };
        assert!(near(m.params(), total, total_unit), "{name}: {} total vs {total} ({source})", m.params());
        assert!(near(measured, active, active_unit), "{name}: {measured} active vs {active} ({source})");
        assert!(m.active_params() < m.params() / 4.0, "{name}");
    }
    // DeepSeek-V3 with its MTP module served (the optional extra layer): the card's 685B
    // "including 671B of the Main Model weights and 14B of the Multi-Token Prediction (MTP)
    // Module weights".
    let v3 = resolve_model(&"deepseek-v3".into()).unwrap();
    let with_mtp = resolve_model(&ModelInput::Custom(ModelFields {
        preset: Some("deepseek-v3".into()),
        serve_mtp: Some(true),
        ..Default::default()
    }))
    .unwrap();
    assert_eq!(v3.mtp_layers, 1);
    assert!(!v3.serve_mtp);
    assert!(rel(with_mtp.params(), 685e9) < 0.01, "{}", with_mtp.params());
    assert!(near(with_mtp.mtp_params(), 14e9, 1e9), "{}", with_mtp.mtp_params());
    assert_eq!(with_mtp.params(), v3.params() + v3.mtp_params());
    // The MTP module is not on a token's path: active parameters stay the same.
    assert_eq!(with_mtp.active_params(), v3.active_params());
}

#[test]
fn frontier_architectures_of_the_presets() {
    let m = |n: &str| resolve_model(&n.into()).unwrap();
    let v3 = m("deepseek-v3");
    let mla = v3.mla.unwrap();
    assert_eq!((mla.q_lora_rank, mla.kv_lora_rank, mla.qk_nope_head_dim, mla.qk_rope_head_dim, mla.v_head_dim), (1536, 512, 128, 64, 128));
    assert_eq!((v3.head_dim, v3.experts, v3.experts_per_token, v3.moe_layers), (192, 256, 8, 58));
    assert_eq!((v3.intermediate, v3.dense_intermediate, v3.shared_expert_intermediate), (2048, 18432, 2048));
    assert_eq!(v3.expert_format, Some(WeightFormat::Fp8));
    // 61 layers × (512 + 64) values × 2 bytes.
    assert_eq!(v3.kv_bytes_per_token(2.0), 70_272.0);
    let kimi = m("kimi-k2");
    assert_eq!((kimi.heads, kimi.experts, kimi.moe_layers, kimi.mtp_layers, kimi.vocab), (64, 384, 60, 0, 163_840));
    let oss = m("gpt-oss-120b");
    assert!(oss.attention_sinks && oss.qkv_bias && oss.mla.is_none());
    assert_eq!(oss.local_attention, Some(LocalAttention { kind: LocalKind::Sliding, tokens: 128, layers: 18 }));
    assert_eq!((oss.experts, oss.experts_per_token, oss.expert_format), (128, 4, Some(WeightFormat::Mxfp4)));
    assert_eq!(m("gpt-oss-20b").local_attention.unwrap().layers, 12);
    let mav = m("llama-4-maverick");
    assert_eq!((mav.moe_layers, mav.dense_intermediate, mav.shared_expert_intermediate, mav.qk_norm_layers), (24, 16384, 8192, 0));
    let q = m("qwen3-235b-a22b");
    assert_eq!((q.layers, q.experts, q.experts_per_token, q.moe_layers, q.expert_format), (94, 128, 8, 94, None));
    // Serialised, a model lists the new fields only when it has them.
    let text = serde_json::to_string(&m("llama-3-8b")).unwrap();
    for key in ["mla", "attention_sinks", "expert_format", "mtp_layers", "serve_mtp"] {
        assert!(!text.contains(key), "{key} in {text}");
    }
    let text = serde_json::to_string(&v3).unwrap();
    assert!(text.contains(r#""mla":{"q_lora_rank":1536"#) && text.contains(r#""expert_format":"fp8""#) && text.contains(r#""mtp_layers":1"#), "{text}");
    assert!(!text.contains("serve_mtp") && !text.contains("attention_sinks"), "{text}");
}

#[test]
fn param_counts_match_published_sizes() {
    let m = |n: &str| resolve_model(&n.into()).unwrap();
    // exact arithmetic for llama-3-8b
    let l8 = m("llama-3-8b");
    let layer =
        4096.0 * 4096.0 * 2.0 + 2.0 * 4096.0 * 1024.0 + 3.0 * 4096.0 * 14336.0 + 2.0 * 4096.0;
    assert_eq!(l8.params_per_dense_layer(), layer);
    assert_eq!(l8.params(), 32.0 * layer + 2.0 * 128256.0 * 4096.0 + 4096.0);
    let mut tied = l8.clone();
    tied.tied_embeddings = true;
    assert_eq!(l8.params() - tied.params(), 128256.0 * 4096.0);
    // 2 · 32 layers · 8 kv heads · 128 · 2 bytes = 128 KiB per token
    assert_eq!(l8.kv_bytes_per_token(2.0), 131072.0);
    // Llama 2 7B to the parameter: the Hub's 6,738,415,616.
    assert_eq!(m("llama-2-7b").params(), 6_738_415_616.0);
    // Mixtral 8x22B: 56 layers of 8 experts + router.
    assert_eq!(m("mixtral-8x22b").params(), 140_620_634_112.0);
    // Qwen2.5's q/k/v bias: (28 + 2·4) heads · 128 per layer, 28 layers.
    let q7 = m("qwen2.5-7b");
    let unbiased = Model { qkv_bias: false, ..q7.clone() };
    assert_eq!(q7.params() - unbiased.params(), 28.0 * 36.0 * 128.0);
    // Llama 4 Scout: the shared expert is one more expert's width on each of 48 layers.
    let scout = m("llama-4-scout");
    let no_shared = Model { shared_expert_intermediate: 0, ..scout.clone() };
    assert_eq!(scout.params() - no_shared.params(), 48.0 * 3.0 * 5120.0 * 8192.0);
}

#[test]
fn hugging_face_ids_are_aliases() {
    for (alias, name) in [
        ("meta-llama/Llama-3.1-8B", "llama-3.1-8b"),
        ("META-LLAMA/LLAMA-3.1-8B-INSTRUCT", "llama-3.1-8b"),
        ("meta-llama/Llama-2-7b-hf", "llama-2-7b"),
        ("codellama/CodeLlama-34b-Instruct-hf", "codellama-34b"),
        ("mistralai/Mixtral-8x7B-v0.1", "mixtral-8x7b"),
        ("Qwen/Qwen3-32B", "qwen3-32b"),
        ("meta-llama/Llama-4-Scout-17B-16E-Instruct", "llama-4-scout"),
        ("Llama-3.1-8B", "llama-3.1-8b"),
    ] {
        let m = resolve_model(&alias.into()).unwrap_or_else(|e| panic!("{alias}: {e}"));
        assert_eq!(m.name, name, "{alias}");
        let table = ModelInput::Custom(ModelFields { preset: Some(alias.into()), ..Default::default() });
        assert_eq!(resolve_model(&table).unwrap(), m);
    }
    let err = resolve_model(&"meta-llama/Llama-3.1-9B".into()).unwrap_err();
    assert_eq!(err.path(), Some("model"));
}

#[test]
fn architectures_of_the_presets() {
    let m = |n: &str| resolve_model(&n.into()).unwrap();
    // 128k context for the Llama 3.1 family.
    for n in ["llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b", "llama-3.3-70b"] {
        assert_eq!(m(n).max_context, 131_072, "{n}");
    }
    let scout = m("llama-4-scout");
    assert_eq!((scout.experts, scout.experts_per_token, scout.moe_layers), (16, 1, 48));
    assert_eq!(scout.shared_expert_intermediate, 8192);
    assert_eq!(scout.local_attention, Some(LocalAttention { kind: LocalKind::Chunked, tokens: 8192, layers: 36 }));
    assert_eq!(scout.qk_norm_layers, 36);
    assert!(m("qwen2.5-7b").qkv_bias && !m("qwen3-14b").qkv_bias);
    assert_eq!(m("qwen3-14b").qk_norm_layers, 40);
    assert_eq!(m("mistral-nemo-12b").head_dim, 128); // explicit: 5120 / 32 would be 160
    let moe = m("qwen3-30b-a3b");
    assert_eq!((moe.experts, moe.experts_per_token, moe.intermediate, moe.moe_layers), (128, 8, 768, 48));
    // Existing presets keep their shape (goldens depend on them).
    let l8 = m("llama-3-8b");
    assert_eq!((l8.layers, l8.hidden, l8.head_dim, l8.max_context, l8.moe_layers), (32, 4096, 128, 8192, 0));
    assert_eq!((l8.dense_intermediate, l8.qkv_bias, l8.local_attention), (14336, false, None));
}

#[test]
fn overriding_layers_keeps_the_share_of_each_kind() {
    let over = |preset: &str, layers: u32| {
        resolve_model(&ModelInput::Custom(ModelFields { preset: Some(preset.into()), layers: Some(layers), ..Default::default() })).unwrap()
    };
    let mixtral = over("mixtral-8x7b", 16);
    assert_eq!(mixtral.moe_layers, 16);
    let scout = over("llama-4-scout", 8);
    assert_eq!((scout.moe_layers, scout.local_attention.unwrap().layers, scout.qk_norm_layers), (8, 6, 6));
    // A dense model made MoE by a table: every layer gets the experts.
    let moe = resolve_model(&ModelInput::Custom(ModelFields {
        preset: Some("llama-3-8b".into()),
        experts: Some(4),
        experts_per_token: Some(2),
        ..Default::default()
    }))
    .unwrap();
    assert_eq!(moe.moe_layers, 32);
    // `intermediate` of a dense preset moves its dense width too.
    let narrow = resolve_model(&ModelInput::Custom(ModelFields {
        preset: Some("llama-3-8b".into()),
        intermediate: Some(8192),
        ..Default::default()
    }))
    .unwrap();
    assert_eq!(narrow.dense_intermediate, 8192);
}

#[test]
fn presets_are_valid_and_named_consistently() {
    let names = model_preset_names();
    let models = model_presets();
    assert_eq!(
        names,
        models.iter().map(|m| m.name.as_str()).collect::<Vec<_>>()
    );
    for m in &models {
        m.validate().unwrap();
        assert_eq!(
            &resolve_model(&ModelInput::Preset(m.name.clone())).unwrap(),
            m
        );
    }
    let names = gpu_preset_names();
    let gpus = gpu_presets();
    assert_eq!(
        names,
        gpus.iter().map(|g| g.name.as_str()).collect::<Vec<_>>()
    );
    for g in &gpus {
        g.validate().unwrap();
        assert_eq!(&resolve_gpu(&GpuInput::Preset(g.name.clone())).unwrap(), g);
    }
    let l40s = resolve_gpu(&"l40s".into()).unwrap();
    assert!((l40s.hbm_gib - 44.7).abs() < 0.05);
    assert_eq!(resolve_gpu(&"a100-80g".into()).unwrap().fp8_tflops, 0.0);
}

#[test]
fn gpu_variants_carry_their_datasheet_figures_and_pricing() {
    let g = |n: &str| resolve_gpu(&n.into()).unwrap();
    // Each GPU names what prices it: a shipped profile only for the parts it was timed on.
    for gpu in gpu_presets() {
        let profiled = crate::calib::PROFILED_GPUS.contains(&gpu.name.as_str());
        assert_eq!(gpu.priced_by == gpu.name, profiled, "{}", gpu.name);
        assert_eq!(gpu.priced_by == ROOFLINE, !profiled, "{}", gpu.name);
    }
    let (sxm, pcie, nvl) = (g("h100"), g("h100-pcie"), g("h100-nvl"));
    assert!(pcie.hbm_tbps < sxm.hbm_tbps && sxm.hbm_tbps < nvl.hbm_tbps);
    assert!(pcie.bf16_tflops < nvl.bf16_tflops && nvl.bf16_tflops < sxm.bf16_tflops);
    assert_eq!((pcie.sms, pcie.sm_clock_mhz, nvl.hbm_gib), (114, 1755.0, 94.0));
    // Bridged pairs: NVLink for TP 2, PCIe beyond.
    assert_eq!((pcie.link_gbps(2), pcie.link_gbps(4)), (600.0, 128.0));
    assert_eq!(sxm.link_gbps(8), 900.0);
    let (a40, a80, a80p) = (g("a100-40g"), g("a100-80g"), g("a100-80g-pcie"));
    assert_eq!((a40.hbm_gib, a40.hbm_tbps, a80p.hbm_tbps), (40.0, 1.555, 1.935));
    assert_eq!((a40.descriptor_cache_entries, a80p.descriptor_miss_cycles, a80.sm_clock_mhz), (64, 4.0, 1410.0));
    assert_eq!(a80p.link_gbps(4), 64.0);
    // A table over a profiled preset keeps its profile unless it changes the part.
    let over = |f: GpuFields| resolve_gpu(&GpuInput::Custom(GpuFields { preset: Some("h200".into()), ..f })).unwrap();
    assert_eq!(over(GpuFields { hbm_gib: Some(100.0), name: Some("mine".into()), ..Default::default() }).priced_by, "h200");
    assert_eq!(over(GpuFields { hbm_tbps: Some(2.4), ..Default::default() }).priced_by, ROOFLINE);
    let named = GpuFields { hbm_tbps: Some(4.9), priced_by: Some("h200".into()), ..Default::default() };
    assert_eq!(over(named).priced_by, "h200");
    // A profile that does not ship is refused, naming the field.
    let err = resolve_gpu(&GpuInput::Custom(GpuFields {
        preset: Some("h100-pcie".into()),
        priced_by: Some("h100-pci".into()),
        ..Default::default()
    }))
    .unwrap_err();
    assert_eq!(err.path(), Some("gpu.priced_by"));
}

#[test]
fn string_or_table_inputs() {
    let mi: ModelInput = serde_json::from_str("\"llama-3-8b\"").unwrap();
    assert_eq!(mi, ModelInput::Preset("llama-3-8b".into()));
    let mi: ModelInput =
        serde_json::from_str(r#"{"preset":"llama-3-8b","layers":16,"name":"half"}"#).unwrap();
    let m = resolve_model(&mi).unwrap();
    assert_eq!((m.layers, m.hidden, m.name.as_str()), (16, 4096, "half"));

    // TOML table with a preset
    #[derive(Deserialize)]
    struct Doc {
        model: ModelInput,
        gpu: GpuInput,
    }
    let doc: Doc = toml::from_str(
        "gpu = \"h200\"\n[model]\npreset = \"mixtral-8x7b\"\nexperts_per_token = 1\n",
    )
    .unwrap();
    assert_eq!(resolve_model(&doc.model).unwrap().experts_per_token, 1);
    assert_eq!(resolve_gpu(&doc.gpu).unwrap().hbm_gib, 139.8);

    // complete custom model without preset; optional fields default
    let custom = r#"{"layers":2,"hidden":64,"heads":4,"kv_heads":2,"head_dim":16,"intermediate":128,"vocab":1000,"max_context":512}"#;
    let m = resolve_model(&serde_json::from_str(custom).unwrap()).unwrap();
    assert_eq!(
        (
            m.name.as_str(),
            m.experts,
            m.experts_per_token,
            m.tied_embeddings
        ),
        ("custom", 1, 1, false)
    );

    // serialize round trip
    for input in [mi, ModelInput::Preset("qwen2.5-72b".into())] {
        let json = serde_json::to_string(&input).unwrap();
        assert_eq!(
            serde_json::from_str::<ModelInput>(&json).unwrap(),
            input,
            "{json}"
        );
    }
    let gi = GpuInput::Custom(GpuFields {
        preset: Some("h100".into()),
        hbm_gib: Some(94.0),
        ..Default::default()
    });
    let json = serde_json::to_string(&gi).unwrap();
    assert_eq!(json, r#"{"preset":"h100","hbm_gib":94.0}"#);
    assert_eq!(serde_json::from_str::<GpuInput>(&json).unwrap(), gi);
    assert_eq!(resolve_gpu(&gi).unwrap().hbm_gib, 94.0);
}

#[test]
fn input_errors_are_clear() {
    let e = serde_json::from_str::<ModelInput>(r#"{"preset":"llama-3-8b","layer":16}"#)
        .unwrap_err()
        .to_string();
    assert!(e.contains("unknown field `layer`"), "{e}");
    let e = serde_json::from_str::<ModelInput>("42")
        .unwrap_err()
        .to_string();
    assert!(e.contains("a model preset name (string) or a table"), "{e}");
    let e = serde_json::from_str::<GpuInput>("[1]")
        .unwrap_err()
        .to_string();
    assert!(e.contains("a GPU preset name"), "{e}");
    let e = serde_json::from_str::<GpuInput>(r#"{"hbm_tb":3}"#)
        .unwrap_err()
        .to_string();
    assert!(e.contains("unknown field `hbm_tb`"), "{e}");

    let err = resolve_model(&"llama-3-7b".into()).unwrap_err();
    assert_eq!(err.path(), Some("model"));
    assert!(
        err.to_string().contains("did you mean") && err.to_string().contains("llama-3-8b"),
        "{err}"
    );
    let err = resolve_model(&ModelInput::Custom(ModelFields {
        preset: Some("mixtral".into()),
        ..Default::default()
    }))
    .unwrap_err();
    assert_eq!(err.path(), Some("model.preset"));
    assert!(err.to_string().contains("mixtral-8x7b"), "{err}");
    let err = resolve_gpu(&"h100-sxm".into()).unwrap_err();
    assert_eq!(err.path(), Some("gpu"));
    assert!(
        err.to_string().contains("did you mean") && err.to_string().contains("h100"),
        "{err}"
    );

    // missing fields without a preset name the field
    let err = resolve_model(&ModelInput::Custom(ModelFields {
        layers: Some(2),
        ..Default::default()
    }))
    .unwrap_err();
    assert_eq!(err.path(), Some("model.hidden"));
    let err = resolve_gpu(&GpuInput::Custom(GpuFields {
        bf16_tflops: Some(100.0),
        ..Default::default()
    }))
    .unwrap_err();
    assert_eq!(err.path(), Some("gpu.hbm_gib"));
    // MoE without top-k
    let moe = ModelFields {
        preset: None,
        experts: Some(4),
        ..fields_of(&resolve_model(&"llama-3-8b".into()).unwrap())
    };
    let moe = ModelFields {
        experts_per_token: None,
        ..moe
    };
    assert_eq!(
        resolve_model(&ModelInput::Custom(moe)).unwrap_err().path(),
        Some("model.experts_per_token")
    );
}

fn fields_of(m: &Model) -> ModelFields {
    ModelFields {
        preset: None,
        hf_config: None,
        name: Some(m.name.clone()),
        layers: Some(m.layers),
        hidden: Some(m.hidden),
        heads: Some(m.heads),
        kv_heads: Some(m.kv_heads),
        head_dim: Some(m.head_dim),
        intermediate: Some(m.intermediate),
        vocab: Some(m.vocab),
        max_context: Some(m.max_context),
        experts: Some(m.experts),
        experts_per_token: Some(m.experts_per_token),
        tied_embeddings: Some(m.tied_embeddings),
        moe_layers: Some(m.moe_layers),
        dense_intermediate: Some(m.dense_intermediate),
        shared_expert_intermediate: Some(m.shared_expert_intermediate),
        qkv_bias: Some(m.qkv_bias),
        qk_norm_layers: Some(m.qk_norm_layers),
        post_norms: Some(m.post_norms),
        activation: Some(m.activation),
        local_attention: m.local_attention,
        mla: m.mla,
        attention_sinks: Some(m.attention_sinks),
        expert_format: m.expert_format,
        mtp_layers: Some(m.mtp_layers),
        serve_mtp: Some(m.serve_mtp),
    }
}

#[test]
fn validation_rules() {
    let over = |f: ModelFields| {
        resolve_model(&ModelInput::Custom(ModelFields {
            preset: Some("llama-3-8b".into()),
            ..f
        }))
    };
    let path = |r: Result<Model>| r.unwrap_err().path().map(str::to_string);
    assert_eq!(
        path(over(ModelFields {
            layers: Some(0),
            ..Default::default()
        })),
        Some("model.layers".into())
    );
    assert_eq!(
        path(over(ModelFields {
            kv_heads: Some(5),
            ..Default::default()
        })),
        Some("model.heads".into())
    );
    assert_eq!(
        path(over(ModelFields {
            experts_per_token: Some(2),
            ..Default::default()
        })),
        Some("model.experts_per_token".into())
    );
    assert_eq!(
        path(over(ModelFields {
            name: Some(" ".into()),
            ..Default::default()
        })),
        Some("model.name".into())
    );
    // hidden != heads · head_dim is allowed
    assert!(over(ModelFields {
        head_dim: Some(96),
        ..Default::default()
    })
    .is_ok());

    let gov = |f: GpuFields| {
        resolve_gpu(&GpuInput::Custom(GpuFields {
            preset: Some("h100".into()),
            ..f
        }))
    };
    let gpath = |r: Result<Gpu>| r.unwrap_err().path().map(str::to_string);
    assert_eq!(
        gpath(gov(GpuFields {
            hbm_gib: Some(0.0),
            ..Default::default()
        })),
        Some("gpu.hbm_gib".into())
    );
    assert_eq!(
        gpath(gov(GpuFields {
            hbm_tbps: Some(f64::NAN),
            ..Default::default()
        })),
        Some("gpu.hbm_tbps".into())
    );
    assert_eq!(
        gpath(gov(GpuFields {
            fp8_tflops: Some(-1.0),
            ..Default::default()
        })),
        Some("gpu.fp8_tflops".into())
    );
    assert_eq!(
        gpath(gov(GpuFields {
            sms: Some(0),
            ..Default::default()
        })),
        Some("gpu.sms".into())
    );
    assert_eq!(
        gpath(gov(GpuFields {
            compute_efficiency: Some(1.01),
            ..Default::default()
        })),
        Some("gpu.compute_efficiency".into())
    );
    assert_eq!(
        gpath(gov(GpuFields {
            memory_efficiency: Some(0.0),
            ..Default::default()
        })),
        Some("gpu.memory_efficiency".into())
    );
    assert!(gov(GpuFields {
        compute_efficiency: Some(1.0),
        fp8_tflops: Some(0.0),
        ..Default::default()
    })
    .is_ok());
}
