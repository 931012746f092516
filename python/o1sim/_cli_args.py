"""The command line's shared arguments and helpers: the scenario argument, ``--seed`` and
``--set`` (TOML values), loading a scenario with its overrides, the delayed progress bar and
where the page lives. Used by :mod:`o1sim.cli`, :mod:`o1sim.cli_search` and the seed report,
so none of them imports another's commands (no import circle)."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Callable, Optional, TypeVar

import click

from ._cli_io import _err

if TYPE_CHECKING:
    from pathlib import Path

    from rich.progress import Progress

    from .api import Scenario

F = TypeVar("F", bound=Callable[..., Any])


def _parse_value(text: str) -> Any:
    """A ``--set`` value: TOML syntax (``16``, ``0.9``, ``true``, ``nan``, ``[1, 2]``, ``"x"``), else the raw string."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib

    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def _load(
    scenario: Optional[str],
    seed: Optional[int],
    sets: Sequence[str],
    trace: Optional[str] = None,
    trace_format: Optional[str] = None,
) -> Scenario:
    from pathlib import Path

    from .api import Scenario

    sc = Scenario.from_file(scenario) if scenario else Scenario.default()
    overrides: dict[str, Any] = {}
    if trace is not None:
        # The trace replaces the scenario's workload; --set workload.trace.* refines it.
        overrides["workload"] = {"trace": {"path": str(Path(trace).resolve()), "format": trace_format or "auto"}}
    elif trace_format is not None:
        raise click.BadParameter("needs --trace FILE", param_hint="--trace-format")
    for item in sets:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="--set")
        overrides[key.strip()] = _parse_value(value.strip())
    if seed is not None:
        overrides["seed"] = seed
    return sc.with_overrides(overrides) if overrides else sc


class _Bar:
    """rich's progress bar, drawn only once a command has run for ``delay_s``: a quick
    command never draws (or imports) it. Same calls as rich's ``Progress``: ``add_task``,
    ``update``."""

    def __init__(self, delay_s: float = 0.25) -> None:
        self._delay_s = delay_s
        self._started = time.perf_counter()
        self._bar: Optional[Progress] = None
        self._tasks: list[dict[str, Any]] = []
        self._ids: list[Any] = []

    def __enter__(self) -> _Bar:
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)

    def add_task(self, description: str, total: Optional[float] = None, **fields: Any) -> int:
        self._tasks.append({"description": description, "total": total, "completed": 0, **fields})
        if self._bar is not None:
            self._ids.append(self._bar.add_task(**self._tasks[-1]))
        return len(self._tasks) - 1

    def update(self, task: int, **changes: Any) -> None:
        self._tasks[task].update(changes)
        if self._bar is None and time.perf_counter() - self._started >= self._delay_s:
            self._bar = _rich_progress()
            self._bar.__enter__()
            self._ids = [self._bar.add_task(**t) for t in self._tasks]
        if self._bar is not None:
            self._bar.update(self._ids[task], **changes)


def _progress_bar() -> _Bar:
    return _Bar()


def _rich_progress() -> Progress:
    """The bar itself, on stderr, only when stderr is a terminal (else it would leave a
    blank line where it stood, before an error's one line)."""
    from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

    console = _err()
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        TextColumn("{task.fields[detail]}"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    )


scenario_arg: Callable[[F], F] = click.argument("scenario", required=False, type=click.Path(exists=True, dir_okay=False))
seed_opt: Callable[[F], F] = click.option("--seed", type=int, default=None, help="Override the scenario's seed.")
set_opt: Callable[[F], F] = click.option(
    "--set",
    "sets",
    multiple=True,
    metavar="KEY=VALUE",
    help="Override a field by dotted path, e.g. --set scheduler.block_size=32 (repeatable).",
)


def web_dir() -> Path:
    """The page's folder: ``web/`` of the source tree (editable install) or $O1SIM_WEB_DIR."""
    import os
    from pathlib import Path

    env = os.environ.get("O1SIM_WEB_DIR")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "web"
