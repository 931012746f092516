"""Do the serving front end's constants hold on runs they were not fitted to?

o1sim's vLLM front end (``crates/sim-core/src/frontend.rs``: ``request_ms`` 3.0,
``prompt_token_us`` 1.0, ``token_ms`` 2.5, ``batch_token_us`` 60.0) was fitted on the twelve
latency runs of the development set, ``../shared/data/real-vllm-h100`` (four models × the
``codegen``, ``roleplay`` and ``general`` workloads; the saturated ``reasoning`` runs are not
used for latency). This script holds out one model at a time (four folds: fitted on the
other three models' nine latency runs) and one workload at a time (three folds: fitted on
the other two workloads' eight runs), fits the front end on the rest with
``o1sim.calibrate.fit(..., gpu_time_scale=1)`` (the GPU kernels stay as shipped: the front
end is the server's CPU work, not the GPU's), predicts the held-out runs with the fitted
constants, and prints per fold the constants and the mean absolute percentage error (MAPE)
of mean TTFT, p99 TTFT, mean E2E and ITL over the held-out runs, next to the shipped
constants' MAPE on the same runs; then how far the fitted constants spread across folds, and
a verdict. Skips with a message when the runs are not there.

    .venv/bin/python benchmarks/frontend_holdout.py           # the table
    .venv/bin/python benchmarks/frontend_holdout.py --write   # and put it in docs/fidelity.md

What the fit can tell apart (``o1sim.calibrate.fit``): client TTFT less the engine's
(medians) = ``a + b·(B + 1)/2 + prompt_token_us·p`` over the runs, ``B`` a run's mean batch.
It fits ``a`` = ``request_ms + token_ms`` and ``b`` = ``batch_token_us``. ``request_ms`` and
``token_ms`` enter every client-side latency only as their sum (the first token's TTFT and
the last token's E2E each hold one ingest and one way back), so ``a`` is split in the shipped
proportion 3 : 2.5; ``prompt_token_us`` stays at 1 µs, since the runs' prompts differ by a
few hundred tokens, a few tenths of a millisecond at that rate, well below what the fit
resolves (the report prints the span). Because ``a`` and ``b`` trade off against each other
over runs whose batches differ by a few times, the report also gives the front end's whole
share of TTFT, ``a + b·(B + 1)/2``, at the runs' median batch.

Both columns simulate every run with a calibration profile on the shipped H100 tables at
``gpu_time_scale`` 1 (``fitted``: the fold's constants; ``shipped``: 3.0 / 1.0 / 2.5 / 60.0),
so they differ in the four constants only. A scenario that names no profile (what
``benchmarks/real_vllm.py`` runs) also bounds the H100 tables by the other profiled GPUs'
tables; the last line gives its MAPE for reference.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any, Callable, Optional

from docblock import command_block, write_block
from real_vllm import data_dir

import o1sim
from o1sim import calibrate as cal

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "fidelity.md"
GPU = "h100"
COMMAND = ".venv/bin/python benchmarks/frontend_holdout.py"
#: The errors reported: the measured figure of a run and the predicted one of a summary.
METRICS = ("ttft", "ttft_p99", "e2e", "itl")
LABELS = {"ttft": "TTFT mean", "ttft_p99": "TTFT p99", "e2e": "E2E mean", "itl": "ITL"}
#: "As well as": the fitted constants' held-out MAPE at most this many percentage points
#: above the shipped constants', for mean TTFT and mean E2E (the figures the front end moves).
TOLERANCE_POINTS = 1.0


def model_of(run: cal.MeasuredRun) -> str:
    """The model's name without its organisation."""
    return run.group.split("/")[-1]


def workload_of(run: cal.MeasuredRun) -> str:
    """The workload named at the end of the run's folder (``codegen``, ``roleplay``, ...)."""
    return run.name.rsplit("-", 1)[-1]


