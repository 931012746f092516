"""The Ray backend on a real two-node Ray cluster on this machine (``ray start --head`` and
``ray start --address``, both on loopback, one CPU each): the same rows as the local
backend, runs spread over both nodes, a trace shipped through the object store (its file
gone before the runs start), a worker lost once is retried, one lost on every try is a
clear error.

The cluster is this test's own: its processes are started here and stopped by their ids,
in a temporary folder of its own (Ray's default ``/tmp/ray`` would let another session's
``ray.init()`` find it), on free ports. Every wait is for a state (a log line, the nodes
alive), with a deadline only to fail rather than hang."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import o1sim
from o1sim.backends import BackendError, Outcome, RunFn, run_batch, run_ray
from o1sim.sweeps import Shipment, base_dict, expand, outcome_metrics, run_point, seed_list, ship

ray = pytest.importorskip("ray", reason="Ray is not installed here (pip install 'o1sim[ray]'), so the Ray backend is not tested")

SMALL = {
    "seed": 5,
    "model": "llama-3-8b",
    "gpu": "h100",
    "workload": {"num_requests": 60, "arrival": {"kind": "poisson", "rate": 6.0},
                 "prompt": {"kind": "fixed", "value": 300}, "output": {"kind": "fixed", "value": 40}},
}
#: A run of a sweep: a point's values and its seed.
Job = tuple[dict[str, Any], int]
TRACE = Path(__file__).resolve().parents[1] / "examples" / "traces" / "conversation.jsonl"
#: Only to fail instead of hanging: on a busy 2-core machine the nodes come up in seconds.
DEADLINE_S = 300.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _ray_command() -> list[str]:
    exe = Path(sys.executable).parent / "ray"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "ray.scripts.scripts"]


def _node_args() -> list[str]:
    """One node on loopback with one CPU, every port of its own (two raylets share this
    machine) and a small object store."""
    ports = ("node-manager-port", "object-manager-port", "dashboard-agent-listen-port", "dashboard-agent-grpc-port",
             "runtime-env-agent-port", "metrics-export-port")
    return ["--block", "--num-cpus=1", "--node-ip-address=127.0.0.1", "--object-store-memory=100000000",
            "--min-worker-port=0", "--max-worker-port=0", "--disable-usage-stats",
            *(f"--{p}={_free_port()}" for p in ports)]


def _wait(what: str, done: object, procs: list[subprocess.Popen[bytes]], logs: list[Path]) -> None:
    """Poll ``done()`` until it holds; fail with the logs if a node process exits first."""
    deadline = time.monotonic() + DEADLINE_S
    while not done():  # type: ignore[operator]
        for proc, log in zip(procs, logs):
            if proc.poll() is not None:
                pytest.fail(f"ray start exited ({proc.returncode}) while waiting for {what}:\n{log.read_text()[-3000:]}")
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} after {DEADLINE_S:.0f} s:\n" + "\n".join(log.read_text()[-2000:] for log in logs))
        time.sleep(0.2)


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """A head node and a worker node, the driver connected; yields the head's address."""
    tmp = Path(tempfile.mkdtemp(prefix="o1ray"))  # short: Ray's socket paths live under it
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0",
           # The nodes authenticate as this driver does: Ray reads RAY_AUTH_MODE when it is
           # imported (unset: no token), while `ray start` would turn tokens on whenever a
           # ~/.ray/auth_token exists (any earlier `ray.init()` writes one).
           "RAY_AUTH_MODE": os.environ.get("RAY_AUTH_MODE", "disabled")}
    env.pop("RAY_ADDRESS", None)
    address = f"127.0.0.1:{_free_port()}"
    procs: list[subprocess.Popen[bytes]] = []
    logs = [tmp / "head.log", tmp / "worker.log"]
    try:
        with logs[0].open("wb") as out:
            procs.append(subprocess.Popen(
                [*_ray_command(), "start", "--head", f"--port={address.rsplit(':', 1)[1]}", "--include-dashboard=false",
                 f"--temp-dir={tmp}", *_node_args()], stdout=out, stderr=subprocess.STDOUT, env=env))
        _wait("the head node", lambda: "Ray runtime started" in logs[0].read_text(), procs[:1], logs[:1])
        with logs[1].open("wb") as out:
            procs.append(subprocess.Popen([*_ray_command(), "start", f"--address={address}", *_node_args()],
                                          stdout=out, stderr=subprocess.STDOUT, env=env))
        ray.init(address=address, log_to_driver=False, configure_logging=False)
        _wait("two live nodes", lambda: sum(1 for n in ray.nodes() if n["Alive"]) == 2, procs, logs)
        yield address
    finally:
        if ray.is_initialized():
            ray.shutdown()
        for proc in reversed(procs):  # the worker node first, then the head; each cleans up its own processes
            proc.terminate()
            try:
                proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def test_two_nodes_give_the_local_rows(cluster: str, tmp_path: Path) -> None:
    assert sorted(n["Resources"].get("CPU", 0) for n in ray.nodes() if n["Alive"]) == [1.0, 1.0]
    grid = {"scheduler.policy": ["vllm", "sarathi"], "workload.arrival.rate": [4.0, 8.0]}
    local = o1sim.sweep(SMALL, grid, seeds=3, workers=2)
    remote = o1sim.sweep(SMALL, grid, seeds=3, backend="ray", address=cluster)
    assert local["error"].isna().all() and len(local) == 12
    assert remote.to_csv(index=False) == local.to_csv(index=False)
    c_local = o1sim.capacity(SMALL, {"ttft_p99_ms": 300}, seeds=1, workers=2)
    c_ray = o1sim.capacity(SMALL, {"ttft_p99_ms": 300}, seeds=1, backend="ray")
    assert c_ray.rate == c_local.rate and c_ray.points.equals(c_local.points)

    # Batches of 2 runs on 1-CPU nodes: with more batches pending than one node can take,
    # the second node runs some of them (each batch notes the node it ran on).
    seen = tmp_path / "nodes"
    seen.mkdir()

    def noting_node(fn: RunFn, shared: Shipment, items: list[Job]) -> list[Outcome]:
        (seen / ray.get_runtime_context().get_node_id()).touch()
        time.sleep(0.05)  # hold the CPU a moment, as a real batch does
        return run_batch(fn, shared, items)

    shipment = ship(base_dict(SMALL))
    jobs = [({"workload.arrival.rate": 2.0 + r}, 5) for r in range(16)]
    out = run_ray(shipment, jobs, run_point, batch=2, task=noting_node)
    assert out == run_batch(run_point, shipment, jobs)
    assert len(list(seen.iterdir())) == 2


