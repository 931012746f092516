"""The golden scenarios through the WASM module as the page loads it, in Chromium: the result
JSON of every `tests/golden/*.toml`, re-indented by `goldenkit.pretty` (textually: numbers keep
the writer's text), equals its golden file byte for byte, as it does natively, from Python and
under Node."""

from __future__ import annotations

from typing import Any

from goldenkit import GOLDEN, expected, pretty
from pagekit import wait_ready

CASES = sorted(GOLDEN.glob("*.toml"))


def test_the_page_module_gives_every_golden_byte_for_byte(page: Any, server: str) -> None:
    page.goto(server)
    wait_ready(page)
    got = page.evaluate(
        """async (cases) => {
            const o = await import('./o1sim.js');
            await o.init();
            return Object.fromEntries(Object.entries(cases).map(([name, toml]) => [name, o.simulate(toml, {format: 'toml'})]));
        }""",
        {p.name: p.read_text(encoding="utf-8") for p in CASES},
    )
    assert len(CASES) >= 4 and sorted(got) == [p.name for p in CASES]
    for path in CASES:
        assert pretty(got[path.name]) == expected(path), path.name
