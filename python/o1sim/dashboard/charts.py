"""Altair charts and tables of results, shared by the dashboard, ``o1sim report`` and the
notebook. Each function takes results (``{label: Result}``) or plain frames and returns a
chart; nothing here imports Streamlit.

Data are thinned before they reach a chart (CDFs to quantiles, heatmaps to at most
``MAX_HEAT_COLUMNS`` time columns) so the specs stay small enough to embed in a page.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Optional

import altair as alt
import numpy as np
import pandas as pd

from .. import chart_style, registry

if TYPE_CHECKING:
    from ..api import Result

__all__ = [
    "LATENCIES",
    "busy_frame",
    "deployment_chart",
    "heatmap_chart",
    "link_frame",
    "topology_chart",
    "topology_layout",
    "latency_cdf_chart",
    "latency_frame",
    "over_time_chart",
    "summary_formats",
    "summary_frame",
    "sweep_chart",
    "steps_frame",
    "steps_chart",
    "anatomy_chart",
    "anatomy_table",
]

#: (column, axis title) of the per-request latencies shown as CDFs (:mod:`o1sim.chart_style`).
LATENCIES: tuple[tuple[str, str], ...] = tuple(
    (column, f"{name} ({unit})") for column, (name, unit, _) in chart_style.LATENCIES.items())
CDF_POINTS = 200
MAX_HEAT_COLUMNS = 240
MAX_TIME_POINTS = 600
WIDTH = 320


#: Colours of replicas 0, 1, … in every chart that shows replicas (the deployment grid and
#: the topology's GPUs are side by side in one tab: one replica, one colour; the page's too).
REPLICA_PALETTE: tuple[str, ...] = chart_style.REPLICA_PALETTE

#: Dash patterns (px on, px off) of links by state: solid, dashed, dotted. Edges are drawn
#: with butt caps, so the gaps stay visible however thick a busy link is drawn.
LINK_DASHES: dict[str, list[int]] = {"up": [1, 0], "degraded": [9, 5], "down": [2, 5]}


def replica_colors(n: int) -> list[str]:
    """The colours of replicas 0 … n-1."""
    return [REPLICA_PALETTE[i % len(REPLICA_PALETTE)] for i in range(n)]


#: Policies in the registry's order, so each keeps its place in legends across charts.
POLICY_ORDER: tuple[str, ...] = tuple(registry.policy_names())
#: Each policy's colour, the same as the page's (the registry's, :mod:`o1sim.registry`).
POLICY_COLORS: dict[str, str] = registry.policy_colors()
#: Colours of names the registry does not know (a result labelled otherwise).
OTHER_COLORS: tuple[str, ...] = chart_style.OTHER_COLORS


def policy_color(names: Any, legend_bottom: bool = False) -> alt.Color:
    """A colour encoding of the ``policy`` field: each policy in its registry colour
    (:func:`o1sim.chart_style.policy_domain`)."""
    domain, colors = chart_style.policy_domain(str(n) for n in names)
    legend = alt.Legend(orient="bottom", title=None, columns=2, columnPadding=12, symbolSize=60) if legend_bottom else alt.Legend(title="policy")
    return alt.Color("policy:N", scale=alt.Scale(domain=domain, range=colors), legend=legend)


def latency_frame(result: Result) -> pd.DataFrame:
    """Finished requests' TTFT, TPOT (per request: decode time / (output − 1)) and E2E, in ms."""
    req = result.requests
    fin = req[req["status"] == "finished"]
    out = pd.DataFrame({"ttft_ms": fin["ttft_ms"].to_numpy(), "e2e_ms": fin["e2e_ms"].to_numpy()})
    steps = fin["output_tokens"].to_numpy().astype(float) - 1.0
    decode = (fin["e2e_ms"] - fin["ttft_ms"]).to_numpy()  # first to last token, in the summary's view
    with np.errstate(divide="ignore", invalid="ignore"):
        out["tpot_ms"] = np.where(steps > 0, decode / np.where(steps > 0, steps, 1.0), np.nan)
    return out


def _cdf(values: np.ndarray[Any, Any], points: int = CDF_POINTS) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    v = np.sort(values[np.isfinite(values)])
    if len(v) == 0:
        return v, v
    q = np.linspace(0.0, 1.0, min(points, len(v)))
    return np.quantile(v, q), q


