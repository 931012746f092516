//! Tests that the step model's ops follow each architecture: experts and shared experts,
//! interleaved dense/MoE layers, q/k/v bias and q/k norm, sliding-window and chunked
//! attention, and the GPU record's links.
use super::tests::{decode, prefill};
use super::*;
use crate::catalog::{resolve_gpu, resolve_model, LocalAttention, LocalKind, ModelFields, ModelInput, WeightFormat};

fn model(name: &str) -> Model {
    resolve_model(&name.into()).unwrap()
}

fn from_config(text: &str) -> Model {
    let v: serde_json::Value = serde_json::from_str(text).unwrap();
    resolve_model(&ModelInput::Custom(ModelFields { hf_config: Some(v), ..Default::default() })).unwrap()
}

/// The reference engine, whose breakdown names each attention call and unfused op (the
/// architecture's op structure; `vllm_engine_keeps_the_architectures_ops` checks vLLM's).
fn cost(m: &Model, g: &str, tp: u32) -> StepCostModel {
    let gpu = resolve_gpu(&g.into()).unwrap();
    StepCostModel::new(&CostModelSpec::Calibrated(StepSpec::reference()), m, &gpu, tp, 1).unwrap()
}

fn vllm(m: &Model, g: &str, tp: u32) -> StepCostModel {
    let gpu = resolve_gpu(&g.into()).unwrap();
    StepCostModel::new(&CostModelSpec::default(), m, &gpu, tp, 1).unwrap()
}

#[test]
fn vllm_engine_keeps_the_architectures_ops() {
    let b = decode(32, 2048);
    // Qwen3's q/k norms, Qwen2.5's bias: present in vLLM's step too
    let q3 = model("qwen3-14b");
    assert!(line(&vllm(&q3, "h100", 1), &b, "qk_norm") > 0.0);
    let q = model("qwen2.5-7b");
    assert!(line(&vllm(&q, "h100", 1), &b, "qkv_bias") > 0.0);
    // Gemma 2: a post-norm before each fused add + norm; GELU-gated MLP
    let g2 = from_config(include_str!("../../../../tests/data/hf_configs/gemma-2-9b.json"));
    let c = vllm(&g2, "h200", 1);
    let c0 = vllm(&Model { post_norms: false, ..g2.clone() }, "h200", 1);
    assert!(line(&c, &b, "rms_norm") > 10.0 * line(&c0, &b, "rms_norm"));
    assert!(line(&c, &b, "gelu_mul") > 0.0 && line(&c, &b, "silu_mul") == 0.0);
    // sliding window: decode beyond it reads the window only
    let mistral = from_config(include_str!("../../../../tests/data/hf_configs/mistral-7b-v0.1.json"));
    let global = Model { local_attention: None, ..mistral.clone() };
    let long = decode(8, 32768);
    assert!(line(&vllm(&mistral, "h200", 1), &long, "attention") < 0.25 * line(&vllm(&global, "h200", 1), &long, "attention"));
    // Scout: routed experts and a shared expert
    let scout = model("llama-4-scout");
    let c = vllm(&scout, "h200", 8);
    for op in ["gate_up", "shared_gate_up", "moe_router"] {
        assert!(line(&c, &b, op) > 0.0, "{op}");
    }
}


/// The breakdown line `op` (ms, summed over layers), 0 when absent.
fn line(c: &StepCostModel, b: &BatchShape, op: &str) -> f64 {
    c.breakdown(b).0.iter().find(|o| o.op == op).map_or(0.0, |o| o.ms)
}

fn names(c: &StepCostModel, b: &BatchShape) -> Vec<String> {
    c.breakdown(b).0.into_iter().map(|o| o.op).collect()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1e-12)
}

