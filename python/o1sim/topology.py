"""Topologies as data: a builder, route queries, and file resolution for scenarios.

A topology is what a scenario's ``topology`` entry holds: a preset name (see
:func:`topology_presets`) or a table ``{"preset"?, "nodes": [...], "links": [...],
"routing"?}``. Nodes are ``{"id", "kind": "gpu"|"nvswitch"|"host"|"nic"|"switch", "gpu"?}``;
links are full duplex ``{"src", "dst", "kind": "nvlink"|"nvswitch"|"pcie"|"ib"|"eth",
"bandwidth_gbps" (GB/s per direction), "latency_us"}``. The core validates everything.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Optional, Union

from . import _core
from ._input import jsonable
from .errors import config_error

if TYPE_CHECKING:
    from pathlib import Path  # (loaded when a topology file is read)

    import networkx

__all__ = ["Topology", "TopologyLike", "routes", "topology_presets", "resolve_topology"]

TopologyLike = Union["Topology", Mapping[str, Any], str]


class Topology:
    """Builder for a topology table.

    >>> t = Topology(preset="hgx-h200")              # start from a preset (optional)
    >>> t.add_gpu("gpu8", gpu="h200").add_switch("eth0")
    >>> t.link("gpu8", "eth0", kind="eth", bandwidth_gbps=25, latency_us=5)
    """

    def __init__(self, preset: Optional[str] = None) -> None:
        self.preset = preset
        self.nodes: list[dict[str, Any]] = []
        self.links: list[dict[str, Any]] = []
        self.routing: dict[str, Any] = {}

    def add_gpu(self, id: str, gpu: Optional[str] = None) -> Topology:
        """Add a GPU node (``gpu``: a catalog GPU name, informational)."""
        node: dict[str, Any] = {"id": id, "kind": "gpu"}
        if gpu is not None:
            node["gpu"] = gpu
        self.nodes.append(node)
        return self

    def add_switch(self, id: str, kind: str = "switch") -> Topology:
        """Add a non-GPU node: ``switch`` (network), ``nvswitch``, ``nic`` or ``host``."""
        self.nodes.append({"id": id, "kind": kind})
        return self

    def link(self, src: str, dst: str, *, kind: str = "nvlink", bandwidth_gbps: float, latency_us: float) -> Topology:
        """Add a full-duplex link (bandwidth in GB/s per direction, latency in µs). A link
        between two nodes of the preset replaces the preset's link."""
        self.links.append(
            {"src": src, "dst": dst, "kind": kind, "bandwidth_gbps": bandwidth_gbps, "latency_us": latency_us}
        )
        return self

    def to_dict(self) -> dict[str, Any]:
        """The table form, as a scenario's ``topology`` entry."""
        d: dict[str, Any] = {}
        if self.preset is not None:
            d["preset"] = self.preset
        d["nodes"] = [dict(n) for n in self.nodes]
        d["links"] = [dict(x) for x in self.links]
        if self.routing:
            d["routing"] = dict(self.routing)
        return d

    def resolved(self) -> dict[str, Any]:
        """Validated by the core and expanded (preset nodes and links included)."""
        return expand(self)

    def to_networkx(self) -> networkx.Graph:
        """The expanded topology as a ``networkx.Graph`` (needs ``pip install networkx``):
        node attribute ``kind`` (and ``gpu``), edge attributes ``kind``, ``bandwidth_gbps``,
        ``latency_us``."""
        try:
            import networkx as nx
        except ImportError as e:  # pragma: no cover - depends on the environment
            raise ImportError("Topology.to_networkx() needs networkx: pip install networkx") from e
        full = expand(self)
        g = nx.Graph()
        for n in full["nodes"]:
            g.add_node(n["id"], **{k: v for k, v in n.items() if k != "id"})
        for x in full["links"]:
            g.add_edge(x["src"], x["dst"], **{k: v for k, v in x.items() if k not in ("src", "dst")})
        return g

    def __repr__(self) -> str:
        return f"Topology(preset={self.preset!r}, nodes={len(self.nodes)}, links={len(self.links)})"


