"""Sweeps, capacity and plan: rows independent of the workers, the capacity search against a
brute-force scan, the plan's cheapest point against a full grid, and bad input."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import o1sim
from o1sim.sweeps import student_t_quantile

#: A small real scenario: Llama-3-8B on one H100, 150 Azure-like requests.
SMALL = {
    "seed": 3,
    "model": "llama-3-8b",
    "gpu": "h100",
    "deployment": {"tp": 1, "replicas": 1},
    "workload": {"num_requests": 150, "arrival": {"kind": "poisson", "rate": 8.0},
                 "prompt": {"kind": "lognormal", "mean": 600, "sigma": 0.8, "max": 4000},
                 "output": {"kind": "lognormal", "mean": 120, "sigma": 0.7, "max": 800}},
}

#: A linear-cost scenario: 5 ms per step + 0.02 ms per prefill token + 0.2 ms per decode;
#: evenly spaced arrivals of identical requests, so latency rises cleanly with the rate.
LINEAR = {
    "seed": 0,
    "model": "llama-3-8b",
    "gpu": "h100",
    "cost_model": {"kind": "linear", "base_ms": 5.0, "per_prefill_token_ms": 0.02, "per_decode_seq_ms": 0.2},
    "workload": {"num_requests": 400, "arrival": {"kind": "constant", "rate": 20.0},
                 "prompt": {"kind": "fixed", "value": 256}, "output": {"kind": "fixed", "value": 32}},
}


def test_rows_are_identical_for_any_number_of_workers() -> None:
    grid = {"scheduler.policy": ["vllm", "sarathi", "orca"], "workload.arrival.rate": [4.0, 8.0, 12.0]}
    one = o1sim.sweep(SMALL, grid, seeds=[0, 1], workers=1)
    many = o1sim.sweep(SMALL, grid, seeds=[0, 1], workers=4)
    assert len(one) == 18 and list(one.columns[:3]) == ["scheduler.policy", "workload.arrival.rate", "seed"]
    assert one.to_csv(index=False) == many.to_csv(index=False)
    assert one.equals(many)
    # The first axis varies slowest, then the second, then the seed.
    assert list(one["scheduler.policy"][:6]) == ["vllm"] * 6
    assert list(one["workload.arrival.rate"][:4]) == [4.0, 4.0, 8.0, 8.0]
    assert list(one["seed"][:2]) == [0, 1]
    # A row is exactly that point's run.
    sc = o1sim.Scenario(SMALL).with_overrides({"scheduler.policy": "sarathi", "workload.arrival.rate": 8.0, "seed": 1})
    s = o1sim.simulate(sc).summary
    row = one[(one["scheduler.policy"] == "sarathi") & (one["workload.arrival.rate"] == 8.0) & (one["seed"] == 1)].iloc[0]
    assert row["ttft_p99_ms"] == s["ttft_ms"]["p99"] and row["throughput_rps"] == s["throughput_rps"]
    assert row["finished"] == s["finished"] and pd.isna(row["error"])


def test_zip_pairs_axes_and_errors_stay_in_their_row() -> None:
    df = o1sim.sweep(SMALL, {"scheduler.policy": ["vllm"]},
                     zip={"model": ["llama-3-8b", "llama-3-70b"], "deployment.tp": [1, 1]})
    assert list(df["model"]) == ["llama-3-8b", "llama-3-70b"]
    assert pd.isna(df["error"][0])
    # Llama-3-70B does not fit one H100: its row says so, the other ran.
    assert df["error"][1].startswith("InfeasibleError") and math.isnan(df["ttft_p99_ms"][1])


def test_aggregate_gives_student_t_intervals_over_seeds() -> None:
    df = o1sim.sweep(SMALL, {"workload.arrival.rate": [6.0, 9.0]}, seeds=3)
    assert sorted(set(df["seed"])) == [3, 4, 5]  # the scenario's seed and the two after it
    agg = o1sim.aggregate(df)
    assert list(agg["n_seeds"]) == [3, 3]
    vals = df[df["workload.arrival.rate"] == 9.0]["ttft_p99_ms"].to_numpy()
    mean, sd = vals.mean(), vals.std(ddof=1)
    assert agg["ttft_p99_ms"][1] == pytest.approx(mean)
    assert agg["ttft_p99_ms_ci95"][1] == pytest.approx(4.302652729749 * sd / math.sqrt(3), rel=1e-9)
    assert (agg["ttft_p99_ms_ci95"] > 0).all()


def test_student_t_quantiles_match_the_tables() -> None:
    for dof, t in [(1, 12.706204736), (2, 4.302652730), (4, 2.776445105), (10, 2.228138852), (30, 2.042272456),
                   (100, 1.983971519)]:
        assert student_t_quantile(0.95, dof) == pytest.approx(t, rel=1e-8), dof
    assert student_t_quantile(0.99, 5) == pytest.approx(4.032142984, rel=1e-8)
    assert student_t_quantile(0.95, 100000) == pytest.approx(1.9599877, rel=1e-7)  # → 1.959964 (normal)


@pytest.mark.parametrize(
    ("grid", "field", "text"),
    [
        ({"scheduler.polcy": ["vllm"]}, "grid.scheduler.polcy", "did you mean 'scheduler.policy'"),
        ({"deploymnt.tp": [1]}, "grid.deploymnt.tp", "did you mean 'deployment.tp'"),
        ({"workload.arrival.rat": [1.0]}, "grid.workload.arrival.rat", "did you mean 'workload.arrival.rate'"),
        ({"scheduler.policy": []}, "grid.scheduler.policy", "empty axis"),
        ({"scheduler.policy": "vllm"}, "grid.scheduler.policy", "must be a list"),
        ({"scheduler.policy": ["vllm", "vlm"]}, "scheduler.policy", "did you mean vllm"),
    ],
)
def test_bad_grids_name_the_axis(grid: dict, field: str, text: str) -> None:
    with pytest.raises(o1sim.ConfigError) as e:
        o1sim.sweep(SMALL, grid)
    assert e.value.field == field
    assert text in str(e.value)


def test_other_bad_sweep_input() -> None:
    with pytest.raises(o1sim.ConfigError, match="equally long") as e:
        o1sim.sweep(SMALL, zip={"deployment.tp": [1, 2], "deployment.replicas": [1]})
    assert e.value.field == "zip"
    with pytest.raises(o1sim.ConfigError, match="swept twice"):
        o1sim.sweep(SMALL, {"deployment.tp": [1]}, zip={"deployment.tp": [1]})
    with pytest.raises(o1sim.ConfigError) as e:
        o1sim.sweep(SMALL, {"deployment.tp": [1]}, seeds=[0, -1])
    assert e.value.field == "seeds[1]"
    with pytest.raises(o1sim.ConfigError) as e:
        o1sim.sweep(SMALL, {"deployment.tp": [1]}, backend="spark")
    assert e.value.field == "backend"
    with pytest.raises(o1sim.ConfigError) as e:
        o1sim.sweep(SMALL, {"deployment.tp": [1]}, workers=0)
    assert e.value.field == "workers"


def test_ray_missing_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now fails as if not installed
    with pytest.raises(ImportError, match=r"pip install 'o1sim\[ray\]'"):
        o1sim.sweep(SMALL, {"deployment.tp": [1]}, backend="ray")


# --------------------------------------------------------------------------- capacity


def test_capacity_agrees_with_a_brute_force_scan() -> None:
    slo = {"ttft_p99_ms": 200}
    c = o1sim.capacity(LINEAR, slo, seeds=1, tolerance=0.02, workers=2)
    assert c.status == "found" and c.rate is not None and c.hi is not None
    assert c.hi - c.rate <= 0.02 * c.rate
    # Every rate from 80 to 130 req/s in steps of 0.25: the SLO holds below a threshold and
    # fails above it, and the search's answer is within its tolerance of that threshold.
    rates = [80 + 0.25 * k for k in range(201)]
    scan = o1sim.sweep(LINEAR, {"workload.arrival.rate": rates}, workers=2)
    ok = (scan["ttft_p99_ms"] <= 200).to_numpy()
    first_fail = int(np.argmin(ok))
    assert 0 < first_fail and ok[:first_fail].all() and not ok[first_fail:].any(), "not monotone: a poor test scenario"
    best = rates[first_fail - 1]
    assert abs(c.rate - best) <= 0.02 * best + 0.25, (c.rate, best)
    assert best <= c.hi and c.rate < rates[first_fail] + 0.25
    # The points: every run, the rate met on all its seeds, and `rates` is ascending.
    assert set(c.points.columns) >= {"rate", "seed", "meets", "misses", "ttft_p99_ms"}
    assert c.rates["rate"].is_monotonic_increasing
    assert c.rates.loc[c.rates["rate"] == c.rate, "meets"].item()
    assert c.points[~c.points["meets"]]["misses"].str.contains("ttft_p99_ms").all()


def test_capacity_steps_match_the_page() -> None:
    # tests/web/search.test.mjs runs the page's search on the same scenario and asserts these.
    c = o1sim.capacity(LINEAR, {"ttft_p99_ms": 200}, seeds=1, workers=1)
    assert list(c.points["rate"]) == [20, 40, 80, 160, 120, 100, 110, 105, 102.5, 101.25]
    assert (c.rate, c.hi) == (101.25, 102.5)
    p = o1sim.plan(LINEAR, {"gpu": ["h100", "h200"], "deployment.replicas": [1, 2]}, {"ttft_p99_ms": 200},
                   load=150.0, seeds=1, workers=1)
    assert list(p.configs["feasible"]) == [False, True, False, True]
    assert p.cheapest is not None and (p.cheapest["gpu"], p.cheapest["deployment.replicas"]) == ("h100", 2)
    assert list(p.configs["pareto"]) == [False, True, False, False]


def test_capacity_results_do_not_depend_on_workers() -> None:
    slo = {"ttft_p99_ms": 1500, "tpot_p99_ms": 40}
    a = o1sim.capacity(SMALL, slo, seeds=2, workers=1)
    b = o1sim.capacity(SMALL, slo, seeds=2, workers=1)
    assert a.rate == b.rate and a.points.equals(b.points)
    c = o1sim.capacity(SMALL, slo, seeds=2, workers=6)  # three rates per round
    assert c.status == "found" and abs(c.rate - a.rate) <= 0.02 * max(a.rate, c.rate) * 2


def test_capacity_with_no_feasible_rate_is_an_answer() -> None:
    c = o1sim.capacity(SMALL, {"ttft_p99_ms": 0.01}, seeds=1)
    assert c.status == "none" and c.rate is None
    assert "no rate meets the SLO" in c.message
    assert not c.points["meets"].any()
    assert "ttft_p99_ms" in c.points["misses"][0]
    # … and one where every rate tried meets it.
    c = o1sim.capacity(LINEAR, {"ttft_p99_ms": 1e9}, seeds=1, max_rate=60)
    assert c.status == "above_max" and c.rate == 60


def test_capacity_goodput_takes_thresholds_from_the_slo() -> None:
    c = o1sim.capacity(LINEAR, {"ttft_p90_ms": 200, "goodput": 0.95}, seeds=1)
    assert c.status == "found"
    assert (c.points[c.points["meets"]]["slo_attainment"] >= 0.95).all()
    with pytest.raises(o1sim.ConfigError) as e:
        o1sim.capacity(LINEAR, {"goodput": 0.9}, seeds=1)
    assert e.value.field == "slo.goodput"


@pytest.mark.parametrize(
    ("slo", "field", "text"),
    [
        ({"ttft_p99": 2000}, "slo.ttft_p99", "did you mean ttft_p99_ms"),
        ({"goodput": 1.5}, "slo.goodput", "(0, 1]"),
        ({"kv_utilization_mean": 0.5}, "slo.kv_utilization_mean", "which way"),
        ({}, "slo", "at least one"),
    ],
)
def test_bad_slos_name_the_metric(slo: dict, field: str, text: str) -> None:
    with pytest.raises(o1sim.ConfigError) as e:
        o1sim.capacity(SMALL, slo)
    assert e.value.field == field and text in str(e.value)


def test_capacity_needs_a_rate_to_vary() -> None:
    trace = {**SMALL, "workload": {"requests": [{"arrival_ms": 0, "prompt_tokens": 10, "output_tokens": 5}]}}
    with pytest.raises(o1sim.ConfigError) as e:
        o1sim.capacity(trace, {"ttft_p99_ms": 100})
    assert e.value.field == "workload.arrival.rate"


def test_sweeps_capacity_and_plans_replay_a_trace_file(tmp_path, monkeypatch) -> None:
    """A trace given by path is read once, before the runs, and every run replays it with its
    own point's options: the rows are the runs simulate() gives."""
    trace = Path(__file__).resolve().parents[1] / "examples" / "traces" / "conversation.jsonl"
    half = tmp_path / "half.jsonl"
    half.write_text("".join(trace.read_text().splitlines(keepends=True)[:150]))
    sc = {"model": "llama-3-8b", "gpu": "h100", "workload": {"trace": {"path": str(trace)}}}
    monkeypatch.chdir(tmp_path)  # an axis value's relative path is relative to here
    grid = {"workload.trace.path": [str(trace), "half.jsonl"], "workload.trace.rate_scale": [1.0, 3.0]}
    df = o1sim.sweep(sc, grid, workers=2)
    assert df["error"].isna().all() and df["num_requests"].tolist() == [300, 300, 150, 150]
    for _, row in df.iterrows():
        one = o1sim.Scenario(sc).with_overrides({"workload.trace.path": str(tmp_path / row["workload.trace.path"]),
                                                 "workload.trace.rate_scale": row["workload.trace.rate_scale"]})
        assert row["ttft_p99_ms"] == o1sim.simulate(one).summary["ttft_ms"]["p99"]
    # The example scenario names its trace relative to its own folder.
    ex = Path(__file__).resolve().parents[1] / "examples" / "trace_replay.toml"
    rows = o1sim.sweep(ex, {"scheduler.policy": ["vllm", "sarathi"]})
    assert rows["ttft_p99_ms"].iloc[0] == o1sim.simulate(ex).summary["ttft_ms"]["p99"]
    # capacity varies the trace's rate_scale; plan offers a load through it.
    c = o1sim.capacity(sc, {"ttft_p99_ms": 500}, seeds=1, workers=2)
    assert c.status == "found" and c.rate_scale is not None and c.rate_scale > 1
    p = o1sim.plan(sc, {"scheduler.policy": ["vllm", "sarathi"]}, {"ttft_p99_ms": 500}, load=c.rate, seeds=1)
    assert p.rate_scale == pytest.approx(c.rate_scale) and p.configs["why"].isna().any()
    # Every point names its own trace: the base's is still there to judge the other axes on.
    both = o1sim.sweep(sc, {"workload.trace.path": ["half.jsonl"], "scheduler.policy": ["vllm", "sarathi"]})
    assert both["error"].isna().all() and (both["num_requests"] == 150).all()
    # A trace file that is not there is an error naming where it came from, before any run.
    with pytest.raises(o1sim.ConfigError) as e:
        o1sim.sweep(sc, {"workload.trace.path": ["missing.jsonl"]})
    assert e.value.field == "grid.workload.trace.path" and "missing.jsonl: no such file" in str(e.value)
    with pytest.raises(o1sim.ConfigError) as e:
        o1sim.sweep({**sc, "workload": {"trace": {"path": str(tmp_path / "gone.jsonl")}}}, {"seed": [1]})
    assert e.value.field == "workload.trace.path"


