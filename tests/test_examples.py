"""examples/: every scenario file runs through the command line and the API with the same
bytes, and shows what its comment says it shows (prefix-cache hits, sessions, the trace's
requests, KV caches crossing the fabric, a link degrading then failing, prefixes
loaded back from a host-DRAM tier)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import o1sim

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
SCENARIOS = sorted(EXAMPLES.glob("*.toml"))


def _cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "o1sim", *args], cwd=cwd, capture_output=True, text=True, timeout=300)


def test_the_examples_are_there() -> None:
    names = {p.stem for p in SCENARIOS}
    assert names == {"default", "shared_prefix", "sessions", "trace_replay", "disaggregated", "link_degradation", "kv_offload"}


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_an_example_runs_through_the_cli_and_the_api_alike(path: Path, tmp_path: Path) -> None:
    out = tmp_path / "result.json"
    res = _cli("run", str(path.relative_to(ROOT)), "--json", str(out))
    assert res.returncode == 0, res.stderr
    api = o1sim.simulate(path)
    assert out.read_text(encoding="utf-8") == api.to_json()
    s = api.summary
    assert s["finished"] == s["num_requests"] > 0 and s["rejected"] == 0


def _summary(name: str, **overrides: Any) -> dict[str, Any]:
    sc = o1sim.Scenario.from_file(EXAMPLES / f"{name}.toml")
    return o1sim.simulate(sc.with_overrides(overrides) if overrides else sc).summary


def test_default_is_the_embedded_default() -> None:
    assert o1sim.Scenario.from_file(EXAMPLES / "default.toml").validate() == o1sim.Scenario.default().validate()


def test_shared_prefix_is_served_from_the_prefix_cache() -> None:
    on = _summary("shared_prefix")
    off = _summary("shared_prefix", **{"scheduler.enable_prefix_caching": False})
    assert on["prefix_cache_hit_rate"] > 0.5
    assert on["computed_prefill_tokens"] < 0.5 * off["computed_prefill_tokens"]
    assert on["ttft_ms"]["mean"] < off["ttft_ms"]["mean"]


def test_sessions_resend_their_history() -> None:
    s = _summary("sessions")
    assert s["num_requests"] > 40 * 2 - 1  # every conversation has at least two turns
    assert s["prefix_cache_hit_rate"] > 0.5  # each turn's history is in the cache


def test_the_trace_is_its_generators_output_and_replays_at_twice_its_rate() -> None:
    spec = importlib.util.spec_from_file_location("make_conversation", EXAMPLES / "traces" / "make_conversation.py")
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    text = (EXAMPLES / "traces" / "conversation.jsonl").read_text(encoding="utf-8")
    assert gen.trace() == text
    rows = [json.loads(line) for line in text.splitlines()]
    r = o1sim.simulate(EXAMPLES / "trace_replay.toml")
    req = r.requests.sort_values("request_id")
    assert len(req) == len(rows) == 300
    assert req["prompt_tokens"].tolist() == [row["input_length"] for row in rows]
    # The replay starts at the first request and runs the gaps at half their length.
    t0 = rows[0]["timestamp"]
    assert req["arrival_ms"].tolist() == pytest.approx([(row["timestamp"] - t0) / 2 for row in rows], abs=1e-6)


def test_disaggregated_moves_every_kv_cache_over_the_fabric() -> None:
    r = o1sim.simulate(EXAMPLES / "disaggregated.toml")
    topo = r.summary["topology"]
    assert topo["kv_transfers"] == r.summary["finished"] and topo["kv_bytes"] > 0
    assert r.links is not None and (r.links[r.links["kind"] == "ib"]["bytes"] > 0).any()


def test_link_degradation_slows_then_stops_a_replica() -> None:
    topo = _summary("link_degradation")["topology"]
    assert topo["events_applied"] == 2
    assert topo["stopped_replicas"] == 1 and topo["moved_requests"] > 0


def test_kv_offload_loads_evicted_prefixes_back_from_host_memory() -> None:
    r = o1sim.simulate(EXAMPLES / "kv_offload.toml")
    on = r.summary
    off = _summary("kv_offload", **{"scheduler.kv_offload": None})
    tier = on["kv_offload"]
    assert "kv_offload" not in off
    # The GPU alone keeps under half the prefixes; with the tier most are found somewhere.
    assert tier["hit_rate_all_tiers"] > on["prefix_cache_hit_rate"] + 0.3
    assert tier["tiers"][0]["medium"] == "cpu" and tier["tiers"][0]["hit_blocks"] > 0
    assert on["computed_prefill_tokens"] < 0.5 * off["computed_prefill_tokens"]
    assert on["ttft_ms"]["mean"] < 0.5 * off["ttft_ms"]["mean"]
    loaded = r.requests["kv_load_ms"]
    assert (loaded > 0).sum() == tier["load_ms"]["requests"] > 0
