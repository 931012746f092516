"""The command line's parser and shared arguments: argparse (the standard library's, which
costs the start-up a few milliseconds where click cost 50) shaped like the click command
line it replaced (``Usage:``, ``Options:``, ``[default: …]``, a parse error as one
``UsageError`` line), the scenario argument, ``--seed``, ``--set`` (TOML values) and
``--trace``, the option types (an existing file, a number in a range), loading a scenario
with its overrides, the delayed progress bar and where the page lives. Used by
:mod:`o1sim.cli`, :mod:`o1sim.cli_search` and the seed report, so none of them imports
another's commands (no import circle)."""

from __future__ import annotations

import argparse
import os
import sys
import time

from ._cli_io import UsageError, _err, terminal_width

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path
    from typing import Any, Callable, NoReturn, Optional, TypeVar

    from rich.progress import Progress

    from .api import Scenario

    F = TypeVar("F", bound=Callable[..., Any])


def help_width() -> int:
    """The width help is wrapped to: the terminal's, at most 80 columns (click's), less 2."""
    return max(min(terminal_width(), 80) - 2, 40)


class HelpFormatter(argparse.HelpFormatter):
    """Help as click wrote it: ``Usage:``, paragraphs kept apart and each wrapped to the
    terminal (80 columns at most), options' help from column 32. The width is given, so
    argparse does not ask shutil (whose import loads the compression modules)."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=32, width=help_width())

    def add_usage(self, usage: Optional[str], actions: Any, groups: Any, prefix: Optional[str] = None) -> None:
        super().add_usage(usage, actions, groups, "Usage: " if prefix is None else prefix)

    def _split_lines(self, text: str, width: int) -> list[str]:
        import textwrap

        # A long value (a default list of columns, a path) moves to a line of its own whole.
        return textwrap.wrap(" ".join(text.split()), width, break_long_words=False, break_on_hyphens=False)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        import textwrap

        paragraphs = [" ".join(p.split()) for p in textwrap.dedent(text).split("\n\n") if p.strip()]
        return "\n\n".join(textwrap.fill(p, width, initial_indent=indent, subsequent_indent=indent) for p in paragraphs)


class Parser(argparse.ArgumentParser):
    """One command's parser: its arguments under ``Arguments:``, its options under
    ``Options:``; a parse error raises :class:`UsageError` (one red line, exit status 2),
    never argparse's usage screen."""

    def __init__(self, prog: str, description: Optional[str], usage: Optional[str] = None) -> None:
        super().__init__(prog=prog, usage=usage, description=description, formatter_class=HelpFormatter,
                         add_help=False, allow_abbrev=False)
        self._arguments = self.add_argument_group("Arguments")
        self._options = self.add_argument_group("Options")
        self._usage = ["%(prog)s", "[OPTIONS]"]  # click's usage line: the options, then the arguments

    def argument(self, name: str, *, help: Optional[str] = None, **kwargs: Any) -> None:
        """A positional argument (``SCENARIO``)."""
        self._arguments.add_argument(name, help=_escape(help), **kwargs)
        metavar = kwargs.get("metavar", name.upper())
        nargs = kwargs.get("nargs")
        if help is not argparse.SUPPRESS:
            self._usage.append(f"[{metavar}]" if nargs == "?" else f"{metavar}..." if nargs == "+" else metavar)

    def option(self, *flags: str, help: Optional[str] = None, show_default: bool = False, **kwargs: Any) -> None:
        """An option; ``show_default`` adds ``[default: …]`` to its help, as click did."""
        text = _escape(help) or ""
        if show_default:
            text += f"  [default: {_escape(str(kwargs.get('default')))}]"
        self._options.add_argument(*flags, help=text or None, **kwargs)

    def flag(self, *flags: str, help: str, dest: Optional[str] = None) -> None:
        """An option that takes no value (``--wide``)."""
        self._options.add_argument(*flags, action="store_true", dest=dest, help=_escape(help))  # dest None: from the flag

    def parse(self, args: Sequence[str], *, intermixed: bool = True) -> dict[str, Any]:
        """The arguments by destination (options and arguments in any order, as click took
        them; ``intermixed=False`` for a parser whose last argument takes the rest); ``-h``
        and ``--help`` print the help and exit 0."""
        self._options.add_argument("-h", "--help", action="help", help="Show this message and exit.")
        if self.usage is None:
            self.usage = " ".join(self._usage)
        return vars(self.parse_intermixed_args(args) if intermixed else self.parse_args(args))

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _escape(text: Optional[str]) -> Optional[str]:
    """argparse formats help with ``%``: a literal one is doubled."""
    return None if text is None else text.replace("%", "%%")