# --------------------------------------------------------------------------- plan

PLAN_BASE = {
    "seed": 1,
    "model": "llama-3-8b",
    "gpu": "h100",
    "workload": {"num_requests": 200, "arrival": {"kind": "poisson", "rate": 10.0},
                 "prompt": {"kind": "lognormal", "mean": 800, "sigma": 0.8, "max": 4000},
                 "output": {"kind": "lognormal", "mean": 150, "sigma": 0.7, "max": 800}},
}
CHOICES = {"gpu": ["a100-80g", "h100", "h200"], "deployment.tp": [1, 2], "deployment.replicas": [1, 2],
           "scheduler.policy": ["vllm", "sarathi"]}
PLAN_SLO = {"ttft_p99_ms": 1000, "tpot_p99_ms": 35}


def test_plan_cheapest_matches_the_full_grid() -> None:
    prices = {"h100": 2.5}
    p = o1sim.plan(PLAN_BASE, CHOICES, PLAN_SLO, load=12.0, prices=prices, seeds=2, workers=2)
    assert len(p.configs) == 24
    # The same grid run directly, judged and priced here by hand.
    grid = o1sim.sweep({**PLAN_BASE, "workload": {**PLAN_BASE["workload"], "arrival": {"kind": "poisson", "rate": 12.0}}},
                       CHOICES, seeds=[1, 2], workers=2)
    grid["ok"] = (grid["ttft_p99_ms"] <= 1000) & (grid["tpot_p99_ms"] <= 35)
    keys = list(CHOICES)
    per_config = grid.groupby(keys, sort=False).agg(ok=("ok", "all"), e2e=("e2e_p99_ms", "mean")).reset_index()
    price = {"a100-80g": 1.30, "h100": 2.5, "h200": 4.00}
    per_config["cost"] = [price[g] * tp * r for g, tp, r in
                          zip(per_config["gpu"], per_config["deployment.tp"], per_config["deployment.replicas"])]
    feasible = per_config[per_config["ok"]].sort_values(["cost", "e2e"], kind="stable")
    assert 0 < len(feasible) < len(per_config), "the SLO should split the grid"
    best = feasible.iloc[0]
    cheapest = p.cheapest
    assert cheapest is not None
    assert [cheapest[k] for k in keys] == [best[k] for k in keys]
    assert cheapest["usd_per_hour"] == pytest.approx(best["cost"])
    assert list(p.configs["feasible"]) == list(per_config["ok"])
    # The Pareto front: feasible configurations no other feasible one beats on cost and latency.
    f = p.configs[p.configs["feasible"]]
    for i, row in f.iterrows():
        dominated = ((f["usd_per_hour"] <= row["usd_per_hour"]) & (f["e2e_p99_ms"] <= row["e2e_p99_ms"])
                     & ((f["usd_per_hour"] < row["usd_per_hour"]) | (f["e2e_p99_ms"] < row["e2e_p99_ms"]))).any()
        assert row["pareto"] == (not dominated), i
    assert p.pareto["usd_per_hour"].is_monotonic_increasing
    assert p.pareto[p.latency].is_monotonic_decreasing
    # Costs per million tokens follow from the throughput.
    r = p.configs.iloc[0]
    assert r["usd_per_million_tokens"] == pytest.approx(r["usd_per_hour"] / (r["total_tokens_per_s"] * 3600) * 1e6)
    # Infeasible ones say why.
    assert p.configs[~p.configs["feasible"]]["why"].str.contains("_ms").all()


