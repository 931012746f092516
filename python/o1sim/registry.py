"""The front ends' view of the core's registry (``o1sim.presets()``): the scheduling policies
in display order with each one's label, chart colour and summary, the other names a
scenario may use (routers, arrival, length and event kinds), and the run summary's metrics
(each one's label, unit, format, which way is better, where it is shown, its Prometheus
family: :func:`summary_metrics`, :func:`shown_metrics`, :func:`format_metric`).

The core defines each of them once (``crates/sim-core/src/policy.rs``, ``registry.rs``),
the same lists its scenario parser accepts; the CLI, the dashboard and (through the WASM
module's ``presets()``) the page read them, so a policy is drawn in the same colour by the
dashboard (Altair), the report and the page (uPlot), and no front end keeps a list of its
own (``tests/test_registry.py`` fails when one does).

Read from the extension with the standard library only (no pandas, no numpy): importing this
module costs the CLI's start-up a fraction of a millisecond.
"""

from __future__ import annotations

import decimal
import json
import math
from collections.abc import Mapping
from functools import lru_cache
from typing import Any, NamedTuple, Optional, TypedDict

from . import _core


class PolicyInfo(TypedDict):
    """One policy's entry: ``name`` (as in ``scheduler.policy``), ``label`` (for people),
    ``color`` (``#rrggbb``, every chart), ``needs_topology`` (only with a ``topology``),
    ``summary`` (one line)."""

    name: str
    label: str
    color: str
    needs_topology: bool
    summary: str


class EventKind(TypedDict):
    """One topology event kind: ``name`` (the event's ``kind``), ``label`` (for people),
    ``target`` (``"link"``: the event names ``src`` and ``dst``; ``"gpu"``: ``node``)."""

    name: str
    label: str
    target: str


class MetricStat(TypedDict):
    """A statistic of a distribution metric (``p99``) and the surfaces that show it."""

    name: str
    shown_in: list[str]


class PrometheusFamily(TypedDict):
    """The Prometheus family a metric is exported as (vLLM's name where vLLM has one; a
    counter's without ``_total``), and its ``type``: ``counter``, ``gauge``, ``histogram``."""

    name: str
    type: str


class SummaryMetric(TypedDict):
    """One metric of the run summary, as the core's table has it (``metric_info.rs``):
    ``key`` in the summary (a distribution: its ``{mean, p50, p90, p99}`` object), the one
    ``label``, ``unit``, ``format`` (``integer``, ``fixed``, ``percent``) with ``decimals`` and
    ``scale`` (shown = value × scale), ``lower_is_better`` (``None``: neither), ``shown_in``
    (``cli``, ``compare``, ``dashboard``, ``page``, ``report``, ``prometheus``), ``stats`` (a
    distribution's statistics, each with where it is shown; empty for a scalar),
    ``prometheus`` (or ``None``) and a one-line ``doc``."""

    key: str
    label: str
    unit: str
    format: str
    decimals: int
    scale: float
    lower_is_better: Optional[bool]
    shown_in: list[str]
    stats: list[MetricStat]
    prometheus: Optional[PrometheusFamily]
    doc: str


class Shown(NamedTuple):
    """One value a surface shows: a scalar metric, or one statistic of a distribution.
    ``path`` reads it from a summary (``ttft_ms.p99``), ``label`` names it (``TTFT p99``),
    ``heading`` adds the unit (``TTFT p99 (ms)``); the rest is its metric's."""

    path: str
    label: str
    heading: str
    unit: str
    format: str
    decimals: int
    scale: float
    lower_is_better: Optional[bool]
    doc: str
    metric: str


#: The surfaces a metric may be shown on (``SummaryMetric.shown_in``'s names).
SURFACES: tuple[str, ...] = ("cli", "compare", "dashboard", "page", "report", "prometheus")


@lru_cache(maxsize=1)
def _presets() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(_core.presets_json())
    return data


def chart_style() -> dict[str, Any]:
    """The charts' conventions besides the policies' colours (the core's ``chart_style``:
    CDF axes and units, the palettes for other names and replicas, the heatmap ramp, step
    kinds' colours); :mod:`o1sim.chart_style` names them."""
    style: dict[str, Any] = json.loads(json.dumps(_presets()["chart_style"]))  # a copy
    return style


def policies() -> list[PolicyInfo]:
    """Every policy, in display order (copies: callers may change them)."""
    return [
        PolicyInfo(name=str(p["name"]), label=str(p["label"]), color=str(p["color"]),
                   needs_topology=bool(p["needs_topology"]), summary=str(p["summary"]))
        for p in _presets()["policy_info"]
    ]


def policy_names() -> list[str]:
    """Every policy's name, in display order (``disagg`` last: it needs a topology)."""
    return [p["name"] for p in policies()]


def default_policies() -> list[str]:
    """The policies compared by default (``o1sim compare``, the dashboard, the page): every
    one that runs without a topology."""
    return [p["name"] for p in policies() if not p["needs_topology"]]