#: Every command: its name → (its function, the functions that add its arguments). The
#: function's docstring is the command's help, its first sentence the line ``o1sim --help``
#: lists; it is called with the parsed arguments as keywords and returns the exit status
#: (``None``: 0).
COMMANDS: dict[str, tuple[Callable[..., Optional[int]], tuple[Callable[[Parser], None], ...]]] = {}


def command(name: str, *arguments: Callable[[Parser], None]) -> Callable[[F], F]:
    """Register the decorated function as the command ``name``, its arguments added by
    ``arguments`` in turn (only when the command runs: the other commands' are never built)."""

    def register(func: F) -> F:
        COMMANDS[name] = (func, arguments)
        return func

    return register


# --------------------------------------------------------------------------- option types


def existing_file(text: str) -> str:
    """An argument naming a file that exists (not a folder)."""
    if not os.path.exists(text):
        raise argparse.ArgumentTypeError(f"file {text!r} does not exist")
    if os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"file {text!r} is a folder")
    return text


def not_a_folder(text: str) -> str:
    """A file argument that need not exist, but is not a folder when it does."""
    if os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"file {text!r} is a folder")
    return text


def not_a_file(text: str) -> str:
    """A folder argument that need not exist, but is not a file when it does."""
    if os.path.exists(text) and not os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"folder {text!r} is a file")
    return text


def existing_path(text: str) -> str:
    """An argument naming a file or folder that exists."""
    if not os.path.exists(text):
        raise argparse.ArgumentTypeError(f"path {text!r} does not exist")
    return text


def int_range(lo: Optional[int] = None, hi: Optional[int] = None) -> Any:
    """An integer option within ``[lo, hi]`` (either end open when ``None``)."""

    def integer(text: str) -> int:
        value = int(text)
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            raise argparse.ArgumentTypeError(f"{value} is not in the range {_range(lo, hi)}")
        return value

    return integer


def positive_float(text: str) -> float:
    """A number above 0 (``--max-seconds``)."""
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text} is not in the range x>0")
    return value


def _range(lo: Optional[int], hi: Optional[int]) -> str:
    if lo is not None and hi is not None:
        return f"{lo}<=x<={hi}"
    return f"x>={lo}" if lo is not None else f"x<={hi}"


# --------------------------------------------------------------------------- shared arguments


def scenario_arg(p: Parser) -> None:
    p.argument("scenario", nargs="?", type=existing_file, metavar="SCENARIO",
               help="A .toml or .json scenario file (default: the built-in default scenario).")


def seed_opt(p: Parser) -> None:
    p.option("--seed", type=int, default=None, metavar="INTEGER", help="Override the scenario's seed.")


def set_opt(p: Parser) -> None:
    p.option("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
             help="Override a field by dotted path, e.g. --set scheduler.block_size=32 (repeatable).")


def trace_opts(p: Parser) -> None:
    """``--trace FILE`` and ``--trace-format FORMAT``: replay a trace instead of the scenario's workload."""
    from . import _core

    p.option("--trace", type=existing_file, default=None, metavar="FILE",
             help="Replay this trace file as the workload (Azure, Mooncake, Vidur, BLIS, inference-perf, vLLM, CSV/JSONL).")
    p.option("--trace-format", choices=_core.trace_formats(), default=None,
             help="The trace's format (default: detected from its first line).")


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
    from .api import Scenario

    sc = Scenario.from_file(scenario) if scenario else Scenario.default()
    overrides: dict[str, Any] = {}
    if trace is not None:
        # The trace replaces the scenario's workload; --set workload.trace.* refines it.
        overrides["workload"] = {"trace": {"path": os.path.realpath(trace), "format": trace_format or "auto"}}
    elif trace_format is not None:
        raise UsageError("needs --trace FILE", "--trace-format")
    for item in sets:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"expected KEY=VALUE, got {item!r}", "--set")
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


def web_dir() -> Path:
    """The page's folder: ``web/`` of the source tree (editable install) or $O1SIM_WEB_DIR."""
    from pathlib import Path

    env = os.environ.get("O1SIM_WEB_DIR")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "web"
