"""The command line's input/output plumbing: the terminal (its width, whether it takes
colour), one-line messages, the one-red-line error contract (``SimError``, usage errors,
unwritable outputs, unexpected errors), output paths checked before a run, and writing
results (``-`` is stdout). Kept apart from the commands (:mod:`o1sim.cli`), which use it.

The standard library only, at import and for every one-line message: rich (about 50 ms to
import here) loads only when a command draws one of its tables (``_out``, ``_err``) or a
progress bar, so ``o1sim --help``, a small run and an error stay fast (``benchmarks/cli.py``).
"""

from __future__ import annotations

import os
import sys

from .errors import SimError

TYPE_CHECKING = False
if TYPE_CHECKING:  # (typing itself costs the start-up ~5 ms: not imported at run time)
    from typing import Any, Callable, Optional, TextIO

    from rich.console import Console


def _out() -> Console:
    """rich's console on stdout, for the tables rich draws (built per call, so a test that
    swaps ``sys.stdout`` sees the output)."""
    from rich.console import Console

    return Console()


def _err() -> Console:
    from rich.console import Console

    return Console(stderr=True)


def terminal_width() -> int:
    """The width rich gives its console: ``$COLUMNS`` when it is a number, else the size of
    the first of stdin, stdout and stderr that is a terminal, else 80."""
    columns = os.environ.get("COLUMNS")
    if columns is not None and columns.isdigit():
        return int(columns)
    for fd in (0, 1, 2):
        try:
            return os.get_terminal_size(fd).columns or 80
        except (AttributeError, ValueError, OSError):
            continue
    return 80


#: SGR codes of the styles the command line uses (rich's, for the same look).
_SGR = {"bold": "1", "dim": "2", "italic": "3", "red": "31", "green": "32", "yellow": "33"}
_COLOURS = ("red", "green", "yellow")


def _styled(text: str, style: Optional[str], stream: TextIO) -> str:
    """``text`` in ``style`` (``"bold red"``) when ``stream`` is a terminal that takes styles,
    as rich decides it: a terminal, or ``FORCE_COLOR`` set; never ``TERM=dumb``; colours
    dropped under ``NO_COLOR``. Otherwise the text as it is."""
    if not style:
        return text
    env = os.environ
    isatty = getattr(stream, "isatty", None)
    terminal = bool(env.get("FORCE_COLOR")) or (isatty is not None and isatty())
    if not terminal or env.get("TERM", "").lower() in ("dumb", "unknown"):
        return text
    words = [w for w in style.split() if w in _SGR and not (w in _COLOURS and "NO_COLOR" in env)]
    return f"\x1b[{';'.join(_SGR[w] for w in words)}m{text}\x1b[0m" if words else text


def _echo(text: str, style: Optional[str] = None, *, err: bool = False) -> None:
    """One message line as written (no markup, no wrapping: a path or an error stays whole),
    on stdout or stderr, in ``style`` on a terminal."""
    stream = sys.stderr if err else sys.stdout
    stream.write(_styled(text, style, stream) + "\n")
    stream.flush()


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _fail(exc: BaseException, kind: Optional[str] = None) -> None:
    _echo(_one_line(f"{kind or type(exc).__name__}: {exc}"), "bold red", err=True)


class OutputError(Exception):
    """An output path that cannot be written."""


class UsageError(Exception):
    """A bad option or argument, found by the parser or by a command: printed as one
    ``UsageError: …`` line with where to read the command's options, exit status 2."""

    def __init__(self, message: str, option: Optional[str] = None) -> None:
        """``option``: the option or argument at fault (``--set``), named as click named it:
        ``Invalid value for '--set': <message>``."""
        super().__init__(f"Invalid value for '{option}': {message}" if option else message)


def run_command(name: Optional[str], command: Callable[..., Optional[int]], kwargs: dict[str, Any]) -> int:
    """Run a command's function and return the exit status: a ``SimError`` (and any other
    error) is one red line on stderr and status 2; ``O1SIM_DEBUG=1`` shows an unexpected
    error's traceback instead."""
    try:
        return command(**kwargs) or 0
    except UsageError as e:
        usage_error(e, name)
    except (SimError, OutputError) as e:
        _fail(e)
    except OSError as e:
        _fail(e, "OSError")
    except KeyboardInterrupt:
        sys.stderr.write("\n")
        _echo("aborted", "bold red", err=True)
        return 1
    except Exception as e:  # a bug: still one line unless debugging
        if os.environ.get("O1SIM_DEBUG"):
            raise
        _fail(e, f"InternalError ({type(e).__name__})")
    return 2


def usage_error(e: BaseException, command: Optional[str]) -> None:
    """``UsageError: <message> (see: o1sim <command> --help)``, one red line."""
    hint = f" (see: o1sim {command} --help)" if command else " (see: o1sim --help)"
    _echo(_one_line(f"UsageError: {e}{hint}"), "bold red", err=True)


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
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        raise OutputError(f"{path}: {e.strerror or e}") from None
    _echo(f"wrote {path}", "dim", err=True)


def _tables(json_out: Optional[str]) -> Console:
    """Where rich's tables go: stdout, or stderr when the JSON goes to stdout."""
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
