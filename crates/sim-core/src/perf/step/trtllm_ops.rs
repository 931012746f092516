//! TensorRT-LLM's PyTorch backend as the step model prices it (`cost_model.engine =
//! "trtllm"`; v0.20, the release whose `trtllm-bench` max-throughput tables
//! `docs/fidelity.md` compares with).
//!
//! One decoder layer of its Llama with ModelOpt FP8 weights (`tensorrt_llm/_torch/models/
//! modeling_llama.py`, `modules/linear.py`'s FP8 per-tensor method, `attention_backend/
//! trtllm.py`): the input RMSNorm (fused with the residual add from the second layer on), a
//! static per-tensor FP8 quantisation of its output, the `qkv` GEMM (cuBLASLt FP8), the
//! attention op — one preprocessing kernel per phase that applies RoPE, writes K and V into
//! the paged cache and quantises Q, the context FMHA kernel over every context request of
//! the step, the XQA kernel over every generation request — whose output is already FP8
//! (the FMHA/XQA output scale) for `o`, the all-reduce under TP, the residual add +
//! RMSNorm, the FP8 quantisation before `gate_up`, SiLU·mul, the quantisation before
//! `down`, the all-reduce, the residual add + RMSNorm. Weights in BF16 skip the
//! quantisation passes. The checkpoint's `lm_head` (and embedding) stay BF16: ModelOpt
//! quantises the decoder's linear layers only (`hf_quant_config.json`'s `exclude_modules`
//! lists `lm_head`), so `lm_head` runs as a BF16 GEMM.
//!
//! Runtime: a generation-only step replays a CUDA graph captured at the next batch size of
//! [`CAPTURE_BATCH_SIZES`](crate::perf::trtllm::CAPTURE_BATCH_SIZES) (padding on: the published runs' `cuda_graph_config`), so its
//! dense part and `lm_head` run at the padded batch. v0.20 captures only the listed sizes
//! up to `max_batch_size` (and `max_num_tokens`): a generation batch above the largest of
//! them, and every step with context requests, runs eagerly, unpadded (NVIDIA/TensorRT-LLM
//! pull request #4843, June 2025, later added `max_batch_size` itself to the captured
//! sizes because `trtllm-bench`'s tuned `max_batch_size` left the largest batches eager). The overlap scheduler (`disable_overlap_scheduler = False`, v0.20's default)
//! prepares and launches step n+1 while the GPU runs step n: a step lasts at least the host's
//! own work for it, [`HOST_SEQ_S`](crate::perf::trtllm::HOST_SEQ_S) per scheduled request.

use super::{Mode, Named, OpT, StepModel};
use crate::calib::Source;
use crate::perf::spec::Dtype;
use crate::perf::trtllm::{padded_batch, FP8_FMHA_SPEEDUP};
use crate::perf::BatchShape;

impl StepModel {
    /// The rows the dense part and the epilogue run at: a generation-only step replayed as a
    /// CUDA graph runs at its padded batch ([`padded_batch`](crate::perf::trtllm::padded_batch)); everything else as given.
    pub(super) fn trtllm_rows(&self, b: &BatchShape, mode: Mode, m: f64, s: f64) -> (f64, f64) {
        if self.engine != crate::perf::Engine::Trtllm || mode != Mode::Graph || !b.prefill.is_empty() || b.spec_tokens > 0 {
            return (m, s);
        }
        let p = padded_batch(b.decode_seqs).min(self.graph_max_tokens) as f64;
        (p.max(m), p.max(s))
    }