def test_a_trace_travels_with_the_sweep(cluster: str, tmp_path: Path) -> None:
    trace = tmp_path / "conversation.jsonl"
    shutil.copy(TRACE, trace)
    sc = {"model": "llama-3-8b", "gpu": "h100", "workload": {"trace": {"path": str(trace), "max_requests": 80}}}
    grid = {"scheduler.policy": ["vllm", "sarathi"], "workload.trace.rate_scale": [1.0, 4.0]}
    local = o1sim.sweep(sc, grid, workers=2)
    assert local["error"].isna().all() and (local["num_requests"] == 80).all()
    assert local["ttft_p99_ms"].nunique() == 4  # each point replays the trace its own way
    # The file is read once, here: the runs on both nodes only see the shipped bytes.
    points = expand(grid)
    shipment = ship(base_dict(sc), [p.params for p in points])
    trace.unlink()
    jobs = [(p.params, s) for p in points for s in seed_list(None, 0)]
    out = run_ray(shipment, jobs, run_point, batch=1)
    assert [o[0] for o in out] == ["ok"] * 4
    assert [outcome_metrics(o)[0]["ttft_p99_ms"] for o in out] == local["ttft_p99_ms"].tolist()


def test_a_lost_worker_is_retried_then_reported(cluster: str, tmp_path: Path) -> None:
    shipment = ship(base_dict(SMALL))
    jobs = [({"workload.arrival.rate": r}, 5) for r in (4.0, 8.0, 12.0)]
    marker = str(tmp_path / "died-once")

    def dies_once(fn: RunFn, shared: Shipment, items: list[Job]) -> list[Outcome]:
        if not os.path.exists(marker):
            open(marker, "w").close()
            os._exit(1)  # the worker process dies mid-task, as on a lost node
        return run_batch(fn, shared, items)

    out = run_ray(shipment, jobs, run_point, batch=3, max_retries=2, task=dies_once)
    assert os.path.exists(marker)
    assert out == run_batch(run_point, shipment, jobs)

    def always_dies(fn: RunFn, shared: Shipment, items: list[Job]) -> list[Outcome]:
        os._exit(1)

    with pytest.raises(BackendError, match=r"runs 0\.\.2 were lost: their Ray task failed after 1 retries"):
        run_ray(shipment, jobs, run_point, batch=3, max_retries=1, task=always_dies)