def test_plan_when_nothing_is_feasible_and_bad_input() -> None:
    p = o1sim.plan(PLAN_BASE, {"deployment.replicas": [1, 2]}, {"ttft_p99_ms": 0.5}, seeds=1)
    assert p.cheapest is None and p.pareto.empty and not p.configs["feasible"].any()
    gpu = {"preset": "h100", "name": "my-gpu"}
    with pytest.raises(o1sim.ConfigError) as e:
        o1sim.plan(PLAN_BASE, {"gpu": [gpu]}, PLAN_SLO, seeds=1)
    assert "no price for GPU 'my-gpu'" in str(e.value)
    p = o1sim.plan(PLAN_BASE, {"gpu": [gpu]}, PLAN_SLO, seeds=1, prices={"my-gpu": 1.0})
    assert p.configs["usd_per_hour"][0] == 1.0
    with pytest.raises(o1sim.ConfigError) as e:
        o1sim.plan(PLAN_BASE, {"deployment.tpp": [1]}, PLAN_SLO)
    assert e.value.field == "choices.deployment.tpp" and "deployment.tp" in str(e.value)
    with pytest.raises(o1sim.ConfigError) as e:
        o1sim.plan(PLAN_BASE, {"deployment.tp": [1]}, PLAN_SLO, latency="e2e_p99")
    assert e.value.field == "latency"
    with pytest.raises(o1sim.ConfigError) as e:
        o1sim.plan(PLAN_BASE, {"deployment.tp": [1]}, PLAN_SLO, load=-1)
    assert e.value.field == "load"


