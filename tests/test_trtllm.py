"""TensorRT-LLM as an engine and a policy through the Python API: trtllm-bench's settings are
picked from the workload and reported, every knob changes what a user sees, generation-only
steps run at their padded CUDA-graph batch, and bad settings name their field."""

from __future__ import annotations

from typing import Any

import pytest

import o1sim


def _scenario(isl: int = 128, osl: int = 128, n: int = 200, **sched: Any) -> dict[str, Any]:
    return {
        "seed": 3, "model": "llama-3.1-8b", "gpu": "h200",
        "cost_model": {"engine": "trtllm", "dtype": "fp8", "kv_dtype": "fp8"},
        "scheduler": {"policy": "trtllm", "block_size": 32, **sched},
        "workload": {"num_requests": n, "arrival": {"kind": "constant", "rate": 1e9},
                     "prompt": {"kind": "fixed", "value": isl}, "output": {"kind": "fixed", "value": osl}},
    }


def test_trtllm_bench_settings_are_picked_from_the_workload_and_reported() -> None:
    # Llama-3.1-8B FP8 on one H200 at 0.95: room for ~8,000 requests of 256 tokens, so
    # max_batch_size 4,096 (its cap) and 4,096 · 2 tokens; ~950 of 2,176 → 1,024 and 16,384.
    short = o1sim.simulate(_scenario(kv_cache_free_gpu_mem_fraction=0.95)).deployment["trtllm"]
    assert (short["max_batch_size"], short["max_num_tokens"]) == (4096, 8192)
    long = o1sim.simulate(_scenario(2048, 128, kv_cache_free_gpu_mem_fraction=0.95)).deployment["trtllm"]
    assert (long["max_batch_size"], long["max_num_tokens"]) == (1024, 16384)
    assert long["capacity_scheduler_policy"] == "guaranteed_no_evict"
    given = o1sim.simulate(_scenario(max_batch_size=48, max_num_tokens=4096)).deployment["trtllm"]
    assert (given["max_batch_size"], given["max_num_tokens"]) == (48, 4096)


def test_every_knob_changes_the_run() -> None:
    base = o1sim.simulate(_scenario(512, 256, num_gpu_blocks=200))
    mu = o1sim.simulate(_scenario(512, 256, num_gpu_blocks=200, capacity_scheduler_policy="max_utilization"))
    assert base.summary["preemptions"] == 0 < mu.summary["preemptions"]
    roomy = o1sim.simulate(_scenario(512, 256), record_steps=True)
    capped = o1sim.simulate(_scenario(512, 256, max_batch_size=8), record_steps=True)
    assert capped.steps["batch_size"].max() == 8 < roomy.steps["batch_size"].max()
    small = o1sim.simulate(_scenario(512, 256, max_num_tokens=1024), record_steps=True)
    assert max(sum(p[0] for p in pre) for pre in small.steps["prefill"]) <= 1024
    assert small.summary["ttft_ms"]["mean"] > roomy.summary["ttft_ms"]["mean"]
    lo = o1sim.simulate(_scenario(kv_cache_free_gpu_mem_fraction=0.5)).deployment["kv_capacity_tokens"]
    hi = o1sim.simulate(_scenario(kv_cache_free_gpu_mem_fraction=0.9)).deployment["kv_capacity_tokens"]
    assert 1.7 < hi / lo < 1.9
    vllm_kernels = _scenario(512, 256)
    vllm_kernels["cost_model"]["engine"] = "vllm"
    assert o1sim.simulate(vllm_kernels).summary["tpot_ms"]["mean"] != base.summary["tpot_ms"]["mean"]


def test_generation_steps_run_at_their_padded_graph_batch() -> None:
    def step(n: int, engine: str = "trtllm") -> float:
        # Llama-3.3-70B on one H200: the GEMMs bind, not the host's work per request
        batch = [{"new_tokens": 1, "context_tokens": 1}] * n
        return o1sim.predict_step("llama-3.3-70b", "h200", batch=batch, dtype="fp8", kv_dtype="fp8",
                                  engine=engine).total_ms
    # 257 and 384 requests both replay the graph captured at 384; 256 has its own.
    assert step(257) == pytest.approx(step(384), rel=0.02)
    assert step(256) < 0.9 * step(257)
    assert step(257, "vllm") < 0.9 * step(384, "vllm")
    mixed = o1sim.predict_step("llama-3.1-8b", "h200", batch=[{"new_tokens": 512, "context_tokens": 0}],
                               dtype="fp8", kv_dtype="fp8", engine="trtllm")
    assert mixed.mode == "eager"
    ops = {o.op for o in mixed.breakdown}
    assert {"fp8_quant", "attention_preprocess", "attention_context"} <= ops


@pytest.mark.parametrize("sched, field", [
    ({"policy": "vllm", "max_batch_size": 64}, "scheduler.max_batch_size"),
    ({"policy": "sarathi", "capacity_scheduler_policy": "max_utilization"}, "scheduler.capacity_scheduler_policy"),
    ({"policy": "trtllm", "capacity_scheduler_policy": "max_util"}, "scheduler.capacity_scheduler_policy"),
    ({"policy": "trtllm", "kv_cache_free_gpu_mem_fraction": 0}, "scheduler.kv_cache_free_gpu_mem_fraction"),
    ({"policy": "trtllm", "enable_prefix_caching": True}, "scheduler.enable_prefix_caching"),
])
def test_bad_settings_name_their_field(sched: dict[str, Any], field: str) -> None:
    sc = _scenario()
    sc["scheduler"] = {**sched}
    with pytest.raises(o1sim.ConfigError) as info:
        o1sim.simulate(sc)
    assert info.value.field == field
