"""A generated block written between its markers in a document, ``<!-- NAME: ... -->`` and
``<!-- /NAME -->`` (``tests/benchkit.generated_table`` reads it back for the tests that hold
a document to its script)."""

from __future__ import annotations

import re
from pathlib import Path


def command_block(command: str, output: str) -> str:
    """A fenced text block showing ``command`` and what it printed."""
    return f"```text\n$ {command}\n{output}\n```"


def write_block(path: Path, marker: str, block: str) -> None:
    """Replace what stands between ``marker``'s two comments in ``path`` with ``block``; exits
    with a message when the document does not have them exactly once."""
    doc = path.read_text(encoding="utf-8")
    name = re.escape(marker)
    new, n = re.subn(
        rf"(<!-- {name}:[^\n]*-->\n)(?:.*?\n)?(<!-- /{name} -->)",
        lambda m: m.group(1) + block + "\n" + m.group(2),
        doc,
        flags=re.S,
    )
    if n != 1:
        raise SystemExit(f"{path} has no {marker} markers")
    path.write_text(new, encoding="utf-8")
