"""The page reads the policy registry (pkg/registry.json, copied from
python/o1sim/registry.json by `make web`): its policy checkboxes are the core's policies in
the registry's order, each with the registry's colour, the default ticks are the
registry's co-located policies, and the latency chart draws each policy in the colour the
dashboard gives it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import o1sim
from o1sim import registry

from pagekit import wait_ready

ROOT = Path(__file__).resolve().parents[2]


def _rgb(hex_color: str) -> str:
    r, g, b = (int(hex_color[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgb({r}, {g}, {b})"


def test_page_policies_and_colours_come_from_the_registry(page: Any, server: str) -> None:
    served = json.loads((ROOT / "web/pkg/registry.json").read_text(encoding="utf-8"))
    assert served == json.loads((ROOT / "python/o1sim/registry.json").read_text(encoding="utf-8")), \
        "web/pkg/registry.json is stale: run `make web`"
    page.goto(server)
    wait_ready(page)
    boxes = page.eval_on_selector_all(
        "#policies label",
        "ls => ls.map(l => ({name: l.querySelector('input').value, ticked: l.querySelector('input').checked,"
        " swatch: getComputedStyle(l.querySelector('.swatch')).backgroundColor}))")
    assert [b["name"] for b in boxes] == registry.policy_names()
    assert [b["name"] for b in boxes if b["ticked"]] == registry.default_policies() == o1sim.presets()["policies"]
    colors = registry.policy_colors()
    assert {b["name"]: b["swatch"] for b in boxes} == {n: _rgb(c) for n, c in colors.items()}
    # uPlot's legend markers carry each series' stroke: the TTFT CDF's policies.
    markers = page.eval_on_selector_all(
        "#cdf-ttft .u-legend .u-series",
        "ss => ss.map(s => [s.querySelector('.u-label')?.textContent,"
        " s.querySelector('.u-marker') && getComputedStyle(s.querySelector('.u-marker')).borderColor])")
    drawn = {label: color for label, color in markers if label in colors}
    assert drawn == {n: _rgb(colors[n]) for n in registry.default_policies()}