def _as_entry(topology: TopologyLike) -> Union[str, dict[str, Any]]:
    if isinstance(topology, Topology):
        return topology.to_dict()
    if isinstance(topology, str):
        if _looks_like_path(topology):
            return load_topology_file(topology)
        return topology
    if isinstance(topology, Mapping):
        return dict(topology)
    raise config_error("topology", f"a topology is a preset name, a table or a Topology, not {type(topology).__name__}")


def _entry_json(topology: TopologyLike) -> str:
    """The topology entry as JSON for the core (NaN, ±inf, deep nesting and odd types refused
    as ``ConfigError`` naming ``topology``)."""
    return json.dumps(jsonable(_as_entry(topology), "topology"), allow_nan=False)


def expand(topology: TopologyLike) -> dict[str, Any]:
    """Validate a topology with the core and return its full table."""
    full: dict[str, Any] = json.loads(_core.topology_json(_entry_json(topology)))
    return full


def routes(
    topology: TopologyLike, src: str, dst: str, down: Optional[Iterable[Sequence[str]]] = None
) -> list[dict[str, Any]]:
    """RTMPv2 candidate paths between two nodes, shortest latency first: each
    ``{"path", "bandwidth_gbps", "latency_us", "score", "chosen", "frontier"}`` (the chosen
    route has the best score; ``frontier`` marks the (bandwidth, latency) Pareto frontier).

    ``down``: links that are down, as ``(a, b)`` node-id pairs (either order). They go down
    in that order, as ``link_down`` events at t = 0 do in a simulation: the pair is routed on
    the full topology, then re-routed after each (a surviving route is kept unless beaten by
    more than the 3% hysteresis). Candidates never use a down link; when the links cut the
    pair off the list is empty. A pair that is not a link (or names an unknown node) raises
    ``ConfigError`` with ``.field`` ``down[i]``."""
    pairs = "[]" if down is None else json.dumps([list(p) if isinstance(p, (tuple, list)) else p for p in down], default=str)
    out: list[dict[str, Any]] = json.loads(_core.routes_json(_entry_json(topology), src, dst, pairs))
    return out


def topology_presets() -> list[str]:
    """Names of the shipped topologies; ``{N}x-hgx-{h100|h200|h800|b200}-ib`` also works (N ≤ 64, h200 ≤ 512)."""
    return _core.topology_presets()


def _looks_like_path(s: str) -> bool:
    return s.lower().endswith((".toml", ".json")) or os.sep in s or "/" in s


def load_topology_file(path: Union[str, os.PathLike[str]], base: Optional[Path] = None) -> dict[str, Any]:
    """Read a topology table from a ``.toml`` or ``.json`` file (relative to ``base``)."""
    from pathlib import Path

    p = Path(path)
    if base is not None and not p.is_absolute():
        p = base / p
    if not p.exists():
        raise config_error("topology", f"topology file not found: {p}")
    from ._input import loads, read_text

    fmt = "toml" if p.suffix.lower() == ".toml" else "json"
    data: Any = loads(read_text(p, "topology"), fmt, str(p), "topology")
    if isinstance(data, dict) and "topology" in data and isinstance(data["topology"], (dict, str)):
        data = data["topology"]  # a file may hold `[topology]` itself
    return data  # type: ignore[no-any-return]


def resolve_topology(data: dict[str, Any], base: Optional[Path] = None) -> bool:
    """Inline a scenario's ``topology`` file path (the core reads no files). Returns
    whether anything changed."""
    t = data.get("topology")
    if isinstance(t, Topology):
        data["topology"] = t.to_dict()
        return True
    if isinstance(t, (str, os.PathLike)) and (isinstance(t, os.PathLike) or _looks_like_path(t)):
        data["topology"] = load_topology_file(t, base)
        return True
    return False
