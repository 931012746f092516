"""The page reads its options from the core's registry (the WASM module's ``presets()``, the
same records as ``o1sim.presets()``): its policy checkboxes are the core's policies in
display order, each with its colour and its label and summary on hover, the default ticks
are the co-located policies, the latency chart draws each policy in that colour, and every
select (model, GPU, router, arrival kind, topology, the checker's policy) offers exactly
the names the core accepts. (The module's presets() equal o1sim.presets() record for
record: tests/web/test_parity.py.)"""

from __future__ import annotations

from typing import Any

import o1sim
from o1sim import registry

from pagekit import wait_ready


def _rgb(hex_color: str) -> str:
    r, g, b = (int(hex_color[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgb({r}, {g}, {b})"


def _options(page: Any, selector: str) -> list[str]:
    return page.eval_on_selector_all(f"{selector} option", "os => os.map(o => o.value)")


def test_page_options_and_colours_are_the_presets(page: Any, server: str) -> None:
    cat = o1sim.presets()
    page.goto(server)
    wait_ready(page)
    boxes = page.eval_on_selector_all(
        "#policies label",
        "ls => ls.map(l => ({name: l.querySelector('input').value, ticked: l.querySelector('input').checked,"
        " title: l.title, swatch: getComputedStyle(l.querySelector('.swatch')).backgroundColor}))")
    info = cat["policy_info"]
    assert [b["name"] for b in boxes] == [p["name"] for p in info] == registry.policy_names()
    assert [b["name"] for b in boxes if b["ticked"]] == cat["policies"] == registry.default_policies()
    assert {b["name"]: b["swatch"] for b in boxes} == {p["name"]: _rgb(p["color"]) for p in info}
    assert {b["name"]: b["title"] for b in boxes} == {p["name"]: f"{p['label']}: {p['summary']}" for p in info}
    # uPlot's legend markers carry each series' stroke: the TTFT CDF's policies.
    colors = registry.policy_colors()
    markers = page.eval_on_selector_all(
        "#cdf-ttft .u-legend .u-series",
        "ss => ss.map(s => [s.querySelector('.u-label')?.textContent,"
        " s.querySelector('.u-marker') && getComputedStyle(s.querySelector('.u-marker')).borderColor])")
    drawn = {label: color for label, color in markers if label in colors}
    assert drawn == {n: _rgb(colors[n]) for n in registry.default_policies()}
    # Every select offers the core's names, in its order.
    assert _options(page, "[name=model]") == [m["name"] for m in cat["models"]]
    assert _options(page, "[name=gpu]") == [g["name"] for g in cat["gpus"]]
    assert _options(page, "[name='deployment.router']") == cat["routers"]
    assert _options(page, "[name='workload.arrival.kind']") == cat["arrival_kinds"]
    assert _options(page, "#check-policy") == cat["policies"]
    topologies = [t for t in _options(page, "#topology-preset") if t]
    assert topologies == cat["topologies"]
