"""The Python API: scenarios in, results out.

A scenario is a plain dict (the same shape as the TOML/JSON files), a path to a ``.toml``
or ``.json`` file, or a :class:`Scenario`. The core does all validation; Python only
refuses what JSON cannot carry (NaN, ±inf, arbitrary objects) and says where it is.
"""

from __future__ import annotations

import copy
import json
import os
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Optional, Union

from . import _core
from ._files import refuse_files
from ._input import check_depth, loads, read_text, too_deep
from ._input import join_path as _join
from ._input import jsonable as _jsonable
from ._memory import refresh_memory_ceiling
from .errors import StepsNotRecordedError, config_error
from .topology import resolve_topology
from .workload import trace_for

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

if TYPE_CHECKING:  # pathlib loads when a path is read (it costs the CLI's start-up ~3 ms)
    from pathlib import Path

    import pandas as pd

__all__ = [
    "CheckProgress",
    "CheckResult",
    "Violation",
    "bug_names",
    "check",
    "Progress",
    "Result",
    "Scenario",
    "ScenarioLike",
    "Simulation",
    "default_scenario",
    "presets",
    "reason_names",
    "simulate",
    "status_names",
]

#: Events processed per slice when a progress callback is given.
SLICE_EVENTS = 200_000
#: A progress callback hears of every 1/PROGRESS_STEPS of the requests finishing (5%).
PROGRESS_STEPS = 20


class Progress(NamedTuple):
    """How far a running simulation has come (passed to ``simulate(progress=...)``)."""

    finished_requests: int
    total_requests: int
    now_ms: float
    """Simulated time, in milliseconds."""
    events: int

    @property
    def fraction(self) -> float:
        """Finished share of all requests, 0..1 (1 when there are none)."""
        if self.total_requests <= 0:
            return 1.0
        return min(1.0, self.finished_requests / self.total_requests)


ProgressCallback = Callable[[Progress], None]


# --------------------------------------------------------------------------- scenarios

_SEGMENT = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def _parse_dotted(path: str) -> list[str | int]:
    """``"workload.requests[3].prompt_tokens"`` → ``["workload", "requests", 3, "prompt_tokens"]``."""
    parts: list[str | int] = []
    pos = 0
    while pos < len(path):
        if parts and path[pos] == ".":
            pos += 1
        m = _SEGMENT.match(path, pos)
        if m is None or m.end() == pos:
            raise config_error(path, "not a valid override path (use dotted keys like 'scheduler.policy')")
        parts.append(m.group(1) if m.group(1) is not None else int(m.group(2)))
        pos = m.end()
    if not parts:
        raise config_error(path, "empty override path")
    return parts


def _set_dotted(data: dict[str, Any], path: str, value: Any) -> None:
    """Set ``data[a][b]...`` from a dotted path, creating missing tables on the way."""
    parts = _parse_dotted(path)
    node: Any = data
    walked = ""
    for key, nxt in zip(parts, parts[1:] + [None]):
        here = _join(walked, key)
        if isinstance(key, int):
            if not isinstance(node, list) or key >= len(node):
                raise config_error(here, "no such list element to override")
        elif not isinstance(node, dict):
            raise config_error(walked, f"cannot set '{key}' inside a {type(node).__name__}")
        if nxt is None:
            node[key] = value
        else:
            if isinstance(key, str) and key not in node:
                node[key] = {}
            node = node[key]
        walked = here


def _copy(data: dict[str, Any]) -> dict[str, Any]:
    """A deep copy; nesting too deep to copy is a ``ConfigError`` (not a ``RecursionError``),
    decided by depth alone, whatever the caller's stack."""
    check_depth(data)
    try:
        return copy.deepcopy(data)
    except RecursionError:
        raise too_deep("") from None


def _encode(data: Mapping[str, Any]) -> str:
    """Scenario dict → JSON text for the core (after the NaN/±inf/type walk)."""
    return json.dumps(_jsonable(data, ""), allow_nan=False)