def policy_colors() -> dict[str, str]:
    """``{name: "#rrggbb"}``: the colour each policy has in every chart."""
    return {p["name"]: p["color"] for p in policies()}


def policy_labels() -> dict[str, str]:
    """``{name: label}``: each policy's name for people."""
    return {p["name"]: p["label"] for p in policies()}


class EngineInfo(TypedDict):
    """One engine ``cost_model.engine`` prices: its ``name``, a ``label`` for people and a
    one-line ``summary``."""

    name: str
    label: str
    summary: str


def engines() -> list[EngineInfo]:
    """The engines the cost model prices (``o1sim.presets()["engines"]``), in the core's order."""
    return [EngineInfo(name=str(e["name"]), label=str(e["label"]), summary=str(e["summary"]))
            for e in _presets()["engines"]]


def engine_names() -> list[str]:
    """The values of ``cost_model.engine``."""
    return [e["name"] for e in engines()]


def routers() -> list[str]:
    """The values of ``deployment.router``."""
    return [str(r) for r in _presets()["routers"]]


def arrival_kinds() -> list[str]:
    """The values of ``workload.arrival.kind``."""
    return [str(k) for k in _presets()["arrival_kinds"]]


def length_kinds() -> list[str]:
    """The values of ``workload.prompt.kind`` / ``workload.output.kind``."""
    return [str(k) for k in _presets()["length_kinds"]]


def event_kinds() -> list[EventKind]:
    """The topology event kinds (``events[i].kind``), in display order."""
    return [EventKind(name=str(e["name"]), label=str(e["label"]), target=str(e["target"]))
            for e in _presets()["event_kinds"]]


def summary_metrics() -> list[SummaryMetric]:
    """Every metric of the run summary, in display order (copies: callers may change them)."""
    rows: list[SummaryMetric] = json.loads(json.dumps(_presets()["summary_metrics"]))
    return rows


def heading(label: str, unit: str) -> str:
    """``label`` with its unit, as every table and headline writes it: ``TTFT p99 (ms)``,
    ``Throughput (req/s)``; a percentage and a count carry none (``%`` is in the value)."""
    return label if unit in ("", "%") else f"{label} ({unit})"


def _shown(m: SummaryMetric, path: str, label: str) -> Shown:
    return Shown(path, label, heading(label, m["unit"]), m["unit"], m["format"], int(m["decimals"]),
                 float(m["scale"]), m["lower_is_better"], m["doc"], m["key"])


@lru_cache(maxsize=None)
def _shown_on(surface: str) -> tuple[Shown, ...]:
    if surface not in SURFACES[:-1]:
        raise ValueError(f"unknown surface {surface!r}; surfaces: {', '.join(SURFACES[:-1])}")
    out: list[Shown] = []
    for m in summary_metrics():
        if m["stats"]:
            out += [_shown(m, f"{m['key']}.{st['name']}", f"{m['label']} {st['name']}")
                    for st in m["stats"] if surface in st["shown_in"]]
        elif surface in m["shown_in"]:
            out.append(_shown(m, m["key"], m["label"]))
    return tuple(out)


def shown_metrics(surface: str) -> list[Shown]:
    """The values ``surface`` shows (``cli``, ``compare``, ``dashboard``, ``page``,
    ``report``), in the table's order, a distribution's statistics expanded."""
    return list(_shown_on(surface))


def shown_metric(path: str) -> Shown:
    """The value at ``path`` (``ttft_ms.p99``, ``throughput_rps``) as any surface shows it."""
    key, _, stat = path.partition(".")
    for m in summary_metrics():
        if m["key"] == key and (stat in [st["name"] for st in m["stats"]] if stat else not m["stats"]):
            return _shown(m, path, f"{m['label']} {stat}" if stat else m["label"])
    raise KeyError(f"no summary metric {path!r}")


def metric_value(summary: Mapping[str, Any], path: str) -> Optional[float]:
    """The number at ``path`` in a run summary: ``None`` when absent, null or NaN."""
    node: Any = summary
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    if isinstance(node, bool) or not isinstance(node, (int, float)) or math.isnan(node):
        return None
    return float(node)


_EXACT = decimal.Context(prec=800)


def format_metric(shown: Shown, value: Optional[float]) -> str:
    """``value`` written as the table says: ``—`` when missing; a count whole, a number with its
    decimals after scaling, a fraction as a percentage; thousands separated by commas. The
    text is the page's (``formatMetric`` in ``web/metrics.js``) to the character: the scaled
    binary value rounded exactly, a tie away from zero, as JavaScript's ``toFixed`` does."""
    if value is None or math.isnan(value):
        return "—"
    digits = 0 if shown.format == "integer" else shown.decimals
    scaled = value * (1.0 if shown.format == "integer" else shown.scale)
    exact = decimal.Decimal(scaled + 0.0)  # + 0.0: no "-0"
    text = f"{exact.quantize(decimal.Decimal(1).scaleb(-digits), rounding=decimal.ROUND_HALF_UP, context=_EXACT):,f}"
    return text + "%" if shown.format == "percent" else text
