"""The page's fabric views in headless Chromium: the `disagg` policy (offered once a
topology is chosen, its numbers equal to the Python API's, a bad split shown next to its
field) and the route view (two GPUs picked → the core's RTMPv2 candidates, the chosen path
drawn on the graph, re-priced after a link edit, re-routed around a link taken down).
Screenshots go to tests/web/out/."""

from __future__ import annotations

from typing import Any

import o1sim

from pagekit import OUT, page_scenario, rows, runs, wait_ready

DISAGG_PRESET = "disagg vs co-located: llama-3-70b tp8, prefill node + decode node over InfiniBand (2x-hgx-h200-ib)"
BOX = "#policies input[value=disagg]"
PREFILL = "[name='deployment.prefill_replicas']"


def _summary_has(page: Any, before: int, policies: list[str]) -> None:
    """Wait for a run after `before` whose summary lists exactly `policies`."""
    page.wait_for_function(
        """([n, want]) => Number(document.body.dataset.runs) > n && document.body.dataset.runs === document.body.dataset.started
            && JSON.stringify([...document.querySelectorAll('#summary tbody tr')].map(t => t.dataset.policy).sort())
               === JSON.stringify(want)""",
        arg=[before, sorted(policies)],
        timeout=30_000,
    )


def test_disagg_runs_on_a_fabric_with_python_numbers(page: Any, server: str) -> None:
    page.goto(server)
    wait_ready(page)
    # No topology: disagg cannot move KV anywhere, so it is offered disabled, with the reason.
    assert page.is_disabled(BOX) and not page.is_checked(BOX)
    assert "needs a fabric" in (page.text_content("#disagg-note") or "")
    assert not page.is_visible(PREFILL)
    # The experiment preset: co-located vLLM next to disagg (1 prefill + 1 decode replica, TP 8
    # each) on two HGX H200 nodes over InfiniBand.
    before = runs(page)
    page.select_option("#preset", DISAGG_PRESET)
    _summary_has(page, before, ["disagg", "vllm"])
    assert page.is_enabled(BOX) and page.is_checked(BOX)
    assert page.is_visible(PREFILL) and page.input_value(PREFILL) == "1"
    assert "2x-hgx-h200-ib" in (page.text_content("#disagg-note") or "")
    sent = page_scenario(page)  # the first policy's: vllm, without the disagg-only field
    assert sent["topology"] == "2x-hgx-h200-ib" and sent["scheduler"]["policy"] == "vllm"
    assert sent["deployment"]["tp"] == 8 and sent["deployment"]["replicas"] == 2
    assert "prefill_replicas" not in sent["deployment"]
    disagg = {**sent, "scheduler": {**sent["scheduler"], "policy": "disagg"},
              "deployment": {**sent["deployment"], "prefill_replicas": 1}}
    shown = rows(page)
    d, v = o1sim.simulate(disagg).summary, o1sim.simulate(sent).summary
    for key, col in [("ttft_ms.p99", "ttft_ms"), ("tpot_ms.p99", "tpot_ms")]:
        assert float(shown["disagg"][key]) == d[col]["p99"], key
        assert float(shown["vllm"][key]) == v[col]["p99"], key
    # Every request's KV cache crossed the fabric once, and the row says so.
    assert d["topology"]["kv_transfers"] == d["finished"] > 0
    cell = page.text_content("#summary tr[data-policy=disagg] td:first-child") or ""
    assert f"{d['topology']['kv_transfers']} KV moves" in cell, cell
    assert "KV moves" not in (page.text_content("#summary tr[data-policy=vllm] td:first-child") or "")
    OUT.mkdir(exist_ok=True)
    page.screenshot(path=str(OUT / "disagg.png"), full_page=True)
    # The URL restores it.
    url = page.url
    assert "policies=vllm%2Cdisagg" in url or "policies=vllm,disagg" in url
    page.reload()
    wait_ready(page)
    assert page.is_checked(BOX) and rows(page) == shown

    # Two prefill replicas of two leave none to decode: the core's error, next to the field;
    # the co-located policy still runs.
    before = runs(page)
    page.fill(PREFILL, "2")
    wait_ready(page, before)
    slot = page.locator(".field-error[data-for='deployment.prefill_replicas']")
    assert (slot.text_content() or "").startswith("ConfigError: deployment.prefill_replicas:"), slot.text_content()
    assert "invalid" in (page.get_attribute(PREFILL, "class") or "")
    assert (page.text_content("#general-error") or "") == ""
    assert float(rows(page)["vllm"]["ttft_ms.p99"]) == v["ttft_ms"]["p99"]
    slot.scroll_into_view_if_needed()
    page.screenshot(path=str(OUT / "disagg-error.png"))

    # Back to no topology: disagg is unticked and disabled again; vLLM runs alone.
    before = runs(page)
    page.select_option("#topology-preset", "")
    _summary_has(page, before, ["vllm"])
    assert page.is_disabled(BOX) and not page.is_checked(BOX)
    assert not page.is_visible(PREFILL)
    assert "topology" not in page_scenario(page)


