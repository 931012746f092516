"""o1sim's defaults against real vLLM serving runs (the development set).

Reads the sixteen inference-perf runs of real vLLM (v0.15.1, V1 engine) on H100 SXM in
``../shared/data/real-vllm-h100`` (skips with a message when they are not there), builds
each run's scenario from its ``exp-config.yaml`` (model, TP, server limits) and
``results/config.yaml`` (the workload inference-perf actually ran; ``o1sim.calibrate``
reads both), simulates it with o1sim's **defaults** (no cost model chosen) and prints, per
run and overall, the error of mean and p99 TTFT, E2E and ITL against the client-side
summaries, the saturated throughput of the ``reasoning`` runs, and whether o1sim predicted
an overload the server did not have.

    .venv/bin/python benchmarks/real_vllm.py               # the table
    .venv/bin/python benchmarks/real_vllm.py --runs 7b     # runs whose name contains "7b"
    .venv/bin/python benchmarks/real_vllm.py --calibrate   # + o1sim calibrate, held out by workload
    .venv/bin/python benchmarks/real_vllm.py --step-matched  # + saturated runs at the measured step
    .venv/bin/python benchmarks/real_vllm.py --json out.json

What the runs did (from the files, and from inference-perf's source at the version the runs
used, whose parsed config lacks the later ``enable_multi_turn_chat`` and ``trace`` fields):
inference-perf ignored the profile's ``num_unique_system_prompts``/``num_users_per_system_prompt``
and ran its defaults, 10 groups x 10 prompts, resent round-robin (``workload.shared_prefix``);
its ``constant`` load is ``poisson_count``; the server re-tokenises the random text, so the
client's prompt count is what the server saw; outputs are exactly ``output_len``
(``ignore_eos``); aiohttp's default 300 s total timeout aborts requests at the client.
ITL is the consistent one of the data README: (mean E2E − mean TTFT) / (output_len − 1).

Saturated runs (requests failed: the ``reasoning`` runs, 4 req/s of 1,448-token outputs)
print, measured/predicted, the output tokens/s generated for the finished requests over
inference-perf's span (first send to last end, timed-out requests included; see
``o1sim.calibrate._generated_tokens_per_s`` for why not its re-tokenised count), the finished
requests, and their per-token time, (mean E2E − mean TTFT) / (output_len − 1): the decode
step at a full batch of long contexts. Near capacity the first is that step's error
amplified: a server slower than the arrivals queues until requests wait close to the 300 s
timeout, and then each one admitted too late is aborted mid-decode, its work wasted.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any, Optional

import o1sim
from o1sim import calibrate as cal

ROOT = Path(__file__).resolve().parent.parent
#: "Overload": mean TTFT above this where the server's stayed below it.
OVERLOAD_TTFT_MS = 500.0


def data_dir() -> Optional[Path]:
    """``shared/data/real-vllm-h100`` next to the checkout or one level up (worktrees)."""
    for base in (ROOT.parent, ROOT.parent.parent):
        d = base / "shared" / "data" / "real-vllm-h100"
        if d.is_dir():
            return d
    return None


def err(p: float, m: float) -> float:
    return p / m - 1.0 if m and math.isfinite(p) else float("nan")


def evaluate(run: cal.MeasuredRun) -> dict[str, Any]:
    """Simulate ``run`` at defaults; the figures the table prints."""
    t = time.perf_counter()
    res = o1sim.simulate(run.scenario)
    wall = time.perf_counter() - t
    s = res.summary
    ms = lambda d, k: float(d[k]) if d.get(k) is not None else float("nan")  # noqa: E731
    ttft, e2e = ms(s["ttft_ms"], "mean"), ms(s["e2e_ms"], "mean")
    pred = {
        "ttft_mean": ttft, "ttft_p99": ms(s["ttft_ms"], "p99"), "e2e_mean": e2e, "e2e_p99": ms(s["e2e_ms"], "p99"),
        "itl": (e2e - ttft) / (run.output_len - 1), "finished": s["finished"], "output_tokens_per_s": s["output_tokens_per_s"],
        "prefix_cache_hit_rate": s.get("prefix_cache_hit_rate"), "preemptions": s.get("preemptions", 0),
    }
    meas = {
        "ttft_mean": run.ttft_ms, "ttft_p99": run.extra["ttft_p99_ms"], "e2e_mean": run.e2e_ms, "e2e_p99": run.extra["e2e_p99_ms"],
        "itl": run.itl_ms, "successes": run.extra["successes"], "output_tokens_per_s": run.output_tokens_per_s,
        "client_output_tokens_per_s": run.extra.get("client_output_tokens_per_s"),
    }
    return {"run": run.name[16:], "measured": meas, "predicted": pred, "saturated": run.saturated, "wall_s": wall}


def step_matched(run: cal.MeasuredRun, iters: int = 12) -> dict[str, Any]:
    """A diagnostic for a saturated run, not a prediction: the GPU time scale (bisected on
    [0.5, 3]) at which the simulated per-token time of finished requests equals the measured
    one, and the throughput and finished requests simulated there. It tells the error of the
    decode step at a full batch of long contexts apart from that of the queue, the timeouts
    and the metric: when the step is right, is the throughput?"""
    def sim(scale: float) -> dict[str, Any]:
        sc = dict(run.scenario)
        sc["cost_model"] = dict(sc.get("cost_model", {}), profile=cal.profile_dict("h100", scale, None, "step-matched probe"))
        s = o1sim.simulate(sc).summary
        return {"scale": scale, "itl": (s["e2e_ms"]["mean"] - s["ttft_ms"]["mean"]) / (run.output_len - 1),
                "finished": s["finished"], "output_tokens_per_s": s["output_tokens_per_s"]}
    lo, hi = 0.5, 3.0
    best = sim(1.0)
    for _ in range(iters):
        mid = (lo + hi) / 2
        best = sim(mid)
        if best["itl"] < run.itl_ms:
            lo = mid
        else:
            hi = mid
    return best


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--runs", default="", help="only runs whose name contains this")
    ap.add_argument("--json", help="write per-run figures here")
    ap.add_argument("--engine", choices=("vllm", "reference"), default=None,
                    help="cost_model.engine for every run (default: o1sim's default, vllm; reference: the plain "
                         "PyTorch engine without a serving front end, the cost model before issue 14)")
    ap.add_argument("--step-matched", action="store_true",
                    help="diagnostic: each saturated run again with the GPU time scaled so its per-token time is the measured one")
    ap.add_argument("--calibrate", action="store_true",
                    help="also o1sim calibrate: one profile per deployment, each workload held out in turn")
    args = ap.parse_args(argv)
    d = data_dir()
    if d is None:
        print("skipped: ../shared/data/real-vllm-h100 not found")
        return 0
    runs = [r for r in cal.read_runs([d], gpu="h100") if args.runs in r.name]
    if args.engine:
        for r in runs:
            r.scenario["cost_model"] = dict(r.scenario.get("cost_model", {}), engine=args.engine)
    rows = [evaluate(r) for r in runs]
    what = f"o1sim (cost_model.engine = {args.engine!r})" if args.engine else "o1sim defaults"
    print(f"{what} against {len(runs)} real vLLM runs (H100 SXM); errors = predicted / measured − 1")
    print(f"{'run':34} {'TTFT ms meas/pred':>18} {'err':>6} {'p99':>6} {'E2E s meas/pred':>16} {'err':>6} {'p99':>6} "
          f"{'ITL ms meas/pred':>17} {'err':>6} {'wall s':>6}")
    for row in rows:
        m, p = row["measured"], row["predicted"]
        if row["saturated"]:
            e = err(p["output_tokens_per_s"], m["output_tokens_per_s"])
            print(f"{row['run']:34} saturated: {m['output_tokens_per_s']:5.0f}/{p['output_tokens_per_s']:5.0f} tok/s {e:+6.1%}, "
                  f"finished {m['successes']}/{p['finished']}; per token {m['itl']:5.2f}/{p['itl']:5.2f} ms "
                  f"{err(p['itl'], m['itl']):+6.1%}")
            continue
        over = p["ttft_mean"] > OVERLOAD_TTFT_MS > m["ttft_mean"]
        row["false_overload"] = over
        print(f"{row['run']:34} {m['ttft_mean']:8.1f}/{p['ttft_mean']:8.1f} {err(p['ttft_mean'], m['ttft_mean']):+6.1%} "
              f"{err(p['ttft_p99'], m['ttft_p99']):+6.0%} {m['e2e_mean'] / 1e3:7.2f}/{p['e2e_mean'] / 1e3:7.2f} "
              f"{err(p['e2e_mean'], m['e2e_mean']):+6.1%} {err(p['e2e_p99'], m['e2e_p99']):+6.0%} "
              f"{m['itl']:8.2f}/{p['itl']:7.2f} {err(p['itl'], m['itl']):+6.1%} {row['wall_s']:6.2f}" + ("  OVERLOAD" if over else ""))
    lat = [r for r in rows if not r["saturated"]]
    if lat:
        mape = lambda k: sum(abs(err(r["predicted"][k], r["measured"][k])) for r in lat) / len(lat)  # noqa: E731
        print(f"MAPE over {len(lat)} latency runs: TTFT mean {mape('ttft_mean'):.1%} (p99 {mape('ttft_p99'):.1%}) | "
              f"E2E mean {mape('e2e_mean'):.1%} (p99 {mape('e2e_p99'):.1%}) | ITL {mape('itl'):.1%} | "
              f"false overloads {sum(r['false_overload'] for r in lat)}")
    sat = [r for r in rows if r["saturated"]]
    if sat:
        sm = sum(abs(err(r["predicted"]["output_tokens_per_s"], r["measured"]["output_tokens_per_s"])) for r in sat) / len(sat)
        si = sum(abs(err(r["predicted"]["itl"], r["measured"]["itl"])) for r in sat) / len(sat)
        print(f"saturated runs ({len(sat)}): MAPE of output tokens/s generated for finished requests {sm:.1%}, "
              f"of their per-token time {si:.1%}")
    print(f"simulated in {sum(r['wall_s'] for r in rows):.2f} s")
    out: dict[str, Any] = {"runs": rows}
    if args.step_matched and sat:
        print("\nsaturated runs with the decode step matched (GPU time scaled until the simulated per-token time of")
        print("finished requests is the measured one; a diagnostic of the queue, timeouts and metric, not a prediction):")
        by_name = {r.name[16:]: r for r in runs}
        errs = []
        for row in sat:
            if row["predicted"]["preemptions"]:
                print(f"  {row['run']:34} KV-bound (the simulation preempts {row['predicted']['preemptions']} times): "
                      "its per-token time is the preemptions', not the step's; left out")
                continue
            m, d = row["measured"], step_matched(by_name[row["run"]])
            e = err(d["output_tokens_per_s"], m["output_tokens_per_s"])
            errs.append(abs(e))
            row["step_matched"] = d
            print(f"  {row['run']:34} x{d['scale']:.3f}: per token {m['itl']:5.2f}/{d['itl']:5.2f} ms, "
                  f"finished {m['successes']}/{d['finished']}, {m['output_tokens_per_s']:5.0f}/{d['output_tokens_per_s']:5.0f} tok/s {e:+6.1%}")
        if errs:
            print(f"  MAPE of output tokens/s with the step matched, {len(errs)} runs: {sum(errs) / len(errs):.1%}")
    if args.calibrate:
        ev = cal.calibrate(runs, "h100", per="deployment", holdout_by="workload")
        print("\no1sim calibrate (one profile per deployment; each workload held out in turn: fitted on the other")
        print("12 runs, predicting the 4 runs of the held-out workload), MAPE over the latency runs:")
        for which, label in (("defaults", "defaults"), ("in_sample", "fitted on all"), ("held_out", "held out")):
            m3 = [ev.mape(which, k) for k in ("ttft", "e2e", "itl")]
            print(f"  {label:14} TTFT {m3[0]:6.1%}  E2E {m3[1]:6.1%}  ITL {m3[2]:6.1%}")
        out["calibrate"] = {w: {k: ev.mape(w, k) for k in ("ttft", "e2e", "itl")} for w in ("defaults", "in_sample", "held_out")}
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