#[test]
fn moe_layers_run_the_router_routed_experts_and_the_shared_expert() {
    let scout = model("llama-4-scout");
    let c = cost(&scout, "h200", 4);
    let b = decode(16, 2048);
    let ops = names(&c, &b);
    for op in ["moe_router", "moe_permute", "gate_up", "silu_mul", "down", "shared_gate_up", "shared_silu_mul", "shared_down"] {
        assert!(ops.iter().any(|o| o == op), "{op} missing from {ops:?}");
    }
    assert!(!ops.iter().any(|o| o.starts_with("dense_")), "{ops:?}");
    // The shared expert is a dense MLP of the expert's width on every layer: dropping it
    // shortens the step by about its lines.
    let no_shared = Model { shared_expert_intermediate: 0, ..scout.clone() };
    let c0 = cost(&no_shared, "h200", 4);
    let shared_ms = line(&c, &b, "shared_gate_up") + line(&c, &b, "shared_silu_mul") + line(&c, &b, "shared_down");
    let saved = (c.step_ns(&b) - c0.step_ns(&b)) as f64 / 1e6;
    assert!(shared_ms > 0.0 && (saved / shared_ms - 1.0).abs() < 0.2, "saved {saved} ms vs lines {shared_ms} ms");
    // 16 decodes, top-1 of 16 experts: 16 routed copies over up to 16 experts, each
    // reading its own weights, cost more than the one shared expert.
    assert!(line(&c, &b, "gate_up") > line(&c, &b, "shared_gate_up"));
}

#[test]
fn interleaved_dense_and_moe_layers_count_at_their_share() {
    // Llama 4 Maverick's layout over Scout's sizes: half the layers MoE, half a dense MLP
    // of intermediate_size_mlp.
    let all_moe = Model { shared_expert_intermediate: 0, ..model("llama-4-scout") };
    let half = Model { moe_layers: 24, dense_intermediate: 16384, ..all_moe.clone() };
    let dense = Model {
        experts: 1,
        experts_per_token: 1,
        moe_layers: 0,
        intermediate: 16384,
        dense_intermediate: 16384,
        ..all_moe.clone()
    };
    let b = decode(8, 1024);
    let (ch, cm, cd) = (cost(&half, "h200", 2), cost(&all_moe, "h200", 2), cost(&dense, "h200", 2));
    assert!(close(line(&ch, &b, "dense_gate_up"), 0.5 * line(&cd, &b, "gate_up")));
    assert!(close(line(&ch, &b, "dense_down"), 0.5 * line(&cd, &b, "down")));
    assert!(close(line(&ch, &b, "gate_up"), 0.5 * line(&cm, &b, "gate_up")));
    assert!(close(line(&ch, &b, "moe_router"), 0.5 * line(&cm, &b, "moe_router")));
    // The step lies between its two pure forms.
    let (th, tm, td) = (ch.step_ns(&b), cm.step_ns(&b), cd.step_ns(&b));
    assert!(th > tm.min(td) && th < tm.max(td), "{td} {th} {tm}");
}

#[test]
fn qkv_bias_and_qk_norm_are_the_small_ops_they_are() {
    let b = decode(32, 2048);
    // Qwen2.5: the bias rides in the qkv GEMM's epilogue (no kernel of its own).
    let q = model("qwen2.5-7b");
    let c = cost(&q, "h200", 1);
    let c0 = cost(&Model { qkv_bias: false, ..q.clone() }, "h200", 1);
    let bias = line(&c, &b, "qkv_bias");
    assert!(bias > 0.0 && bias < 0.01 * line(&c, &b, "qkv"), "bias {bias} ms");
    let extra = c.step_ns(&b) as f64 / c0.step_ns(&b) as f64 - 1.0;
    assert!(extra > 0.0 && extra < 1e-3, "{extra}");
    // Qwen3: one RMSNorm over q's heads and one over k's on every layer.
    let q3 = model("qwen3-14b");
    let c = cost(&q3, "h200", 1);
    let c0 = cost(&Model { qk_norm_layers: 0, ..q3.clone() }, "h200", 1);
    let norm = line(&c, &b, "qk_norm");
    assert!(norm > 0.0 && norm < line(&c, &b, "rms_norm"), "qk_norm {norm} ms");
    let saved = (c.step_ns(&b) - c0.step_ns(&b)) as f64 / 1e6;
    assert!(saved > 0.5 * norm && saved < 2.0 * norm, "{saved} vs {norm}");
    // Gemma 2: four norms a layer instead of two, and a GELU-gated MLP.
    let g2 = from_config(include_str!("../../../../tests/data/hf_configs/gemma-2-9b.json"));
    let c = cost(&g2, "h200", 1);
    let c0 = cost(&Model { post_norms: false, ..g2.clone() }, "h200", 1);
    // 4 · 42 + 1 norms against 2 · 42 + 1 (the first norm before the layers).
    let ratio = line(&c, &b, "rms_norm") / line(&c0, &b, "rms_norm");
    assert!((ratio - 169.0 / 85.0).abs() < 1e-9, "{ratio}");
    assert!(line(&c, &b, "gelu_mul") > 0.0 && line(&c, &b, "silu_mul") == 0.0);
}