class Scenario:
    """A scenario: a thin wrapper around its dict (or, until changed, its file's text).

    A scenario read from a file keeps the file's text, so the core parses the TOML or JSON
    itself and its error messages name the fields exactly; :meth:`with_overrides` turns it
    into a dict-backed scenario.
    """

    def __init__(self, data: Optional[Mapping[str, Any]] = None, *, allow_files: bool = True) -> None:
        """``data``: the scenario as a dict. ``allow_files=False`` for a dict that came over
        the wire: then a field naming a file (``workload.trace.path``, ``cost_model.profile``,
        ``model.hf_config``, a topology file) is a ``ConfigError`` naming it, and nothing is
        read; otherwise such paths are relative to the working directory."""
        self._data: Optional[dict[str, Any]] = _copy(dict(data)) if data is not None else {}
        self._text: Optional[str] = None
        self._format = "json"
        self._base: Optional[Path] = None
        self._files = allow_files
        self._refused = False  # a text-backed untrusted scenario checked once (its text never changes)
        self.source = "<dict>"
        """Where the scenario came from (a path, ``<default>``, ``<dict>`` or ``<text>``)."""

    @classmethod
    def from_text(
        cls, text: str, format: str = "toml", *, source: str = "<text>",
        base_dir: Union[None, str, os.PathLike[str]] = None, allow_files: bool = False,
    ) -> Scenario:
        """A scenario from TOML or JSON text (``format`` is ``"toml"`` or ``"json"``).

        Text is what comes over the wire (an upload, a text box): by default it may use only
        what it holds, and a field naming a file (``workload.trace.path``,
        ``cost_model.profile``, ``model.hf_config``, a topology file) is a ``ConfigError``
        naming it, without reading anything. ``base_dir``: the folder such paths are
        relative to (they are then read, as for :meth:`from_file`); ``allow_files=True``:
        read them relative to the working directory."""
        if format not in ("toml", "json"):
            raise config_error("format", f"must be 'json' or 'toml' (got {format!r})")
        sc = cls(allow_files=allow_files or base_dir is not None)
        sc._data = None
        sc._text = text
        sc._format = format
        if base_dir is not None:
            from pathlib import Path

            sc._base = Path(base_dir)
        sc.source = source
        return sc

    @classmethod
    def from_file(cls, path: Union[str, os.PathLike[str]]) -> Scenario:
        """A scenario from a ``.toml`` or ``.json`` file."""
        from pathlib import Path

        p = Path(path)
        suffix = p.suffix.lower()
        if suffix not in (".toml", ".json"):
            raise config_error("", f"{p}: unknown scenario file type '{suffix}' (expected .toml or .json)")
        sc = cls.from_text(read_text(p), suffix[1:], source=str(p), base_dir=p.parent)
        # A `topology` or `cost_model.profile` file path is read here, relative to the
        # scenario file (the core reads no files); the scenario then travels as a dict.
        data = sc.to_dict()
        if _resolve_files(data, p.parent):
            resolved = cls(data)
            resolved.source = sc.source
            return resolved
        return sc

    @classmethod
    def default(cls) -> Scenario:
        """The scenario embedded in the core (what the CLI runs with no file). It is this
        package's own text, not an upload: local paths set on it (``--trace``) are read."""
        return cls.from_text(_core.default_scenario_toml(), "toml", source="<default>", allow_files=True)

    def to_dict(self) -> dict[str, Any]:
        """The scenario as a dict (a copy)."""
        if self._data is not None:
            return _copy(self._data)
        assert self._text is not None
        parsed = loads(self._text, self._format, self.source)
        if not isinstance(parsed, dict):
            raise config_error("", f"{self.source}: a scenario must be a table/object")
        return parsed

    def with_overrides(self, overrides: Mapping[str, Any]) -> Scenario:
        """A new scenario with dotted-path overrides applied, e.g. ``{"scheduler.policy": "orca"}``."""
        data = self.to_dict()
        for path, value in overrides.items():
            _set_dotted(data, path, value)
        sc = Scenario(data, allow_files=self._files)
        sc._base = self._base
        sc.source = self.source
        return sc

    def inlined(self, data: dict[str, Any]) -> dict[str, Any]:
        """``data`` (this scenario's dict, or one made from it) with its file paths read
        and inlined, relative to this scenario's folder (a file's; else the working
        directory); or, for a scenario that came over the wire, a ``ConfigError`` naming
        the first field that names a file."""
        if not self._files:
            refuse_files(data)
        else:
            _resolve_files(data, self._base)
        return data

    def payload(self) -> tuple[str, str]:
        """``(text, format)`` exactly as handed to the core (which is told, too, what this
        process may allocate: the default memory limit follows it)."""
        refresh_memory_ceiling()
        if self._text is not None:
            if not self._files and not self._refused:
                refuse_files(self.to_dict())
                self._refused = True
            return self._text, self._format
        assert self._data is not None
        return _encode(self.inlined(dict(self._data))), "json"

    def validate(self) -> dict[str, Any]:
        """Validate with the core. Returns ``{"scenario": …, "deployment": …}``: the scenario
        with every default filled in, and the resolved deployment (model and GPU specs,
        memory plan per GPU, KV blocks per replica). A trace given by path is read whole."""
        resolved: dict[str, Any] = json.loads(_core.validate(*self.payload(), trace=self.trace()))
        return resolved

    def trace(self) -> Optional[_core.LoadedTrace]:
        """The trace file of ``workload.trace.path`` read through the core's reader (a fresh
        one per call: a simulation takes it), or None when the scenario has no trace file
        (an inline ``trace.text`` travels with the scenario)."""
        if self._text is not None and "trace" not in self._text:
            return None
        return trace_for(self.inlined(self.to_dict()))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Scenario) and self.to_dict() == other.to_dict()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Scenario(source={self.source!r})"


ScenarioLike = Union[Scenario, Mapping[str, Any], str, "os.PathLike[str]"]


def _as_scenario(scenario: ScenarioLike) -> Scenario:
    if isinstance(scenario, Scenario):
        return scenario
    if isinstance(scenario, Mapping):
        return Scenario(scenario)
    if isinstance(scenario, str) and "\n" in scenario:
        raise TypeError("simulate() takes a dict, a path or a Scenario; for scenario text use Scenario.from_text(text, 'toml')")
    if isinstance(scenario, (str, os.PathLike)):
        return Scenario.from_file(scenario)
    raise TypeError(f"simulate() takes a dict, a path or a Scenario, not {type(scenario).__name__}")


