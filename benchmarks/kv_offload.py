"""KV offload tiers: what a host-DRAM tier (and an SSD below it) does to the prefix-cache hit
rate and TTFT when HBM is too small for the working set, and what the tier's path costs.

The scenario is ``examples/kv_offload.toml``: Llama-3-8B on one H100, vLLM policy, 4,000
GPU blocks of 16 tokens, 48 system prompts of 4,096 tokens shared by 8 users each (~12,300
blocks of working set), 600 requests at 6 req/s. Each row changes only
``scheduler.kv_offload``. ``docs/kv-offload.md`` holds the table this prints
(``tests/test_kv_offload_doc.py`` checks the document says what this computes).

    .venv/bin/python benchmarks/kv_offload.py
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import o1sim

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "kv_offload.toml"


def _cpu(gib: float, **more: Any) -> dict[str, Any]:
    return {"medium": "cpu", "capacity_gib": gib, **more}


#: (label, scheduler.kv_offload), in table order.
SETTINGS: list[tuple[str, Any]] = [
    ("no tier (HBM only)", None),
    ("cpu_gib = 64", {"cpu_gib": 64}),
    ("cpu_gib = 64, load = blocking", {"cpu_gib": 64, "load": "blocking"}),
    ("cpu 64 GiB at 3.2 GB/s (a degraded path)", {"tiers": [_cpu(64, bandwidth_gbps=3.2)]}),
    ("cpu_gib = 8 (too small)", {"cpu_gib": 8}),
    ("cpu 8 GiB + ssd 256 GiB", {"tiers": [_cpu(8), {"medium": "ssd", "capacity_gib": 256}]}),
]


def rows() -> list[dict[str, Any]]:
    base = o1sim.Scenario.from_file(EXAMPLE)
    out = []
    for label, tier in SETTINGS:
        s = o1sim.simulate(base.with_overrides({"scheduler.kv_offload": tier})).summary
        off = s.get("kv_offload")
        out.append({
            "setting": label,
            "requests": s["num_requests"],
            "finished": s["finished"],
            "hbm_hit_rate": s["prefix_cache_hit_rate"],
            "hit_rate_all_tiers": off["hit_rate_all_tiers"] if off else s["prefix_cache_hit_rate"],
            "prefill_mtok": s["computed_prefill_tokens"] / 1e6,
            "ttft_mean_ms": s["ttft_ms"]["mean"],
            "ttft_p99_ms": s["ttft_ms"]["p99"],
            "tpot_mean_ms": s["tpot_ms"]["mean"],
            "loads": off["loads"] if off else 0,
            "load_p50_ms": off["load_ms"]["p50"] if off else 0.0,
            "stall_ms": off["load_stall_ms"] if off else 0.0,
            "load_gib": off["load_gib"] if off else 0.0,
            "tier_hits": [t["hit_blocks"] for t in off["tiers"]] if off else [],
        })
    return out


def markdown(rs: list[dict[str, Any]]) -> str:
    head = ("| `scheduler.kv_offload` | HBM hit rate | hit rate, all tiers | prefill tokens (M) | TTFT mean (ms) "
            "| TTFT p99 (ms) | TPOT mean (ms) | loads | load p50 (ms) | load stall (ms) | GiB loaded | blocks hit per tier |")
    lines = [head, "|" + "---|" * 12]
    for r in rs:
        lines.append(
            f"| {r['setting']} | {r['hbm_hit_rate']:.3f} | {r['hit_rate_all_tiers']:.3f} | {r['prefill_mtok']:.2f} "
            f"| {r['ttft_mean_ms']:.1f} | {r['ttft_p99_ms']:.0f} | {r['tpot_mean_ms']:.2f} | {r['loads']} "
            f"| {r['load_p50_ms']:.2f} | {r['stall_ms']:.0f} | {r['load_gib']:.1f} "
            f"| {' / '.join(str(h) for h in r['tier_hits']) or '—'} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    print(markdown(rows()))
