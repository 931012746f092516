"""The page speaks the dashboard's chart language: its conventions (web/chart_style.js) are
``o1sim.chart_style.page_style()``, and the charts it draws use them: both latency CDFs on
a log x axis with the fraction of requests 0..1 on y, each policy in its registry colour,
replicas in the dashboard's replica palette, the heatmap's ramp. (The dashboard's and the
report's side: tests/test_chart_style.py.)"""

from __future__ import annotations

from typing import Any

from o1sim import chart_style, registry

from pagekit import wait_ready


def _rgb(hex_color: str) -> str:
    r, g, b = (int(hex_color[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgb({r}, {g}, {b})"


def test_the_pages_charts_follow_the_shared_conventions(page: Any, server: str) -> None:
    page.goto(server)
    wait_ready(page)
    style = page.evaluate("import('./chart_style.js').then(m => JSON.parse(JSON.stringify(m.CHART_STYLE)))")
    assert style == chart_style.page_style()

    for key, name in (("ttft", "TTFT"), ("tpot", "TPOT")):
        plot = page.evaluate(
            """key => { const u = window.o1simCharts.plots[key];
                return {xDistr: u.scales.x.distr, yDistr: u.scales.y.distr, yMin: u.scales.y.min, yMax: u.scales.y.max,
                        xMin: u.scales.x.min, xLabel: u.axes[0].label, yLabel: u.axes[1].label}; }""", key)
        assert plot["xDistr"] == 3, f"{key}: the x axis is not logarithmic"  # uPlot: 3 = log
        assert plot["yDistr"] == 1 and (plot["yMin"], plot["yMax"]) == (0, 1)
        assert plot["xMin"] > 0
        assert plot["yLabel"] == chart_style.CDF_Y_TITLE
        assert plot["xLabel"] == f"{name} ({chart_style.LATENCIES[key + '_ms'][1]}), log scale"

    colors = registry.policy_colors()
    for key in ("ttft", "tpot"):
        markers = page.eval_on_selector_all(
            f"#cdf-{key} .u-legend .u-series",
            "ss => ss.map(s => [s.querySelector('.u-label')?.textContent,"
            " s.querySelector('.u-marker') && getComputedStyle(s.querySelector('.u-marker')).borderColor])")
        drawn = {label: color for label, color in markers if label in colors}
        assert drawn == {n: _rgb(colors[n]) for n in registry.default_policies()}, key

    replicas = page.eval_on_selector_all(
        "#ts-kv .u-legend .u-series",
        "ss => ss.map(s => [s.querySelector('.u-label')?.textContent,"
        " s.querySelector('.u-marker') && getComputedStyle(s.querySelector('.u-marker')).borderColor])")
    drawn = {label: color for label, color in replicas if label and label.startswith("replica ")}
    assert drawn and drawn == {f"replica {i}": _rgb(chart_style.REPLICA_PALETTE[i]) for i in range(len(drawn))}

    ramp = page.eval_on_selector("#heat-scale .ramp", "e => getComputedStyle(e).backgroundImage")
    assert ramp == f"linear-gradient(to right, {_rgb(chart_style.HEAT_RAMP[0])}, {_rgb(chart_style.HEAT_RAMP[1])})"
    heat = page.evaluate("import('./chart_style.js').then(m => [m.heatColor(0), m.heatColor(1)])")
    assert heat == [_rgb(c) for c in chart_style.HEAT_RAMP]
