"""``o1sim report``: one self-contained HTML file comparing scheduling policies on a scenario.

The page (the package's Jinja2 template ``templates/report.html.j2``, autoescape on) holds
the comparison table, the resolved deployment, the scenario and the charts
of :mod:`o1sim.dashboard.charts` as Vega-Lite specs. The Vega, Vega-Lite and vega-embed
JavaScript comes inlined from ``vl-convert-python`` (no network: the file opens offline,
from disk or an e-mail attachment); it needs ``pip install 'o1sim[dashboard]'``.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Callable, Optional, Union

from . import _core
from .api import Result, Scenario, simulate
from .errors import ConfigError, SimError

__all__ = ["build_report", "render_html", "write_report"]

#: Called with (policy, index, count) before each run.
RunCallback = Callable[[str, int, int], None]

#: The page's template (``templates/report.html.j2``, shipped in the package).
TEMPLATE = "report.html.j2"

def build_report(
    scenario: Scenario,
    policies: Sequence[str],
    *,
    on_run: Optional[RunCallback] = None,
) -> tuple[dict[str, Result], dict[str, SimError]]:
    """Run ``scenario`` once per policy. A ``ConfigError`` (the scenario is wrong) is raised;
    other failures (infeasible, stalled) are kept per policy and shown in the report."""
    results: dict[str, Result] = {}
    failures: dict[str, SimError] = {}
    for i, policy in enumerate(policies):
        if on_run is not None:
            on_run(policy, i, len(policies))
        try:
            results[policy] = simulate(scenario.with_overrides({"scheduler.policy": policy}))
        except ConfigError:
            raise
        except SimError as e:
            failures[policy] = e
    return results, failures


def _environment() -> Any:
    """The Jinja2 environment of the package's templates, autoescape on (HTML escaped unless
    a value is marked ``safe``)."""
    import jinja2

    return jinja2.Environment(
        loader=jinja2.PackageLoader("o1sim", "templates"),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )


def _table(results: Mapping[str, Result]) -> dict[str, Any]:
    """The values the core's metric table shows in the report, one row per run, each written
    as the table says; the best of each column marked where the table says which way is
    better (``lower_is_better``) and the runs differ."""
    from . import registry

    columns = registry.shown_metrics("report")
    values = {name: [registry.metric_value(r.summary, m.path) for m in columns] for name, r in results.items()}
    best: dict[int, float] = {}
    for i, m in enumerate(columns):
        col = [x for v in values.values() if (x := v[i]) is not None]
        if m.lower_is_better is None or len(results) < 2 or len(set(col)) < 2:
            continue
        best[i] = min(col) if m.lower_is_better else max(col)
    rows = [
        {"name": str(name),
         "cells": [{"key": m.path, "best": i in best and v == best[i], "text": registry.format_metric(m, v)}
                   for i, (m, v) in enumerate(zip(columns, row))]}
        for name, row in values.items()
    ]
    return {"headings": ["policy", *(m.heading for m in columns)], "rows": rows}


def _deployment_items(dep: Mapping[str, Any]) -> list[tuple[str, str]]:
    model = dep.get("model", {})
    gpu = dep.get("gpu", {})
    mem = dep.get("memory", {})
    return [
        ("model", f"{model.get('name', '?')} ({model.get('layers', '?')} layers, hidden {model.get('hidden', '?')})"),
        ("GPU", f"{gpu.get('name', '?')} ({gpu.get('hbm_gib', '?')} GiB, {gpu.get('hbm_tbps', '?')} TB/s)"),
        ("layout", f"{dep.get('replicas')} replica(s) × TP {dep.get('tp')} × PP {dep.get('pp')} = {dep.get('gpus')} GPUs"),
        ("weights per GPU", f"{mem.get('weights_gib', float('nan')):.1f} GiB"),
        ("KV cache per GPU", f"{mem.get('kv_gib', float('nan')):.1f} GiB"),
        ("KV blocks per replica", f"{dep.get('num_gpu_blocks', '?'):,} × {dep.get('block_size', '?')} tokens"),
    ]


def _links(name: str, result: Result, top: int = 12) -> Optional[dict[str, Any]]:
    """The busiest links of a run with a topology (None without one)."""
    from .dashboard.charts import link_frame

    if result.links is None or result.links.empty:
        return None
    frame = link_frame(result.links).head(top)
    rows = [[str(c) for c in (row["link"], row["kind"], f"{row['GB/s']:,.0f}", f"{row['nominal GB/s']:,.0f}",
                              f"{row['GB carried']:,.1f}", f"{row['utilisation']:.2%}", row["state"])]
            for row in frame.to_dict("records")]
    return {"run": name, "columns": [str(c) for c in frame.columns], "rows": rows}


def _topology_nodes(scenario: Scenario) -> Optional[list[dict[str, Any]]]:
    """The expanded topology's nodes (None without a topology or when it cannot be read)."""
    from .topology import expand

    try:
        entry = scenario.to_dict().get("topology")
        if entry is None:
            return None
        nodes: list[dict[str, Any]] = expand(entry)["nodes"]
        return nodes
    except (SimError, TypeError, ValueError):
        return None


def render_html(
    scenario: Scenario,
    results: Mapping[str, Result],
    failures: Optional[Mapping[str, SimError]] = None,
    *,
    title: Optional[str] = None,
) -> str:
    """The report page as one HTML string (scripts inlined; no external resources), from the
    package's template ``templates/report.html.j2`` (Jinja2, autoescape on)."""
    import vl_convert

    from .dashboard.charts import charts_for

    failures = failures or {}
    try:
        label = str(scenario.to_dict().get("name") or scenario.source)
    except SimError:
        label = scenario.source
    specs: list[tuple[str, dict[str, Any]]] = []
    deployment: Optional[list[tuple[str, str]]] = None
    links: Optional[dict[str, Any]] = None
    if results:
        first_name, first = next(iter(results.items()))
        deployment = _deployment_items(first.deployment)
        links = _links(first_name, first)
        for heading, chart in charts_for(results, topology_nodes=_topology_nodes(scenario)):
            specs.append((heading, chart.to_dict()))
    text, fmt = scenario.payload()
    if fmt == "json":
        text = json.dumps(json.loads(text), indent=2)
    bundle = vl_convert.javascript_bundle("window.vegaEmbed = vegaEmbed;") if specs else ""
    return str(_environment().get_template(TEMPLATE).render(
        name=title or f"o1sim report · {label}",
        version=_core.__version__,
        stamp=_dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        policies=[*results, *failures],
        table=_table(results) if results else None,
        failures=[{"policy": p, "kind": type(e).__name__, "message": str(e)} for p, e in failures.items()],
        deployment=deployment,
        links=links,
        figures=[heading for heading, _ in specs],
        scenario={"source": scenario.source, "format": fmt, "text": text},
        bundle=bundle,
        # JSON inside <script>: escape "</" so no spec text can close the tag.
        specs_json=json.dumps([s for _, s in specs]).replace("</", "<\\/"),
    ))


def write_report(
    scenario: Scenario,
    policies: Sequence[str],
    path: Union[str, "os.PathLike[str]"],
    *,
    on_run: Optional[RunCallback] = None,
) -> tuple[dict[str, Result], dict[str, SimError]]:
    """Run the policies and write the report to ``path``; returns what :func:`build_report` does."""
    results, failures = build_report(scenario, policies, on_run=on_run)
    Path(path).write_text(render_html(scenario, results, failures), encoding="utf-8")
    return results, failures
