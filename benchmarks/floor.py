"""Issue 30's floor loop beside o1sim: CPU per request-step (one request in one step's batch)
of a loop doing only what any simulator of KV-paged continuous batching must do, and of
o1sim on the same load (Llama-3-8B on H100, 512-token prompts, lognormal outputs of mean
128, 256 sequences, least-outstanding-tokens router), at 1, 10, 100 and 1,000 replicas,
unsaturated (20 requests/s a replica) and saturated (150/s, past the ~60/s a replica
serves). Both run natively in one process, interleaved, best of the repeats; the ratio is
the target (≤ 2×). The loop and what it leaves out: crates/sim-core/examples/floor_loop.rs.
Then what o1sim's step prices alone cost, against the floor on one replica and as a share
of Vidur's S2 (crates/sim-core/examples/price_only.rs: a run's own steps priced again, in
order, by its own cost model).

    .venv/bin/python benchmarks/floor.py [--per-replica 1000] [--repeats 2] [--replicas 1 10 100 1000]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--per-replica", type=int, default=1000, help="requests per replica (default 1000)")
    ap.add_argument("--repeats", type=int, default=2, help="runs of each, best kept (default 2)")
    ap.add_argument("--replicas", type=int, nargs="+", default=[1, 10, 100, 1000])
    a = ap.parse_args(argv)
    cmd = ["cargo", "run", "--quiet", "--release", "-p", "sim-core", "--example", "floor_loop", "--",
           str(a.per_replica), str(a.repeats), *map(str, a.replicas)]
    print("## Floor loop vs o1sim, ns of CPU per request-step (target: ratio ≤ 2)\n", flush=True)
    rc = subprocess.run(cmd, cwd=ROOT).returncode
    if rc:
        return rc
    print("\n## Vidur S2: the run against its step prices alone\n", flush=True)
    s2 = ["cargo", "run", "--quiet", "--release", "-p", "sim-core", "--example", "price_only", "--",
          "benchmarks/scenarios/vidur_s2.toml", str(max(a.repeats, 10))]
    return subprocess.run(s2, cwd=ROOT).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
