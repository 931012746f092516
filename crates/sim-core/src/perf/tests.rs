//! Tests of `perf`.
use super::*;
use crate::catalog::{resolve_gpu, resolve_model};

fn model(name: &str) -> Model {
    resolve_model(&name.into()).unwrap()
}
fn gpu(name: &str) -> Gpu {
    resolve_gpu(&name.into()).unwrap()
}
fn roofline(m: &str, g: &str, tp: u32) -> StepCostModel {
    StepCostModel::new(&CostModelSpec::default(), &model(m), &gpu(g), tp, 1).unwrap()
}

/// `seqs` decodes, each with `ctx` tokens of KV after the step.
fn decode(seqs: u64, ctx: u64) -> BatchShape<'static> {
    BatchShape {
        prefill: &[],
        prefill_tokens: 0,
        decode_seqs: seqs,
        decode_context_sum: seqs * ctx,
        context_sum_after: seqs * ctx,
        sampled: seqs,
    }
}

fn prefill(items: &[PrefillItem]) -> BatchShape<'_> {
    let tokens: u64 = items.iter().map(|i| u64::from(i.new_tokens)).sum();
    let ctx: u64 = items
        .iter()
        .map(|i| u64::from(i.new_tokens) + u64::from(i.context_before))
        .sum();
    BatchShape {
        prefill: items,
        prefill_tokens: tokens,
        decode_seqs: 0,
        decode_context_sum: 0,
        context_sum_after: ctx,
        sampled: items.len() as u64,
    }
}

fn ms(c: &StepCostModel, b: &BatchShape) -> f64 {
    c.step_ns(b) as f64 / 1e6
}

#[test]
fn llama8b_h200_decode_batch1_near_weight_streaming_floor() {
    let m = model("llama-3-8b");
    let floor_ms = m.params() * 2.0 / 4.8e12 * 1e3; // 16.06 GB / 4.8 TB/s
    assert!((floor_ms - 3.346).abs() < 0.01, "{floor_ms}");
    let t = ms(&roofline("llama-3-8b", "h200", 1), &decode(1, 1024));
    assert!(
        t > floor_ms && t < 2.0 * floor_ms,
        "{t} ms vs floor {floor_ms} ms"
    );
}

#[test]
fn llama70b_tp4_h200_decode_batch32() {
    let t = ms(&roofline("llama-3-70b", "h200", 4), &decode(32, 2048));
    assert!((10.0..=25.0).contains(&t), "{t} ms");
}

#[test]
fn llama8b_h200_prefill_8192_is_compute_bound() {
    let m = model("llama-3-8b");
    let g = gpu("h200");
    let c = roofline("llama-3-8b", "h200", 1);
    let items = [PrefillItem {
        new_tokens: 8192,
        context_before: 0,
    }];
    let b = prefill(&items);
    let t = ms(&c, &b);
    let ideal = 2.0 * m.params() * 8192.0 / (g.bf16_tflops * 1e12 * g.compute_efficiency) * 1e3;
    assert!((t / ideal - 1.0).abs() < 0.4, "{t} ms vs ideal {ideal} ms");
    // the GEMMs run at the compute roof, not the memory roof
    let (k, n) = (4096.0, 2.0 * 14336.0);
    let compute = 2.0 * 8192.0 * k * n / (g.bf16_tflops * 1e12 * g.compute_efficiency);
    let memory = (k * n + 8192.0 * (k + n)) * 2.0 / (g.hbm_tbps * 1e12 * g.memory_efficiency);
    assert!(compute > 3.0 * memory);
    let bd = c.breakdown(&b);
    let mlp = bd.iter().find(|(n, _)| *n == "mlp").unwrap().1;
    assert!(
        (mlp - 32.0
            * 1e3
            * (compute + 2.0 * 8192.0 * 14336.0 * 4096.0 / (g.bf16_tflops * 1e12 * 0.75)))
            .abs()
            < 1e-6
    );
}

#[test]
fn breakdown_sums_to_step() {
    let c = roofline("mixtral-8x7b", "h100", 2);
    let items = [
        PrefillItem {
            new_tokens: 300,
            context_before: 700,
        },
        PrefillItem {
            new_tokens: 5,
            context_before: 0,
        },
    ];
    let mut b = prefill(&items);
    b.decode_seqs = 17;
    b.decode_context_sum = 17 * 900;
    b.sampled += 17;
    let total: f64 = c.breakdown(&b).iter().map(|(_, v)| v).sum();
    assert!((total * 1e6 - c.step_ns(&b) as f64).abs() <= 1.0);
    assert_eq!(c.breakdown(&b).len(), 11);
    assert!(c
        .breakdown(&b)
        .iter()
        .all(|(_, v)| v.is_finite() && *v >= 0.0));
}

