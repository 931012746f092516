"""Fuzzing the Python API with Hypothesis: mutated scenarios (every field of the goldens,
the reproducers and the presets set to nasty values, removed, renamed, nested deep), mutated
scenario text, mutated model checks, and garbage for the topology and step-prediction
calls. Each case must end in a result whose requests are all accounted for, or in a
``SimError`` of a user-facing kind: never an ``InternalError``, never another exception,
never a hang (``limits.max_seconds`` is forced low and each case has a deadline), and no
case's peak memory exceeds the forced ``limits.max_memory_gib`` above what the process held
when it started (Linux: the peak is reset before each case through ``/proc/self/clear_refs``
and read from ``VmHWM``; elsewhere the process's lifetime peak is used, a stricter test).

CI runs a few hundred cases (seconds); ``O1SIM_FUZZ_CASES=N`` runs N per test (``make
fuzz``), and the counts go to ``benchmarks/out/fuzz-python.json``.
"""

from __future__ import annotations

import copy
import json
import math
import os
import resource
import time
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import o1sim

ROOT = Path(__file__).resolve().parents[1]
CASES = int(os.environ.get("O1SIM_FUZZ_CASES", "0")) or None
#: Forced on every fuzzed scenario: small enough that a case can never hold much memory or
#: run long, so the suite runs in seconds and memory can be checked against it.
LIMITS = {"max_memory_gib": 0.5, "max_seconds": 3.0}
LIMIT_KB = int(LIMITS["max_memory_gib"] * (1 << 20))