    /// The dense ops of one layer as TensorRT-LLM launches them (see the module docs): vLLM's
    /// fused composition ([`StepModel::dense_vllm`]) with RoPE, the cache write and Q's
    /// quantisation in the attention op's one preprocessing kernel, and with FP8 weights a
    /// static quantisation pass (read 2 bytes, write 1 per value) before `qkv`, `gate_up`
    /// and `down` of a dense model (an MoE model's experts keep their own path).
    pub(super) fn dense_trtllm(&self, m: f64) -> (Vec<Named>, Vec<Named>, Vec<Named>, f64) {
        let (pre, post, pro, pp) = self.dense_vllm(m);
        let r = &self.r;
        let fp8 = r.dtype == Dtype::Fp8 && self.moe.is_none();
        let quant = |width: f64| Named {
            name: "fp8_quant".into(),
            t: self.vllm_elem("fp8_quant", m, width, 3.0 * width),
            kernels: 1.0,
        };
        let (hq, hkv, hd) = (f64::from(self.hq), f64::from(self.hkv), f64::from(self.hd));
        let q_bytes = if r.kv_bytes < 2.0 { 1.0 } else { 2.0 };
        let mut out_pre = Vec::with_capacity(pre.len() + 1);
        let mut preprocess = false;
        for o in pre {
            match o.name.as_str() {
                "rope_q_and_k" | "kv_write" if self.mla.is_none() => {
                    if !preprocess {
                        // read q, k, v; write q (FP8 for the FP8 FMHA) and k, v into the cache
                        let bytes = (hq + 2.0 * hkv) * hd * 2.0 + hq * hd * q_bytes + 2.0 * hkv * hd * r.kv_bytes;
                        let t = self.vllm_elem("attention_preprocess", m, (hq + 2.0 * hkv) * hd, bytes);
                        out_pre.push(Named { name: "attention_preprocess".into(), t, kernels: 1.0 });
                        preprocess = true;
                    }
                }
                "qkv" if fp8 => {
                    out_pre.push(quant(self.hidden));
                    out_pre.push(o);
                }
                _ => out_pre.push(o),
            }
        }
        let mut out_post = Vec::with_capacity(post.len() + 2);
        for o in post {
            match o.name.as_str() {
                "gate_up" if fp8 => {
                    out_post.push(quant(self.hidden));
                    out_post.push(o);
                }
                "down" if fp8 => {
                    out_post.push(quant(f64::from(self.down.0)));
                    out_post.push(o);
                }
                _ => out_post.push(o),
            }
        }
        (out_pre, out_post, pro, pp)
    }

    /// TensorRT-LLM's attention of one layer for the batch's requests split over `k`
    /// micro-batches: the context FMHA kernel over every context request (each request's
    /// causal work added up, the kernel's fixed cost paid once; FP8 Q/K/V when the cache is
    /// FP8, [`FP8_FMHA_SPEEDUP`](crate::perf::trtllm::FP8_FMHA_SPEEDUP)), then the XQA kernel over every generation request (the KV
    /// bytes it reads, block remap included). Returns (GPU s, CPU s); the ops for a breakdown
    /// when asked.
    pub(super) fn attention_trtllm(&self, b: &BatchShape, k: f64, detail: Option<&mut Vec<Named>>) -> (f64, f64) {
        let (mut g, mut c) = (0.0, 0.0);
        let mut ops: Vec<Named> = Vec::new();
        let want = detail.is_some();
        if !b.prefill.is_empty() {
            let speedup = if self.r.kv_bytes < 2.0 { FP8_FMHA_SPEEDUP } else { 1.0 };
            let (mut sum, mut src) = (0.0, Source::Table);
            for item in b.prefill {
                let t = self.prefill_attention(f64::from(item.new_tokens), f64::from(item.context_before));
                sum += self.attn_floor.min(t.gpu_s) + (t.gpu_s - self.attn_floor).max(0.0) / speedup;
                src = src.max(t.src);
            }
            if speedup != 1.0 {
                src = src.max(Source::Model);
            }
            let calls = b.prefill.len() as f64;
            let gpu_s = (sum - (calls - 1.0).max(0.0) * self.attn_floor.min(sum / calls)) / k;
            g += gpu_s;
            c += self.prefill_cpu;
            if want {
                ops.push(Named { name: "attention_context".into(), t: OpT { gpu_s, cpu_s: self.prefill_cpu, src }, kernels: 1.0 });
            }
        }
        if b.decode_seqs > 0 {
            // KV read excludes the token written this step.
            let tokens = b.decode_context_sum.saturating_sub(b.decode_seqs) as f64 / k;
            let gpu_s = self.decode_attention_s(b, tokens, k, want);
            g += gpu_s;
            c += self.decode_cpu;
            if want {
                let src = self.decode_op(tokens, self.decode_cpu).src;
                ops.push(Named { name: "attention_generation".into(), t: OpT { gpu_s, cpu_s: self.decode_cpu, src }, kernels: 1.0 });
            }
        }
        if let Some(d) = detail {
            d.extend(ops);
        }
        (g, c)
    }
}
