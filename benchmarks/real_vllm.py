"""o1sim's defaults against real vLLM serving runs (the development set).

Reads the sixteen inference-perf runs of real vLLM v0.15.1 (V1 engine) on H100 SXM in
``../shared/data/real-vllm-h100`` (skips with a message when they are not there), builds
each run's scenario from its ``exp-config.yaml`` (model, TP, server limits) and
``results/config.yaml`` (the workload inference-perf actually ran — see below), simulates it
with o1sim's **defaults** (no cost model chosen) and prints, per run and overall, the error
of mean and p99 TTFT, E2E and ITL against the client-side summaries, the saturated
throughput of the ``reasoning`` runs, and whether o1sim predicted an overload the server
did not have.

    .venv/bin/python benchmarks/real_vllm.py               # the table
    .venv/bin/python benchmarks/real_vllm.py --runs 7b     # runs whose name contains "7b"
    .venv/bin/python benchmarks/real_vllm.py --json out.json

What the runs did (read from the files, and from inference-perf's source at the version
the runs used, whose parsed config lacks the later ``enable_multi_turn_chat`` and ``trace``
fields, i.e. a release between 2025-10-15 and 2025-11-14):

* ``profile.yaml`` names its shared-prefix fields ``num_unique_system_prompts`` /
  ``num_users_per_system_prompt``, which that inference-perf did not know: it ignored them
  and used its defaults, 10 groups x 10 prompts (``results/config.yaml`` shows what ran).
  Each prompt is a group's system prompt + " " + its own question, made of random token
  ids decoded to text; the 100 prompts are drawn round-robin (request n of a stage sends
  prompt n mod 100), so after the first 100 requests every prompt repeats whole.
* The server re-tokenises that text: prompts are longer than system + question (the
  client's count, ``prompt_len``, is what the server saw); outputs are exactly
  ``output_len`` tokens (``ignore_eos``).
* Constant (evenly spaced) arrivals per stage; a stage starts when the previous one's
  requests have all finished. aiohttp's default total timeout (300 s) aborts requests at
  the client (the ``reasoning`` runs' failures).
* ITL is the consistent one of the data README: (mean E2E - mean TTFT) / (output_len - 1)
  (inference-perf's own ``inter_token_latency`` counts the SSE blank lines as chunks).
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

ROOT = Path(__file__).resolve().parent.parent
#: A request whose client timeout is aiohttp's default total of 5 minutes.
CLIENT_TIMEOUT_S = 300.0
#: "Overload": mean TTFT above this where the server's stayed below it.
OVERLOAD_TTFT_S = 0.5

def data_dir() -> Optional[Path]:
    """``shared/data/real-vllm-h100`` next to the checkout or one level up (worktrees)."""
    for base in (ROOT.parent, ROOT.parent.parent):
        d = base / "shared" / "data" / "real-vllm-h100"
        if d.is_dir():
            return d
    return None


def _yaml_scalars(path: Path) -> dict[str, str]:
    """``key: value`` lines of a flat YAML file (exp-config.yaml)."""
    out = {}
    for line in path.read_text().splitlines():
        if ":" in line and not line.startswith(" "):
            k, v = line.split(":", 1)
            out[k.strip()] = v.strip()
    return out


def _ran_config(path: Path) -> dict[str, Any]:
    """What inference-perf ran, from its parsed ``results/config.yaml``: shared-prefix
    fields and the load stages (a minimal reader for the layout it writes)."""
    text = path.read_text().splitlines()
    sp: dict[str, int] = {}
    stages: list[dict[str, float]] = []
    section = None
    for line in text:
        s = line.strip()
        if s.startswith("shared_prefix:"):
            section = "sp"
            continue
        if s.startswith("stages:"):
            section = "stages"
            continue
        if section == "sp":
            if ":" in s and line.startswith("    "):
                k, v = s.split(":", 1)
                sp[k.strip()] = int(v)
            else:
                section = None
        elif section == "stages":
            if s.startswith("- rate:"):
                stages.append({"rate": float(s.split(":", 1)[1])})
            elif s.startswith("duration:"):
                stages[-1]["duration"] = float(s.split(":", 1)[1])
            else:
                section = None
    return {"shared_prefix": sp, "stages": stages}


def load_run(d: Path) -> dict[str, Any]:
    exp = _yaml_scalars(d / "exp-config.yaml")
    ran = _ran_config(d / "results" / "config.yaml")
    summary = json.loads((d / "results" / "summary_lifecycle_metrics.json").read_text())
    stages = []
    for i in range(len(ran["stages"])):
        f = d / "results" / f"stage_{i}_lifecycle_metrics.json"
        stages.append(json.loads(f.read_text()) if f.exists() else None)
    return {"name": d.name[16:], "dir": d, "exp": exp, "ran": ran, "summary": summary, "stages": stages}


def measured(run: dict[str, Any], s: Optional[dict[str, Any]] = None) -> dict[str, float]:
    """Client-side figures (seconds) of the whole run or one stage's summary ``s``."""
    s = s or run["summary"]
    ok = s["successes"]
    lat = ok["latency"]
    out_len = run["ran"]["shared_prefix"]["output_len"]
    ttft, e2e = lat["time_to_first_token"], lat["request_latency"]
    return {
        "ttft_mean": ttft["mean"], "ttft_p99": ttft["p99"],
        "e2e_mean": e2e["mean"], "e2e_p99": e2e["p99"],
        "itl": (e2e["mean"] - ttft["mean"]) / (out_len - 1),
        "prompt_len": ok["prompt_len"]["mean"],
        "successes": ok["count"], "failures": s["failures"]["count"],
        "output_tokens_per_s": ok["throughput"]["output_tokens_per_sec"],
        "requests_per_s": ok["throughput"]["requests_per_sec"],
    }


