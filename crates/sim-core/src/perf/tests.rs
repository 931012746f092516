//! Tests of `perf`.
use super::*;
use crate::catalog::{resolve_gpu, resolve_model};

fn model(name: &str) -> Model {
    resolve_model(&name.into()).unwrap()
}
fn gpu(name: &str) -> Gpu {
    resolve_gpu(&name.into()).unwrap()
}
fn with(spec: StepSpec, m: &str, g: &str, tp: u32) -> StepCostModel {
    StepCostModel::new(&CostModelSpec::Calibrated(spec), &model(m), &gpu(g), tp, 1).unwrap()
}
fn calibrated(m: &str, g: &str, tp: u32) -> StepCostModel {
    with(StepSpec::default(), m, g, tp)
}
fn eager(m: &str, g: &str, tp: u32) -> StepCostModel {
    with(StepSpec { cuda_graphs: false, ..StepSpec::default() }, m, g, tp)
}
/// The reference engine (our H200 tables' plain PyTorch), graphs on.
fn reference(m: &str, g: &str, tp: u32) -> StepCostModel {
    with(StepSpec::reference(), m, g, tp)
}
fn reference_eager(m: &str, g: &str, tp: u32) -> StepCostModel {
    with(StepSpec { cuda_graphs: false, ..StepSpec::reference() }, m, g, tp)
}

/// `seqs` decodes, each with `ctx` tokens of KV after the step.
pub(super) fn decode(seqs: u64, ctx: u64) -> BatchShape<'static> {
    BatchShape {
        prefill: &[],
        prefill_tokens: 0,
        decode_seqs: seqs,
        decode_context_sum: seqs * ctx,
        context_sum_after: seqs * ctx,
        sampled: seqs,
        decode_blocks_1024: 0,
        spec_tokens: 0,
        lora_adapters: 0,
    }
}

/// Prefills only: `items`' new tokens after their context.
pub(super) fn prefill(items: &[PrefillItem]) -> BatchShape<'_> {
    let tokens: u64 = items.iter().map(|i| u64::from(i.new_tokens)).sum();
    let ctx: u64 = items.iter().map(|i| u64::from(i.new_tokens) + u64::from(i.context_before)).sum();
    BatchShape {
        prefill: items,
        prefill_tokens: tokens,
        decode_seqs: 0,
        decode_context_sum: 0,
        context_sum_after: ctx,
        sampled: items.len() as u64,
        decode_blocks_1024: 0,
        spec_tokens: 0,
        lora_adapters: 0,
    }
}

fn ms(c: &StepCostModel, b: &BatchShape) -> f64 {
    c.step_ns(b) as f64 / 1e6
}

fn line(c: &StepCostModel, b: &BatchShape, op: &str) -> OpCost {
    c.breakdown(b).0.into_iter().find(|o| o.op == op).unwrap_or_else(|| panic!("no {op}"))
}

#[test]
fn llama8b_h200_graph_decode_between_weight_floor_and_sum_of_tables() {
    let m = model("llama-3-8b");
    let c = reference("llama-3-8b", "h200", 1);
    let b = decode(1, 1024);
    let t = ms(&c, &b);
    // weight-streaming floor: every weight once at the measured streaming bandwidth
    let p = crate::calib::Profile::builtin("h200").unwrap();
    let (lm_ms, _) = p.gemm("bf16", 4096, 128_256, 1.0).unwrap();
    let bw = 4096.0 * 128_256.0 * 2.0 / (lm_ms * 1e-3); // ~3.9 TB/s
    let floor_ms = (m.params() - 4096.0 * 128_256.0) * 2.0 / bw * 1e3; // embedding not read
    // the sum of the isolated (eager) table times of every op of the step
    let l = 32.0;
    let g = |k, n| p.gemm("bf16", k, n, 1.0).unwrap().0;
    let e = |op: &str, w: f64| p.elementwise(op, w).unwrap().0;
    let per_layer = g(4096, 6144) + g(4096, 4096) + g(4096, 28672) + g(14336, 4096)
        + 2.0 * e("rms_norm", 4096.0) + e("rope_q_and_k", 5120.0) + e("kv_write", 2048.0)
        + e("attn_out_transpose", 4096.0) + 2.0 * e("residual_add", 4096.0) + e("silu_mul", 14336.0)
        + p.attention_decode(1023.0 * 4096.0).0;
    let sum_ms = l * per_layer + lm_ms;
    assert!(t > floor_ms && t < sum_ms, "floor {floor_ms} < {t} < {sum_ms}");
    assert!((3.7..4.2).contains(&floor_ms), "{floor_ms}");
    // and much closer to the floor than to the eager sum: graphs remove the launch floors
    assert!(t < 1.7 * floor_ms, "{t}");
    let (bd, graph) = c.breakdown(&b);
    assert!(graph);
    assert_eq!(line(&c, &b, "gate_up").source, Source::Table);
    assert_eq!(line(&c, &b, "attention_decode").source, Source::Interpolated);
    let total: f64 = bd.iter().map(|o| o.ms).sum();
    assert!((total - t).abs() < 1e-3 * t, "{total} vs {t}");
}

