"""Every number docs/guide.md shows from a run is the simulator's, to the digit shown: the
worked capacity and plans of "Sweeps, capacity and plans" (and the README's `o1sim plan`
line, whose answer the README states), the brute-force check of the capacity search, the
price table, the adversarial-traffic ratios (`o1sim seed-report`, §4.4) and the
`ResourceError` example. A change that moves a number fails here until the guide says the
new one (the README's compare table is checked the same way by tests/test_readme.py)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import o1sim

ROOT = Path(__file__).resolve().parents[1]
GUIDE = " ".join((ROOT / "docs" / "guide.md").read_text(encoding="utf-8").split())  # lines joined
README = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
SLO = {"ttft_p99_ms": 2000, "tpot_p99_ms": 50}
CHOICES = {"gpu": ["h100", "h200"], "deployment.tp": [4, 8], "deployment.replicas": [1, 2]}


def _has(text: str, expected: str, where: str = "docs/guide.md") -> None:
    assert expected in text, f"{where} should say: {expected}"


def _name(row: dict) -> str:
    return f"{row['gpu'].upper()} TP {row['deployment.tp']} × {row['deployment.replicas']}"


def test_the_default_scenarios_capacity() -> None:
    c = o1sim.capacity(o1sim.Scenario.default(), SLO, workers=2)  # ≤ 5 workers on 3 seeds: one rate a round
    assert c.status == "found" and c.rate is not None
    misses = " ".join(c.points[(c.points["rate"] == c.hi) & ~c.points["meets"]]["misses"])
    binds = "/".join(sorted({m.split("_")[0].upper() for m in re.findall(r"\b(\w+)_p99_ms\b", misses)}))
    _has(GUIDE, f"the capacity under TTFT P99 ≤ 2 s and TPOT P99 ≤ 50 ms is {c.rate:.2f} req/s ({binds} binds; "
                f"{len(c.points)} runs, {len(c.seeds)} seeds)")
    _has(GUIDE, f"the default scenario's search is the {len(c.points)} runs above")


def test_the_default_scenarios_plan_at_10_rps() -> None:
    p = o1sim.plan(o1sim.Scenario.default(), CHOICES, SLO, load=10, workers=2)
    best = p.cheapest
    assert best is not None
    n = int(p.configs["feasible"].sum())
    _has(GUIDE, f"at 10 req/s under the same SLO finds {n} of {len(p.configs)} feasible and {_name(best)} the cheapest "
                f"at ${best['usd_per_hour']:.2f}/hour (${best['usd_per_million_tokens']:.2f} per million tokens;")
    # The runner-up costs the same and is slower (the tie goes to the lower latency).
    second = p.feasible.iloc[1]
    assert second["usd_per_hour"] == best["usd_per_hour"] and second["e2e_p99_ms"] > best["e2e_p99_ms"]
    _has(GUIDE, f"{_name(second.to_dict())} costs the same and is slower")


def test_the_readmes_plan_line() -> None:
    # o1sim plan --choice gpu=h100,h200 --choice deployment.tp=4,8 --choice deployment.replicas=1,2
    #   --slo ttft_p99_ms=2000 --load 20 --price h100=2.5 --latency e2e_p99_ms --all
    assert "--slo ttft_p99_ms=2000 --load 20 --price h100=2.5 --latency e2e_p99_ms --all" in README
    p = o1sim.plan(o1sim.Scenario.default(), CHOICES, {"ttft_p99_ms": 2000}, load=20, prices={"h100": 2.5}, workers=2)
    best = p.cheapest
    assert best is not None
    n = int(p.configs["feasible"].sum())
    c = p.configs
    skipped = c[(c["gpu"] == "h200") & (c["deployment.tp"] == 4) & (c["deployment.replicas"] == 2)].iloc[0]
    assert not skipped["sustains"] and skipped["usd_per_hour"] < best["usd_per_hour"]
    assert "ttft_p99_ms" not in str(skipped["why"]), "it meets the TTFT bound: only the load stops it"
    served = f"{skipped['slo_attainment']:.1%}"
    _has(README, f"The `o1sim plan` line above picks {_name(best)} at ${best['usd_per_hour']:.2f}/hour, {n} of "
                 f"{len(c)} configurations: H200 TP 4 × 2 (${skipped['usd_per_hour']:.2f}) keeps its TTFT P99 under 2 s "
                 f"but serves only {served} of the requests", "README.md")
    _has(GUIDE, f"finds {n} of {len(c)} and picks {_name(best)} at ${best['usd_per_hour']:.2f}/hour: H200 TP 4 × 2, "
                f"cheaper at ${skipped['usd_per_hour']:.2f}, keeps its TTFT P99 under 2 s but serves {served} of the "
                "requests")
    span = re.match(r"does not sustain the load: ([\d.]+%(?:–[\d.]+%)?) of the requests", skipped["why"])
    assert span is not None
    _has(GUIDE, f"`does not sustain the load: {span.group(1)} of the requests served within the per-request SLO "
                "(want ≥ 98%)`")


def test_the_capacity_search_against_a_brute_force_scan() -> None:
    from test_sweeps import LINEAR

    rates = [80 + 0.25 * k for k in range(201)]
    scan = o1sim.sweep(LINEAR, {"workload.arrival.rate": rates}, workers=2)
    ok = (scan["ttft_p99_ms"] <= 200).to_numpy()
    first_fail = int(np.argmin(ok))
    two = o1sim.capacity(LINEAR, {"ttft_p99_ms": 200}, seeds=1, workers=2)
    one = o1sim.capacity(LINEAR, {"ttft_p99_ms": 200}, seeds=1, workers=1)
    _has(GUIDE, f"meet a TTFT P99 of 200 ms up to {rates[first_fail - 1]:g} req/s and miss it from "
                f"{rates[first_fail]:g}; the search answers {two.rate:.1f} req/s (with 2 workers; {one.rate:g} with one)")


def test_the_price_table_is_the_cores() -> None:
    rows = {m.group(1): (m.group(2), m.group(3).replace('"', "")) for m in
            re.finditer(r"\| ([\w-]+) \| (\d+\.\d\d) \| ([^|]+?) \|", GUIDE)}
    prices = o1sim.default_prices()
    assert set(prices) <= set(rows)
    for gpu, info in prices.items():
        assert rows[gpu] == (f"{info['usd_per_hour']:.2f}", info["source"]), gpu


def test_the_adversarial_ratios_are_the_seed_reports() -> None:
    from o1sim.seed_report import serving

    table = serving.adversarial_flood().table
    ratio = {(r[0], r[1]): float(r[4]) for r in table[1:]}
    dt = ratio[("deep templates", "o1pro")], ratio[("deep templates", "vllm")]
    flood = ratio[("flood", "o1pro")], ratio[("flood", "vllm")]
    _has(GUIDE, f"the normal P99 TTFT stays at {dt[0]:.2f}× its no-attack value under o1pro and rises {dt[1]:.1f}× "
                f"under vLLM; a plain flood costs both ({flood[0]:.1f}× and {flood[1]:.1f}×;")


def test_the_resource_error_example() -> None:
    data = o1sim.Scenario.default().to_dict()
    data["workload"]["num_requests"] = 50_000_000
    data["limits"] = {"max_memory_gib": 4}
    with pytest.raises(o1sim.ResourceError) as e:
        o1sim.simulate(data)
    _has(GUIDE, f"ResourceError: {e.value}")


def test_the_ray_batches() -> None:
    from o1sim.backends import MAX_BATCH, TASKS_PER_CPU, batch_size

    def tasks(n: int, cpus: int) -> tuple[str, int]:
        b = batch_size(n, cpus)
        return f"{-(-n // b):,}", b

    small, large = tasks(1000, 2), tasks(100_000, 256)
    _has(GUIDE, f"in batches of runs ({TASKS_PER_CPU} tasks per CPU of the cluster, at most {MAX_BATCH} runs each: "
                f"1,000 points on 2 CPUs are {small[0]} tasks of {small[1]}, 100,000 points on 256 CPUs {large[0]} of "
                f"{large[1]})")
