"""The page's step timeline in headless Chromium: opening it records the chosen policy's
steps in the Worker, a click on a step opens its anatomy, and the kernels are the ones
Python's ``Result.step_anatomy`` gives for that step of the same scenario."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import o1sim

from pagekit import OUT, wait_ready

SMALL = "bursty small (llama-3-8b on one H100, gamma cv 3)"


def test_a_click_on_a_step_opens_its_kernels(page: Any, server: str) -> None:
    page.goto(f"{server}#preset={quote(SMALL)}&policies=vllm,o1pro&workload.num_requests=60")
    wait_ready(page)
    page.click("#steps summary")
    page.wait_for_function("() => Number(document.querySelector('#steps').dataset.steps || 0) > 0", timeout=30_000)
    n = int(page.get_attribute("#steps", "data-steps") or 0)
    # Click the middle of replica 0's lane.
    box = page.locator("#steps-canvas").bounding_box()
    assert box is not None
    page.mouse.click(box["x"] + box["width"] * 0.5, box["y"] + 11)
    page.wait_for_selector("#anatomy-table tbody tr", timeout=30_000)
    step = int(page.get_attribute("#anatomy", "data-step") or -1)
    kernels = int(page.get_attribute("#anatomy", "data-kernels") or 0)
    step_ms = float(page.get_attribute("#anatomy", "data-step-ms") or 0)
    assert 0 <= step < n
    # The same step of the same scenario, from Python.
    label = page.input_value("#steps-policy")
    scenario = page.evaluate("label => window.o1simSteps.runs.find(r => r.label === label).scenario", label)
    r = o1sim.simulate(scenario, record_steps=True)
    assert len(r.steps) == n
    df = r.step_anatomy(step)
    assert kernels == len(df)
    assert step_ms == df.attrs["step_ms"]
    ops = page.eval_on_selector_all("#anatomy-table tbody tr", "rows => rows.map(r => r.dataset.op)")
    assert ops == list(dict.fromkeys(df.name))
    # Another policy: its own steps.
    page.select_option("#steps-policy", "o1pro")
    page.wait_for_function("() => document.querySelector('#steps-info').textContent.includes('steps over')", timeout=30_000)
    OUT.mkdir(exist_ok=True)
    page.screenshot(path=str(OUT / "steps.png"), full_page=True)


def test_a_new_run_refreshes_the_open_timeline(page: Any, server: str) -> None:
    page.goto(f"{server}#preset={quote(SMALL)}&policies=vllm&workload.num_requests=40")
    wait_ready(page)
    page.click("#steps summary")
    page.wait_for_function("() => Number(document.querySelector('#steps').dataset.steps || 0) > 0", timeout=30_000)
    runs = int(page.evaluate("Number(document.body.dataset.runs)"))
    page.fill("[name='workload.num_requests']", "80")
    wait_ready(page, runs)
    # The open panel records the new run's steps: as many as Python's run of it has.
    scenario = page.evaluate("() => window.o1simSteps.runs[0].scenario")
    assert scenario["workload"]["num_requests"] == 80
    n = len(o1sim.simulate(scenario, record_steps=True).steps)
    page.wait_for_function("n => Number(document.querySelector('#steps').dataset.steps || 0) === n", arg=n, timeout=30_000)