#[test]
fn llama8b_prefill_32k_is_attention_and_gemms() {
    let m = Model { max_context: 32768, ..model("llama-3-8b") };
    let c = StepCostModel::new(&CostModelSpec::Calibrated(StepSpec::reference()), &m, &gpu("h200"), 1, 1).unwrap();
    let items = [PrefillItem { new_tokens: 32768, context_before: 0 }];
    let b = prefill(&items);
    let (bd, _) = c.breakdown(&b);
    let total: f64 = bd.iter().map(|o| o.ms).sum();
    let share = |ops: &[&str]| bd.iter().filter(|o| ops.contains(&o.op.as_str())).map(|o| o.ms).sum::<f64>() / total;
    let attention = share(&["attention_prefill"]);
    let gemms = share(&["qkv", "o", "gate_up", "down"]);
    // the table: 14.4 ms of attention per layer at 32k vs ~1 ms/1k tokens of GEMMs
    assert!((attention - 32.0 * 14.41213 / total).abs() < 0.01, "{attention}");
    assert!(attention + gemms > 0.8, "{attention} + {gemms}");
    assert!(attention > 0.3 && gemms > 0.3, "{attention} {gemms}");
    // GEMMs beyond the table's 16k rows: its tail throughput, flagged as roofline
    assert_eq!(line(&c, &b, "qkv").source, Source::Roofline);
    assert_eq!(line(&c, &b, "attention_prefill").source, Source::Table);
}

#[test]
fn eager_costs_launches_when_the_cpu_is_the_bottleneck() {
    let (g, e) = (reference("llama-3-8b", "h200", 1), reference_eager("llama-3-8b", "h200", 1));
    let small = decode(8, 512);
    // ~30 kernels per layer at ~10-25 µs of CPU each, RoPE's 16 alone ~0.4 ms; measured on
    // an H200 (benchmarks/data/h200_steps_*.json): eager 2.1-2.9x the graph replay
    let ratio = ms(&e, &small) / ms(&g, &small);
    assert!((2.0..4.0).contains(&ratio), "{} {}", ms(&e, &small), ms(&g, &small));
    assert!(line(&e, &small, "launch_exposed").ms > 10.0);
    let items = [PrefillItem { new_tokens: 8192, context_before: 0 }];
    let big = prefill(&items);
    // a large prefill is GPU-bound: eager within 2% of the graph replay
    assert!((ms(&e, &big) / ms(&g, &big) - 1.0).abs() < 0.02);
}

#[test]
fn grid_matches_the_exact_composition() {
    for (m, g, tp) in [("llama-3-8b", "h200", 1), ("llama-3-70b", "h200", 4), ("mixtral-8x7b", "h100", 2)] {
        for c in [calibrated(m, g, tp), eager(m, g, tp)] {
            for n in [1u64, 3, 17, 64, 65, 100, 333, 1000, 5000, 12345, 40000] {
                let mut b = decode(n, 700);
                b.sampled = n / 2 + 1;
                let exact: f64 = c.breakdown(&b).0.iter().map(|o| o.ms).sum();
                let t = ms(&c, &b);
                assert!((t / exact - 1.0).abs() < 2e-3, "{m} n={n}: {t} vs {exact}");
            }
        }
    }
}

#[test]
fn gpus_without_tables_use_the_roofline() {
    for g in ["l40s", "b200", "mi300x"].into_iter().filter(|g| crate::catalog::resolve_gpu(&(*g).into()).is_ok()) {
        let c = calibrated("llama-3-8b", g, 1);
        let b = decode(16, 2048);
        let (bd, _) = c.breakdown(&b);
        for o in bd.iter().filter(|o| o.op != "graph_launch") {
            assert!(matches!(o.source, Source::Roofline | Source::Model), "{g} {o:?}");
        }
    }
    // the roofline kind ignores the H200 tables
    let r = StepCostModel::new(&CostModelSpec::Roofline(StepSpec::default()), &model("llama-3-8b"), &gpu("h200"), 1, 1).unwrap();
    assert_eq!(line(&r, &decode(4, 100), "qkv").source, Source::Roofline);
    // faster hardware, faster steps
    let items = [PrefillItem { new_tokens: 4096, context_before: 0 }];
    let b = prefill(&items);
    assert!(ms(&calibrated("llama-3-8b", "a100-80g", 1), &b) > 1.5 * ms(&calibrated("llama-3-8b", "h100", 1), &b));
}