#[test]
fn sliding_window_bounds_the_context_each_layer_attends_to() {
    let mistral = from_config(include_str!("../../../../tests/data/hf_configs/mistral-7b-v0.1.json"));
    assert_eq!(mistral.local_attention.map(|l| l.tokens), Some(4096));
    let global = Model { local_attention: None, ..mistral.clone() };
    let (cw, cg) = (cost(&mistral, "h200", 1), cost(&global, "h200", 1));
    // Within the window nothing changes.
    let short = decode(8, 2048);
    assert_eq!(cw.step_ns(&short), cg.step_ns(&short));
    let items = [PrefillItem { new_tokens: 4096, context_before: 0 }];
    assert_eq!(cw.step_ns(&prefill(&items)), cg.step_ns(&prefill(&items)));
    // Beyond it, decode reads the window only: the same KV read as 4,096-token contexts.
    let long = decode(8, 32768);
    let (w, g) = (line(&cw, &long, "attention_decode"), line(&cg, &long, "attention_decode"));
    assert!(w < 0.25 * g, "{w} vs {g}");
    assert!(close(w, line(&cg, &decode(8, 4096 + 1), "attention_decode")));
    // A 16k prefill from scratch: the first 4,096 tokens attend causally, the 12,288 after
    // them to exactly 4,096 each: 7/16 of the causal pairs. The same kernel runs; its floor
    // stays, its work scales with the pairs.
    let long_prefill = [PrefillItem { new_tokens: 16384, context_before: 0 }];
    let floor = f64::from(mistral.layers) * StepSpec::default().kernel_floor_us * 1e-3;
    let full = line(&cg, &prefill(&long_prefill), "attention_prefill");
    let got = line(&cw, &prefill(&long_prefill), "attention_prefill");
    let pairs = (4096.0 * 2048.0 + 12288.0 * 4096.0) / (16384.0 * 8192.0);
    assert_eq!(pairs, 7.0 / 16.0);
    assert!(close(got, floor + (full - floor) * pairs), "{got} vs {full}");
    // A chunk continuing past the window: each of its tokens attends to 4,096.
    let cont = [PrefillItem { new_tokens: 2048, context_before: 8192 }];
    let (full, got) = (line(&cg, &prefill(&cont), "attention_prefill"), line(&cw, &prefill(&cont), "attention_prefill"));
    let pairs = 2048.0 * 4096.0 / (2048.0 * (8192.0 + 1024.0));
    assert!(close(got, floor + (full - floor) * pairs), "{got} vs {full}");
}

#[test]
fn gemma_local_and_global_layers_average() {
    let g2 = from_config(include_str!("../../../../tests/data/hf_configs/gemma-2-9b.json"));
    let local = g2.local_attention.unwrap();
    assert_eq!((local.layers, g2.layers), (21, 42));
    let all_local = Model { local_attention: Some(LocalAttention { layers: 42, ..local }), ..g2.clone() };
    let none = Model { local_attention: None, ..g2.clone() };
    let b = decode(4, 8000);
    let (mix, l, g) = (cost(&g2, "h100", 1), cost(&all_local, "h100", 1), cost(&none, "h100", 1));
    let avg = 0.5 * line(&l, &b, "attention_decode") + 0.5 * line(&g, &b, "attention_decode");
    assert!(close(line(&mix, &b, "attention_decode"), avg));
}

