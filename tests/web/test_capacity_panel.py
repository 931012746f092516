"""The page's Capacity & plan panel in headless Chromium: the capacity search and the plan
run in the panel's Worker through the WASM module and give the answers the Python API gives
for the scenario the page searched; a bound no rate meets is an answer; a bad SLO shows its
error in the panel; the experiment stays live meanwhile."""

from __future__ import annotations

import json
from typing import Any

import o1sim

from pagekit import OUT, wait_ready


def _scenario(pg: Any) -> dict[str, Any]:
    return json.loads(pg.evaluate("JSON.stringify(window.o1simCapacity.current())"))


def _wait(pg: Any, state: str) -> None:
    pg.wait_for_function(
        "s => ['error', s].includes(document.querySelector('#capacity').dataset.state)", arg=state, timeout=180_000
    )


def test_capacity_matches_python_for_the_scenario_searched(page: Any, server: str) -> None:
    page.goto(server)
    wait_ready(page)
    page.click("#cap-run")
    _wait(page, "capacity-done")
    got = page.evaluate("document.querySelector('#capacity').dataset.capacity")
    sc = _scenario(page)
    expected = o1sim.capacity(sc, {"ttft_p99_ms": 2000, "tpot_p99_ms": 50}, seeds=3, workers=1)
    assert expected.rate is not None
    assert float(got) == expected.rate
    shown = page.inner_text("#cap-result .answer")
    assert f"{expected.rate:.2f} req/s" in shown
    rows = page.locator("#cap-result tbody tr").count()
    assert rows == len(expected.rates)
    page.screenshot(path=str(OUT / "capacity_panel.png"), full_page=True)


def test_plan_matches_python_and_an_impossible_slo_is_an_answer(page: Any, server: str) -> None:
    page.goto(server)
    wait_ready(page)
    page.fill("#plan-gpus", "h100,h200")
    page.fill("#plan-tp", "4,8")
    page.fill("#plan-replicas", "1,2")
    page.click("#plan-run")
    _wait(page, "plan-done")
    sc = _scenario(page)
    p = o1sim.plan(sc, {"gpu": ["h100", "h200"], "deployment.tp": [4, 8], "deployment.replicas": [1, 2]},
                   {"ttft_p99_ms": 2000, "tpot_p99_ms": 50}, seeds=1, workers=1)
    assert p.cheapest is not None
    assert float(page.evaluate("document.querySelector('#capacity').dataset.cheapest")) == p.cheapest["usd_per_hour"]
    assert page.locator("#plan-result tbody tr.cheapest").count() == 1
    assert "$4.00" in page.inner_text("#plan-prices") or "h200 $4.00" in page.inner_text("#plan-prices")
    # A bound no rate can meet: the panel answers "no sustainable rate".
    page.fill("#cap-ttft", "0.001")
    page.fill("#cap-seeds", "1")
    page.click("#cap-run")
    _wait(page, "capacity-done")
    assert page.evaluate("document.querySelector('#capacity').dataset.capacity") == "none"
    assert "No sustainable rate" in page.inner_text("#cap-result")


def test_a_bad_slo_shows_its_error_in_the_panel(page: Any, server: str) -> None:
    page.goto(server)
    wait_ready(page)
    page.fill("#cap-ttft", "0")
    page.fill("#cap-tpot", "0")
    page.fill("#cap-goodput", "1.5")  # a fraction of requests: the core refuses it
    page.click("#cap-run")
    _wait(page, "error")
    err = page.inner_text("#cap-error")
    assert err.startswith("ConfigError: slo.goodput") and "(0, 1]" in err, err
    # The experiment itself still runs (its own worker).
    runs = int(page.evaluate("Number(document.body.dataset.runs || 0)"))
    page.click("#run")
    page.wait_for_function("n => Number(document.body.dataset.runs || 0) > n && document.body.dataset.runs === document.body.dataset.started", arg=runs, timeout=60_000)