#[test]
fn precision_changes_bytes_and_rates() {
    let spec = |dtype, kv| StepSpec { dtype, kv_dtype: kv, ..StepSpec::reference() };
    let base = reference("llama-3-70b", "h200", 8);
    let fp8 = with(spec(Dtype::Fp8, Dtype::Bf16), "llama-3-70b", "h200", 8);
    let int4 = with(spec(Dtype::Int4, Dtype::Bf16), "llama-3-70b", "h200", 8);
    let kv8 = with(spec(Dtype::Bf16, Dtype::Fp8), "llama-3-70b", "h200", 8);
    let items = [PrefillItem { new_tokens: 8192, context_before: 0 }];
    let big = prefill(&items);
    let b = decode(64, 4096);
    let gemm = |c: &StepCostModel, b: &BatchShape| line(c, b, "gate_up").ms + line(c, b, "down").ms;
    // FP8 tensor cores: large GEMMs faster (the FP8 table), from the table
    assert!(gemm(&fp8, &big) < 0.8 * gemm(&base, &big));
    assert!(line(&fp8, &big, "gate_up").source <= Source::Interpolated);
    // INT4 weight-only: decode GEMMs stream a quarter of the bytes
    assert!(gemm(&int4, &b) < 0.7 * gemm(&base, &b), "{} {}", gemm(&int4, &b), gemm(&base, &b));
    assert_eq!(line(&int4, &b, "gate_up").source, Source::Model);
    // FP8 KV cache: decode attention reads half the bytes
    let att = |c: &StepCostModel| line(c, &b, "attention_decode").ms;
    assert!(att(&kv8) < 0.75 * att(&base) && att(&kv8) > 0.4 * att(&base), "{} {}", att(&kv8), att(&base));
    // no FP8 tensor cores on A100
    let e = StepCostModel::new(&CostModelSpec::Calibrated(spec(Dtype::Fp8, Dtype::Bf16)), &model("llama-3-8b"), &gpu("a100-80g"), 1, 1).unwrap_err();
    assert_eq!(e.path(), Some("cost_model.dtype"));
}

#[test]
fn fusion_shortens_steps_and_reports_fused_ops() {
    let f = |fusion| with(StepSpec { fusion, ..StepSpec::reference() }, "llama-3-8b", "h200", 1);
    let b = decode(32, 2048);
    let none = ms(&f(Fusion::None), &b);
    let fine = ms(&f(Fusion::Fine), &b);
    let coarse = ms(&f(Fusion::Coarse), &b);
    let hybrid = ms(&f(Fusion::Hybrid), &b);
    // RoPE's 16 kernels become one, SiLU·mul's 2 one (fine): ~16 floors of 2.5 µs and
    // RoPE's extra passes per layer
    assert!(none - fine > 1.2 && none - fine < 2.0, "{none} {fine}");
    assert!(coarse < fine && hybrid <= fine, "{fine} {coarse} {hybrid}");
    let ops: Vec<String> = f(Fusion::Coarse).breakdown(&b).0.into_iter().map(|o| o.op).collect();
    assert!(ops.contains(&"residual_add+rms_norm".to_string()), "{ops:?}");
    assert!(ops.contains(&"rope_q_and_k+kv_write".to_string()), "{ops:?}");
    // hybrid still fuses the small groups of a large prefill
    let items = [PrefillItem { new_tokens: 8192, context_before: 0 }];
    let big = prefill(&items);
    assert!(ms(&f(Fusion::Hybrid), &big) < ms(&f(Fusion::None), &big));
}

#[test]
fn block_table_remap_costs_only_long_contexts_with_small_blocks() {
    let c = calibrated("llama-3-8b", "h200", 1);
    let paged16 = c.clone().with_block_size(16);
    let paged256 = c.clone().with_block_size(256);
    let short = decode(8, 1024);
    assert_eq!(c.step_ns(&short), paged16.step_ns(&short));
    let m = Model { max_context: 131072, ..model("llama-3-8b") };
    let long_c = StepCostModel::new(&CostModelSpec::default(), &m, &gpu("h200"), 1, 1).unwrap();
    let long = decode(1, 131072);
    let d16 = ms(&long_c.clone().with_block_size(16), &long) - ms(&long_c, &long);
    let d256 = ms(&long_c.clone().with_block_size(256), &long) - ms(&long_c, &long);
    // 32 layers x 7,936 misses x 2 cycles at 1.98 GHz = 0.26 ms
    assert!((d16 - 0.2565).abs() < 0.01, "{d16}");
    assert!(d256 < 0.04 * d16, "{d256}");
    let _ = paged256;
}

