"""The front ends' view of the core's registry (``o1sim.presets()``): the scheduling policies
in display order with each one's label, chart colour and summary, and the other names a
scenario may use (routers, arrival, length and event kinds).

The core defines each of them once (``crates/sim-core/src/policy.rs``, ``registry.rs``),
the same lists its scenario parser accepts; the CLI, the dashboard and (through the WASM
module's ``presets()``) the page read them, so a policy is drawn in the same colour by the
dashboard (Altair), the report and the page (uPlot), and no front end keeps a list of its
own (``tests/test_registry.py`` fails when one does).

Read from the extension with the standard library only (no pandas, no numpy): importing this
module costs the CLI's start-up a fraction of a millisecond.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any, TypedDict

from . import _core


class PolicyInfo(TypedDict):
    """One policy's entry: ``name`` (as in ``scheduler.policy``), ``label`` (for people),
    ``color`` (``#rrggbb``, every chart), ``needs_topology`` (only with a ``topology``),
    ``summary`` (one line)."""

    name: str
    label: str
    color: str
    needs_topology: bool
    summary: str


class EventKind(TypedDict):
    """One topology event kind: ``name`` (the event's ``kind``), ``label`` (for people),
    ``target`` (``"link"``: the event names ``src`` and ``dst``; ``"gpu"``: ``node``)."""

    name: str
    label: str
    target: str


@lru_cache(maxsize=1)
def _presets() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(_core.presets_json())
    return data


def chart_style() -> dict[str, Any]:
    """The charts' conventions besides the policies' colours (the core's ``chart_style``:
    CDF axes and units, the palettes for other names and replicas, the heatmap ramp, step
    kinds' colours); :mod:`o1sim.chart_style` names them."""
    style: dict[str, Any] = json.loads(json.dumps(_presets()["chart_style"]))  # a copy
    return style


def policies() -> list[PolicyInfo]:
    """Every policy, in display order (copies: callers may change them)."""
    return [
        PolicyInfo(name=str(p["name"]), label=str(p["label"]), color=str(p["color"]),
                   needs_topology=bool(p["needs_topology"]), summary=str(p["summary"]))
        for p in _presets()["policy_info"]
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


def policy_labels() -> dict[str, str]:
    """``{name: label}``: each policy's name for people."""
    return {p["name"]: p["label"] for p in policies()}


def routers() -> list[str]:
    """The values of ``deployment.router``."""
    return [str(r) for r in _presets()["routers"]]


def arrival_kinds() -> list[str]:
    """The values of ``workload.arrival.kind``."""
    return [str(k) for k in _presets()["arrival_kinds"]]


def length_kinds() -> list[str]:
    """The values of ``workload.prompt.kind`` / ``workload.output.kind``."""
    return [str(k) for k in _presets()["length_kinds"]]


def event_kinds() -> list[EventKind]:
    """The topology event kinds (``events[i].kind``), in display order."""
    return [EventKind(name=str(e["name"]), label=str(e["label"]), target=str(e["target"]))
            for e in _presets()["event_kinds"]]
