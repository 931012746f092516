"""The ``o1sim`` command line run in this process, as a shell sees it: its exit status and
what it wrote on stdout and stderr, apart and interleaved (the order a terminal shows).

``invoke(["run", "--seed", "3"])`` calls :func:`o1sim.cli.main` with stdout and stderr
captured (neither is a terminal, as under a pipe); ``width`` sets ``$COLUMNS``, the width
the help and the tables are drawn for, and ``env`` sets other variables for the call.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Optional

from o1sim.cli import main


@dataclass
class Result:
    exit_code: int
    stdout: str
    stderr: str
    #: stdout and stderr interleaved, in the order they were written.
    output: str
    #: An exception that escaped ``main`` (``SystemExit`` aside): a bug, which a user would
    #: see as a traceback.
    exception: Optional[BaseException] = None


class _Capture(io.StringIO):
    """A stream that also copies what it is given to ``both``."""

    def __init__(self, both: io.StringIO) -> None:
        super().__init__()
        self._both = both

    def write(self, text: str) -> int:
        self._both.write(text)
        return super().write(text)


@contextlib.contextmanager
def _environ(values: Mapping[str, Optional[str]]) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in values}
    try:
        for k, v in values.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def invoke(args: Sequence[str], *, width: Optional[int] = None, env: Optional[Mapping[str, Optional[str]]] = None) -> Result:
    """Run ``o1sim ARGS`` in this process; ``env`` values of ``None`` unset a variable."""
    both = io.StringIO()
    out, err = _Capture(both), _Capture(both)
    values = dict(env or {})
    if width is not None:
        values["COLUMNS"] = str(width)
    exception: Optional[BaseException] = None
    with _environ(values), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code: object = main(list(args))
        except SystemExit as e:  # -h, --version
            code = e.code
        except Exception as e:  # noqa: BLE001 - a test reports it
            exception, code = e, 1
    exit_code = code if isinstance(code, int) else (0 if code is None else 1)
    return Result(exit_code, out.getvalue(), err.getvalue(), both.getvalue(), exception)