def latency_cdf_chart(results: Mapping[str, Result], metric: str, title: Optional[str] = None,
                      clip_quantile: float = 1.0) -> alt.Chart:
    """CDF of one per-request latency (``ttft_ms``, ``tpot_ms`` or ``e2e_ms``), one line per
    result, in the charts' one convention (:mod:`o1sim.chart_style`, the page's too): the
    latency on a logarithmic x axis, the fraction of requests on a linear y axis from 0 to 1.
    The x axis spans the smallest to the largest value (``clip_quantile`` < 1 ends it at that
    quantile of the results instead)."""
    label = dict(LATENCIES)[metric]
    name = chart_style.LATENCIES[metric][0]
    scale = chart_style.LATENCIES[metric][2]
    frames = []
    x_min, x_max = float("inf"), 0.0
    for policy, r in results.items():
        values = latency_frame(r)[metric].to_numpy() * scale
        x, q = _cdf(values[values > 0])  # a log axis has no zero
        if len(x):
            x_min = min(x_min, float(x[0]))
            x_max = max(x_max, float(np.quantile(x, clip_quantile)))
        frames.append(pd.DataFrame({"value": x, "fraction": q, "policy": policy}))
    data = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["value", "fraction", "policy"])
    domain = [x_min, x_max] if 0 < x_min < x_max else None
    x_scale = alt.Scale(type=chart_style.CDF_X_SCALE, domain=domain, nice=False) if domain else \
        alt.Scale(type=chart_style.CDF_X_SCALE)
    chart: alt.Chart = (
        alt.Chart(data, title=title or f"{name} CDF", width=WIDTH, height=220)
        .mark_line(interpolate="step-after", clip=True)
        .encode(
            x=alt.X("value:Q", title=f"{label}, log scale", scale=x_scale),
            y=alt.Y("fraction:Q", title=chart_style.CDF_Y_TITLE, scale=alt.Scale(type="linear", domain=[0, 1]),
                    axis=alt.Axis(format="%")),
            color=policy_color(results, legend_bottom=True),
            tooltip=["policy:N", alt.Tooltip("value:Q", format=",.1f", title=label),
                     alt.Tooltip("fraction:Q", format=".1%")],
        )
    )
    return chart


