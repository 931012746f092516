"""Sweeps: one scenario run over a grid of field values and seeds, as one table.

``o1sim.sweep(base, grid={"scheduler.policy": [...], "workload.arrival.rate": [...]},
seeds=[0, 1, 2])`` runs every combination of the axes (the first axis varies slowest) for
every seed and returns a pandas DataFrame with one row per point and seed: the axis values,
``seed``, the run's summary as flat metrics (``ttft_p99_ms``, ``throughput_rps``, …) and
``error`` (None, or ``"InfeasibleError: …"`` for a combination that cannot run).
:func:`aggregate` turns the seeds into means and 95% confidence intervals.

Rows are a pure function of the scenario, the grid and the seeds: the same bytes for any
backend and any number of workers.
"""

from __future__ import annotations

import difflib
import itertools
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Optional, Union

from . import _core
from .api import ScenarioLike, _as_scenario, _encode, _set_dotted
from .backends import BackendError, Outcome, connect_ray, default_workers, run_local, run_one, run_ray
from .errors import ConfigError, config_error
from .workload import load_trace_data, read_trace_file

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["sweep", "aggregate", "student_t_quantile", "Runner", "Shipment", "ship", "run_point", "BackendError"]

Seeds = Union[None, int, Sequence[int]]
ProgressFn = Callable[[int, int], None]


# --------------------------------------------------------------------------- points


@dataclass(frozen=True)
class Point:
    """One combination of axis values: ``params`` (axis key → value, in axis order)."""

    params: dict[str, Any]


def _axis_values(kind: str, key: str, values: Any) -> list[Any]:
    field = f"{kind}.{key}"
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise config_error(field, f"must be a list of values (got {type(values).__name__}: {values!r})")
    if len(values) == 0:
        raise config_error(field, "empty axis: give at least one value")
    return list(values)


def expand(
    grid: Optional[Mapping[str, Any]] = None,
    zip: Union[None, Mapping[str, Any], Sequence[Mapping[str, Any]]] = None,  # noqa: A002 - the API's name
    *,
    kind: str = "grid",
) -> list[Point]:
    """Every point of ``grid`` (a product, first axis slowest) × each ``zip`` group (axes
    of equal length taken together, after the grid's)."""
    axes: list[list[dict[str, Any]]] = []
    seen: set[str] = set()

    def claim(key: Any, where: str) -> str:
        if not isinstance(key, str) or not key:
            raise config_error(where, f"axis keys are dotted scenario fields such as 'scheduler.policy' (got {key!r})")
        if key in seen:
            raise config_error(f"{where}.{key}", "this field is swept twice")
        seen.add(key)
        return key

    for key, values in (grid or {}).items():
        key = claim(key, kind)
        axes.append([{key: v} for v in _axis_values(kind, key, values)])
    groups = [zip] if isinstance(zip, Mapping) else list(zip or [])
    for g, group in enumerate(groups):
        where = "zip" if isinstance(zip, Mapping) else f"zip[{g}]"
        if not isinstance(group, Mapping) or not group:
            raise config_error(where, "must be a non-empty table of equally long lists")
        cols = {claim(k, where): _axis_values(where, k, v) for k, v in group.items()}
        lengths = {k: len(v) for k, v in cols.items()}
        if len(set(lengths.values())) > 1:
            raise config_error(where, f"paired axes must be equally long (got {lengths})")
        n = next(iter(lengths.values()))
        axes.append([{k: cols[k][i] for k in cols} for i in range(n)])
    points = []
    for combo in itertools.product(*axes):
        params: dict[str, Any] = {}
        for part in combo:
            params.update(part)
        points.append(Point(params))
    return points


InfeasibleOrStall = (_core.InfeasibleError, _core.StallError)
# The core's plain words for an unknown key: "unknown field 'polcy'; did you mean policy?
# (valid: policy, block_size, …)" or "unknown field 'x'; valid: a, b".
_UNKNOWN = re.compile(r"unknown field '([^']*)'; (?:did you mean .*?\? \()?valid: ([^)]*)\)?$")