#[test]
fn chunked_attention_restarts_at_every_chunk() {
    let scout = model("llama-4-scout");
    let all_chunked = Model {
        local_attention: Some(LocalAttention { kind: LocalKind::Chunked, tokens: 8192, layers: 48 }),
        ..scout.clone()
    };
    let global = Model { local_attention: None, ..scout.clone() };
    let (cc, cg) = (cost(&all_chunked, "h200", 8), cost(&global, "h200", 8));
    let att = |c: &StepCostModel, new: u32, ctx: u32| {
        line(c, &prefill(&[PrefillItem { new_tokens: new, context_before: ctx }]), "attention_prefill")
    };
    let floor = f64::from(scout.layers) * StepSpec::default().kernel_floor_us * 1e-3;
    // Chunked layers compute `pairs` of the causal pairs of (new, ctx).
    let chunked = |new: u32, ctx: u32, pairs: f64| {
        let (got, full) = (att(&cc, new, ctx), att(&cg, new, ctx));
        assert!(close(got, floor + (full - floor) * pairs), "{new} after {ctx}: {got} vs {full}");
    };
    // Three whole chunks from scratch: a third of a 24k causal prefill's pairs.
    chunked(3 * 8192, 0, 1.0 / 3.0);
    // 500 tokens 100 into a chunk: they see the chunk's 100, not the context's 8,292.
    chunked(500, 8192 + 100, 500.0 * 350.0 / (500.0 * 8542.0));
    // Straddling a boundary: the last 192 tokens of one chunk, then 808 of a fresh one.
    chunked(1000, 8000, (192.0 * 8096.0 + 808.0 * 404.0) / (1000.0 * 8500.0));
    // Within the first chunk nothing changes.
    assert_eq!(att(&cc, 4000, 100), att(&cg, 4000, 100));
    // Scout itself: 36 chunked layers of 48.
    let c = cost(&scout, "h200", 8);
    let want = 0.75 * att(&cc, 20000, 0) + 0.25 * att(&cg, 20000, 0);
    assert!(close(att(&c, 20000, 0), want));
}

#[test]
fn tied_embeddings_hold_the_table_once() {
    let g2 = from_config(include_str!("../../../../tests/data/hf_configs/gemma-2-9b.json"));
    let untied = Model { tied_embeddings: false, ..g2.clone() };
    let h100 = resolve_gpu(&"h100".into()).unwrap();
    let a = crate::memory::plan_memory(&g2, &h100, 1, 1, 0.9, 2048).unwrap();
    let b = crate::memory::plan_memory(&untied, &h100, 1, 1, 0.9, 2048).unwrap();
    let table_gib = 256000.0 * 3584.0 * 2.0 / crate::memory::GIB;
    assert!((b.weights_gib - a.weights_gib - table_gib).abs() < 1e-9);
    assert!(a.kv_capacity_tokens > b.kv_capacity_tokens);
}

#[test]
fn bridged_pcie_cards_all_reduce_over_pcie_beyond_a_pair() {
    let m = model("llama-3-70b");
    let b = decode(32, 1024);
    let ar = |g: &str, tp: u32| line(&cost(&m, g, tp), &b, "tp_allreduce") / f64::from(m.layers);
    // On HGX H100 TP 4 stays on NVLink; an H100 PCIe pair is bridged, four cards are not.
    assert!(ar("h100-pcie", 4) > 2.5 * ar("h100-pcie", 2), "{} {}", ar("h100-pcie", 4), ar("h100-pcie", 2));
    assert!(ar("h100", 4) < ar("h100-pcie", 4));
    // The variants price with the roofline; the profiled parts with their tables.
    let src = |g: &str| cost(&m, g, 2).breakdown(&b).0.iter().find(|o| o.op == "qkv").unwrap().source;
    assert_eq!(src("h100-pcie"), Source::Roofline);
    assert_eq!(src("a100-40g"), Source::Roofline);
    assert_ne!(src("h100"), Source::Roofline);
}