def _binned(result: Result, column: str, max_columns: int) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """A time-series column per replica on at most ``max_columns`` equal time columns:
    (column start times in ms, replicas × columns array of time-weighted means). Idle time
    counts as zero (a bucket's value holds over its busy time)."""
    ts = result.timeseries
    interval = float(result.timeseries_interval_ms)
    end_ms = float(ts["time_ms"].max()) + interval if len(ts) else interval
    buckets = max(1, int(round(end_ms / interval)))
    # A whole number of buckets per column: uneven columns would draw a sawtooth.
    per_column = -(-buckets // max_columns)
    n = -(-buckets // per_column)
    width_ms = per_column * interval
    col = np.minimum((np.round(ts["time_ms"].to_numpy() / interval).astype(int) // per_column), n - 1)
    grid = np.zeros((int(result.deployment.get("replicas", 1)), n))
    weight = ts["busy"].to_numpy() * interval
    values = weight if column == "busy" else ts[column].to_numpy() * weight
    np.add.at(grid, (ts["replica"].to_numpy().astype(int), col), values)
    return np.arange(n) * width_ms, grid / width_ms


def over_time_chart(results: Mapping[str, Result], column: str, title: str, axis: str, *,
                    how: str = "mean", percent: bool = False) -> alt.Chart:
    """A time-series column over simulated time, replicas combined (``how``: ``mean`` or
    ``sum``), one line per result, on at most ``MAX_TIME_POINTS`` points."""
    frames = []
    for name, r in results.items():
        t_ms, grid = _binned(r, column, MAX_TIME_POINTS)
        value = grid.mean(axis=0) if how == "mean" else grid.sum(axis=0)
        frames.append(pd.DataFrame({"time_s": t_ms / 1e3, "value": value, "policy": name}))
    data = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["time_s", "value", "policy"])
    y = alt.Y("value:Q", title=axis, axis=alt.Axis(format="%") if percent else alt.Axis())
    chart: alt.Chart = (
        alt.Chart(data, title=title, width=WIDTH * 2 - 80, height=200)
        .mark_line(interpolate="step-after", strokeWidth=1.2)
        .encode(x=alt.X("time_s:Q", title="simulated time (s)"), y=y, color=policy_color(results),
                tooltip=["policy:N", alt.Tooltip("time_s:Q", format=",.2f"),
                         alt.Tooltip("value:Q", format=".1%" if percent else ",.2f")])
    )
    return chart


def busy_frame(result: Result, max_columns: int = MAX_HEAT_COLUMNS) -> pd.DataFrame:
    """GPU × time busy fractions: one row per GPU and time column (replicas' busy fraction on
    each of their TP·PP GPUs; at most ``max_columns`` columns, averaged)."""
    dep = result.deployment
    per_replica = int(dep.get("tp", 1)) * int(dep.get("pp", 1))
    t_ms, grid = _binned(result, "busy", max_columns)
    width_ms = float(t_ms[1] - t_ms[0]) if len(t_ms) > 1 else float(result.timeseries_interval_ms)
    rows = []
    for r in range(grid.shape[0]):
        for g in range(per_replica):
            gpu = r * per_replica + g
            rows.append(pd.DataFrame({
                "gpu": f"GPU {gpu} (r{r})", "gpu_index": gpu, "replica": r,
                "t0_s": t_ms / 1e3, "t1_s": (t_ms + width_ms) / 1e3,
                "busy": np.clip(grid[r], 0.0, 1.0),
            }))
    return pd.concat(rows, ignore_index=True)


def heatmap_chart(result: Result, title: str = "GPU × time utilisation") -> alt.Chart:
    """GPU × time heatmap of the busy fraction (a replica's TP GPUs run its steps together)."""
    data = busy_frame(result)
    gpus = data.drop_duplicates("gpu").sort_values("gpu_index")["gpu"].tolist()
    chart: alt.Chart = (
        alt.Chart(data, title=title, width=WIDTH * 2 - 80, height=max(60, 24 * len(gpus)))
        .mark_rect()
        .encode(
            x=alt.X("t0_s:Q", title="simulated time (s)"), x2="t1_s:Q",
            y=alt.Y("gpu:N", sort=gpus, title=None),
            color=alt.Color("busy:Q", title="busy", scale=alt.Scale(domain=[0, 1], range=list(chart_style.HEAT_RAMP), interpolate="rgb"),
                            legend=alt.Legend(format="%")),
            tooltip=["gpu:N", alt.Tooltip("t0_s:Q", format=",.2f", title="from s"),
                     alt.Tooltip("busy:Q", format=".0%")],
        )
    )
    return chart


def deployment_chart(deployment: Mapping[str, Any]) -> alt.LayerChart:
    """The deployment as a grid: one row per replica, one cell per GPU (TP rank × PP stage)."""
    tp, pp = int(deployment.get("tp", 1)), int(deployment.get("pp", 1))
    replicas = int(deployment.get("replicas", 1))
    gpu_name = str(deployment.get("gpu", {}).get("name", "gpu"))
    cells = []
    for r in range(replicas):
        for s in range(pp):
            for t in range(tp):
                idx = s * tp + t
                cells.append({"replica": f"replica {r}", "slot": idx, "gpu": r * tp * pp + idx,
                              "label": f"GPU {r * tp * pp + idx}" + (f" · s{s}" if pp > 1 else "") + f" · tp{t}",
                              "device": gpu_name})
    data = pd.DataFrame(cells)
    base = alt.Chart(data, title=f"{replicas} replica(s) × TP {tp} × PP {pp} on {gpu_name}",
                     width=max(160, 95 * tp * pp), height=max(48, 52 * replicas))
    x = alt.X("slot:O", title="GPU in replica (PP stage × TP rank)", axis=alt.Axis(labels=False, ticks=False))
    names = [f"replica {r}" for r in range(replicas)]
    y = alt.Y("replica:N", title=None, sort=names)
    rect = base.mark_rect(stroke="white", strokeWidth=3, cornerRadius=4).encode(
        x=x, y=y,
        color=alt.Color("replica:N", legend=None, scale=alt.Scale(domain=names, range=replica_colors(replicas))),
        tooltip=["replica:N", "gpu:Q", "device:N"])
    text = base.mark_text(color="white", fontSize=11).encode(x=x, y=y, text="label:N")
    layered: alt.LayerChart = rect + text
    return layered


# --------------------------------------------------------------------------- topology

_SERVER = re.compile(r"^(n\d+)\.(.+)$")
#: Node kinds drawn as a server's hub (above its GPUs).
_HUBS = ("nvswitch", "host", "switch")


def _kind_of(node_id: str) -> str:
    """A node's kind guessed from its id (when only the links are known)."""
    name = _SERVER.sub(r"\2", node_id)
    for kind in ("nvswitch", "gpu", "nic", "host"):
        if name.startswith(kind):
            return kind
    return "switch"


def topology_layout(nodes: Sequence[Mapping[str, Any]]) -> dict[str, tuple[float, float]]:
    """Deterministic positions for a topology's nodes, in rows: per server (``n0.``,
    ``n1.``, … or the whole single-node fabric) its hubs (NVSwitch, host) on top, its GPUs
    in a row, its NICs under their GPUs; fabric nodes outside any server (rail switches)
    in a row at the bottom, spread over the width."""
    servers: dict[str, list[Mapping[str, Any]]] = {}
    fabric: list[Mapping[str, Any]] = []
    multi = any(_SERVER.match(str(n["id"])) for n in nodes)
    for n in nodes:
        m = _SERVER.match(str(n["id"]))
        if m:
            servers.setdefault(m.group(1), []).append(n)
        elif multi and n.get("kind") != "gpu":
            fabric.append(n)
        else:
            servers.setdefault("", []).append(n)
    pos: dict[str, tuple[float, float]] = {}
    x0 = 0.0
    gap = 1.5
    for members in servers.values():
        gpus = [n for n in members if n.get("kind") == "gpu"]
        hubs = [n for n in members if n.get("kind") in _HUBS]
        rest = [n for n in members if n.get("kind") not in _HUBS and n.get("kind") != "gpu"]
        width = max(len(gpus), len(rest), len(hubs), 1)
        for i, n in enumerate(gpus):
            pos[str(n["id"])] = (x0 + i + (width - len(gpus)) / 2, 2.0)
        for i, n in enumerate(rest):
            pos[str(n["id"])] = (x0 + i + (width - len(rest)) / 2, 1.0)
        mid = x0 + (width - 1) / 2
        for i, n in enumerate(hubs):
            pos[str(n["id"])] = (mid + (i - (len(hubs) - 1) / 2) * 1.5, 3.2)
        x0 += width + gap
    total = max(x0 - gap, 1.0)
    for i, n in enumerate(fabric):
        pos[str(n["id"])] = ((i + 0.5) * total / len(fabric) - 0.5, -0.4)
    return pos


def _link_state(row: Mapping[str, Any]) -> str:
    if not bool(row.get("up", True)):
        return "down"
    bw, nominal = row.get("bandwidth_gbps"), row.get("nominal_gbps")
    if isinstance(bw, (int, float)) and isinstance(nominal, (int, float)) and bw < nominal * (1 - 1e-9):
        return "degraded"
    return "up"


def link_frame(links: pd.DataFrame) -> pd.DataFrame:
    """``Result.links`` as a table, busiest first: link, kind, bandwidth now and nominal
    (GB/s), GB carried, utilisation (fraction) and state (up, degraded, down)."""
    rows = []
    for row in links.to_dict("records"):
        rows.append({
            "link": f"{row['src']} – {row['dst']}", "kind": row.get("kind"),
            "GB/s": float(row.get("bandwidth_gbps", float("nan"))),
            "nominal GB/s": float(row.get("nominal_gbps", row.get("bandwidth_gbps", float("nan")))),
            "GB carried": float(row.get("bytes", 0.0)) / 1e9,
            "utilisation": float(row.get("utilization", 0.0)),
            "state": _link_state(row),
        })
    frame = pd.DataFrame(rows, columns=["link", "kind", "GB/s", "nominal GB/s", "GB carried", "utilisation", "state"])
    return frame.sort_values("utilisation", ascending=False, kind="stable").reset_index(drop=True)


def topology_chart(links: pd.DataFrame, nodes: Optional[Sequence[Mapping[str, Any]]] = None,
                   placement: Optional[Sequence[Sequence[str]]] = None,
                   title: str = "Topology · per-link utilisation") -> alt.LayerChart:
    """The fabric as a graph (:func:`topology_layout`): links coloured and sized by their
    utilisation over the run (dashed: degraded, grey dotted: down), GPUs coloured by the
    replica they serve. ``links`` is ``Result.links``; ``nodes`` the expanded topology's
    nodes (kinds guessed from the ids when absent); ``placement`` the deployment's GPU ids
    per replica."""
    if nodes is None:
        ids = list(dict.fromkeys([*links["src"].astype(str), *links["dst"].astype(str)]))
        nodes = [{"id": i, "kind": _kind_of(i)} for i in ids]
    pos = topology_layout(nodes)
    replica_of = {str(g): r for r, gpus in enumerate(placement or []) for g in gpus}
    node_rows = []
    for n in nodes:
        nid, kind = str(n["id"]), str(n.get("kind", "switch"))
        x, y = pos[nid]
        if kind == "gpu":
            role = f"replica {replica_of[nid]}" if nid in replica_of else "GPU (unused)"
        else:
            role = kind
        # Hubs are labelled above (their links fan out below), everything else below.
        node_rows.append({"id": nid, "label": _SERVER.sub(r"\2", nid), "kind": kind, "role": role,
                          "x": x, "y": y, "ly": y + (0.3 if kind in _HUBS and y > 0 else -0.34),
                          "gpu": str(n.get("gpu", ""))})
    node_data = pd.DataFrame(node_rows)
    top = float(links["utilization"].max()) if len(links) else 0.0
    edge_rows = []
    for row in links.to_dict("records"):
        a, b = pos.get(str(row["src"])), pos.get(str(row["dst"]))
        if a is None or b is None:
            continue
        util = float(row.get("utilization", 0.0))
        edge_rows.append({"link": f"{row['src']} – {row['dst']}", "kind": row.get("kind"),
                          "x": a[0], "y": a[1], "x2": b[0], "y2": b[1], "utilisation": util,
                          "width": 1.0 + 7.0 * (util / top if top > 0 else 0.0),
                          "GB/s": float(row.get("bandwidth_gbps", 0.0)),
                          "GB carried": float(row.get("bytes", 0.0)) / 1e9, "state": _link_state(row)})
    edge_data = pd.DataFrame(edge_rows, columns=["link", "kind", "x", "y", "x2", "y2", "utilisation", "width",
                                                 "GB/s", "GB carried", "state"])
    xs = [p[0] for p in pos.values()] or [0.0]
    ys = [p[1] for p in pos.values()] or [0.0]
    x_scale = alt.Scale(domain=[min(xs) - 0.8, max(xs) + 0.8], nice=False, zero=False)
    y_scale = alt.Scale(domain=[min(ys) - 0.75, max(ys) + 0.6], nice=False, zero=False)
    width = int(max(520, min(1100, 58 * (max(xs) - min(xs) + 1.6))))
    height = int(max(230, 64 * (max(ys) - min(ys) + 1.4)))
    base_x = alt.X("x:Q", axis=None, scale=x_scale)
    base_y = alt.Y("y:Q", axis=None, scale=y_scale)
    edges = (
        alt.Chart(edge_data, title=title, width=width, height=height)
        .mark_rule(strokeCap="butt")
        .encode(
            x=base_x, y=base_y, x2="x2:Q", y2="y2:Q",
            color=alt.Color("utilisation:Q", title="link utilisation",
                            scale=alt.Scale(domain=[0, max(top, 1e-9)], scheme="orangered"),
                            legend=alt.Legend(format=".1%", orient="right", gradientLength=max(60, height - 60))),
            strokeWidth=alt.StrokeWidth("width:Q", legend=None, scale=None),
            strokeDash=alt.StrokeDash("state:N", title="link", legend=alt.Legend(orient="bottom", direction="horizontal"),
                                      scale=alt.Scale(domain=list(LINK_DASHES), range=list(LINK_DASHES.values()))),
            tooltip=["link:N", "kind:N", alt.Tooltip("utilisation:Q", format=".2%"),
                     alt.Tooltip("GB/s:Q", format=",.0f"), alt.Tooltip("GB carried:Q", format=",.1f"), "state:N"],
        )
    )
    roles = list(dict.fromkeys(sorted(r for r in node_data["role"] if r.startswith("replica "))))
    roles.sort(key=lambda r: int(r.split()[1]))
    others = [r for r in ("GPU (unused)", "nvswitch", "host", "nic", "switch") if r in set(node_data["role"])]
    others += [r for r in dict.fromkeys(node_data["role"]) if r not in roles and r not in others]
    greys = ["#c7ccd4", "#5b6270", "#8a93a3", "#a9b0bc", "#3d4350", "#d9dde3"]
    color_range = [REPLICA_PALETTE[int(r.split()[1]) % len(REPLICA_PALETTE)] for r in roles] + greys[:len(others)]
    color_range += ["#888888"] * (len(roles) + len(others) - len(color_range))
    shape = alt.Shape("kind:N", scale=alt.Scale(domain=["gpu", "nvswitch", "host", "nic", "switch"],
                                                range=["square", "diamond", "diamond", "circle", "triangle-up"]),
                      legend=None)
    points = (
        alt.Chart(node_data)
        .mark_point(filled=True, size=420, opacity=1.0, stroke="white", strokeWidth=1.5)
        .encode(x=base_x, y=base_y, shape=shape,
                color=alt.Color("role:N", title="node", scale=alt.Scale(domain=roles + others, range=color_range),
                                legend=alt.Legend(orient="bottom", direction="horizontal")),
                tooltip=["id:N", "kind:N", "role:N"])
    )
    labels = (
        alt.Chart(node_data)
        .mark_text(fontSize=10, color="#1f2430")
        .encode(x=base_x, y=alt.Y("ly:Q", axis=None, scale=y_scale), text="label:N")
    )
    layered: alt.LayerChart = (alt.layer(edges, points, labels).resolve_scale(color="independent")
                               .configure_view(stroke=None))
    return layered


def sweep_chart(sweep: pd.DataFrame, metric: str = "ttft_p99_ms", axis: Optional[str] = None) -> alt.Chart:
    """A metric against offered load (``sweep``: columns ``rate``, ``policy`` and the metric;
    ``axis`` titles it, the metric's name by default).
    Latencies past saturation grow by orders of magnitude: the y axis is logarithmic when the
    values span more than a factor of 20, so the knee and the low-load values both read."""
    axis = axis or metric
    values = pd.to_numeric(sweep[metric], errors="coerce")
    positive = values[values > 0]
    wide = len(positive) > 1 and float(positive.max()) > 20 * float(positive.min())
    scale = alt.Scale(type="log") if wide else alt.Scale(zero=False)
    chart: alt.Chart = (
        alt.Chart(sweep, title=f"{axis} vs offered load", width=2 * WIDTH, height=260)
        .mark_line(point=alt.OverlayMarkDef(size=60), strokeWidth=2.5)
        .encode(x=alt.X("rate:Q", title="offered load (req/s)", scale=alt.Scale(zero=False)),
                y=alt.Y(f"{metric}:Q", title=axis + (" (log scale)" if wide else ""), scale=scale),
                color=policy_color(sweep["policy"]),
                tooltip=["policy:N", alt.Tooltip("rate:Q", format=",.2f"), alt.Tooltip(f"{metric}:Q", format=",.1f")])
    )
    return chart


def _get(summary: Mapping[str, Any], dotted: str) -> Any:
    node: Any = summary
    for key in dotted.split("."):
        if not isinstance(node, Mapping) or node.get(key) is None:
            return np.nan
        node = node[key]
    return node


def summary_frame(summaries: Mapping[str, Mapping[str, Any]], surface: str = "compare") -> pd.DataFrame:
    """One row per run (``{label: Result.summary}``), one column per value the core's metric
    table shows on ``surface`` (``compare``: ``o1sim compare``'s columns and the dashboard's
    Compare tab; ``report``: the HTML report's), headed by its label and unit
    (:func:`o1sim.registry.heading`) and scaled as shown (a percentage × 100); NaN where a run
    has no value."""
    columns = registry.shown_metrics(surface)

    def value(s: Mapping[str, Any], m: registry.Shown) -> float:
        v = registry.metric_value(s, m.path)
        return float("nan") if v is None else v * m.scale

    rows = {name: {m.heading: value(s, m) for m in columns} for name, s in summaries.items()}
    frame = pd.DataFrame.from_dict(rows, orient="index", columns=[m.heading for m in columns])
    frame.index.name = "policy"
    return frame


def summary_formats(surface: str = "compare") -> dict[str, str]:
    """``{heading: printf format}`` of :func:`summary_frame`'s columns, from the metric
    table's formats (``%.1f%%`` for a percentage, ``%d`` for a count)."""
    def printf(m: registry.Shown) -> str:
        if m.format == "integer":
            return "%d"
        return f"%.{m.decimals}f" + ("%%" if m.format == "percent" else "")

    return {m.heading: printf(m) for m in registry.shown_metrics(surface)}


def sweep_rates(base_rate: float, points: int, low: float = 0.25, high: float = 1.5) -> list[float]:
    """Offered loads for a sweep: ``points`` rates from ``low``× to ``high``× the scenario's rate."""
    if points <= 1:
        return [base_rate]
    return [round(base_rate * f, 6) for f in np.linspace(low, high, points)]


def sweep_row(policy: str, rate: float, summary: Mapping[str, Any]) -> dict[str, Any]:
    """One point of a load sweep (``sweep_chart``'s input)."""
    return {"policy": policy, "rate": rate,
            "ttft_p99_ms": _get(summary, "ttft_ms.p99"), "tpot_p99_ms": _get(summary, "tpot_ms.p99"),
            "e2e_p99_s": float(_get(summary, "e2e_ms.p99")) / 1e3, "goodput_rps": _get(summary, "goodput_rps"),
            "throughput_rps": _get(summary, "throughput_rps")}


def charts_for(results: Mapping[str, Result], primary: Optional[str] = None,
               topology_nodes: Optional[Sequence[Mapping[str, Any]]] = None) -> list[tuple[str, Any]]:
    """The standard set of (heading, chart) for a comparison (the report's figures); with a
    topology, the fabric's graph with the primary run's per-link utilisation too."""
    first = primary if primary is not None and primary in results else next(iter(results))
    out: list[tuple[str, Any]] = [
        ("Latency distributions", alt.hconcat(*(latency_cdf_chart(results, m) for m, _ in LATENCIES))),
        ("KV-cache utilisation over time", over_time_chart(results, "kv_usage", "KV-cache use (mean over replicas)",
                                                           "KV used", how="mean", percent=True)),
        ("Queue length over time", over_time_chart(results, "waiting", "Waiting requests (all replicas)", "waiting",
                                                   how="sum")),
    ]
    out += [(f"GPU × time utilisation: {name}", heatmap_chart(r, title=f"GPU × time utilisation · {name}"))
            for name, r in results.items()]
    out.append(("Deployment", deployment_chart(results[first].deployment)))
    links = results[first].links
    if links is not None and not links.empty:
        out.append((f"Topology: per-link utilisation · {first}",
                    topology_chart(links, topology_nodes, results[first].deployment.get("placement"),
                                   title=f"Topology · per-link utilisation · {first}")))
    return out



# --------------------------------------------------------------------------- steps and their kernels

#: The step kinds of :func:`steps_frame`, in legend order.
STEP_KINDS: tuple[str, ...] = tuple(chart_style.STEP_KIND_COLORS)
#: The streams of a step's anatomy, top to bottom.
STREAMS: tuple[str, ...] = ("cpu", "compute", "communication")


def steps_frame(steps: pd.DataFrame, first: int = 0, count: int = 400) -> pd.DataFrame:
    """Steps ``first .. first + count`` of :attr:`~o1sim.Result.steps` as rows: ``step``
    (index), ``replica`` (a lane label), ``start_ms``, ``end_ms``, ``tokens``, ``batch`` and
    ``kind`` (decode, prefill or mixed)."""
    part = steps.iloc[max(0, first):max(0, first) + max(0, count)]
    prefills = part["prefill"].map(len).to_numpy()
    decodes = part["decode_seqs"].to_numpy()
    kind = np.where(prefills == 0, "decode", np.where(decodes == 0, "prefill", "mixed"))
    return pd.DataFrame({
        "step": part.index.to_numpy(dtype=int), "replica": [f"replica {int(r)}" for r in part["replica"]],
        "start_ms": part["start_ms"].to_numpy(dtype=float), "end_ms": part["end_ms"].to_numpy(dtype=float),
        "tokens": part["tokens"].to_numpy(dtype=int), "batch": part["batch_size"].to_numpy(dtype=int), "kind": kind,
    }, columns=["step", "replica", "start_ms", "end_ms", "tokens", "batch", "kind"])


def steps_chart(frame: pd.DataFrame, title: str = "Scheduler steps (click one for its kernels)") -> alt.Chart:
    """The steps of :func:`steps_frame` as bars on a time axis, one lane per replica, with a
    point selection ``step`` (the dashboard opens the clicked step's anatomy)."""
    pick = alt.selection_point(name="step", fields=["step"], on="click")
    lanes = sorted(frame["replica"].unique().tolist(), key=lambda r: int(str(r).split()[-1])) if len(frame) else []
    chart: alt.Chart = (
        alt.Chart(frame, title=title, width=WIDTH * 2 - 80, height=max(80, 40 * max(1, len(lanes))))
        .mark_rect(stroke="white", strokeWidth=0.3)
        .encode(
            x=alt.X("start_ms:Q", title="simulated time (ms)", scale=alt.Scale(zero=False)), x2="end_ms:Q",
            y=alt.Y("replica:N", sort=lanes, title=None),
            color=alt.Color("kind:N", scale=alt.Scale(domain=list(STEP_KINDS),
                                                      range=[chart_style.STEP_KIND_COLORS[k] for k in STEP_KINDS]),
                            legend=alt.Legend(title="step")),
            opacity=alt.condition(pick, alt.value(1.0), alt.value(0.55)),
            tooltip=["step:Q", "replica:N", "kind:N", "tokens:Q", "batch:Q",
                     alt.Tooltip("start_ms:Q", format=",.3f"), alt.Tooltip("end_ms:Q", format=",.3f")],
        )
        .add_params(pick)
    )
    return chart


def anatomy_chart(anatomy: pd.DataFrame, title: Optional[str] = None) -> alt.Chart:
    """A step's kernels (:meth:`~o1sim.Result.step_anatomy`) as a waterfall: one lane per
    stream, one bar per kernel from its start to its end (µs), coloured by operator."""
    data = anatomy.assign(kernel=range(len(anatomy)))[["kernel", "name", "layer", "start_us", "end_us", "stream", "source", "sm_occupancy"]]
    chart: alt.Chart = (
        alt.Chart(data, title=title or "Kernels of the step", width=WIDTH * 2 - 80, height=90)
        .mark_bar()
        .encode(
            x=alt.X("start_us:Q", title="µs since the step started"), x2="end_us:Q",
            y=alt.Y("stream:N", sort=list(STREAMS), title=None),
            color=alt.Color("name:N", legend=None),
            tooltip=["kernel:Q", "name:N", "layer:Q", "source:N", alt.Tooltip("sm_occupancy:Q", format=".0%"),
                     alt.Tooltip("start_us:Q", format=",.2f"), alt.Tooltip("end_us:Q", format=",.2f")],
        )
    )
    return chart


def anatomy_table(anatomy: pd.DataFrame) -> pd.DataFrame:
    """Per operator, in order of first launch: stream, kernels, µs, share of the step, the
    time sources and the mean SM occupancy."""
    a = anatomy.assign(us=anatomy["end_us"] - anatomy["start_us"])
    total = float(a.attrs.get("step_ms", a["end_us"].max() / 1000.0)) * 1000.0 or 1.0
    g = a.groupby("name", sort=False)
    out = pd.DataFrame({
        "stream": g["stream"].first(),
        "kernels": g.size(),
        "us": g["us"].sum(),
        "share": g["us"].sum() / total,
        "source": g["source"].agg(lambda v: ", ".join(dict.fromkeys(v))),
        "sm_occupancy": g["sm_occupancy"].mean(),
    })
    out.index.name = "operator"
    return out
