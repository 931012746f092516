"""Exports of a :class:`~o1sim.Result`: a Chrome/Perfetto trace, Prometheus text and the
JSON of ``vllm bench serve --save-result``.

All three need to know when each request emitted each token, which the per-request table does
not hold; the scheduler steps do (:attr:`o1sim.Result.step_records`: a run made with
``record_steps=True``; any other result raises ``StepsNotRecordedError``).

This module is a leaf: it reads a result through the :class:`RunTables` protocol (what
:class:`o1sim.Result` has) and imports nothing of the package but the core, so ``api`` can
offer ``Result.to_prometheus()`` and ``Result.to_chrome_trace()`` without an import circle.

Token emission follows the core's rule (vLLM v1's model): a request emits a token in the
step after which its computed tokens reach its prompt plus the tokens it has already
emitted; a preemption resets its computed tokens to zero (recompute), so the step that
completes the re-prefill emits the next token; an admission that hits the prefix cache
starts with the hit tokens computed (each step's ``cached`` entries). The tests check that this reproduces every
request's ``first_token_ms``, ``finish_ms`` and ``output_tokens`` exactly.
"""

from __future__ import annotations

import bisect
import json
import math
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Protocol, Union

from . import _core

if TYPE_CHECKING:
    import pandas as pd
    from prometheus_client.core import Metric

__all__ = [
    "RunTables",
    "TokenTimeline",
    "chrome_trace",
    "prometheus_text",
    "token_timeline",
    "vllm_bench",
    "vllm_bench_json",
    "write_chrome_trace",
    "E2E_BUCKETS_S",
    "VLLM_BENCH_DETAILED",
    "VLLM_BENCH_METRICS",
    "VLLM_BENCH_PERCENTILES",
    "ITL_BUCKETS_S",
    "TTFT_BUCKETS_S",
]

# vLLM's histogram buckets (v1 `PrometheusStatLogger`), in seconds.
TTFT_BUCKETS_S: tuple[float, ...] = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
    1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)
ITL_BUCKETS_S: tuple[float, ...] = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75,
    1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
)
E2E_BUCKETS_S: tuple[float, ...] = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0,
    40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0,
)

#: Trace process id of the router (requests rejected before reaching a replica).
ROUTER_PID = 0


class ScenarioText(Protocol):
    """What the exports read of a scenario (:class:`o1sim.Scenario` has it)."""

    source: str

    def payload(self) -> tuple[str, str]: ...


class RunTables(Protocol):
    """What the exports read of a run: :class:`o1sim.Result` has all of it."""

    @property
    def requests(self) -> pd.DataFrame: ...

    @property
    def timeseries(self) -> pd.DataFrame: ...

    @property
    def timeseries_interval_ms(self) -> float: ...

    @property
    def deployment(self) -> dict[str, Any]: ...

    @property
    def summary(self) -> dict[str, Any]: ...

    @property
    def step_records(self) -> list[dict[str, Any]]: ...

    @property
    def scenario(self) -> Optional[ScenarioText]: ...


@dataclass
class TokenTimeline:
    """When each request did what, reconstructed from the steps (times in ms)."""

    first_scheduled_ms: dict[int, float] = field(default_factory=dict)
    """Start of the first step that scheduled the request (it left the waiting queue)."""
    token_ms: dict[int, list[float]] = field(default_factory=dict)
    """End of every step in which the request emitted a token, in order."""
    decode_entries: list[int] = field(default_factory=list)
    """Per step: how many scheduled entries were decodes (prefill complete before the step)."""


def token_timeline(steps: Sequence[Mapping[str, Any]], prompt_tokens: Mapping[int, int]) -> TokenTimeline:
    """Replay the steps' token counts to find each request's first schedule and token times."""
    tl = TokenTimeline()
    computed: dict[int, int] = {}
    emitted: dict[int, int] = {}
    for step in steps:
        decodes = 0
        admitted = set()
        for rid, hit in step.get("cached", ()):
            computed[rid] = computed.get(rid, 0) + hit
            admitted.add(rid)
        for rid, tokens in step["scheduled"]:
            tl.first_scheduled_ms.setdefault(rid, step["start_ms"])
            before = computed.get(rid, 0)
            done = emitted.get(rid, 0)
            target = prompt_tokens[rid] + done
            if before >= target - 1 and done > 0 and rid not in admitted:
                decodes += 1
            computed[rid] = before + tokens
            if before + tokens >= target:
                emitted[rid] = done + 1
                tl.token_ms.setdefault(rid, []).append(step["end_ms"])
        for rid in step["preempted"]:
            computed[rid] = 0
        tl.decode_entries.append(decodes)
    return tl