def test_default_prices_name_presets_with_a_source() -> None:
    prices = o1sim.default_prices()
    assert set(prices) <= {g["name"] for g in o1sim.presets()["gpus"]}
    assert {"a100-80g", "h100", "h200", "l40s", "b200", "mi300x"} <= set(prices)
    for name, info in prices.items():
        assert info["usd_per_hour"] > 0 and "20" in info["source"], name
    json.dumps(prices)
    assert isinstance(pd.DataFrame(prices), pd.DataFrame)


def test_plan_picks_only_configurations_that_sustain_the_load() -> None:
    # The README's plan: at 20 req/s, H200 TP 4 × 2 keeps its TTFT P99 under 2 s but serves
    # only ~37% of the requests within the scenario's per-request SLO (TTFT ≤ 2 s, TPOT ≤
    # 50 ms): it does not sustain the load and is not picked, though it is the cheapest.
    p = o1sim.plan(o1sim.Scenario.default(), {"gpu": ["h200"], "deployment.tp": [4, 8], "deployment.replicas": [2]},
                   {"ttft_p99_ms": 2000}, load=20, seeds=1, workers=1)
    assert p.load == 20
    tp4, tp8 = p.configs.iloc[0], p.configs.iloc[1]
    assert not tp4["sustains"] and not tp4["feasible"] and tp4["slo_attainment"] < 0.98
    assert tp4["why"].startswith("does not sustain the load:") and "(want ≥ 98%)" in tp4["why"]
    assert tp8["sustains"] and tp8["feasible"] and tp8["slo_attainment"] >= 0.98
    assert p.cheapest is not None and p.cheapest["deployment.tp"] == 8
    assert {"throughput_rps", "goodput_rps"} <= set(p.configs.columns)


def test_plan_without_a_scenario_slo_counts_requests_by_the_plans_bounds() -> None:
    # PLAN_BASE has no [slo]: the plan's TTFT/TPOT bounds become the per-request thresholds.
    p = o1sim.plan(PLAN_BASE, {"deployment.replicas": [1]}, PLAN_SLO, load=12.0, seeds=1, workers=1)
    assert p.configs["slo_attainment"].notna().all()
    assert o1sim.planning.SUSTAIN_TOLERANCE == 0.02
