"""Start-up time of the `o1sim` command, whole process, against the interpreter alone.

Targets (issue 16): `o1sim --help` ≤ 60 ms and a small run ≤ 100 ms, whole process. Each
command runs many times, interleaved with the baseline (`python -c pass`, the same
interpreter) so that both see the same machine load; the best and the median are printed,
and the time above the baseline (what o1sim itself costs).

The commands run as an installed package does: with its bytecode cached. An environment with
PYTHONDONTWRITEBYTECODE set (this development machine has it) recompiles every module on every
start, about 20 ms more for `o1sim --help`; the benchmark leaves it out of its children's
environment, and the warm-up run writes the cache.

    .venv/bin/python benchmarks/cli.py [--runs 30]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

VENV_BIN = Path(sys.executable).parent
#: The children's environment: bytecode cached, as in an installed package.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def o1sim_cmd() -> list[str]:
    exe = VENV_BIN / "o1sim"
    if exe.exists():
        return [str(exe)]
    found = shutil.which("o1sim")
    return [found] if found else [sys.executable, "-m", "o1sim"]


def time_once(cmd: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds: user + system) of one whole run of `cmd`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, env=ENV)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=30)
    args = ap.parse_args()
    o1 = o1sim_cmd()
    cases = {
        "python -c pass (baseline)": [sys.executable, "-c", "pass"],
        "python -c 'import o1sim'": [sys.executable, "-c", "import o1sim"],
        "o1sim --help": [*o1, "--help"],
        "o1sim run, 20 requests (small run)": [*o1, "run", "--set", "workload.num_requests=20"],
        "o1sim run, the default (2,000 requests)": [*o1, "run"],
    }
    targets = {"o1sim --help": 0.060, "o1sim run, 20 requests (small run)": 0.100}
    times: dict[str, list[float]] = {k: [] for k in cases}
    cpu: dict[str, list[float]] = {k: [] for k in cases}
    for cmd in cases.values():
        time_once(cmd)  # warm the file cache and write the bytecode cache
    for _ in range(args.runs):
        for name, cmd in cases.items():  # interleaved: every case sees the same load
            wall, used = time_once(cmd)
            times[name].append(wall)
            cpu[name].append(used)
    base = min(times["python -c pass (baseline)"])
    print(f"o1sim start-up, whole process, {args.runs} runs each, interleaved ({' '.join(o1)})")
    print("   wall: best and median; CPU: user + system of the best run (what the process itself")
    print("   costs; on a busy machine the wall time also waits for a core)")
    print(f"{'command':<42} {'best ms':>8} {'median ms':>10} {'CPU ms':>7} {'above baseline ms':>18} {'target':>8}")
    for name, ts in times.items():
        t = targets.get(name)
        mark = "" if t is None else (f"≤ {t * 1e3:.0f} ms" + (" ✓" if min(ts) <= t else " ✗"))
        print(f"{name:<42} {min(ts) * 1e3:>8.1f} {statistics.median(ts) * 1e3:>10.1f} {min(cpu[name]) * 1e3:>7.1f} "
              f"{(min(ts) - base) * 1e3:>18.1f} {mark:>8}")


if __name__ == "__main__":
    main()