def scenario(run: dict[str, Any], features: set[str]) -> tuple[dict[str, Any], list[str]]:
    """The run as an o1sim scenario at defaults, and notes on what could not be expressed."""
    exp, ran = run["exp"], run["ran"]
    sp = ran["shared_prefix"]
    notes: list[str] = []
    prompt = round(measured(run)["prompt_len"])
    sys_len = round(sp["system_prompt_len"] * prompt / (sp["system_prompt_len"] + sp["question_len"]))
    sc: dict[str, Any] = {
        "name": run["name"],
        "model": exp["model"],  # the Hugging Face id: a preset alias
        "gpu": "h100",
        "deployment": {"tp": int(exp["tensor_parallelism"])},
        "scheduler": {
            "policy": "vllm",
            "max_num_batched_tokens": int(exp["max_num_batched_tokens"]),
            "max_num_seqs": int(exp["max_num_seqs"]),
            "max_model_len": int(exp["max_model_len"]),
            "block_size": 16,
            "gpu_memory_utilization": 0.9,
        },
    }
    groups, per_group = sp["num_groups"], sp["num_prompts_per_group"]
    if "shared_prefix" in features and "explicit" not in features:
        wl: dict[str, Any] = {
            "shared_prefix": {
                "groups": groups, "users_per_group": per_group, "prefix_tokens": sys_len,
                "question": prompt - sys_len, "output": sp["output_len"],
            },
            # inference-perf's "constant" load: ⌊rate·duration⌋ exponential gaps scaled to the stage
            "arrival": {"kind": "poisson_count", "stages": [{"rate": st["rate"], "duration_s": st["duration"]} for st in ran["stages"]]},
        }
    else:
        wl = {"requests": explicit_requests(run, prompt, sys_len, features, notes)}
    if "timeout" in features:
        wl["timeout_s"] = CLIENT_TIMEOUT_S
    else:
        notes.append("no client timeout")
    sc["workload"] = wl
    return sc, notes


#: Gap between two stages: inference-perf starts a stage once the previous one's requests
#: have all finished (and one second later); the simulator is idle in between either way.
STAGE_GAP_S = 10.0


