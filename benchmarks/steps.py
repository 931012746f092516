"""Whole-step fidelity: `o1sim.predict_step` against whole-model steps of the reference
engine measured on an H200 (`benchmarks/data/h200_steps_*.json`, written by
`benchmarks/gpu/reference_steps.py`; never needed by CI).

Two predictions per step:

* **shipped** — the shipped H200 profile (the calibration tables of ../shared). The engine
  measured here is our own rewrite of the tables' reference engine from their README; its
  operators' GPU times match the tables' (GEMMs within ~2%, RoPE, norms and attention
  within ~10% at the sizes where the GPU is the bottleneck: compare `h200_ops_c/` with the
  tables), but this machine's CPU launched kernels ~2.5x faster than the tables' did, so
  launch-bound eager steps are over-predicted here.
* **same-machine** — a profile derived (tools/make_profile.py) from the same engine's
  operators timed on the same machine right before its steps (`h200_ops_c/`): what is left
  is the composition (eager launch overlap, graph replay, sampled rows, attention per
  request) — the part the model itself must get right.

Launch-bound (CPU-bound) eager steps varied by up to 40% between H200 machines of the same
kind on the same day; GPU-bound steps by ~3%.

    python benchmarks/steps.py [--detail]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import o1sim

DATA = Path(__file__).resolve().parent / "data"
MODELS = {
    # the engine's max context is its cache size: the presets' 8,192 would refuse 32k prefills
    "llama-3-8b": {"preset": "llama-3-8b", "max_context": 131072},
    "llama-3-70b-8l": {"preset": "llama-3-70b", "layers": 8, "max_context": 131072},
}


def gpu_bound(rec: dict, mode: str) -> bool:
    """Graph replays, and eager steps of at least 2,048 new tokens."""
    return mode == "graph" or sum(b["new_tokens"] for b in rec["batch"]) >= 2048


def rows(path: Path, profiles: dict[str, object]) -> list[dict]:
    out = []
    doc = json.loads(path.read_text())
    for rec in doc["steps"]:
        for mode in ("eager", "graph"):
            ms = rec.get(f"{mode}_ms")
            if ms is None:
                continue
            row = {"file": path.name, "model": rec["model"], "kind": rec["kind"], "mode": mode, "measured": ms,
                   "batch": rec["batch"], "gpu_bound": gpu_bound(rec, mode)}
            for name, prof in profiles.items():
                # these steps ran in the reference engine: price them as that engine
                p = o1sim.predict_step(MODELS[rec["model"]], "h200", tp=1, batch=rec["batch"],
                                       cuda_graphs=(mode == "graph"), profile=prof, engine="reference")
                row[name] = p.total_ms
            out.append(row)
    return out


def err(r: dict, name: str) -> float:
    return abs(r[name] - r["measured"]) / r["measured"] * 100


def summary(all_rows: list[dict], names: list[str]) -> dict:
    groups: dict[tuple, list] = {}
    for r in all_rows:
        groups.setdefault((r["model"], r["kind"], r["mode"]), []).append(r)
    table = []
    for key, rs in sorted(groups.items()):
        table.append((key, len(rs), {n: statistics.mean(err(r, n) for r in rs if n in r) for n in names if any(n in r for r in rs)}))
    return {"groups": table}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--detail", action="store_true", help="print every step")
    args = ap.parse_args()
    same = DATA / "h200_ops_c" / "profile.json"
    all_rows = rows(DATA / "h200_steps_c.json", {"shipped": None, "same-machine": str(same)})
    names = ["shipped", "same-machine"]
    if args.detail:
        for r in all_rows:
            b = r["batch"]
            shape = f"{len(b)}x{b[-1]['new_tokens']}+{b[-1]['context_tokens']}" if len(b) > 1 else f"{b[0]['new_tokens']}+{b[0]['context_tokens']}"
            preds = "  ".join(f"{n}={r[n]:9.3f} ({(r[n] - r['measured']) / r['measured'] * 100:+5.1f}%)" for n in names if n in r)
            print(f"{r['file']:18} {r['model']:15} {r['kind']:15} {r['mode']:5} {shape:>16}  measured={r['measured']:9.3f}  {preds}")
        print()
    print(f"{'model':15} {'kind':16} {'mode':6} {'n':>3}  " + "  ".join(f"{n + ' MAPE':>18}" for n in names))
    for (model, kind, mode), n, errs in summary(all_rows, names)["groups"]:
        cells = "  ".join(f"{errs[nm]:17.1f}%" if nm in errs else f"{'-':>18}" for nm in names)
        print(f"{model:15} {kind:16} {mode:6} {n:3}  {cells}")
    print()
    for label, pick in [("GPU-bound steps (graph replays, eager >= 2,048 tokens)", lambda r: r["gpu_bound"]),
                        ("launch-bound eager steps", lambda r: not r["gpu_bound"]), ("all steps", lambda r: True)]:
        sel = [r for r in all_rows if pick(r)]
        cells = "  ".join(f"{n}: {statistics.mean(err(r, n) for r in sel if n in r):.1f}% over {sum(n in r for r in sel)}" for n in names)
        print(f"mean |error|, {label}: {cells}")


if __name__ == "__main__":
    main()
