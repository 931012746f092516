"""The questions users ask of many runs: how many req/s a deployment holds under an SLO
(:func:`capacity`), and which configuration meets it at a load for the least money
(:func:`plan`).

An SLO is a table of bounds on a run's flat metrics: ``{"ttft_p99_ms": 2000, "tpot_p99_ms":
50, "goodput": 0.99}`` — latencies (``<ttft|tpot|e2e|queueing>_<mean|p50|p90|p99>_ms``) at
most the value, ``goodput`` (the fraction of all requests finishing within the per-request
thresholds) at least it; ``{"max": x}`` / ``{"min": x}`` bound any other metric. A rate or a
configuration *meets* the SLO when every seed's run does. The core judges runs, steps the
search and prices the plans, so the page answers the same questions with the same numbers.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Callable, Optional

from . import _core
from .api import ScenarioLike
from .errors import ConfigError, config_error
from .sweeps import (
    Runner,
    Seeds,
    Shipment,
    base_dict,
    expand,
    outcome_metrics,
    payload,
    rows_frame,
    seed_list,
    ship,
    validate_axes,
)

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Capacity", "Plan", "capacity", "plan", "default_prices"]

#: The field the capacity search varies.
RATE_KEY = "workload.arrival.rate"
#: What it varies instead on a replayed trace (``workload.trace``): the trace's arrival rate
#: scaled by the core's trace reader (every arrival time divided by it).
SCALE_KEY = "workload.trace.rate_scale"
#: Seeds per rate or configuration unless told otherwise: a rate counts as sustainable only
#: when all three runs meet the SLO.
DEFAULT_SEEDS = 3
#: A planned configuration must serve the load it is offered: at least ``1 - SUSTAIN_TOLERANCE``
#: (98%) of the offered requests finished within the per-request SLO (goodput counted over
#: requests, so the drain at the end of a finite run does not count against it), on every seed.
SUSTAIN_TOLERANCE = 0.02

ProgressFn = Callable[[str], None]


def default_prices() -> dict[str, dict[str, Any]]:
    """The default GPU prices: ``{gpu: {"usd_per_hour": p, "source": "..."}}`` (on-demand
    list prices of specialty GPU clouds, per GPU-hour, each with its source and date)."""
    prices: dict[str, dict[str, Any]] = json.loads(_core.default_prices_json())
    return prices


def _slo_spec(slo: Mapping[str, Any], data: dict[str, Any], fill: bool = False) -> tuple[dict[str, Any], dict[str, Any]]:
    """Parse the SLO with the core; put per-request thresholds into a scenario that has none
    when ``goodput`` needs them (or, with ``fill``, whenever the SLO bounds a TTFT, TPOT or
    E2E latency: a plan counts the requests served). Returns (the SLO as JSON-ready dict,
    the parsed spec)."""
    if not isinstance(slo, Mapping):
        raise config_error("slo", f"must be a table of metric bounds (got {type(slo).__name__})")
    slo_dict = dict(slo)
    spec: dict[str, Any] = json.loads(_core.slo_spec_json(json.dumps(slo_dict, allow_nan=False)))
    if spec["needs_per_request"] and not data.get("slo"):
        thresholds = {k: v for k, v in spec["per_request"].items() if v is not None}
        if not thresholds:
            raise config_error("slo.goodput", "counts requests meeting per-request thresholds: bound a TTFT, TPOT or "
                                              "E2E latency in the SLO, or give the scenario a [slo] table")
        data["slo"] = thresholds
    elif fill and not data.get("slo"):
        thresholds = {k: v for k, v in spec["per_request"].items() if v is not None}
        if thresholds:
            data["slo"] = thresholds
    return slo_dict, spec


class _Load:
    """How a scenario's offered load is set: its generated arrival rate, or the
    ``rate_scale`` of its trace (the trace's own rate, requests over the span of their
    arrivals, times the scale is the offered rate)."""

    def __init__(self, data: Mapping[str, Any], shipment: Optional[Shipment] = None) -> None:
        wl = data.get("workload")
        wl = wl if isinstance(wl, Mapping) else {}
        arrival, trace = wl.get("arrival"), wl.get("trace")
        self.scale: Optional[float] = None
        """The trace's ``rate_scale`` as given (None: a generated workload)."""
        self.rate: Optional[float] = None
        """The offered rate as given, req/s (None: not known)."""
        if isinstance(arrival, Mapping) and isinstance(arrival.get("rate"), (int, float)):
            self.rate = float(arrival["rate"])
        elif isinstance(trace, Mapping) and isinstance(trace.get("text"), str):
            from .workload import trace_info

            options = {k: v for k, v in trace.items() if k not in ("text", "path", "format")}
            info = trace_info(trace["text"], str(trace.get("format") or "auto"), **options)
            if info["span_s"] and info["requests"] > 1:
                self.scale = float(trace.get("rate_scale") or 1.0)
                self.rate = info["requests"] / float(info["span_s"])
        elif isinstance(trace, Mapping) and shipment is not None:
            loaded = shipment.trace_of(data)  # a trace file, read once for the whole search
            if loaded is not None and loaded.span_s and len(loaded) > 1:
                self.scale = float(trace.get("rate_scale") or 1.0)
                self.rate = len(loaded) / float(loaded.span_s)

    def require(self, what: str) -> float:
        if self.rate is None:
            raise config_error(RATE_KEY, f"{what} varies the arrival rate: the scenario needs a generated workload "
                                         "with workload.arrival.rate, or a trace (workload.trace) whose arrivals "
                                         "span some time (its rate_scale is varied)")
        return self.rate

    def params(self, rate: float) -> dict[str, float]:
        """The override that sets the offered load to ``rate`` req/s."""
        if self.scale is None or self.rate is None:
            return {RATE_KEY: rate}
        return {SCALE_KEY: self.scale_at(rate)}

    def scale_at(self, rate: float) -> float:
        """The trace's ``rate_scale`` that offers ``rate`` req/s."""
        assert self.scale is not None and self.rate is not None
        return self.scale * rate / self.rate


