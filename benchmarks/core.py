"""Core benchmarks: scheduler iterations, simulated requests/s, scaling to 1M requests,
and the Vidur baseline scenarios S1-S4 side by side.

Machines here are noisy, so every time is the best of several runs and is also printed
as a ratio to a fixed baseline measured in the same process (sorting 1M floats with
numpy), which moves with the machine. Scaling runs each size in a fresh process so that
its peak memory is its own.

    .venv/bin/python benchmarks/core.py            # everything (about a minute)
    .venv/bin/python benchmarks/core.py --quick    # skip the 1M-request run
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any, Callable

import numpy as np

from o1sim import _core

HERE = Path(__file__).resolve().parent
SCENARIOS = HERE / "scenarios"

# Vidur (microsoft/vidur @ 7d47513) on a 2-core, 24 GiB machine of this project's kind,
# measured 2026-11-29: wall time of the whole command, the part spent simulating, and its
# predictions (ms unless noted). Source: the project's shared data,
# vidur-profiling/BASELINE.md.
VIDUR = {
    "S1": {"wall_s": 28.8, "sim_s": 1.0, "ttft": (71.2, 51.5, 125.0, 227.9), "tpot": (22.3, 21.7, 27.9, 32.7),
           "e2e_s": (2.926, 4.269), "batch": (24, 63)},
    "S2": {"wall_s": 73.8, "sim_s": 15.0, "ttft": (73.6, 51.6, 131.4, 235.9), "tpot": (23.6, 23.2, 28.9, 34.3),
           "e2e_s": (3.095, 4.466), "batch": (27, 68)},
    "S3": {"wall_s": 25.6, "sim_s": 2.0, "ttft": (92.7, 88.8, 138.7, 207.3), "tpot": (18.3, 17.9, 21.3, 23.8),
           "e2e_s": (2.429, 3.153), "batch": (22, 47)},
    "S4-sarathi": {"wall_s": None, "sim_s": None, "ttft": (2926, 2129, 4643, 8545), "tpot": (30.6, 28.5, 46.0, 57.8),
                   "e2e_s": (18.62, 34.16), "batch": (3, 13)},
    "S4-vllm": {"wall_s": None, "sim_s": None, "ttft": (2115, 1650, 3216, 5248), "tpot": (34.4, 31.6, 54.0, 70.7),
                "e2e_s": (19.71, 39.23), "batch": (3, 15)},
}
VIDUR_FILES = {"S1": "vidur_s1", "S2": "vidur_s2", "S3": "vidur_s3", "S4-sarathi": "vidur_s4_sarathi",
               "S4-vllm": "vidur_s4_vllm"}


def load(name: str) -> dict[str, Any]:
    with open(SCENARIOS / f"{name}.toml", "rb") as f:
        return tomllib.load(f)


def run(scenario: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    """Wall seconds of build + run (parse included), and the summary."""
    text = json.dumps(scenario)
    t0 = time.perf_counter()
    result = _core.Simulation(text, "json").finish()
    wall = time.perf_counter() - t0
    return wall, json.loads(result.summary_json())


def best(fn: Callable[[], float], repeat: int) -> float:
    return min(fn() for _ in range(repeat))


def baseline_s() -> float:
    data = np.random.default_rng(0).random(1_000_000)
    return best(lambda: _timed(lambda: np.sort(data)), 7)


def _timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def run_only(scenario: dict[str, Any]) -> float:
    """Wall seconds of the run alone (the scenario parsed and built beforehand)."""
    sim = _core.Simulation(json.dumps(scenario), "json")
    t0 = time.perf_counter()
    sim.finish()
    return time.perf_counter() - t0


def iterations(base: float) -> None:
    print("\n## 10,000 scheduler iterations (vLLM policy, calibrated step model, whole engine loop)")
    print("   run = the iterations alone; build = parsing, memory plan, profile grids (once per run)")
    print(f"{'batch':>6} {'steps':>7} {'run ms / 10k':>13} {'build ms':>9} {'× baseline':>11} {'target':>8}")
    for batch in (1, 8, 16, 32, 128):
        sc = load("iterations_10k")
        sc["workload"]["num_requests"] = batch
        total = best(lambda: run(sc)[0], 15)
        wall = best(lambda: run_only(sc), 15)
        steps = run(sc)[1]["steps"]
        per10k = wall / steps * 10_000 * 1e3
        print(f"{batch:>6} {steps:>7} {per10k:>13.3f} {(total - wall) * 1e3:>9.3f} {wall / base:>11.3f} "
              f"{'≤ 2 ms':>8}")


def scale_child(n: int) -> None:
    """Run in a fresh process: print wall time and peak RSS growth of one run."""
    sc = load("scale")
    sc["workload"]["num_requests"] = n
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    wall, summary = run(sc)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"wall_s": wall, "rss_before_mb": before / 1024, "rss_peak_mb": after / 1024,
                      "steps": summary["steps"], "finished": summary["finished"]}))


def scaling(quick: bool) -> None:
    print("\n## Scaling: 64 replicas of Llama-3-8B/H100, 640 req/s (fresh process per size)")
    print(f"{'requests':>10} {'wall s':>8} {'req/s simulated':>16} {'µs / request':>13} {'peak RSS MB':>12} "
          f"{'Δ RSS MB':>9} {'steps':>10}")
    sizes = [10_000, 100_000] + ([] if quick else [1_000_000])
    per_req = []
    for n in sizes:
        out = subprocess.run([sys.executable, __file__, "--scale-child", str(n)], check=True,
                             capture_output=True, text=True).stdout
        r = json.loads(out)
        per_req.append(r["wall_s"] / n)
        print(f"{n:>10,} {r['wall_s']:>8.3f} {n / r['wall_s']:>16,.0f} {r['wall_s'] / n * 1e6:>13.3f} "
              f"{r['rss_peak_mb']:>12.1f} {r['rss_peak_mb'] - r['rss_before_mb']:>9.1f} {r['steps']:>10,}")
    print(f"cost per request, largest vs smallest size: {per_req[-1] / per_req[0]:.2f}× "
          "(1.00 = perfectly linear); targets: 1M requests ≤ 10 s and ≤ 1 GB")


def vidur(base: float) -> None:
    print("\n## Vidur baseline scenarios (Llama-3-8B on A100-80G; Vidur's numbers recorded on this machine kind)")
    print(f"{'run':<11} {'o1sim ms':>9} {'× baseline':>11} {'Vidur wall s':>13} {'speed-up':>10} "
          f"{'Vidur sim s':>12} {'speed-up':>10}")
    rows = {}
    for key, fname in VIDUR_FILES.items():
        sc = load(fname)
        wall = best(lambda: run(sc)[0], 5)
        rows[key] = run(sc)[1]
        v = VIDUR[key]
        ws = f"{v['wall_s']:.1f}" if v["wall_s"] else "—"
        wr = f"{v['wall_s'] / wall:,.0f}×" if v["wall_s"] else "—"
        ss = f"{v['sim_s']:.1f}" if v["sim_s"] else "—"
        sr = f"{v['sim_s'] / wall:,.0f}×" if v["sim_s"] else "—"
        print(f"{key:<11} {wall * 1e3:>9.2f} {wall / base:>11.3f} {ws:>13} {wr:>10} {ss:>12} {sr:>10}")
    print("\nPredictions, o1sim / Vidur (ms; E2E in s)")
    print(f"{'run':<11} {'TTFT mean':>15} {'TTFT p50':>15} {'TTFT p99':>15} {'TPOT mean':>13} {'TPOT p99':>13} "
          f"{'E2E mean':>13} {'E2E p99':>13} {'batch mean|max':>15}")
    for key, s in rows.items():
        v = VIDUR[key]
        t, p, e = s["ttft_ms"], s["tpot_ms"], s["e2e_ms"]
        print(f"{key:<11} {t['mean']:>7.1f}/{v['ttft'][0]:<7.1f} {t['p50']:>7.1f}/{v['ttft'][1]:<7.1f} "
              f"{t['p99']:>7.1f}/{v['ttft'][3]:<7.1f} {p['mean']:>6.1f}/{v['tpot'][0]:<6.1f} "
              f"{p['p99']:>6.1f}/{v['tpot'][3]:<6.1f} {e['mean'] / 1e3:>6.2f}/{v['e2e_s'][0]:<6.2f} "
              f"{e['p99'] / 1e3:>6.2f}/{v['e2e_s'][1]:<6.2f} {s['mean_batch_size']:>5.1f}|{s['max_batch_size']:<3}"
              f"({v['batch'][0]}|{v['batch'][1]})")


def prefix_caching_cost(s2: dict[str, Any]) -> None:
    """S2 with prefix caching on (vLLM v1's default) against off, interleaved best-of runs
    in the same process: S2's prompts share nothing, so what caching costs here is its
    bookkeeping (the free queue, reference counts, the lookups of preempted requests)."""
    on = json.loads(json.dumps(s2))
    on.setdefault("scheduler", {})["enable_prefix_caching"] = True
    off = json.loads(json.dumps(s2))
    off.setdefault("scheduler", {})["enable_prefix_caching"] = False
    t_on, t_off = [], []
    for _ in range(9):
        t_off.append(run_only(off))
        t_on.append(run_only(on))
    a, b = min(t_on), min(t_off)
    s_on, s_off = run(on)[1], run(off)[1]
    print(f"\n## Prefix caching on S2: {a * 1e3:.2f} ms on vs {b * 1e3:.2f} ms off = {a / b:.3f}× "
          f"(target ≤ 1.30×; preemptions {s_on['preemptions']} vs {s_off['preemptions']}, "
          f"steps {s_on['steps']} vs {s_off['steps']})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="skip the 1M-request run")
    ap.add_argument("--scale-child", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.scale_child:
        scale_child(args.scale_child)
        return
    base = baseline_s()
    print(f"o1sim {_core.__version__} core benchmarks; baseline (numpy sort of 1M floats, same process): "
          f"{base * 1e3:.2f} ms")
    iterations(base)
    sc = load("vidur_s2")
    wall = best(lambda: run(sc)[0], 5)
    print(f"\n## Simulated requests per second: S2 (10,000 requests, one replica) in {wall * 1e3:.2f} ms "
          f"= {10_000 / wall:,.0f} requests/s ({wall / base:.3f}× baseline; target ≤ 25 ms)")
    prefix_caching_cost(sc)
    scaling(args.quick)
    vidur(base)


if __name__ == "__main__":
    main()
