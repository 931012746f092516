"""Where the runs of a sweep execute: threads on this machine, or a Ray cluster.

Both backends take what every run shares (``shared``: for a sweep, the scenario with its
files inlined and the trace files' bytes), one item per run (its axis values and seed) and
the function that runs one item, ``fn(shared, item)``; they return one :data:`Outcome` per
item, in item order, so the rows a sweep builds do not depend on the backend, the number
of workers or the order in which runs finish.

* ``local``: a thread pool in this process. Each run is one call into the core, which
  releases the GIL for the whole run, so N threads use N cores.
* ``ray``: Ray tasks (``pip install 'o1sim[ray]'``). ``shared`` goes into Ray's object
  store once (``ray.put``): each node fetches it once, whatever the number of runs, and
  numpy arrays in it (a trace's bytes) are read there without a copy. Items travel in
  batches, one task each (:func:`batch_size`; strided, so that every batch holds the same
  mix of cheap and costly runs), so that a task's cost is spread over many runs; each
  batch's outcomes come back as it finishes (``tick``). A task whose worker dies
  is retried (``max_retries``), and one lost for good raises :class:`BackendError` naming
  the runs it held.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any, Callable, Optional, Union

from . import _core
from ._memory import refresh_memory_ceiling

__all__ = ["BackendError", "Outcome", "run_one", "run_local", "run_ray", "run_batch", "batch_size", "connect_ray",
           "default_workers"]

#: ``("ok", summary_json)`` or ``("error", kind, message, field)`` for a run the core refused
#: or could not finish (the error as data, so it crosses a process boundary unchanged).
Outcome = Union[tuple[str, str], tuple[str, str, str, str]]

#: Runs one item with what every run shares: ``fn(shared, item) -> Outcome``. On Ray it must
#: be importable by the workers (a module-level function of an installed package).
RunFn = Callable[[Any, Any], Outcome]

#: Called with (runs done, runs in all) as runs finish.
Tick = Callable[[int, int], None]

RAY_EXTRA = "pip install 'o1sim[ray]'"

#: Ray tasks per CPU of the cluster a sweep is cut into, so that runs of uneven length even
#: out and progress is reported often ...
TASKS_PER_CPU = 8
#: ... but no task holds more runs than this (a huge sweep: progress and retries stay fine
#: grained; a task's own cost, about a millisecond, is still spread over this many runs).
MAX_BATCH = 64


class BackendError(RuntimeError):
    """A backend could not run the sweep: Ray missing or unreachable, or a task lost for good
    (its worker died on every retry)."""


def default_workers() -> int:
    """The CPUs this process may use (its affinity mask where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - macOS, Windows
        return max(1, os.cpu_count() or 1)


def run_one(payload: str, trace: Optional[_core.LoadedTrace] = None) -> Outcome:
    """Run one scenario (JSON text; ``trace``: its trace file, already read) to its summary;
    a core error comes back as data."""
    try:
        refresh_memory_ceiling()  # a worker process: its own limits
        if trace is None:
            return ("ok", _core.run_summary_json(payload, "json"))
        return ("ok", _core.Simulation(payload, "json", False, False, trace).finish().summary_json())
    except _core.SimError as e:
        return ("error", type(e).__name__, str(e), getattr(e, "field", "") or "")


def run_local(shared: Any, items: Sequence[Any], fn: RunFn, workers: int, tick: Optional[Tick] = None) -> list[Outcome]:
    """Run every item on ``workers`` threads; outcomes in item order."""
    n = len(items)
    out: list[Optional[Outcome]] = [None] * n
    if workers <= 1 or n <= 1:
        for i, item in enumerate(items):
            out[i] = fn(shared, item)
            if tick:
                tick(i + 1, n)
    else:
        with ThreadPoolExecutor(max_workers=min(workers, n), thread_name_prefix="o1sim") as pool:
            futures = {pool.submit(fn, shared, item): i for i, item in enumerate(items)}
            for done, f in enumerate(as_completed(futures), 1):
                out[futures[f]] = f.result()
                if tick:
                    tick(done, n)
    return [o for o in out if o is not None]


# --------------------------------------------------------------------------- Ray


def import_ray() -> Any:
    """The ``ray`` module, or an ImportError that names the extra to install."""
    try:
        import ray
    except ImportError:
        raise ImportError(f"backend='ray' needs Ray, which is not installed: {RAY_EXTRA}") from None
    return ray


def connect_ray(address: Optional[str] = None) -> Any:
    """The ``ray`` module, connected: ``ray.init(address=address)`` unless Ray is already
    initialised (None starts a local cluster); a cluster that cannot be reached is a
    :class:`BackendError` naming the address."""
    ray = import_ray()
    if not ray.is_initialized():
        try:
            ray.init(address=address, include_dashboard=False, log_to_driver=False, configure_logging=False)
        except Exception as e:  # Ray raises ConnectionError, RuntimeError, ValueError…
            raise BackendError(f"could not connect to the Ray cluster at {address or '(a new local one)'}: {e}") from e
    return ray


def batch_size(n: int, cpus: int) -> int:
    """Runs per Ray task for ``n`` runs on a cluster of ``cpus`` CPUs: :data:`TASKS_PER_CPU`
    tasks per CPU, at most :data:`MAX_BATCH` runs each (1,000 runs on 2 CPUs: 16 tasks of
    63; 100,000 runs on 256 CPUs: 2,041 tasks of 49)."""
    return max(1, min(MAX_BATCH, -(-n // (TASKS_PER_CPU * max(1, cpus)))))


def _runs_text(held: range) -> str:
    """The runs a batch held, for an error: ``0..62``, or strided ``3, 19, … 995``."""
    if held.step == 1 or len(held) == 1:
        return f"{held[0]}..{held[-1]}" if len(held) > 1 else str(held[0])
    return ", ".join(map(str, held)) if len(held) <= 3 else f"{held[0]}, {held[1]}, … {held[-1]}"


def run_batch(fn: RunFn, shared: Any, items: list[Any]) -> list[Outcome]:
    """A Ray task's body: run a batch of items one after another."""
    return [fn(shared, item) for item in items]


def run_ray(
    shared: Any,
    items: Sequence[Any],
    fn: RunFn,
    *,
    address: Optional[str] = None,
    batch: Optional[int] = None,
    max_retries: int = 3,
    tick: Optional[Tick] = None,
    task: Callable[[RunFn, Any, list[Any]], list[Outcome]] = run_batch,
) -> list[Outcome]:
    """Run every item as Ray tasks of ``batch`` items each (default :func:`batch_size`);
    outcomes in item order.

    ``shared`` is put into the object store once (or is already an ``ObjectRef`` from
    ``ray.put``, to share it between calls). Connects with :func:`connect_ray`. A task
    whose worker process dies is retried up to ``max_retries`` times by Ray; after that
    :class:`BackendError` names the lost runs. ``task`` replaces the task body (tests use
    it to lose workers on purpose, or to see where tasks ran)."""
    ray = connect_ray(address)
    n = len(items)
    if batch is None:
        batch = batch_size(n, int(ray.cluster_resources().get("CPU", 1)))
    if batch < 1:
        raise ValueError(f"batch must be >= 1 (got {batch})")
    ref = shared if isinstance(shared, ray.ObjectRef) else ray.put(shared)
    # SPREAD: the batches are alike and independent, so every node gets some from the start
    # (Ray's default packs the driver's node first) and fetches the shipment once, early.
    remote = ray.remote(num_cpus=1, max_retries=max_retries, retry_exceptions=False,
                        scheduling_strategy="SPREAD")(task)
    # Batch k holds runs k, k + tasks, k + 2·tasks, …: neighbouring points (a rising rate, a
    # slower policy) cost alike, so striding gives every batch the same mix and the last
    # batches to finish do not hold the slowest runs.
    tasks = -(-n // batch)
    refs = {remote.remote(fn, ref, [items[i] for i in range(k, n, tasks)]): range(k, n, tasks) for k in range(tasks)}
    out: list[Optional[Outcome]] = [None] * n
    pending = list(refs)
    done_runs = 0
    while pending:
        ready, pending = ray.wait(pending, num_returns=1)
        for r in ready:
            held = refs[r]
            try:
                results = ray.get(r)
            except ray.exceptions.RayError as e:
                for other in pending:
                    ray.cancel(other, force=True)
                raise BackendError(
                    f"runs {_runs_text(held)} were lost: their Ray task failed after {max_retries} retries "
                    f"({type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else e!r})"
                ) from e
            for i, o in zip(held, results):
                out[i] = o
            done_runs += len(held)
            if tick:
                tick(done_runs, n)
    return [o for o in out if o is not None]
