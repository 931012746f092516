"""What the doc tests share: a benchmark script loaded as a module, and the table a document
holds between its generated markers."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def benchmark(name: str) -> Any:
    """``benchmarks/<name>.py`` as a module (its own imports resolve against benchmarks/)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        spec = importlib.util.spec_from_file_location(f"o1sim_bench_{name}", ROOT / "benchmarks" / f"{name}.py")
        assert spec and spec.loader
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod
        spec.loader.exec_module(mod)
        return mod
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))


def development_runs(bench: Any) -> tuple[Any, Path]:
    """The development runs (``../shared/data/real-vllm-h100``) read for ``bench``'s GPU, and
    their directory; the test is skipped without them (they are not shipped)."""
    import pytest

    from o1sim import calibrate as cal

    d = bench.data_dir()
    if d is None:
        pytest.skip("../shared/data/real-vllm-h100 not found (the development runs are not shipped)")
    return cal.read_runs([d], gpu=bench.GPU), d


def generated_table(doc: str, marker: str) -> str:
    """The text between ``<!-- marker: ... -->`` and ``<!-- /marker -->`` in ``doc``."""
    m = re.search(rf"<!-- {marker}:[^\n]*-->\n(.*?)\n<!-- /{marker} -->", doc, flags=re.S)
    assert m, f"the document lost its {marker} markers"
    return m.group(1).strip()
