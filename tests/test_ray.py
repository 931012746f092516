"""The Ray backend on a local two-CPU Ray cluster: the same rows as the local backend, a
worker lost once is retried, one lost on every try is a clear error."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

import o1sim
from o1sim.backends import BackendError, run_chunk, run_ray
from o1sim.sweeps import payload

ray = pytest.importorskip("ray", reason="Ray is not installed here (pip install 'o1sim[ray]'), so the Ray backend is not tested")

SMALL = {
    "seed": 5,
    "model": "llama-3-8b",
    "gpu": "h100",
    "workload": {"num_requests": 60, "arrival": {"kind": "poisson", "rate": 6.0},
                 "prompt": {"kind": "fixed", "value": 300}, "output": {"kind": "fixed", "value": 40}},
}


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        yield
    finally:
        ray.shutdown()


def test_ray_gives_the_local_rows(cluster: None) -> None:
    grid = {"scheduler.policy": ["vllm", "sarathi"], "workload.arrival.rate": [4.0, 8.0]}
    local = o1sim.sweep(SMALL, grid, seeds=2, workers=2)
    remote = o1sim.sweep(SMALL, grid, seeds=2, backend="ray")
    assert remote.to_csv(index=False) == local.to_csv(index=False)
    c_local = o1sim.capacity(SMALL, {"ttft_p99_ms": 300}, seeds=1, workers=2)
    c_ray = o1sim.capacity(SMALL, {"ttft_p99_ms": 300}, seeds=1, backend="ray")
    assert c_ray.rate == c_local.rate


def test_a_lost_worker_is_retried_then_reported(cluster: None, tmp_path: Path) -> None:
    texts = [payload(SMALL, {"workload.arrival.rate": r}, 5) for r in (4.0, 8.0, 12.0)]
    marker = str(tmp_path / "died-once")

    def dies_once(chunk: list[str]) -> list:
        if not os.path.exists(marker):
            open(marker, "w").close()
            os._exit(1)  # the worker process dies mid-task, as on a lost node
        return run_chunk(chunk)

    out = run_ray(texts, chunk=3, max_retries=2, task=dies_once)
    assert os.path.exists(marker)
    assert out == run_chunk(texts)

    def always_dies(chunk: list[str]) -> list:
        os._exit(1)

    with pytest.raises(BackendError, match=r"runs 0\.\.2 were lost: their Ray task failed after 1 retries"):
        run_ray(texts, chunk=3, max_retries=1, task=always_dies)
