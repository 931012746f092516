"""Summarise a `make fuzz` run: the counts the Python and WASM fuzz suites wrote to
benchmarks/out/fuzz-*.json (cases, runs, typed errors by kind, peak memory against the
limit, slowest case). Exits 1 if anything the suites count as a failure shows up."""

from __future__ import annotations

import json
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "benchmarks" / "out"


def main() -> int:
    total, bad = 0, False
    for name in ("python", "wasm"):
        p = OUT / f"fuzz-{name}.json"
        if not p.is_file():
            print(f"{name}: no report ({p})")
            bad = True
            continue
        s = json.loads(p.read_text())
        cases = int(s.get("cases", 0))
        total += cases
        kinds = {k: v for k, v in s.items() if k.endswith("Error")}
        if name == "python":
            peak = s.get("peak_case_growth_kb", s["peak_rss_kb"] - s["start_rss_kb"]) / 1024
            limit = s["limit_kb"] / 1024
        else:
            peak = s.get("peak_case_growth_bytes", s["peak_memory_bytes"] - s["start_memory_bytes"]) / 2**20
            limit = s["limit_bytes"] / 2**20
        print(f"{name}: {cases:,} cases, {s.get('runs', 0):,} runs to the end, {s.get('checks', 0):,} checks; "
              f"typed errors {kinds}; largest growth of memory in one case {peak:,.0f} MiB (limit {limit:,.0f} MiB); "
              f"slowest case {s.get('slowest_case_ms', 0):,.0f} ms")
        bad |= "InternalError" in kinds or peak >= limit
    print(f"total: {total:,} fuzz cases through Python and WASM")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