def _prompts(result: RunTables) -> dict[int, int]:
    req = result.requests
    return dict(zip(req["request_id"].tolist(), req["prompt_tokens"].tolist()))


# --------------------------------------------------------------------------- Chrome trace


def _us(ms: float) -> float:
    return round(ms * 1000.0, 3)


#: Trace thread ids of a replica's kernel tracks, by stream (``kernels=`` in :func:`chrome_trace`).
KERNEL_TIDS: dict[str, tuple[int, str]] = {
    "compute": (2, "kernels: compute stream"),
    "communication": (3, "kernels: communication stream"),
    "cpu": (4, "host (launch, scheduler)"),
}


def _kernel_events(result: RunTables, steps: Sequence[Mapping[str, Any]], which: Union[bool, Iterable[int]]) -> list[dict[str, Any]]:
    """Complete slices of the kernels of the chosen steps, on per-stream tracks of their replica."""
    if which is False:
        return []
    indices = range(len(steps)) if which is True else sorted({int(i) % len(steps) for i in which}) if steps else []
    if result.scenario is None:
        raise ValueError("the result has no scenario to price its steps with")
    text, fmt = result.scenario.payload()
    events: list[dict[str, Any]] = []
    for i in indices:
        step = steps[i]
        a = json.loads(_core.step_anatomy_json(text, fmt, json.dumps(step)))
        k = a["kernels"]
        pid = int(step["replica"]) + 1
        t0 = float(step["start_ms"]) * 1000.0
        for j, name in enumerate(k["name"]):
            tid = KERNEL_TIDS[k["stream"][j]][0]
            start, end = k["start_us"][j], k["end_us"][j]
            label = name if k["parts"][j] == 1 else f"{name} [{k['part'][j] + 1}/{k['parts'][j]}]"
            events.append({
                "ph": "X", "name": label, "cat": "kernel", "pid": pid, "tid": tid,
                "ts": round(t0 + start, 3), "dur": round(end - start, 3),
                "args": {"step": i, "layer": k["layer"][j], "source": k["source"][j],
                         "ctas": k["ctas"][j], "sm_occupancy": round(k["sm_occupancy"][j], 4)},
            })
    return events


