"""Write the workloads o1sim's `vllm` policy is checked against the real vLLM v1 scheduler
on (tests/test_vllm_reference.py), as CSVs for ../shared/tools/vllm-reference/driver.py.

Each is small (under 433 requests, the driver's limit for distinct tokens) and aimed at one
mechanism that only shows once blocks are evicted or priorities differ: a pool too small for
the prefixes in use (eviction order of cached blocks), priority scheduling with preemption,
prompts that are a whole cached prefix (the recomputed last block), bursts of one group
admitted in one step (hits on blocks allocated in the same step), and preemption that frees
blocks still cached (re-admission hits its own prompt and output).

    .venv/bin/python tools/vllm_reference_workloads.py       # writes tests/data/vllm_reference/*.workload.csv

The RUNS table says how each is run (pool size, token budget, policy); the driver is then run
by hand (it needs vllm==0.33.0, which CI never installs) and its request CSVs committed.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "vllm_reference"
COLS = ["id", "arrival_ms", "prompt_tokens", "output_tokens", "prefix_group", "prefix_length", "priority"]

#: name -> (num_gpu_blocks as the driver takes it (usable = N - 1), max_num_batched_tokens, policy)
RUNS: dict[str, tuple[int, int, str]] = {
    "tight_pool": (700, 2048, "fcfs"),
    "priority_tight": (900, 2048, "priority"),
    "whole_prompt": (3000, 2048, "fcfs"),
    "bursts": (1200, 4096, "fcfs"),
    "preempt_cached": (500, 2048, "fcfs"),
    "priority_preempt": (600, 1024, "priority"),
}


def poisson_groups(rng: np.random.Generator, n: int, gap_ms: float, lens: list[int], extra: tuple[int, int],
                   out: tuple[int, int], priorities: int = 0) -> list[dict[str, float | int]]:
    """`n` Poisson arrivals (mean gap `gap_ms`), each in no group or one of `lens`' prefixes,
    with `extra` more prompt tokens, `out` output tokens and a priority below `priorities`."""
    rows: list[dict[str, float | int]] = []
    t = 0.0
    for i in range(n):
        t += float(rng.exponential(gap_ms))
        g = int(rng.integers(-1, len(lens)))
        L = lens[g] if g >= 0 else 0
        rows.append(dict(id=i, arrival_ms=t, prompt_tokens=L + int(rng.integers(*extra)),
                         output_tokens=int(rng.integers(*out)), prefix_group=g, prefix_length=L,
                         priority=int(rng.integers(0, priorities)) if priorities else 0))
    return rows


def rows_for(name: str, rng: np.random.Generator) -> list[dict[str, float | int]]:
    rows: list[dict[str, float | int]] = []
    t = 0.0
    if name == "tight_pool":
        # 4 prefixes of 1-2k tokens, Poisson arrivals at about the pool's turnover.
        lens = [1024, 1536, 2048, 768]
        for i in range(300):
            t += float(rng.exponential(60.0))
            g = int(rng.integers(0, 4))
            rows.append(dict(id=i, arrival_ms=t, prompt_tokens=lens[g] + int(rng.integers(1, 400)),
                             output_tokens=int(rng.integers(8, 120)), prefix_group=g, prefix_length=lens[g], priority=0))
    elif name == "priority_tight":
        rows = poisson_groups(rng, 300, 40.0, [800, 1200, 1600], (16, 600), (8, 160), priorities=4)
    elif name == "whole_prompt":
        # Prompts that are their group's whole prefix, a multiple of 16 tokens or not.
        lens = [512, 515, 1024, 1031]
        for i in range(240):
            t += float(rng.exponential(30.0))
            g = int(rng.integers(0, 4))
            whole = rng.random() < 0.6
            p = lens[g] + (0 if whole else int(rng.integers(1, 200)))
            rows.append(dict(id=i, arrival_ms=t, prompt_tokens=p, output_tokens=int(rng.integers(4, 64)),
                             prefix_group=g, prefix_length=lens[g], priority=0))
    elif name == "bursts":
        # Bursts of 30 at once, each mostly one group, every 1.5 s.
        lens = [1024, 640, 1536]
        i = 0
        for b in range(10):
            t = 1500.0 * b
            main = b % 3
            for _ in range(30):
                g = main if rng.random() < 0.8 else int(rng.integers(0, 3))
                rows.append(dict(id=i, arrival_ms=t, prompt_tokens=lens[g] + int(rng.integers(1, 300)),
                                 output_tokens=int(rng.integers(16, 100)), prefix_group=g, prefix_length=lens[g], priority=0))
                i += 1
    elif name == "preempt_cached":
        # Long outputs in a pool that cannot hold them all: preemptions, and re-admissions
        # hitting what they had cached.
        rows = poisson_groups(rng, 200, 25.0, [512, 1024], (32, 500), (200, 900))
    elif name == "priority_preempt":
        rows = poisson_groups(rng, 240, 30.0, [600, 1000], (32, 400), (100, 600), priorities=3)
    else:
        raise ValueError(name)
    return rows


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for k, name in enumerate(RUNS):
        rows = rows_for(name, np.random.default_rng(100 + k))
        with open(OUT / f"{name}.workload.csv", "w", newline="") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(COLS)
            for r in rows:
                w.writerow([r["id"], f"{r['arrival_ms']:.3f}", r["prompt_tokens"], r["output_tokens"],
                            r["prefix_group"], r["prefix_length"], r["priority"]])
        print(f"{name}: {len(rows)} requests")


if __name__ == "__main__":
    main()