# --------------------------------------------------------------------------- results

#: The step's shape fields (``shape`` in :attr:`Result.step_records`), columns of :attr:`Result.steps`.
STEP_SHAPE_COLUMNS: tuple[str, ...] = (
    "prefill", "decode_seqs", "decode_context_sum", "context_sum_after", "sampled", "decode_blocks_1024", "comm_ms",
    "decision_ms", "spec_tokens", "lora_adapters",
)
#: Shape fields the core writes only when not 0: drafts verified (speculative decoding) and
#: distinct LoRA adapters in the step.
OPTIONAL_SHAPE_COLUMNS: tuple[str, ...] = ("spec_tokens", "lora_adapters")
#: Columns of :attr:`Result.steps`, in order.
STEP_COLUMNS: tuple[str, ...] = (
    "replica", "start_ms", "end_ms", "tokens", "batch_size", "free_blocks_after", "scheduled", "preempted", "finished",
    "cached", *STEP_SHAPE_COLUMNS,
)

#: Columns of :meth:`Result.step_anatomy`, in order.
ANATOMY_COLUMNS: tuple[str, ...] = (
    "name", "layer", "part", "parts", "launched_us", "start_us", "end_us", "stream", "source", "ctas", "sm_occupancy",
)


class Result:
    """The outcome of one simulation. Tables are built on first access."""

    def __init__(self, raw: _core.RunResult, *, record_steps: bool = False, scenario: Optional[Scenario] = None,
                 rerunnable: bool = True) -> None:
        self._raw = raw
        self._record_steps = record_steps
        # False when the run's topology changed while it ran: its scenario alone would not
        # give its steps again.
        self._rerunnable = rerunnable
        self.scenario = scenario
        """The scenario that was run."""

    @property
    def raw(self) -> _core.RunResult:
        """The core's result object (numpy columns, JSON strings)."""
        return self._raw

    @cached_property
    def summary(self) -> dict[str, Any]:
        """Summary metrics (TTFT/TPOT/E2E percentiles, throughput, KV use, ...)."""
        summary: dict[str, Any] = json.loads(self._raw.summary_json())
        return summary

    @cached_property
    def requests(self) -> pd.DataFrame:
        """One row per request; ``status``/``reason`` are categoricals, times in ms.
        ``arrival_ms`` is the client's send, ``engine_arrival_ms`` when the engine got it,
        ``first_token_ms``/``finish_ms`` when the engine produced the first/last token and
        ``client_first_token_ms``/``client_finish_ms`` when the client received them (NaN
        for requests that never produced a token); ``cached_tokens``: prompt tokens found in
        the prefix cache at its first admission. With ``workload.adversarial``, a boolean
        ``adversarial`` column marks the attackers (``summary["classes"]`` has the per-class
        metrics). With ``scheduler.kv_offload``, ``kv_load_ms`` is the time each request
        waited for its KV blocks to load from the offload tiers (0: none;
        ``summary["kv_offload"]`` has the tiers' counters)."""
        import numpy as np
        import pandas as pd

        cols = self._raw.columns()
        status = cols.pop("status")
        reason = cols.pop("reason")
        df = pd.DataFrame(cols)
        df["status"] = pd.Categorical.from_codes(status.astype(np.int16), categories=status_names())
        df["reason"] = pd.Categorical.from_codes(reason.astype(np.int16), categories=reason_names())
        # client-side (send to receipt, as benchmarks measure) and engine-side latencies;
        # ``ttft_ms`` / ``e2e_ms`` follow the summary's view (``frontend.report``)
        df["client_ttft_ms"] = df["client_first_token_ms"] - df["arrival_ms"]
        df["client_e2e_ms"] = df["client_finish_ms"] - df["arrival_ms"]
        df["engine_ttft_ms"] = df["first_token_ms"] - df["engine_arrival_ms"]
        df["engine_e2e_ms"] = df["finish_ms"] - df["engine_arrival_ms"]
        view = "engine" if self.summary.get("latency_view") == "engine" else "client"
        df["ttft_ms"] = df[f"{view}_ttft_ms"]
        df["e2e_ms"] = df[f"{view}_e2e_ms"]
        return df

    @cached_property
    def timeseries(self) -> pd.DataFrame:
        """Per-replica time series (one row per replica and bucket of ``timeseries_interval_ms``);
        ``prefix_queries``/``prefix_hits`` are the prefix-cache tokens looked up and hit by
        first admissions in the bucket, ``prefix_hit_rate`` their ratio (NaN: no lookup)."""
        import pandas as pd

        return pd.DataFrame(self._raw.timeseries_columns())

    @property
    def timeseries_interval_ms(self) -> float:
        return self._raw.timeseries_interval_ms

    @cached_property
    def links(self) -> Optional[pd.DataFrame]:
        """Per-link table (with a topology; else None): ``src, dst, kind, bandwidth_gbps``
        (at the end), ``nominal_gbps, latency_us, up, bytes`` (carried, both directions) and
        ``utilization`` (bytes / (nominal bandwidth × 2 directions × run time))."""
        import pandas as pd

        text = self._raw.links_json()
        if text is None:
            return None
        return pd.DataFrame(json.loads(text))

    def _need_steps(self, what: str) -> None:
        """Raise :class:`~o1sim.errors.StepsNotRecordedError` for ``what`` (the attribute or
        method asked for) unless this run recorded its steps."""
        if self._record_steps:
            return
        n = self.summary.get("num_requests")
        size = f" of {n:,} requests" if isinstance(n, int) else ""
        if self.scenario is None:
            how = "run it with record_steps=True (this result has no scenario to run again)"
        elif not self._rerunnable:
            how = ("its topology changed while it ran (inject_topology), so its scenario alone would not give "
                   "them: run it with Simulation(..., record_steps=True)")
        else:
            how = (f"pass record_steps=True to simulate(), or call result.with_steps() to run this scenario{size} "
                   "again with it (a run is deterministic: the same result, plus its steps)")
        raise StepsNotRecordedError(f"Result.{what} needs the scheduler steps, which this run did not record: {how}")

    def with_steps(self) -> Result:
        """This result with its scheduler steps: itself when its run recorded them, else its
        scenario run again with ``record_steps=True``, now (a run is deterministic: the same
        result, byte for byte, plus :attr:`steps`). The one place a result runs again, and
        only when asked: it costs what the first run cost. A result with no scenario, or
        whose topology changed while it ran (:meth:`Simulation.inject_topology`), cannot be
        run again: :class:`~o1sim.errors.StepsNotRecordedError`."""
        if self._record_steps:
            return self
        if self.scenario is None or not self._rerunnable:
            self._need_steps("with_steps()")
        assert self.scenario is not None
        return simulate(self.scenario, record_steps=True)

    @cached_property
    def step_records(self) -> list[dict[str, Any]]:
        """Every scheduler step as the core records it, one dict each: ``replica``,
        ``start_ms``, ``end_ms``, ``scheduled`` (``[request, tokens]`` pairs), ``preempted``,
        ``finished``, ``free_blocks_after``, ``cached`` (``[request, hit tokens]`` at
        admission) and ``shape`` (what the step's time was priced from).

        Only a run made with ``record_steps=True`` has them; any other raises
        :class:`~o1sim.errors.StepsNotRecordedError` at once, saying how to get them
        (it never runs the scenario again by itself: :meth:`with_steps` does, when asked)."""
        self._need_steps("step_records")
        steps: list[dict[str, Any]] = json.loads(self._raw.steps_json())
        return steps

    @cached_property
    def steps(self) -> pd.DataFrame:
        """Every scheduler step, one row each (index ``step``, in the order the steps ran):
        ``replica``, ``start_ms``, ``end_ms``, ``tokens`` (scheduled this step) and
        ``batch_size`` (requests in the batch), ``free_blocks_after``, the lists
        ``scheduled`` (``[request, tokens]`` pairs), ``preempted``, ``finished`` and
        ``cached`` (``[request, prefix-cache hit tokens]`` at admission), then the step's
        shape: ``prefill`` (``[new, context]`` tokens per prefill entry), ``decode_seqs``,
        ``decode_context_sum``, ``context_sum_after``, ``sampled``, ``decode_blocks_1024``,
        ``comm_ms``, ``decision_ms``, ``spec_tokens`` (drafts verified, speculative decoding)
        and ``lora_adapters`` (distinct adapters in the step). The same steps as dicts:
        :attr:`step_records`.
        Only a run made with ``record_steps=True`` has them; any other raises
        :class:`~o1sim.errors.StepsNotRecordedError` (see :meth:`with_steps`)."""
        import pandas as pd

        self._need_steps("steps")
        records = self.step_records
        cols: dict[str, list[Any]] = {}
        for name in STEP_COLUMNS:
            if name == "tokens":
                cols[name] = [sum(int(t) for _, t in s["scheduled"]) for s in records]
            elif name == "batch_size":
                cols[name] = [len(s["scheduled"]) for s in records]
            elif name in OPTIONAL_SHAPE_COLUMNS:
                cols[name] = [s["shape"].get(name, 0) for s in records]
            elif name in STEP_SHAPE_COLUMNS:
                cols[name] = [s["shape"][name] for s in records]
            else:
                cols[name] = [s[name] for s in records]
        df = pd.DataFrame(cols, columns=list(STEP_COLUMNS))
        df.index.name = "step"
        return df

    def step_anatomy(self, i: int) -> pd.DataFrame:
        """The kernels of scheduler step ``i`` (an index into :attr:`steps`; negative counts
        from the end), one row each in launch order: ``name`` (the operator, fused groups
        joined by ``+``), ``layer`` (-1 outside the layers), ``part``/``parts`` (which of
        the operator's kernels), ``launched_us``, ``start_us``, ``end_us`` (since the step
        started), ``stream`` (``compute``, ``communication`` or ``cpu``), ``source`` (where
        its time came from: ``table``, ``interpolated``, ``roofline``, ``model``), ``ctas``
        and ``sm_occupancy`` (thread blocks vs the GPU's SMs, an estimate).

        ``df.attrs`` holds the step: ``step``, ``replica``, ``start_ms``, ``recorded_ms``
        (what the run charged), ``step_ms`` (the timeline's end; within 0.2% of it),
        ``graph``, ``pipelined``, ``sms``. Needs the steps: a result run without
        ``record_steps=True`` raises :class:`~o1sim.errors.StepsNotRecordedError`."""
        import pandas as pd

        self._need_steps(f"step_anatomy({i})")
        steps = self.step_records
        n = len(steps)
        if not -n <= i < n:
            raise IndexError(f"step {i} out of range: the run has {n} steps")
        step = steps[i]
        if self.scenario is None:
            raise ValueError("the result has no scenario to price its steps with")
        text, fmt = self.scenario.payload()
        a = json.loads(_core.step_anatomy_json(text, fmt, json.dumps(step)))
        df = pd.DataFrame(a.pop("kernels"), columns=list(ANATOMY_COLUMNS))
        df.attrs.update(a)
        df.attrs.update(step=i % n, replica=step["replica"], start_ms=step["start_ms"])
        return df

    def to_json(self) -> str:
        """The whole result as JSON, byte-for-byte what every o1sim front end produces."""
        return self._raw.to_json()

    def to_csv(self, path: Union[str, os.PathLike[str]]) -> None:
        """Write the per-request table as CSV."""
        self.requests.to_csv(path, index=False)

    @cached_property
    def deployment(self) -> dict[str, Any]:
        """The resolved deployment (model, GPU, TP/PP/replicas, memory plan, KV blocks)."""
        deployment: dict[str, Any] = json.loads(self._raw.to_json())["deployment"]
        return deployment

    def to_chrome_trace(
        self, path: Union[str, os.PathLike[str], None] = None, *, kernels: Union[bool, Iterable[int]] = False
    ) -> str:
        """The run as a Chrome/Perfetto trace (Trace Event Format JSON), written to ``path``
        when given. Needs the steps: a result run without ``record_steps=True`` raises
        :class:`~o1sim.errors.StepsNotRecordedError` (see :meth:`with_steps`). ``kernels``:
        also lay out the kernels of the steps given by index (``True``: every step; a long
        run has thousands of kernels per step) on per-replica kernel tracks
        (:meth:`step_anatomy`). See :func:`o1sim.exports.chrome_trace`."""
        from .exports import write_chrome_trace  # loaded when exported, not with the API

        self._need_steps("to_chrome_trace()")
        return write_chrome_trace(self, path, kernels=kernels)

    def to_prometheus(self, *, model_name: Optional[str] = None) -> str:
        """The run as Prometheus text exposition with vLLM's metric names (histograms of
        TTFT, inter-token and E2E latency; token, request and preemption counters; mean
        running/waiting/KV gauges per replica). Needs the steps (for the inter-token
        latencies): a result run without ``record_steps=True`` raises
        :class:`~o1sim.errors.StepsNotRecordedError` (see :meth:`with_steps`). See
        :func:`o1sim.exports.prometheus_text`."""
        from .exports import prometheus_text

        self._need_steps("to_prometheus()")
        return prometheus_text(self, model_name=model_name)

    def to_vllm_bench(self, path: Union[str, os.PathLike[str], None] = None, **kwargs: Any) -> dict[str, Any]:
        """The run as the JSON object ``vllm bench serve --save-result`` writes (its field
        names and units: ``mean_ttft_ms``, ``p99_itl_ms``, ``request_throughput``, per-request
        ``ttfts`` in seconds, …), written to ``path`` when given. Rejected requests are its
        failed ones. Needs the steps (for the ITLs): a result run without
        ``record_steps=True`` raises :class:`~o1sim.errors.StepsNotRecordedError` (see
        :meth:`with_steps`). Keyword arguments: see :func:`o1sim.exports.vllm_bench`."""
        from .exports import vllm_bench

        self._need_steps("to_vllm_bench()")
        data = vllm_bench(self, **kwargs)
        if path is not None:
            from pathlib import Path

            Path(path).write_text(json.dumps(data, allow_nan=False), encoding="utf-8")
        return data

    def __repr__(self) -> str:
        s = self.summary
        return f"Result(num_requests={s.get('num_requests')!r}, finished={s.get('finished')!r})"