def chrome_trace(result: RunTables, *, steps: Optional[Sequence[Mapping[str, Any]]] = None,
                 kernels: Union[bool, Iterable[int]] = False) -> dict[str, Any]:
    """The run as a Trace Event Format object (``{"traceEvents": [...]}``), for Perfetto or
    ``chrome://tracing``.

    One process per replica: a "steps" thread with a complete slice per scheduler step
    (args: tokens, batch size, prefill/decode entries, preemptions, finishes, free KV
    blocks), nested async slices per request (``request N`` ⊃ queued → prefill → decode),
    and counters for KV use (from the steps) and the waiting/running queues (from the time
    series). Requests rejected before reaching a replica sit in the "router" process.
    ``kernels`` (step indices, or ``True`` for all) adds each chosen step's kernels
    (:meth:`~o1sim.Result.step_anatomy`) as slices on the replica's "kernels: compute
    stream", "kernels: communication stream" and "host" tracks (args: step, layer, source,
    CTAs, SM occupancy). Timestamps are µs since the start of the run; events are sorted by
    time.
    """
    steps = result.step_records if steps is None else steps
    deployment = result.deployment
    req = result.requests
    tl = token_timeline(steps, _prompts(result))
    tp = int(deployment.get("tp", 1)) * int(deployment.get("pp", 1))
    replicas = int(deployment.get("replicas", 1))
    total_blocks = float(deployment.get("num_gpu_blocks") or 0)

    meta: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": ROUTER_PID, "tid": 0, "ts": 0, "args": {"name": "router"}},
        {"ph": "M", "name": "process_sort_index", "pid": ROUTER_PID, "tid": 0, "ts": 0, "args": {"sort_index": 0}},
    ]
    for r in range(replicas):
        gpus = f"GPUs {r * tp}–{r * tp + tp - 1}" if tp > 1 else f"GPU {r}"
        meta += [
            {"ph": "M", "name": "process_name", "pid": r + 1, "tid": 0, "ts": 0, "args": {"name": f"replica {r} ({gpus})"}},
            {"ph": "M", "name": "process_sort_index", "pid": r + 1, "tid": 0, "ts": 0, "args": {"sort_index": r + 1}},
            {"ph": "M", "name": "thread_name", "pid": r + 1, "tid": 1, "ts": 0, "args": {"name": "scheduler steps"}},
        ]

    events: list[dict[str, Any]] = []
    for step, decodes in zip(steps, tl.decode_entries):
        pid = int(step["replica"]) + 1
        sched = step["scheduled"]
        tokens = sum(t for _, t in sched)
        prefills = len(sched) - decodes
        name = "decode" if prefills == 0 else ("prefill" if decodes == 0 else "mixed")
        start, end = _us(step["start_ms"]), _us(step["end_ms"])
        events.append({
            "ph": "X", "name": name, "cat": "step", "pid": pid, "tid": 1, "ts": start, "dur": round(end - start, 3),
            "args": {
                "tokens": tokens, "batch_size": len(sched), "prefill_entries": prefills, "decode_entries": decodes,
                "preempted": list(step["preempted"]), "finished": list(step["finished"]),
                "free_blocks_after": step["free_blocks_after"],
            },
        })
        if total_blocks > 0:
            used = 1.0 - float(step["free_blocks_after"]) / total_blocks
            events.append({"ph": "C", "name": "KV cache used (%)", "pid": pid, "tid": 0, "ts": end,
                           "args": {"used": round(100.0 * used, 4)}})

    kernel_events = _kernel_events(result, steps, kernels)
    if kernel_events:
        for r in sorted({e["pid"] for e in kernel_events}):
            for tid, label in KERNEL_TIDS.values():
                meta.append({"ph": "M", "name": "thread_name", "pid": r, "tid": tid, "ts": 0, "args": {"name": label}})
        events += kernel_events

    ts = result.timeseries
    for r, rows in ts.groupby("replica", sort=True):
        for t, waiting, running in zip(rows["time_ms"], rows["waiting"], rows["running"]):
            events.append({"ph": "C", "name": "requests", "pid": int(r) + 1, "tid": 0, "ts": _us(float(t)),
                           "args": {"waiting": round(float(waiting), 3), "running": round(float(running), 3)}})

    for row in req.itertuples(index=False):
        rid = int(row.request_id)
        rep = int(row.replica)
        pid = rep + 1 if rep >= 0 else ROUTER_PID
        arrival = float(row.arrival_ms)
        finish = float(row.finish_ms)

        def slice_(name: str, t0: float, t1: float, args: Optional[dict[str, Any]] = None,
                   rid: int = rid, pid: int = pid) -> None:
            common = {"cat": "request", "id": rid, "pid": pid, "tid": 0, "name": name}
            events.append({**common, "ph": "b", "ts": _us(t0), "args": args or {}})
            events.append({**common, "ph": "e", "ts": _us(t1)})

        outer = {"cat": "request", "id": rid, "pid": pid, "tid": 0, "name": f"request {rid}"}
        events.append({**outer, "ph": "b", "ts": _us(arrival), "args": {
            "prompt_tokens": int(row.prompt_tokens), "output_tokens": int(row.output_tokens),
            "preemptions": int(row.preemptions), "status": str(row.status), "reason": str(row.reason)}})
        if str(row.status) == "finished":
            first_sched = tl.first_scheduled_ms.get(rid, arrival)
            first_tok = float(row.first_token_ms)
            slice_("queued", arrival, first_sched)
            slice_("prefill", first_sched, first_tok)
            slice_("decode", first_tok, finish)
        else:
            slice_(f"rejected: {row.reason}", arrival, finish)
        events.append({**outer, "ph": "e", "ts": _us(finish)})

    # A stable sort by time keeps each track's own order (a request's nested begin/end pairs
    # are generated in order), so timestamps are monotone on every track.
    events.sort(key=lambda e: e["ts"])
    return {
        "traceEvents": meta + events,
        "displayTimeUnit": "ms",
        "otherData": {"generator": "o1sim", "scenario": result.scenario.source if result.scenario is not None else None},
    }


def write_chrome_trace(result: RunTables, path: Union[str, "os.PathLike[str]", None] = None, *,
                       kernels: Union[bool, Iterable[int]] = False) -> str:
    """The trace as compact JSON text, also written to ``path`` when given."""
    text = json.dumps(chrome_trace(result, kernels=kernels), separators=(",", ":"))
    if path is not None:
        Path(path).write_text(text, encoding="utf-8")
    return text


# --------------------------------------------------------------------------- Prometheus


def _histogram_buckets(values_s: Iterable[float], buckets: Sequence[float]) -> tuple[list[tuple[str, float]], float]:
    """Cumulative ``(le, count)`` pairs ending at ``+Inf``, and the sum of the values."""
    vals = sorted(values_s)
    out: list[tuple[str, float]] = [(repr(float(le)), float(bisect.bisect_right(vals, le))) for le in buckets]
    out.append(("+Inf", float(len(vals))))
    return out, math.fsum(vals)