#[test]
fn monotone_in_prefill_tokens() {
    for name in ["llama-3-8b", "mixtral-8x7b"] {
        let c = roofline(name, "h200", 1);
        let mut last = 0;
        for n in [
            1u32, 2, 7, 16, 64, 100, 256, 512, 1000, 2048, 4096, 8192, 16384,
        ] {
            let items = [PrefillItem {
                new_tokens: n,
                context_before: 100,
            }];
            let t = c.step_ns(&prefill(&items));
            assert!(t >= last, "{name} {n}: {t} < {last}");
            last = t;
        }
    }
}

#[test]
fn monotone_in_decode_seqs_and_context() {
    for (name, tp) in [("llama-3-8b", 1), ("llama-3-70b", 4), ("mixtral-8x7b", 2)] {
        let c = roofline(name, "h100", tp);
        let mut last = 0;
        for seqs in [1u64, 2, 3, 8, 31, 64, 128, 255, 511, 512, 513, 1024, 4096] {
            let t = c.step_ns(&decode(seqs, 1000));
            assert!(t >= last, "{name} seqs {seqs}: {t} < {last}");
            last = t;
        }
        let mut last = 0;
        for ctx in [1u64, 10, 100, 1000, 4096, 8192, 32768, 131_072] {
            let t = c.step_ns(&decode(8, ctx));
            assert!(t >= last, "{name} ctx {ctx}: {t} < {last}");
            last = t;
        }
        let mut last = 0;
        for before in [0u32, 1, 100, 1000, 8000, 30000, 120_000] {
            let items = [PrefillItem {
                new_tokens: 512,
                context_before: before,
            }];
            let t = c.step_ns(&prefill(&items));
            assert!(t >= last, "{name} context_before {before}: {t} < {last}");
            last = t;
        }
    }
}

#[test]
fn adding_prefill_to_decode_batch_never_speeds_it_up() {
    let c = roofline("llama-3-8b", "h100", 1);
    let base = decode(64, 2000);
    let items = [PrefillItem {
        new_tokens: 1,
        context_before: 0,
    }];
    let mut mixed = base;
    mixed.prefill = &items;
    mixed.prefill_tokens = 1;
    mixed.context_sum_after += 1;
    assert!(c.step_ns(&mixed) >= c.step_ns(&base));
}

#[test]
fn tp2_is_faster_for_large_batches() {
    let items = [PrefillItem {
        new_tokens: 4096,
        context_before: 0,
    }];
    let b = prefill(&items);
    for name in ["llama-3-8b", "llama-3-70b"] {
        let t1 = roofline(name, "h200", 1).step_ns(&b);
        let t2 = roofline(name, "h200", 2).step_ns(&b);
        assert!(t2 < t1, "{name}: tp2 {t2} >= tp1 {t1}");
    }
    let d = decode(256, 2048);
    assert!(
        roofline("llama-3-70b", "h200", 2).step_ns(&d)
            < roofline("llama-3-70b", "h200", 1).step_ns(&d)
    );
}

#[test]
fn pipeline_stages_add_transfers() {
    let spec = CostModelSpec::default();
    let m = model("llama-3-8b");
    let g = gpu("h100");
    let p1 = StepCostModel::new(&spec, &m, &g, 1, 1).unwrap();
    let p2 = StepCostModel::new(&spec, &m, &g, 1, 2).unwrap();
    let b = decode(16, 500);
    assert!(p2.step_ns(&b) > p1.step_ns(&b));
    let pp = p2
        .breakdown(&b)
        .into_iter()
        .find(|(n, _)| *n == "pp_transfer")
        .unwrap()
        .1;
    assert!(pp > 0.0);
}

#[test]
fn moe_decode_reads_only_routed_experts() {
    let c = roofline("mixtral-8x7b", "h100", 1);
    let m = model("mixtral-8x7b");
    let all_weights_ms = m.params() * 2.0 / (3.35e12 * 0.85) * 1e3;
    let t1 = ms(&c, &decode(1, 512));
    assert!(t1 < 0.5 * all_weights_ms, "{t1} vs {all_weights_ms}");
    let t64 = ms(&c, &decode(64, 512));
    assert!(t64 > all_weights_ms * 0.9 && t64 > t1, "{t64}");
}

