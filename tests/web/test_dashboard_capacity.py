"""The dashboard's "Capacity & plan" tab in Chromium, as a user meets it: `o1sim dashboard`
serving the Streamlit app, the tab clicked, the buttons pressed, the answers read off the
page and compared with the Python API's."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

import o1sim

pytest.importorskip("streamlit")


@pytest.fixture()
def tab(browser: Any, dashboard: str) -> Iterator[Any]:
    ctx = browser.new_context(viewport={"width": 1500, "height": 1100})
    pg = ctx.new_page()
    pg.goto(dashboard)
    pg.get_by_role("tab", name="Capacity & plan").click(timeout=120_000)
    try:
        yield pg
    finally:
        ctx.close()


def _metric(pg: Any, label: str) -> str:
    m = pg.locator('[data-testid="stMetric"]', has_text=label).first
    m.wait_for(timeout=180_000)
    return str(m.locator('[data-testid="stMetricValue"]').inner_text()).strip()


def test_capacity_tab_finds_the_rate_python_finds(tab: Any) -> None:
    tab.get_by_role("button", name="Find capacity").click()
    shown = _metric(tab, "Capacity (req/s)")
    expected = o1sim.capacity(o1sim.Scenario.default(), {"ttft_p99_ms": 2000.0, "tpot_p99_ms": 50.0}, seeds=3)
    assert shown == f"{expected.rate:,.2f}"
    tab.get_by_text(expected.message).first.wait_for(timeout=10_000)
    os.makedirs("tests/web/out", exist_ok=True)
    tab.screenshot(path="tests/web/out/dashboard_capacity.png", full_page=True)


def test_plan_tab_shows_the_cheapest_configuration(tab: Any) -> None:
    tab.get_by_role("button", name="Plan").click()
    shown = _metric(tab, "Cheapest ($/hour)")
    sc = o1sim.Scenario.default()
    p = o1sim.plan(sc, {"gpu": ["h100", "h200"], "deployment.tp": [2, 4, 8], "deployment.replicas": [1, 2, 4],
                        "scheduler.policy": ["vllm"]}, {"ttft_p99_ms": 2000.0, "tpot_p99_ms": 50.0}, load=14.0, seeds=1)
    assert p.cheapest is not None
    assert shown == f"{p.cheapest['usd_per_hour']:,.2f}"
    tab.get_by_text(f"{int(p.configs['feasible'].sum())} of {len(p.configs)} configurations meet the SLO").wait_for(timeout=10_000)


def _idle(pg: Any) -> None:
    """Wait until the app's script run is over (its state, not a time): a value typed while
    the first run still draws the page can be drawn over and lost."""
    pg.wait_for_selector("[data-testid=stApp][data-test-script-state=notRunning]", state="attached", timeout=180_000)


def test_an_impossible_slo_is_an_answer_not_an_error(tab: Any) -> None:
    _idle(tab)
    box = tab.locator('input[aria-label="TTFT p99 ≤ (ms)"]').first
    box.fill("0.001")
    box.press("Enter")  # commits the value: the button's run below carries it
    _idle(tab)
    tab.get_by_role("button", name="Find capacity").click()
    tab.get_by_text("No sustainable rate").first.wait_for(timeout=180_000)
    assert tab.locator('[data-testid="stException"]').count() == 0
