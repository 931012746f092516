from __future__ import annotations

import inspect

import pytest
from click.testing import CliRunner


@pytest.fixture
def runner() -> CliRunner:
    """A CliRunner that keeps stderr apart from stdout (click 8.1 and 8.2+)."""
    if "mix_stderr" in inspect.signature(CliRunner.__init__).parameters:
        return CliRunner(mix_stderr=False)  # click < 8.2
    return CliRunner()


@pytest.fixture
def small_scenario() -> dict:
    """The default scenario as a dict: quick to run, valid by construction."""
    import o1sim

    return o1sim.default_scenario()
