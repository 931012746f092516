"""Warm-up: the first load stage's TTFT tail, measured and predicted.

The development runs (``../shared/data/real-vllm-h100``; skips with a message when they are
not there) that ran two load stages started at the lower rate, yet on the TP2 Mixtral-8x7B
the first stage has the tail (TTFT max 1.2-2.0 s against ~55 ms medians) and the second,
at two to two and a half times the load, has little or none. o1sim's warm-up model
(``cost_model.warmup``, ``crates/sim-core/src/perf/warmup.rs``; docs/fidelity.md,
"Warm-up") puts it down to vLLM's fused-MoE Triton kernel compiling, on first use, the
tile configurations start-up did not run. This script prints, per latency run, the first
stage's p99 / p99.9 / max TTFT measured and predicted with warm-up on (the default) and off,
the mean-latency errors over the twelve latency runs both ways, and the stall constant fitted
on the ``codegen`` runs only (the shipped ``moe_config_compile_ms`` is that fit; the
``general`` and ``roleplay`` rows are the runs it did not see).

    .venv/bin/python benchmarks/warmup.py           # the table
    .venv/bin/python benchmarks/warmup.py --write   # and put it in docs/fidelity.md

Stages: a request belongs to the stage whose time span holds its send time (inference-perf's
``load.stages``, back to back). Percentiles are numpy's linear ones over the stage's finished
requests, client-side TTFT as the summaries count it.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
from docblock import command_block, write_block
from real_vllm import data_dir

import o1sim
from o1sim import calibrate as cal

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "fidelity.md"
GPU = "h100"
COMMAND = ".venv/bin/python benchmarks/warmup.py"
#: The fit's grid for ``moe_config_compile_ms``: its interval and step, ms.
FIT_RANGE_MS = (200.0, 4000.0)
FIT_STEP_MS = 100.0
#: The arrival seeds the fit averages over.
FIT_SEEDS = (1, 2, 3, 4, 5)


def measured_stages(run_dir: Path) -> list[dict[str, float]]:
    """Per load stage: TTFT p99, p99.9 and max, ms (inference-perf's stage summaries)."""
    out = []
    for i in range(16):
        f = run_dir / "results" / f"stage_{i}_lifecycle_metrics.json"
        if not f.is_file():
            break
        t = json.loads(f.read_text())["successes"]["latency"]["time_to_first_token"]
        out.append({k: float(t[s]) * 1e3 for k, s in (("p99", "p99"), ("p999", "p99.9"), ("max", "max"))})
    return out


def with_warmup(scenario: dict[str, Any], warmup: Any) -> dict[str, Any]:
    sc = dict(scenario)
    sc["cost_model"] = dict(sc.get("cost_model", {}), warmup=warmup)
    return sc


def predicted_stages(scenario: dict[str, Any]) -> tuple[list[dict[str, float]], dict[str, Any]]:
    """Simulate; per stage the TTFT p99, p99.9 and max, ms, and the run's summary."""
    res = o1sim.simulate(scenario)
    df = res.requests
    df = df[df["ttft_ms"].notna()]
    out = []
    start = 0.0
    for st in scenario["workload"]["arrival"]["stages"]:
        end = start + float(st["duration_s"]) * 1e3
        t = df[(df["arrival_ms"] >= start) & (df["arrival_ms"] < end)]["ttft_ms"].to_numpy()
        out.append({"p99": float(np.percentile(t, 99)), "p999": float(np.percentile(t, 99.9)), "max": float(t.max())}
                   if len(t) else {"p99": float("nan"), "p999": float("nan"), "max": float("nan")})
        start = end
    return out, res.summary


def summary_errors(run: cal.MeasuredRun, s: dict[str, Any]) -> dict[str, float]:
    """Relative errors of mean TTFT, p99 TTFT, mean E2E and ITL (benchmarks/real_vllm.py's)."""
    ttft, e2e = float(s["ttft_ms"]["mean"]), float(s["e2e_ms"]["mean"])
    itl = (e2e - ttft) / (run.output_len - 1)
    return {
        "ttft": ttft / run.ttft_ms - 1, "ttft_p99": float(s["ttft_ms"]["p99"]) / run.extra["ttft_p99_ms"] - 1,
        "e2e": e2e / run.e2e_ms - 1, "itl": itl / run.itl_ms - 1,
    }


def fit(runs: list[cal.MeasuredRun], d: Path) -> float:
    """``moe_config_compile_ms`` on a 100 ms grid over ``FIT_RANGE_MS`` minimising, over the MoE
    ``codegen`` runs and the arrival seeds ``FIT_SEEDS``, the squared log ratio of predicted to
    measured first-stage p99.9 and max TTFT. A grid over several seeds, not a bisection on one:
    one realisation's tail is not monotone in the stall (whether the backlog of one stall forms
    the next configuration's first step depends on the arrivals near it)."""
    fit_runs = [r for r in runs if "codegen" in r.name and moe(r)]
    meas = [measured_stages(d / r.name)[0] for r in fit_runs]

    def loss(ms: float) -> float:
        total = 0.0
        for r, m in zip(fit_runs, meas):
            for seed in FIT_SEEDS:
                sc = dict(with_warmup(r.scenario, {"moe_config_compile_ms": ms}), seed=seed)
                p = predicted_stages(sc)[0][0]
                total += sum(float(np.log(p[k] / m[k])) ** 2 for k in ("p999", "max"))
        return total

    lo, hi = FIT_RANGE_MS
    grid = np.arange(lo, hi + 1e-9, FIT_STEP_MS)
    return float(min(grid, key=loss))


def moe(run: cal.MeasuredRun) -> bool:
    return "mixtral" in run.name.lower()


def study(runs: list[cal.MeasuredRun], d: Path) -> dict[str, Any]:
    """Every latency run with warm-up off and on (the default): the first stage's tail and the
    summary errors; the constant fitted on the codegen runs."""
    rows = []
    for r in runs:
        if r.saturated:
            continue
        meas = measured_stages(d / r.name)
        off, s_off = predicted_stages(with_warmup(r.scenario, False))
        on, s_on = predicted_stages(r.scenario)
        rows.append({"run": r.name[16:], "tp": int(r.scenario.get("deployment", {}).get("tp", 1)), "moe": moe(r),
                     "fitted_on": "codegen" in r.name and moe(r), "stages": len(meas),
                     "measured": meas[0], "off": off[0], "on": on[0],
                     "measured_last": meas[-1], "on_last": on[-1],
                     "err_off": summary_errors(r, s_off), "err_on": summary_errors(r, s_on)})
    mape = {w: {k: float(np.mean([abs(x[f"err_{w}"][k]) for x in rows])) for k in ("ttft", "ttft_p99", "e2e", "itl")}
            for w in ("off", "on")}
    return {"rows": rows, "mape": mape, "fitted_ms": fit(runs, d)}


def report(s: dict[str, Any]) -> str:
    lines = [
        "First load stage's TTFT, ms: measured | predicted, warm-up off | on (default); * = run the stall was fitted on",
        f"{'run':32} {'TP':>2} {'p99':>18} {'p99.9':>20} {'max':>20}   mean TTFT err off/on",
    ]
    for x in s["rows"]:
        m, off, on = x["measured"], x["off"], x["on"]
        cell = lambda k: f"{m[k]:6.0f}|{off[k]:5.0f}|{on[k]:5.0f}"  # noqa: E731
        name = x["run"] + (" *" if x["fitted_on"] else "")
        lines.append(f"{name:32} {x['tp']:>2} {cell('p99'):>18} {cell('p999'):>20} {cell('max'):>20}   "
                     f"{x['err_off']['ttft']:+6.1%} / {x['err_on']['ttft']:+6.1%}")
    for w, label in (("off", "warm-up off"), ("on", "warm-up on ")):
        m = s["mape"][w]
        lines.append(f"MAPE over {len(s['rows'])} latency runs, {label}: TTFT mean {m['ttft']:.1%} (p99 {m['ttft_p99']:.1%}) | "
                     f"E2E mean {m['e2e']:.1%} | ITL {m['itl']:.1%}")
    lines.append(f"moe_config_compile_ms fitted on the MoE codegen run(s) only: {s['fitted_ms']:.0f} "
                 f"(shipped: {shipped_ms():.0f})")
    return "\n".join(lines)


def shipped_ms() -> float:
    """The shipped default, read from the source (the Python package does not export it)."""
    src = (ROOT / "crates" / "sim-core" / "src" / "perf" / "warmup.rs").read_text()
    m = re.search(r"pub const DEFAULT_MOE_CONFIG_COMPILE_MS: f64 = ([0-9.]+);", src)
    assert m, "warmup.rs lost DEFAULT_MOE_CONFIG_COMPILE_MS"
    return float(m.group(1))


def doc_block(s: dict[str, Any]) -> str:
    """What docs/fidelity.md holds between its ``warmup-table`` markers."""
    return command_block(COMMAND, report(s))


def write(s: dict[str, Any]) -> None:
    write_block(DOC, "warmup-table", doc_block(s))


def main(argv: list[str]) -> int:
    d = data_dir()
    if d is None:
        print("skipped: ../shared/data/real-vllm-h100 not found")
        return 0
    s = study(cal.read_runs([d], gpu=GPU), d)
    print(report(s))
    if "--write" in argv:
        write(s)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