#[test]
fn cuda_graph_only_for_small_pure_decode() {
    let c = roofline("llama-3-8b", "h100", 1);
    let launch = |b: &BatchShape| {
        c.breakdown(b)
            .into_iter()
            .find(|(n, _)| *n == "launch")
            .unwrap()
            .1
    };
    assert!((launch(&decode(8, 100)) - 0.006).abs() < 1e-12);
    let eager = StepCostModel::new(
        &CostModelSpec::Roofline {
            compute_efficiency: None,
            memory_efficiency: None,
            attention_efficiency: 0.6,
            cpu_overhead_ms: 1.0,
            cpu_per_seq_us: 5.0,
            kernel_launch_us: 50.0,
            comm_latency_us: 2.0,
            cuda_graph_max_batch: 0,
        },
        &model("llama-3-8b"),
        &gpu("h100"),
        1,
        1,
    )
    .unwrap();
    let b = decode(8, 100);
    let l = eager
        .breakdown(&b)
        .into_iter()
        .find(|(n, _)| *n == "launch")
        .unwrap()
        .1;
    assert!(l > 10.0, "{l} ms"); // 331 kernels · 50 µs outrun the GPU
}

#[test]
fn linear_exact() {
    let spec = CostModelSpec::Linear {
        base_ms: 2.5,
        per_prefill_token_ms: 0.125,
        per_decode_seq_ms: 0.25,
        per_context_token_ms: 0.0009765625, // 2^-10: exact in binary
    };
    let c = StepCostModel::new(&spec, &model("llama-3-8b"), &gpu("h100"), 1, 1).unwrap();
    let items = [PrefillItem {
        new_tokens: 100,
        context_before: 0,
    }];
    let b = BatchShape {
        prefill: &items,
        prefill_tokens: 100,
        decode_seqs: 10,
        decode_context_sum: 5000,
        context_sum_after: 5100,
        sampled: 10,
    };
    // 2.5 + 12.5 + 2.5 + 5100/1024 = 22.48046875 ms = 22_480_468.75 ns, rounded once
    assert_eq!(c.step_ns(&b), 22_480_469);
    let bd = c.breakdown(&b);
    assert_eq!(
        bd,
        vec![
            ("base", 2.5),
            ("prefill_tokens", 12.5),
            ("decode_seqs", 2.5),
            ("context_tokens", 4.98046875)
        ]
    );
    // zero coefficients still give >= 1 ns for a non-empty step, 0 for an empty one
    let zero = CostModelSpec::Linear {
        base_ms: 0.0,
        per_prefill_token_ms: 0.0,
        per_decode_seq_ms: 0.0,
        per_context_token_ms: 0.0,
    };
    let z = StepCostModel::new(&zero, &model("llama-3-8b"), &gpu("h100"), 1, 1).unwrap();
    assert_eq!(z.step_ns(&decode(1, 1)), 1);
    assert_eq!(z.step_ns(&decode(0, 0)), 0);
    assert_eq!(c.step_ns(&decode(0, 0)), 0);
    assert_eq!(roofline("llama-3-8b", "h100", 1).step_ns(&decode(0, 0)), 0);
}

#[test]
fn bad_specs_are_config_errors_with_paths() {
    let lin = |b: f64, p: f64| CostModelSpec::Linear {
        base_ms: b,
        per_prefill_token_ms: p,
        per_decode_seq_ms: 0.0,
        per_context_token_ms: 0.0,
    };
    assert_eq!(
        lin(-1.0, 0.0).validate().unwrap_err().path(),
        Some("base_ms")
    );
    assert_eq!(
        lin(0.0, f64::NAN).validate().unwrap_err().path(),
        Some("per_prefill_token_ms")
    );
    assert_eq!(
        lin(f64::INFINITY, 0.0).validate().unwrap_err().path(),
        Some("base_ms")
    );
    let roof = |ce: Option<f64>, ae: f64, cpu: f64| CostModelSpec::Roofline {
        compute_efficiency: ce,
        memory_efficiency: None,
        attention_efficiency: ae,
        cpu_overhead_ms: cpu,
        cpu_per_seq_us: 0.0,
        kernel_launch_us: 0.0,
        comm_latency_us: 0.0,
        cuda_graph_max_batch: 0,
    };
    assert!(roof(None, 0.6, 0.0).validate().is_ok());
    assert_eq!(
        roof(Some(1.5), 0.6, 0.0).validate().unwrap_err().path(),
        Some("compute_efficiency")
    );
    assert_eq!(
        roof(None, 0.0, 0.0).validate().unwrap_err().path(),
        Some("attention_efficiency")
    );
    assert_eq!(
        roof(None, 0.6, f64::NAN).validate().unwrap_err().path(),
        Some("cpu_overhead_ms")
    );
    let err = StepCostModel::new(&lin(-1.0, 0.0), &model("llama-3-8b"), &gpu("h100"), 1, 1)
        .unwrap_err();
    assert_eq!(err.path(), Some("cost_model.base_ms"));
    let err = StepCostModel::new(
        &CostModelSpec::default(),
        &model("llama-3-8b"),
        &gpu("h100"),
        5,
        1,
    )
    .unwrap_err();
    assert_eq!(err.path(), Some("deployment.tp"));
}