def measured(run: cal.MeasuredRun) -> dict[str, float]:
    return {"ttft": run.ttft_ms, "ttft_p99": float(run.extra["ttft_p99_ms"]), "e2e": run.e2e_ms, "itl": run.itl_ms}


def predicted(run: cal.MeasuredRun, frontend: Optional[dict[str, Any]]) -> dict[str, float]:
    """Simulate ``run`` with the front end ``frontend`` on the shipped tables at scale 1
    (``None``: no profile at all, o1sim's defaults)."""
    sc = json.loads(json.dumps(run.scenario))
    if frontend is not None:
        sc.setdefault("cost_model", {})["profile"] = cal.profile_dict(GPU, 1.0, frontend, "frontend hold-out")
    s = o1sim.simulate(sc).summary
    ttft, e2e = float(s["ttft_ms"]["mean"]), float(s["e2e_ms"]["mean"])
    return {
        "ttft": ttft,
        "ttft_p99": float(s["ttft_ms"]["p99"]),
        "e2e": e2e,
        "itl": (e2e - ttft) / max(1, run.output_len - 1),
    }


def errors(run: cal.MeasuredRun, frontend: Optional[dict[str, Any]]) -> dict[str, float]:
    """predicted / measured − 1 per metric."""
    m, p = measured(run), predicted(run, frontend)
    return {k: p[k] / m[k] - 1.0 for k in METRICS}


def mape(errs: list[dict[str, float]]) -> dict[str, float]:
    return {k: statistics.fmean(abs(e[k]) for e in errs) for k in METRICS}


def study(runs: list[cal.MeasuredRun]) -> dict[str, Any]:
    """Every fold of both hold-outs: the fitted constants, and the held-out runs' errors with
    them and with the shipped ones; the same pooled per hold-out; the fit on all runs."""
    lat = [r for r in runs if not r.saturated]
    shipped = {r.name: errors(r, dict(cal.DEFAULT_FRONTEND)) for r in lat}
    no_profile = {r.name: errors(r, None) for r in lat}
    out: dict[str, Any] = {"runs": len(lat), "folds": [], "pooled": {}}
    schemes: list[tuple[str, Callable[[cal.MeasuredRun], str]]] = [("model", model_of), ("workload", workload_of)]
    for by, key in schemes:
        fitted_all: dict[str, dict[str, float]] = {}
        for group in sorted({key(r) for r in lat}):
            train = [r for r in runs if key(r) != group]
            test = [r for r in lat if key(r) == group]
            frontend = cal.fit(train, GPU, gpu_time_scale=1.0)["frontend"]
            fitted = {r.name: errors(r, frontend) for r in test}
            fitted_all.update(fitted)
            out["folds"].append(
                {
                    "by": by,
                    "held_out": group,
                    "fitted_on": sum(not r.saturated for r in train),
                    "predicted": len(test),
                    "frontend": frontend,
                    "fitted": mape(list(fitted.values())),
                    "shipped": mape([shipped[r.name] for r in test]),
                }
            )
        out["pooled"][by] = {
            "predicted": len(fitted_all),
            "fitted": mape(list(fitted_all.values())),
            "shipped": mape([shipped[n] for n in fitted_all]),
        }
    # what the fit sees: each run's engine side (no front end) at the shipped tables, and the
    # client's median TTFT less the engine's and the prompt's tokenisation
    engine = cal.profile_dict(GPU, 1.0, cal.ENGINE_ONLY, "engine side")
    sims = {r.name: cal.simulate_run(r, engine) for r in lat}
    out["batches"] = sorted(sims[r.name].mean_batch for r in lat)
    out["prompts"] = sorted(sims[r.name].prompt_tokens for r in lat)
    tok_ms = cal.DEFAULT_FRONTEND["prompt_token_us"] * 1e-3
    out["residuals"] = {
        m: sorted(
            (
                sims[r.name].mean_batch,
                float(r.extra["ttft_p50_ms"]) - sims[r.name].engine_ttft_p50_ms - tok_ms * sims[r.name].prompt_tokens,
            )
            for r in lat
            if model_of(r) == m
        )
        for m in sorted({model_of(r) for r in lat})
    }
    everything = cal.fit(runs, GPU, gpu_time_scale=1.0)["frontend"]
    out["in_sample"] = {
        "frontend": everything,
        "fitted": mape([errors(r, everything) for r in lat]),
        "shipped": mape(list(shipped.values())),
    }
    out["no_profile"] = mape(list(no_profile.values()))
    return out


