"""Start-up cost of the `o1sim` command, whole process, against the interpreter alone.

Targets: issue 16, `o1sim --help` ≤ 60 ms and a small run ≤ 100 ms wall; issue 30, ≤ 40 ms
and ≤ 60 ms of CPU (user + system) with `python -c pass` at 12 ms. Each command runs many
times, interleaved with the baseline (`python -c pass`, the same interpreter) so that every
case sees the same machine load; the best and the median wall time are printed, the CPU
time of the cheapest run, and that CPU time as a multiple of the interpreter's (what moves
least with the machine: the targets are 3.3× and 5×).

`--against REV` also runs the package as it was at git revision REV (its `python/o1sim`,
with this build's extension), interleaved with the rest: the before/after ratio of each
command in one run. The floors are what importing the libraries the command line was built
on until issue 30 costs (click parsed every command, rich drew every table); each is left
out where its library is not installed.

The commands run as an installed package does: with its bytecode cached. An environment with
PYTHONDONTWRITEBYTECODE set (this development machine has it) recompiles every module on every
start, about 20 ms more for `o1sim --help`; the benchmark leaves it out of its children's
environment, and the warm-up run writes the cache.

    .venv/bin/python benchmarks/cli.py [--runs 30] [--against REV]
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The children's environment: bytecode cached, as in an installed package.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
#: What the console script `o1sim` runs (pip's entry-point script, as a file of its own so
#: that both the package here and the one at REV start the same way).
LAUNCHER = "import sys\nfrom o1sim.cli import main\nsys.argv[0] = 'o1sim'\nsys.exit(main())\n"
BASELINE = "python -c pass (baseline)"
FLOOR_CLICK = "python -c 'import click' (a floor)"
FLOOR_BOTH = "python -c 'import click, rich.…' (a floor)"
#: CPU targets (issue 30), ms with the interpreter at 12 ms.
CPU_TARGETS = {"o1sim --help": 40.0, "o1sim run, 20 requests (small run)": 60.0}
INTERPRETER_MS = 12.0


def time_once(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds: user + system) of one whole run of `cmd`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, env=env)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def package_at(rev: str, into: Path) -> Path:
    """`python/o1sim` as of git revision `rev`, with this build's extension, under `into`;
    returns the folder to put on PYTHONPATH."""
    tree = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "python/o1sim"], capture_output=True, check=True)
    with tarfile.open(fileobj=io.BytesIO(tree.stdout)) as tar:
        tar.extractall(into, filter="data")
    import o1sim._core

    shutil.copy(o1sim._core.__file__, into / "python" / "o1sim")
    return into / "python"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=30, help="runs of each command (default 30)")
    ap.add_argument("--against", metavar="REV", help="also time the package as of this git revision (before/after)")
    args = ap.parse_args()
    if args.runs < 1:
        ap.error("--runs must be at least 1")
    tmp = Path(tempfile.mkdtemp(prefix="o1cli"))
    try:
        launcher = tmp / "o1sim_launch.py"
        launcher.write_text(LAUNCHER)
        variants = {"": ENV}
        if args.against:
            try:
                old = package_at(args.against, tmp / "old")
            except subprocess.CalledProcessError as e:
                ap.error(f"--against {args.against}: {e.stderr.decode(errors='replace').strip()}")
            variants[f" @{args.against}"] = {**ENV, "PYTHONPATH": str(old)}
        o1 = [sys.executable, str(launcher)]
        commands = {
            "python -c 'import o1sim'": [sys.executable, "-c", "import o1sim"],
            "o1sim --help": [*o1, "--help"],
            "o1sim run, 20 requests (small run)": [*o1, "run", "--set", "workload.num_requests=20"],
            "o1sim run, the default (2,000 requests)": [*o1, "run"],
        }
        cases: dict[str, tuple[list[str], dict[str, str]]] = {BASELINE: ([sys.executable, "-c", "pass"], ENV)}
        # The floors the libraries set: click parsed every command, rich drew the tables.
        if importlib.util.find_spec("click") is not None:
            cases[FLOOR_CLICK] = ([sys.executable, "-c", "import click"], ENV)
            cases[FLOOR_BOTH] = ([sys.executable, "-c", "import click, rich.console, rich.table"], ENV)
        for name, cmd in commands.items():
            for tag, env in variants.items():
                cases[name + tag] = (cmd, env)
        times: dict[str, list[float]] = {k: [] for k in cases}
        cpu: dict[str, list[float]] = {k: [] for k in cases}
        for cmd, env in cases.values():
            time_once(cmd, env)  # warm the file cache and write the bytecode cache
        for _ in range(args.runs):
            for name, (cmd, env) in cases.items():  # interleaved: every case sees the same load
                wall, used = time_once(cmd, env)
                times[name].append(wall)
                cpu[name].append(used)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    base_cpu = min(cpu[BASELINE]) * 1e3
    print(f"o1sim start-up, whole process, {args.runs} runs each, interleaved ({sys.executable})")
    print("   wall: best and median; CPU: user + system of the cheapest run, and as a multiple of the")
    print("   interpreter's (python -c pass); on a busy machine the wall time also waits for a core")
    print(f"{'command':<48} {'best ms':>8} {'median ms':>10} {'CPU ms':>7} {'× pass':>7} {'CPU target':>20}")
    for name in cases:
        ts, c = times[name], min(cpu[name]) * 1e3
        target = next((t for k, t in CPU_TARGETS.items() if name.startswith(k)), None)
        mark = "" if target is None else (
            f"≤ {target:.0f} ms ({target / INTERPRETER_MS:.1f}×) " + ("✓" if c <= target else "✗"))
        print(f"{name:<48} {min(ts) * 1e3:>8.1f} {statistics.median(ts) * 1e3:>10.1f} {c:>7.1f} {c / base_cpu:>6.2f}× "
              f"{mark:>20}")
    if args.against:
        print(f"\nafter / before (@{args.against}), CPU of the cheapest run:")
        for name in commands:
            now, then = min(cpu[name]), min(cpu[f"{name} @{args.against}"])
            print(f"  {name:<46} {then * 1e3:7.1f} → {now * 1e3:7.1f} ms = {now / then:.2f}×")


if __name__ == "__main__":
    main()
