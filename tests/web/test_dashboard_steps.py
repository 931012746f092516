"""The dashboard's Steps tab in headless Chromium, as a user meets it: `o1sim dashboard`
serves the Streamlit app, the tab records the steps on request, and a click on a step in
the timeline chart opens that step's kernels — the ones Python's ``Result.step_anatomy``
gives for it."""

from __future__ import annotations

import re
from typing import Any

import o1sim

from pagekit import OUT


def test_a_click_on_a_step_in_the_dashboard_opens_its_kernels(browser: Any, dashboard: str) -> None:
    ctx = browser.new_context(viewport={"width": 1500, "height": 1100})
    page = ctx.new_page()
    try:
        page.goto(dashboard)
        page.get_by_role("tab", name="Steps").click(timeout=120_000)
        page.get_by_text("Record the steps").click()
        page.wait_for_selector("text=/\\*?\\*?Step 0\\*?\\*? · replica/", timeout=120_000)
        chart = page.locator("[data-testid='stVegaLiteChart']").filter(has_text="Scheduler steps").first
        chart.wait_for(timeout=60_000)
        box = chart.locator("canvas, svg").first.bounding_box()
        assert box is not None
        # Click along replica 0's lane until a step other than 0 is picked.
        shown = ""
        for frac in (0.5, 0.45, 0.55, 0.4, 0.6, 0.35, 0.65):
            page.mouse.click(box["x"] + box["width"] * frac, box["y"] + box["height"] * 0.27)
            try:
                page.wait_for_function(
                    "() => /Step [1-9]\\d* · replica/.test(document.body.innerText)", timeout=15_000)
            except Exception:  # noqa: BLE001 - a click between two bars picks nothing; try further along
                continue
            shown = page.inner_text("body")
            break
        m = re.search(r"Step (\d+) · replica (\d+) · at [\d,.]+ ms · ([\d,]+) kernels", shown)
        assert m, shown[:2000]
        step, replica, kernels = int(m.group(1)), int(m.group(2)), int(m.group(3).replace(",", ""))
        r = o1sim.simulate(o1sim.Scenario.default(), record_steps=True)
        a = r.step_anatomy(step)
        assert (replica, kernels) == (a.attrs["replica"], len(a))
        OUT.mkdir(exist_ok=True)
        page.screenshot(path=str(OUT / "dashboard_steps.png"), full_page=True)
    finally:
        ctx.close()