/// DeepSeek-V3 priced by the roofline (no tables): the rates are the datasheet's.
fn roofline(m: &Model, g: &str, tp: u32) -> StepCostModel {
    let gpu = resolve_gpu(&g.into()).unwrap();
    StepCostModel::new(&CostModelSpec::Roofline(StepSpec::default()), m, &gpu, tp, 1).unwrap()
}

#[test]
fn mla_decode_attention_reads_the_latent_not_the_heads() {
    let v3 = model("deepseek-v3");
    let h200 = resolve_gpu(&"h200".into()).unwrap();
    let stream_bw = h200.hbm_tbps * 1e12 * h200.memory_efficiency;
    let layers = f64::from(v3.layers);
    // Seconds per cached token per layer of the decode attention between two contexts.
    let slope_of = |c: &StepCostModel, op: &str| {
        let (lo, hi) = (decode(64, 2048), decode(64, 8192));
        (line(c, &hi, op) - line(c, &lo, op)) * 1e-3 / layers / (64.0 * 6144.0)
    };
    // (vLLM's MLA decode is a call of its own; grouped-query attention's one varlen call
    // is the breakdown's `attention`.)
    let slope = |c: &StepCostModel| slope_of(c, "attention_decode");
    // TP 8 (16 heads a GPU) and TP 4 (32): memory-bound, at the latent's 576 values × 2 bytes
    // per token — the same on every GPU whatever the TP, as each holds the whole latent.
    for tp in [4, 8] {
        let s = slope(&roofline(&v3, "h200", tp));
        assert!((s / (576.0 * 2.0 / stream_bw) - 1.0).abs() < 1e-6, "tp {tp}: {s}");
    }
    // TP 1: 128 heads × 2 · (2 · 512 + 64) FLOPs per token outweigh the bytes: compute-bound.
    let s1 = slope(&roofline(&v3, "h200", 1));
    assert!(s1 > 1.5 * 576.0 * 2.0 / stream_bw, "{s1}");
    // As grouped-query attention with 128 KV heads of 192, the cache read would be 10.7
    // times larger at TP 8 (16 heads' K and V, 2 · 16 · 192 values a token per GPU, against
    // the latent's 576) — and 85 times at TP 1.
    let gqa = Model { mla: None, ..v3.clone() };
    let g = slope_of(&roofline(&gqa, "h200", 8), "attention");
    assert!((g / (16.0 * 2.0 * 192.0 * 2.0 / stream_bw) - 1.0).abs() < 1e-6, "{g}");
    // With the H200's tables too: the profile's decode curve at the latent's bytes.
    let cal = vllm(&v3, "h200", 8);
    let (s, sg) = (slope(&cal), slope_of(&vllm(&gqa, "h200", 8), "attention"));
    assert!(s > 0.0 && s < sg / 8.0, "{s} vs {sg}");
    // FP8 KV halves the bytes read.
    let fp8 = StepSpec { kv_dtype: Dtype::Fp8, ..StepSpec::default() };
    let c8 = StepCostModel::new(&CostModelSpec::Roofline(fp8), &v3, &h200, 8, 1).unwrap();
    assert!((slope(&c8) / (576.0 / stream_bw) - 1.0).abs() < 1e-6);
    // The absorbed up-projections run around it, on the decode tokens only.
    let b = decode(64, 4096);
    for op in ["w_uk_absorb", "attention_decode", "w_uv_up"] {
        assert!(line(&cal, &b, op) > 0.0, "{op}");
    }
    assert_eq!(line(&cal, &b, "kv_b_proj"), 0.0);
    // Decode attention's grid stays within 0.03% of the exact MLA op.
    let exact = cal.breakdown(&b).0.iter().map(|o| o.ms).sum::<f64>();
    assert!((cal.step_ns(&b) as f64 * 1e-6 / exact - 1.0).abs() < 2e-3);
}

