"""Cache-aware routing on a Mooncake trace over 8 replicas: the global prefix-cache hit rate
and TTFT of each router, and what stale KV events cost the precise prefix router.

Two traces, each replayed by every router on 8 replicas of Llama-3-8B (128k context, one
H100 each, vLLM policy, prefix caching on, 16-token blocks):

- **generated**: a Mooncake-conversation-like JSONL (``traces.mooncake_like``: 512-token
  ``hash_ids`` blocks, 40% of prompts continuing an earlier one), 4,000 rows at 3.4 req/s,
  seeded; always available, and ``docs/routing.md``'s first table
  (``tests/test_routing_doc.py`` checks the document says what this prints);
- **real**: Mooncake FAST'25 ``conversation_trace.jsonl`` (12,031 rows, 3.4 req/s, from
  ``../shared/data/mooncake-fast25/``), when that file is there; its table in the document
  is from the run named there.

    .venv/bin/python benchmarks/routing.py              # both tables, markdown
    .venv/bin/python benchmarks/routing.py --generated  # the generated trace only
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from traces import mooncake_like  # noqa: E402

import o1sim  # noqa: E402

REAL = HERE.parents[1] / "shared" / "data" / "mooncake-fast25" / "conversation_trace.jsonl"
ROWS, RATE = 4000, 3.4

#: (router, KV-event delay in ms), in table order.
ROUTERS: list[tuple[str, float]] = [
    ("round_robin", 0), ("least_outstanding_tokens", 0), ("consistent_hash", 0),
    ("approx_prefix", 0), ("precise_prefix", 0), ("precise_prefix", 1000), ("precise_prefix", 10_000),
]


def generated_trace() -> Path:
    """The generated trace (written once into benchmarks/out/)."""
    out = HERE / "out"
    out.mkdir(exist_ok=True)
    path = out / f"mooncake_like_{ROWS}_routing.jsonl"
    if not path.is_file():
        mooncake_like(path, ROWS, RATE, seed=7)
    return path


def scenario(trace: Path, router: str, delay_ms: float) -> dict[str, Any]:
    deployment: dict[str, Any] = {"replicas": 8, "tp": 1, "router": router}
    if delay_ms:
        deployment["kv_event_delay_ms"] = delay_ms
    return {
        "name": f"{router} on {trace.name}", "seed": 1, "gpu": "h100",
        "model": {"preset": "llama-3-8b", "max_context": 131072},
        "deployment": deployment,
        "scheduler": {"policy": "vllm", "enable_prefix_caching": True},
        "workload": {"trace": {"path": str(trace), "format": "mooncake"}},
    }


def rows(trace: Path) -> list[dict[str, Any]]:
    """Every router's run of ``trace``."""
    out = []
    for router, delay in ROUTERS:
        s = o1sim.simulate(scenario(trace, router, delay)).summary
        out.append({"router": router, "delay_ms": delay, "requests": s["num_requests"], "finished": s["finished"],
                    "hit_rate": s["prefix_cache_hit_rate"], "ttft_mean_ms": s["ttft_ms"]["mean"],
                    "ttft_p50_ms": s["ttft_ms"]["p50"], "ttft_p99_ms": s["ttft_ms"]["p99"],
                    "e2e_mean_s": s["e2e_ms"]["mean"] / 1000})
    return out


def markdown(table: list[dict[str, Any]]) -> str:
    lines = ["| router | KV events' delay | prefix-cache hit rate | TTFT mean | TTFT P50 | TTFT P99 | E2E mean | finished |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in table:
        delay = "—" if r["router"] != "precise_prefix" else f"{r['delay_ms'] / 1000:g} s"
        lines.append(f"| `{r['router']}` | {delay} | {100 * r['hit_rate']:.1f}% | {r['ttft_mean_ms']:,.0f} ms | "
                     f"{r['ttft_p50_ms']:,.0f} ms | {r['ttft_p99_ms']:,.0f} ms | {r['e2e_mean_s']:.2f} s | "
                     f"{r['finished']:,} of {r['requests']:,} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--generated", action="store_true", help="the generated trace only")
    args = ap.parse_args()
    print(f"## generated Mooncake-like trace ({ROWS:,} rows, {RATE} req/s), 8 × H100\n")
    print(markdown(rows(generated_trace())))
    if not args.generated:
        if REAL.is_file():
            print(f"\n## {REAL.name} (Mooncake FAST'25), 8 × H100\n")
            print(markdown(rows(REAL)))
        else:
            print(f"\n(real trace absent: {REAL})")


if __name__ == "__main__":
    main()