def explicit_requests(run: dict[str, Any], prompt: int, sys_len: int, features: set[str], notes: list[str]) -> list[dict[str, Any]]:
    """The run's requests one by one: request n of a stage sends prompt n mod (groups x
    prompts per group) of the shuffled pool (as inference-perf's shared-prefix generator
    did), every prompt `prompt` tokens of which the first `sys_len` are its group's; arrivals
    as its "constant" load (exponential gaps scaled to each stage)."""
    import random

    sp = run["ran"]["shared_prefix"]
    pool = sp["num_groups"] * sp["num_prompts_per_group"]
    group_of = [i // sp["num_prompts_per_group"] for i in range(pool)]
    rng = random.Random(0)
    rng.shuffle(group_of)
    reqs = []
    t0 = 0.0
    seen_prompt: set[int] = set()
    seen_group: set[int] = set()
    for st in run["ran"]["stages"]:
        n = int(st["rate"] * st["duration"])
        gaps = [rng.expovariate(st["rate"]) for _ in range(n)]
        scale = st["duration"] / sum(gaps)
        t = t0
        for i in range(n):
            pid = i % pool
            t += gaps[i] * scale
            r: dict[str, Any] = {"arrival_ms": t * 1e3, "prompt_tokens": prompt, "output_tokens": sp["output_len"]}
            if "cached_tokens" in features:
                # vLLM's hit: whole blocks, at most the prompt less one token
                hit = prompt - 1 if pid in seen_prompt else (sys_len if group_of[pid] in seen_group else 0)
                r["cached_tokens"] = hit // 16 * 16
            elif "prefix_group" in features:
                r["prefix_group"] = f"prompt{pid}"
                r["prefix_length"] = prompt
            reqs.append(r)
            seen_prompt.add(pid)
            seen_group.add(group_of[pid])
        t0 += st["duration"] + STAGE_GAP_S
    if "cached_tokens" in features:
        notes.append("explicit requests with cached_tokens (a local stand-in for prefix caching)")
    elif "prefix_group" in features:
        notes.append("explicit requests, prefix_group = the prompt")
    else:
        notes.append("explicit requests, no prefix caching in this o1sim: prompts computed in full")
    return reqs


def detect_features() -> set[str]:
    feats = set()
    base = {"model": "llama-3-8b", "gpu": "h100"}
    probes = {
        "shared_prefix": {"shared_prefix": {"groups": 1, "users_per_group": 1, "prefix_tokens": 8,
                                             "question": {"kind": "fixed", "value": 8}, "output": {"kind": "fixed", "value": 2}},
                          "arrival": {"kind": "constant", "stages": [{"rate": 1.0, "duration_s": 1.0}]}},
        "prefix_group": {"requests": [{"arrival_ms": 0, "prompt_tokens": 8, "output_tokens": 2, "prefix_group": "a", "prefix_length": 8}]},
        "cached_tokens": {"requests": [{"arrival_ms": 0, "prompt_tokens": 8, "output_tokens": 2, "cached_tokens": 4}]},
        "timeout": {"arrival": {"kind": "constant", "rate": 1.0}, "num_requests": 1,
                    "prompt": {"kind": "fixed", "value": 8}, "output": {"kind": "fixed", "value": 2}, "timeout_s": 10.0},
    }
    for name, wl in probes.items():
        try:
            o1sim.Scenario({**base, "workload": wl}).validate()
            feats.add(name)
        except o1sim.SimError:
            pass
    return feats


def predicted(res: o1sim.Result, out_len: int) -> dict[str, float]:
    s = res.summary
    ttft, e2e = s["ttft_ms"], s["e2e_ms"]
    sec = lambda v: (v or float("nan")) / 1e3  # noqa: E731
    return {
        "ttft_mean": sec(ttft["mean"]), "ttft_p99": sec(ttft["p99"]),
        "e2e_mean": sec(e2e["mean"]), "e2e_p99": sec(e2e["p99"]),
        "itl": (sec(e2e["mean"]) - sec(ttft["mean"])) / (out_len - 1),
        "finished": s["finished"], "output_tokens_per_s": s["output_tokens_per_s"],
    }


def err(p: float, m: float) -> float:
    return p / m - 1.0 if m and not math.isnan(p) else float("nan")


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", default="", help="only runs whose name contains this")
    ap.add_argument("--json", help="write per-run figures here")
    ap.add_argument("--explicit", action="store_true", help="give the requests one by one (explicit form) instead of shared_prefix")
    args = ap.parse_args(argv)
    d = data_dir()
    if d is None:
        print("skipped: ../shared/data/real-vllm-h100 not found")
        return 0
    feats = detect_features() | ({"explicit"} if args.explicit else set())
    runs = [load_run(p) for p in sorted(d.iterdir()) if (p / "exp-config.yaml").exists() and args.runs in p.name]
    rows = []
    print(f"o1sim {getattr(o1sim, '__version__', '?')} defaults; features: {sorted(feats) or 'none'}")
    hdr = f"{'run':36} {'TTFT ms meas/pred':>19} {'err':>6} {'p99 err':>7} {'E2E s meas/pred':>15} {'err':>6} {'p99 err':>7} {'ITL ms meas/pred':>17} {'err':>6} {'wall s':>6}"
    print(hdr)
    for run in runs:
        sc, notes = scenario(run, feats)
        t = time.perf_counter()
        res = o1sim.simulate(sc)
        wall = time.perf_counter() - t
        out_len = run["ran"]["shared_prefix"]["output_len"]
        m, p = measured(run), predicted(res, out_len)
        row = {"run": run["name"], "measured": m, "predicted": p, "notes": notes, "wall_s": wall}
        rows.append(row)
        reasoning = "reasoning" in run["name"]
        if reasoning:
            # saturated throughput: output tokens per second of the requests that finished
            e = err(p["output_tokens_per_s"], m["output_tokens_per_s"])
            print(f"{run['name']:36} saturated: measured {m['output_tokens_per_s']:7.0f} tok/s ({m['successes']} ok), predicted {p['output_tokens_per_s']:7.0f} ({p['finished']} ok) {e:+6.1%}")
            continue
        over = p["ttft_mean"] > OVERLOAD_TTFT_S and m["ttft_mean"] < OVERLOAD_TTFT_S
        row["false_overload"] = over
        print(
            f"{run['name']:36} {m['ttft_mean']*1e3:8.1f}/{p['ttft_mean']*1e3:9.1f} {err(p['ttft_mean'], m['ttft_mean']):+6.0%} {err(p['ttft_p99'], m['ttft_p99']):+7.0%}"
            f" {m['e2e_mean']:7.2f}/{p['e2e_mean']:6.2f} {err(p['e2e_mean'], m['e2e_mean']):+6.1%} {err(p['e2e_p99'], m['e2e_p99']):+7.1%}"
            f" {m['itl']*1e3:8.2f}/{p['itl']*1e3:7.2f} {err(p['itl'], m['itl']):+6.1%} {wall:6.2f}" + ("  OVERLOAD" if over else "")
        )
    lat = [r for r in rows if "false_overload" in r]
    mape = lambda k: sum(abs(err(r["predicted"][k], r["measured"][k])) for r in lat) / max(1, len(lat))  # noqa: E731
    if lat:
        print(f"MAPE over {len(lat)} latency runs: TTFT mean {mape('ttft_mean'):.1%} p99 {mape('ttft_p99'):.1%} | "
              f"E2E mean {mape('e2e_mean'):.1%} p99 {mape('e2e_p99'):.1%} | ITL {mape('itl'):.1%} | "
              f"false overloads {sum(r['false_overload'] for r in lat)}")
    sat = [r for r in rows if "reasoning" in r["run"]]
    if sat:
        sm = sum(abs(err(r["predicted"]["output_tokens_per_s"], r["measured"]["output_tokens_per_s"])) for r in sat) / len(sat)
        print(f"saturated throughput MAPE over {len(sat)} reasoning runs: {sm:.1%}")
    notes = sorted({n for r in rows for n in r["notes"]})
    for n in notes:
        print(f"note: {n}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
