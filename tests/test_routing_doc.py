"""docs/routing.md's table for the generated Mooncake-like trace is what benchmarks/routing.py
computes now, and what the text around it claims holds: a prefix-aware router raises the
global hit rate over least-outstanding-tokens (and brings TTFT down), and stale KV events
lower the precise router's hit rate."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _routing() -> Any:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        spec = importlib.util.spec_from_file_location("o1sim_bench_routing", ROOT / "benchmarks" / "routing.py")
        assert spec and spec.loader
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod
        spec.loader.exec_module(mod)
        return mod
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))


def test_the_documented_routing_table_is_the_benchmark_s() -> None:
    routing = _routing()
    doc = (ROOT / "docs" / "routing.md").read_text(encoding="utf-8")
    m = re.search(r"<!-- routing-generated:[^\n]*-->\n(.*?)\n<!-- /routing-generated -->", doc, flags=re.S)
    assert m, "docs/routing.md lost its routing-generated markers"
    rows = routing.rows(routing.generated_trace())
    assert m.group(1).strip() == routing.markdown(rows).strip(), "regenerate: .venv/bin/python benchmarks/routing.py"
    by = {(r["router"], r["delay_ms"]): r for r in rows}
    lot = by[("least_outstanding_tokens", 0)]
    for router in ("precise_prefix", "approx_prefix"):
        assert by[(router, 0)]["hit_rate"] > lot["hit_rate"] + 0.05, router
        assert by[(router, 0)]["ttft_mean_ms"] < lot["ttft_mean_ms"], router
    stale = [by[("precise_prefix", d)]["hit_rate"] for d in (0, 1000, 10_000)]
    assert stale[0] > stale[1] > stale[2], stale
    assert all(r["finished"] == r["requests"] for r in rows)
