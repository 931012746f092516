"""Property tests from Python (hypothesis): random workloads, policies, pool sizes and
replica counts through the wheel. Every request is accounted for (finished, or rejected
with a reason), times are ordered, and the summary agrees with the per-request table.
The Rust suite checks block accounting after every event (crates/sim-core/tests)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import o1sim

requests = st.lists(
    st.fixed_dictionaries({
        "arrival_ms": st.integers(0, 50),
        "prompt_tokens": st.integers(1, 120),
        "output_tokens": st.integers(1, 40),
        "priority": st.integers(0, 2),
    }),
    min_size=1,
    max_size=25,
)


@settings(max_examples=60, deadline=None)
@given(
    policy=st.sampled_from(o1sim.presets()["policies"]),
    blocks=st.integers(4, 64),
    budget=st.integers(1, 64),
    replicas=st.integers(1, 3),
    router=st.sampled_from(["round_robin", "least_outstanding_tokens"]),
    reqs=requests,
)
def test_every_request_is_accounted_for(policy: str, blocks: int, budget: int, replicas: int, router: str,
                                        reqs: list[dict[str, int]]) -> None:
    scenario = {
        "seed": 0,
        "model": "llama-3-8b",
        "gpu": "h100",
        "deployment": {"replicas": replicas, "router": router},
        "scheduler": {"policy": policy, "block_size": 8, "num_gpu_blocks": blocks,
                      "max_num_batched_tokens": budget, "chunk_size": budget, "max_num_seqs": 8},
        "cost_model": {"kind": "linear", "base_ms": 2.0, "per_prefill_token_ms": 0.01,
                       "per_decode_seq_ms": 0.1, "per_context_token_ms": 0.0001},
        "workload": {"requests": reqs},
    }
    res = o1sim.simulate(scenario)
    df = res.requests
    assert len(df) == len(reqs)
    assert list(df["request_id"]) == list(range(len(reqs)))
    fin = df["status"] == "finished"
    assert (df.loc[fin, "reason"] == "").all()
    assert (df.loc[~fin, "reason"] != "").all()
    f = df[fin]
    assert (f["first_token_ms"] >= f["arrival_ms"]).all()
    assert (f["finish_ms"] >= f["first_token_ms"]).all()
    assert (f["replica"] >= 0).all() and (f["replica"] < replicas).all()
    assert np.array_equal(df["prompt_tokens"], [r["prompt_tokens"] for r in reqs])
    s = res.summary
    assert s["finished"] == int(fin.sum()) and s["finished"] + s["rejected"] == len(reqs)
    # (time-weighted mean vs peak, up to float rounding)
    assert 0.0 <= s["kv_utilization_mean"] <= s["kv_utilization_peak"] + 1e-12 <= 1.0 + 1e-12
    if policy == "orca":
        assert s["preemptions"] == 0