#: Histogram buckets of each histogram family (vLLM's), by family name.
_BUCKETS: dict[str, tuple[float, ...]] = {
    "vllm:time_to_first_token_seconds": TTFT_BUCKETS_S,
    "vllm:inter_token_latency_seconds": ITL_BUCKETS_S,
    "vllm:request_time_per_output_token_seconds": ITL_BUCKETS_S,
    "vllm:e2e_request_latency_seconds": E2E_BUCKETS_S,
    "vllm:request_queue_time_seconds": E2E_BUCKETS_S,
}

#: vLLM families that are no metric of the run summary (so no row of the core's table):
#: (name, type, help). Their values per engine are computed below like the others'.
_NOT_SUMMARY_FAMILIES: tuple[tuple[str, str, str], ...] = (
    ("vllm:inter_token_latency_seconds", "histogram", "Histogram of inter-token latency in seconds."),
    ("vllm:prompt_tokens", "counter", "Number of prefill tokens processed."),
    ("vllm:num_requests_running", "gauge", "Number of requests in model execution batches."),
    ("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed."),
)

#: Labels of every per-engine series (vLLM labels each engine core).
_ENGINE_LABELS = ["model_name", "engine"]


@dataclass
class _PromRun:
    """What the exporter reads of one run, per engine (replica): the server-side latencies
    of finished requests (seconds), per-engine sums of the request columns, and the time
    series' time-weighted means."""

    model: str
    replicas: int
    summary: Mapping[str, Any]
    #: histogram family → engine → observed values (s)
    observed: dict[str, dict[int, list[float]]]
    #: counter family → engine → value
    counts: dict[str, dict[int, float]]
    #: gauge family → engine → time-weighted mean over the run
    means: dict[str, dict[int, float]]
    #: (engine, reason) → rejected requests (engine -1: the router)
    rejected: dict[tuple[int, str], float]


def _latencies(result: RunTables, steps: Sequence[Mapping[str, Any]], replicas: int) -> dict[str, dict[int, list[float]]]:
    """Per engine, the server's own view (from the engine's receipt of a request, as vLLM's
    metrics are) of each finished request's latencies, and every gap between two tokens."""
    names = ("vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds",
             "vllm:request_time_per_output_token_seconds", "vllm:e2e_request_latency_seconds",
             "vllm:request_queue_time_seconds")
    out: dict[str, dict[int, list[float]]] = {name: {r: [] for r in range(replicas)} for name in names}
    ttft, itl, tpot, e2e, queue = (out[name] for name in names)
    req = result.requests
    tl = token_timeline(steps, _prompts(result))
    for row in req[req["status"] == "finished"].itertuples(index=False):
        rid, rep = int(row.request_id), int(row.replica)
        ttft[rep].append(float(row.engine_ttft_ms) / 1e3)
        e2e[rep].append(float(row.engine_e2e_ms) / 1e3)
        arrived = float(row.engine_arrival_ms)
        queue[rep].append((tl.first_scheduled_ms.get(rid, arrived) - arrived) / 1e3)
        toks = tl.token_ms.get(rid, [])
        itl[rep].extend((b - a) / 1e3 for a, b in zip(toks, toks[1:]))
        if int(row.output_tokens) > 1:
            tpot[rep].append((float(row.finish_ms) - float(row.first_token_ms)) / 1e3 / (int(row.output_tokens) - 1))
    return out


def _per_engine_sums(result: RunTables) -> dict[str, dict[int, float]]:
    """Counter values per engine: finished requests, their prompt and output tokens,
    preemptions, and the prefix-cache lookups of first admissions (vLLM's counters leave out
    re-admissions after a preemption)."""
    req = result.requests
    by_rep = req[req["status"] == "finished"].groupby("replica", observed=True)
    by_ts = result.timeseries.groupby("replica")
    series = {
        "vllm:request_success": by_rep.size(),
        "vllm:prompt_tokens": by_rep["prompt_tokens"].sum(),
        "vllm:generation_tokens": by_rep["output_tokens"].sum(),
        "vllm:num_preemptions": req.groupby("replica", observed=True)["preemptions"].sum(),
        "vllm:prefix_cache_queries": by_ts["prefix_queries"].sum(),
        "vllm:prefix_cache_hits": by_ts["prefix_hits"].sum(),
    }
    return {name: {int(k): float(v) for k, v in s.items()} for name, s in series.items()}


def _time_means(result: RunTables) -> dict[str, dict[int, float]]:
    """Gauge values per engine: each time series' mean over the run, weighted by time (a
    bucket's mean holds over its busy time; idle time counts as zero)."""
    ts = result.timeseries
    interval = float(result.timeseries_interval_ms)
    req = result.requests
    span_ms = float(req["finish_ms"].max()) if len(req) else 0.0
    cols = {"vllm:num_requests_running": "running", "vllm:num_requests_waiting": "waiting",
            "vllm:kv_cache_usage_perc": "kv_usage"}
    out: dict[str, dict[int, float]] = {name: {} for name in cols}
    if span_ms <= 0:
        return out
    for rep, rows in ts.groupby("replica", sort=True):
        for name, col in cols.items():
            out[name][int(rep)] = float((rows[col] * rows["busy"]).sum() * interval / span_ms)
    return out


