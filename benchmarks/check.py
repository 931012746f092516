"""Model-checker benchmark: every policy and every mutant on the stated small
configurations; states, transitions, states per second and counterexample lengths, per
check and per configuration.

Machines here are shared and noisy, so every check runs --repeat times and its rate is the
best run's; the rates are also printed as a ratio to a fixed baseline measured in the same
process (sorting 1M floats with numpy, as in benchmarks/core.py), which moves with the
machine. "states/s" is the checker's own rate (states over the wall time of the
exploration); "per CPU s" counts the whole check (parsing, exploration, counterexamples
and their replays) over the CPU time it took, which other load on the machine does not
change.

    .venv/bin/python benchmarks/check.py              # the whole set (about a minute)
    .venv/bin/python benchmarks/check.py --quick      # the 1-replica configurations only
    .venv/bin/python benchmarks/check.py --repeat 1   # one run per check
"""

from __future__ import annotations

import argparse
import time
from typing import Any, Callable, Optional

import numpy as np

import o1sim

POLICIES = o1sim.presets()["policies"]  # every co-located policy of the core's registry
TARGET = 1_000_000

# name → (KV blocks per replica, replicas, token budget, [(prompt, output, priority)]); block size 4.
CONFIGS: dict[str, tuple[int, int, int, list[tuple[int, int, int]]]] = {
    "C1: 3 req, 6 blocks, 1 rep": (6, 1, 8, [(6, 4, 1), (5, 3, 0), (4, 3, 1)]),
    "C2: 2 req, 3 blocks, 1 rep": (3, 1, 16, [(4, 6, 1), (4, 6, 0)]),
    "C3: 6 req, 16 blocks, 1 rep": (16, 1, 16, [(9, 6, 1), (7, 5, 0), (6, 4, 1), (5, 4, 0), (3, 3, 1), (8, 4, 0)]),
    "C4: 6 req, 12 blocks, 1 rep, budget 8": (12, 1, 8, [(9, 6, 1), (7, 5, 0), (6, 4, 1), (5, 4, 0), (3, 3, 1), (8, 4, 0)]),
    "C5: 6 req, 2 rep x 6 blocks": (6, 2, 16, [(9, 5, 1), (7, 4, 0), (6, 4, 1), (5, 4, 0), (3, 3, 1), (8, 3, 0)]),
}


def scenario(policy: str, bug: Optional[str], blocks: int, replicas: int, budget: int,
             reqs: list[tuple[int, int, int]]) -> dict[str, Any]:
    sched: dict[str, Any] = {"policy": policy, "block_size": 4, "num_gpu_blocks": blocks,
                             "max_num_batched_tokens": budget, "chunk_size": budget, "max_num_seqs": 8,
                             "max_tokens_per_request": budget}
    if bug:
        sched["inject_bug"] = bug
    return {"model": "llama-3-8b", "gpu": "h200", "deployment": {"replicas": replicas},
            "scheduler": sched,
            "workload": {"requests": [{"arrival_ms": 0, "prompt_tokens": p, "output_tokens": o, "priority": pr}
                                      for p, o, pr in reqs]}}


def _timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def baseline_s() -> float:
    data = np.random.default_rng(0).random(1_000_000)
    return min(_timed(lambda: np.sort(data)) for _ in range(7))


def verdict(r: o1sim.CheckResult) -> str:
    if r.ok:
        return "ok"
    if not r.violations:
        return f"incomplete: {r.stopped}"
    parts = []
    for v in r.violations:
        how = "" if v.reproduced else " (not replayed)" if v.reproduced is None else " (replay differs)"
        if v.replay_trace is not None:
            how += f" (replayed in {len(v.replay_trace)})"
        parts.append(f"{v.property} in {v.length} steps{how}")
    return ", ".join(parts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="the 1-replica configurations only")
    ap.add_argument("--repeat", type=int, default=3, help="runs per check (the best counts)")
    args = ap.parse_args()
    base = baseline_s()
    print(f"o1sim model-checker benchmark; baseline (numpy sort of 1M floats, same process): {base * 1e3:.2f} ms; "
          f"best of {args.repeat} run(s) per check\n")
    print(f"{'config':<40} {'policy':<8} {'bug':<16} {'states':>10} {'trans':>10} {'states/s':>11}  result")
    summary = []
    total_states, wall = 0, 0.0
    for name, (blocks, reps, budget, reqs) in CONFIGS.items():
        if args.quick and reps > 1:
            continue
        states, explore_s, cpu_s, checks = 0, 0.0, 0.0, 0
        for policy in POLICIES:
            for bug in [None, *o1sim.bug_names()]:
                sc = scenario(policy, bug, blocks, reps, budget, reqs)
                best_rate, best_cpu = 0.0, float("inf")
                for _ in range(max(args.repeat, 1)):
                    t0, c0 = time.perf_counter(), time.process_time()
                    r = o1sim.check(sc)
                    wall += time.perf_counter() - t0
                    best_cpu = min(best_cpu, time.process_time() - c0)
                    best_rate = max(best_rate, r.states_per_s)
                states += r.states
                explore_s += r.states / best_rate if best_rate > 0 else 0.0
                cpu_s += best_cpu
                checks += 1
                print(f"{name:<40} {policy:<8} {bug or '-':<16} {r.states:>10,} {r.transitions:>10,} "
                      f"{best_rate:>11,.0f}  {verdict(r)}")
        total_states += states
        summary.append((name, checks, states, explore_s, cpu_s))
    print(f"\n## Per configuration (every policy and mutant; target ≥ {TARGET:,} states/s)")
    print(f"{'config':<40} {'checks':>6} {'states':>11} {'explore s':>10} {'states/s':>11} {'× baseline':>11} "
          f"{'CPU s':>7} {'per CPU s':>11}  target")
    for name, checks, states, explore_s, cpu_s in summary:
        rate = states / explore_s if explore_s > 0 else 0.0
        per_cpu = states / cpu_s if cpu_s > 0 else 0.0
        met = "met" if rate >= TARGET else "MISSED"
        print(f"{name:<40} {checks:>6} {states:>11,} {explore_s:>10.3f} {rate:>11,.0f} {explore_s / base:>11.2f} "
              f"{cpu_s:>7.3f} {per_cpu:>11,.0f}  {met}")
    runs = max(args.repeat, 1)
    print(f"\n{total_states:,} states in {wall / runs:.1f} s of wall time per run of the set "
          f"(including counterexamples and replays): {total_states * runs / wall:,.0f} states/s overall")


if __name__ == "__main__":
    main()