def median_batch(s: dict[str, Any]) -> float:
    return float(statistics.median(s["batches"]))


def share_ms(fe: dict[str, Any], batch: float) -> float:
    """The front end's share of TTFT at a step of ``batch`` outputs, tokenisation left out:
    request_ms + token_ms + batch_token_us·(batch + 1)/2."""
    return float(fe["request_ms"] + fe["token_ms"] + fe["batch_token_us"] * 1e-3 * (batch + 1.0) / 2.0)


def spread(s: dict[str, Any]) -> dict[str, tuple[float, float]]:
    """(min, max) over the folds of ``a`` = request_ms + token_ms (ms), ``b`` = batch_token_us
    (µs), and the front end's share of TTFT at the runs' median batch (ms)."""
    fes = [f["frontend"] for f in s["folds"]]
    a = [fe["request_ms"] + fe["token_ms"] for fe in fes]
    b = [fe["batch_token_us"] for fe in fes]
    at = [share_ms(fe, median_batch(s)) for fe in fes]
    return {"a": (min(a), max(a)), "b": (min(b), max(b)), "share": (min(at), max(at))}


def excess(s: dict[str, Any], by: str, metric: str) -> float:
    """Percentage points by which the fitted constants' held-out MAPE exceeds the shipped ones'."""
    p = s["pooled"][by]
    return float(100 * (p["fitted"][metric] - p["shipped"][metric]))


def holds(s: dict[str, Any], by: str, metric: str) -> bool:
    """Whether the constants fitted without each group predict it as well as the shipped
    ones: pooled over the held-out runs, a MAPE at most :data:`TOLERANCE_POINTS` above theirs."""
    return excess(s, by, metric) <= TOLERANCE_POINTS


def verdict(s: dict[str, Any]) -> str:
    """One line: per hold-out, whether mean TTFT and mean E2E are predicted as well as with the
    shipped constants, and the folds that miss."""
    parts = []
    for by in s["pooled"]:
        said = []
        for k in ("ttft", "e2e"):
            e = excess(s, by, k)
            if holds(s, by, k):
                said.append(f"{LABELS[k]} yes ({e:+.2f})")
                continue
            worst = [
                f for f in s["folds"] if f["by"] == by and 100 * (f["fitted"][k] - f["shipped"][k]) > TOLERANCE_POINTS
            ]
            which = ", ".join(f"{f['held_out']} {100 * (f['fitted'][k] - f['shipped'][k]):+.2f}" for f in worst)
            said.append(f"{LABELS[k]} no ({e:+.2f}: {which})")
        parts.append(f"{by} held out: " + ", ".join(said))
    return (
        f"verdict (as well = a held-out MAPE at most {TOLERANCE_POINTS:.0f} point above the shipped constants'; "
        "excess in points): " + "; ".join(parts) + "."
    )


