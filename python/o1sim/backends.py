"""Where the runs of a sweep execute: threads on this machine, or a Ray cluster.

Both backends take scenario payloads (JSON text, exactly what the core parses) and return
one :data:`Outcome` per payload, in payload order, so the rows a sweep builds do not depend
on the backend, the number of workers or the order in which runs finish.

* ``local``: a thread pool in this process. Each run is one call into the core, which
  releases the GIL for the whole run, so N threads use N cores.
* ``ray``: Ray tasks (``pip install 'o1sim[ray]'``). Payloads travel as JSON text in chunks
  of several runs (one task each, which amortises Ray's per-task cost) and summaries come
  back as JSON text; a task whose worker dies is retried (``max_retries``), and one lost
  for good raises :class:`BackendError` naming the runs it held.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any, Callable, Optional, Union

from . import _core
from ._memory import refresh_memory_ceiling

__all__ = ["BackendError", "Outcome", "run_local", "run_ray", "default_workers"]

#: ``("ok", summary_json)`` or ``("error", kind, message, field)`` for a run the core refused
#: or could not finish (the error as data, so it crosses a process boundary unchanged).
Outcome = Union[tuple[str, str], tuple[str, str, str, str]]

#: Called with (runs done, runs in all) as runs finish.
Tick = Callable[[int, int], None]

RAY_EXTRA = "pip install 'o1sim[ray]'"


class BackendError(RuntimeError):
    """A backend could not run the sweep: Ray missing or unreachable, or a task lost for good
    (its worker died on every retry)."""


def default_workers() -> int:
    """The CPUs this process may use (its affinity mask where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - macOS, Windows
        return max(1, os.cpu_count() or 1)


def run_one(payload: str) -> Outcome:
    """Run one scenario (JSON text) to its summary; a core error comes back as data."""
    try:
        refresh_memory_ceiling()  # a worker process: its own limits
        return ("ok", _core.run_summary_json(payload, "json"))
    except _core.SimError as e:
        return ("error", type(e).__name__, str(e), getattr(e, "field", "") or "")


def run_local(payloads: Sequence[str], workers: int, tick: Optional[Tick] = None) -> list[Outcome]:
    """Run every payload on ``workers`` threads; outcomes in payload order."""
    n = len(payloads)
    out: list[Optional[Outcome]] = [None] * n
    if workers <= 1 or n <= 1:
        for i, p in enumerate(payloads):
            out[i] = run_one(p)
            if tick:
                tick(i + 1, n)
    else:
        with ThreadPoolExecutor(max_workers=min(workers, n), thread_name_prefix="o1sim") as pool:
            futures = {pool.submit(run_one, p): i for i, p in enumerate(payloads)}
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


def run_chunk(payloads: list[str]) -> list[Outcome]:
    """A Ray task's body: run a chunk of payloads one after another."""
    return [run_one(p) for p in payloads]


def run_ray(
    payloads: Sequence[str],
    *,
    address: Optional[str] = None,
    chunk: Optional[int] = None,
    max_retries: int = 3,
    tick: Optional[Tick] = None,
    task: Callable[[list[str]], list[Outcome]] = run_chunk,
) -> list[Outcome]:
    """Run every payload as Ray tasks of ``chunk`` runs each (default: about four tasks per
    CPU of the cluster); outcomes in payload order.

    Connects with ``ray.init(address=address)`` unless Ray is already initialised (None
    starts a local cluster). A task whose worker process dies is retried up to
    ``max_retries`` times by Ray; after that :class:`BackendError` names the lost runs.
    ``task`` replaces the task body (tests use it to lose workers on purpose)."""
    ray = import_ray()
    if not ray.is_initialized():
        try:
            ray.init(address=address, include_dashboard=False, log_to_driver=False, configure_logging=False)
        except Exception as e:  # Ray raises ConnectionError, RuntimeError, ValueError…
            raise BackendError(f"could not connect to the Ray cluster at {address or '(a new local one)'}: {e}") from e
    n = len(payloads)
    if chunk is None:
        cpus = int(ray.cluster_resources().get("CPU", 1)) or 1
        chunk = max(1, -(-n // (4 * cpus)))
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1 (got {chunk})")
    remote = ray.remote(num_cpus=1, max_retries=max_retries, retry_exceptions=False)(task)
    spans = [(lo, min(n, lo + chunk)) for lo in range(0, n, chunk)]
    refs = {remote.remote(list(payloads[lo:hi])): (lo, hi) for lo, hi in spans}
    out: list[Optional[Outcome]] = [None] * n
    pending = list(refs)
    done_runs = 0
    while pending:
        ready, pending = ray.wait(pending, num_returns=1)
        for ref in ready:
            lo, hi = refs[ref]
            try:
                results = ray.get(ref)
            except ray.exceptions.RayError as e:
                for other in pending:
                    ray.cancel(other, force=True)
                raise BackendError(
                    f"runs {lo}..{hi - 1} were lost: their Ray task failed after {max_retries} retries "
                    f"({type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else e!r})"
                ) from e
            out[lo:hi] = results
            done_runs += hi - lo
            if tick:
                tick(done_runs, n)
    return [o for o in out if o is not None]