#[test]
fn monotone_in_tokens_and_context() {
    let c = calibrated("llama-3-70b", "h200", 4);
    let mut last = 0;
    for n in [1u32, 16, 100, 512, 2048, 8192, 16384] {
        let items = [PrefillItem { new_tokens: n, context_before: 0 }];
        let t = c.step_ns(&prefill(&items));
        assert!(t >= last, "{n}");
        last = t;
    }
    let mut last = 0;
    for ctx in [1u64, 100, 1000, 8000] {
        let t = c.step_ns(&decode(16, ctx));
        assert!(t >= last, "{ctx}");
        last = t;
    }
    let mut last = 0;
    for seqs in [1u64, 8, 64, 256] {
        let t = c.step_ns(&decode(seqs, 1000));
        assert!(t >= last, "{seqs}");
        last = t;
    }
}

#[test]
fn tensor_and_pipeline_parallel_add_communication() {
    let b = decode(32, 2048);
    let tp4 = calibrated("llama-3-70b", "h200", 4);
    assert_eq!(line(&tp4, &b, "tp_allreduce").source, Source::Model);
    assert!(line(&tp4, &b, "tp_logits_gather").ms > 0.0);
    let pp2 = StepCostModel::new(&CostModelSpec::default(), &model("llama-3-70b"), &gpu("h200"), 4, 2).unwrap();
    assert!(pp2.step_ns(&b) > tp4.step_ns(&b));
    // TP 8 beats TP 1 on a 70B prefill
    let items = [PrefillItem { new_tokens: 4096, context_before: 0 }];
    let p = prefill(&items);
    let m = Model { layers: 8, ..model("llama-3-70b") };
    let one = StepCostModel::new(&CostModelSpec::default(), &m, &gpu("h200"), 1, 1).unwrap();
    let eight = StepCostModel::new(&CostModelSpec::default(), &m, &gpu("h200"), 8, 1).unwrap();
    assert!(eight.step_ns(&p) * 3 < one.step_ns(&p));
}

#[test]
fn moe_decode_reads_only_routed_experts() {
    let c = calibrated("mixtral-8x7b", "h100", 1);
    let one = line(&c, &decode(1, 512), "gate_up").ms;
    let many = line(&c, &decode(64, 512), "gate_up").ms;
    // 1 token reaches 2 experts, 64 tokens all 8: ~4x the weight bytes
    assert!(many > 3.0 * one && many < 5.0 * one, "{one} {many}");
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
    let items = [PrefillItem { new_tokens: 100, context_before: 0 }];
    let b = BatchShape {
        prefill: &items,
        prefill_tokens: 100,
        decode_seqs: 10,
        decode_context_sum: 5000,
        context_sum_after: 5100,
        sampled: 10,
        decode_blocks_1024: 0,
        spec_tokens: 0,
        lora_adapters: 0,
    };
    // 2.5 + 12.5 + 2.5 + 5100/1024 = 22.48046875 ms = 22_480_468.75 ns, rounded once
    assert_eq!(c.step_ns(&b), 22_480_469);
    let bd: Vec<(String, f64)> = c.breakdown(&b).0.into_iter().map(|o| (o.op, o.ms)).collect();
    let expect = [("base", 2.5), ("prefill_tokens", 12.5), ("decode_seqs", 2.5), ("context_tokens", 4.98046875)];
    assert_eq!(bd, expect.iter().map(|(n, v)| (n.to_string(), *v)).collect::<Vec<_>>());
    let zero = CostModelSpec::Linear { base_ms: 0.0, per_prefill_token_ms: 0.0, per_decode_seq_ms: 0.0, per_context_token_ms: 0.0 };
    let z = StepCostModel::new(&zero, &model("llama-3-8b"), &gpu("h100"), 1, 1).unwrap();
    assert_eq!(z.step_ns(&decode(1, 1)), 1);
    assert_eq!(z.step_ns(&decode(0, 0)), 0);
    assert_eq!(c.step_ns(&decode(0, 0)), 0);
    assert_eq!(calibrated("llama-3-8b", "h100", 1).step_ns(&decode(0, 0)), 0);
}

