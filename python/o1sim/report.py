"""``o1sim report``: one self-contained HTML file comparing scheduling policies on a scenario.

The page holds the comparison table, the resolved deployment, the scenario and the charts
of :mod:`o1sim.dashboard.charts` as Vega-Lite specs. The Vega, Vega-Lite and vega-embed
JavaScript comes inlined from ``vl-convert-python`` (no network: the file opens offline,
from disk or an e-mail attachment); it needs ``pip install 'o1sim[dashboard]'``.
"""

from __future__ import annotations

import datetime as _dt
import html
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

_CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto; max-width: 1180px;
       padding: 0 1rem; color: #1f2430; }
h1 { font-size: 1.6rem; margin-bottom: .2rem; } h2 { margin-top: 2.2rem; border-bottom: 1px solid #e3e6ec; }
.meta { color: #5b6270; } .error { color: #b00020; font-weight: 600; }
table { border-collapse: collapse; margin: .6rem 0; font-variant-numeric: tabular-nums; }
th, td { padding: .3rem .7rem; border-bottom: 1px solid #e3e6ec; text-align: right; }
th:first-child, td:first-child { text-align: left; } thead th { background: #f4f6f9; }
table.kv td:last-child { text-align: left; }
td.best { font-weight: 700; color: #0b6e4f; }
pre { background: #f4f6f9; padding: .8rem; overflow-x: auto; } .figure { margin: 1rem 0 1.6rem; }
"""

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


def _table(results: Mapping[str, Result]) -> str:
    """The values the core's metric table shows in the report, one row per run, each written
    as the table says; the best of each column in bold where the table says which way is
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
    head = "".join(f"<th>{html.escape(c)}</th>" for c in ["policy", *(m.heading for m in columns)])
    rows = []
    for name, row in values.items():
        cells = [f"<td>{html.escape(str(name))}</td>"]
        for i, (m, v) in enumerate(zip(columns, row)):
            cls = ' class="best"' if i in best and v == best[i] else ""
            cells.append(f'<td data-key="{html.escape(m.path)}"{cls}>{html.escape(registry.format_metric(m, v))}</td>')
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _deployment_table(dep: Mapping[str, Any]) -> str:
    model = dep.get("model", {})
    gpu = dep.get("gpu", {})
    mem = dep.get("memory", {})
    items = [
        ("model", f"{model.get('name', '?')} ({model.get('layers', '?')} layers, hidden {model.get('hidden', '?')})"),
        ("GPU", f"{gpu.get('name', '?')} ({gpu.get('hbm_gib', '?')} GiB, {gpu.get('hbm_tbps', '?')} TB/s)"),
        ("layout", f"{dep.get('replicas')} replica(s) × TP {dep.get('tp')} × PP {dep.get('pp')} = {dep.get('gpus')} GPUs"),
        ("weights per GPU", f"{mem.get('weights_gib', float('nan')):.1f} GiB"),
        ("KV cache per GPU", f"{mem.get('kv_gib', float('nan')):.1f} GiB"),
        ("KV blocks per replica", f"{dep.get('num_gpu_blocks', '?'):,} × {dep.get('block_size', '?')} tokens"),
    ]
    body = "".join(f"<tr><td>{html.escape(k)}</td><td>{html.escape(str(v))}</td></tr>" for k, v in items)
    return f'<table class="kv"><tbody>{body}</tbody></table>'


def _links_table(result: Result, top: int = 12) -> str:
    """The busiest links of a run with a topology (empty without one)."""
    from .dashboard.charts import link_frame

    if result.links is None or result.links.empty:
        return ""
    frame = link_frame(result.links).head(top)
    head = "".join(f"<th>{html.escape(c)}</th>" for c in frame.columns)
    rows = []
    for row in frame.to_dict("records"):
        cells = [row["link"], row["kind"], f"{row['GB/s']:,.0f}", f"{row['nominal GB/s']:,.0f}",
                 f"{row['GB carried']:,.1f}", f"{row['utilisation']:.2%}", row["state"]]
        rows.append("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


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
    """The report page as one HTML string (scripts inlined; no external resources)."""
    import vl_convert

    from .dashboard.charts import charts_for

    failures = failures or {}
    try:
        label = str(scenario.to_dict().get("name") or scenario.source)
    except SimError:
        label = scenario.source
    name = title or f"o1sim report · {label}"
    parts = [f"<h1>{html.escape(name)}</h1>"]
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    parts.append(f'<p class="meta">o1sim {html.escape(_core.__version__)} · generated {stamp} · '
                 f"policies: {html.escape(', '.join([*results, *failures]))}</p>")
    parts.append("<h2>Comparison</h2>")
    if results:
        parts.append(_table(results))
        parts.append('<p class="meta">Best value per column in bold green (lower latencies, fragmentation, '
                     "preemptions and rejections; higher rates). TPOT is per request: decode time / (output − 1).</p>")
    for policy, err in failures.items():
        parts.append(f'<p class="error">{html.escape(policy)}: {html.escape(type(err).__name__)}: {html.escape(str(err))}</p>')

    specs: list[tuple[str, dict[str, Any]]] = []
    if results:
        first_name, first = next(iter(results.items()))
        parts.append("<h2>Deployment</h2>")
        parts.append(_deployment_table(first.deployment))
        links = _links_table(first)
        if links:
            parts.append(f"<h2>Busiest links · {html.escape(first_name)}</h2>{links}")
        for heading, chart in charts_for(results, topology_nodes=_topology_nodes(scenario)):
            specs.append((heading, chart.to_dict()))
    for i, (heading, _) in enumerate(specs):
        parts.append(f'<h2>{html.escape(heading)}</h2><div class="figure" id="fig{i}"></div>')

    text, fmt = scenario.payload()
    if fmt == "json":
        text = json.dumps(json.loads(text), indent=2)
    parts.append(f"<h2>Scenario</h2><p class=\"meta\">{html.escape(scenario.source)} ({fmt.upper()}; each policy run "
                 f"with <code>scheduler.policy</code> overridden)</p><pre>{html.escape(text)}</pre>")

    bundle = vl_convert.javascript_bundle("window.vegaEmbed = vegaEmbed;") if specs else ""
    # JSON inside <script>: escape "</" so no spec text can close the tag.
    spec_json = json.dumps([s for _, s in specs]).replace("</", "<\\/")
    embed = ("const specs = " + spec_json + ";\n"
             "specs.forEach((s, i) => vegaEmbed('#fig' + i, s, {actions: false, renderer: 'svg'}));")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{html.escape(name)}</title><style>{_CSS}</style>"
        f"<script>{bundle}</script></head>\n<body>\n" + "\n".join(parts) +
        (f"\n<script>{embed}</script>" if specs else "") + "\n</body></html>\n"
    )


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
