"""The page's Model check panel in headless Chromium: the real policy passes every property;
an injected bug shows its violation with the shortest counterexample as numbered actions
(the same length as Python's `o1sim.check`) and downloads; a bad configuration shows the
error next to the configuration; the panel's settings stay out of the URL hash."""

from __future__ import annotations

import json
from typing import Any

import o1sim

from pagekit import OUT, wait_ready


def _dashboard_default_toml() -> str:
    """The configuration the dashboard's check tab starts from: the core's."""
    return o1sim._core.default_check_toml()


def _check(pg: Any, policy: str, bug: str = "", text: str | None = None) -> None:
    """Choose, press Check and wait for that check to end (result or error)."""
    n = int(pg.evaluate("Number(document.querySelector('#check').dataset.checks || 0)"))
    pg.select_option("#check-policy", policy)
    pg.select_option("#check-bug", bug)
    if text is not None:
        pg.fill("#check-toml", text)
    pg.click("#check-run")
    pg.wait_for_function("n => Number(document.querySelector('#check').dataset.checks || 0) > n", arg=n, timeout=60_000)


def _properties(pg: Any) -> dict[str, str]:
    return pg.evaluate(
        "() => Object.fromEntries([...document.querySelectorAll('#check-results table.properties tbody tr')]"
        ".map(tr => [tr.dataset.property, tr.dataset.status]))"
    )


def _python(policy: str, bug: str = "") -> o1sim.CheckResult:
    sc = o1sim.Scenario.from_text(_dashboard_default_toml(), "toml").with_overrides({"scheduler.policy": policy})
    if bug:
        sc = sc.with_overrides({"scheduler.inject_bug": bug})
    return o1sim.check(sc)


def _blob_text(pg: Any, selector: str) -> str:
    return pg.evaluate("async s => await (await fetch(document.querySelector(s).href)).text()", selector)


def test_the_panel_starts_from_the_dashboards_configuration(page: Any, server: str) -> None:
    page.goto(server)
    wait_ready(page)
    assert page.input_value("#check-toml") == _dashboard_default_toml()
    assert page.input_value("#check-policy") == "vllm"
    opts = page.eval_on_selector_all("#check-bug option", "os => os.map(o => o.value)")
    assert opts == ["", *o1sim.bug_names()]
    assert page.eval_on_selector_all("#check-policy option", "os => os.map(o => o.value)") == o1sim.presets()["policies"]


def test_the_real_policy_passes_every_property(page: Any, server: str) -> None:
    page.goto(server)
    wait_ready(page)
    hash_before = page.evaluate("location.hash")
    _check(page, "vllm")
    assert page.get_attribute("#check", "data-state") == "done"
    py = _python("vllm")
    props = _properties(page)
    assert props == dict(py.properties)
    assert set(props.values()) <= {"pass", "not_applicable"} and "pass" in props.values(), props
    assert page.get_attribute("#check-results [data-key=states]", "data-value") == str(py.states)
    assert page.get_attribute("#check-results [data-key=search]", "data-value") == "complete"
    assert "All properties hold" in (page.text_content("#check-results .verdict.ok") or "")
    assert page.locator("#check-results .violation").count() == 0
    assert "<pnml" in _blob_text(page, "#check-results a.pnml")
    assert page.get_attribute("#check-results a.pnml", "download") == "vllm.pnml"
    # The panel's settings are not part of the experiment's URL.
    assert page.evaluate("location.hash") == hash_before
    assert "check" not in page.evaluate("location.hash")