#[test]
fn mla_prefill_up_projects_the_latents_then_attends_over_the_heads() {
    let v3 = model("deepseek-v3");
    let c = vllm(&v3, "h200", 8);
    let fresh = [PrefillItem { new_tokens: 2048, context_before: 0 }];
    let cached = [PrefillItem { new_tokens: 2048, context_before: 6144 }];
    // kv_b_proj over the new tokens, and over a cached prefix's latents too.
    let (a, b) = (line(&c, &prefill(&fresh), "kv_b_proj"), line(&c, &prefill(&cached), "kv_b_proj"));
    assert!(a > 0.0 && b > 2.0 * a, "{a} {b}");
    for op in ["w_uk_absorb", "w_uv_up", "attention_decode"] {
        assert_eq!(line(&c, &prefill(&fresh), op), 0.0, "{op}");
    }
    // Ordinary attention over the 16 heads of this GPU with q/k of 192 and v of 128: the
    // FLOPs and bytes of 16 K/V heads of (192 + 128) / 2 = 160.
    let mha = Model { mla: None, kv_heads: 128, head_dim: 160, ..v3.clone() };
    let r = roofline(&v3, "h200", 8);
    let rm = roofline(&mha, "h200", 8);
    for items in [&fresh[..], &cached[..]] {
        let (x, y) = (line(&r, &prefill(items), "attention_prefill"), line(&rm, &prefill(items), "attention"));
        assert!(close(x, y), "{x} vs {y}");
    }
    // A mixed step: both paths, and the step's time is its lines' sum (within the grid's 0.2%).
    let items = [PrefillItem { new_tokens: 512, context_before: 1024 }];
    let mixed = BatchShape { decode_seqs: 32, decode_context_sum: 32 * 4096, sampled: 33, ..prefill(&items) };
    let ops = names(&c, &mixed);
    for op in ["kv_b_proj", "attention_prefill", "w_uk_absorb", "attention_decode", "w_uv_up"] {
        assert!(ops.contains(&op.to_string()), "{op} in {ops:?}");
    }
    let exact = c.breakdown(&mixed).0.iter().map(|o| o.ms).sum::<f64>();
    assert!((c.step_ns(&mixed) as f64 * 1e-6 / exact - 1.0).abs() < 2e-3);
    // The reference engine and a pipelined replica price the same parts.
    let reference = cost(&v3, "h200", 8);
    assert!(reference.step_ns(&mixed) > 0 && line(&reference, &mixed, "kv_b_proj") > 0.0);
    let gpu = resolve_gpu(&"h200".into()).unwrap();
    let pp = StepCostModel::new(&CostModelSpec::default(), &v3, &gpu, 8, 2).unwrap();
    assert!(pp.step_ns(&mixed) > 0 && pp.micro_batches(&mixed) == 2);
}

#[test]
fn mla_projections_replace_the_qkv_gemm() {
    let v3 = model("deepseek-v3");
    let b = decode(16, 2048);
    for c in [vllm(&v3, "h200", 8), cost(&v3, "h200", 8)] {
        let ops = names(&c, &b);
        for op in ["fused_qkv_a_proj", "q_a_layernorm", "q_b_proj", "kv_a_layernorm", "rope_q_and_k", "kv_write", "o"] {
            assert!(ops.iter().any(|o| o.split('+').any(|x| x == op)), "{op} in {ops:?}");
        }
        assert!(!ops.iter().any(|o| o == "qkv" || o == "q_proj"), "{ops:?}");
    }
    // fused_qkv_a_proj is replicated on every TP rank; q_b_proj's heads split over TP.
    let (t1, t8) = (roofline(&v3, "h200", 1), roofline(&v3, "h200", 8));
    let big = decode(256, 1024);
    let ratio = |op: &str| line(&t1, &big, op) / line(&t8, &big, op);
    assert!(ratio("fused_qkv_a_proj") < 1.01, "{}", ratio("fused_qkv_a_proj"));
    assert!(ratio("q_b_proj") > 4.0, "{}", ratio("q_b_proj"));
    // DeepSeek-V2-Lite projects queries directly (q_lora_rank 0).
    let lite = from_config(include_str!("../../../../tests/data/hf_configs/deepseek-v2-lite.json"));
    let ops = names(&vllm(&lite, "h100", 1), &b);
    assert!(ops.contains(&"q_proj".to_string()) && ops.contains(&"kv_a_proj_with_mqa".to_string()), "{ops:?}");
    assert!(!ops.contains(&"q_b_proj".to_string()) && !ops.contains(&"q_a_layernorm".to_string()), "{ops:?}");
}

