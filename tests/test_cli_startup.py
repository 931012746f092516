"""What the command line's start-up speed rests on (`benchmarks/cli.py` times it): `o1sim
--help` and a small `o1sim run` load neither click nor rich nor the table libraries, and a
run's summary, drawn without rich when it fits the terminal, is the table rich draws."""

from __future__ import annotations

import ast
import io
import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

from o1sim._cli_io import _styled
from o1sim._cli_table import Table

from clikit import invoke

#: What `main` leaves loaded, printed by the child.
_LOADED = """
import sys
from o1sim.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as e:  # --help
    code = e.code or 0
print("\\nLOADED", sorted(m for m in {mods!r} if m in sys.modules), code)
"""


def _loaded(args: list[str], mods: tuple[str, ...]) -> list[str]:
    out = subprocess.run([sys.executable, "-c", _LOADED.format(mods=mods), *args], capture_output=True, text=True,
                         check=True, env={**os.environ, "COLUMNS": "80"}).stdout
    line = out.strip().splitlines()[-1].split(" ", 1)[1]
    loaded, code = line.rsplit(" ", 1)
    assert code == "0", out
    return list(ast.literal_eval(loaded))


def test_help_loads_no_library_a_command_needs() -> None:
    heavy = ("click", "rich", "numpy", "pandas", "json", "pathlib", "typing", "decimal", "o1sim.api", "o1sim.registry")
    assert _loaded(["--help"], heavy) == []


def test_a_small_run_loads_neither_click_nor_rich() -> None:
    # The summary fits 80 columns: drawn without rich (numpy and pandas load for a result's tables only).
    assert _loaded(["run", "--set", "workload.num_requests=20"], ("click", "rich", "numpy", "pandas", "pathlib")) == []


def test_a_summary_too_wide_for_the_terminal_is_wrapped_by_rich() -> None:
    narrow = invoke(["run", "--set", "workload.num_requests=20"], width=32)
    assert narrow.exit_code == 0, narrow.output
    lines = narrow.stdout.splitlines()
    assert max(len(ln) for ln in lines) <= 32
    assert "Requests" in narrow.stdout and "latency" in narrow.stdout
    wide = invoke(["run", "--set", "workload.num_requests=20"], width=80).stdout
    assert max(len(ln) for ln in wide.splitlines()) > 32  # the same run, one line a row


def _rich(table: Table, width: int) -> str:
    buf = io.StringIO()
    Console(file=buf, width=width).print(table.to_rich())
    return buf.getvalue()


#: Characters a summary holds, and some it may (a path's), which rich measures otherwise.
TEXT = st.text(st.sampled_from(list("abcXYZ019 ,.%()/-_:|[]") + ["·", "—", "→", "µ", "é", "中", "\u0301", "\t"]),
               max_size=24)


@st.composite
def tables(draw: st.DrawFn) -> Table:
    t = Table(draw(TEXT), header=draw(st.booleans()))
    n = draw(st.integers(1, 5))
    for _ in range(n):
        t.column(draw(TEXT), right=draw(st.booleans()), bold=draw(st.booleans()))
    for _ in range(draw(st.integers(0, 5))):
        t.row(*(draw(TEXT) for _ in range(n)))
    return t


@settings(max_examples=1000, deadline=None, suppress_health_check=list(HealthCheck), database=None, derandomize=True)
@given(table=tables(), width=st.integers(10, 120))
def test_a_table_drawn_without_rich_is_the_one_rich_draws(table: Table, width: int) -> None:
    lines = table.lines(width)
    fits = (sum(table.widths()) + 3 * len(table.columns) + 1 <= width
            and all(" " <= ch <= "~" or ch in "·—→µ" for ch in table.title + "".join(h for h, _, _ in table.columns)
                    + "".join("".join(r) for r in table.rows)))
    if lines is None:
        # Only what rich must wrap or measure: too wide, a title wider than the table, a
        # character that is not one cell wide, nothing to measure the columns by.
        assert (not fits or len(table.title) > sum(table.widths()) + 3 * len(table.columns) + 1
                or not (table.rows or table.header))
    else:
        assert "\n".join(lines) + "\n" == _rich(table, width)


def test_the_summarys_own_tables_are_drawn_without_rich() -> None:
    head = Table("o1sim · examples/default.toml", header=False)
    head.column("metric", bold=True)
    head.column("value", right=True)
    head.row("Requests", "2,000")
    head.row("KV transfer ms mean / p99", "— / —")
    lat = Table("latency")
    lat.column("metric", bold=True)
    for q in ("mean", "p50", "p99"):
        lat.column(q, right=True)
    lat.row("TTFT (ms)", "100.9", "90.0", "217.6")
    for t in (head, lat):
        lines = t.lines(80)
        assert lines is not None
        assert "\n".join(lines) + "\n" == _rich(t, 80)
    narrow = Table("a title wider than the table")
    narrow.column("x")
    assert narrow.lines(80) is None  # rich wraps such a title: it draws the table


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(("env", "tty", "want"), [
    ({}, False, "error"),                                        # a pipe: as written
    ({}, True, "\x1b[1;31merror\x1b[0m"),                        # a terminal: bold red, rich's codes
    ({"NO_COLOR": "1"}, True, "\x1b[1merror\x1b[0m"),            # no colour, still bold
    ({"TERM": "dumb"}, True, "error"),
    ({"FORCE_COLOR": "1"}, False, "\x1b[1;31merror\x1b[0m"),
])
def test_messages_are_styled_as_rich_styles_them(env: dict[str, str], tty: bool, want: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    for k in ("NO_COLOR", "FORCE_COLOR", "TERM"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert _styled("error", "bold red", _Tty() if tty else io.StringIO()) == want
