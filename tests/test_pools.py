"""Deployments of pools and expert-parallel layouts through the Python API and ``plan``: each
pool priced with its own GPU, mixed fleets priced part by part, EP/DP sizes as choices."""

from __future__ import annotations

import pytest

import o1sim

MIXED = {
    "seed": 2, "model": "llama-3-8b", "gpu": "h200",
    "deployment": {"router": "least_outstanding_tokens", "pools": [
        {"name": "fast", "replicas": 1, "tp": 1}, {"name": "cheap", "gpu": "l40s", "replicas": 2, "tp": 1}]},
    "workload": {"num_requests": 60, "arrival": {"kind": "poisson", "rate": 6.0},
                 "prompt": {"kind": "fixed", "value": 500}, "output": {"kind": "fixed", "value": 80}},
}


def test_a_mixed_fleet_runs_and_reports_each_pool() -> None:
    r = o1sim.simulate(MIXED)
    assert r.summary["finished"] == 60
    pools = r.deployment["pools"]
    assert [(p["name"], p["gpu"], p["gpus"]) for p in pools] == [("fast", "h200", 1), ("cheap", "l40s", 2)]
    assert r.deployment["gpus"] == 3
    # the L40S replicas are slower per token than the H200 one
    req = r.requests
    tpot = (req["finish_ms"] - req["first_token_ms"]) / (req["output_tokens"] - 1)
    by = tpot.groupby(req["replica"]).mean()
    assert by[0] < by[1] and by[0] < by[2]


def test_plan_prices_each_pool_with_its_own_gpu_and_says_why_the_winner_wins() -> None:
    only_h200 = [{"name": "fast", "replicas": 2, "tp": 1}]
    mixed = MIXED["deployment"]["pools"]
    p = o1sim.plan(MIXED, {"deployment.pools": [only_h200, mixed]}, {"ttft_p99_ms": 60_000}, seeds=1, workers=1)
    costs = list(p.configs["usd_per_hour"])
    prices = {k: v["usd_per_hour"] for k, v in o1sim.default_prices().items()}
    assert costs[0] == pytest.approx(2 * prices["h200"])
    assert costs[1] == pytest.approx(prices["h200"] + 2 * prices["l40s"]), "priced part by part, not as 3 H200"
    assert (p.configs["tokens_per_s_per_gpu"] > 0).all()
    why = p.why
    assert why is not None and "tok/s/GPU" in why and "/Mtok" in why


def test_expert_parallel_sizes_are_plan_choices() -> None:
    base = {"seed": 1, "model": "qwen3-30b-a3b", "gpu": "h200", "deployment": {"tp": 1},
            "workload": {"num_requests": 80, "arrival": {"kind": "poisson", "rate": 40.0},
                         "prompt": {"kind": "fixed", "value": 800}, "output": {"kind": "fixed", "value": 100}}}
    layouts = [{"tp": 2}, {"tp": 1, "dp": 2, "ep": 2}, {"tp": 1, "dp": 4, "ep": 4}]
    p = o1sim.plan(base, {"deployment": layouts}, {"ttft_p99_ms": 60_000}, seeds=1, workers=1)
    rows = p.configs
    assert rows["feasible"].all()
    assert list(rows["gpus"]) == [2.0, 2.0, 4.0]
    # every layout reports its throughput per GPU
    assert rows["tokens_per_s_per_gpu"].iloc[1] > 0
    # a layout breaking the ep rule is refused as a choice, naming the field
    with pytest.raises(o1sim.ConfigError, match="deployment.ep"):
        o1sim.plan(base, {"deployment": [{"tp": 1, "dp": 2, "ep": 3}]}, {"ttft_p99_ms": 60_000}, seeds=1, workers=1)


def test_plan_searches_prefill_decode_pool_ratios() -> None:
    """Long prompts, short outputs: prefill is the bottleneck, so 2 prefill : 1 decode meets
    a TTFT target that 1 : 2 on as many GPUs misses, and plan says so and why."""
    base = {"seed": 1, "model": "llama-3-8b", "gpu": "h200", "topology": "hgx-h200",
            "scheduler": {"policy": "disagg"},
            "workload": {"num_requests": 120, "arrival": {"kind": "poisson", "rate": 30.0},
                         "prompt": {"kind": "fixed", "value": 3000}, "output": {"kind": "fixed", "value": 100}}}

    def pools(p: int, d: int) -> list[dict[str, object]]:
        return [{"name": "prefill", "role": "prefill", "replicas": p, "tp": 1},
                {"name": "decode", "role": "decode", "replicas": d, "tp": 1}]

    plan = o1sim.plan(base, {"deployment.pools": [pools(1, 2), pools(2, 1)]}, {"ttft_p99_ms": 2000}, seeds=1, workers=1)
    rows = plan.configs
    assert list(rows["gpus"]) == [3.0, 3.0]
    assert list(rows["feasible"]) == [False, True]
    assert rows["tokens_per_s_per_gpu"].iloc[1] > rows["tokens_per_s_per_gpu"].iloc[0]
    assert plan.why is not None and "'replicas': 2" in plan.why.split(" meets")[0]