#[test]
fn bad_specs_are_config_errors_with_paths() {
    let lin = |b: f64, p: f64| CostModelSpec::Linear { base_ms: b, per_prefill_token_ms: p, per_decode_seq_ms: 0.0, per_context_token_ms: 0.0 };
    assert_eq!(lin(-1.0, 0.0).validate().unwrap_err().path(), Some("base_ms"));
    assert_eq!(lin(0.0, f64::NAN).validate().unwrap_err().path(), Some("per_prefill_token_ms"));
    let s = |f: fn(&mut StepSpec)| {
        let mut x = StepSpec::default();
        f(&mut x);
        CostModelSpec::Calibrated(x).validate()
    };
    assert!(s(|_| ()).is_ok());
    assert_eq!(s(|x| x.compute_efficiency = Some(1.5)).unwrap_err().path(), Some("compute_efficiency"));
    assert_eq!(s(|x| x.cpu_overhead_ms = f64::NAN).unwrap_err().path(), Some("cpu_overhead_ms"));
    assert_eq!(s(|x| x.kernel_floor_us = -1.0).unwrap_err().path(), Some("kernel_floor_us"));
    assert_eq!(s(|x| x.kv_dtype = Dtype::Int4).unwrap_err().path(), Some("kv_dtype"));
    let err = StepCostModel::new(&lin(-1.0, 0.0), &model("llama-3-8b"), &gpu("h100"), 1, 1).unwrap_err();
    assert_eq!(err.path(), Some("cost_model.base_ms"));
    let err = StepCostModel::new(&CostModelSpec::default(), &model("llama-3-8b"), &gpu("h100"), 5, 1).unwrap_err();
    assert_eq!(err.path(), Some("deployment.tp"));
}