def _on_fabric(page: Any, server: str, preset: str) -> None:
    """vLLM alone on `preset`, its graph drawn."""
    page.goto(server + "#policies=vllm")
    wait_ready(page)
    before = runs(page)
    page.select_option("#topology-preset", preset)
    page.wait_for_function(
        "([n, p]) => Number(document.body.dataset.runs) > n && document.body.dataset.runs === document.body.dataset.started && document.querySelector('#topology svg g.link')"
        " && JSON.parse(document.querySelector('#scenario-json').textContent).topology === p",
        arg=[before, preset],
    )


def _table(page: Any) -> list[dict[str, Any]]:
    return page.evaluate(
        """() => [...document.querySelectorAll('#topology table.routes tbody tr')].map(tr => ({
            path: tr.children[1].textContent.split(' → '),
            bandwidth_gbps: Number(tr.children[2].textContent),
            latency_us: Number(tr.children[3].textContent),
            score: tr.children[4].textContent,
            chosen: tr.dataset.chosen === '1',
            frontier: tr.dataset.frontier === '1'}))"""
    )


def _want(t: Any, src: str, dst: str, down: Any = None) -> list[dict[str, Any]]:
    return [{**c, "score": f"{c['score']:.3f}"} for c in o1sim.routes(t, src, dst, down=down)]


def _drawn(page: Any) -> tuple[set[frozenset[str]], set[str]]:
    """The links drawn as the route (as unordered node pairs) and its endpoint nodes."""
    keys = page.evaluate("() => [...document.querySelectorAll('#topology svg g.link.route')].map(g => g.dataset.key)")
    ends = page.evaluate("() => [...document.querySelectorAll('#topology svg g.node.route-end')].map(g => g.dataset.id)")
    return {frozenset(k.split("|")) for k in keys}, set(ends)


def _hops(path: list[str]) -> set[frozenset[str]]:
    return {frozenset(p) for p in zip(path, path[1:])}


def test_route_view_shows_the_core_candidates_and_draws_the_chosen_path(page: Any, server: str) -> None:
    _on_fabric(page, server, "2x-hgx-h200-ib")
    assert "Click two GPUs" in (page.text_content("#topology [data-role=routes]") or "")
    # Across the two nodes: four candidates over the InfiniBand rails, as o1sim.routes lists them.
    page.select_option("#topology select[data-role=route-src]", "n0.gpu0")
    page.select_option("#topology select[data-role=route-dst]", "n1.gpu3")
    page.wait_for_selector("#topology table.routes tbody tr")
    want = _want("2x-hgx-h200-ib", "n0.gpu0", "n1.gpu3")
    assert _table(page) == want and len(want) == 4
    chosen = next(c for c in want if c["chosen"])
    assert _drawn(page) == (_hops(chosen["path"]), {"n0.gpu0", "n1.gpu3"})
    assert page.get_attribute("#topology table.routes tr.chosen", "data-index") == str(want.index(chosen))
    # A clicked row is drawn instead (here the one over rail 0).
    page.click("#topology table.routes tr[data-index='1']")
    assert _drawn(page)[0] == _hops(want[1]["path"])
    # Two clicks on GPUs of the graph pick another pair: inside node 0, through its NVSwitch.
    page.locator("#topology svg g.node[data-id='n0.gpu1']").click()
    assert page.input_value("#topology select[data-role=route-src]") == "n0.gpu1"
    assert page.locator("#topology svg g.node.route-pick[data-id='n0.gpu1']").count() == 1
    page.locator("#topology svg g.node[data-id='n0.gpu2']").click()
    page.wait_for_function("() => document.querySelector('#topology table.routes tbody tr td:nth-child(2)')?.textContent.startsWith('n0.gpu1')")
    want = _want("2x-hgx-h200-ib", "n0.gpu1", "n0.gpu2")
    assert _table(page) == want
    assert want[0]["path"] == ["n0.gpu1", "n0.nvswitch0", "n0.gpu2"] and want[0]["chosen"]
    assert _drawn(page) == (_hops(want[0]["path"]), {"n0.gpu1", "n0.gpu2"})
    # Lower gpu1's NVSwitch link 450 → 45 GB/s: the candidates are re-priced on the edited
    # fabric, exactly as o1sim.routes prices that table.
    before = runs(page)
    page.fill("#topology tr[data-key='n0.gpu1|n0.nvswitch0'] input[data-k=bandwidth_gbps]", "45")
    wait_ready(page, before)
    page.wait_for_function("() => document.querySelector('#topology table.routes tbody tr td:nth-child(3)')?.textContent === '45'")
    edited = {"preset": "2x-hgx-h200-ib", "links": [
        {"src": "n0.gpu1", "dst": "n0.nvswitch0", "kind": "nvswitch", "bandwidth_gbps": 45, "latency_us": 1}]}
    assert page_scenario(page)["topology"] == edited
    want = _want(edited, "n0.gpu1", "n0.gpu2")
    assert _table(page) == want
    chosen = next(c for c in want if c["chosen"])
    assert _drawn(page)[0] == _hops(chosen["path"])
    OUT.mkdir(exist_ok=True)
    page.screenshot(path=str(OUT / "routes.png"), full_page=True)
    # An invalid edit: the routes' error shows under the route fields, not a stale table.
    page.fill("#topology tr[data-key='n0.gpu1|n0.nvswitch0'] input[data-k=bandwidth_gbps]", "0")
    err = page.locator("#topology [data-role=route-error]")
    err.wait_for(state="visible")
    # The box may show before the Worker's answer fills it (under load): wait for the text.
    try:
        page.wait_for_function(
            "() => (document.querySelector('#topology [data-role=route-error]')?.textContent || '').startsWith('ConfigError:')",
            timeout=15000,
        )
    except Exception as e:  # name what the page shows instead
        body = page.text_content("#topology [data-role=routes]")
        raise AssertionError(f"route error never shown; routes box: {body!r}") from e
    assert (err.text_content() or "").startswith("ConfigError:") and "bandwidth_gbps" in (err.text_content() or "")
    assert page.locator("#topology table.routes").count() == 0