def _check_value(base: dict[str, Any], kind: str, key: str, value: Any, shipment: Optional[Shipment] = None) -> None:
    """Apply one axis value alone to the base and let the core judge it (with the trace the
    point replays, from ``shipment``): an unknown field answers with the closest valid
    keys; any other ConfigError is the value's own."""
    data = json.loads(json.dumps(base))
    try:
        _set_dotted(data, key, value)
        trace = shipment.trace_of(data) if shipment is not None else None
        _core.validate(_encode(data), "json", trace=trace)
    except ConfigError as e:
        m = _UNKNOWN.search(str(e))
        if m is None:
            raise config_error(e.field or f"{kind}.{key}", f"{_message(e)} (in {kind}: {key} = {value!r})") from None
        bad_path = e.field or ""
        parent = bad_path.rsplit(".", 1)[0] + "." if "." in bad_path else ""
        rest = key[len(bad_path):] if key.startswith(bad_path) else ""
        names = [n.strip() for n in m.group(2).split(",") if n.strip()]
        close = difflib.get_close_matches(m.group(1), names, n=3, cutoff=0.6)
        full = [f"{parent}{name}{rest}" for name in (close or names)]
        hint = f"did you mean {' or '.join(repr(c) for c in full)}?" if close else f"valid here: {', '.join(full)}"
        raise config_error(f"{kind}.{key}", f"unknown scenario field '{key}'; {hint}") from None
    except InfeasibleOrStall:
        pass  # the value is well formed; whether it can run is the run's answer


def _message(e: ConfigError) -> str:
    text = str(e)
    prefix = f"{e.field}: " if e.field else ""
    return text[len(prefix):] if prefix and text.startswith(prefix) else text


def validate_axes(base: dict[str, Any], points: Sequence[Point], kind: str = "grid",
                  shipment: Optional[Shipment] = None) -> None:
    """Check every axis value on its own against the base (a ConfigError names the axis and
    the closest field names); combinations are judged by running them. A base or value
    replaying a trace file is judged with the trace (``shipment``: the files read)."""
    checked: set[tuple[str, str]] = set()
    for p in points:
        for key, value in p.params.items():
            tag = (key, json.dumps(value, sort_keys=True, default=str))
            if tag not in checked:
                checked.add(tag)
                _check_value(base, kind, key, value, shipment)


def seed_list(seeds: Seeds, base_seed: int) -> list[int]:
    """None → the scenario's own seed; an int n → n seeds from the scenario's; a list as given."""
    if seeds is None:
        return [base_seed]
    if isinstance(seeds, bool):
        raise config_error("seeds", f"must be a count or a list of seeds (got {seeds!r})")
    if isinstance(seeds, int):
        if seeds < 1:
            raise config_error("seeds", f"must be >= 1 (got {seeds})")
        return [base_seed + k for k in range(seeds)]
    out = list(seeds)
    if not out:
        raise config_error("seeds", "give at least one seed")
    for i, s in enumerate(out):
        if isinstance(s, bool) or not isinstance(s, int) or s < 0:
            raise config_error(f"seeds[{i}]", f"must be a non-negative integer (got {s!r})")
    return out


def base_dict(base: ScenarioLike) -> dict[str, Any]:
    """The scenario as a JSON-ready dict with file paths inlined."""
    sc = _as_scenario(base)
    return sc.inlined(sc.to_dict())


def payload(base: dict[str, Any], params: Mapping[str, Any], seed: int) -> str:
    """The JSON text of ``base`` with ``params`` applied and ``seed`` set."""
    data = json.loads(json.dumps(base))
    for key, value in params.items():
        _set_dotted(data, key, value)
    data["seed"] = seed
    return _encode(data)


# --------------------------------------------------------------------------- shipping


def trace_path(data: Mapping[str, Any]) -> Optional[str]:
    """The trace file a scenario dict replays (``workload.trace.path`` without inline
    ``text``), or None."""
    workload = data.get("workload")
    trace = workload.get("trace") if isinstance(workload, Mapping) else None
    if isinstance(trace, Mapping) and trace.get("text") is None and isinstance(trace.get("path"), str):
        return str(trace["path"])
    return None


