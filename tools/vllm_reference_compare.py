"""Compare o1sim's `vllm` policy with the real vLLM v1 scheduler request by request, on the
reference runs in tests/data/vllm_reference/ (written by ../shared/tools/vllm-reference/driver.py
on the workloads of tools/vllm_reference_workloads.py). Both sides price a step with the
driver's linear model, so any difference is the scheduler's or the prefix cache's.

    .venv/bin/python tools/vllm_reference_compare.py [NAME ...]   # a table: requests within 1%, first divergence
"""

from __future__ import annotations

import csv
import json
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "vllm_reference"
#: Where the reference runs are read, NAME.requests.csv and NAME.config.json (the committed ones
#: unless O1SIM_VLLM_REF names a folder laid out the same way).
REF = Path(os.environ.get("O1SIM_VLLM_REF", DATA))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from vllm_reference_workloads import RUNS  # noqa: E402

#: The driver's step model (README of the tool): 5.0 + 0.02·prefill + 0.05·decodes + 0.00001·Σcontext ms.
LINEAR = {"kind": "linear", "base_ms": 5.0, "per_prefill_token_ms": 0.02, "per_decode_seq_ms": 0.05,
          "per_context_token_ms": 0.00001}


def read(path: Path) -> list[dict[str, str]]:
    with open(path) as f:
        return list(csv.DictReader(f))


def scenario(name: str) -> dict[str, Any]:
    """o1sim's scenario for reference run `name`, set up as the driver sets vLLM up."""
    # What vLLM really ran with, from the driver's configuration.
    cfg = json.loads((REF / f"{name}.config.json").read_text())
    rows = read(DATA / f"{name}.workload.csv")
    reqs = []
    for r in rows:
        q: dict[str, Any] = {"arrival_ms": float(r["arrival_ms"]), "prompt_tokens": int(r["prompt_tokens"]),
                             "output_tokens": int(r["output_tokens"]), "priority": int(r["priority"])}
        if int(r["prefix_group"]) >= 0 and int(r["prefix_length"]) > 0:
            q["prefix_group"] = int(r["prefix_group"])
            q["prefix_length"] = int(r["prefix_length"])
        reqs.append(q)
    return {
        "name": f"vllm reference: {name}", "seed": 1, "model": {"preset": "llama-3-8b", "max_context": 16384},
        "gpu": "h100",
        "scheduler": {"policy": "vllm", "block_size": cfg["block_size"], "num_gpu_blocks": cfg["num_gpu_blocks"] - 1,
                      "max_num_batched_tokens": cfg["max_num_batched_tokens"], "max_num_seqs": cfg["max_num_seqs"],
                      "enable_prefix_caching": cfg["enable_prefix_caching"], "scheduling_policy": cfg["policy"]},
        "cost_model": dict(LINEAR),
        "workload": {"requests": reqs},
    }


def compare(name: str) -> dict[str, Any]:
    """Per request TTFT and E2E against the reference: how many within 1%, the worst, and
    the first request (by arrival) that is not."""
    import o1sim

    ref = {int(r["id"]): r for r in read(REF / f"{name}.requests.csv")}
    res = o1sim.simulate(scenario(name))
    sim = res.requests
    n = len(ref)
    within = 0
    worst = 0.0
    first = None
    ids = sorted(ref, key=lambda i: (float(ref[i]["arrival_ms"]), i))
    hits_equal = 0
    for i in ids:
        r = ref[i]
        s = sim.iloc[i] if hasattr(sim, "iloc") else sim[i]
        errs = []
        for ours, theirs in ((float(s["ttft_ms"]), float(r["ttft_ms"])), (float(s["e2e_ms"]), float(r["e2e_ms"]))):
            errs.append(abs(ours - theirs) / max(abs(theirs), 1e-9))
        e = max(errs)
        worst = max(worst, e)
        if e <= 0.01:
            within += 1
        elif first is None:
            first = (i, float(r["arrival_ms"]), float(s["ttft_ms"]), float(r["ttft_ms"]), int(s.get("cached_tokens", -1)) if hasattr(s, "get") else -1,
                     int(r["num_cached_tokens"]))
        if "cached_tokens" in getattr(s, "index", []) and int(s["cached_tokens"]) == int(r["num_cached_tokens"]):
            hits_equal += 1
    return {"name": name, "requests": n, "within_1pct": within, "worst": worst, "first_divergence": first,
            "hits_equal": hits_equal}


def main() -> None:
    names = sys.argv[1:] or [n for n in RUNS if (REF / f"{n}.requests.csv").is_file()]
    print(f"{'run':<18} {'requests':>8} {'within 1%':>10} {'worst':>8} {'cached tokens equal':>20}  first divergence (id, arrival, TTFT ours|vLLM, hit ours|vLLM)")
    for n in names:
        c = compare(n)
        print(f"{c['name']:<18} {c['requests']:>8} {c['within_1pct']:>10} {100 * c['worst']:>7.1f}% {c['hits_equal']:>20}  {c['first_divergence']}")


if __name__ == "__main__":
    main()
