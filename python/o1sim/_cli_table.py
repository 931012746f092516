"""A run's summary tables, drawn without importing rich when they fit the terminal.

rich costs the command line about 50 ms to import here, more than a small ``o1sim run`` may
take in all (``benchmarks/cli.py``). The summary's tables are plain grids of short cells, so
:func:`show` draws them itself, character for character as rich draws its default table
(``box.HEAVY_HEAD``, a left-justified title as wide as the table), whenever every line fits
the terminal on one line and every character is one a terminal shows one cell wide; any
other table (a cell that would have to wrap, a title wider than the table, a wide or
combining character) goes to rich, which wraps it. ``tests/test_cli_startup.py`` holds
the two to the same output.
"""

from __future__ import annotations

import sys

from ._cli_io import _err, _out, _styled, terminal_width

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

    from rich.table import Table as RichTable

#: Characters besides printable ASCII that the summary writes, each one cell wide.
_NARROW = frozenset("·—→…±µ✓×")


def _plain(text: str) -> bool:
    """Whether ``text`` is as many cells wide on a terminal as it has characters."""
    return all(" " <= ch <= "~" or ch in _NARROW for ch in text)


class Table:
    """A titled grid of text cells (each column left- or right-justified, optionally bold),
    with or without a header row."""

    def __init__(self, title: str, *, header: bool = True) -> None:
        self.title = title
        self.header = header
        self.columns: list[tuple[str, bool, bool]] = []  # (heading, right-justified, bold)
        self.rows: list[tuple[str, ...]] = []

    def column(self, heading: str, *, right: bool = False, bold: bool = False) -> None:
        self.columns.append((heading, right, bold))

    def row(self, *cells: str) -> None:
        if len(cells) != len(self.columns):
            raise ValueError(f"a row of {len(cells)} cells in a table of {len(self.columns)} columns")
        self.rows.append(cells)

    def widths(self) -> list[int]:
        """Each column's width: its widest cell (and heading, when shown)."""
        lines = [*([tuple(h for h, _, _ in self.columns)] if self.header else []), *self.rows]
        return [max([len(line[i]) for line in lines], default=0) for i in range(len(self.columns))]

    def lines(self, width: int, encoding: str = "utf-8", stream: Optional[object] = None) -> Optional[list[str]]:
        """The table drawn in at most ``width`` characters as rich draws it, or ``None`` when
        rich must draw it (it would wrap, it holds characters rich measures otherwise, it has
        no line to measure, or the output cannot encode box characters, for which rich
        substitutes ASCII)."""
        widths = self.widths()
        total = sum(widths) + 3 * len(widths) + 1
        texts = [self.title, *(h for h, _, _ in self.columns), *(c for row in self.rows for c in row)]
        if (not self.columns or not (self.rows or self.header) or total > width or len(self.title) > total or not all(map(_plain, texts))
                or not encoding.lower().startswith("utf")):
            return None

        def style(text: str, name: Optional[str]) -> str:
            return _styled(text, name, stream) if stream is not None else text  # type: ignore[arg-type]

        def line(cells: tuple[str, ...], bar: str, heading: bool = False) -> str:
            parts = []
            for cell, w, (_, right, bold) in zip(cells, widths, self.columns):
                text = f" {cell.rstrip().rjust(w) if right else cell.ljust(w)} "  # rich drops a right-justified cell's trailing blanks
                parts.append(style(text, "bold" if bold or heading else None))
            return bar + bar.join(parts) + bar

        def rule(left: str, mid: str, right: str, fill: str) -> str:
            return left + mid.join(fill * (w + 2) for w in widths) + right

        out = [style(self.title.ljust(total), "italic")] if self.title else []
        if self.header:
            out += [rule("┏", "┳", "┓", "━"), line(tuple(h for h, _, _ in self.columns), "┃", heading=True),
                    rule("┡", "╇", "┩", "━")]
        else:
            out.append(rule("┌", "┬", "┐", "─"))
        out += [line(row, "│") for row in self.rows]
        out.append(rule("└", "┴", "┘", "─"))
        return out

    def to_rich(self) -> RichTable:
        """The same table as a rich ``Table`` (cells as text: no markup, no emoji codes)."""
        from rich.table import Table as RichTable
        from rich.text import Text

        table = RichTable(title=Text(self.title, style="table.title"), show_header=self.header, title_justify="left")
        for heading, right, bold in self.columns:
            table.add_column(heading, justify="right" if right else "left", style="bold" if bold else None)
        for row in self.rows:
            table.add_row(*(Text(c) for c in row))
        return table


def show(table: Table, *, err: bool = False) -> None:
    """Print ``table`` on stdout (``err``: stderr): drawn here when it fits, else by rich."""
    stream = sys.stderr if err else sys.stdout
    lines = table.lines(terminal_width(), getattr(stream, "encoding", None) or "utf-8", stream)
    if lines is None:
        (_err() if err else _out()).print(table.to_rich())
        return
    stream.write("\n".join(lines) + "\n")
    stream.flush()