def test_leak_on_preempt_shows_the_shortest_counterexample(page: Any, server: str) -> None:
    page.goto(server)
    wait_ready(page)
    _check(page, "vllm", "leak_on_preempt")
    py = _python("vllm", "leak_on_preempt")
    pv = next(v for v in py.violations if v.property == "block_accounting")
    assert _properties(page)["block_accounting"] == "fail"
    box = page.locator("#check-results .violation[data-property=block_accounting]")
    assert box.count() == 1
    assert box.get_attribute("data-length") == str(pv.length)
    # The numbered list: one item per action, numbered 1…length, with the action's text and changes.
    items = page.evaluate(
        """() => [...document.querySelectorAll("#check-results .violation[data-property=block_accounting] ol.trace > li")]
            .map(li => ({n: li.value, text: li.querySelector('.action').textContent,
                         changes: [...li.querySelectorAll('ul.changes li')].map(c => c.textContent)}))"""
    )
    assert len(items) == pv.length
    assert [i["n"] for i in items] == list(range(1, pv.length + 1))
    assert [i["text"] for i in items] == [a["text"] for a in pv.trace]
    assert [i["changes"] for i in items] == [list(a.get("changes", [])) for a in pv.trace]
    assert "block_accounting" in (box.locator(".verdict.bad").text_content() or "")
    # Downloads: the counterexample as the core reports it, and its replay scenario.
    cx = json.loads(_blob_text(page, "#check-results .violation[data-property=block_accounting] a.cx"))
    assert cx["property"] == "block_accounting" and cx["length"] == pv.length
    assert box.locator("a.cx").get_attribute("download") == "counterexample-block_accounting.json"
    if pv.replay_scenario is not None:
        replay = json.loads(_blob_text(page, "#check-results .violation[data-property=block_accounting] a.replay"))
        assert replay["scheduler"]["inject_bug"] == "leak_on_preempt"
    assert page.get_attribute("#check-results a.pnml", "download") == "vllm-leak_on_preempt.pnml"
    OUT.mkdir(exist_ok=True)
    page.locator("#check").screenshot(path=str(OUT / "check-leak.png"))


def test_a_bad_configuration_shows_the_error_next_to_it(page: Any, server: str) -> None:
    page.goto(server)
    wait_ready(page)
    bad = _dashboard_default_toml().replace("num_gpu_blocks = 16", "num_gpu_blocks = 0")
    try:
        o1sim.check(o1sim.Scenario.from_text(bad, "toml"))
    except o1sim.SimError as e:
        expected = (type(e).__name__, getattr(e, "field", ""))
    else:
        raise AssertionError("Python accepted the bad configuration")
    _check(page, "vllm", "", bad)
    assert page.get_attribute("#check", "data-state") == "error"
    err = page.text_content("#check-error") or ""
    assert err.startswith(f"{expected[0]}: "), err
    assert expected[1] and err.startswith(f"{expected[0]}: {expected[1]}: "), (err, expected)
    assert page.get_attribute("#check-error", "data-field") == expected[1]
    assert "invalid" in (page.get_attribute("#check-toml", "class") or "")
    # The error sits right under the configuration it is about.
    assert page.evaluate("document.querySelector('#check-toml').nextElementSibling.id") == "check-error"
    OUT.mkdir(exist_ok=True)
    page.locator("#check").screenshot(path=str(OUT / "check-error.png"))
    # Not TOML at all: a ConfigError too.
    _check(page, "vllm", "", "[scheduler\npolicy = ")
    assert (page.text_content("#check-error") or "").startswith("ConfigError: ")
    # The default configuration checks again and clears the error.
    page.click("#check-reset")
    _check(page, "orca")
    assert page.get_attribute("#check", "data-state") == "done"
    assert (page.text_content("#check-error") or "") == ""
    assert "invalid" not in (page.get_attribute("#check-toml", "class") or "")


def test_a_check_keeps_the_page_and_its_runs_responsive(page: Any, server: str) -> None:
    page.goto(server)
    wait_ready(page)
    page.select_option("#check-policy", "vllm")
    page.fill("#check-max-states", "5000000")
    page.click("#check-run")
    lag = page.evaluate("() => new Promise(r => { const t = performance.now(); setTimeout(() => r(performance.now() - t), 0); })")
    assert lag < 100, lag
    # Stop ends it.
    if page.get_attribute("#check", "data-state") == "running":
        page.click("#check-stop")
        page.wait_for_function("document.querySelector('#check').dataset.state !== 'running'")
    OUT.mkdir(exist_ok=True)
    page.screenshot(path=str(OUT / "check-page.png"), full_page=True)