#[test]
fn deserialize_spec() {
    let parse = |s: &str| serde_json::from_str::<CostModelSpec>(s);
    assert_eq!(parse("{}").unwrap(), CostModelSpec::default());
    assert_eq!(parse("\"roofline\"").unwrap(), CostModelSpec::default());
    match parse(r#"{"kind":"roofline","cpu_overhead_ms":2,"compute_efficiency":0.5}"#).unwrap()
    {
        CostModelSpec::Roofline {
            cpu_overhead_ms,
            compute_efficiency,
            attention_efficiency,
            ..
        } => {
            assert_eq!(cpu_overhead_ms, 2.0);
            assert_eq!(compute_efficiency, Some(0.5));
            assert_eq!(attention_efficiency, DEFAULT_ATTENTION_EFFICIENCY);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        parse(r#"{"kind":"linear","base_ms":1,"per_decode_seq_ms":0.5}"#).unwrap(),
        CostModelSpec::Linear {
            base_ms: 1.0,
            per_prefill_token_ms: 0.0,
            per_decode_seq_ms: 0.5,
            per_context_token_ms: 0.0
        }
    );
    let e = parse(r#"{"kind":"roofline","cpu_overhead":2}"#)
        .unwrap_err()
        .to_string();
    assert!(e.contains("unknown field `cpu_overhead`"), "{e}");
    let e = parse(r#"{"kind":"linear","cpu_overhead_ms":2}"#)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("`cpu_overhead_ms` does not apply to kind \"linear\""),
        "{e}"
    );
    let e = parse(r#"{"base_ms":2}"#).unwrap_err().to_string();
    assert!(
        e.contains("`base_ms` does not apply to kind \"roofline\""),
        "{e}"
    );
    let e = parse(r#"{"kind":"linaer"}"#).unwrap_err().to_string();
    assert!(e.contains("did you mean linear"), "{e}");
    let e = parse("3").unwrap_err().to_string();
    assert!(e.contains("cost model table"), "{e}");
    let e = parse("\"linear\"").unwrap_err().to_string();
    assert!(e.contains("needs coefficients"), "{e}");
    // TOML, and a serialize → deserialize round trip
    let t: CostModelSpec =
        toml::from_str("kind = \"linear\"\nbase_ms = 3.0\nper_context_token_ms = 1e-5\n")
            .unwrap();
    assert_eq!(
        t,
        CostModelSpec::Linear {
            base_ms: 3.0,
            per_prefill_token_ms: 0.0,
            per_decode_seq_ms: 0.0,
            per_context_token_ms: 1e-5
        }
    );
    for spec in [CostModelSpec::default(), t] {
        let json = serde_json::to_string(&spec).unwrap();
        assert_eq!(parse(&json).unwrap(), spec, "{json}");
    }
    assert!(serde_json::to_string(&CostModelSpec::default())
        .unwrap()
        .starts_with("{\"kind\":\"roofline\""));
}

proptest::proptest! {
    #[test]
    fn never_panics_and_is_finite(
        tp_pow in 0u32..4,
        new in proptest::collection::vec((0u32..100_000, 0u32..200_000), 0..6),
        decode_seqs in 0u64..5000,
        ctx in 0u64..200_000,
        model_ix in 0usize..5,
        gpu_ix in 0usize..4,
    ) {
        let m = crate::catalog::model_presets()[model_ix].clone();
        let g = crate::catalog::gpu_presets()[gpu_ix].clone();
        let tp = 1u32 << tp_pow;
        let c = StepCostModel::new(&CostModelSpec::default(), &m, &g, tp, 1).unwrap();
        let items: Vec<PrefillItem> = new.iter().map(|&(n, b)| PrefillItem { new_tokens: n, context_before: b }).collect();
        let mut b = prefill(&items);
        b.decode_seqs = decode_seqs;
        b.decode_context_sum = decode_seqs * ctx;
        b.sampled += decode_seqs;
        let t = c.step_ns(&b);
        proptest::prop_assert!(b.is_empty() || t >= 1);
        let more = BatchShape { decode_seqs: decode_seqs + 1, decode_context_sum: b.decode_context_sum + ctx, sampled: b.sampled + 1, ..b };
        proptest::prop_assert!(c.step_ns(&more) >= t);
    }
}