def _judge(slo: dict[str, Any], summary_json: str) -> tuple[bool, list[dict[str, Any]]]:
    verdict = json.loads(_core.slo_eval_json(f'{{"slo": {json.dumps(slo)}, "summary": {summary_json}}}'))
    return bool(verdict["meets"]), list(verdict["misses"])


def _miss_text(misses: Sequence[Mapping[str, Any]]) -> str:
    parts = []
    for m in misses:
        op = "≤" if m["bound"] == "at_most" else "≥"
        value = "n/a" if m["value"] is None else f"{m['value']:.4g}"
        parts.append(f"{m['metric']} {value} (want {op} {m['limit']:g})")
    return "; ".join(parts)


class Capacity:
    """The answer of :func:`capacity`."""

    def __init__(self, step: Mapping[str, Any], points: pd.DataFrame, *, tolerance: float, seeds: list[int],
                 slo: dict[str, Any]) -> None:
        self.status: str = step["status"]
        """``found`` (bracketed within the tolerance), ``none`` (no rate down to ``min_rate``
        meets the SLO) or ``above_max`` (every rate up to ``max_rate`` did)."""
        self.rate: Optional[float] = step.get("rate")
        """The highest rate found to meet the SLO on every seed, req/s (None: none does)."""
        self.lo: Optional[float] = step.get("lo")
        self.hi: Optional[float] = step.get("hi")
        """The lowest rate found to miss it (``found`` only): the capacity lies in [lo, hi)."""
        self.message: str = step.get("message") or (
            f"{self.rate:.4g} req/s meets the SLO on all {len(seeds)} seed(s); {self.hi:.4g} req/s does not "
            f"(tolerance {tolerance:.0%})" if self.status == "found" else "")
        self.rate_scale: Optional[float] = None
        """On a replayed trace: the ``workload.trace.rate_scale`` at :attr:`rate` (the
        search varies it; rates are the trace's requests over its scaled span). None on a
        generated workload."""
        self.tolerance = tolerance
        self.seeds = seeds
        self.slo = slo
        self.points = points
        """Every run: ``rate``, ``seed``, ``meets`` (this seed), ``misses`` (text), the flat
        metrics; in the order run."""

    @property
    def rates(self) -> pd.DataFrame:
        """One row per rate evaluated, ascending: ``rate``, ``meets`` (all seeds), and the
        mean over seeds of the metrics the SLO bounds."""
        import pandas as pd

        cols = [c for c in dict.fromkeys(m for m in _bounded(self.slo)) if c in self.points.columns]
        g = self.points.groupby("rate", sort=True)
        out = pd.DataFrame({"rate": list(g.groups), "meets": g["meets"].all().to_numpy()})
        for c in cols:
            out[c] = g[c].mean().to_numpy()
        return out

    def __repr__(self) -> str:
        rate = "None" if self.rate is None else f"{self.rate:.4g}"
        return f"Capacity(rate={rate} req/s, status={self.status!r}, runs={len(self.points)})"


