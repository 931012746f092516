"""Helpers of the browser tests (the page's run counter, the summary table, the scenario
the page sent, the screenshot folder)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

OUT = Path(__file__).parent / "out"


def wait_ready(pg: Any, runs_before: int = 0) -> None:
    """Wait for the page's first run (or for a run after `runs_before`)."""
    pg.wait_for_function(
        "n => document.body.dataset.ready === '1' && Number(document.body.dataset.runs || 0) > n && document.body.dataset.runs === document.body.dataset.started",
        arg=runs_before,
        timeout=30_000,
    )


def runs(pg: Any) -> int:
    return int(pg.evaluate("Number(document.body.dataset.runs || 0)"))


def rows(pg: Any) -> dict[str, dict[str, str]]:
    """Summary table: policy → {key: exact value (data-value)}, plus the shown text."""
    return pg.evaluate(
        """() => Object.fromEntries([...document.querySelectorAll('#summary tbody tr')].map(tr => [
            tr.dataset.policy,
            Object.fromEntries([...tr.querySelectorAll('td[data-key]')].flatMap(td => [
                [td.dataset.key, td.dataset.value ?? null], [td.dataset.key + '_text', td.textContent]]))]))"""
    )


def page_scenario(pg: Any) -> dict[str, Any]:
    """The scenario the page sent for its first policy (the *Scenario JSON* box)."""
    return json.loads(pg.text_content("#scenario-json"))
