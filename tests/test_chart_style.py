"""One chart language: the dashboard's and the report's Altair specs use the conventions of
``o1sim.chart_style`` (policy colours from the registry, latency CDFs on a log x axis with
the fraction of requests 0..1 on y, the heatmap's ramp, the step kinds' colours). The page's
side, in Chromium: tests/web/test_chart_style.py."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import o1sim
from o1sim import chart_style, registry
from o1sim.dashboard import charts

GOLDEN = Path(__file__).parent / "golden"


@pytest.fixture(scope="module")
def results() -> dict[str, o1sim.Result]:
    base = o1sim.Scenario.from_file(GOLDEN / "policy_vllm.toml")
    return {p: o1sim.simulate(base.with_overrides({"scheduler.policy": p})) for p in ("sarathi", "vllm")}


def _cdf_specs(spec: Any) -> list[dict[str, Any]]:
    """Every single-view spec in ``spec`` whose y field is a CDF's ``fraction``."""
    found: list[dict[str, Any]] = []
    if isinstance(spec, dict):
        enc = spec.get("encoding", {})
        if enc.get("y", {}).get("field") == "fraction":
            found.append(spec)
        for v in spec.values():
            found += _cdf_specs(v)
    elif isinstance(spec, list):
        for v in spec:
            found += _cdf_specs(v)
    return found


def _assert_cdf_convention(spec: dict[str, Any], metric: str, policies: list[str]) -> None:
    enc = spec["encoding"]
    assert enc["x"]["scale"]["type"] == chart_style.CDF_X_SCALE == "log"
    name, unit, _ = chart_style.LATENCIES[metric]
    assert enc["x"]["title"] == f"{name} ({unit}), log scale"
    assert enc["y"]["scale"] == {"type": "linear", "domain": [0, 1]}
    assert enc["y"]["title"] == chart_style.CDF_Y_TITLE
    assert spec["mark"]["interpolate"] == "step-after"
    colors = registry.policy_colors()
    scale = enc["color"]["scale"]
    assert scale["domain"] == [p for p in registry.policy_names() if p in policies]
    assert scale["range"] == [colors[p] for p in scale["domain"]]


@pytest.mark.parametrize("metric", list(chart_style.LATENCIES))
def test_the_dashboards_cdfs_follow_the_convention(results: dict[str, o1sim.Result], metric: str) -> None:
    chart = charts.latency_cdf_chart(results, metric)
    spec = chart.to_dict()
    _assert_cdf_convention(spec, metric, list(results))
    # The log axis spans the positive values: smallest to largest.
    data = chart.data
    lo, hi = spec["encoding"]["x"]["scale"]["domain"]
    assert lo == pytest.approx(data["value"].min()) and hi == pytest.approx(data["value"].max()) and lo > 0
    assert data.groupby("policy")["fraction"].max().tolist() == [1.0, 1.0]


def test_the_reports_cdfs_and_colours_are_the_dashboards(results: dict[str, o1sim.Result]) -> None:
    from o1sim.report import render_html

    page = render_html(o1sim.Scenario.from_file(GOLDEN / "policy_vllm.toml"), results)
    specs = json.loads(re.search(r"const specs = (\[.*?\]);\n", page, re.S).group(1).replace("<\\/", "</"))  # type: ignore[union-attr]
    cdfs = _cdf_specs(specs)
    assert len(cdfs) == len(chart_style.LATENCIES)
    for spec, metric in zip(cdfs, chart_style.LATENCIES):
        _assert_cdf_convention(spec, metric, list(results))
    text = json.dumps(specs)
    # The heatmap's ramp, and every policy's registry colour in the time series too.
    assert json.dumps(list(chart_style.HEAT_RAMP)) in text
    for p in results:
        assert text.count(registry.policy_colors()[p]) >= 1 + len(chart_style.LATENCIES)


def test_unknown_names_replicas_heatmap_and_steps_take_the_shared_palettes(results: dict[str, o1sim.Result]) -> None:
    domain, colors = chart_style.policy_domain(["mine", "vllm", "yours"])
    assert domain == ["vllm", "mine", "yours"]
    assert colors == [registry.policy_colors()["vllm"], *chart_style.OTHER_COLORS[:2]]
    assert charts.replica_colors(10) == [chart_style.REPLICA_PALETTE[i % 8] for i in range(10)]
    heat = charts.heatmap_chart(results["vllm"]).to_dict()["encoding"]["color"]["scale"]
    assert heat == {"domain": [0, 1], "range": list(chart_style.HEAT_RAMP), "interpolate": "rgb"}
    steps = o1sim.simulate(GOLDEN / "vllm_hand.toml", record_steps=True).steps
    kind = charts.steps_chart(charts.steps_frame(steps)).to_dict()["encoding"]["color"]["scale"]
    assert dict(zip(kind["domain"], kind["range"])) == chart_style.STEP_KIND_COLORS


def test_the_page_style_is_the_python_constants() -> None:
    style = chart_style.page_style()
    assert style["cdf"]["x"] == chart_style.CDF_X_SCALE and style["cdf"]["yTitle"] == chart_style.CDF_Y_TITLE
    assert style["replicaPalette"] == list(chart_style.REPLICA_PALETTE)
    assert style["stepKinds"] == chart_style.STEP_KIND_COLORS
