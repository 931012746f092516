"""Time the Python front end on the default scenario: run, result tables, JSON.

Prints wall-clock times measured on this machine; no targets are asserted here.
Run with `make bench`.
"""

from __future__ import annotations

import statistics
import time
from typing import Callable

import o1sim


def timed(label: str, fn: Callable[[], object], repeat: int = 5) -> None:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    print(f"{label:<40} median {statistics.median(times) * 1e3:9.3f} ms   min {min(times) * 1e3:9.3f} ms   (n={repeat})")


def main() -> None:
    scenario = o1sim.Scenario.default()
    result = o1sim.simulate(scenario)
    print(f"default scenario: {result.summary.get('num_requests')} requests")
    timed("simulate(default)", lambda: o1sim.simulate(scenario))
    timed("simulate(default, progress=...)", lambda: o1sim.simulate(scenario, progress=lambda p: None))
    timed("Result.requests (DataFrame)", lambda: o1sim.Result(result.raw).requests)
    timed("Result.to_json()", result.to_json)


if __name__ == "__main__":
    main()