def _prom_run(result: RunTables, model_name: Optional[str], steps: Sequence[Mapping[str, Any]]) -> _PromRun:
    req = result.requests
    replicas = int(result.deployment.get("replicas", 1))
    rejected = req[req["status"] == "rejected"]
    by_reason = rejected.groupby(["replica", "reason"], observed=True).size().items()
    return _PromRun(
        model=model_name or str(result.deployment.get("model", {}).get("name", "model")),
        replicas=replicas,
        summary=result.summary,
        observed=_latencies(result, steps, replicas),
        counts=_per_engine_sums(result),
        means=_time_means(result),
        rejected={(int(rep), str(reason)): float(n) for (rep, reason), n in sorted(by_reason) if n},
    )


@dataclass(frozen=True)
class _Family:
    """A family to write: its name, type and help, and the summary key of the metric it
    exports (empty for a family that is no summary metric)."""

    name: str
    kind: str
    help: str
    key: str = ""


def _families() -> list[_Family]:
    """Every family: the core's summary metrics that name one (``presets()["summary_metrics"]``,
    their ``doc`` as help), then vLLM's families that are no summary metric."""
    rows: list[dict[str, Any]] = json.loads(_core.presets_json())["summary_metrics"]
    from_table = [_Family(m["prometheus"]["name"], m["prometheus"]["type"], m["doc"], m["key"])
                  for m in rows if m["prometheus"] is not None]
    return from_table + [_Family(*f) for f in _NOT_SUMMARY_FAMILIES]


def _family(run: _PromRun, f: _Family) -> Metric:
    """One family with a series per engine, from what the exporter computed for it; a
    family it computes nothing for (a summary metric of o1sim's own) is one series of the
    run's summary value, with the model's label only."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

    def lab(r: int) -> list[str]:
        return [run.model, str(r)]

    if f.kind == "histogram":
        hist = HistogramMetricFamily(f.name, f.help, labels=_ENGINE_LABELS)
        for r in range(run.replicas):
            counts, total = _histogram_buckets(run.observed[f.name][r], _BUCKETS[f.name])
            hist.add_metric(lab(r), counts, total)
        return hist
    cls = CounterMetricFamily if f.kind == "counter" else GaugeMetricFamily
    if f.name == "o1sim:requests_rejected":
        fam = cls(f.name, f"{f.help} Engine -1: by the router.", labels=[*_ENGINE_LABELS, "reason"])
        for (rep, reason), n in run.rejected.items():
            fam.add_metric([*lab(rep), reason], n)
        return fam
    per_engine = run.counts.get(f.name, run.means.get(f.name))
    if per_engine is None:
        value = run.summary.get(f.key)
        fam = cls(f.name, f.help, labels=["model_name"])
        fam.add_metric([run.model], float(value) if isinstance(value, (int, float)) else math.nan)
        return fam
    # A simulated request stops at its output length.
    extra = {"finished_reason": "length"} if f.name == "vllm:request_success" else {}
    note = " Per engine: the time-weighted mean over the run." if f.kind == "gauge" else ""
    fam = cls(f.name, f.help + note, labels=[*_ENGINE_LABELS, *extra])
    for r in range(run.replicas):
        fam.add_metric([*lab(r), *extra.values()], per_engine.get(r, 0.0))
    return fam


def prometheus_text(result: RunTables, *, model_name: Optional[str] = None,
                    steps: Optional[Sequence[Mapping[str, Any]]] = None) -> str:
    """The run as Prometheus text exposition with vLLM's (v1) metric names and types.

    The families are those of the core's summary metrics that name one (the table in
    ``crates/sim-core/src/metric_info.rs``, ``o1sim.presets()["summary_metrics"]``: its
    ``prometheus`` name and type, its ``doc`` as help), then vLLM's families that are no
    summary metric. Every per-engine series carries ``model_name`` and ``engine`` (the
    replica index, as vLLM labels each engine core). Histograms use vLLM's buckets, over the
    server's own view (from the engine's receipt of a request):
    ``vllm:time_to_first_token_seconds``, ``vllm:inter_token_latency_seconds`` (every gap
    between two tokens of a request), ``vllm:request_time_per_output_token_seconds`` (per
    request), ``vllm:e2e_request_latency_seconds`` and ``vllm:request_queue_time_seconds``.
    Counters: ``vllm:request_success_total{finished_reason="length"}`` (a simulated request
    stops at its output length), ``vllm:prompt_tokens_total`` and
    ``vllm:generation_tokens_total`` (of finished requests), ``vllm:num_preemptions_total``,
    ``vllm:prefix_cache_queries_total`` and ``vllm:prefix_cache_hits_total`` (tokens looked
    up and found at first admissions, as vLLM counts them), and o1sim's own
    ``o1sim:requests_rejected_total{reason}``. Gauges (``vllm:num_requests_running``,
    ``vllm:num_requests_waiting``, ``vllm:kv_cache_usage_perc``) hold each replica's
    *time-weighted mean over the run* (a scrape after a finished run would read zero; the
    peaks are in ``Result.summary``). A summary metric of o1sim's own that the table
    exports, with no per-engine value here, is one series of the run's summary value.
    """
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.registry import Collector

    run = _prom_run(result, model_name, result.step_records if steps is None else steps)
    families = [_family(run, f) for f in _families()]

    class Families(Collector):
        """The run's metric families, for a fresh ``CollectorRegistry`` (never the
        process-wide default one) that ``prometheus_client``'s exposition writes."""

        def collect(self) -> Iterator[Metric]:
            return iter(families)

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Families())
    return generate_latest(registry).decode("utf-8")