STATS: Counter[str] = Counter()
START_KB = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _settings(ci: int, share: int = 1) -> Any:
    """``ci`` examples in CI, ``O1SIM_FUZZ_CASES / share`` in a long run."""
    return settings(max_examples=max(1, CASES // share) if CASES else ci, deadline=timedelta(seconds=30), database=None, derandomize=CASES is None,
                    suppress_health_check=list(HealthCheck), print_blob=True)


def _seeds() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for p in sorted((ROOT / "tests" / "golden").glob("*.toml")) + sorted((ROOT / "tests" / "repro").glob("*")):
        try:
            out.append(o1sim.Scenario.from_file(p).to_dict())
        except o1sim.SimError:
            continue  # a reproducer refused as it loads (a NUL in a path) seeds nothing
    out.append(o1sim.default_scenario())
    from o1sim.dashboard.scenarios import PRESETS, preset_scenario

    out += [preset_scenario(name).to_dict() for name in PRESETS]
    return out


SEEDS = _seeds()

#: Values no field expects, and some that many do.
NASTY: list[Any] = [
    -1, 0, 1, 2, 3, 7, 16, 1000, 2**31, 2**32 + 1, 2**53, 2**63 - 1, 2**64 + 5, -(2**63), 1e308, -1e308, 1e-300,
    0.5, 1.5, 1e9, 1e12, 1e300, "", "x", "nan", "inf", "vllm", "disagg", "hgx-h200", "llama-3-8b", "h200", "poisson",
    "fixed", "link_down", "gpu0", "nvswitch0", [], [1], [0, 0], {}, {"kind": "fixed"}, None, True, False,
    "x" * 5000, [{"arrival_ms": 0, "prompt_tokens": 1, "output_tokens": 1}] * 3,
]

#: A NASTY value is copied as it is drawn: the lists and tables among them are mutable, and a
#: later mutation of a scenario holding one (a key added to ``{}``, an item deleted from
#: ``[1]``) changed NASTY itself, so that later cases drew from a different list and
#: Hypothesis reported FlakyStrategyDefinition after ~100k cases (``make fuzz``).
json_leaf = st.one_of(
    st.sampled_from(NASTY).map(copy.deepcopy), st.integers(min_value=-(2**70), max_value=2**70), st.floats(allow_nan=False),
    st.floats(min_value=0, max_value=1e6), st.text(max_size=20), st.booleans(), st.none())
json_value = st.recursive(json_leaf, lambda kids: st.one_of(st.lists(kids, max_size=4),
                                                           st.dictionaries(st.text(max_size=8), kids, max_size=4)),
                          max_leaves=12)


def _paths(v: Any, at: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield at
    if len(at) >= 40:
        # A value an earlier "deep" mutation nested hundreds of levels: its paths stop here
        # (walking them hit the harness's own recursion limit; o1sim's depth limit is tested
        # by the deep values themselves).
        return
    if isinstance(v, dict):
        for k, x in v.items():
            yield from _paths(x, (*at, k))
    elif isinstance(v, list):
        for i, x in enumerate(v[:3]):
            yield from _paths(x, (*at, i))


def _get(v: Any, path: tuple[Any, ...]) -> Any:
    for p in path:
        v = v[p]
    return v


def _deep(n: int, leaf: Any) -> Any:
    for i in range(n):
        leaf = {"a": leaf} if i % 2 else [leaf]
    return leaf


@st.composite
def scenarios(draw: Any, seeds: Any = None) -> dict[str, Any]:
    sc = json.loads(json.dumps(draw(st.sampled_from(seeds or SEEDS))))
    # Mostly one mutation: a scenario broken in one place still runs often enough to fuzz
    # the simulation, not only validation.
    for _ in range(draw(st.sampled_from([1, 1, 1, 2, 3]))):
        op = draw(st.sampled_from(["nudge"] * 5 + ["set", "set", "delete", "unknown", "deep", "grow"]))
        paths = [p for p in _paths(sc) if p]
        numeric = [p for p in paths if isinstance(_get(sc, p), (int, float)) and not isinstance(_get(sc, p), bool)]
        if op == "nudge" and numeric:
            paths = numeric
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent, key = _get(sc, path[:-1]), path[-1]
        old = parent[key]
        if op == "nudge" and isinstance(old, (int, float)) and not isinstance(old, bool):
            # A plausible value of the same type: the scenario often still runs.
            if isinstance(old, int):
                parent[key] = draw(st.integers(min_value=0, max_value=2 * abs(old) + 8))
            else:
                # Drawn as an integer fraction: a float draw bounded by a data-dependent
                # maximum made Hypothesis report FlakyStrategyDefinition after ~200k cases.
                parent[key] = draw(st.integers(0, 1 << 20)) / (1 << 20) * (2 * abs(old) + 1.0)
        elif op in ("set", "nudge"):
            parent[key] = draw(json_value)
        elif op == "delete":
            del parent[key]
        elif op == "unknown" and isinstance(parent, dict):
            parent[draw(st.text(min_size=1, max_size=12))] = draw(json_leaf)
        elif op == "deep":
            parent[key] = _deep(draw(st.sampled_from([10, 70, 130, 600])), draw(json_leaf))
        elif op == "grow" and isinstance(parent[key], list) and parent[key]:
            parent[key] = parent[key] * draw(st.integers(2, 50))
    if not isinstance(sc, dict):
        return {"model": sc}
    sc["limits"] = dict(LIMITS)
    return sc


def _typed(e: BaseException) -> None:
    """A user-facing error kind, counted; anything else fails the case."""
    assert isinstance(e, o1sim.SimError) and not isinstance(e, o1sim.InternalError), f"{type(e).__name__}: {e}"
    STATS[type(e).__name__] += 1


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def _resettable() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        _status_kb("VmHWM")
        return True
    except OSError:
        return False


PER_CASE = _resettable()
CASE_BASE_KB = START_KB


def _begin_case() -> None:
    """Start measuring one case's peak: the process's peak RSS reset to what it holds now."""
    global CASE_BASE_KB
    if PER_CASE:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        CASE_BASE_KB = _status_kb("VmRSS")


def _memory_ok() -> None:
    if PER_CASE:
        peak, base = _status_kb("VmHWM"), CASE_BASE_KB
    else:
        peak, base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, START_KB
    STATS["peak_rss_kb"] = max(STATS["peak_rss_kb"], peak)
    STATS["peak_case_growth_kb"] = max(STATS["peak_case_growth_kb"], peak - base)
    assert peak - base < LIMIT_KB, f"peak RSS {peak} kB, {peak - base} kB over the case's start, limit {LIMIT_KB} kB"


def _run(make: Any) -> None:
    """Build the scenario (``make()``) and simulate it: both may raise."""
    _begin_case()
    STATS["cases"] += 1
    started = time.perf_counter()
    try:
        r = o1sim.simulate(make())
    except Exception as e:  # noqa: BLE001 - anything but a typed SimError fails
        _typed(e)
    else:
        s = r.summary
        assert s["finished"] + s["rejected"] == s["num_requests"] == len(r.requests)
        STATS["runs"] += 1
    ms = int(1000 * (time.perf_counter() - started))
    STATS["slowest_case_ms"] = max(STATS["slowest_case_ms"], ms)
    _memory_ok()


@_settings(300)
@given(scenarios())
def test_mutated_scenarios_end_in_a_result_or_a_typed_error(sc: dict[str, Any]) -> None:
    _run(lambda: o1sim.Scenario(sc))


@st.composite
def texts(draw: Any) -> tuple[str, str]:
    """Mutated scenario text, the forced limits added after the mutation (so that a case's
    memory limit is always the forced one: a mutated limit would be another)."""
    sc = draw(st.sampled_from(SEEDS))
    fmt = draw(st.sampled_from(["toml", "json"]))
    text = json.dumps(sc) if fmt == "json" else _toml(sc)
    b = bytearray(text.encode())
    for _ in range(draw(st.integers(1, 6))):
        at = draw(st.integers(0, max(0, len(b) - 1)))
        op = draw(st.integers(0, 3))
        if op == 0 and b:
            del b[at]
        elif op == 1 and b:
            b[at] = draw(st.sampled_from(list(b"0123456789-.e\"[]{}=,x \n#'")))
        elif op == 2:
            b[at:at] = draw(st.binary(min_size=1, max_size=4))
        else:
            b = b[:at]
    body = b.decode("utf-8", errors="replace")
    # The limits go first, untouched by the mutation (the seeds have none of their own).
    if fmt == "toml":
        return f"limits = {{ max_memory_gib = {LIMITS['max_memory_gib']}, max_seconds = {LIMITS['max_seconds']} }}\n{body}", fmt
    if body.startswith("{"):
        return '{"limits": ' + json.dumps(LIMITS) + ("," if body[1:].strip()[:1] not in ("}", "") else "") + body[1:], fmt
    return body, fmt


def _toml(v: dict[str, Any]) -> str:
    def val(x: Any) -> str:
        if isinstance(x, bool):
            return "true" if x else "false"
        if isinstance(x, str):
            return json.dumps(x)
        if isinstance(x, float) and not math.isfinite(x):
            return "nan"
        if isinstance(x, (int, float)):
            return repr(x)
        if isinstance(x, list):
            return "[" + ", ".join(val(i) for i in x) + "]"
        if isinstance(x, dict):
            return "{ " + ", ".join(f"{json.dumps(k)} = {val(i)}" for k, i in x.items()) + " }"
        return '""'
    return "".join(f"{json.dumps(k)} = {val(x)}\n" for k, x in v.items() if k != "limits")


@_settings(200)
@given(texts())
def test_mutated_scenario_text_ends_in_a_result_or_a_typed_error(case: tuple[str, str]) -> None:
    text, fmt = case
    _run(lambda: o1sim.Scenario.from_text(text, fmt))


CHECK_SEED = o1sim.Scenario.from_text(o1sim._core.default_check_toml(), "toml").to_dict()


@_settings(80, share=5)
@given(st.data())
def test_mutated_model_checks_end_in_a_result_or_a_typed_error(data: Any) -> None:
    sc = data.draw(scenarios([CHECK_SEED]))
    _begin_case()
    STATS["cases"] += 1
    try:
        r = o1sim.check(sc, max_states=data.draw(st.sampled_from([1, 500, 3000])), max_seconds=2)
        assert r.states >= 1
        STATS["checks"] += 1
    except Exception as e:  # noqa: BLE001
        _typed(e)
    _memory_ok()


@_settings(150)
@given(st.data())
def test_topology_and_prediction_garbage_gives_typed_errors(data: Any) -> None:
    _begin_case()
    STATS["cases"] += 1
    which = data.draw(st.sampled_from(["expand", "routes", "predict"]))
    try:
        if which == "expand":
            o1sim.topology.expand(data.draw(st.one_of(st.sampled_from(o1sim.topology_presets()), json_value)))
        elif which == "routes":
            o1sim.routes(data.draw(st.sampled_from(["hgx-h200", "2x-hgx-h200-ib"])), data.draw(st.text(max_size=8)),
                         data.draw(st.sampled_from(["gpu0", "gpu1", "n0.gpu0", "nvswitch0"])),
                         down=data.draw(st.lists(st.tuples(st.text(max_size=6), st.text(max_size=6)), max_size=2)))
        else:
            batch = data.draw(st.lists(st.fixed_dictionaries({"new_tokens": json_leaf, "context_tokens": json_leaf}),
                                       max_size=3))
            o1sim.predict_step(data.draw(st.sampled_from(["llama-3-8b", "llama-3-70b", "nope"])),
                               data.draw(st.sampled_from(["h200", "h100", "x"])), tp=data.draw(st.integers(-2, 9)),
                               batch=batch)
    except Exception as e:  # noqa: BLE001
        _typed(e)
    _memory_ok()


@pytest.fixture(scope="module", autouse=True)
def _report() -> Iterator[None]:
    yield
    out = ROOT / "benchmarks" / "out"
    out.mkdir(parents=True, exist_ok=True)
    stats = {**STATS, "start_rss_kb": START_KB, "limit_kb": LIMIT_KB, "per_case_peak": PER_CASE}
    (out / "fuzz-python.json").write_text(json.dumps(stats, indent=2, sort_keys=True))


def test_drawing_scenarios_leaves_the_nasty_values_alone() -> None:
    """Mutating a drawn scenario must not reach the shared NASTY values (which made long
    runs report FlakyStrategyDefinition)."""
    before = json.dumps(NASTY)

    @settings(max_examples=300, database=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(scenarios())
    def mutate(sc: dict[str, Any]) -> None:
        for p in [p for p in _paths(sc) if p]:
            v = _get(sc, p)
            if isinstance(v, dict):
                v["mutated"] = 1
            elif isinstance(v, list):
                v.append(1)

    mutate()
    assert json.dumps(NASTY) == before
