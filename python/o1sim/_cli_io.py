"""The command line's input/output plumbing: consoles, the one-red-line error contract
(``SimError``, usage errors, unwritable outputs, unexpected errors), output paths checked
before a run, and writing results (``-`` is stdout). Kept apart from the commands
(:mod:`o1sim.cli`), which use it."""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional, TypeVar

import click

from .errors import SimError

if TYPE_CHECKING:  # rich loads only when something is printed (`o1sim --help` stays fast)
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
        Path(path).write_text(text, encoding="utf-8")
    except OSError as e:
        raise OutputError(f"{path}: {e.strerror or e}") from None
    _err().print(f"wrote {path}", style="dim", markup=False, highlight=False, soft_wrap=True)


def _tables(json_out: Optional[str]) -> Console:
    """Where the tables go: stdout, or stderr when the JSON goes to stdout."""
    return _err() if json_out == "-" else _out()