#[test]
fn mla_steps_anatomy_lists_its_projections_and_attention_parts() {
    let v3 = model("deepseek-v3");
    let c = vllm(&v3, "h200", 8);
    let items = [PrefillItem { new_tokens: 256, context_before: 512 }];
    let mixed = BatchShape { decode_seqs: 8, decode_context_sum: 8 * 2048, sampled: 9, ..prefill(&items) };
    let a = c.anatomy(&mixed, 0.0, 0.0);
    let k = &a.kernels;
    let first: Vec<&str> = (0..k.len()).filter(|&i| k.layer[i] == 0).map(|i| k.name[i].as_str()).collect();
    let want = [
        "fused_qkv_a_proj", "q_a_layernorm", "q_b_proj", "kv_a_layernorm", "rope_q_and_k", "kv_write",
        "kv_b_proj", "attention_prefill", "w_uk_absorb", "attention_decode", "w_uv_up", "o",
    ];
    // In launch order, with kv_b_proj's two GEMMs (new tokens, cached context).
    let mut at = 0;
    for op in want {
        let i = first[at..].iter().position(|n| *n == op).unwrap_or_else(|| panic!("{op} after {at} in {first:?}"));
        at += i + 1;
    }
    assert_eq!(first.iter().filter(|n| **n == "kv_b_proj").count(), 2);
    // The timeline is the step's price (the dense part exact here, interpolated in a run).
    let priced = c.step_ns(&mixed) as f64 * 1e-6;
    assert!((a.step_ms / priced - 1.0).abs() < 2e-3, "{} vs {priced}", a.step_ms);
}

#[test]
fn routed_experts_run_at_the_checkpoint_s_format() {
    // DeepSeek-V3's FP8 checkpoint on an H200: the experts' grouped GEMMs run W8A8 at FP8
    // (half the weight bytes of BF16 experts at a decode batch), with the per-group
    // activation quantisation before each; the rest of the model stays at the spec's BF16.
    let v3 = model("deepseek-v3");
    let bf = Model { expert_format: Some(WeightFormat::Bf16), ..v3.clone() };
    let b = decode(64, 2048);
    let (fp8, bf16) = (vllm(&v3, "h200", 8), vllm(&bf, "h200", 8));
    for op in ["gate_up", "down"] {
        let (a, z) = (line(&fp8, &b, op), line(&bf16, &b, op));
        assert!(a < 0.7 * z && a > 0.35 * z, "{op}: fp8 {a} vs bf16 {z}");
    }
    assert!(line(&fp8, &b, "moe_quant") > 0.0 && line(&bf16, &b, "moe_quant") == 0.0);
    assert_eq!(line(&fp8, &b, "o"), line(&bf16, &b, "o"));
    assert!(fp8.step_ns(&b) < bf16.step_ns(&b));
    // Without FP8 tensor cores (A100), FP8 experts run weight-only: BF16 math, no
    // activation quantisation, still fewer bytes than BF16 experts.
    let (w8, w16) = (vllm(&v3, "a100-80g", 8), vllm(&bf, "a100-80g", 8));
    assert_eq!(line(&w8, &b, "moe_quant"), 0.0);
    assert!(line(&w8, &b, "gate_up") < 0.8 * line(&w16, &b, "gate_up"));
    // gpt-oss's MXFP4 experts: weight-only 4-bit, faster to stream than BF16 at decode.
    let oss = model("gpt-oss-120b");
    let oss16 = Model { expert_format: Some(WeightFormat::Bf16), ..oss.clone() };
    let (x4, x16) = (vllm(&oss, "h100", 1), vllm(&oss16, "h100", 1));
    assert!(line(&x4, &b, "gate_up") < 0.6 * line(&x16, &b, "gate_up"));
}
