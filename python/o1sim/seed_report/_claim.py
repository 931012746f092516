"""A claim of the seed and its verdict (shared by the experiments and the renderers)."""

from __future__ import annotations

from dataclasses import dataclass, field

REPRODUCED = "reproduced"
REFUTED = "refuted"
NOT_REPRODUCIBLE = "not reproducible"
VERDICTS = (REPRODUCED, REFUTED, NOT_REPRODUCIBLE)


@dataclass
class Claim:
    """One numeric claim of the seed and what the simulator shows about it."""

    section: str
    title: str
    claim: str
    setup: str
    table: list[list[str]] = field(default_factory=list)
    verdict: str = NOT_REPRODUCIBLE
    why: str = ""
    seconds: float = 0.0


def f(x: float, digits: int = 1) -> str:
    """`x` with thousands separators and `digits` decimals."""
    return f"{x:,.{digits}f}"


def pct(x: float, digits: int = 1) -> str:
    """`x` (a fraction) as a percentage."""
    return f"{100.0 * x:,.{digits}f}%"
