"""Autoscaling what-ifs through the Python API: a ×4 rate step at 300 s with Poisson
arrivals, with and without room to scale; scale-down after the cool-down; no request lost;
the `replicas` column; and a sweep over the scaling settings."""

from __future__ import annotations

import numpy as np
import pytest

import o1sim


def step_requests(rate: float, factor: float = 4.0, t_step: float = 300.0, t_end: float = 600.0, seed: int = 0) -> list:
    """Poisson arrivals at `rate` req/s until `t_step`, then `factor` × `rate` until `t_end`."""
    rng = np.random.default_rng(seed)
    t, out = 0.0, []
    while True:
        t += rng.exponential(1.0 / (rate if t < t_step else rate * factor))
        if t >= t_end:
            return out
        out.append({"arrival_ms": round(t * 1e3, 3), "prompt_tokens": 512, "output_tokens": 128})


def scenario(max_replicas: int) -> dict:
    return {
        "seed": 0, "model": "llama-3-70b", "gpu": "h100",
        "deployment": {"tp": 4, "replicas": 2, "router": "least_outstanding_tokens"},
        "workload": {"requests": step_requests(10.0)},
        "scaling": {"min_replicas": 2, "max_replicas": max_replicas, "metric": "e2e_p90_ms", "target": 4000,
                    "window_s": 30, "interval_s": 15, "scale_down_cooldown_s": 60, "stabilization_window_s": 60},
    }


def p90(res: o1sim.Result, lo_s: float, hi_s: float) -> float:
    df = res.requests
    m = df[(df["finish_ms"] >= lo_s * 1e3) & (df["finish_ms"] < hi_s * 1e3)]
    return float(m["e2e_ms"].quantile(0.9))


@pytest.fixture(scope="module")
def runs() -> tuple[o1sim.Result, o1sim.Result]:
    return o1sim.simulate(scenario(8)), o1sim.simulate(scenario(2))


def test_a_rate_step_scales_up_and_p90_recovers(runs: tuple[o1sim.Result, o1sim.Result]) -> None:
    scaled, fixed = runs
    sc = scaled.summary["scaling"]
    up = sc["events"][0]
    assert 300 < up["time_s"] <= 330 and up["to"] > up["from"] == 2
    assert up["ready_s"] == pytest.approx(up["time_s"] + sc["scale_up_delay_s"])
    ts = scaled.timeseries
    assert "replicas" in ts.columns
    before = ts[ts["time_ms"] < 300e3]["replicas"]
    during = ts[(ts["time_ms"] >= up["time_s"] * 1e3) & (ts["time_ms"] < up["ready_s"] * 1e3 - 500)]["replicas"]
    after = ts[(ts["time_ms"] >= up["ready_s"] * 1e3 + 1e3) & (ts["time_ms"] < up["ready_s"] * 1e3 + 30e3)]["replicas"]
    assert (before == 2).all() and (during <= 2).all() and after.mean() > 3
    # P90 E2E of requests finishing in a window: recovers with scaling, not without.
    p_before, p_scaled, p_fixed = p90(scaled, 200, 300), p90(scaled, 420, 600), p90(fixed, 420, 600)
    assert p_scaled < 4000 and p_scaled < 1.5 * p_before
    assert p_fixed > 2 * p_scaled
    assert fixed.summary["scaling"]["events"] == [] and (fixed.timeseries["replicas"] == 2).all()
    assert scaled.summary["gpu_hours"] > fixed.summary["gpu_hours"]


def test_scale_down_after_the_cooldown_loses_no_request(runs: tuple[o1sim.Result, o1sim.Result]) -> None:
    scaled, _ = runs
    ev = scaled.summary["scaling"]["events"]
    downs = [(a, b) for a, b in zip(ev, ev[1:]) if b["to"] < b["from"]]
    assert downs, "replicas leave once the tail is under target"
    assert all(b["time_s"] - a["time_s"] >= 60 for a, b in downs)
    df = scaled.requests
    assert (df["status"] == "finished").all() and scaled.summary["finished"] == len(df)
    for _, d in downs:
        for rep in d["replicas"]:
            later = df[(df["replica"] == rep) & (df["arrival_ms"] > d["time_s"] * 1e3)]
            # unless a later scale-up took the replica back
            back = [e["time_s"] for e in ev if e["time_s"] > d["time_s"] and rep in e["replicas"]]
            if back:
                later = later[later["arrival_ms"] < back[0] * 1e3]
            assert later.empty, f"replica {rep} took requests after it was told to drain"


def test_scaling_settings_sweep_and_bad_input() -> None:
    sc = scenario(8)
    df = o1sim.sweep(sc, {"scaling.max_replicas": [2, 4, 8]}, workers=2)
    assert list(df["scaling.max_replicas"]) == [2, 4, 8]
    assert df["scaling_peak_replicas"].tolist() == [2, 4, 8]
    assert df["gpu_hours"].is_monotonic_increasing
    with pytest.raises(o1sim.ConfigError) as e:
        o1sim.simulate({**sc, "scaling": {**sc["scaling"], "metric": "p90"}})
    assert e.value.field == "scaling.metric"
