"""Each core error kind is its own exception class under SimError, importable from o1sim."""

from __future__ import annotations

import json
from typing import Any

import pytest

import o1sim
from o1sim import _core, errors

KINDS = ["ConfigError", "InfeasibleError", "StallError", "ResourceError", "InternalError"]


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


def _scenario(**over: Any) -> dict[str, Any]:
    sc: dict[str, Any] = {"model": "llama-3-8b", "gpu": "h200",
                          "workload": {"num_requests": 20, "arrival": {"kind": "poisson", "rate": 10.0},
                                       "prompt": {"kind": "fixed", "value": 100}, "output": {"kind": "fixed", "value": 10}}}
    sc.update(over)
    return sc


def _mutant(bug: str, blocks: int, reqs: list[tuple[int, int]]) -> dict[str, Any]:
    """A tiny scenario with a scheduler bug switched on (runs only with invariant checks)."""
    sched = {"policy": "vllm", "block_size": 4, "num_gpu_blocks": blocks, "max_num_batched_tokens": 16,
             "max_num_seqs": 8, "inject_bug": bug}
    return {"model": "llama-3-8b", "gpu": "h200", "scheduler": sched,
            "workload": {"requests": [{"arrival_ms": 0, "prompt_tokens": p, "output_tokens": o} for p, o in reqs]}}


# One scenario per kind the core reports, run straight through the core binding (no Python
# layer in between): each must arrive as its own class, not as a sibling or the base.
RAISED_BY_THE_CORE: list[tuple[str, dict[str, Any], bool, str | None]] = [
    ("ConfigError", _scenario(scheduler={"block_size": 24}), False, "scheduler.block_size"),
    ("InfeasibleError", _scenario(model="llama-3-70b", gpu="h100"), False, None),
    ("StallError", _mutant("no_preempt", 3, [(4, 6), (4, 6)]), True, None),
    ("ResourceError", _scenario(deployment={"replicas": 65536}, limits={"max_memory_gib": 4}), False,
     "deployment.replicas"),
    ("InternalError", _mutant("double_admit", 6, [(6, 4), (5, 3), (4, 3)]), True, None),
]


@pytest.mark.parametrize(("name", "scenario", "check", "field"), RAISED_BY_THE_CORE, ids=[k[0] for k in RAISED_BY_THE_CORE])
def test_each_core_error_kind_arrives_as_its_own_class(
    name: str, scenario: dict[str, Any], check: bool, field: str | None
) -> None:
    with pytest.raises(o1sim.SimError) as info:
        _core.Simulation(json.dumps(scenario), "json", False, check).finish()
    assert type(info.value) is getattr(o1sim, name), f"{type(info.value).__name__}: {info.value}"
    if field is not None:
        assert isinstance(info.value, (o1sim.ConfigError, o1sim.ResourceError)) and info.value.field == field
    if name == "InternalError":
        assert "invariant violated" in str(info.value)


def test_every_kind_is_raised_by_the_core_test() -> None:
    # The table above covers every class the binding maps a core error to.
    assert sorted(k[0] for k in RAISED_BY_THE_CORE) == sorted(KINDS)
