"""The page in headless Chromium: it loads the WASM core, runs the default scenario in its
Worker and shows the numbers the Python API gives; errors appear next to the field they
name; the URL restores the experiment; bad input never traps; a screenshot is kept in
tests/web/out/ for a human to look at."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import o1sim
from o1sim import registry

from pagekit import OUT, runs, wait_ready
from pagekit import page_scenario as _page_scenario
from pagekit import rows as _rows


def test_page_runs_the_default_scenario_with_python_numbers(page: Any, server: str) -> None:
    page.goto(server)
    wait_ready(page)
    rows = _rows(page)
    assert sorted(rows) == sorted(o1sim.presets()["policies"])  # the co-located ones, as compare runs them
    # The page sent the core's default scenario (only the name differs).
    sent = _page_scenario(page)
    default = o1sim.default_scenario()
    assert sent["model"] == default["model"] and sent["deployment"]["tp"] == default["deployment"]["tp"]
    assert sent["workload"]["num_requests"] == default["workload"]["num_requests"]
    for policy, row in rows.items():
        scenario = {**sent, "scheduler": {**sent["scheduler"], "policy": policy}}
        s = o1sim.simulate(scenario).summary
        assert float(row["ttft_ms.p99"]) == s["ttft_ms"]["p99"], policy
        assert float(row["tpot_ms.p99"]) == s["tpot_ms"]["p99"], policy
        # Written as the core's metric table says, the text Python writes.
        for path in ("ttft_ms.p99", "tpot_ms.p99"):
            assert row[f"{path}_text"] == registry.format_metric(registry.shown_metric(path), registry.metric_value(s, path))
    # And the page's scenario is the default one: same numbers as simulate(default).
    d = default.copy()
    d["scheduler"] = {**d["scheduler"], "policy": "vllm"}
    assert float(rows["vllm"]["tpot_ms.p99"]) == o1sim.simulate(d).summary["tpot_ms"]["p99"]
    # Charts drew: uPlot canvases and the heatmap.
    assert page.locator("#cdf-ttft canvas").count() >= 1
    assert page.locator("#ts-kv canvas").count() >= 1
    OUT.mkdir(exist_ok=True)
    page.screenshot(path=str(OUT / "default.png"), full_page=True)


def test_an_invalid_field_shows_the_error_next_to_it(page: Any, server: str) -> None:
    page.goto(server)
    wait_ready(page)
    before = runs(page)
    page.fill("[name='deployment.tp']", "3")
    wait_ready(page, before)
    slot = page.locator(".field-error[data-for='deployment.tp']")
    text = slot.text_content() or ""
    assert text.startswith("ConfigError: deployment.tp: must divide the attention heads"), text
    assert "invalid" in (page.get_attribute("[name='deployment.tp']", "class") or "")
    assert (page.text_content("#general-error") or "") == ""
    # Fixing it clears the error.
    before = runs(page)
    page.fill("[name='deployment.tp']", "4")
    wait_ready(page, before)
    assert (slot.text_content() or "") == ""
    # A nested field (workload.prompt.mean) lands on its own slot too.
    before = runs(page)
    page.fill("[name='workload.prompt.mean']", "-5")
    wait_ready(page, before)
    assert "workload.prompt.mean: must be > 0" in (page.text_content(".field-error[data-for='workload.prompt']") or "")
    # Every policy failed: the last results stay, dimmed.
    assert "stale" in (page.get_attribute("#results", "class") or "")
    assert page.locator("#summary tr[data-policy=vllm] td[data-key='tpot_ms.p99']").count() == 1
    OUT.mkdir(exist_ok=True)
    page.screenshot(path=str(OUT / "error.png"))


def test_reloading_the_url_restores_the_experiment(page: Any, server: str, browser: Any) -> None:
    page.goto(server)
    wait_ready(page)
    before = runs(page)
    page.select_option("[name=model]", "llama-3-8b")
    page.fill("[name='deployment.tp']", "2")
    page.fill("[name='workload.num_requests']", "300")
    page.uncheck("#policies input[value=orca]")
    page.uncheck("#policies input[value=o1pro]")
    page.click("#run")
    page.wait_for_function("n => Number(document.body.dataset.runs) > n && document.body.dataset.runs === document.body.dataset.started && !document.querySelector('#summary tr[data-policy=orca]')", arg=before)
    url = page.url
    assert "deployment.tp=2" in url and "model=llama-3-8b" in url
    rows = _rows(page)
    # A fresh tab with that URL shows the same experiment and the same numbers.
    ctx = browser.new_context()
    try:
        other = ctx.new_page()
        other.goto(url)
        wait_ready(other)
        assert other.input_value("[name='deployment.tp']") == "2"
        assert other.input_value("[name=model]") == "llama-3-8b"
        assert other.input_value("[name='workload.num_requests']") == "300"
        assert _rows(other) == rows
        assert sorted(rows) == sorted(set(o1sim.presets()["policies"]) - {"orca", "o1pro"})
        # Reloading the same tab too.
        n = runs(other)
        other.reload()
        wait_ready(other)
        assert _rows(other) == rows
        del n
    finally:
        ctx.close()


def test_the_worker_keeps_the_page_responsive(page: Any, server: str) -> None:
    page.goto(server)
    wait_ready(page)
    before = runs(page)
    page.fill("[name='workload.num_requests']", "20000")
    page.click("#run")
    # While the Worker simulates 4 × 20,000 requests, the UI thread answers at once.
    lag = page.evaluate("() => new Promise(r => { const t = performance.now(); setTimeout(() => r(performance.now() - t), 0); })")
    busy = page.evaluate("document.querySelector('#status').textContent")
    assert lag < 100, lag
    assert "running" in busy
    wait_ready(page, before)


def test_a_change_waiting_for_its_run_is_never_read_as_shown(page: Any, server: str) -> None:
    """Tests (and scripts) wait for `runs === started`; a change still in its debounce, or
    queued behind the run in flight, must keep that false until its own run is on screen (a
    slow CI machine once read a run that predated the last click)."""
    page.goto(server)
    wait_ready(page)
    before = runs(page)
    settled = "() => document.body.dataset.runs === document.body.dataset.started"
    # A change in its debounce window: not settled yet.
    assert page.evaluate("""() => { const f = document.querySelector("[name='workload.num_requests']");
        f.value = '150'; f.dispatchEvent(new Event('input', {bubbles: true}));
        return document.body.dataset.runs === document.body.dataset.started; }""") is False
    wait_ready(page, before)
    assert page.evaluate(settled)
    # A change made while a run is in flight waits for the run after it.
    before = runs(page)
    page.fill("[name='workload.num_requests']", "8000")
    page.wait_for_function("() => document.body.dataset.started !== 'pending'")
    page.evaluate("""() => { const f = document.querySelector("[name='workload.num_requests']");
        f.value = '120'; f.dispatchEvent(new Event('input', {bubbles: true})); }""")
    wait_ready(page, before)
    assert _page_scenario(page)["workload"]["num_requests"] == 120


def test_bad_input_never_traps_the_module_in_the_browser(page: Any, server: str) -> None:
    page.goto(server)
    wait_ready(page)
    out = page.evaluate(
        """async () => {
            const o = await import('./o1sim.js');
            await o.init();
            const names = [];
            for (const text of ['', '{', '\\u0000', 'model = 3', '[[[', '{"seed": -1}', '{"workload": {"num_requests": 1e300}}']) {
                for (const format of ['json', 'toml']) {
                    try { o.simulate(text, {format}); names.push('ok'); } catch (e) { names.push(e.name); }
                }
            }
            let panic = null;
            try { o._testPanic(); } catch (e) { panic = [e.name, e.message]; }
            const after = JSON.parse(o.simulate(o.defaultScenario().replace('num_requests = 2000', 'num_requests = 20'), {format: 'toml'})).summary.finished;
            return {names, panic, after};
        }"""
    )
    assert set(out["names"]) <= {"ConfigError", "InfeasibleError"}, out
    assert out["panic"][0] == "InternalError" and "o1_test_panic" in out["panic"][1]
    assert out["after"] == 20


def _topology_page(page: Any, server: str, preset: str = "hgx-h200") -> None:
    """The default experiment with vllm only, on `preset`."""
    page.goto(server)
    wait_ready(page)
    before = runs(page)
    for p in ("orca", "sarathi", "o1pro"):
        page.uncheck(f"#policies input[value={p}]")
    page.select_option("#topology-preset", preset)
    page.wait_for_function(
        "([n, p]) => Number(document.body.dataset.runs) > n && document.body.dataset.runs === document.body.dataset.started && !document.querySelector('#summary tr[data-policy=orca]')"
        " && document.querySelector('#topology svg g.link') && JSON.parse(document.querySelector('#scenario-json').textContent).topology === p",
        arg=[before, preset],
    )


def _link(key: str) -> str:
    return f"#topology tr[data-key='{key}']"


def test_topology_edit_changes_p99_tpot(page: Any, server: str) -> None:
    _topology_page(page, server)
    sent = _page_scenario(page)
    assert sent["topology"] == "hgx-h200" and sent["deployment"]["tp"] == 4
    # The graph and the tables show the preset the core expanded: 9 nodes, 8 links.
    assert page.locator("#topology svg g.link").count() == 8
    assert page.locator("#topology svg g.node").count() == 9
    assert page.locator("#topology table.links tr[data-key]").count() == 8
    rows = _rows(page)
    assert float(rows["vllm"]["tpot_ms.p99"]) == o1sim.simulate(sent).summary["tpot_ms"]["p99"]
    # Click gpu1's link in the graph: its row is selected; lower its bandwidth 450 → 45 GB/s.
    page.locator("#topology svg g.link[data-key='gpu1|nvswitch0'] line.hit").click(force=True)
    assert "selected" in (page.get_attribute(_link("gpu1|nvswitch0"), "class") or "")
    assert page.input_value(_link("gpu1|nvswitch0") + " input[data-k=bandwidth_gbps]") == "450"
    before = runs(page)
    page.fill("#topology tr.selected input[data-k=bandwidth_gbps]", "45")
    wait_ready(page, before)
    sent = _page_scenario(page)
    assert sent["topology"] == {
        "preset": "hgx-h200",
        "links": [{"src": "gpu1", "dst": "nvswitch0", "kind": "nvswitch", "bandwidth_gbps": 45, "latency_us": 1}],
    }
    after = _rows(page)
    # TP 4's AllReduces of replica 0 now cross a 45 GB/s link: P99 TPOT moves, to Python's number.
    assert float(after["vllm"]["tpot_ms.p99"]) > float(rows["vllm"]["tpot_ms.p99"]), (rows["vllm"], after["vllm"])
    assert float(after["vllm"]["tpot_ms.p99"]) == o1sim.simulate(sent).summary["tpot_ms"]["p99"]
    # The link is drawn as edited, and its utilisation column filled in.
    assert "edited" in (page.get_attribute("#topology svg g.link[data-key='gpu1|nvswitch0']", "class") or "")
    assert page.text_content(_link("gpu1|nvswitch0") + " td:last-child") != "—"
    OUT.mkdir(exist_ok=True)
    page.screenshot(path=str(OUT / "topology.png"), full_page=True)


def test_an_invalid_topology_shows_the_error_next_to_the_link(page: Any, server: str) -> None:
    _topology_page(page, server)
    before = runs(page)
    page.fill(_link("gpu1|nvswitch0") + " input[data-k=bandwidth_gbps]", "0")
    wait_ready(page, before)
    slot = page.locator(".field-error[data-for='topology.links[0].bandwidth_gbps']")
    text = slot.text_content() or ""
    assert text.startswith("ConfigError: topology.links[0].bandwidth_gbps: must be > 0"), text
    # …in the table row right under the link it names, with the input marked.
    assert page.evaluate("""() => document.querySelector(".field-error[data-for='topology.links[0].bandwidth_gbps']")
        .closest('tr').previousElementSibling.dataset.key""") == "gpu1|nvswitch0"
    assert "invalid" in (page.get_attribute(_link("gpu1|nvswitch0") + " input[data-k=bandwidth_gbps]", "class") or "")
    assert (page.text_content("#general-error") or "") == ""
    OUT.mkdir(exist_ok=True)
    page.screenshot(path=str(OUT / "topology-error.png"))
    # Fixing it clears the error.
    before = runs(page)
    page.fill(_link("gpu1|nvswitch0") + " input[data-k=bandwidth_gbps]", "100")
    wait_ready(page, before)
    assert page.evaluate("[...document.querySelectorAll('.field-error')].map(e => e.textContent).join('')") == ""
    assert "stale" not in (page.get_attribute("#results", "class") or "")
    # A link to a node that does not exist (a hand-edited URL): the error names the node
    # field and sits under that link's row.
    bad = {"preset": "hgx-h200", "links": [{"src": "gpu0", "dst": "gpu9", "kind": "nvlink", "bandwidth_gbps": 50, "latency_us": 1}]}
    page.goto(server + "#policies=vllm&topology=" + quote(json.dumps(bad)))
    page.reload()
    wait_ready(page)
    err = page.locator("#topology .field-error[data-for^='topology.links[0]']")
    assert "gpu9" in (err.text_content() or ""), err.text_content()
    assert page.evaluate("""() => document.querySelector("#topology .field-error[data-for^='topology.links[0]']")
        .closest('tr').previousElementSibling.dataset.key""") == "gpu0|gpu9"


def test_reloading_the_url_restores_the_topology_edits(page: Any, server: str, browser: Any) -> None:
    _topology_page(page, server, "2x-hgx-h200-ib")
    before = runs(page)
    page.fill("[name='deployment.tp']", "8")
    page.fill("[name='deployment.pp']", "2")
    page.fill("[name='deployment.replicas']", "1")
    wait_ready(page, before)
    base = _rows(page)
    # Lower one InfiniBand rail (PP's activations cross it) and take another rail down.
    before = runs(page)
    page.fill(_link("n0.nic0|ib0") + " input[data-k=bandwidth_gbps]", "0.5")
    wait_ready(page, before)
    before = runs(page)
    page.uncheck(_link("n0.nic1|ib1") + " input[data-k=up]")
    wait_ready(page, before)
    sent = _page_scenario(page)
    assert sent["events"] == [{"at_s": 0, "kind": "link_down", "src": "n0.nic1", "dst": "ib1"}]
    rows = _rows(page)
    assert rows != base
    assert float(rows["vllm"]["tpot_ms.p99"]) == o1sim.simulate(sent).summary["tpot_ms"]["p99"]
    url = page.url
    assert "topology=" in url and "links_down=" in url
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        other = ctx.new_page()
        other.goto(url)
        wait_ready(other)
        other.wait_for_selector("#topology svg g.link")
        assert other.input_value("#topology-preset") == "2x-hgx-h200-ib"
        assert other.input_value(_link("n0.nic0|ib0") + " input[data-k=bandwidth_gbps]") == "0.5"
        assert not other.is_checked(_link("n0.nic1|ib1") + " input[data-k=up]")
        assert other.is_checked(_link("n0.nic2|ib2") + " input[data-k=up]")
        assert _page_scenario(other) == sent
        assert _rows(other) == rows
        other.reload()
        wait_ready(other)
        assert _rows(other) == rows
        OUT.mkdir(exist_ok=True)
        other.screenshot(path=str(OUT / "topology-2x-ib.png"), full_page=True)
    finally:
        ctx.close()