@dataclass(frozen=True)
class Shipment:
    """What every run of a sweep shares, read once on this machine and shipped once to
    wherever the runs go (Ray's object store: once per node, not once per run): the base
    scenario with its files inlined (``base``), and the bytes of every trace file a run
    replays (``traces``: path as the runs name it → a numpy ``uint8`` array, which Ray's
    workers read in place). A run never reads a file itself, so a Ray node needs none of
    the paths the scenario names."""

    base: dict[str, Any]
    traces: dict[str, Any]

    def trace_of(self, data: Mapping[str, Any]) -> Optional[_core.LoadedTrace]:
        """The loaded trace a run of ``data`` (the base with a point's values) replays, read
        from the shipped bytes with the run's own trace options; None without a trace file."""
        path = trace_path(data)
        if path is None:
            return None
        if path not in self.traces:  # pragma: no cover - ship() reads every path the points name
            raise config_error("workload.trace.path", f"{path} was not read before the sweep started")
        return load_trace_data(data["workload"]["trace"], self.traces[path], prefix="workload")


def ship(base: dict[str, Any], params: Sequence[Mapping[str, Any]] = (), kind: str = "grid",
         have: Optional[Mapping[str, Any]] = None) -> Shipment:
    """The :class:`Shipment` of a sweep of ``base`` over the points ``params`` (default: the
    base alone): every trace file the base or a point names, read once (an axis value's
    relative path is relative to the working directory; an unreadable file is a
    ``ConfigError`` naming the axis, or ``workload.trace.path``). ``have``: traces already
    read (an earlier shipment's), not read again."""
    import numpy as np

    wanted: dict[str, str] = {}  # path → the field that named it first
    own = trace_path(base)
    if own is not None:  # the base's own, even when every point names another: each axis value is judged on it
        wanted[own] = "workload.trace.path"
    seen: dict[str, Optional[str]] = {}  # the point's workload values (as text) → its trace path
    for p in params:
        touched = {k: v for k, v in p.items() if k == "workload" or k.startswith("workload.")}
        if not touched:
            continue
        tag = json.dumps(touched, sort_keys=True, default=str)
        if tag not in seen:
            data = {"workload": json.loads(json.dumps(base.get("workload")))}
            try:
                for k, v in touched.items():
                    _set_dotted(data, k, v)
            except ConfigError:
                continue  # a value that cannot apply: validate_axes names it
            seen[tag] = trace_path(data)
            path = seen[tag]
            if path is not None:
                names = [k for k in touched if k in ("workload", "workload.trace", "workload.trace.path")]
                wanted.setdefault(path, f"{kind}.{names[0]}" if names else "workload.trace.path")
    have = have or {}
    traces = {path: have[path] if path in have else np.frombuffer(read_trace_file(path, field), dtype=np.uint8)
              for path, field in wanted.items()}
    return Shipment(base, traces)


def run_point(shipment: Shipment, job: tuple[Mapping[str, Any], int]) -> Outcome:
    """One run of a sweep, wherever it executes: the base with the point's values and seed,
    its trace (if any) read from the shipped bytes; a refused or failed run is its error."""
    params, seed = job
    text = payload(shipment.base, params, seed)
    try:
        trace = shipment.trace_of(json.loads(text)) if shipment.traces else None
    except _core.SimError as e:
        return ("error", type(e).__name__, str(e), getattr(e, "field", "") or "")
    return run_one(text, trace)


# --------------------------------------------------------------------------- running


