"""Writes conversation.jsonl: a small conversation-like trace for examples/trace_replay.toml.

300 requests over about 60 s: Poisson arrivals at 5 req/s, lognormal prompt and output
lengths with the means of Azure's 2023 conversation trace (1,155 and 211 tokens, as the
default scenario), one JSON object per line (`timestamp` in ms, `input_length`,
`output_length`). Deterministic: the same bytes on every run (tests/test_examples.py
regenerates it and compares).

    python examples/traces/make_conversation.py
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

OUT = Path(__file__).with_name("conversation.jsonl")


def lognormal(rng: random.Random, mean: float, sigma: float, low: int, high: int) -> int:
    """A lognormal draw with the given mean (not median), clamped to [low, high]."""
    mu = math.log(mean) - sigma * sigma / 2
    return max(low, min(high, round(rng.lognormvariate(mu, sigma))))


def trace(n: int = 300, rate: float = 5.0, seed: int = 2023) -> str:
    rng = random.Random(seed)
    t_ms = 0.0
    lines = []
    for _ in range(n):
        t_ms += rng.expovariate(rate) * 1000.0
        lines.append(json.dumps({"timestamp": round(t_ms, 1),
                                 "input_length": lognormal(rng, 1155, 0.9, 16, 7000),
                                 "output_length": lognormal(rng, 211, 0.8, 1, 1000)}))
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    OUT.write_text(trace(), encoding="utf-8")
