"""Many-run benchmarks: a 1,000-point sweep of the default scenario, the same sweep on Ray
against local threads, how a 100,000-point plan spreads over a Ray cluster, Ray's cost per
task, and a Vidur-Search-sized question (the capacity of one deployment).

Targets: 1,000 points of the default scenario ≤ 30 s on 2 cores (issue 16); on Ray, the
per-point cost ≤ 1.2× the local backend's on the same CPUs, at 1,000 points (issue 30).
The Ray comparison runs local, Ray and Ray as it shipped before issue 30 (the whole
scenario's text with every point) interleaved, so all three see the same machine load,
and prints each as a ratio to local; the other times are also printed as a ratio to a
baseline measured in the same process (numpy sorting 1M floats).

    .venv/bin/python benchmarks/sweep.py            # everything (Ray parts skip without Ray)
    .venv/bin/python benchmarks/sweep.py --no-ray
    .venv/bin/python benchmarks/sweep.py --ray-only --repeats 1   # the quick Ray check
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import secrets
import shutil
import statistics
import tempfile
import time
import tomllib
from pathlib import Path
from typing import Callable

import numpy as np

import o1sim
from o1sim import _core
from o1sim.backends import batch_size, default_workers, run_local, run_one, run_ray
from o1sim.sweeps import (
    base_dict,
    expand,
    outcome_metrics,
    payload,
    rows_frame,
    run_point,
    seed_list,
    ship,
    validate_axes,
)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


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


def _old_chunk(texts: list[str]) -> list[object]:
    return [run_one(t) for t in texts]


def sweep_as_before(sc: o1sim.Scenario, grid: dict[str, list[object]], seeds: int, cpus: int) -> str:
    """The Ray sweep as it ran before issue 30, its rows as CSV: every point's whole scenario
    text built here and shipped with it, in contiguous chunks of about four tasks per CPU."""
    import ray

    data = base_dict(sc)
    points = expand(grid)
    validate_axes(data, points)
    jobs = [(p, s) for p in points for s in seed_list(seeds, int(data.get("seed", 0)))]
    texts = [payload(data, p.params, s) for p, s in jobs]
    chunk = max(1, -(-len(texts) // (4 * cpus)))
    remote = ray.remote(num_cpus=1)(_old_chunk)
    refs = [remote.remote(texts[lo:lo + chunk]) for lo in range(0, len(texts), chunk)]
    pending = list(refs)
    while pending:
        _, pending = ray.wait(pending, num_returns=1)
    outcomes = [o for r in refs for o in ray.get(r)]
    rows = []
    for (p, s), o in zip(jobs, outcomes):
        metrics, error, _ = outcome_metrics(o)
        rows.append({**p.params, "seed": s, **metrics, "error": error})
    return str(rows_frame(rows, list(points[0].params)).to_csv(index=False))


def cpu_s() -> float:
    """CPU seconds (user + system) of this process and every process under it, live or
    ended (a local Ray cluster's processes are this process's children)."""
    import psutil  # comes with Ray

    me = psutil.Process()
    total = sum(me.cpu_times()[:4])  # user, system and the ended children's
    for child in me.children(recursive=True):
        try:
            total += sum(child.cpu_times()[:2])
        except psutil.Error:
            pass
    return total


def ray_overhead(repeats: int) -> None:
    import ray

    cpus = default_workers()
    print(f"\n## Ray against local threads, the same {cpus} CPUs (a local Ray cluster of this machine)")
    tmp = tempfile.mkdtemp(prefix="o1rb")  # a private cluster: no other session's ray.init() finds it
    t0 = time.perf_counter()
    ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False, configure_logging=False, _temp_dir=tmp)
    print(f"ray.init (a new local cluster): {time.perf_counter() - t0:.2f} s, {int(ray.cluster_resources()['CPU'])} CPUs "
          "(once per session; not in the times below)")
    try:
        sc = o1sim.Scenario.default()
        grid = {"scheduler.policy": ["orca", "vllm", "sarathi", "o1pro"],
                "workload.arrival.rate": [4.0 + 0.5 * k for k in range(25)]}
        o1sim.sweep(sc, {"scheduler.policy": ["vllm"]}, seeds=2 * cpus, backend="ray")  # start the workers, import o1sim there
        data = base_dict(sc)
        points = expand(grid)
        jobs = [(p.params, s) for p in points for s in range(10)]
        shipment = ship(data, [p.params for p in points])
        variants = {
            "local": lambda: o1sim.sweep(sc, grid, seeds=10, workers=cpus).to_csv(index=False),
            "ray": lambda: o1sim.sweep(sc, grid, seeds=10, backend="ray").to_csv(index=False),
            "ray, as before": lambda: sweep_as_before(sc, grid, 10, cpus),
        }
        times: dict[str, list[float]] = {k: [] for k in variants}
        cpu: dict[str, list[float]] = {k: [] for k in variants}
        rows: dict[str, str] = {}
        for _ in range(repeats):  # interleaved: every variant sees the same machine load
            for name, fn in variants.items():
                c, t = cpu_s(), time.perf_counter()
                rows[name] = fn()
                times[name].append(time.perf_counter() - t)
                cpu[name].append(cpu_s() - c)
        n = len(jobs)
        local, local_cpu = min(times["local"]), min(cpu["local"])
        print(f"{n:,} points of the default scenario, best of {repeats} (median), interleaved; CPU: this process and")
        print("all its children (Ray's workers, raylet, GCS), the cheapest repeat, which a busy machine inflates least:")
        for name, ts in times.items():
            ratio, cpu_ratio = min(ts) / local, min(cpu[name]) / local_cpu
            mark = "" if name != "ray" else "  (target ≤ 1.2× local " + ("✓)" if ratio <= 1.2 else "✗)")
            print(f"  {name:<15} {min(ts):6.2f} s ({statistics.median(ts):.2f}) = {min(ts) / n * 1e3:5.2f} ms per point, "
                  f"{ratio:.2f}× local; CPU {min(cpu[name]) / n * 1e3:5.2f} ms per point, {cpu_ratio:.2f}× local{mark}")
        print(f"  rows equal to local's, byte for byte: Ray {rows['ray'] == rows['local']}, "
              f"as before {rows['ray, as before'] == rows['local']}")

        batch = batch_size(n, cpus)
        task_bytes = [len(pickle.dumps(jobs[lo:lo + batch])) for lo in range(0, n, batch)]
        per_params = statistics.mean(task_bytes) / batch
        print("\n## What travels to the nodes (bytes pickled for Ray), before and now")
        print(f"{'scenario':<44} {'before: per point':>17} {'1,000 pts':>10} {'100,000 pts':>12} "
              f"{'now: once per node':>19} {'per point':>10}")
        heavy = o1sim.Scenario.default().with_overrides({
            "cost_model.profile": str(ROOT / "crates" / "sim-core" / "profiles" / "h200.json"),
            "workload": {"trace": {"path": str(ROOT / "examples" / "traces" / "conversation.jsonl")}}})
        for name, scenario in (("the default (2,000 generated requests)", sc),
                               ("the default + a profile file + a trace file", heavy)):
            d = base_dict(scenario)
            one = len(payload(d, jobs[0][0], 0)) + sum(len(v) for v in ship(d).traces.values())  # the text, the trace
            once = len(pickle.dumps(ship(d), protocol=5))
            print(f"{name:<44} {one / 1e3:>14.1f} kB {one * 1e3 / 1e6:>7.1f} MB {one * 1e5 / 1e9:>9.2f} GB "
                  f"{once / 1e3:>16.1f} kB {per_params:>7.0f} B")
        print("   (before, a trace file did not travel at all: a sweep of it failed; its size is counted as if it had)")
        once = len(pickle.dumps(shipment, protocol=5))

        per_point = min(cpu["ray"]) / n  # CPU-seconds of one point on Ray, Ray's own processes included
        print("\n## A 100,000-point plan on a Ray cluster: how it is spread (batch_size(); the time: this machine's")
        print(f"   {per_point * 1e3:.1f} ms of CPU per point on Ray, for a cluster of CPUs as fast, every one busy)")
        print(f"{'cluster CPUs':>12} {'tasks':>7} {'points/task':>11} {'kB/task':>8} {'wall (est.)':>12}")
        for c in (cpus, 64, 256, 1024):
            b = batch_size(100_000, c)
            tasks = -(-100_000 // b)
            rounds = -(-tasks // c)
            print(f"{c:>12,} {tasks:>7,} {b:>11} {b * per_params / 1e3:>8.1f} {rounds * b * per_point:>10.1f} s")
        print(f"   and each node fetches the shipment once ({once / 1e3:.1f} kB for the default scenario)")
    finally:
        ray.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)


def per_task_cost(repeats: int) -> None:
    """Ray's cost per task, from tiny runs: one task per run against batches."""
    import ray

    tmp = tempfile.mkdtemp(prefix="o1rb")
    ray.init(num_cpus=default_workers(), include_dashboard=False, log_to_driver=False, configure_logging=False,
             _temp_dir=tmp)
    try:
        tiny = {"seed": 0, "model": "llama-3-8b", "gpu": "h100",
                "workload": {"num_requests": 1, "arrival": {"kind": "constant", "rate": 1.0},
                             "prompt": {"kind": "fixed", "value": 16}, "output": {"kind": "fixed", "value": 2}}}
        n = 400
        shipment = ship(base_dict(tiny))
        jobs = [({}, s) for s in range(n)]
        run_ray(shipment, jobs[:20], run_point, batch=1)  # warm the workers
        local = min(timed(lambda: run_local(shipment, jobs, run_point, default_workers())) for _ in range(repeats))
        one = min(timed(lambda: run_ray(shipment, jobs, run_point, batch=1)) for _ in range(repeats))
        batched = min(timed(lambda: run_ray(shipment, jobs, run_point)) for _ in range(repeats))
        print(f"\n## Ray's cost per task: {n} one-request runs: local threads {local * 1e3:.1f} ms; Ray, one task per run "
              f"{one * 1e3:.0f} ms → {(one - local) / n * 1e3:.2f} ms per task; Ray in batches of "
              f"{batch_size(n, default_workers())} {batched * 1e3:.0f} ms")
    finally:
        ray.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)


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
    ap.add_argument("--ray-only", action="store_true", help="only the Ray measurements")
    ap.add_argument("--repeats", type=int, default=3, help="interleaved repeats of each Ray comparison (default 3)")
    args = ap.parse_args()
    if args.no_ray and args.ray_only:
        ap.error("--no-ray and --ray-only exclude each other")
    if args.repeats < 1:
        ap.error("--repeats must be at least 1")
    base = baseline_s()
    print(f"o1sim {_core.__version__} sweep benchmarks on {default_workers()} CPU(s); baseline (numpy sort of 1M "
          f"floats, same process): {base * 1e3:.2f} ms")
    if not args.ray_only:
        thousand_points(base)
        vidur_search(base)
    if not args.no_ray:
        # Each Ray cluster here is private: a token of its own, read by the nodes and this
        # driver from the environment (set before Ray is imported), so nothing is written to
        # ~/.ray/auth_token, which Ray would then use for every later cluster on the machine.
        os.environ.setdefault("RAY_AUTH_MODE", "token")
        os.environ.setdefault("RAY_AUTH_TOKEN", secrets.token_hex(32))
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        try:
            import ray  # noqa: F401
        except ImportError:
            print("\n## Ray: not installed (pip install 'o1sim[ray]'); skipped")
            return
        ray_overhead(args.repeats)
        per_task_cost(args.repeats)


if __name__ == "__main__":
    main()

