"""Every bad input gets a typed error naming the field and the rule — never a panic, a
hang or a silent default."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

import o1sim

BASE: dict[str, Any] = {
    "seed": 1,
    "model": "llama-3-8b",
    "gpu": "h100",
    "workload": {
        "num_requests": 10,
        "arrival": {"kind": "poisson", "rate": 2.0},
        "prompt": {"kind": "fixed", "value": 100},
        "output": {"kind": "fixed", "value": 10},
    },
}


def with_(path: str, value: Any) -> dict[str, Any]:
    sc = copy.deepcopy(BASE)
    node = sc
    keys = path.split(".")
    for k in keys[:-1]:
        node = node.setdefault(k, {})
    node[keys[-1]] = value
    return sc


CASES = [
    # (scenario, exception, field, words in the message)
    (with_("workload.arrival.rate", -1.0), o1sim.ConfigError, "workload.arrival.rate", "> 0"),
    (with_("workload.arrival.rate", 0.0), o1sim.ConfigError, "workload.arrival.rate", "> 0"),
    (with_("workload.arrival.rate", float("nan")), o1sim.ConfigError, "workload.arrival.rate", "finite"),
    (with_("workload.arrival.rate", float("inf")), o1sim.ConfigError, "workload.arrival.rate", "finite"),
    (with_("scheduler.num_gpu_blocks", 0), o1sim.ConfigError, "scheduler.num_gpu_blocks", "0"),
    (with_("scheduler.block_size", 24), o1sim.ConfigError, "scheduler.block_size", "power of two"),
    (with_("scheduler.blok_size", 16), o1sim.ConfigError, "scheduler.blok_size", "unknown field"),
    (with_("scheduler.policy", "vlm"), o1sim.ConfigError, "scheduler.policy", "did you mean vllm"),
    (with_("model", "llama-3-7b"), o1sim.ConfigError, "model", "llama-3-8b"),
    (with_("gpu", "h20"), o1sim.ConfigError, "gpu", "did you mean"),
    (with_("deployment.router", "random"), o1sim.ConfigError, "deployment.router", "round_robin"),
    (with_("deployment.tp", 3), o1sim.ConfigError, "deployment.tp", "divide"),
    (with_("scheduler.gpu_memory_utilization", 1.5), o1sim.ConfigError, "scheduler.gpu_memory_utilization", "(0, 1]"),
    (with_("slo.ttft_ms", -5.0), o1sim.ConfigError, "slo.ttft_ms", "> 0"),
    (with_("cost_model", {"kind": "linear", "base_ms": float("nan")}), o1sim.ConfigError, "cost_model.base_ms", "finite"),
    (with_("workload", {"requests": [{"arrival_ms": 0, "prompt_tokens": 9000, "output_tokens": 10}]}),
     o1sim.ConfigError, "workload.requests[0].prompt_tokens", "8192"),
    (with_("workload.prompt", {"kind": "fixed"}), o1sim.ConfigError, "workload.prompt.value", "required"),
    (with_("scheduler.max_model_len", 100_000), o1sim.ConfigError, "scheduler.max_model_len", "8192"),
    (with_("model", "llama-3-70b"), o1sim.InfeasibleError, None, "GiB"),
    (with_("model", {"preset": "llama-3-70b", "layers": 8, "hidden": -3}), o1sim.ConfigError, "model.hidden", ""),
    # Prefix caching, priority scheduling, client timeouts.
    (with_("scheduler", {"policy": "orca", "enable_prefix_caching": True}), o1sim.ConfigError,
     "scheduler.enable_prefix_caching", "orca"),
    (with_("scheduler.enable_prefix_caching", "yes"), o1sim.ConfigError, "scheduler.enable_prefix_caching", "expected true or false"),
    (with_("scheduler.scheduling_policy", "prio"), o1sim.ConfigError, "scheduler.scheduling_policy",
     "did you mean priority"),
    (with_("scheduler", {"policy": "o1pro", "scheduling_policy": "priority"}), o1sim.ConfigError,
     "scheduler.scheduling_policy", "only applies to the policies on vLLM's scheduler"),
    (with_("scheduler", {"policy": "orca", "scheduling_policy": "fcfs"}), o1sim.ConfigError,
     "scheduler.scheduling_policy", "vllm, sarathi, disagg"),
    (with_("workload.timeout_s", 0.0), o1sim.ConfigError, "workload.timeout_s", "> 0"),
    (with_("workload.timeout_s", -2.5), o1sim.ConfigError, "workload.timeout_s", "> 0"),
    (with_("workload.timeout_s", float("inf")), o1sim.ConfigError, "workload.timeout_s", "finite"),
    # seed §4.4 and §2.4: adversarial traffic, template depths, a TPU with GPU-only options
    (with_("workload.adversarial", {"share": 1.5, "kind": "flood"}), o1sim.ConfigError, "workload.adversarial.share", "[0, 1)"),
    (with_("workload.adversarial", {"share": -0.2, "kind": "flood"}), o1sim.ConfigError, "workload.adversarial.share", "[0, 1)"),
    (with_("workload.adversarial", {"share": 0.2, "kind": "deep_template", "template_depth": -4}), o1sim.ConfigError,
     "workload.adversarial.template_depth", "0..=65535"),
    (with_("workload", {"requests": [{"arrival_ms": 0, "prompt_tokens": 10, "output_tokens": 5, "template_depth": 10**9}]}),
     o1sim.ConfigError, "workload.requests[0].template_depth", "0..=65535"),
    (with_("gpu", {"preset": "tpu-v5e", "nvlink_gbps": 600}), o1sim.ConfigError, "gpu.nvlink_gbps", "GPU-only"),
    (with_("gpu", {"preset": "tpu-v5e", "descriptor_cache_entries": 64}), o1sim.ConfigError, "gpu.descriptor_cache_entries", "GPU-only"),
]


@pytest.mark.parametrize("scenario,exc,field,words", CASES, ids=[c[2] or c[1].__name__ for c in CASES])
def test_bad_input_is_named(scenario: dict[str, Any], exc: type[Exception], field: str | None, words: str) -> None:
    with pytest.raises(exc) as info:
        o1sim.simulate(scenario)
    assert isinstance(info.value, o1sim.SimError)
    if field is not None:
        assert info.value.field == field, str(info.value)
        assert str(info.value).startswith(field + ":")
    assert words in str(info.value), str(info.value)


def test_model_too_big_says_needed_and_available() -> None:
    with pytest.raises(o1sim.InfeasibleError) as info:
        o1sim.simulate(with_("model", "llama-3-70b"))
    msg = str(info.value)
    # needed vs available GiB per GPU, as the issue asks
    assert "131" in msg and "72" in msg, msg


def test_a_request_that_can_never_fit_is_rejected_not_deadlocked() -> None:
    sc = with_("scheduler.num_gpu_blocks", 8)  # 128 token slots
    sc["workload"] = {"requests": [
        {"arrival_ms": 0, "prompt_tokens": 500, "output_tokens": 8},
        {"arrival_ms": 1, "prompt_tokens": 50, "output_tokens": 8},
    ]}
    df = o1sim.simulate(sc).requests
    assert list(df["status"]) == ["rejected", "finished"]
    assert df["reason"][0] == "kv cache too small"


# --------------------------------------------------------------------------- workloads (issue 13)

def _req(**extra: Any) -> dict[str, Any]:
    return {"arrival_ms": 0, "prompt_tokens": 100, "output_tokens": 10, **extra}


def _trace(text: str, fmt: str = "auto", **options: Any) -> dict[str, Any]:
    return with_("workload", {"trace": {"format": fmt, "text": text, **options}})


WORKLOAD_CASES = [
    # prefix_length longer than the prompt
    (with_("workload", {"requests": [_req(prefix_group="sys", prefix_length=101)]}),
     "workload.requests[0].prefix_length", "1..=prompt_tokens (100)"),
    # hash_ids not a list of ints / not matching the prompt's blocks
    (with_("workload", {"requests": [_req(hash_ids=[1, "x"])]}), "workload.requests[0].hash_ids[1]", "expected a whole number, got the text"),
    (with_("workload", {"requests": [_req(prompt_tokens=600, hash_ids=[1])]}),
     "workload.requests[0].hash_ids", "1 ids for a prompt of 600 tokens"),
    (_trace('{"timestamp": 0, "input_length": 600, "output_length": 1, "hash_ids": [1]}\n', "mooncake"),
     "workload.trace", "line 1: hash_ids: 1 ids for a prompt of 600 tokens"),
    (_trace('{"timestamp": 0, "input_length": 6, "output_length": 1, "hash_ids": "1 2"}\n', "mooncake"),
     "workload.trace", "line 1: hash_ids: invalid type"),
    # unknown trace format, with the closest names
    (_trace("x", "mooncak"), "workload.trace.format", "did you mean mooncake"),
    # missing columns
    (_trace("TIMESTAMP,ContextTokens\n2023-11-16 18:17:03.98,4808\n", "azure"),
     "workload.trace", "missing column `GeneratedTokens`"),
    # negative and non-monotone timestamps, naming the row
    (_trace('{"timestamp": 5, "input_length": 6, "output_length": 1}\n{"timestamp": -1, "input_length": 6, "output_length": 1}\n', "mooncake"),
     "workload.trace", "line 2: timestamp: must be >= 0"),
    (_trace("arrival_ms,prompt_tokens,output_tokens\n10,5,1\n20,5,1\n15,5,1\n", "csv"),
     "workload.trace", "line 4: arrival_ms: goes back in time"),
    # an empty trace
    (_trace("", "auto"), "workload.trace", "empty"),
    (_trace("arrived_at,num_prefill_tokens,num_decode_tokens\n", "vidur"), "workload.trace", "no requests"),
    # stages with a non-positive rate or duration
    (with_("workload.arrival", {"kind": "poisson", "stages": [{"rate": 0, "duration_s": 5}]}),
     "workload.arrival.stages[0].rate", "> 0"),
    (with_("workload.arrival", {"kind": "constant", "stages": [{"rate": 2, "duration_s": 5}, {"rate": 2, "duration_s": -1}]}),
     "workload.arrival.stages[1].duration_s", "> 0"),
    # a session without turns
    (with_("workload", {"arrival": {"kind": "poisson", "rate": 1},
                        "sessions": {"count": 3, "turns": 0, "question": 10, "output": 5}}),
     "workload.sessions.turns", ">= 1 token"),
    (with_("workload", {"requests": [_req(turn=1)]}), "workload.requests[0].turn", "set session_id"),
    # a later turn shorter than the conversation it repeats
    (with_("workload", {"requests": [_req(session_id="s"), _req(session_id="s", arrival_ms=1, prompt_tokens=105)]}),
     "workload.requests[1].prompt_tokens", "shorter than session 's' so far"),
]


@pytest.mark.parametrize("scenario,field,words", WORKLOAD_CASES, ids=[f"{c[1]}:{c[2][:24]}" for c in WORKLOAD_CASES])
def test_bad_workload_is_named(scenario: dict[str, Any], field: str, words: str) -> None:
    with pytest.raises(o1sim.ConfigError) as info:
        o1sim.simulate(scenario)
    assert info.value.field == field, str(info.value)
    assert words in str(info.value), str(info.value)


def test_bad_trace_file_names_the_line(tmp_path: Any) -> None:
    path = tmp_path / "bad.csv"
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.98,4808,10\n2023-11-16 18:17:04.5,x,3\n")
    with pytest.raises(o1sim.ConfigError) as info:
        o1sim.workload.from_trace(path)
    assert info.value.field == "trace"
    assert "line 3: ContextTokens: expected a whole number >= 0 (got 'x')" in str(info.value)
    # Through a scenario the same error names workload.trace.
    with pytest.raises(o1sim.ConfigError) as info:
        o1sim.simulate(with_("workload", {"trace": {"path": str(path)}}))
    assert info.value.field == "workload.trace" and "line 3" in str(info.value)
    with pytest.raises(o1sim.ConfigError) as info:
        o1sim.workload.from_trace(path, format="azur")
    assert info.value.field == "trace.format" and "did you mean azure" in str(info.value)
    with pytest.raises(o1sim.ConfigError) as info:
        o1sim.simulate(with_("workload", {"trace": {"path": str(tmp_path / "missing.csv")}}))
    assert info.value.field == "workload.trace.path" and "cannot read" in str(info.value)


# --------------------------------------------------------------------------- config.json

HF_CONFIGS = Path(__file__).parent / "data" / "hf_configs"


def _config(name: str = "llama-3.1-8b.json", **changes: Any) -> dict[str, Any]:
    """A sample config.json with keys changed (``None`` removes one)."""
    cfg: dict[str, Any] = json.loads((HF_CONFIGS / name).read_text())
    for key, value in changes.items():
        if value is None:
            cfg.pop(key, None)
        else:
            cfg[key] = value
    return cfg


HF_CASES = [
    # (config.json, field, words in the message)
    (_config(num_attention_heads=None), "model.hf_config.num_attention_heads", "is required"),
    (_config(hidden_size=None), "model.hf_config.hidden_size", "is required"),
    (_config(max_position_embeddings=None), "model.hf_config.max_position_embeddings", "is required"),
    (_config(model_type=None), "model.hf_config.model_type", "is required"),
    (_config(model_type="falcon"), "model.hf_config.model_type", "unknown model_type 'falcon'"),
    (_config(model_type="mistrall"), "model.hf_config.model_type", "did you mean mistral"),
    (_config(num_attention_heads=0), "model.hf_config.num_attention_heads", "integer in 1.."),
    (_config(hidden_size=-4096), "model.hf_config.hidden_size", "integer in 1.."),
    (_config(hidden_size=4096.5), "model.hf_config.hidden_size", "integer"),
    (_config(num_hidden_layers="32"), "model.hf_config.num_hidden_layers", "integer"),
    (_config(vocab_size=10**12), "model.hf_config.vocab_size", "integer in 1..=4294967295"),
    (_config(hidden_size=2**30), "model.hf_config.hidden_size", "<= 16777216"),
    (_config(num_key_value_heads=5), "model.hf_config.num_key_value_heads", "must divide num_attention_heads"),
    (_config(torch_dtype="int3"), "model.hf_config.torch_dtype", "float16, bfloat16 or float32"),
    (_config("mixtral-8x7b-v0.1.json", num_experts_per_tok=9), "model.hf_config.num_experts_per_tok", "<= experts"),
    (_config("mixtral-8x7b-v0.1.json", num_local_experts=None), "model.hf_config.num_local_experts", "is required"),
    (_config("mistral-7b-v0.1.json", sliding_window=0), "model.hf_config.sliding_window", "integer in 1.."),
    ([1, 2, 3], "model.hf_config", "config.json object"),
]


@pytest.mark.parametrize("config,field,words", HF_CASES, ids=[f"{c[1]}-{i}" for i, c in enumerate(HF_CASES)])
def test_bad_config_json_names_the_key(config: Any, field: str, words: str) -> None:
    for run in (lambda: o1sim.simulate(with_("model", {"hf_config": config})),
                lambda: o1sim.predict_step({"hf_config": config}, "h100", batch=[{"new_tokens": 8}])):
        with pytest.raises(o1sim.ConfigError) as info:
            run()
        assert info.value.field == field, str(info.value)
        assert words in str(info.value), str(info.value)


def test_a_config_json_path_that_cannot_be_read_is_named(tmp_path: Path) -> None:
    with pytest.raises(o1sim.ConfigError) as info:
        o1sim.simulate(with_("model", {"hf_config": str(tmp_path / "missing.json")}))
    assert info.value.field == "model.hf_config" and "no such file" in str(info.value)
    broken = tmp_path / "config.json"
    broken.write_text("{not json")
    with pytest.raises(o1sim.ConfigError) as info:
        o1sim.simulate(with_("model", {"hf_config": str(broken)}))
    assert info.value.field == "model.hf_config" and "as JSON" in str(info.value)


def test_preset_and_config_together_are_refused() -> None:
    with pytest.raises(o1sim.ConfigError) as info:
        o1sim.simulate(with_("model", {"preset": "llama-3-8b", "hf_config": _config()}))
    assert info.value.field == "model.hf_config" and "not both" in str(info.value)