def report(s: dict[str, Any]) -> str:
    """The printed table, spread and verdict."""
    width = 32  # the first column: "model CodeLlama-34b-Instruct-hf"

    def pair(f: dict[str, float], g: dict[str, float], k: str) -> str:
        return f"{100 * f[k]:5.1f} /{100 * g[k]:5.1f}"

    def row(label: str, fitted_on: Optional[int], fe: Optional[dict[str, Any]], m: Optional[dict[str, Any]]) -> str:
        n = f"{fitted_on:6}" if fitted_on is not None else " " * 6
        c = (
            f"{fe['request_ms']:10.2f} {fe['token_ms']:8.2f} {fe['batch_token_us']:14.1f}"
            if fe is not None
            else " " * 34
        )
        errs = "".join(f" {pair(m['fitted'], m['shipped'], k)}" for k in METRICS) if m is not None else ""
        return f"{label:{width}} {n} {c} |{errs}".rstrip()

    lines = [
        f"Front-end constants fitted with the GPU kernels as shipped (gpu_time_scale 1) on {s['runs']} latency runs,",
        "one model or workload held out at a time; MAPE % over the held-out runs, fitted / shipped constants.",
        "",
        f"{'held out':{width}} {'fit on':>6} {'request_ms':>10} {'token_ms':>8} {'batch_token_us':>14} |"
        + "".join(f" {LABELS[k]:>13}" for k in METRICS),
        row("(shipped constants)", None, dict(cal.DEFAULT_FRONTEND), None),
    ]
    for by in s["pooled"]:
        for f in (f for f in s["folds"] if f["by"] == by):
            lines.append(row(f"{by} {f['held_out']}", f["fitted_on"], f["frontend"], f))
        p = s["pooled"][by]
        lines.append(row(f"  all {p['predicted']} held out by {by}", None, None, p))
    ins = s["in_sample"]
    lines.append(row("none (fitted on all, in sample)", s["runs"], ins["frontend"], ins))
    sp = spread(s)
    shipped = cal.DEFAULT_FRONTEND
    b_med = median_batch(s)
    lines += [
        "",
        f"spread over the {len(s['folds'])} folds: request_ms + token_ms {sp['a'][0]:.2f}–{sp['a'][1]:.2f} ms "
        f"(shipped {shipped['request_ms'] + shipped['token_ms']:.2f}), batch_token_us {sp['b'][0]:.1f}–{sp['b'][1]:.1f} µs "
        f"(shipped {shipped['batch_token_us']:.1f});",
        f"  their share of TTFT at the runs' median batch, B = {b_med:.0f} (the runs' simulated mean batches span "
        f"{s['batches'][0]:.0f}–{s['batches'][-1]:.0f}): {sp['share'][0]:.2f}–{sp['share'][1]:.2f} ms "
        f"(shipped {share_ms(shipped, b_med):.2f})",
        "what the fit explains, client median TTFT less the engine's less tokenisation (ms at a simulated mean batch B):",
        *(
            f"  {m + ':':27} " + ", ".join(f"{ms:.1f} at B = {b:.0f}" for b, ms in pts)
            for m, pts in s["residuals"].items()
        ),
        f"prompt_token_us not fitted (1.0): the runs' prompts span {s['prompts'][0]:.0f}–{s['prompts'][-1]:.0f} tokens, "
        f"{(s['prompts'][-1] - s['prompts'][0]) * shipped['prompt_token_us'] * 1e-3:.2f} ms of tokenisation at 1 µs",
        "no profile named (o1sim's defaults, benchmarks/real_vllm.py), all runs: "
        + ", ".join(f"{LABELS[k]} {s['no_profile'][k]:.1%}" for k in METRICS),
        verdict(s),
    ]
    return "\n".join(lines)


def doc_block(s: dict[str, Any]) -> str:
    """What docs/fidelity.md holds between its ``frontend-holdout`` markers."""
    return command_block(COMMAND, report(s))


def write(s: dict[str, Any]) -> None:
    write_block(DOC, "frontend-holdout", doc_block(s))


def main(argv: list[str]) -> int:
    d = data_dir()
    if d is None:
        print("skipped: ../shared/data/real-vllm-h100 not found")
        return 0
    s = study(cal.read_runs([d], gpu=GPU))
    if not all(math.isfinite(v) for f in s["folds"] for v in f["fitted"].values()):
        raise SystemExit("a fold's held-out error is not finite")
    print(report(s))
    if "--write" in argv:
        write(s)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
