"""The front ends' registry of scheduling policies: one list, read by the CLI, the dashboard
and (as ``web/pkg/registry.json``, copied by ``make web``) the page.

The core decides which policies exist (``o1sim.presets()``: ``policies`` and
``topology_policies``); this file adds what only a front end needs, each defined once: the
display order, a label and a chart colour, so that a policy is drawn in the same colour by
the dashboard (Altair), the report and the page (uPlot). ``tests/test_registry.py`` fails
when a name here and the core's list differ, or when a front end keeps a list of its own.

Plain JSON read with the standard library: importing this module costs the CLI's start-up
nothing measurable.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any, TypedDict


class PolicyInfo(TypedDict):
    """One policy's entry: ``name`` (as in ``scheduler.policy``), ``label`` (for people),
    ``color`` (``#rrggbb``, every chart), ``needs_topology`` (only with a ``topology``),
    ``summary`` (one line)."""

    name: str
    label: str
    color: str
    needs_topology: bool
    summary: str


@lru_cache(maxsize=1)
def _registry() -> dict[str, Any]:
    text = resources.files(__package__).joinpath("registry.json").read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def policies() -> list[PolicyInfo]:
    """Every policy, in display order (copies: callers may change them)."""
    return [
        PolicyInfo(name=str(p["name"]), label=str(p["label"]), color=str(p["color"]),
                   needs_topology=bool(p["needs_topology"]), summary=str(p["summary"]))
        for p in _registry()["policies"]
    ]


def policy_names() -> list[str]:
    """Every policy's name, in display order (``disagg`` last: it needs a topology)."""
    return [p["name"] for p in policies()]


def default_policies() -> list[str]:
    """The policies compared by default (``o1sim compare``, the dashboard, the page): every
    one that runs without a topology."""
    return [p["name"] for p in policies() if not p["needs_topology"]]


def policy_colors() -> dict[str, str]:
    """``{name: "#rrggbb"}``: the colour each policy has in every chart."""
    return {p["name"]: p["color"] for p in policies()}
