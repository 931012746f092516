"""The Python package's import graph: no circle, and no import from a lower layer to a higher one.

The graph is read from the source with ``ast`` (nothing is imported), counting every import:
at module level, inside functions (the lazy imports that keep start-up fast) and under
``if TYPE_CHECKING:``. A lazy import is still a dependency: a circle held together by one is
a circle. ``o1sim._core`` (the extension, ``_core.pyi``) is a module like the others.

The layers, lowest first; a module may import its own layer or a lower one:

0. the core and what every layer needs: ``_core``, ``errors``, ``registry``
1. reading input and writing output without the API: ``_input``, ``_files`` (what a scenario
   from the wire may not read), ``_memory`` (the memory the process may use), ``_web``, ``workload``,
   ``topology``, ``backends``, and ``exports`` (a leaf: it reads a result through a protocol,
   so ``Result.to_prometheus()`` calls down into it rather than exports calling up into
   ``api`` for the steps, which ``Result.step_records`` owns)
2. ``api`` (scenarios, ``simulate``, ``Result``)
3. what is built on the API: ``sweeps``, ``planning``, ``calibrate``, ``report``, the
   dashboard's charts and scenarios (no Streamlit), ``chart_style``
4. the package facade ``o1sim`` (``__init__``: re-exports the API)
5. front ends: the CLI (``cli``, ``cli_search``, ``_cli_io``, ``_cli_args``, ``_cli_table``,
   ``__main__``), the Streamlit app and its tabs, the seed report (``o1sim seed-report``)

A new module must be given a layer here (the test fails until it is).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "python" / "o1sim"

LAYERS: tuple[tuple[str, ...], ...] = (
    ("o1sim._core", "o1sim.errors", "o1sim.registry"),
    ("o1sim._input", "o1sim._files", "o1sim._memory", "o1sim._web", "o1sim.workload", "o1sim.topology", "o1sim.backends", "o1sim.exports"),
    ("o1sim.api",),
    ("o1sim.sweeps", "o1sim.planning", "o1sim.calibrate", "o1sim.report", "o1sim.chart_style",
     "o1sim.dashboard", "o1sim.dashboard.charts", "o1sim.dashboard.scenarios"),
    ("o1sim",),
    ("o1sim.cli", "o1sim.cli_search", "o1sim._cli_io", "o1sim._cli_args", "o1sim._cli_table", "o1sim.__main__",
     "o1sim.dashboard.app", "o1sim.dashboard.capacity_tab", "o1sim.dashboard.check_tab", "o1sim.dashboard.features",
     "o1sim.seed_report", "o1sim.seed_report._claim", "o1sim.seed_report.mechanisms",
     "o1sim.seed_report.serving"),
)


def modules(package: Path) -> dict[str, Path]:
    """``{dotted name: file}`` of every module of the package (``.py``, and ``.pyi`` stubs of
    extension modules that have no ``.py``)."""
    root = package.parent
    out: dict[str, Path] = {}
    for path in sorted([*package.rglob("*.py"), *package.rglob("*.pyi")]):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        name = ".".join(parts)
        if path.suffix == ".pyi" and name in out:
            continue
        out[name] = path
    return out


def import_graph(package: Path) -> dict[str, set[str]]:
    """Every module's imports of the package's own modules, wherever in the file they are."""
    mods = modules(package)
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        is_pkg = path.stem == "__init__"
        here = name.split(".") if is_pkg else name.split(".")[:-1]
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here[: len(here) - (node.level - 1)] if node.level > 1 else here
                    module = ".".join([*base, *(node.module.split(".") if node.module else [])])
                else:
                    module = node.module or ""
                # `from pkg import sub` imports the submodule `pkg.sub` when there is one.
                targets = [f"{module}.{a.name}" if f"{module}.{a.name}" in mods else module for a in node.names]
            else:
                continue
            for target in targets:
                # `import a.b.c` depends on the longest prefix that is one of our modules.
                parts = target.split(".")
                while parts and ".".join(parts) not in mods:
                    parts.pop()
                if parts and ".".join(parts) != name:
                    found.add(".".join(parts))
        graph[name] = found
    return graph


def find_cycle(graph: Mapping[str, set[str]]) -> list[str]:
    """One import circle as a path (``[a, b, …, a]``), or ``[]`` when there is none."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return []

    for start in sorted(graph):
        if start not in state:
            cycle = visit(start)
            if cycle:
                return cycle
    return []


