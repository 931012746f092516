//! Tests of `catalog`.
use super::*;

fn rel(a: f64, b: f64) -> f64 {
    (a - b).abs() / b
}

#[test]
fn param_counts_match_published_sizes() {
    let m = |n: &str| resolve_model(&n.into()).unwrap();
    assert!(
        rel(m("llama-3-8b").params(), 8.03e9) < 0.01,
        "{}",
        m("llama-3-8b").params()
    );
    assert!(
        rel(m("llama-3-70b").params(), 70.6e9) < 0.01,
        "{}",
        m("llama-3-70b").params()
    );
    assert!(
        rel(m("mixtral-8x7b").params(), 46.7e9) < 0.01,
        "{}",
        m("mixtral-8x7b").params()
    );
    assert!(
        rel(m("llama-3.1-405b").params(), 405.8e9) < 0.01,
        "{}",
        m("llama-3.1-405b").params()
    );
    assert!(
        rel(m("qwen2.5-72b").params(), 72.7e9) < 0.01,
        "{}",
        m("qwen2.5-72b").params()
    );
    // exact arithmetic for llama-3-8b
    let l8 = m("llama-3-8b");
    let layer =
        4096.0 * 4096.0 * 2.0 + 2.0 * 4096.0 * 1024.0 + 3.0 * 4096.0 * 14336.0 + 2.0 * 4096.0;
    assert_eq!(l8.params_per_layer(), layer);
    assert_eq!(l8.params(), 32.0 * layer + 2.0 * 128256.0 * 4096.0 + 4096.0);
    let mut tied = l8.clone();
    tied.tied_embeddings = true;
    assert_eq!(l8.params() - tied.params(), 128256.0 * 4096.0);
    // 2 · 32 layers · 8 kv heads · 128 · 2 bytes = 128 KiB per token
    assert_eq!(l8.kv_bytes_per_token(2.0), 131072.0);
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
