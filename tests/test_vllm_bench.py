"""The `vllm bench serve --save-result` export (`o1sim run --format vllm-bench`,
`o1sim.exports.vllm_bench`): vLLM's field names and units, failures as vLLM counts them, and
values that agree with the run's summary and request table.

The field names are those of vLLM's ``vllm/benchmarks/serve.py`` (``benchmark()`` and
``main_async()``); ``SAMPLE`` is a small file of that shape (three prompts, one failed), as
``vllm bench serve --save-result --save-detailed --percentile-metrics ttft,tpot,itl,e2el``
writes it. The real runs under shared/data/real-vllm-h100 are inference-perf reports, not
this format, so the sample stands in for them."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import o1sim
from o1sim.exports import VLLM_BENCH_DETAILED, vllm_bench, vllm_bench_json

from clikit import invoke

GOLDEN = Path(__file__).parent / "golden"

SAMPLE: dict[str, Any] = {
    "date": "20260217-155451", "endpoint_type": "openai", "backend": "openai", "label": None,
    "model_id": "meta-llama/Llama-2-7b-hf", "tokenizer_id": "meta-llama/Llama-2-7b-hf", "num_prompts": 3,
    "request_rate": "inf", "burstiness": 1.0, "max_concurrency": None,
    "duration": 2.5, "completed": 2, "failed": 1, "total_input_tokens": 300, "total_output_tokens": 7,
    "request_throughput": 0.8, "request_goodput": None, "output_throughput": 2.8, "total_token_throughput": 122.8,
    "input_lens": [100, 200, 50], "output_lens": [4, 3, 0],
    "ttfts": [0.1, 0.3, 0.0], "itls": [[0.02, 0.03, 0.05], [0.04, 0.06], []],
    "latencies": [0.2, 0.4, 0.0], "start_times": [1000.0, 1000.5, 1001.0], "queue_times": [0.0, 0.0, 0.0],
    "generated_texts": ["abcd", "xyz", ""], "errors": ["", "", "Bad Request"],
    "max_output_tokens_per_s": 7.0, "max_concurrent_requests": 2, "rtfx": 0.0,
    "mean_ttft_ms": 200.0, "median_ttft_ms": 200.0, "std_ttft_ms": 100.0, "p99_ttft_ms": 298.0,
    "mean_tpot_ms": 41.666666666666664, "median_tpot_ms": 41.666666666666664, "std_tpot_ms": 8.333333333333334,
    "p99_tpot_ms": 49.83333333333333,
    "mean_itl_ms": 40.0, "median_itl_ms": 40.0, "std_itl_ms": 14.142135623730951, "p99_itl_ms": 59.6,
    "mean_e2el_ms": 300.0, "median_e2el_ms": 300.0, "std_e2el_ms": 100.0, "p99_e2el_ms": 398.0,
}


@pytest.fixture(scope="module")
def rejecting() -> o1sim.Result:
    """The golden vLLM scenario with a context limit that rejects some prompts."""
    sc = o1sim.Scenario.from_file(GOLDEN / "policy_vllm.toml").with_overrides({"scheduler.max_model_len": 1024})
    return o1sim.simulate(sc, record_steps=True)


@pytest.fixture(scope="module")
def bench(rejecting: o1sim.Result) -> dict[str, Any]:
    return vllm_bench(rejecting, date="20260101-000000")


def _kind(v: Any) -> str:
    if isinstance(v, list):
        return "list"
    if v == "inf":  # vLLM's infinite request rate
        return "number"
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return "other"
    return "number"


def test_the_sample_is_self_consistent() -> None:
    """The sample's units are vLLM's: per-request seconds, aggregates in ms."""
    ok = [i for i, e in enumerate(SAMPLE["errors"]) if not e]
    assert SAMPLE["mean_ttft_ms"] == pytest.approx(1000 * np.mean([SAMPLE["ttfts"][i] for i in ok]))
    assert SAMPLE["mean_e2el_ms"] == pytest.approx(1000 * np.mean([SAMPLE["latencies"][i] for i in ok]))
    assert SAMPLE["mean_itl_ms"] == pytest.approx(1000 * np.mean([g for i in ok for g in SAMPLE["itls"][i]]))
    assert SAMPLE["completed"] + SAMPLE["failed"] == SAMPLE["num_prompts"]


def test_same_keys_and_kinds_as_vllm(bench: dict[str, Any]) -> None:
    assert list(bench) == list(SAMPLE)  # vLLM's order too
    for key, value in SAMPLE.items():
        assert _kind(bench[key]) == _kind(value), key
    json.loads(json.dumps(bench, allow_nan=False))  # strict JSON
    n = bench["num_prompts"]
    for key in VLLM_BENCH_DETAILED + ("latencies", "queue_times"):
        assert len(bench[key]) == n, key


def test_failures_are_vllms_failed_requests(rejecting: o1sim.Result, bench: dict[str, Any]) -> None:
    s = rejecting.summary
    assert s["rejected"] > 0 and s["finished"] > 0
    assert bench["num_prompts"] == s["num_requests"]
    assert bench["completed"] == s["finished"] and bench["failed"] == s["rejected"]
    assert bench["completed"] + bench["failed"] == bench["num_prompts"]
    failed = [i for i, e in enumerate(bench["errors"]) if e]
    assert len(failed) == bench["failed"]
    assert all(bench["errors"][i] == "rejected: prompt exceeds max_model_len" for i in failed)
    for i in failed:
        assert bench["output_lens"][i] == 0 and bench["ttfts"][i] == 0.0 and bench["itls"][i] == []
        assert bench["latencies"][i] == 0.0
    req = rejecting.requests.sort_values("request_id")
    assert bench["input_lens"] == req["prompt_tokens"].tolist()
    fin = req[req["status"] == "finished"]
    assert bench["total_input_tokens"] == int(fin["prompt_tokens"].sum())
    assert bench["total_output_tokens"] == int(fin["output_tokens"].sum())


def test_values_agree_with_the_summary(rejecting: o1sim.Result, bench: dict[str, Any]) -> None:
    s = rejecting.summary
    assert bench["duration"] == s["duration_s"]
    assert bench["request_throughput"] == pytest.approx(s["throughput_rps"])
    assert bench["output_throughput"] == pytest.approx(s["output_tokens_per_s"])
    assert bench["total_token_throughput"] == pytest.approx(s["total_tokens_per_s"])
    assert bench["mean_ttft_ms"] == pytest.approx(s["ttft_ms"]["mean"])
    assert bench["mean_e2el_ms"] == pytest.approx(s["e2e_ms"]["mean"])
    assert bench["mean_tpot_ms"] == pytest.approx(s["tpot_ms"]["mean"])
    assert bench["median_ttft_ms"] == pytest.approx(s["ttft_ms"]["p50"], rel=0.02)
    assert bench["p99_ttft_ms"] == pytest.approx(s["ttft_ms"]["p99"], rel=0.05)
    # Per request, seconds: a success's TTFT and latency are the table's ms / 1000, and its
    # gaps add up to the time after the first token, one gap per token after the first.
    req = rejecting.requests.sort_values("request_id")
    ok = [i for i, e in enumerate(bench["errors"]) if not e]
    for i in ok:
        row = req.iloc[i]
        assert bench["ttfts"][i] == pytest.approx(row["ttft_ms"] / 1e3)
        assert bench["latencies"][i] == pytest.approx(row["e2e_ms"] / 1e3)
        assert len(bench["itls"][i]) == bench["output_lens"][i] - 1
        assert math.fsum(bench["itls"][i]) == pytest.approx(bench["latencies"][i] - bench["ttfts"][i])
    flat = [g for i in ok for g in bench["itls"][i]]
    assert bench["mean_itl_ms"] == pytest.approx(1000 * np.mean(flat))
    assert bench["p99_itl_ms"] == pytest.approx(1000 * np.percentile(flat, 99))
    assert bench["std_e2el_ms"] == pytest.approx(1000 * np.std([bench["latencies"][i] for i in ok]))
    assert bench["request_rate"] == 20.0 and bench["burstiness"] == 1.0
    assert bench["model_id"] == rejecting.deployment["model"]["name"]
    assert 0 < bench["max_concurrent_requests"] <= bench["completed"]
    assert bench["max_output_tokens_per_s"] > 0


def test_options(rejecting: o1sim.Result) -> None:
    short = vllm_bench(rejecting, detailed=False, percentiles=[50, 99.9], metrics=["ttft", "itl"],
                       goodput={"ttft": 1e9})
    assert not set(VLLM_BENCH_DETAILED) & set(short)
    assert {"p50_ttft_ms", "p99.9_ttft_ms", "p50_itl_ms", "p99.9_itl_ms"} <= set(short)
    assert not any(k.endswith("_tpot_ms") or k.endswith("_e2el_ms") for k in short)
    assert short["request_goodput"] == pytest.approx(short["request_throughput"])  # every request meets it
    assert vllm_bench(rejecting, goodput={"ttft": 0.0})["request_goodput"] == 0.0
    with pytest.raises(ValueError, match="unknown metric"):
        vllm_bench(rejecting, metrics=["queue"])
    gamma = o1sim.simulate(o1sim.Scenario.from_file(GOLDEN / "policy_vllm.toml").with_overrides(
        {"workload.arrival": {"kind": "gamma", "rate": 10.0, "cv": 2.0}, "workload.num_requests": 30}), record_steps=True)
    assert vllm_bench(gamma)["burstiness"] == pytest.approx(0.25)
    assert json.loads(vllm_bench_json(gamma))["request_rate"] == 10.0


def test_result_method_writes_the_file(rejecting: o1sim.Result, tmp_path: Path) -> None:
    out = tmp_path / "sim.json"
    data = rejecting.to_vllm_bench(out, date="20260101-000000")
    assert json.loads(out.read_text()) == data == vllm_bench(rejecting, date="20260101-000000")


def test_cli_writes_the_vllm_bench_file(tmp_path: Path) -> None:
    out = tmp_path / "sim.json"
    scenario = GOLDEN / "policy_vllm.toml"
    res = invoke(["run", str(scenario), "--set", "scheduler.max_model_len=1024",
                  "--format", "vllm-bench", "--json", str(out)])
    assert res.exit_code == 0, res.output + res.stderr
    data = json.loads(out.read_text())
    assert set(data) == set(SAMPLE)
    s = o1sim.simulate(o1sim.Scenario.from_file(scenario).with_overrides({"scheduler.max_model_len": 1024})).summary
    assert data["completed"] == s["finished"] and data["completed"] + data["failed"] == data["num_prompts"]
    assert data["mean_ttft_ms"] == pytest.approx(s["ttft_ms"]["mean"])
    # To stdout, the tables on stderr.
    res = invoke(["run", str(scenario), "--format", "vllm-bench", "--json", "-"])
    assert res.exit_code == 0, res.stderr
    assert json.loads(res.stdout)["num_prompts"] == s["num_requests"]


def test_cli_format_without_json_is_one_red_line() -> None:
    res = invoke(["run", "--format", "vllm-bench"])
    assert res.exit_code == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "--json" in lines[0] and "Traceback" not in res.stderr
    res = invoke(["run", "--format", "chrome", "--json", "-"])
    assert res.exit_code == 2 and len(res.stderr.strip().splitlines()) == 1