# --------------------------------------------------------------------------- functions


def simulate(
    scenario: ScenarioLike,
    *,
    record_steps: bool = False,
    progress: Optional[ProgressCallback] = None,
    check_invariants: bool = False,
) -> Result:
    """Run one simulation.

    ``scenario`` is a dict, a path to a ``.toml``/``.json`` file, or a :class:`Scenario`.
    ``record_steps=True`` also keeps every scheduler step (:attr:`Result.steps`, the
    exports); without it a result's steps are a :class:`~o1sim.errors.StepsNotRecordedError`
    (:meth:`Result.with_steps` runs the scenario again for them, when asked).
    ``progress``, if given, is called with a :class:`Progress` before the run and after
    every slice of events. ``check_invariants=True`` checks the model checker's state
    invariants after every instant and raises :class:`o1sim.InternalError` naming the
    property at the first violation (replaying a counterexample). Raises a subclass of
    :class:`o1sim.SimError` on failure.
    """
    sc = _as_scenario(scenario)
    text, fmt = sc.payload()
    sim = _core.Simulation(text, fmt, record_steps, check_invariants, sc.trace())
    if progress is not None:
        p = Progress(*sim.progress())
        progress(p)
        # A report at least every 5% of the requests (and every slice of events): one step
        # can finish many requests, so the core pauses on the count itself.
        step = max(1, p.total_requests // PROGRESS_STEPS)
        while not sim.run_until(SLICE_EVENTS, p.finished_requests + step):
            p = Progress(*sim.progress())
            progress(p)
        progress(Progress(*sim.progress()))
    return Result(sim.finish(), record_steps=record_steps, scenario=sc)


class Simulation:
    """A simulation advanced step by step, whose topology can change while it runs.

    >>> sim = Simulation(scenario)               # with a ``topology`` section
    >>> sim.run_events(10_000)                  # part way
    >>> sim.inject_topology(events=[{"at_s": 0, "kind": "link_down", "src": "gpu1", "dst": "nvswitch0"}])
    >>> result = sim.finish()
    """

    def __init__(self, scenario: ScenarioLike, *, record_steps: bool = False) -> None:
        self.scenario = _as_scenario(scenario)
        text, fmt = self.scenario.payload()
        self._record_steps = record_steps
        self._injected = False
        self._sim = _core.Simulation(text, fmt, record_steps, False, self.scenario.trace())

    def run_events(self, max_events: int) -> bool:
        """Process at most ``max_events`` events; True when the run is complete."""
        return self._sim.run_events(max_events)

    @property
    def progress(self) -> Progress:
        return Progress(*self._sim.progress())

    def inject_topology(
        self, topology: Any = None, *, events: Optional[Sequence[Mapping[str, Any]]] = None
    ) -> None:
        """Change the fabric now: apply ``events`` (as in a scenario's ``events``; times
        in the past apply now, later ones when due) and/or swap in a whole new ``topology``
        (preset name, dict, :class:`o1sim.Topology` or file path; the placement's GPU ids
        must exist in it). Routes are re-evaluated, in-flight KV transfers re-costed,
        replicas that lost a peer stopped and their requests moved to the others; a stopped
        replica whose GPUs are connected again (``link_up``) restarts, empty."""
        if topology is None and events is None:
            raise TypeError("inject_topology() needs a topology and/or events")
        if topology is not None:
            holder: dict[str, Any] = {"topology": topology}
            from pathlib import Path

            resolve_topology(holder, Path.cwd())
            self._sim.inject_topology(json.dumps(_jsonable(holder["topology"], "topology"), allow_nan=False))
            self._injected = True
        if events is not None:
            self._sim.inject_topology(json.dumps(_jsonable(list(events), "events"), allow_nan=False))
            self._injected = True

    def finish(self) -> Result:
        """Run to the end and return the :class:`Result` (once)."""
        return Result(self._sim.finish(), record_steps=self._record_steps, scenario=self.scenario,
                      rerunnable=not self._injected)


def presets() -> dict[str, Any]:
    """The built-in catalog: GPUs, models, policies, topologies."""
    catalog: dict[str, Any] = json.loads(_core.presets_json())
    return catalog


def default_scenario() -> dict[str, Any]:
    """The default scenario embedded in the core, as a dict."""
    return tomllib.loads(_core.default_scenario_toml())


def status_names() -> list[str]:
    """Request status names (``Result.requests.status`` categories)."""
    return _core.status_names()


def reason_names() -> list[str]:
    """Rejection reason names ('' = not rejected)."""
    return _core.reason_names()


# --------------------------------------------------------------------------- model checking

#: States explored per slice when a progress callback is given.
CHECK_SLICE_STATES = 100_000


class CheckProgress(NamedTuple):
    """How far a model check has come (passed to ``check(progress=...)``)."""

    states: int
    transitions: int
    frontier: int
    """States found but not yet expanded."""
    depth: int
    elapsed_s: float
    violations: int

    @property
    def states_per_s(self) -> float:
        return self.states / self.elapsed_s if self.elapsed_s > 0 else 0.0


CheckProgressCallback = Callable[[CheckProgress], None]


class Violation:
    """A violated property with its shortest counterexample."""

    def __init__(self, data: Mapping[str, Any]) -> None:
        self.data: dict[str, Any] = dict(data)
        """The violation as the core reports it (JSON-ready)."""
        self.property: str = data["property"]
        self.message: str = data["message"]
        self.length: int = data["length"]
        self.trace: list[dict[str, Any]] = list(data["trace"])
        """Numbered actions: ``step``, ``action`` (arrive/complete), ``target``, ``text``,
        ``changes`` (what the step changed), ``at_ms`` (time in the replay), ``state``."""
        self.reproduced: Optional[bool] = data.get("reproduced")
        """Whether simulating :attr:`replay_scenario` took the replayed order, state by
        state, and showed the same violation."""
        self.replay_note: Optional[str] = data.get("replay_note")
        """Why the replay does not follow :attr:`trace`, when it does not."""
        raw_replay_trace = data.get("replay_trace")
        self.replay_trace: Optional[list[dict[str, Any]]] = None if raw_replay_trace is None else list(raw_replay_trace)
        """When no timing makes the simulator take :attr:`trace`'s order (on several replicas
        a step would have to outlast another replica's longer ones): the order, to a
        violation of the same property, that :attr:`replay_scenario` follows instead
        (numbered actions like :attr:`trace`)."""

    @property
    def replay_scenario(self) -> Optional[Scenario]:
        """A scenario whose simulation performs the same actions in the same order —
        :attr:`trace`'s, or :attr:`replay_trace`'s when there is one: explicit arrival times
        and a linear cost model (1 ms steps when they keep the order, else coefficients
        solved for it). None if no such timing was found; see :attr:`replay_note`."""
        raw = self.data.get("replay_scenario")
        if raw is None:
            return None
        sc = Scenario(raw)
        sc.source = f"<counterexample {self.property}>"
        return sc

    def __repr__(self) -> str:
        return f"Violation(property={self.property!r}, length={self.length})"


class CheckResult:
    """The outcome of a model check."""

    def __init__(self, text: str) -> None:
        self._text = text
        self.data: dict[str, Any] = json.loads(text)
        d = self.data
        self.ok: bool = d["ok"]
        """No violation found and the whole state space explored."""
        self.complete: bool = d["complete"]
        self.stopped: Optional[str] = d["stopped"]
        self.states: int = d["states"]
        self.transitions: int = d["transitions"]
        self.max_depth: int = d["max_depth"]
        self.elapsed_s: float = d["elapsed_s"]
        self.states_per_s: float = d["states_per_s"]
        self.config: dict[str, Any] = d["config"]
        self.properties: dict[str, str] = {p["name"]: p["status"] for p in d["properties"]}
        """Property → ``pass`` / ``fail`` / ``unknown`` (search incomplete) / ``not_applicable``."""
        self.violations: list[Violation] = [Violation(v) for v in d["violations"]]
        self.petri: dict[str, Any] = d["petri"]
        """The policy's Petri net: places, transitions, P-invariants, bounds, reachability."""
        self.pnml: str = d["pnml"]
        """The net as PNML (XML)."""

    def to_json(self) -> str:
        """The result as the core produced it."""
        return self._text

    def __repr__(self) -> str:
        return f"CheckResult(ok={self.ok!r}, states={self.states!r}, violations={[v.property for v in self.violations]!r})"


def check(
    scenario: ScenarioLike,
    *,
    max_states: int = 2_000_000,
    max_seconds: Optional[float] = None,
    timeliness_steps: int = 2,
    progress: Optional[CheckProgressCallback] = None,
) -> CheckResult:
    """Model-check the scenario's scheduler: explore every order of arrivals and step
    completions (the scenario's arrival times and cost model are ignored), check the
    properties in every state, and return the shortest counterexample of each violation.

    The scenario must be small: at most 16 requests, 4 replicas and 64 KV blocks per
    replica (``scheduler.num_gpu_blocks`` is required). The search stops at ``max_states``
    states or ``max_seconds`` (then ``complete`` is False).
    """
    sc = _as_scenario(scenario)
    text, fmt = sc.payload()
    checker = _core.Checker(text, fmt, max_states, max_seconds, timeliness_steps)
    if progress is not None:
        progress(CheckProgress(*checker.progress()))
        while not checker.run(CHECK_SLICE_STATES):
            progress(CheckProgress(*checker.progress()))
        progress(CheckProgress(*checker.progress()))
    return CheckResult(checker.finish())


def bug_names() -> list[str]:
    """The bug classes ``scheduler.inject_bug`` accepts (mutation proof of the checker)."""
    return _core.bug_names()


class OpTime(NamedTuple):
    """One line of a step prediction: an operator summed over layers."""

    op: str
    ms: float
    source: str
    """Where the number came from: ``table``, ``interpolated``, ``roofline`` or ``model``."""


class StepPrediction(NamedTuple):
    """The predicted time of one step (see :func:`predict_step`)."""

    total_ms: float
    mode: str
    """``graph`` (one CUDA-graph replay) or ``eager``."""
    profile: Optional[str]
    """The GPU's calibration profile, or None when only the roofline applies."""
    breakdown: list[OpTime]

    def to_frame(self) -> pd.DataFrame:
        """The breakdown as a DataFrame (op, ms, source)."""
        import pandas as pd

        return pd.DataFrame(self.breakdown, columns=list(OpTime._fields))


def _resolve_files(data: dict[str, Any], base: Optional[Path]) -> bool:
    """Inline the file paths a scenario may hold (``topology``, ``cost_model.profile``,
    ``model.hf_config``), relative to ``base`` (``None``: the working directory), and make a
    trace file's path (``workload.trace.path``, read when the scenario runs) absolute.
    Returns whether anything changed."""
    workload = data.get("workload")
    trace = workload.get("trace") if isinstance(workload, Mapping) else None
    trace_path = (isinstance(workload, Mapping) and isinstance(trace, Mapping)
                  and isinstance(trace.get("path"), (str, os.PathLike)) and trace.get("text") is None)
    cm = data.get("cost_model")
    profile = isinstance(cm, Mapping) and isinstance(cm.get("profile"), (str, os.PathLike))
    model = data.get("model")
    hf_config = isinstance(model, Mapping) and isinstance(model.get("hf_config"), (str, os.PathLike))
    if data.get("topology") is None and not (trace_path or profile or hf_config):
        return False  # nothing to read: pathlib stays unloaded (the CLI's start-up)
    from pathlib import Path

    base = base if base is not None else Path.cwd()
    changed = resolve_topology(data, base)
    if trace_path:
        assert isinstance(workload, Mapping) and isinstance(trace, Mapping)
        path = Path(trace["path"])
        if not path.is_absolute():
            data["workload"] = {**workload, "trace": {**trace, "path": str(base / path)}}
            changed = True
    if profile:
        assert isinstance(cm, Mapping)
        data["cost_model"] = {**cm, "profile": load_profile(cm["profile"], base, "cost_model.profile")}
        changed = True
    if hf_config:
        data["model"] = _resolve_model(model, base)
        changed = True
    return changed


def _resolve_model(model: Any, base: Optional[Path] = None) -> Any:
    """A ``model`` entry with a ``hf_config`` path replaced by the parsed ``config.json``
    (relative to ``base`` when given); anything else unchanged."""
    if isinstance(model, Mapping) and isinstance(model.get("hf_config"), (str, os.PathLike)):
        return {**model, "hf_config": load_profile(model["hf_config"], base, "model.hf_config")}
    return model


def load_profile(
    profile: Union[str, "os.PathLike[str]", Mapping[str, Any]], base: Optional[Path] = None, field: str = "profile"
) -> Any:
    """A calibration profile given as a dict, or read from a JSON file path (relative to
    ``base`` when given)."""
    if isinstance(profile, Mapping):
        return dict(profile)
    from pathlib import Path

    path = Path(profile)
    if base is not None and not path.is_absolute():
        path = base / path
    return loads(read_text(path, field), "json", f"{path} (read as JSON)", field)


def predict_step(
    model: Union[str, Mapping[str, Any]],
    gpu: Union[str, Mapping[str, Any]],
    tp: int = 1,
    batch: Optional[Sequence[Mapping[str, Any]]] = None,
    cuda_graphs: bool = True,
    dtype: str = "bf16",
    fusion: str = "none",
    *,
    kv_dtype: str = "bf16",
    pp: int = 1,
    block_size: Optional[int] = None,
    profile: Union[None, str, "os.PathLike[str]", Mapping[str, Any]] = None,
    engine: str = "vllm",
) -> StepPrediction:
    """Predict the execution time of one step, with provenance per operator.

    ``batch`` lists the requests of the step: ``{"new_tokens": n, "context_tokens": c}``
    (a prefill of 2,048 fresh tokens is ``{"new_tokens": 2048, "context_tokens": 0}``, a
    decode at KV length L is ``{"new_tokens": 1, "context_tokens": L - 1}``; add
    ``"sampled": False`` for a prefill chunk that does not finish its prompt). ``model`` and
    ``gpu`` take preset names or dicts (a preset plus overrides); ``model`` also takes a
    Hugging Face id (``"meta-llama/Llama-3.1-8B"``) or ``{"hf_config": path or dict}`` (a
    ``config.json``). ``dtype``: bf16 | fp8 | int8 | int4 (weight-only); ``kv_dtype``: bf16 |
    fp8; ``engine``: vllm (vLLM v0.15's V1 engine: fused kernels, one attention call per
    layer, custom all-reduce, async scheduling; the default) | reference (the plain PyTorch
    engine of our H200 tables) | trtllm (TensorRT-LLM's PyTorch backend: FP8 GEMMs with
    their activation quantisation, FMHA/XQA attention, padded CUDA graphs for generation-only
    steps, the overlap scheduler; ``o1sim.presets()["engines"]``); ``fusion`` (reference
    engine only): none (every elementwise
    op its own kernels) | fine | coarse | hybrid. ``profile``: a
    calibration profile (a path to its JSON file, or the parsed dict) replacing the GPU's
    shipped one, e.g. one made with ``tools/make_profile.py`` from tables measured on your
    own GPU by ``benchmarks/gpu/reference_ops.py``. The simulator prices every step with this
    same model. Bad input raises :class:`ConfigError` naming the field.
    """
    request = {
        "model": _resolve_model(model),
        "gpu": gpu,
        "tp": tp,
        "pp": pp,
        "batch": list(batch or []),
        "cuda_graphs": cuda_graphs,
        "dtype": dtype,
        "kv_dtype": kv_dtype,
        "fusion": fusion,
        "engine": engine,
    }
    if block_size is not None:
        request["block_size"] = block_size
    if profile is not None:
        request["profile"] = load_profile(profile)
    out = json.loads(_core.predict_step_json(_encode(request)))
    ops = [OpTime(o["op"], o["ms"], o["source"]) for o in out["breakdown"]]
    return StepPrediction(out["total_ms"], out["mode"], out["profile"], ops)


def calibration_fidelity(gpu: str = "h200") -> Optional[list[dict[str, Any]]]:
    """Every row of the GPU's shipped calibration profile with the model's prediction from
    the full profile (``predicted_ms``) and with that row left out (``loo_ms``); None when
    the GPU has no profile."""
    text = _core.calibration_fidelity_json(gpu)
    return None if text is None else list(json.loads(text))
