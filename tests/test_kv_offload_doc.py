"""docs/kv-offload.md's table is what benchmarks/kv_offload.py computes now, and what the text
under it claims holds: a host tier raises the hit rate across tiers and cuts prefill and
TTFT; blocking loads stall steps and slow decoding; a degraded path keeps the hit rate but
makes TTFT worse than prefilling again; a tier too small barely helps; an SSD below a small
DRAM tier brings the hit rate back."""

from __future__ import annotations

from benchkit import ROOT, benchmark, generated_table


def test_the_documented_offload_table_is_the_benchmark_s() -> None:
    bench = benchmark("kv_offload")
    doc = (ROOT / "docs" / "kv-offload.md").read_text(encoding="utf-8")
    rows = bench.rows()
    assert generated_table(doc, "kv-offload-table") == bench.markdown(rows).strip(), \
        "regenerate: .venv/bin/python benchmarks/kv_offload.py"
    none, cpu, blocking, degraded, small, ssd = rows
    assert all(r["finished"] == r["requests"] for r in rows)
    assert cpu["hit_rate_all_tiers"] > none["hit_rate_all_tiers"] + 0.5
    assert cpu["prefill_mtok"] < none["prefill_mtok"] / 5
    assert cpu["ttft_mean_ms"] < none["ttft_mean_ms"] / 4
    assert cpu["stall_ms"] == 0 < blocking["stall_ms"]
    assert blocking["tpot_mean_ms"] > cpu["tpot_mean_ms"]
    assert abs(degraded["hit_rate_all_tiers"] - cpu["hit_rate_all_tiers"]) < 0.01
    assert degraded["load_p50_ms"] > 30 * cpu["load_p50_ms"]
    assert degraded["ttft_mean_ms"] > none["ttft_mean_ms"]
    assert small["hit_rate_all_tiers"] < none["hit_rate_all_tiers"] + 0.05
    assert ssd["hit_rate_all_tiers"] > cpu["hit_rate_all_tiers"] - 0.01
    assert len(ssd["tier_hits"]) == 2 and ssd["tier_hits"][1] > ssd["tier_hits"][0]
    assert cpu["ttft_mean_ms"] < ssd["ttft_mean_ms"] < none["ttft_mean_ms"]
