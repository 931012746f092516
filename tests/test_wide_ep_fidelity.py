"""docs/fidelity.md's wide-EP table is what benchmarks/moe.py computes now: a change to the
step model that moves a published comparison must show in the document."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _moe():  # type: ignore[no-untyped-def]
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        spec = importlib.util.spec_from_file_location("o1sim_bench_moe", ROOT / "benchmarks" / "moe.py")
        assert spec and spec.loader
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod
        spec.loader.exec_module(mod)
        return mod
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))


def test_the_documented_wide_ep_table_is_the_benchmark_s() -> None:
    moe = _moe()
    doc = (ROOT / "docs" / "fidelity.md").read_text(encoding="utf-8")
    m = re.search(r"<!-- moe-table:[^\n]*-->\n(.*?)\n<!-- /moe-table -->", doc, flags=re.S)
    assert m, "docs/fidelity.md lost its moe-table markers"
    rows = moe.fidelity_rows()
    assert m.group(1).strip() == moe.markdown(rows).strip(), "regenerate: .venv/bin/python benchmarks/moe.py --markdown"
    # what the text around the table claims
    by = {r["key"]: r for r in rows}
    assert abs(by["lmsys-h100-prefill"]["error_pct"]) < 10
    assert by["lmsys-h100-decode"]["error_pct"] > 0, "the text says decode is over-predicted"
    assert all(r["eplb_gain_pct"] > 0 and r["tbo_gain_pct"] > 0 for r in rows)
