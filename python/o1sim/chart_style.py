"""The charts' one language: colours and axis conventions shared by the dashboard, the
report (both Altair, :mod:`o1sim.dashboard.charts`) and the page (uPlot, ``web/charts.js``).

- A policy has one colour everywhere: its colour in the registry (:mod:`o1sim.registry`).
  Names the registry does not know (a result labelled otherwise) take ``OTHER_COLORS`` in
  turn; replicas take ``REPLICA_PALETTE`` by index; the GPU × time heatmap ramps from
  ``HEAT_RAMP[0]`` (idle) to ``HEAT_RAMP[1]`` (busy); scheduler steps are coloured by kind
  (``STEP_KIND_COLORS``).
- A latency CDF has the latency on a logarithmic x axis (TTFT, TPOT and E2E span orders of
  magnitude between an idle and a queued request: a linear axis squeezes the body of the
  distribution against zero) and the fraction of requests on a linear y axis from 0 to 1,
  drawn as a step (the empirical CDF). Latencies are in ms, E2E in s.

The conventions are data of the core's registry (``presets()["chart_style"]``, defined once in
``crates/sim-core/src/registry.rs``); this module names them for Python, and the page reads the
same record from the WASM module's ``presets()`` (``setChartStyle`` in ``web/chart_style.js``).
``tests/web/test_chart_style.py`` reads the page's drawn charts' scales and colours.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final, Literal

from . import registry

__all__ = [
    "CDF_X_SCALE",
    "CDF_Y_TITLE",
    "HEAT_RAMP",
    "LATENCIES",
    "OTHER_COLORS",
    "REPLICA_PALETTE",
    "STEP_KIND_COLORS",
    "page_style",
    "policy_domain",
]

_STYLE: Final = registry.chart_style()

#: Colours of names the registry does not know, in turn.
OTHER_COLORS: tuple[str, ...] = tuple(_STYLE["otherColors"])

#: Colours of replicas 0, 1, … in every chart that shows replicas (Tableau 10's first eight).
REPLICA_PALETTE: tuple[str, ...] = tuple(_STYLE["replicaPalette"])

#: The GPU × time heatmap's colour ramp, busy 0 → 1, interpolated in RGB.
HEAT_RAMP: tuple[str, str] = (_STYLE["heatRamp"][0], _STYLE["heatRamp"][1])

#: Scheduler steps by kind (the step timelines of the dashboard and the page).
STEP_KIND_COLORS: dict[str, str] = dict(_STYLE["stepKinds"])

#: The x scale of every latency CDF: logarithmic.
CDF_X_SCALE: Final[Literal["log", "linear"]] = "log" if _STYLE["cdf"]["x"] == "log" else "linear"
#: The y axis of every latency CDF: the fraction of requests at or below x, 0..1, linear.
CDF_Y_TITLE: Final[str] = _STYLE["cdf"]["yTitle"]

#: Latency CDFs, in display order: column → (name, unit, factor from ms). E2E is shown in s.
_FROM_MS: Final = {"ms": 1.0, "s": 1e-3}
LATENCIES: dict[str, tuple[str, str, float]] = {
    f"{name.lower()}_ms": (name, _STYLE["cdf"]["units"][name], _FROM_MS[_STYLE["cdf"]["units"][name]])
    for name in ("TTFT", "TPOT", "E2E")
}


def policy_domain(names: Iterable[str]) -> tuple[list[str], list[str]]:
    """``(names, colours)`` for a colour scale: the registry's policies first, in its order,
    each in its colour, then any other names in the order given, in ``OTHER_COLORS``."""
    wanted = list(dict.fromkeys(names))
    order = registry.policy_names()
    colors = registry.policy_colors()
    domain = [p for p in order if p in wanted] + [n for n in wanted if n not in order]
    others = 0
    out: list[str] = []
    for name in domain:
        if name in colors:
            out.append(colors[name])
        else:
            out.append(OTHER_COLORS[others % len(OTHER_COLORS)])
            others += 1
    return domain, out


def page_style() -> dict[str, Any]:
    """The conventions as the page holds them (``CHART_STYLE`` in ``web/chart_style.js``, set
    from the WASM module's ``presets()``): what the page's test compares against."""
    return registry.chart_style()