def test_route_view_reroutes_around_a_link_taken_down(page: Any, server: str) -> None:
    _on_fabric(page, server, "2x-hgx-h200-ib")
    src, dst = "n0.gpu3", "n1.gpu3"
    page.select_option("#topology select[data-role=route-src]", src)
    page.select_option("#topology select[data-role=route-dst]", dst)
    page.wait_for_selector("#topology table.routes tbody tr")
    want = _want("2x-hgx-h200-ib", src, dst)
    assert _table(page) == want
    chosen = next(c for c in want if c["chosen"])
    rail = frozenset(("n0.nic3", "ib3"))
    assert rail in _hops(chosen["path"]) and rail in _drawn(page)[0]
    # Take that rail down in the links table: the candidates are the core's with it down
    # (as the run re-routes after its link_down at t = 0), and none crosses it.
    before = runs(page)
    page.uncheck("#topology tr[data-key='n0.nic3|ib3'] input[data-k=up]")
    page.wait_for_function(
        "() => { const rows = [...document.querySelectorAll('#topology table.routes tbody tr td:nth-child(2)')];"
        " return rows.length && rows.every(td => !td.textContent.includes('ib3')); }"
    )
    wait_ready(page, before)
    assert page_scenario(page)["events"] == [{"at_s": 0, "kind": "link_down", "src": "n0.nic3", "dst": "ib3"}]
    want = _want("2x-hgx-h200-ib", src, dst, down=[("n0.nic3", "ib3")])
    assert _table(page) == want
    assert all(rail not in _hops(c["path"]) for c in want)
    chosen = next(c for c in want if c["chosen"])
    assert _drawn(page) == (_hops(chosen["path"]), {src, dst})
    assert "Links taken down are avoided" in (page.text_content("#topology [data-role=routes]") or "")
    OUT.mkdir(exist_ok=True)
    page.locator("#topology").screenshot(path=str(OUT / "routes-down.png"))
    # Cut n0.gpu3 off (its NVSwitch and NIC links down too): no route, said so.
    page.uncheck("#topology tr[data-key='n0.gpu3|n0.nvswitch0'] input[data-k=up]")
    page.uncheck("#topology tr[data-key='n0.gpu3|n0.nic3'] input[data-k=up]")
    page.wait_for_selector("#topology [data-role=no-route]")
    page.locator("#topology [data-role=routes]").screenshot(path=str(OUT / "routes-cut.png"))
    assert o1sim.routes("2x-hgx-h200-ib", src, dst, down=[("n0.nic3", "ib3"), ("n0.gpu3", "n0.nvswitch0"), ("n0.gpu3", "n0.nic3")]) == []
    assert page.locator("#topology table.routes").count() == 0
    # Everything back up: the first candidates again.
    page.check("#topology tr[data-key='n0.gpu3|n0.nvswitch0'] input[data-k=up]")
    page.check("#topology tr[data-key='n0.gpu3|n0.nic3'] input[data-k=up]")
    page.check("#topology tr[data-key='n0.nic3|ib3'] input[data-k=up]")
    page.wait_for_function("() => [...document.querySelectorAll('#topology table.routes tbody tr td:nth-child(2)')].some(td => td.textContent.includes('ib3'))")
    assert _table(page) == _want("2x-hgx-h200-ib", src, dst)
