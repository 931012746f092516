"""The page's summary table in Chromium is the core's metric table: its headings are the rows
shown on the page (``o1sim.registry.shown_metrics("page")``, which the page reads from the WASM
module's ``presets()``), and each cell holds the summary's exact value written as Python writes
it; the metric added through the table alone (output throughput per GPU) among them."""

from __future__ import annotations

from typing import Any

import o1sim
from o1sim import registry

from pagekit import OUT, wait_ready
from pagekit import page_scenario as _page_scenario
from pagekit import rows as _rows

NEW = "output_tokens_per_s_per_gpu"

def test_the_summary_table_shows_the_metric_tables_rows(page: Any, server: str) -> None:
    page.goto(server)
    wait_ready(page)
    shown = registry.shown_metrics("page")
    headings = page.evaluate("[...document.querySelectorAll('#summary thead th')].map(th => th.textContent)")
    assert headings == ["policy", *(m.heading for m in shown)]
    assert registry.shown_metric(NEW).heading in headings
    titles = page.evaluate("[...document.querySelectorAll('#summary thead th')].slice(1).map(th => th.title)")
    assert titles == [m.doc for m in shown]
    sent = _page_scenario(page)
    rows = _rows(page)
    assert rows
    for policy, row in rows.items():
        s = o1sim.simulate({**sent, "scheduler": {**sent["scheduler"], "policy": policy}}).summary
        assert float(row[NEW]) == s[NEW] > 0, policy
        for m in shown:
            value = registry.metric_value(s, m.path)
            assert (None if row[m.path] is None else float(row[m.path])) == value, (policy, m.path)
            assert row[f"{m.path}_text"] == registry.format_metric(m, value), (policy, m.path)
    OUT.mkdir(exist_ok=True)
    page.locator("#summary").screenshot(path=str(OUT / "summary-metrics.png"))
