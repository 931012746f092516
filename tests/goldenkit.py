"""The golden files' form of a result (`tests/golden/*.json`): the core's compact JSON
re-indented by a purely textual walk, so that a diff shows which value moved while every
number keeps the writer's exact text. The same walk is in `crates/sim-core/tests/golden.rs`
(which writes the files: `make golden`) and `tests/web/parity.test.mjs`."""

from __future__ import annotations

from pathlib import Path

GOLDEN = Path(__file__).parent / "golden"
_CLOSE = {"{": "}", "[": "]"}
_SPACE = " \t\n\r"


def pretty(text: str) -> str:
    """A newline and two spaces per level after ``{``, ``[`` and ``,`` and before ``}``,
    ``]``; a space after ``:``; ``{}`` and ``[]`` kept as they are; whitespace between
    tokens dropped; strings and numbers copied as written; a final newline."""
    out: list[str] = []
    depth, in_string, escaped = 0, False, False
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        i += 1
        if in_string:
            out.append(c)
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
            out.append(c)
        elif c in _CLOSE:
            j = i
            while j < n and text[j] in _SPACE:
                j += 1
            if j < n and text[j] == _CLOSE[c]:
                out.append(c + _CLOSE[c])
                i = j + 1
            else:
                depth += 1
                out.append(c + "\n" + "  " * depth)
        elif c in "}]":
            depth = max(depth - 1, 0)
            out.append("\n" + "  " * depth + c)
        elif c == ",":
            out.append(",\n" + "  " * depth)
        elif c == ":":
            out.append(": ")
        elif c not in _SPACE:
            out.append(c)
    out.append("\n")
    return "".join(out)


def expected(scenario: Path) -> str:
    """The golden text of ``scenario`` (its ``.json`` neighbour), as read from disk."""
    return scenario.with_suffix(".json").read_text(encoding="utf-8")
