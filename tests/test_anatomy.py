"""A step's anatomy from Python: ``Result.step_anatomy(i)`` as a DataFrame of kernels in
launch order, and the kernel tracks it adds to the Chrome trace on request."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import o1sim

GOLDEN = Path(__file__).parent / "golden"
COLUMNS = ["name", "layer", "part", "parts", "launched_us", "start_us", "end_us", "stream", "source", "ctas", "sm_occupancy"]


@pytest.fixture(scope="module")
def run() -> o1sim.Result:
    """Llama-3-8B on an H100 (the Vidur-derived profile), vLLM, with every step recorded."""
    return o1sim.simulate(GOLDEN / "policy_vllm.toml", record_steps=True)


def test_a_steps_kernels_fill_the_step_in_launch_order(run: o1sim.Result) -> None:
    steps = run.steps
    i = int(steps.index[(steps["prefill"].map(len) > 0) & (steps["decode_seqs"] > 0)][0])
    df = run.step_anatomy(i)
    assert list(df.columns) == COLUMNS
    step = steps.loc[i]
    assert df.attrs["step"] == i and df.attrs["replica"] == step["replica"]
    assert df.attrs["recorded_ms"] == pytest.approx(step["end_ms"] - step["start_ms"])
    # The timeline ends where the step ended (the run interpolates on a grid: ≤ 0.2%).
    assert df.attrs["step_ms"] == pytest.approx(df.attrs["recorded_ms"], rel=2e-3)
    assert df["end_us"].max() <= df.attrs["step_ms"] * 1000 + 1e-6
    gpu = df[df.stream != "cpu"]
    assert (gpu.start_us.diff().dropna() >= 0).all() and (gpu.start_us.values[1:] >= gpu.end_us.values[:-1] - 1e-9).all()
    # 32 layers: each with qkv, o, gate_up, down once, two AllReduces only at TP > 1 (TP 1 here),
    # and vLLM's one attention call for every request of the step (separate names when the
    # step has only decodes or one prefill).
    per_layer = gpu[gpu.layer == 3].name.tolist()
    for op in ["qkv", "o", "gate_up", "down"]:
        assert per_layer.count(op) == 1, (op, per_layer)
    calls = len(step["prefill"]) + (step["decode_seqs"] > 0)
    attention = [n for n in per_layer if n.startswith("attention")]
    assert attention == (["attention"] if calls > 1 else ["attention_prefill"] if step["prefill"] else ["attention_decode"])
    assert gpu.layer.max() == 31
    assert set(df.stream) <= {"compute", "communication", "cpu"}
    assert set(df.source) <= {"table", "interpolated", "roofline", "model"}
    assert ((df.sm_occupancy >= 0) & (df.sm_occupancy <= 1)).all()
    # vLLM's engine launches a step's graph replay while the previous step runs (async
    # scheduling): its timeline starts with the first kernel on the GPU.
    assert df.name.iloc[0] == "embedding" and df.stream.iloc[0] == "compute"


def test_negative_index_bad_index_and_a_run_without_steps(run: o1sim.Result) -> None:
    last = run.step_anatomy(-1)
    assert last.attrs["step"] == len(run.steps) - 1
    with pytest.raises(IndexError, match="out of range"):
        run.step_anatomy(len(run.steps))
    plain = o1sim.simulate(GOLDEN / "policy_vllm.toml")
    with pytest.raises(o1sim.StepsNotRecordedError, match=r"Result\.step_anatomy\(7\) needs the scheduler steps"):
        plain.step_anatomy(7)
    assert plain.with_steps().step_anatomy(7).equals(run.step_anatomy(7))


def test_the_chrome_trace_gains_kernel_tracks_on_request(run: o1sim.Result) -> None:
    plain = json.loads(run.to_chrome_trace())
    assert not [e for e in plain["traceEvents"] if e.get("cat") == "kernel"]
    trace = json.loads(run.to_chrome_trace(kernels=[3, 10]))
    kernels = [e for e in trace["traceEvents"] if e.get("cat") == "kernel"]
    assert {e["args"]["step"] for e in kernels} == {3, 10}
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "thread_name"}
    assert names[(1, 2)] == "kernels: compute stream"
    a = run.step_anatomy(3)
    mine = [e for e in kernels if e["args"]["step"] == 3]
    assert len(mine) == len(a)
    t0 = run.steps.loc[3, "start_ms"] * 1000
    assert mine[0]["ts"] == pytest.approx(t0 + a.start_us.iloc[0], abs=1e-3)
    # Each step's kernels lie inside its slice on the steps track.
    end = run.steps.loc[3, "end_ms"] * 1000
    assert all(t0 - 1e-3 <= e["ts"] and e["ts"] + e["dur"] <= end + 0.01 * (end - t0) for e in mine)
