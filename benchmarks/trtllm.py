"""TensorRT-LLM's published max-throughput points against ``engine = "trtllm"``.

NVIDIA publishes, per release, the output throughput ``trtllm-bench throughput`` reaches
with every request queued at once (``docs/source/performance/perf-overview.md``). This
simulates each point the way the published runs were made and prints published vs predicted:

* the model and GPU as published (``nvidia/Llama-3.1-8B-Instruct-FP8`` → ``llama-3.1-8b``,
  ``nvidia/Llama-3.3-70B-Instruct-FP8`` → ``llama-3.3-70b``; FP8 weights, FP8 KV cache: the
  ModelOpt checkpoints' ``kv_cache_quant_algo``), one replica of TP GPUs on an HGX box;
* ``cost_model.engine = "trtllm"``, ``scheduler.policy = "trtllm"`` with
  ``trtllm-bench``'s defaults (``guaranteed_no_evict``, ``max_batch_size`` and
  ``max_num_tokens`` from its heuristic for the dataset, no context chunking) and
  ``kv_cache_free_gpu_mem_fraction = 0.95`` (the document: "in a majority of cases, we also
  use ... 0.95"), TensorRT-LLM's 32-token KV blocks (``KvCacheConfig.tokens_per_block``);
* the dataset of ``prepare_dataset.py ... --input-stdev=0 --output-stdev=0``: ``num_requests``
  requests of exactly ISL prompt and OSL output tokens (the document's table of request
  counts; 1,500 for 1024/2048, which it does not list, as for 1000/2000), all at t = 0;
* the metric: total output tokens over the time from the first request to the last
  completion (``Total Output Throughput``).

    .venv/bin/python benchmarks/trtllm.py            # the table and the mean error
    .venv/bin/python benchmarks/trtllm.py --write    # and put it in docs/fidelity.md
    .venv/bin/python benchmarks/trtllm.py --only 8b  # a subset (substring of the point's key)

``tests/test_trtllm_doc.py`` holds ``docs/fidelity.md``'s table equal to this script's.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from docblock import write_block

import o1sim

DOC = Path(__file__).resolve().parents[1] / "docs" / "fidelity.md"
RELEASE = "v0.20"

#: Output tokens/s, TensorRT-LLM v0.20's perf-overview.md ("Llama 3.1 8B FP8" and
#: "Llama 3.3 70B FP8" tables; empty cells were not published). Keys: (model, gpu, tp).
PUBLISHED: dict[tuple[str, str, int], dict[tuple[int, int], float]] = {
    ("llama-3.1-8b", "h200", 1): {
        (128, 128): 27970.14, (128, 2048): 23326.38, (128, 4096): 17508.51, (500, 2000): 21390.41,
        (1000, 1000): 17366.89, (1000, 2000): 16831.31, (1024, 2048): 16737.03, (2048, 128): 3488.03,
        (5000, 500): 3813.69, (20000, 2000): 1696.66,
    },
    ("llama-3.1-8b", "h100", 1): {
        (128, 128): 27688.36, (128, 2048): 21841.15, (128, 4096): 13730.89, (500, 2000): 17833.34,
        (1000, 1000): 15270.62, (1000, 2000): 13798.08, (1024, 2048): 13385.50, (2048, 128): 3414.67,
        (5000, 500): 3394.54, (20000, 2000): 1345.42,
    },
    ("llama-3.3-70b", "h200", 1): {
        (128, 128): 3605.47, (128, 2048): 4315.80, (128, 4096): 2701.17, (500, 2000): 3478.76,
        (1000, 1000): 2744.32, (1000, 2000): 2896.44, (1024, 2048): 2874.18, (2048, 128): 435.90,
        (5000, 500): 545.96, (20000, 2000): 276.66,
    },
    ("llama-3.3-70b", "h200", 2): {
        (128, 128): 6427.69, (128, 2048): 8464.03, (128, 4096): 5573.55, (500, 2000): 6740.06,
        (1000, 1000): 5119.72, (1000, 2000): 5847.26, (1024, 2048): 5568.61, (2048, 128): 772.67,
        (5000, 500): 997.15, (20000, 2000): 620.33,
    },
    ("llama-3.3-70b", "h200", 4): {
        (128, 128): 10407.42, (128, 2048): 13508.59, (128, 4096): 11458.56, (500, 2000): 12200.18,
        (1000, 1000): 8685.44, (1000, 2000): 9031.21, (1024, 2048): 8946.71, (2048, 128): 1264.76,
        (5000, 500): 1698.22, (20000, 2000): 1161.29,
    },
    ("llama-3.3-70b", "h200", 8): {
        (128, 128): 15434.37, (128, 2048): 20759.72, (128, 4096): 16668.75, (1000, 1000): 12744.51,
        (1000, 2000): 13141.17, (1024, 2048): 13082.62, (2048, 2048): 10412.85, (5000, 500): 2655.28,
        (20000, 2000): 1985.85,
    },
    ("llama-3.3-70b", "h100", 1): {
        (128, 128): 3128.33, (128, 2048): 756.42, (1000, 1000): 742.14, (1000, 2000): 533.74,
        (1024, 2048): 530.16, (5000, 500): 204.94,
    },
    ("llama-3.3-70b", "h100", 2): {
        (128, 128): 6216.91, (128, 2048): 5782.57, (128, 4096): 3868.37, (500, 2000): 4684.06,
        (1000, 1000): 4247.19, (1000, 2000): 3866.53, (1024, 2048): 3796.68, (2048, 128): 736.89,
        (5000, 500): 862.91, (20000, 2000): 416.13,
    },
    ("llama-3.3-70b", "h100", 4): {
        (128, 2048): 11464.94, (128, 4096): 8206.39, (500, 2000): 9903.53, (1000, 1000): 7435.65,
        (1000, 2000): 7611.12, (1024, 2048): 7575.24, (2048, 128): 1213.33, (5000, 500): 1552.68,
        (20000, 2000): 903.66,
    },
    ("llama-3.3-70b", "h100", 8): {
        (128, 2048): 17424.32, (128, 4096): 12624.61, (500, 2000): 14553.93, (1000, 1000): 11018.81,
        (1000, 2000): 11139.22, (1024, 2048): 11004.31, (2048, 128): 1839.22, (5000, 500): 2369.84,
        (20000, 2000): 1554.10,
    },
}

#: The document's request counts per (ISL, OSL) ("$num_requests"), 1024/2048 and 2048/2048
#: taken as their neighbours' (1,500).
NUM_REQUESTS = {
    (128, 128): 30000, (128, 2048): 3000, (128, 4096): 1500, (1000, 2000): 1500, (2048, 128): 3000,
    (2048, 2048): 1500, (5000, 500): 1500, (1000, 1000): 3000, (500, 2000): 3000, (20000, 2000): 1000,
    (1024, 2048): 1500,
}


def scenario(model: str, gpu: str, tp: int, isl: int, osl: int) -> dict[str, Any]:
    """The published run of (model, gpu, tp) at ISL/OSL as an o1sim scenario (module docs)."""
    return {
        "name": f"trtllm-bench {model} {gpu} tp{tp} {isl}/{osl}",
        "seed": 1,
        "model": model,
        "gpu": gpu,
        "deployment": {"tp": tp},
        "cost_model": {"engine": "trtllm", "dtype": "fp8", "kv_dtype": "fp8"},
        "scheduler": {"policy": "trtllm", "block_size": 32, "kv_cache_free_gpu_mem_fraction": 0.95},
        "workload": {
            "num_requests": NUM_REQUESTS[(isl, osl)],
            "arrival": {"kind": "constant", "rate": 1e9},
            "prompt": {"kind": "fixed", "value": isl},
            "output": {"kind": "fixed", "value": osl},
        },
        "limits": {"max_seconds": 600, "max_memory_gib": 8},
    }


def rows(only: str = "") -> list[dict[str, Any]]:
    """Every published point (or those whose key contains ``only``), simulated."""
    out = []
    for (model, gpu, tp), points in PUBLISHED.items():
        for (isl, osl), published in points.items():
            key = f"{model} {gpu} tp{tp} {isl}/{osl}"
            if only and only not in key:
                continue
            t = time.perf_counter()
            res = o1sim.simulate(scenario(model, gpu, tp, isl, osl))
            s = res.summary
            dep = res.deployment
            pred = float(s["output_tokens_per_s"])
            out.append({
                "key": key, "model": model, "gpu": gpu, "tp": tp, "isl": isl, "osl": osl,
                "published": published, "predicted": pred, "error_pct": 100.0 * (pred / published - 1.0),
                "max_batch_size": dep["trtllm"]["max_batch_size"], "max_num_tokens": dep["trtllm"]["max_num_tokens"],
                "kv_tokens": dep["kv_capacity_tokens"], "finished": s["finished"], "wall_s": time.perf_counter() - t,
            })
    return out


def mean_abs_error(rs: list[dict[str, Any]]) -> float:
    """Mean of |predicted / published − 1|, %."""
    return sum(abs(r["error_pct"]) for r in rs) / max(len(rs), 1)


def summary(rs: list[dict[str, Any]]) -> dict[str, float]:
    """Mean and median absolute error, mean signed error, and the share within 5% and 10%."""
    errs = sorted(abs(r["error_pct"]) for r in rs)
    n = max(len(errs), 1)
    mid = errs[len(errs) // 2] if len(errs) % 2 else (errs[len(errs) // 2 - 1] + errs[len(errs) // 2]) / 2
    return {
        "points": len(rs),
        "mean_abs": mean_abs_error(rs),
        "median_abs": mid,
        "mean_signed": sum(r["error_pct"] for r in rs) / n,
        "within_5": sum(e <= 5.0 for e in errs) / n,
        "within_10": sum(e <= 10.0 for e in errs) / n,
    }


def summary_line(rs: list[dict[str, Any]]) -> str:
    s = summary(rs)
    return (f"{s['points']} points: mean absolute error {s['mean_abs']:.1f}%, median {s['median_abs']:.1f}%, "
            f"mean signed {s['mean_signed']:+.1f}%; {s['within_5']:.0%} within 5%, {s['within_10']:.0%} within 10%")


def markdown(rs: list[dict[str, Any]]) -> str:
    head = "| model | GPU | TP | ISL/OSL | published tok/s | o1sim | error | max_batch_size / max_num_tokens |\n|---|---|---|---|---|---|---|---|"
    lines = [head]
    for r in rs:
        lines.append(
            f"| {r['model']} | {r['gpu'].upper()} | {r['tp']} | {r['isl']}/{r['osl']} | {r['published']:,.0f} | "
            f"{r['predicted']:,.0f} | {r['error_pct']:+.1f}% | {r['max_batch_size']} / {r['max_num_tokens']} |"
        )
    lines.append("")
    lines.append(f"{summary_line(rs)}.")
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    only = argv[argv.index("--only") + 1] if "--only" in argv else ""
    rs = rows(only)
    print(f"TensorRT-LLM {RELEASE} published max throughput vs o1sim engine = \"trtllm\" (output tokens/s)")
    print(f"{'point':40} {'published':>10} {'o1sim':>10} {'error':>8} {'bs/tokens':>12} {'kv tokens':>10} {'wall s':>7}")
    for r in rs:
        print(f"{r['key']:40} {r['published']:10.0f} {r['predicted']:10.0f} {r['error_pct']:+7.1f}% "
              f"{r['max_batch_size']:>5}/{r['max_num_tokens']:<6} {r['kv_tokens']:>10} {r['wall_s']:7.2f}")
    print(summary_line(rs))
    if "--write" in argv:
        write_block(DOC, "trtllm-table", markdown(rs))


if __name__ == "__main__":
    main(sys.argv[1:])
