"""docs/routing.md's table for the generated Mooncake-like trace is what benchmarks/routing.py
computes now, and what the text around it claims holds: a prefix-aware router raises the
global hit rate over least-outstanding-tokens (and brings TTFT down), and stale KV events
lower the precise router's hit rate."""

from __future__ import annotations

from benchkit import ROOT, benchmark, generated_table


def test_the_documented_routing_table_is_the_benchmark_s() -> None:
    routing = benchmark("routing")
    doc = (ROOT / "docs" / "routing.md").read_text(encoding="utf-8")
    rows = routing.rows(routing.generated_trace())
    assert generated_table(doc, "routing-generated") == routing.markdown(rows).strip(), \
        "regenerate: .venv/bin/python benchmarks/routing.py"
    by = {(r["router"], r["delay_ms"]): r for r in rows}
    lot = by[("least_outstanding_tokens", 0)]
    for router in ("precise_prefix", "approx_prefix"):
        assert by[(router, 0)]["hit_rate"] > lot["hit_rate"] + 0.05, router
        assert by[(router, 0)]["ttft_mean_ms"] < lot["ttft_mean_ms"], router
    stale = [by[("precise_prefix", d)]["hit_rate"] for d in (0, 1000, 10_000)]
    assert stale[0] > stale[1] > stale[2], stale
    assert all(r["finished"] == r["requests"] for r in rows)