class Runner:
    """Runs a sweep's points on a backend: ``"local"`` (threads; ``workers`` default: every
    CPU this process may use) or ``"ray"`` (``address`` of the cluster; None starts a local
    one). A shipment goes to Ray once per runner, however many rounds it runs (a capacity
    search's)."""

    def __init__(
        self, backend: str = "local", workers: Optional[int] = None, address: Optional[str] = None,
        max_retries: int = 3,
    ) -> None:
        if backend not in ("local", "ray"):
            raise config_error("backend", f"must be 'local' or 'ray' (got {backend!r})")
        if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
            raise config_error("workers", f"must be a positive integer (got {workers!r})")
        if backend == "ray":
            from .backends import import_ray

            import_ray()  # fail now, naming the extra, rather than after the first points
        self.backend = backend
        self.workers = workers or default_workers()
        self.address = address
        self.max_retries = max_retries
        self._shipped: Optional[tuple[Shipment, Any]] = None  # (shipment, its ObjectRef)

    @property
    def parallel(self) -> int:
        """How many runs can go at once (local: the workers; Ray: the cluster's CPUs)."""
        if self.backend == "ray":
            ray = connect_ray(self.address)
            return max(1, int(ray.cluster_resources().get("CPU", 1)))
        return self.workers

    def run(self, shipment: Shipment, jobs: Sequence[tuple[Mapping[str, Any], int]],
            tick: Optional[ProgressFn] = None) -> list[Outcome]:
        """One outcome per job (a point's values and a seed), in job order."""
        if self.backend == "ray":
            ray = connect_ray(self.address)
            if self._shipped is None or self._shipped[0] is not shipment:
                self._shipped = (shipment, ray.put(shipment))
            return run_ray(self._shipped[1], jobs, run_point, max_retries=self.max_retries, tick=tick)
        return run_local(shipment, jobs, run_point, self.workers, tick)


def outcome_metrics(outcome: Outcome) -> tuple[dict[str, Any], Optional[str], str]:
    """``(flat metrics, error text or None, summary JSON or "")`` of one outcome."""
    if outcome[0] == "ok":
        summary = outcome[1]
        metrics: dict[str, Any] = json.loads(_core.flat_metrics_json(summary))
        return metrics, None, summary
    kind, message = outcome[1], outcome[2] if len(outcome) > 2 else ""
    return {}, f"{kind}: {message}", ""


def rows_frame(rows: list[dict[str, Any]], param_keys: Sequence[str]) -> pd.DataFrame:
    """A DataFrame of rows with the columns in a fixed order: parameters, seed, metrics (in
    the order first seen), error."""
    import pandas as pd

    columns: dict[str, None] = {k: None for k in param_keys}
    columns["seed"] = None
    for r in rows:
        for k in r:
            if k != "error":
                columns.setdefault(k, None)
    columns["error"] = None
    df = pd.DataFrame(rows, columns=list(columns))
    df.attrs["o1sim_params"] = list(param_keys)
    return df


def sweep(
    base: ScenarioLike,
    grid: Optional[Mapping[str, Sequence[Any]]] = None,
    *,
    zip: Union[None, Mapping[str, Sequence[Any]], Sequence[Mapping[str, Sequence[Any]]]] = None,  # noqa: A002
    seeds: Seeds = None,
    backend: str = "local",
    workers: Optional[int] = None,
    address: Optional[str] = None,
    progress: Optional[ProgressFn] = None,
) -> pd.DataFrame:
    """Run ``base`` at every point of ``grid`` (dotted field → list of values; the product of
    the axes, first axis slowest) × each ``zip`` group (fields whose lists are taken
    together, e.g. ``{"deployment.tp": [1, 2], "deployment.replicas": [8, 4]}``) × each
    seed, and return one row per point and seed: the axis values, ``seed``, the summary as
    flat metrics (``ttft_p99_ms``, ``throughput_rps``, ``goodput_rps``, …) and ``error``.

    ``seeds``: None (the scenario's seed), a count n (the scenario's seed and the n−1 after
    it) or a list. ``backend="local"`` runs on ``workers`` threads (default: every CPU this
    process may use); ``"ray"`` on a Ray cluster (``address``; None starts a local one;
    ``pip install 'o1sim[ray]'``), the scenario and the trace files it names shipped once
    through Ray's object store and the points in batches (:func:`o1sim.backends.run_ray`).
    A trace file (``workload.trace.path``, or an axis of paths, relative to the working
    directory) is read once, here, for either backend. ``progress(done, total)`` is called
    as runs finish (on Ray, as each batch does).

    Every axis value is checked on its own first: an unknown field raises ``ConfigError``
    naming the axis with the closest valid names, as does an empty axis or a bad value. A
    combination that cannot run (a model too large for ``tp``, ``tp`` not dividing the
    heads) gets its error in ``error`` and empty metrics. The rows are the same, byte for
    byte, for any backend and number of workers.
    """
    points = expand(grid, zip)
    data = base_dict(base)
    shipment = ship(data, [p.params for p in points])
    validate_axes(data, points, shipment=shipment)
    seeds_ = seed_list(seeds, int(data.get("seed", 0)) if isinstance(data.get("seed", 0), int) else 0)
    runner = Runner(backend, workers, address)
    jobs = [(p, s) for p in points for s in seeds_]
    outcomes = runner.run(shipment, [(p.params, s) for p, s in jobs], progress)
    rows = []
    for (p, s), outcome in itertools.zip_longest(jobs, outcomes):
        metrics, error, _ = outcome_metrics(outcome)
        rows.append({**p.params, "seed": s, **metrics, "error": error})
    keys = list(points[0].params) if points else []
    return rows_frame(rows, keys)


