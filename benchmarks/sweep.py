"""Many-run benchmarks: a 1,000-point sweep of the default scenario, Ray's cost per task,
and a Vidur-Search-sized question (the capacity of one deployment).

Targets (issue 16): 1,000 points of the default scenario ≤ 30 s on 2 cores. Every time is
also printed as a ratio to a baseline measured in the same process (numpy sorting 1M
floats), which moves with the machine.

    .venv/bin/python benchmarks/sweep.py            # everything (Ray parts skip without Ray)
    .venv/bin/python benchmarks/sweep.py --no-ray
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import tomllib
from pathlib import Path
from typing import Callable

import numpy as np

import o1sim
from o1sim import _core
from o1sim.backends import default_workers, run_local, run_ray
from o1sim.sweeps import payload

HERE = Path(__file__).resolve().parent


def timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def baseline_s() -> float:
    data = np.random.default_rng(0).random(1_000_000)
    return min(timed(lambda: np.sort(data)) for _ in range(7))


def thousand_points(base_s: float) -> None:
    print("\n## 1,000 points of the default scenario (Llama-3-70B TP 4 × 2 on H200, 2,000 requests each)")
    print("   grid: 4 policies × 25 arrival rates (4–16 req/s) × 10 seeds = 1,000 runs")
    sc = o1sim.Scenario.default()
    grid = {"scheduler.policy": ["orca", "vllm", "sarathi", "o1pro"],
            "workload.arrival.rate": [4.0 + 0.5 * k for k in range(25)]}
    one = timed(lambda: o1sim.simulate(sc))
    print(f"one run alone: {one * 1e3:.1f} ms")
    cpus = default_workers()
    results = {}
    for workers in sorted({1, cpus}):
        t0 = time.perf_counter()
        df = o1sim.sweep(sc, grid, seeds=10, workers=workers)
        wall = time.perf_counter() - t0
        results[workers] = (wall, df)
        print(f"workers {workers}: {wall:6.2f} s = {wall / len(df) * 1e3:.2f} ms per run "
              f"({wall / base_s:,.0f}× baseline; target ≤ 30 s on 2 cores)")
    if len(results) > 1:
        (w1, d1), (wn, dn) = results[1], results[cpus]
        same = d1.to_csv(index=False) == dn.to_csv(index=False)
        print(f"speed-up on {cpus} cores: {w1 / wn:.2f}×; rows identical byte for byte: {same}")


def ray_overhead(base_s: float) -> None:
    try:
        import ray
    except ImportError:
        print("\n## Ray: not installed (pip install 'o1sim[ray]'); skipped")
        return
    print("\n## Ray: cost per task on a local cluster (this machine's CPUs)")
    t0 = time.perf_counter()
    ray.init(include_dashboard=False, log_to_driver=False, configure_logging=False)
    print(f"ray.init (a new local cluster): {time.perf_counter() - t0:.2f} s, "
          f"{int(ray.cluster_resources().get('CPU', 0))} CPUs")
    tiny = {"seed": 0, "model": "llama-3-8b", "gpu": "h100",
            "workload": {"num_requests": 1, "arrival": {"kind": "constant", "rate": 1.0},
                         "prompt": {"kind": "fixed", "value": 16}, "output": {"kind": "fixed", "value": 2}}}
    n = 400
    texts = [payload(tiny, {}, s) for s in range(n)]
    run_ray(texts[:20], chunk=1)  # warm the workers
    local = min(timed(lambda: run_local(texts, default_workers())) for _ in range(3))
    per_task = []
    for _ in range(3):
        per_task.append(timed(lambda: run_ray(texts, chunk=1)))
    chunked = min(timed(lambda: run_ray(texts)) for _ in range(3))
    best = min(per_task)
    print(f"{n} one-request runs: local threads {local * 1e3:.1f} ms; Ray, one task per run {best * 1e3:.0f} ms "
          f"(median {statistics.median(per_task) * 1e3:.0f}) → {(best - local) / n * 1e3:.2f} ms per task; "
          f"Ray in chunks (4 tasks per CPU) {chunked * 1e3:.0f} ms")
    sc = o1sim.Scenario.default()
    grid = {"scheduler.policy": ["orca", "vllm", "sarathi", "o1pro"], "workload.arrival.rate": [4.0 + 0.5 * k for k in range(25)]}
    wall = timed(lambda: o1sim.sweep(sc, grid, seeds=10, backend="ray"))
    print(f"the 1,000-point sweep on Ray (chunked): {wall:.2f} s ({wall / base_s:,.0f}× baseline)")
    ray.shutdown()


def vidur_search(base_s: float) -> None:
    print("\n## A Vidur-Search-sized question: the capacity of one deployment")
    with open(HERE / "scenarios" / "vidur_s1.toml", "rb") as f:
        sc = tomllib.load(f)
    sc["workload"]["arrival"].pop("max_gap_s")  # Vidur's 3/QPS gap cap holds for 10 QPS only
    print("   Llama-3-8B on one A100-80G, vLLM, 1,000 requests of 512 + 128 tokens (Vidur's S1), Poisson;")
    print("   Vidur-Search judges a QPS by a quantile of the scheduling delay: here P99 queueing ≤ 5 s,")
    print("   3 seeds per rate, tolerance 2%")
    for slo in ({"queueing_p99_ms": 5000}, {"ttft_p99_ms": 2000, "tpot_p99_ms": 100}):
        t0 = time.perf_counter()
        c = o1sim.capacity(sc, slo)
        wall = time.perf_counter() - t0
        print(f"SLO {json.dumps(slo)}: {c.rate:.3f} req/s ({c.status}, bracket [{c.lo:.3f}, {c.hi:.3f})), "
              f"{len(c.points)} runs, {len(c.rates)} rates in {wall:.2f} s ({wall / base_s:,.0f}× baseline)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--no-ray", action="store_true", help="skip the Ray measurements")
    args = ap.parse_args()
    base = baseline_s()
    print(f"o1sim {_core.__version__} sweep benchmarks on {default_workers()} CPU(s); baseline (numpy sort of 1M "
          f"floats, same process): {base * 1e3:.2f} ms")
    thousand_points(base)
    vidur_search(base)
    if not args.no_ray:
        ray_overhead(base)


if __name__ == "__main__":
    main()