# --------------------------------------------------------------------------- vllm bench serve

#: The latency metrics ``vllm bench serve`` can report statistics of (``--percentile-metrics``),
#: all four by default here (vLLM's own default leaves ``e2el`` out).
VLLM_BENCH_METRICS: tuple[str, ...] = ("ttft", "tpot", "itl", "e2el")
#: ``--metric-percentiles``' default: the 99th.
VLLM_BENCH_PERCENTILES: tuple[float, ...] = (99.0,)
#: The per-request lists ``vllm bench serve`` keeps only with ``--save-detailed``.
VLLM_BENCH_DETAILED: tuple[str, ...] = (
    "input_lens", "output_lens", "start_times", "ttfts", "itls", "generated_texts", "errors",
)


def _finite(x: float) -> float:
    return x if math.isfinite(x) else 0.0


def _stats(values: Sequence[float], percentiles: Sequence[float]) -> tuple[float, float, float, list[tuple[float, float]]]:
    """Mean, median, population std and percentiles (linear interpolation) in ms of values
    in seconds; an empty list reads as ``[0]``, as ``vllm bench serve`` has it."""
    import numpy as np

    arr = np.asarray(values if len(values) else [0.0], dtype=float)
    pct = [(float(p), float(np.percentile(arr, p)) * 1e3) for p in percentiles]
    return float(arr.mean()) * 1e3, float(np.median(arr)) * 1e3, float(arr.std()) * 1e3, pct


def _percentile_word(p: float) -> str:
    return str(int(p)) if int(p) == p else str(p)


def _arrival_settings(result: RunTables) -> tuple[Union[float, str], Union[float, str]]:
    """``request_rate`` and ``burstiness`` as ``vllm bench serve`` records them, read from the
    scenario's generated arrivals: the rate of a single-rate process (``"inf"`` otherwise, as
    for a trace replay), and the gamma shape (1 / cv²; 1 for Poisson, ``"inf"`` for constant
    gaps)."""
    to_dict = getattr(result.scenario, "to_dict", None)
    try:
        data = to_dict() if callable(to_dict) else {}
    except Exception:  # a scenario that cannot be read back: the run's numbers stand alone
        data = {}
    workload = data.get("workload") if isinstance(data, Mapping) else None
    arrival = workload.get("arrival") if isinstance(workload, Mapping) and "trace" not in workload else None
    if not isinstance(arrival, Mapping):
        return "inf", 1.0
    rate = arrival.get("rate")
    request_rate: Union[float, str] = float(rate) if isinstance(rate, (int, float)) and rate > 0 else "inf"
    kind = arrival.get("kind")
    cv = arrival.get("cv")
    burstiness: Union[float, str] = 1.0
    if kind == "gamma" and isinstance(cv, (int, float)) and cv > 0:
        burstiness = 1.0 / (float(cv) * float(cv))
    elif kind == "constant":
        burstiness = "inf"
    return request_rate, burstiness


def _client_tokens(engine_ms: Sequence[float], first_ms: float, last_ms: float) -> list[float]:
    """A request's token times as its client saw them (ms): the engine's, shifted so the
    first and the last land where the result's latency view puts them (the shift moves
    linearly between the two), so the gaps add up to the latency after the first token."""
    n = len(engine_ms)
    if n == 0:
        return []
    if n == 1:
        return [first_ms]
    off0, off1 = first_ms - engine_ms[0], last_ms - engine_ms[-1]
    return [t + off0 + (off1 - off0) * i / (n - 1) for i, t in enumerate(engine_ms)]


