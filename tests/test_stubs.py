"""The hand-written o1sim/_core.pyi matches the compiled module."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_stubtest_passes() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "o1sim._core"], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_version_is_exposed() -> None:
    import o1sim

    assert isinstance(o1sim.__version__, str) and o1sim.__version__.count(".") >= 2


def test_package_type_checks_strictly() -> None:
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(root / "pyproject.toml"), str(root / "python" / "o1sim")],
        capture_output=True, text=True, timeout=600, cwd=root,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