# --------------------------------------------------------------------------- statistics


def _t_two_sided_mass(t: float, dof: int) -> float:
    """P(|T| ≤ t) for Student's t with integer ``dof`` (closed form, Abramowitz & Stegun
    26.7.3–26.7.4)."""
    theta = math.atan(t / math.sqrt(dof))
    c2 = math.cos(theta) ** 2
    s = math.sin(theta)
    if dof % 2 == 1:
        if dof == 1:
            return 2.0 * theta / math.pi
        term, acc = 1.0, 1.0
        for k in range(1, (dof - 1) // 2):
            term *= c2 * (2 * k) / (2 * k + 1)
            acc += term
        return 2.0 / math.pi * (theta + s * math.cos(theta) * acc)
    term, acc = 1.0, 1.0
    for k in range(1, dof // 2):
        term *= c2 * (2 * k - 1) / (2 * k)
        acc += term
    return s * acc


def student_t_quantile(confidence: float, dof: int) -> float:
    """The two-sided Student-t critical value: ``t`` with P(|T| ≤ t) = ``confidence`` for
    ``dof`` degrees of freedom (2.776 for 95% and 4; 1.96 in the limit)."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1) (got {confidence})")
    if dof < 1:
        raise ValueError(f"dof must be >= 1 (got {dof})")
    lo, hi = 0.0, 1.0
    while _t_two_sided_mass(hi, dof) < confidence:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if _t_two_sided_mass(mid, dof) < confidence:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12 * hi:
            break
    return 0.5 * (lo + hi)


def aggregate(df: pd.DataFrame, by: Optional[Sequence[str]] = None, confidence: float = 0.95) -> pd.DataFrame:
    """One row per point from a sweep's rows over seeds: ``n_seeds``, each numeric metric's
    mean over the seeds, and ``<metric>_ci95``, the half-width of its confidence interval by
    Student's t over the seeds (mean ± t(0.975, n−1) · s / √n, s the sample standard
    deviation; NaN with one seed). ``by``: the parameter columns (default: the sweep's
    axes). Rows with an ``error`` count as missing for the metrics."""
    import pandas as pd

    keys = list(by if by is not None else df.attrs.get("o1sim_params", []))
    metric_cols = [c for c in df.columns if c not in keys and c not in ("seed", "error")
                   and pd.api.types.is_numeric_dtype(df[c])]
    tag = f"_ci{round(confidence * 100)}"
    # Group on the parameters' text so that lists, dicts and NaN group too, in first-seen order.
    groups: dict[str, list[int]] = {}
    for i, values in enumerate(df[keys].itertuples(index=False, name=None)):
        groups.setdefault(json.dumps(list(values), default=str), []).append(i)
    out = []
    for idx in groups.values():
        part = df.iloc[idx]
        row: dict[str, Any] = {k: part.iloc[0][k] for k in keys}
        row["n_seeds"] = len(idx)
        for c in metric_cols:
            values = part[c].dropna().astype(float)
            n = len(values)
            row[c] = float(values.mean()) if n else math.nan
            row[c + tag] = (student_t_quantile(confidence, n - 1) * float(values.std(ddof=1)) / math.sqrt(n)
                            if n > 1 else math.nan)
        out.append(row)
    columns = keys + ["n_seeds"] + [x for c in metric_cols for x in (c, c + tag)]
    res = pd.DataFrame(out, columns=columns)
    res.attrs["o1sim_params"] = keys
    return res

