"""Observability exports read back by real parsers: the Chrome trace as Trace Event Format
JSON (required fields, monotone time per track, slices that match the request table) and
the Prometheus text by prometheus_client's parser (counts and sums equal the Result's)."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

import o1sim
from o1sim.exports import token_timeline

GOLDEN = Path(__file__).parent / "golden"
POLICIES = ["vllm", "orca", "sarathi", "o1pro"]


@pytest.fixture(scope="module")
def preempting() -> o1sim.Result:
    """Small, with preemptions (vLLM on a 400-block pool)."""
    return o1sim.simulate(GOLDEN / "policy_vllm.toml", record_steps=True)


@pytest.fixture(scope="module")
def rejecting() -> o1sim.Result:
    """Two replicas, requests rejected by the router and for max_model_len."""
    return o1sim.simulate(GOLDEN / "rejections.toml", record_steps=True)


# --------------------------------------------------------------------------- token timeline


@pytest.mark.parametrize("name", [f"policy_{p}" for p in POLICIES] + ["rejections", "vllm_hand", "vllm_priority_timeout"])
def test_token_timeline_reproduces_every_request(name: str) -> None:
    r = o1sim.simulate(GOLDEN / f"{name}.toml", record_steps=True)
    req = r.requests
    tl = token_timeline(r.step_records, dict(zip(req.request_id.tolist(), req.prompt_tokens.tolist())))
    for row in req.itertuples():
        toks = tl.token_ms.get(int(row.request_id), [])
        if row.status != "finished":
            # A client timeout may abort a request after some of its tokens.
            assert toks == [] or (row.reason == "timeout" and len(toks) < row.output_tokens)
            assert all(t <= row.finish_ms for t in toks)
            continue
        assert len(toks) == row.output_tokens
        assert toks[0] == pytest.approx(row.first_token_ms, abs=1e-9)
        assert toks[-1] == pytest.approx(row.finish_ms, abs=1e-9)
        assert toks == sorted(toks)
        assert row.arrival_ms <= tl.first_scheduled_ms[int(row.request_id)] <= row.first_token_ms


def test_exports_of_a_run_without_steps_say_how_to_get_them(preempting: o1sim.Result) -> None:
    plain = o1sim.simulate(GOLDEN / "policy_vllm.toml")
    for export in (plain.to_prometheus, plain.to_chrome_trace, plain.to_vllm_bench):
        with pytest.raises(o1sim.StepsNotRecordedError, match=r"needs the scheduler steps, which this run did not "
                                                               r"record: pass record_steps=True"):
            export()
    # Asked for, the run again gives the same exports as the run that recorded its steps.
    assert plain.with_steps().to_prometheus() == preempting.to_prometheus()


# --------------------------------------------------------------------------- Chrome trace


def _trace(result: o1sim.Result, tmp_path: Path) -> dict[str, Any]:
    path = tmp_path / "trace.json"
    text = result.to_chrome_trace(path)
    assert path.read_text(encoding="utf-8") == text
    data: dict[str, Any] = json.loads(text)
    return data


def test_trace_event_format_fields_and_monotone_tracks(rejecting: o1sim.Result, tmp_path: Path) -> None:
    events = _trace(rejecting, tmp_path)["traceEvents"]
    assert events
    tracks: dict[tuple[Any, ...], list[float]] = defaultdict(list)
    for e in events:
        for key in ("ph", "ts", "pid", "tid", "name"):
            assert key in e, (key, e)
        assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0 and math.isfinite(e["ts"])
        assert e["ph"] in {"M", "X", "C", "b", "e"}
        if e["ph"] == "X":
            assert e["dur"] >= 0
            track: tuple[Any, ...] = ("thread", e["pid"], e["tid"])
        elif e["ph"] == "C":
            track = ("counter", e["pid"], e["name"])
            assert all(isinstance(v, (int, float)) for v in e["args"].values())
        elif e["ph"] in "be":
            track = ("async", e["pid"], e["cat"], e["id"])
        else:
            continue
        tracks[track].append(e["ts"])
    for track, times in tracks.items():
        assert times == sorted(times), track
    # Steps never overlap on a replica.
    for pid in {e["pid"] for e in events if e["ph"] == "X"}:
        steps = [e for e in events if e["ph"] == "X" and e["pid"] == pid]
        for a, b in zip(steps, steps[1:]):
            assert a["ts"] + a["dur"] <= b["ts"] + 1e-3


def test_trace_slices_match_the_request_table(rejecting: o1sim.Result, tmp_path: Path) -> None:
    events = _trace(rejecting, tmp_path)["traceEvents"]
    req = rejecting.requests.set_index("request_id")
    stacks: dict[int, list[str]] = defaultdict(list)
    spans: dict[tuple[int, str], list[float]] = {}
    for e in events:
        if e["ph"] == "b":
            stacks[e["id"]].append(e["name"])
            spans[(e["id"], e["name"])] = [e["ts"]]
        elif e["ph"] == "e":
            assert stacks[e["id"]] and stacks[e["id"]][-1] == e["name"], "begin/end pairs nest"
            stacks[e["id"]].pop()
            spans[(e["id"], e["name"])].append(e["ts"])
    assert all(not s for s in stacks.values())
    assert {rid for rid, _ in spans} == set(req.index.tolist())
    for rid, row in req.iterrows():
        outer = spans[(rid, f"request {rid}")]
        assert outer == pytest.approx([row.arrival_ms * 1e3, row.finish_ms * 1e3], abs=1e-3)
        if row.status == "finished":
            q, p, d = spans[(rid, "queued")], spans[(rid, "prefill")], spans[(rid, "decode")]
            assert q[0] == outer[0] and q[1] == p[0] and p[1] == d[0] and d[1] == outer[1]
            assert p[1] == pytest.approx(row.first_token_ms * 1e3, abs=1e-3)
        else:
            assert (rid, f"rejected: {row.reason}") in spans
    # Rejected-by-router requests live in the router process; replicas get their own.
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert "router" in names and {"replica 0 (GPU 0)", "replica 1 (GPU 1)"} <= names


def test_trace_steps_and_counters(preempting: o1sim.Result, tmp_path: Path) -> None:
    events = _trace(preempting, tmp_path)["traceEvents"]
    steps = [e for e in events if e["ph"] == "X"]
    assert len(steps) == preempting.summary["steps"]
    assert sum(len(e["args"]["preempted"]) for e in steps) == preempting.summary["preemptions"]
    assert sum(len(e["args"]["finished"]) for e in steps) == preempting.summary["finished"]
    assert {e["name"] for e in steps} <= {"prefill", "decode", "mixed"}
    for e in steps:
        a = e["args"]
        assert a["prefill_entries"] + a["decode_entries"] == a["batch_size"] and a["tokens"] >= a["batch_size"]
    kv = [e["args"]["used"] for e in events if e["ph"] == "C" and e["name"].startswith("KV")]
    assert len(kv) == len(steps) and 0 <= min(kv) and max(kv) <= 100
    assert max(kv) > 50  # this scenario's pool runs full
    queue = [e for e in events if e["ph"] == "C" and e["name"] == "requests"]
    assert len(queue) == len(preempting.timeseries)
    assert max(e["args"]["waiting"] for e in queue) > 0


# --------------------------------------------------------------------------- Prometheus


def _families(text: str) -> dict[str, Any]:
    from prometheus_client.parser import text_string_to_metric_families

    return {f.name: f for f in text_string_to_metric_families(text)}


def _samples(fam: Any, suffix: str = "", **labels: str) -> list[Any]:
    return [s for s in fam.samples if s.name == fam.name + suffix and all(s.labels.get(k) == v for k, v in labels.items())]


@pytest.mark.parametrize("fixture", ["preempting", "rejecting"])
def test_prometheus_parses_and_matches_the_result(fixture: str, request: pytest.FixtureRequest) -> None:
    r: o1sim.Result = request.getfixturevalue(fixture)
    fams = _families(r.to_prometheus())
    req = r.requests
    fin = req[req.status == "finished"]
    s = r.summary
    model = r.deployment["model"]["name"]
    replicas = r.deployment["replicas"]

    kinds = {
        "vllm:time_to_first_token_seconds": "histogram",
        "vllm:inter_token_latency_seconds": "histogram",
        "vllm:request_time_per_output_token_seconds": "histogram",
        "vllm:e2e_request_latency_seconds": "histogram",
        "vllm:request_queue_time_seconds": "histogram",
        "vllm:request_success": "counter",
        "vllm:prompt_tokens": "counter",
        "vllm:generation_tokens": "counter",
        "vllm:num_preemptions": "counter",
        "vllm:prefix_cache_queries": "counter",
        "vllm:prefix_cache_hits": "counter",
        "vllm:num_requests_running": "gauge",
        "vllm:num_requests_waiting": "gauge",
        "vllm:kv_cache_usage_perc": "gauge",
    }
    for name, kind in kinds.items():
        assert name in fams, name
        assert fams[name].type == kind, name
        assert {smp.labels["model_name"] for smp in fams[name].samples} == {model}
        assert {smp.labels["engine"] for smp in fams[name].samples} == {str(i) for i in range(replicas)}

    def total(name: str, suffix: str) -> float:
        return sum(smp.value for smp in _samples(fams[name], suffix))

    assert total("vllm:request_success", "_total") == s["finished"]
    assert total("vllm:prompt_tokens", "_total") == fin.prompt_tokens.sum()
    assert total("vllm:generation_tokens", "_total") == fin.output_tokens.sum()
    assert total("vllm:num_preemptions", "_total") == s["preemptions"]
    assert total("vllm:prefix_cache_queries", "_total") == s["prefix_cache_queries"] > 0
    assert total("vllm:prefix_cache_hits", "_total") == s["prefix_cache_hits"]
    assert total("vllm:time_to_first_token_seconds", "_count") == s["finished"]
    # vLLM's metrics are the server's: engine-side latencies
    assert total("vllm:time_to_first_token_seconds", "_sum") == pytest.approx(fin.engine_ttft_ms.sum() / 1e3)
    assert total("vllm:e2e_request_latency_seconds", "_sum") == pytest.approx(fin.engine_e2e_ms.sum() / 1e3)
    assert total("vllm:e2e_request_latency_seconds", "_sum") / s["finished"] == pytest.approx(s["engine_e2e_ms"]["mean"] / 1e3)
    tpot_count = total("vllm:request_time_per_output_token_seconds", "_count")
    assert tpot_count == (fin.output_tokens > 1).sum()
    many = fin[fin.output_tokens > 1]
    engine_tpot = ((many.finish_ms - many.first_token_ms) / (many.output_tokens - 1)).mean()
    assert total("vllm:request_time_per_output_token_seconds", "_sum") / tpot_count == pytest.approx(engine_tpot / 1e3)
    # One inter-token gap per output token after the first; the gaps add up to the decode time.
    assert total("vllm:inter_token_latency_seconds", "_count") == (fin.output_tokens - 1).sum()
    assert total("vllm:inter_token_latency_seconds", "_sum") == pytest.approx(((fin.finish_ms - fin.first_token_ms).sum()) / 1e3)
    assert total("vllm:request_queue_time_seconds", "_sum") / s["finished"] == pytest.approx(s["queueing_ms"]["mean"] / 1e3)

    # Buckets are cumulative and end at +Inf = count, per engine.
    for name in [k for k, v in kinds.items() if v == "histogram"]:
        for e in range(replicas):
            buckets = _samples(fams[name], "_bucket", engine=str(e))
            values = [b.value for b in buckets]
            assert values == sorted(values) and buckets[-1].labels["le"] == "+Inf"
            assert values[-1] == _samples(fams[name], "_count", engine=str(e))[0].value
    # Mean KV gauge per replica averages to the summary's time-weighted mean.
    kv = [smp.value for smp in fams["vllm:kv_cache_usage_perc"].samples]
    assert sum(kv) / len(kv) == pytest.approx(s["kv_utilization_mean"], rel=1e-6)


def test_prometheus_rejections_by_reason(rejecting: o1sim.Result) -> None:
    fams = _families(rejecting.to_prometheus(model_name="my-model"))
    fam = fams["o1sim:requests_rejected"]
    by_reason: dict[str, float] = defaultdict(float)
    for smp in _samples(fam, "_total"):
        assert smp.labels["model_name"] == "my-model"
        by_reason[smp.labels["reason"]] += smp.value
    assert dict(by_reason) == {k: v for k, v in rejecting.summary["rejections"].items() if v}