def _peaks(starts: Sequence[float], lats: Sequence[float], tokens: Sequence[Sequence[float]]) -> tuple[float, int]:
    """``max_output_tokens_per_s`` (the most tokens in one whole second since the first
    successful request's start) and ``max_concurrent_requests`` (the most successful requests
    in flight at once, over half-open ``[start, end)`` intervals)."""
    if not starts:
        return 0.0, 0
    t0 = min(starts)
    span = int(math.ceil(max(s + lat for s, lat in zip(starts, lats)) - t0)) + 1
    buckets = [0] * span
    for toks in tokens:
        for t in toks:
            b = int(t - t0)
            if 0 <= b < span:
                buckets[b] += 1
    events = sorted([(s, 1) for s in starts] + [(s + lat, -1) for s, lat in zip(starts, lats)])
    live = peak = 0
    for _, delta in events:
        live += delta
        peak = max(peak, live)
    return float(max(buckets)), peak


def vllm_bench(
    result: RunTables,
    *,
    percentiles: Sequence[float] = VLLM_BENCH_PERCENTILES,
    metrics: Sequence[str] = VLLM_BENCH_METRICS,
    goodput: Optional[Mapping[str, float]] = None,
    detailed: bool = True,
    label: Optional[str] = None,
    backend: str = "o1sim",
    date: Optional[str] = None,
    steps: Optional[Sequence[Mapping[str, Any]]] = None,
) -> dict[str, Any]:
    """The run as the JSON object ``vllm bench serve --save-result`` writes: its field names,
    its units (aggregate latencies in ms; per-request ``ttfts``, ``itls``, ``latencies`` and
    ``start_times`` in seconds; throughputs per second of ``duration``), so one script reads
    a real benchmark and a simulated one alike.

    Each request of the run is one of the benchmark's prompts (``num_prompts``), in request
    order. A finished request is a successful one; a rejected one (queue full, timeout,
    prompt too long, …) is a failed one, as a failed HTTP request is to vLLM: not in
    ``completed`` but in ``failed``, left out of every statistic, with ``0`` output tokens,
    a zero TTFT and latency, no ITLs, and its reason in ``errors`` (``"rejected: timeout"``;
    ``""`` for a success). Latencies follow the result's latency view (the client's, from
    sending, unless ``frontend.report`` says ``engine``), as do the ``ttft_ms``/``e2e_ms``
    of the summary; ``duration`` is the summary's ``duration_s``. ITLs are the gaps between
    a request's tokens, from the scheduler steps (:func:`token_timeline`; a result recorded
    without steps raises ``StepsNotRecordedError``), shifted to the latency view. TPOT is per request,
    (latency − TTFT) / (output tokens − 1), over requests with more than one output token.
    Statistics are vLLM's: mean, median, population std and the ``percentiles`` (linearly
    interpolated) of each of ``metrics`` (``mean_ttft_ms``, ``p99_itl_ms``, …).

    ``goodput``: SLOs in ms (``{"ttft": 200, "tpot": 50, "e2el": 5000}``, any of them), as
    ``--goodput`` gives them; ``request_goodput`` is the rate of successful requests within
    all of them (``None`` without). ``detailed=False`` leaves out the per-request lists that
    vLLM keeps only with ``--save-detailed`` (:data:`VLLM_BENCH_DETAILED`). A simulated run
    has no text: ``generated_texts`` are empty strings; no client-side queue:
    ``queue_times`` are zeros. ``backend``, ``label`` and ``date`` (``YYYYmmdd-HHMMSS``,
    default now) fill the run's header; ``model_id`` and ``tokenizer_id`` are the model's
    name.
    """
    import datetime as _dt

    unknown = sorted(set(metrics) - set(VLLM_BENCH_METRICS))
    if unknown:
        raise ValueError(f"unknown metric(s) {unknown}: choose from {list(VLLM_BENCH_METRICS)}")
    slo = dict(goodput or {})
    bad_slo = sorted(set(slo) - {"ttft", "tpot", "e2el"})
    if bad_slo:
        raise ValueError(f"unknown goodput metric(s) {bad_slo}: choose from ['ttft', 'tpot', 'e2el']")

    req = result.requests.sort_values("request_id", kind="stable")
    steps = result.step_records if steps is None else steps
    tl = token_timeline(steps, _prompts(result))
    engine_view = result.summary.get("latency_view") == "engine"
    arrival_col = "engine_arrival_ms" if engine_view else "arrival_ms"

    input_lens: list[int] = []
    output_lens: list[int] = []
    ttfts: list[float] = []
    itls: list[list[float]] = []
    latencies: list[float] = []
    start_times: list[float] = []
    errors: list[str] = []
    ok_starts: list[float] = []
    ok_lats: list[float] = []
    ok_tokens: list[list[float]] = []
    ok_ttfts: list[float] = []
    ok_e2els: list[float] = []
    tpots: list[float] = []
    all_tpots: list[float] = []
    flat_itls: list[float] = []
    for row in req.itertuples(index=False):
        rid = int(row.request_id)
        start = float(getattr(row, arrival_col)) / 1e3
        input_lens.append(int(row.prompt_tokens))
        start_times.append(start)
        if str(row.status) != "finished":
            output_lens.append(0)
            ttfts.append(0.0)
            itls.append([])
            latencies.append(0.0)
            errors.append(f"{row.status}: {row.reason}" if str(row.reason) else str(row.status))
            continue
        n_out = int(row.output_tokens)
        ttft = _finite(float(row.ttft_ms)) / 1e3
        lat = _finite(float(row.e2e_ms)) / 1e3
        toks_ms = _client_tokens(tl.token_ms.get(rid, []), (start + ttft) * 1e3, (start + lat) * 1e3)
        gaps = [(b - a) / 1e3 for a, b in zip(toks_ms, toks_ms[1:])]
        output_lens.append(n_out)
        ttfts.append(ttft)
        itls.append(gaps)
        latencies.append(lat)
        errors.append("")
        tpot = (lat - ttft) / (n_out - 1) if n_out > 1 else 0.0
        if n_out > 1:
            tpots.append(tpot)
        all_tpots.append(tpot)
        flat_itls.extend(gaps)
        ok_ttfts.append(ttft)
        ok_e2els.append(lat)
        ok_starts.append(start)
        ok_lats.append(lat)
        ok_tokens.append([t / 1e3 for t in toks_ms])

    completed = len(ok_ttfts)
    failed = len(input_lens) - completed
    dur = float(result.summary.get("duration_s") or 0.0)
    per_s = (lambda x: x / dur) if dur > 0 else (lambda x: 0.0)
    total_in = sum(n for n, e in zip(input_lens, errors) if not e)
    total_out = sum(output_lens)
    good: Optional[float] = None
    if slo:
        per_metric = {"ttft": ok_ttfts, "tpot": all_tpots, "e2el": ok_e2els}
        met = sum(all(per_metric[k][i] <= v / 1e3 for k, v in slo.items()) for i in range(completed))
        good = per_s(float(met))
    peak_tokens, peak_live = _peaks(ok_starts, ok_lats, ok_tokens)
    request_rate, burstiness = _arrival_settings(result)
    model = str(result.deployment.get("model", {}).get("name", "model"))

    out: dict[str, Any] = {
        "date": date or _dt.datetime.now().strftime("%Y%m%d-%H%M%S"),
        "endpoint_type": backend,
        "backend": backend,
        "label": label,
        "model_id": model,
        "tokenizer_id": model,
        "num_prompts": len(input_lens),
        "request_rate": request_rate,
        "burstiness": burstiness,
        "max_concurrency": None,
        "duration": dur,
        "completed": completed,
        "failed": failed,
        "total_input_tokens": total_in,
        "total_output_tokens": total_out,
        "request_throughput": per_s(float(completed)),
        "request_goodput": good,
        "output_throughput": per_s(float(total_out)),
        "total_token_throughput": per_s(float(total_in + total_out)),
        "input_lens": input_lens,
        "output_lens": output_lens,
        "ttfts": ttfts,
        "itls": itls,
        "latencies": latencies,
        "start_times": start_times,
        "queue_times": [0.0] * len(input_lens),
        "generated_texts": [""] * len(input_lens),
        "errors": errors,
        "max_output_tokens_per_s": peak_tokens,
        "max_concurrent_requests": peak_live,
        "rtfx": 0.0,
    }
    values = {"ttft": ok_ttfts, "tpot": tpots, "itl": flat_itls, "e2el": ok_e2els}
    for name in VLLM_BENCH_METRICS:
        if name not in metrics:
            continue
        mean, median, std, pct = _stats(values[name], percentiles)
        out[f"mean_{name}_ms"] = mean
        out[f"median_{name}_ms"] = median
        out[f"std_{name}_ms"] = std
        for p, v in pct:
            out[f"p{_percentile_word(p)}_{name}_ms"] = v
    if not detailed:
        for key in VLLM_BENCH_DETAILED:
            del out[key]
    return out


def vllm_bench_json(result: RunTables, **kwargs: Any) -> str:
    """:func:`vllm_bench` as JSON text (strict: no NaN or infinity; an infinite rate or
    burstiness is the string ``"inf"``, as ``vllm bench serve`` writes an infinite rate)."""
    return json.dumps(vllm_bench(result, **kwargs), allow_nan=False)
