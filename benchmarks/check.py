"""Model-checker benchmark: every policy and every mutant on the stated small
configurations; total states, transitions, states per second and counterexample lengths.

    .venv/bin/python benchmarks/check.py            # the whole set (about a minute)
    .venv/bin/python benchmarks/check.py --quick    # the 1-replica configurations only
"""

from __future__ import annotations

import argparse
import time
from typing import Any, Optional

import o1sim

POLICIES = ["orca", "vllm", "sarathi", "o1pro"]

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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    total_states = 0
    t0 = time.perf_counter()
    print(f"{'config':<40} {'policy':<8} {'bug':<16} {'states':>10} {'trans':>10} {'states/s':>11}  result")
    for name, (blocks, reps, budget, reqs) in CONFIGS.items():
        if args.quick and reps > 1:
            continue
        for policy in POLICIES:
            for bug in [None, *o1sim.bug_names()]:
                r = o1sim.check(scenario(policy, bug, blocks, reps, budget, reqs))
                total_states += r.states
                if r.ok:
                    verdict = "ok"
                elif r.violations:
                    verdict = ", ".join(
                        f"{v.property} in {v.length} steps"
                        + ("" if v.reproduced else " (not replayed)" if v.reproduced is None else " (replay differs)")
                        for v in r.violations)
                else:
                    verdict = f"incomplete: {r.stopped}"
                print(f"{name:<40} {policy:<8} {bug or '-':<16} {r.states:>10,} {r.transitions:>10,} "
                      f"{r.states_per_s:>11,.0f}  {verdict}")
    wall = time.perf_counter() - t0
    print(f"\n{total_states:,} states in {wall:.1f} s of wall time "
          f"(including counterexample replays): {total_states / wall:,.0f} states/s overall")


if __name__ == "__main__":
    main()