def _bounded(slo: Mapping[str, Any]) -> list[str]:
    return ["slo_attainment" if k == "goodput" else k for k in slo]


def capacity(
    base: ScenarioLike,
    slo: Mapping[str, Any],
    *,
    seeds: Seeds = DEFAULT_SEEDS,
    tolerance: float = 0.02,
    start_rate: Optional[float] = None,
    min_rate: Optional[float] = None,
    max_rate: Optional[float] = None,
    backend: str = "local",
    workers: Optional[int] = None,
    address: Optional[str] = None,
    progress: Optional[ProgressFn] = None,
) -> Capacity:
    """The highest arrival rate (``workload.arrival.rate``, req/s) at which ``base`` meets
    ``slo`` on every seed. On a replayed trace (``workload.trace``) the search varies the
    trace's ``rate_scale`` instead, in req/s of the scaled trace (its requests over the span
    of their arrivals); ``.rate_scale`` is the scale found.

    A bracketing search: from ``start_rate`` (default: the scenario's rate) it doubles or
    halves until a rate that meets the SLO lies below one that does not, then narrows that
    bracket — several rates per round when there are more workers than seeds — until its
    width is at most ``tolerance`` × the lower end (default 2%). ``seeds`` (default 3: the
    scenario's seed and the two after it) guard against one lucky draw of arrivals: a rate
    counts only if all of them meet the SLO. Returns a :class:`Capacity`: ``.rate`` (None
    with ``status == "none"`` when even ``min_rate``, default start/1024, misses the SLO —
    an answer, not an error), ``.points`` (every run) and ``.rates``. ``progress`` gets a
    line per round.
    """
    data = base_dict(base)
    slo_dict, _ = _slo_spec(slo, data)
    shipment = ship(data)
    load = _Load(data, shipment)
    own_rate = load.require("capacity")
    seeds_ = seed_list(seeds, int(data.get("seed", 0)))
    runner = Runner(backend, workers, address)
    parallel = max(1, runner.parallel // len(seeds_))
    request: dict[str, Any] = {"start_rate": float(start_rate if start_rate is not None else own_rate),
                               "tolerance": tolerance, "parallel": parallel, "points": []}
    if min_rate is not None:
        request["min_rate"] = min_rate
    if max_rate is not None:
        request["max_rate"] = max_rate
    rows: list[dict[str, Any]] = []
    while True:
        step = json.loads(_core.capacity_next_json(json.dumps(request, allow_nan=False)))
        if step["status"] != "run":
            break
        rates = [float(r) for r in step["rates"]]
        jobs = [(r, s) for r in rates for s in seeds_]
        outcomes = runner.run(shipment, [(load.params(r), s) for r, s in jobs])
        meets_by_rate: dict[float, bool] = {r: True for r in rates}
        for (r, s), outcome in zip(jobs, outcomes):
            metrics, error, summary = outcome_metrics(outcome)
            if error is None:
                ok, misses = _judge(slo_dict, summary)
                why = _miss_text(misses)
            else:
                ok, why = False, error
            meets_by_rate[r] = meets_by_rate[r] and ok
            rows.append({"rate": r, "seed": s, "meets": ok, "misses": why, **metrics})
        request["points"] += [{"rate": r, "meets": meets_by_rate[r]} for r in rates]
        if progress:
            progress(", ".join(f"{r:.4g} req/s {'meets' if meets_by_rate[r] else 'misses'}" for r in rates))
    points = rows_frame(rows, ["rate"]).drop(columns=["error"])
    cols = ["rate", "seed", "meets", "misses"]
    points = points[cols + [c for c in points.columns if c not in cols]]
    answer = Capacity(step, points, tolerance=tolerance, seeds=seeds_, slo=slo_dict)
    if load.scale is not None and answer.rate is not None:
        answer.rate_scale = load.scale_at(answer.rate)
    return answer


# --------------------------------------------------------------------------- plan


class Plan:
    """The answer of :func:`plan`."""

    def __init__(self, configs: pd.DataFrame, cheapest: Optional[int], params: list[str], latency: str,
                 load: Optional[float] = None) -> None:
        self.configs = configs
        """Every configuration: its choices, ``gpus``, ``feasible`` (meets the SLO and
        sustains the load), ``sustains`` (at least 98% of the offered requests served within
        the per-request SLO on every seed, :data:`SUSTAIN_TOLERANCE`), ``why`` (the missed
        objectives, the load not sustained or the error when not), ``usd_per_hour``, ``usd_per_million_tokens``
        (prompt + output), ``usd_per_million_output_tokens``, the latency, throughput and
        goodput (means over seeds) and ``pareto``."""
        self.params = params
        self.latency = latency
        """The latency column the Pareto front trades against cost."""
        self._cheapest = cheapest
        self.load = load
        """The offered rate, req/s (``load``, or the scenario's ``workload.arrival.rate``;
        None when the workload has no such rate, e.g. a trace)."""
        self.rate_scale: Optional[float] = None
        """On a replayed trace given a ``load``: the ``workload.trace.rate_scale`` that offers
        it (None otherwise)."""

    @property
    def feasible(self) -> pd.DataFrame:
        """The configurations meeting the SLO, cheapest first."""
        f = self.configs[self.configs["feasible"]]
        return f.sort_values(["usd_per_hour", self.latency], kind="stable")

    @property
    def cheapest(self) -> Optional[dict[str, Any]]:
        """The cheapest feasible configuration as a dict (ties: the lower latency), or None
        when no configuration meets the SLO."""
        if self._cheapest is None:
            return None
        rows: list[dict[str, Any]] = json.loads(self.configs.iloc[[self._cheapest]].to_json(orient="records"))
        return rows[0]

    @property
    def pareto(self) -> pd.DataFrame:
        """The Pareto front of cost ($/hour) against the latency, cheapest first: every
        feasible configuration that no other beats on both."""
        p = self.configs[self.configs["pareto"]]
        return p.sort_values("usd_per_hour", kind="stable")

    @property
    def why(self) -> Optional[str]:
        """Why the cheapest feasible configuration wins: its cost per million tokens and
        tokens/s per GPU against the next cheapest feasible one (None when none is feasible)."""
        f = self.feasible
        if f.empty:
            return None
        w = f.iloc[0]
        name = ", ".join(f"{k}={w[k]!r}" for k in self.params)

        def num(x: Any, fmt: str) -> str:
            return "n/a" if x is None or x != x else format(float(x), fmt)

        text = (f"{name} meets the SLO at ${w['usd_per_hour']:.2f}/h: "
                f"${num(w['usd_per_million_tokens'], '.3f')}/Mtok, {num(w['tokens_per_s_per_gpu'], ',.0f')} tok/s/GPU "
                f"on {num(w['gpus'], 'g')} GPUs")
        if len(f) > 1:
            r = f.iloc[1]
            other = ", ".join(f"{k}={r[k]!r}" for k in self.params)
            text += (f"; the runner-up ({other}) costs ${r['usd_per_hour']:.2f}/h, "
                     f"${num(r['usd_per_million_tokens'], '.3f')}/Mtok, {num(r['tokens_per_s_per_gpu'], ',.0f')} tok/s/GPU")
        return text

    def __repr__(self) -> str:
        c = self.cheapest
        best = "none feasible" if c is None else ", ".join(f"{k}={c[k]!r}" for k in self.params) + f" at ${c['usd_per_hour']:.2f}/h"
        return f"Plan({len(self.configs)} configurations, {int(self.configs['feasible'].sum())} feasible; cheapest: {best})"


def _fleet(resolved: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The GPUs a resolved scenario holds, by GPU type: each pool's (``dp × tp × pp ×
    replicas`` on its own GPU), or the one deployment's."""
    dep = resolved.get("deployment") or {}
    base = _gpu_name(resolved.get("gpu"))

    def gpus(d: Mapping[str, Any]) -> float:
        return float(d.get("dp", 1) * d.get("tp", 1) * d.get("pp", 1) * d.get("replicas", 1))

    pools = dep.get("pools") or []
    if not pools:
        return [{"gpu": base, "gpus": gpus(dep)}]
    parts: dict[str, float] = {}
    for p in pools:
        g = _gpu_name(p.get("gpu")) if p.get("gpu") is not None else base
        parts[g] = parts.get(g, 0.0) + gpus(p)
    return [{"gpu": g, "gpus": n} for g, n in parts.items()]


def _gpu_name(gpu: Any) -> str:
    if isinstance(gpu, str):
        return gpu
    if isinstance(gpu, Mapping):
        return str(gpu.get("name") or gpu.get("preset") or "custom")
    return str(gpu)


def plan(
    base: ScenarioLike,
    choices: Mapping[str, Sequence[Any]],
    slo: Mapping[str, Any],
    *,
    load: Optional[float] = None,
    prices: Optional[Mapping[str, float]] = None,
    latency: str = "e2e_p99_ms",
    seeds: Seeds = DEFAULT_SEEDS,
    backend: str = "local",
    workers: Optional[int] = None,
    address: Optional[str] = None,
    progress: Optional[Callable[[int, int], None]] = None,
) -> Plan:
    """Every configuration of ``choices`` (dotted field → values, e.g. ``{"gpu": ["h100",
    "h200"], "deployment.tp": [2, 4, 8], "deployment.replicas": [1, 2, 4],
    "scheduler.policy": ["vllm", "sarathi"]}``) run at ``load`` req/s (default: the
    scenario's rate; on a replayed trace, its ``rate_scale`` is set to offer it, kept in
    ``.rate_scale``) on each seed, judged against ``slo`` (see :func:`capacity`) and priced:
    ``usd_per_hour`` = GPUs × the GPU's price per GPU-hour (``prices`` over
    :func:`default_prices`; a GPU without a default needs one; a deployment of pools is
    priced pool by pool, each on its own GPU), the cost per million tokens at the throughput
    reached and the tokens/s per GPU. A configuration is feasible when it meets the SLO on
    every seed and sustains the load: at least 98% of the offered requests finish within the
    per-request SLO (the scenario's ``[slo]``, else the SLO's own latency bounds; see
    :data:`SUSTAIN_TOLERANCE`); ``.configs`` shows each one's ``throughput_rps``,
    ``goodput_rps`` and ``sustains``. Any dotted field is a choice: ``deployment.dp``,
    ``deployment.ep`` (expert-parallel layouts), or whole ``deployment.pools`` lists
    (prefill:decode ratios, GPU mixes). Returns a :class:`Plan` with ``.configs`` (all),
    ``.feasible``, ``.cheapest``, ``.why`` (why the cheapest wins) and ``.pareto``
    (cost vs ``latency``, default ``e2e_p99_ms``). Configurations that cannot run (the model does not fit, ``tp`` does not
    divide the heads) are infeasible with the reason; a bad choice value raises.
    """
    data = base_dict(base)
    slo_dict, _ = _slo_spec(slo, data, fill=True)
    rate_scale: Optional[float] = None
    try:
        _core.slo_spec_json(json.dumps({latency: {"max": 1.0}}))
    except ConfigError as e:
        raise config_error("latency", str(e).split(": ", 1)[-1]) from None
    if load is not None:
        if isinstance(load, bool) or not isinstance(load, (int, float)) or not math.isfinite(load) or load <= 0:
            raise config_error("load", f"must be a positive rate in req/s (got {load!r})")
        first = ship(data)
        at = _Load(data, first)
        rate_scale = at.scale_at(float(load)) if at.scale is not None else None
        data = json.loads(payload(data, at.params(float(load)), int(data.get("seed", 0))))
        read = first.traces
    else:
        read = {}
    points = expand(choices, kind="choices")
    shipment = ship(data, [p.params for p in points], kind="choices", have=read)
    validate_axes(data, points, kind="choices", shipment=shipment)
    seeds_ = seed_list(seeds, int(data.get("seed", 0)))
    runner = Runner(backend, workers, address)
    jobs = [(p, s) for p in points for s in seeds_]
    outcomes = runner.run(shipment, [(p.params, s) for p, s in jobs], progress)
    params = list(points[0].params) if points else []
    configs_in: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    for k, p in enumerate(points):
        resolved = json.loads(payload(data, p.params, seeds_[0]))
        fleet = _fleet(resolved)
        gpus = sum(part["gpus"] for part in fleet)
        meets, why, per_seed, served = True, [], [], []
        for j in range(len(seeds_)):
            metrics, error, summary = outcome_metrics(outcomes[k * len(seeds_) + j])
            if error is not None:
                meets = False
                why.append(error)
                continue
            ok, misses = _judge(slo_dict, summary)
            meets = meets and ok
            if misses:
                why.append(f"seed {seeds_[j]}: {_miss_text(misses)}")
            per_seed.append(metrics)
            share = _served(metrics)
            if share is not None:
                served.append(share)
        sustains = bool(per_seed) and all(x >= 1.0 - SUSTAIN_TOLERANCE for x in served)
        if per_seed and not sustains:
            lo, hi = min(served), max(served)
            span = f"{lo:.1%}" if round(lo, 3) == round(hi, 3) else f"{lo:.1%}–{hi:.1%}"
            why.insert(0, f"does not sustain the load: {span} of the requests served within the per-request SLO "
                          f"(want ≥ {1.0 - SUSTAIN_TOLERANCE:.0%})")
        mean = _means(per_seed, [latency, "total_tokens_per_s", "output_tokens_per_s", "throughput_rps",
                                 "goodput_rps", "slo_attainment", "gpu_hours", "duration_s"])
        gpu_hours, duration_s = mean.get("gpu_hours"), mean.get("duration_s")
        if gpu_hours is not None and duration_s:
            gpus = gpu_hours * 3600.0 / duration_s  # autoscaled: GPUs held on average
            fleet = [{"gpu": fleet[0]["gpu"], "gpus": gpus}]
        configs_in.append({"gpu": fleet[0]["gpu"], "gpus": gpus, "fleet": fleet if len(fleet) > 1 else [],
                           "meets": meets and sustains,
                           "latency_ms": mean.get(latency), "tokens_per_s": mean.get("total_tokens_per_s"),
                           "output_tokens_per_s": mean.get("output_tokens_per_s")})
        rows.append({**p.params, "gpus": gpus, "sustains": sustains, "why": "; ".join(why) or None,
                     latency: mean.get(latency),
                     "throughput_rps": mean.get("throughput_rps"), "goodput_rps": mean.get("goodput_rps"),
                     "slo_attainment": mean.get("slo_attainment"),
                     "total_tokens_per_s": mean.get("total_tokens_per_s")})
    request = {"configs": configs_in, "prices": dict(prices or {})}
    priced = json.loads(_core.plan_eval_json(json.dumps(request, allow_nan=False)))
    import pandas as pd

    for row, cost in zip(rows, priced["rows"]):
        row.update(cost)
    order = params + ["gpus", "feasible", "sustains", "usd_per_hour", "usd_per_million_tokens", "usd_per_million_output_tokens",
                      "tokens_per_s_per_gpu", latency, "throughput_rps", "goodput_rps", "slo_attainment", "total_tokens_per_s", "pareto", "why"]
    df = pd.DataFrame(rows, columns=order)
    df.attrs["o1sim_params"] = params
    arrival = (data.get("workload") or {}).get("arrival") if isinstance(data.get("workload"), Mapping) else None
    rate = arrival.get("rate") if isinstance(arrival, Mapping) else None
    offered = float(load) if load is not None else float(rate) if isinstance(rate, (int, float)) else None
    answer = Plan(df, priced["cheapest"], params, latency, offered)
    answer.rate_scale = rate_scale
    return answer


def _served(metrics: Mapping[str, Any]) -> Optional[float]:
    """The share of the offered requests a run served: finished within the per-request SLO
    (``slo_attainment``), or finished at all when there are no per-request thresholds."""
    att = metrics.get("slo_attainment")
    if att is not None:
        return float(att)
    n, done = metrics.get("num_requests"), metrics.get("finished")
    return float(done) / float(n) if n and done is not None else None


def _means(per_seed: Sequence[Mapping[str, Any]], names: Sequence[str]) -> dict[str, Optional[float]]:
    out: dict[str, Optional[float]] = {}
    for n in names:
        values = [float(m[n]) for m in per_seed if m.get(n) is not None]
        out[n] = sum(values) / len(values) if values else None
    return out
