"""Helpers of the browser tests (the page's run counter, the screenshot folder)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

OUT = Path(__file__).parent / "out"


def wait_ready(pg: Any, runs_before: int = 0) -> None:
    """Wait for the page's first run (or for a run after `runs_before`)."""
    pg.wait_for_function(
        "n => document.body.dataset.ready === '1' && Number(document.body.dataset.runs || 0) > n",
        arg=runs_before,
        timeout=30_000,
    )


def runs(pg: Any) -> int:
    return int(pg.evaluate("Number(document.body.dataset.runs || 0)"))