#[test]
fn deserialize_spec() {
    let parse = |s: &str| serde_json::from_str::<CostModelSpec>(s);
    assert_eq!(parse("{}").unwrap(), CostModelSpec::default());
    assert_eq!(parse("\"calibrated\"").unwrap(), CostModelSpec::default());
    assert_eq!(parse("\"roofline\"").unwrap(), CostModelSpec::Roofline(StepSpec::default()));
    match parse(r#"{"kind":"roofline","cpu_overhead_ms":2,"compute_efficiency":0.5,"fusion":"hybrid","dtype":"fp8","cuda_graphs":false}"#).unwrap() {
        CostModelSpec::Roofline(s) => {
            assert_eq!(s.cpu_overhead_ms, 2.0);
            assert_eq!(s.compute_efficiency, Some(0.5));
            assert_eq!((s.fusion, s.dtype, s.cuda_graphs), (Fusion::Hybrid, Dtype::Fp8, false));
            assert_eq!(s.kernel_floor_us, DEFAULT_KERNEL_FLOOR_US);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        parse(r#"{"kind":"linear","base_ms":1,"per_decode_seq_ms":0.5}"#).unwrap(),
        CostModelSpec::Linear { base_ms: 1.0, per_prefill_token_ms: 0.0, per_decode_seq_ms: 0.5, per_context_token_ms: 0.0 }
    );
    let err = |s: &str| parse(s).unwrap_err().to_string();
    assert!(err(r#"{"kind":"roofline","cpu_overhead":2}"#).contains("unknown field `cpu_overhead`"));
    assert!(err(r#"{"kind":"linear","cpu_overhead_ms":2}"#).contains("`cpu_overhead_ms` does not apply to kind \"linear\""));
    assert!(err(r#"{"base_ms":2}"#).contains("`base_ms` does not apply to kind \"calibrated\""));
    assert!(err(r#"{"kind":"linaer"}"#).contains("did you mean linear"));
    assert!(err(r#"{"fusion":"coarser"}"#).contains("did you mean coarse"));
    assert!(err(r#"{"dtype":"fp16"}"#).contains("dtype"));
    assert!(err(r#"{"kv_dtype":"int4"}"#).contains("kv_dtype"));
    assert!(err("3").contains("cost model table"));
    assert!(err("\"linear\"").contains("needs coefficients"));
    let t: CostModelSpec = toml::from_str("kind = \"linear\"\nbase_ms = 3.0\nper_context_token_ms = 1e-5\n").unwrap();
    let tuned = parse(r#"{"fusion":"fine","kv_dtype":"fp8","launch_us":12,"cuda_graph_max_tokens":512}"#).unwrap();
    for spec in [CostModelSpec::default(), t, tuned] {
        let json = serde_json::to_string(&spec).unwrap();
        assert_eq!(parse(&json).unwrap(), spec, "{json}");
    }
    assert!(serde_json::to_string(&CostModelSpec::default()).unwrap().starts_with("{\"kind\":\"calibrated\""));
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
        graphs in proptest::bool::ANY,
    ) {
        let m = crate::catalog::model_presets()[model_ix].clone();
        let g = crate::catalog::gpu_presets()[gpu_ix].clone();
        let tp = 1u32 << tp_pow;
        let spec = CostModelSpec::Calibrated(StepSpec { cuda_graphs: graphs, ..StepSpec::default() });
        let c = StepCostModel::new(&spec, &m, &g, tp, 1).unwrap().with_block_size(16);
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

/// A PP replica is a pipeline: pp = 2 splits a 32-sequence decode into 2 micro-batches of
/// 16; each crosses 2 stages of F/2 (F = the whole model's forward of 16 sequences, from the
/// pp = 1 model) and one boundary of x: makespan = F/2 + x + F/2 + (2 − 1)·max(F/2, x).
/// When the transfer is the slowest stage it bounds the period instead: F + 2x.
#[test]
fn a_pp_replica_is_a_pipeline_of_micro_batches() {
    let spec = CostModelSpec::Calibrated(StepSpec { cpu_overhead_ms: 0.5, ..StepSpec::default() });
    let (m, g) = (model("llama-3-8b"), gpu("h100"));
    let pp1 = StepCostModel::new_external_comm(&spec, &m, &g, 1, 1).unwrap();
    let pp2 = StepCostModel::new_external_comm(&spec, &m, &g, 1, 2).unwrap();
    let (b, half) = (decode(32, 2048), decode(16, 2048));
    assert_eq!(pp2.micro_batches(&b), 2);
    assert_eq!(pp2.micro_batches(&decode(1, 2048)), 1);
    let cpu = 0.5e-3;
    let f = pp1.step_ns(&half) as f64 * 1e-9 - cpu;
    let x = 1e-4;
    assert!(f / 2.0 > x);
    let want = f / 2.0 + x + f / 2.0 + (f / 2.0).max(x) + cpu;
    let got = pp2.step_ns_pipeline(&b, 2, 0.0, x) as f64 * 1e-9;
    assert!((got - want).abs() <= 2e-9, "{got} vs {want}");
    let x = 0.05;
    let want = f + 2.0 * x + cpu;
    let got = pp2.step_ns_pipeline(&b, 2, 0.0, x) as f64 * 1e-9;
    assert!((got - want).abs() <= 2e-9, "{got} vs {want}");
    // TP AllReduces of a micro-batch join the stages: F + ar split over 2 stages.
    let ar = 2e-3;
    let want = 1.5 * (f + ar) + 1e-4 + cpu;
    let got = pp2.step_ns_pipeline(&b, 2, ar, 1e-4) as f64 * 1e-9;
    assert!((got - want).abs() <= 2e-9, "{got} vs {want}");
}

#[test]
fn operator_gpu_times_never_shrink_with_more_tokens() {
    // Noisy table rows (a GEMM measured slower at 32 rows than at 64) must not make a
    // larger batch cheaper: the GPU time is the monotone envelope of the rows above it.
    let r = ops::Rates::new(&gpu("h200"), &StepSpec::default(), true);
    let grid: Vec<f64> = (0..=140).map(|i| libm::pow(2.0, f64::from(i) / 10.0)).collect();
    for (k, n) in [(4096, 6144), (4096, 4096), (4096, 28672), (14336, 4096), (8192, 10240), (1024, 8192), (4096, 128256)] {
        let times: Vec<f64> = grid.iter().map(|&m| r.gemm(m, k, n).gpu_s).collect();
        for (w, m) in times.windows(2).zip(&grid) {
            assert!(w[1] >= w[0] * (1.0 - 1e-9), "gemm {k}x{n} at m={m}: {} then {}", w[0], w[1]);
        }
    }
    for (op, width, kernels) in [("rms_norm", 4096.0, 1.0), ("attn_out_transpose", 4096.0, 1.0), ("rope_q_and_k", 5120.0, 16.0), ("silu_mul", 14336.0, 2.0)] {
        let times: Vec<f64> = grid.iter().map(|&m| r.elementwise(op, m, width, kernels, 4.0 * width).gpu_s).collect();
        for (w, m) in times.windows(2).zip(&grid) {
            assert!(w[1] >= w[0] * (1.0 - 1e-9), "{op} at m={m}: {} then {}", w[0], w[1]);
        }
    }
}

#[test]
fn the_vllm_engine_runs_its_fused_kernels_once_each() {
    let (v, r) = (calibrated("llama-3-8b", "h100", 1), reference("llama-3-8b", "h100", 1));
    let b = decode(32, 1024);
    let ops: Vec<String> = v.breakdown(&b).0.into_iter().map(|o| o.op).collect();
    for op in ["add_rms_norm", "attention", "rope_q_and_k", "kv_write", "silu_mul", "kernel_gaps"] {
        assert!(ops.iter().any(|o| o == op), "{op} missing from {ops:?}");
    }
    // no layout copy after attention, no separate residual add, no replay launch on the
    // step's critical path (async scheduling launches it during the previous step)
    for op in ["attn_out_transpose", "residual_add", "attention_decode", "graph_launch"] {
        assert!(!ops.iter().any(|o| o == op), "{op} in {ops:?}");
    }
    assert!(ms(&v, &b) < ms(&r, &b), "{} {}", ms(&v, &b), ms(&r, &b));
    // the breakdown adds up to the step
    let total: f64 = v.breakdown(&b).0.iter().map(|o| o.ms).sum();
    assert!((total / ms(&v, &b) - 1.0).abs() < 2e-3);
}

#[test]
fn vllm_attention_is_one_call_per_layer_for_the_whole_batch() {
    // A100: both engines price each request's attention from Vidur's in-stream tables;
    // vLLM's varlen call pays the fixed cost of one call, not of five.
    let (v, r) = (calibrated("llama-3-8b", "a100-80g", 1), reference("llama-3-8b", "a100-80g", 1));
    let items = [PrefillItem { new_tokens: 16, context_before: 576 }; 4];
    let b = BatchShape { prefill: &items, prefill_tokens: 64, decode_seqs: 20, decode_context_sum: 20 * 700, context_sum_after: 20 * 700 + 4 * 592, sampled: 24, decode_blocks_1024: 0, spec_tokens: 0, lora_adapters: 0 };
    let merged = line(&v, &b, "attention").ms;
    let calls = line(&r, &b, "attention_prefill").ms + line(&r, &b, "attention_decode").ms;
    let floor_ms = 32.0 * crate::calib::Profile::builtin("a100-80g").unwrap().attention_decode(0.0).0;
    assert!(merged < calls, "{merged} {calls}");
    assert!((calls - merged - 4.0 * floor_ms).abs() < 1e-9, "{calls} - {merged} vs 4 × {floor_ms}");
}

#[test]
fn vllm_all_reduce_is_custom_on_nvlink_and_nccl_on_pcie() {
    let b = decode(32, 1024);
    let ar = |g: &str, tp: u32| line(&calibrated("llama-3-70b", g, tp), &b, "tp_allreduce").ms / 160.0;
    // 32 × 8192 × 2 B = 512 KiB per all-reduce: one 6 µs stage at TP 2; two at TP 4 and 8
    let h2 = ar("h100", 2);
    assert!((h2 - (6e-3 + 524288.0 / (450e9 * 0.8) * 1e3)).abs() < 1e-9, "{h2}");
    assert!(ar("h100", 4) > h2 && ar("h100", 4) < 2.0 * h2, "{}", ar("h100", 4));
    // the reference engine's NCCL ring costs more per call at TP 4
    let nccl = line(&reference("llama-3-70b", "h100", 4), &b, "tp_allreduce").ms / 160.0;
    assert!(nccl > ar("h100", 4), "{nccl}");
    // no NVLink on an L40S: NCCL's ring over PCIe
    assert!(ar("l40s", 4) > 2.0 * ar("h100", 4), "{}", ar("l40s", 4));
}

/// A decode step must not get slower with TP at equal per-GPU work beyond its
/// communication: Llama-3-70B at TP k does per GPU what a model with 1/k of its heads, MLP
/// width and vocabulary does at TP 1.
#[test]
fn tensor_parallelism_adds_only_communication() {
    let m = model("llama-3-70b");
    for g in ["h100", "h200", "a100-80g", "l40s", "b200"] {
        for tp in [2u32, 4, 8] {
            let shard = Model {
                heads: m.heads / tp,
                kv_heads: (m.kv_heads / tp).max(1),
                intermediate: m.intermediate / tp,
                vocab: m.vocab / tp,
                ..m.clone()
            };
            let full = StepCostModel::new(&CostModelSpec::default(), &m, &gpu(g), tp, 1).unwrap();
            let one = StepCostModel::new(&CostModelSpec::default(), &shard, &gpu(g), 1, 1).unwrap();
            for b in [decode(1, 512), decode(16, 1024), decode(128, 2048)] {
                let (bd, _) = full.breakdown(&b);
                let comm: f64 = bd.iter().filter(|o| o.op.starts_with("tp_")).map(|o| o.ms).sum();
                // the collectives' own kernels leave a graph's inter-kernel gap each
                let gaps = (2.0 * 80.0 + 1.0) * 0.3e-3;
                let (t_full, t_one) = (ms(&full, &b), ms(&one, &b));
                assert!(t_full - comm <= t_one + gaps + 1e-6, "{g} tp{tp} {}: {t_full} - {comm} > {t_one}", b.decode_seqs);
                assert!(t_full - comm >= t_one - 1e-6, "{g} tp{tp}: {t_full} - {comm} < {t_one}");
            }
        }
    }
}

#[test]
fn vllm_captures_graphs_up_to_twice_max_num_seqs() {
    let c = calibrated("llama-3-8b", "h100", 1).with_max_num_seqs(64);
    assert!(c.breakdown(&decode(128, 512)).1);
    assert!(!c.breakdown(&decode(129, 512)).1);
    // at most 512 tokens whatever max_num_seqs
    let big = calibrated("llama-3-8b", "h100", 1).with_max_num_seqs(1024);
    assert!(big.breakdown(&decode(512, 512)).1 && !big.breakdown(&decode(513, 512)).1);
    // an explicit bound wins
    let fixed = with(StepSpec { cuda_graph_max_tokens: Some(8), ..StepSpec::default() }, "llama-3-8b", "h100", 1).with_max_num_seqs(64);
    assert!(!fixed.breakdown(&decode(9, 512)).1);
    // fusion is the reference engine's what-if
    let spec = CostModelSpec::Calibrated(StepSpec { fusion: Fusion::Fine, ..StepSpec::default() });
    assert_eq!(spec.validate().unwrap_err().path(), Some("fusion"));
}

/// GPUs rank physically at defaults: on the same step, a GPU at least as capable as another
/// in every figure is never predicted slower — whichever source (a profile measured in
/// another engine, or the roofline) prices each of them. Over every pair of GPU presets.
#[test]
fn a_faster_gpu_is_never_predicted_slower() {
    let gpus = crate::catalog::gpu_presets();
    let items = |n: u32, ctx: u32| [PrefillItem { new_tokens: n, context_before: ctx }];
    let (p512, p2k, p8k, chunk) = (items(512, 0), items(2048, 0), items(8192, 0), items(1024, 4096));
    let shapes: Vec<BatchShape> = vec![
        decode(1, 128),
        decode(8, 1024),
        decode(32, 4096),
        decode(256, 2048),
        prefill(&p512),
        prefill(&p2k),
        prefill(&p8k),
        BatchShape { decode_seqs: 64, decode_context_sum: 64 * 1500, context_sum_after: 64 * 1500 + 5120, sampled: 65, ..prefill(&chunk) },
    ];
    let mut pairs = 0;
    for (name, tp) in [("llama-3-8b", 1u32), ("llama-3-8b", 2), ("llama-3-70b", 4), ("llama-3-70b", 8), ("mixtral-8x7b", 2), ("qwen2.5-72b", 4)] {
        let m = model(name);
        for a in &gpus {
            for b in gpus.iter().filter(|b| b.name != a.name && a.dominates(b)) {
                pairs += 1;
                let ca = StepCostModel::new(&CostModelSpec::default(), &m, a, tp, 1).unwrap().with_block_size(16);
                let cb = StepCostModel::new(&CostModelSpec::default(), &m, b, tp, 1).unwrap().with_block_size(16);
                for s in &shapes {
                    let (ta, tb) = (ca.step_ns(s), cb.step_ns(s));
                    assert!(ta <= tb, "{name} tp{tp}: {} {ta} ns > {} {tb} ns on {:?}", a.name, b.name, (s.prefill_tokens, s.decode_seqs));
                }
            }
        }
    }
    assert!(pairs >= 6 * 8, "{pairs}");
}

/// A GEMM shape without a table borrows its efficiency from the nearest measured shapes:
/// Llama-2-7B's GEMMs predicted from the H100 profile with every Llama-2-7B table removed
/// land closer to the removed rows than the roofline at the profile's fitted rates.
#[test]
fn unprofiled_gemm_shapes_take_their_neighbours_efficiency() {
    let text = crate::calib::builtin_text("h100").unwrap();
    let mut v: serde_json::Value = serde_json::from_str(text).unwrap();
    let held: Vec<serde_json::Value> = v["gemm"].as_array().unwrap().iter().filter(|t| t["label"].as_str().unwrap().starts_with("Llama-2-7b")).cloned().collect();
    v["gemm"].as_array_mut().unwrap().retain(|t| !t["label"].as_str().unwrap().starts_with("Llama-2-7b"));
    let spec = StepSpec { profile: Some(v), ..StepSpec::default() };
    let r = ops::Rates::new(&gpu("h100"), &spec, true);
    let (mut transfer, mut roof, mut rows) = (0.0, 0.0, 0.0);
    for t in held.iter().filter(|t| t["dtype"] == "bf16") {
        let (k, n) = (t["k"].as_u64().unwrap() as u32, t["n"].as_u64().unwrap() as u32);
        for (m, ms) in t["m"].as_array().unwrap().iter().zip(t["ms"].as_array().unwrap()) {
            let (m, s) = (m.as_f64().unwrap(), ms.as_f64().unwrap() * 1e-3);
            let g = r.gemm(m, k, n);
            assert_eq!(g.src, Source::Interpolated);
            transfer += (g.gpu_s / s - 1.0).abs();
            roof += (r.gemm_roof(m, f64::from(k), f64::from(n)) / s - 1.0).abs();
            rows += 1.0;
        }
    }
    let (transfer, roof) = (transfer / rows, roof / rows);
    assert!(rows > 200.0 && transfer < 0.10 && transfer < 0.7 * roof, "{rows} rows: transfer {transfer}, roofline {roof}");
}