def upward_imports(graph: Mapping[str, set[str]], layers: tuple[tuple[str, ...], ...]) -> list[str]:
    """Imports from a module to one of a higher layer, as ``"a (layer i) -> b (layer j)"``."""
    layer = {m: i for i, group in enumerate(layers) for m in group}
    return [f"{a} (layer {layer[a]}) -> {b} (layer {layer[b]})"
            for a in sorted(graph) for b in sorted(graph[a]) if layer[b] > layer[a]]


def test_every_module_has_a_layer() -> None:
    named = {m for group in LAYERS for m in group}
    found = set(modules(PACKAGE))
    assert found - named == set(), "give these modules a layer in tests/test_layers.py"
    assert named - found == set(), "these modules no longer exist"
    assert len(named) == sum(len(g) for g in LAYERS), "a module is in two layers"


def test_the_package_has_no_import_circle() -> None:
    graph = import_graph(PACKAGE)
    # The graph sees the lazy imports too (a test of the reader itself).
    assert "o1sim.api" in graph["o1sim.dashboard.charts"]  # under `if TYPE_CHECKING:`
    assert "o1sim.calibrate" in graph["o1sim.cli"]  # inside a command's function
    assert find_cycle(graph) == []


def test_no_import_reaches_up_a_layer() -> None:
    assert upward_imports(import_graph(PACKAGE), LAYERS) == []


def test_exports_is_a_leaf() -> None:
    graph = import_graph(PACKAGE)
    assert graph["o1sim.exports"] <= {"o1sim._core"}
    assert "o1sim.exports" in graph["o1sim.api"]


@pytest.mark.parametrize("lazy", [False, True])
def test_the_checks_find_a_circle_and_an_upward_import(tmp_path: Path, lazy: bool) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "low.py").write_text("def f():\n    from .sub import high\n" if lazy else "from .sub import high\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "high.py").write_text("from .. import low\n")
    graph = import_graph(pkg)
    assert graph["pkg.low"] == {"pkg.sub.high"} and graph["pkg.sub.high"] == {"pkg.low"}
    assert find_cycle(graph) in (["pkg.low", "pkg.sub.high", "pkg.low"], ["pkg.sub.high", "pkg.low", "pkg.sub.high"])
    layers = (("pkg", "pkg.sub", "pkg.low"), ("pkg.sub.high",))
    assert upward_imports(graph, layers) == ["pkg.low (layer 0) -> pkg.sub.high (layer 1)"]


@pytest.mark.parametrize(("low", "high"), [("o1sim.errors", "o1sim.cli"), ("o1sim.workload", "o1sim.api"),
                                           ("o1sim.api", "o1sim.planning")])
def test_a_back_edge_added_to_the_real_package_fails_both_checks(tmp_path: Path, low: str, high: str) -> None:
    """The real package, copied, with one lazy import from a low module up to a module that
    (directly or not) imports it: both checks must fail."""
    import shutil

    copy = tmp_path / "o1sim"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    assert find_cycle(import_graph(copy)) == [] and upward_imports(import_graph(copy), LAYERS) == []
    target = copy / (low.split(".", 1)[1].replace(".", "/") + ".py")
    target.write_text(target.read_text(encoding="utf-8") + f"\n\ndef _back() -> None:\n    import {high}  # noqa\n",
                      encoding="utf-8")
    graph = import_graph(copy)
    assert high in graph[low]
    assert find_cycle(graph) != []
    assert any(line.startswith(f"{low} ") for line in upward_imports(graph, LAYERS))
