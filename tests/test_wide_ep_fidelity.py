"""docs/fidelity.md's wide-EP table is what benchmarks/moe.py computes now: a change to the
step model that moves a published comparison must show in the document."""

from __future__ import annotations

from benchkit import ROOT, benchmark, generated_table


def test_the_documented_wide_ep_table_is_the_benchmark_s() -> None:
    moe = benchmark("moe")
    doc = (ROOT / "docs" / "fidelity.md").read_text(encoding="utf-8")
    rows = moe.fidelity_rows()
    assert generated_table(doc, "moe-table") == moe.markdown(rows).strip(), \
        "regenerate: .venv/bin/python benchmarks/moe.py --markdown"
    # what the text around the table claims
    by = {r["key"]: r for r in rows}
    assert abs(by["lmsys-h100-prefill"]["error_pct"]) < 10
    assert by["lmsys-h100-decode"]["error_pct"] > 0, "the text says decode is over-predicted"
    assert all(r["eplb_gain_pct"] > 0 and r["tbo_gain_pct"] > 0 for r in rows)
