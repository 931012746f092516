"""The command line's input/output plumbing: consoles, the one-red-line error contract
(``SimError``, usage errors, unwritable outputs, unexpected errors), output paths checked
before a run, and writing results (``-`` is stdout). Kept apart from the commands
(:mod:`o1sim.cli`), which use it."""

from __future__ import annotations

import functools
import os
import sys
from typing import TYPE_CHECKING, Any, Callable, Optional, TypeVar

import click

from .errors import SimError

if TYPE_CHECKING:  # rich and pathlib load only when used (`o1sim --help` stays fast)
    from rich.console import Console

F = TypeVar("F", bound=Callable[..., Any])


def _out() -> Console:
    from rich.console import Console

    # Built per call so click's CliRunner (which swaps sys.stdout) sees the output.
    return Console()


def _err() -> Console:
    from rich.console import Console

    return Console(stderr=True)


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _fail(exc: BaseException, kind: Optional[str] = None) -> None:
    line = _one_line(f"{kind or type(exc).__name__}: {exc}")
    _err().print(line, style="bold red", markup=False, highlight=False, soft_wrap=True)


class OutputError(Exception):
    """An output path that cannot be written."""


def _handle_errors(f: F) -> F:
    """SimError (and any other error) → red one-liner on stderr, exit status 2."""

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return f(*args, **kwargs)
        except (SimError, OutputError) as e:
            _fail(e)
            sys.exit(2)
        except click.ClickException:
            raise  # one line too, printed by the group (`_Cli.main`)
        except OSError as e:
            _fail(e, "OSError")
            sys.exit(2)
        except Exception as e:  # a bug: still one line unless debugging
            if os.environ.get("O1SIM_DEBUG"):
                raise
            _fail(e, f"InternalError ({type(e).__name__})")
            sys.exit(2)

    return wrapper  # type: ignore[return-value]


class _Cli(click.Group):
    """The command group: usage errors (a bad option, a missing file argument) are one red
    line and exit status 2 too, instead of click's usage screen."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        if not kwargs.get("standalone_mode", True):
            return super().main(*args, **kwargs)
        kwargs["standalone_mode"] = False
        try:
            rv = super().main(*args, **kwargs)
        except click.exceptions.Exit as e:
            sys.exit(e.exit_code)
        except click.ClickException as e:
            kind = "UsageError" if isinstance(e, click.UsageError) else "Error"
            hint = f" (see: o1sim {e.ctx.info_name} --help)" if isinstance(e, click.UsageError) and e.ctx and e.ctx.parent else ""
            _err().print(_one_line(f"{kind}: {e.format_message()}{hint}"), style="bold red", markup=False,
                         highlight=False, soft_wrap=True)
            sys.exit(2)
        except click.exceptions.Abort:
            _err().print("aborted", style="bold red", markup=False, highlight=False)
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)


def _check_out(path: Optional[str], option: str, directory: bool = False) -> None:
    """Refuse an output path that cannot be written, before any work is done: its folder
    must exist and be writable, and it must not be a folder itself (``-`` is stdout)."""
    if not path or (path == "-" and not directory):
        return
    from pathlib import Path

    p = Path(path)
    if directory:
        if p.exists() and not p.is_dir():
            raise OutputError(f"{option} {path}: exists and is not a folder")
        parent = p if p.exists() else p.parent
    else:
        if p.is_dir():
            raise OutputError(f"{option} {path}: is a folder")
        parent = p.parent
    parent = parent if str(parent) else Path(".")
    if not parent.is_dir():
        raise OutputError(f"{option} {path}: folder {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK) or (p.exists() and not p.is_dir() and not os.access(p, os.W_OK)):
        raise OutputError(f"{option} {path}: not writable")


def _write(path: str, text: str) -> None:
    """Write ``text`` to ``path`` (``-``: stdout)."""
    if path == "-":
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        sys.stdout.flush()
        return
    from pathlib import Path

    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as e:
        raise OutputError(f"{path}: {e.strerror or e}") from None
    _err().print(f"wrote {path}", style="dim", markup=False, highlight=False, soft_wrap=True)


def _tables(json_out: Optional[str]) -> Console:
    """Where the tables go: stdout, or stderr when the JSON goes to stdout."""
    return _err() if json_out == "-" else _out()


# --------------------------------------------------------------------------- fitted tables

#: Spare characters a folding column (a reason, an error) needs to be worth showing.
FOLD_MIN = 24


def table_width(widths: list[int]) -> int:
    """The printed width of a ``box.SIMPLE_HEAVY`` table (``pad_edge=False``) whose columns
    are ``widths`` wide: a space at each edge, three between two columns."""
    return sum(widths) + 3 * len(widths) - 1 if widths else 0


def fitted_table(
    title: str,
    columns: list[tuple[str, str, str]],
    rows: list[tuple[list[str], Optional[str]]],
    width: int,
    priority: list[str],
    *,
    wide: bool = False,
    fold: Optional[str] = None,
) -> tuple[Any, list[str]]:
    """A table that fits ``width`` characters: the columns of ``priority`` (most important
    first) are taken while they fit at their natural width, then the ``fold`` column (long
    text, folded) when ``FOLD_MIN`` characters are left; shown in the order of ``columns``
    (``(key, header, justify)``). ``rows`` are (cells in the order of ``columns``, style).
    ``wide``: every column. Returns the table and the keys left out."""
    from rich import box
    from rich.table import Table

    keys = [k for k, _, _ in columns]
    natural = {k: max([len(h), *(len(cells[i]) for cells, _ in rows)]) for i, (k, h, _) in enumerate(columns)}
    if wide:
        chosen = set(keys)
    else:
        chosen = set()
        for k in [*priority, *(k for k in keys if k not in priority and k != fold)]:
            if k in natural and k != fold and table_width([natural[c] for c in chosen | {k}]) <= width:
                chosen.add(k)
        if fold in natural:
            spare = width - table_width([natural[c] for c in chosen]) - 3
            if spare >= min(FOLD_MIN, natural[fold]):
                chosen.add(fold)
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAVY, pad_edge=False)
    shown = [i for i, k in enumerate(keys) if k in chosen]
    for i in shown:
        k, header, justify = columns[i]
        table.add_column(header, justify=justify, overflow="fold", no_wrap=k not in (fold, priority[0]))  # type: ignore[arg-type]
    for cells, style in rows:
        table.add_row(*(cells[i] for i in shown), style=style)
    return table, [k for k in keys if k not in chosen]


def left_out_line(left_out: list[str], files: str = "--csv/--json") -> Optional[str]:
    """The line under a fitted table naming the columns it left out (None: none)."""
    if not left_out:
        return None
    return f"not shown (terminal too narrow): {', '.join(left_out)} — --wide shows every column, {files} write them"
