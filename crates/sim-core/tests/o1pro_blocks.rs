//! The KV manager's block layout reaches the step's price (seed §2.5): decode attention pays
//! the block-table remap for the blocks each request actually holds. o1pro's requests of
//! more than 64,000 tokens hold 64-token blocks, so at 128k contexts its TPOT is below vLLM's
//! at block 16 by about what vLLM itself saves at block 64; Orca's contiguous reservation
//! has no block table and pays no remap at any block size.

use serde_json::json;
use sim_core::{Format, SimOptions};

/// `n` 120k-token prompts decoding 128 tokens on Llama-3-8B (its context raised to 128k) on
/// one H200, under `policy` with KV blocks of `block_size`: the summary and the mean
/// duration of the steps that decode all `n` together (no prefill in them), ms.
fn long_context(policy: &str, block_size: u32, n: usize) -> (serde_json::Value, f64) {
    let requests: Vec<_> = (0..n).map(|_| json!({"arrival_ms": 0, "prompt_tokens": 120_000, "output_tokens": 128})).collect();
    let text = json!({
        "seed": 1,
        "model": {"preset": "llama-3-8b", "max_context": 131072},
        "gpu": "h200",
        "scheduler": {"policy": policy, "block_size": block_size},
        "workload": {"requests": requests}
    })
    .to_string();
    let r = sim_core::simulate(&text, Format::Json, SimOptions { record_steps: true, ..SimOptions::default() }).unwrap();
    assert_eq!(r.summary["finished"], n as u64, "{policy} at block {block_size}");
    let pure: Vec<f64> = r
        .steps
        .iter()
        .filter(|s| s.scheduled.len() == n && s.scheduled.iter().all(|&(_, t)| t == 1))
        .map(|s| s.end_ms - s.start_ms)
        .collect();
    assert!(pure.len() > 30, "{policy}: {} pure decode steps", pure.len());
    let mean = pure.iter().sum::<f64>() / pure.len() as f64;
    (r.summary, mean)
}

fn tpot_ms(s: &serde_json::Value) -> f64 {
    s["tpot_ms"]["mean"].as_f64().unwrap()
}

#[test]
fn o1pro_long_contexts_save_what_block_64_saves() {
    // Four requests decoding together: the steady decode step (their TPOT once all four
    // have prefilled). 4 × 7,500 blocks of 16 against 4 × 256 descriptor entries: ~31k
    // misses × 2 cycles a layer, ~1 ms a step; 64-token blocks leave ~7k.
    let (_, vllm16) = long_context("vllm", 16, 4);
    let (_, vllm64) = long_context("vllm", 64, 4);
    let (_, o1pro) = long_context("o1pro", 16, 4);
    let saved_by_64 = vllm16 - vllm64;
    let saved_by_o1pro = vllm16 - o1pro;
    eprintln!("decode step of 4 at 120k: vLLM16 {vllm16:.4} ms, vLLM64 {vllm64:.4} ms, o1pro {o1pro:.4} ms");
    assert!(saved_by_64 > 0.5, "vLLM at block 64 saves {saved_by_64:.3} ms of {vllm16:.3}");
    assert!(
        (saved_by_o1pro / saved_by_64 - 1.0).abs() < 0.05,
        "o1pro saves {saved_by_o1pro:.3} ms, block 64 {saved_by_64:.3} ms (vLLM16 {vllm16:.3}, vLLM64 {vllm64:.3}, o1pro {o1pro:.3})"
    );
    // One request alone: its TPOT as the summary reports it.
    let (v16, _) = long_context("vllm", 16, 1);
    let (v64, _) = long_context("vllm", 64, 1);
    let (o, _) = long_context("o1pro", 16, 1);
    let (saved_by_64, saved_by_o1pro) = (tpot_ms(&v16) - tpot_ms(&v64), tpot_ms(&v16) - tpot_ms(&o));
    eprintln!("TPOT of one 120k request: vLLM16 {:.4} ms, vLLM64 {:.4} ms, o1pro {:.4} ms", tpot_ms(&v16), tpot_ms(&v64), tpot_ms(&o));
    assert!(saved_by_64 > 0.1, "{saved_by_64}");
    assert!((saved_by_o1pro / saved_by_64 - 1.0).abs() < 0.05, "o1pro {saved_by_o1pro:.4} ms vs block 64 {saved_by_64:.4} ms");
}

#[test]
fn orca_pays_no_remap_at_any_block_size() {
    let (small, small_step) = long_context("orca", 16, 4);
    let (large, large_step) = long_context("orca", 256, 4);
    // The same schedule (KV is ample) at the same price: no block table to walk.
    assert_eq!(tpot_ms(&small), tpot_ms(&large));
    assert_eq!(small_step, large_step);
    eprintln!("orca decode step of 4 at 120k: {small_step:.4} ms at block 16 and 256");
    // vLLM on the same requests pays ~1 ms a step more at block 16 than at block 256.
    assert!(long_context("vllm", 16, 4).1 > long_context("vllm", 256, 4).1 + 0.5);
}
