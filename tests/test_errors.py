"""Each core error kind is its own exception class under SimError, importable from o1sim."""

from __future__ import annotations

import pytest

import o1sim
from o1sim import _core, errors

KINDS = ["ConfigError", "InfeasibleError", "StallError", "InternalError"]


@pytest.mark.parametrize("name", KINDS)
def test_each_kind_subclasses_simerror(name: str) -> None:
    cls = getattr(o1sim, name)
    assert issubclass(cls, o1sim.SimError)
    assert issubclass(cls, Exception)
    assert cls is getattr(errors, name) is getattr(_core, name)
    assert cls.__name__ == name


def test_simerror_is_an_exception_not_a_base_exception_only() -> None:
    assert issubclass(o1sim.SimError, Exception)
    for a in KINDS:
        for b in KINDS:
            if a != b:
                assert not issubclass(getattr(o1sim, a), getattr(o1sim, b))


def test_core_config_error_carries_the_field_path() -> None:
    with pytest.raises(o1sim.ConfigError) as info:
        _core.Simulation("{}", "yaml")
    assert info.value.field == "format"
    assert str(info.value).startswith("format: ")


def test_every_config_error_has_a_field_attribute() -> None:
    # Raised from Python without a path: the class default applies.
    assert o1sim.ConfigError("whole document").field == ""


def test_validate_rejects_an_unknown_format() -> None:
    with pytest.raises(o1sim.ConfigError) as info:
        _core.validate("{}", "xml")
    assert info.value.field == "format"


def test_finished_simulation_cannot_be_reused() -> None:
    text, fmt = o1sim.Scenario.default().payload()
    sim = _core.Simulation(text, fmt)
    sim.finish()
    assert sim.finished
    with pytest.raises(o1sim.SimError):
        sim.finish()
    with pytest.raises(o1sim.SimError):
        sim.run_events(10)
    with pytest.raises(o1sim.SimError):
        sim.progress()
