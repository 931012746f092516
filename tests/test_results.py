"""Results of real runs: determinism, tables, progress, steps, core validation.

These assert the final semantics of the core (DESIGN.md), not the stub's.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

import o1sim
from o1sim import _core
from o1sim.api import OPTIONAL_SHAPE_COLUMNS, STEP_COLUMNS


@pytest.fixture(scope="module")
def result() -> o1sim.Result:
    return o1sim.simulate(o1sim.Scenario.default())


def test_same_scenario_same_bytes() -> None:
    a = o1sim.simulate(o1sim.Scenario.default()).to_json()
    b = o1sim.simulate(o1sim.default_scenario()).to_json()  # via a dict this time
    assert a == b


def test_to_json_holds_the_summary(result: o1sim.Result) -> None:
    doc = json.loads(result.to_json())
    assert doc["summary"] == result.summary
    assert set(doc) >= {"summary", "requests", "timeseries"}


def test_summary_has_the_documented_metrics(result: o1sim.Result) -> None:
    s = result.summary
    for key in ("num_requests", "finished", "rejected", "duration_s", "throughput_rps", "output_tokens_per_s",
                "goodput_rps", "kv_utilization_mean", "kv_utilization_peak", "preemptions"):
        assert key in s, key
    for dist in ("ttft_ms", "tpot_ms", "e2e_ms", "queueing_ms"):
        assert set(s[dist]) >= {"mean", "p50", "p90", "p99"}, dist
    assert s["num_requests"] > 0
    assert s["finished"] + s["rejected"] == s["num_requests"]
    assert s["ttft_ms"]["p50"] <= s["ttft_ms"]["p99"]


def test_requests_table(result: o1sim.Result) -> None:
    df = result.requests
    assert isinstance(df, pd.DataFrame)
    assert len(df) == result.summary["num_requests"]
    assert list(df["request_id"]) == sorted(df["request_id"])
    assert isinstance(df["status"].dtype, pd.CategoricalDtype)
    assert list(df["status"].cat.categories) == o1sim.status_names()
    assert list(df["reason"].cat.categories) == o1sim.reason_names()
    done = df[df["status"] == "finished"]
    assert len(done) == result.summary["finished"]
    assert np.isfinite(done["first_token_ms"]).all()
    assert (done["first_token_ms"] >= done["arrival_ms"]).all()
    assert (done["finish_ms"] >= done["first_token_ms"]).all()
    assert (done["output_tokens"] > 0).all()
    rejected = df[df["status"] == "rejected"]
    assert rejected["first_token_ms"].isna().all()
    assert (rejected["reason"] != "").all()


def test_columns_are_numpy_arrays_of_the_documented_types(result: o1sim.Result) -> None:
    cols = result.raw.columns()
    assert cols["arrival_ms"].dtype == np.float64
    assert cols["request_id"].dtype == np.uint32
    assert cols["replica"].dtype == np.int32
    assert cols["status"].dtype == np.uint8 and cols["reason"].dtype == np.uint8
    assert len({len(v) for v in cols.values()}) == 1


def test_timeseries_table(result: o1sim.Result) -> None:
    ts = result.timeseries
    assert len(ts) > 0
    assert set(ts.columns) >= {"time_ms", "replica", "batch_size", "tokens", "kv_usage", "waiting", "running"}
    assert result.timeseries_interval_ms > 0
    assert ts["kv_usage"].between(0, 1).all()


def test_progress_reaches_the_total() -> None:
    seen: list[o1sim.Progress] = []
    o1sim.simulate(o1sim.Scenario.default(), progress=seen.append)
    assert len(seen) >= 2
    assert seen[-1].finished_requests == seen[-1].total_requests > 0
    assert seen[-1].fraction == 1.0
    assert [p.events for p in seen] == sorted(p.events for p in seen)


def test_steps_are_a_table_and_only_a_recorded_run_has_them(monkeypatch: pytest.MonkeyPatch) -> None:
    with_steps = o1sim.simulate(o1sim.Scenario.default(), record_steps=True)
    steps = with_steps.steps
    assert isinstance(steps, pd.DataFrame) and steps.index.name == "step"
    assert list(steps.columns) == list(STEP_COLUMNS)
    records = with_steps.step_records
    assert len(steps) == len(records) == with_steps.raw.num_steps() > 0
    # Every field the core records is a column (a new one fails here until it is added).
    assert set(records[0]) - {"shape"} | set(records[0]["shape"]) == set(STEP_COLUMNS) - {"tokens", "batch_size"} - set(OPTIONAL_SHAPE_COLUMNS)
    assert (steps["end_ms"] >= steps["start_ms"]).all()
    assert steps["tokens"].tolist() == [sum(t for _, t in s["scheduled"]) for s in records]
    assert steps["batch_size"].tolist() == [len(s["scheduled"]) for s in records]
    assert steps["decode_seqs"].tolist() == [s["shape"]["decode_seqs"] for s in records]
    # A result run without record_steps never runs again by itself: asking for its steps, or
    # for what is built from them, is a typed error at once that says how to get them.
    plain = o1sim.simulate(o1sim.Scenario.default())
    real_simulate = o1sim.api.simulate

    def no_run(*args: object, **kwargs: object) -> None:
        raise AssertionError("the scenario was run again")

    monkeypatch.setattr(o1sim.api, "simulate", no_run)
    for ask in (lambda r: r.steps, lambda r: r.step_records, lambda r: r.step_anatomy(3), lambda r: r.to_prometheus(),
                lambda r: r.to_chrome_trace(), lambda r: r.to_vllm_bench()):
        with pytest.raises(o1sim.StepsNotRecordedError, match=r"pass record_steps=True to simulate\(\), or call "
                           r"result\.with_steps\(\) to run this scenario of 2,000 requests again") as e:
            ask(plain)
        assert e.value.field == "record_steps" and isinstance(e.value, ValueError)
    assert "Result.steps needs the scheduler steps" in str(pytest.raises(o1sim.StepsNotRecordedError, lambda: plain.steps).value)
    # with_steps() is the explicit re-run: the same result, plus the steps.
    monkeypatch.setattr(o1sim.api, "simulate", real_simulate)
    again = plain.with_steps()
    assert again is not plain and again.step_records == records and again.steps.equals(steps)
    assert with_steps.with_steps() is with_steps
    # Recording steps does not change the result.
    assert with_steps.to_json() == plain.to_json() == again.to_json()


def test_a_run_whose_topology_changed_cannot_rerun_for_its_steps() -> None:
    sc = {"model": "llama-3-8b", "gpu": "h200", "topology": "hgx-h200", "deployment": {"tp": 2, "replicas": 2},
          "workload": {"num_requests": 40, "arrival": {"kind": "poisson", "rate": 10.0},
                       "prompt": {"kind": "fixed", "value": 500}, "output": {"kind": "fixed", "value": 50}}}
    down = [{"at_s": 0, "kind": "link_down", "src": "gpu2", "dst": "nvswitch0"}]
    sim = o1sim.Simulation(sc)
    sim.run_events(100)
    sim.inject_topology(events=down)
    injected = sim.finish()
    for ask in (lambda: injected.steps, injected.with_steps):
        with pytest.raises(o1sim.StepsNotRecordedError, match=r"topology changed while it ran \(inject_topology\), so its "
                           r"scenario alone would not give them: run it with Simulation\(\.\.\., record_steps=True\)"):
            ask()
    recorded = o1sim.Simulation(sc, record_steps=True)
    recorded.run_events(100)
    recorded.inject_topology(events=down)
    assert len(recorded.finish().steps) > 0
    # Without an injection the Simulation's result runs again like simulate()'s, when asked.
    assert o1sim.Simulation(sc).finish().with_steps().step_records == o1sim.simulate(sc, record_steps=True).step_records


def test_csv_round_trip(result: o1sim.Result, tmp_path) -> None:
    p = tmp_path / "requests.csv"
    result.to_csv(p)
    back = pd.read_csv(p, keep_default_na=False, na_values=[""])
    assert len(back) == len(result.requests)


@pytest.mark.parametrize("field", ["scheduler.block_size", "scheduler.max_num_seqs"])
def test_core_names_the_bad_field(field: str) -> None:
    with pytest.raises(o1sim.ConfigError) as info:
        o1sim.simulate(o1sim.Scenario.default().with_overrides({field: 0}))
    assert info.value.field == field
    assert str(info.value).startswith(f"{field}: ")


def test_unknown_policy_is_named() -> None:
    with pytest.raises(o1sim.ConfigError) as info:
        o1sim.Scenario.default().with_overrides({"scheduler.policy": "nope"}).validate()
    assert info.value.field == "scheduler.policy"


def test_toml_syntax_error_is_a_config_error() -> None:
    with pytest.raises(o1sim.ConfigError):
        _core.Simulation("seed = = 1", "toml")


def test_validate_resolves_presets() -> None:
    resolved = o1sim.Scenario.default().validate()
    assert {"seed", "model", "gpu", "deployment", "scheduler", "workload"} <= set(resolved["scenario"])
    plan = resolved["deployment"]
    # Presets expanded: the model's real shape and a memory plan per GPU.
    assert plan["model"]["layers"] == 80 and plan["gpu"]["name"] == "h200"
    assert plan["memory"]["weights_gib"] > 30 and plan["num_gpu_blocks"] > 1000


def test_presets_catalog() -> None:
    cat = o1sim.presets()
    assert {"gpus", "models", "policies"} <= set(cat)
    policies = cat["policies"]
    names = set(policies) if isinstance(policies, (dict, list)) and not (policies and isinstance(policies, list) and isinstance(policies[0], dict)) else {p["name"] for p in policies}
    assert {"orca", "vllm", "sarathi", "o1pro"} <= names


def test_each_policy_runs_the_default_scenario() -> None:
    for policy in ("orca", "vllm", "sarathi", "o1pro"):
        r = o1sim.simulate(o1sim.Scenario.default().with_overrides({"scheduler.policy": policy}))
        assert r.summary["finished"] > 0, policy
        assert not math.isnan(r.summary["ttft_ms"]["p99"]), policy
