from __future__ import annotations

import pytest


@pytest.fixture
def small_scenario() -> dict:
    """The default scenario as a dict: quick to run, valid by construction."""
    import o1sim

    return o1sim.default_scenario()
