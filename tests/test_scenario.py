"""Scenario handling on the Python side: overrides, the NaN/±inf walk, inputs."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import o1sim
from o1sim.api import _encode


@pytest.mark.parametrize(
    ("value", "shown"), [(float("nan"), "nan"), (float("inf"), "inf"), (float("-inf"), "-inf"), (np.float64("nan"), "nan")]
)
def test_non_finite_float_is_a_config_error_naming_the_path(value: Any, shown: str) -> None:
    scenario = {"seed": 1, "workload": {"arrival": {"rate": value}}}
    with pytest.raises(o1sim.ConfigError) as info:
        o1sim.simulate(scenario)
    assert info.value.field == "workload.arrival.rate"
    assert str(info.value) == f"workload.arrival.rate: must be a finite number (got {shown})"


def test_nan_inside_a_list_names_the_index() -> None:
    scenario = {"workload": {"requests": [{"prompt_tokens": 10}, {"prompt_tokens": math.nan}]}}
    with pytest.raises(o1sim.ConfigError) as info:
        o1sim.Scenario(scenario).validate()
    assert info.value.field == "workload.requests[1].prompt_tokens"


def test_unsupported_value_type_is_a_config_error() -> None:
    with pytest.raises(o1sim.ConfigError) as info:
        o1sim.simulate({"scheduler": {"policy": object()}})
    assert info.value.field == "scheduler.policy"


def test_numpy_scalars_and_tuples_are_accepted() -> None:
    text = _encode({"a": np.int64(3), "b": (1.5, np.float32(2.0)), "c": None, "d": True})
    assert json.loads(text) == {"a": 3, "b": [1.5, 2.0], "c": None, "d": True}


# A nested scenario-like dict with exactly one NaN planted somewhere; the error must name it.
keys = st.text(alphabet="abcdefghij_", min_size=1, max_size=6)
leaves = st.one_of(st.integers(-5, 5), st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=5), st.booleans())
trees = st.recursive(leaves, lambda kids: st.one_of(st.lists(kids, max_size=3), st.dictionaries(keys, kids, max_size=3)), max_leaves=12)


@given(st.dictionaries(keys, trees, min_size=1, max_size=4), st.data())
def test_walker_finds_a_planted_nan_anywhere(tree: dict, data: st.DataObject) -> None:
    # Walk down a random route of dicts/lists and plant a NaN at the end of it.
    node: Any = tree
    path = ""
    while True:
        if isinstance(node, dict) and node:
            key = data.draw(st.sampled_from(sorted(node)))
            child_path = f"{path}.{key}" if path else key
        elif isinstance(node, list) and node:
            key = data.draw(st.integers(0, len(node) - 1))
            child_path = f"{path}[{key}]"
        else:
            break
        if not isinstance(node[key], (dict, list)) or not node[key] or data.draw(st.booleans()):
            node[key] = math.nan
            path = child_path
            break
        node, path = node[key], child_path
    with pytest.raises(o1sim.ConfigError) as info:
        _encode(tree)
    assert info.value.field == path


def test_with_overrides_sets_nested_fields_and_copies() -> None:
    base = o1sim.Scenario({"scheduler": {"policy": "vllm", "block_size": 16}})
    over = base.with_overrides({"scheduler.policy": "orca", "slo.ttft_ms": 500, "seed": 7})
    assert over.to_dict() == {"scheduler": {"policy": "orca", "block_size": 16}, "slo": {"ttft_ms": 500}, "seed": 7}
    assert base.to_dict()["scheduler"]["policy"] == "vllm"


def test_with_overrides_list_index() -> None:
    base = o1sim.Scenario({"workload": {"requests": [{"prompt_tokens": 1}, {"prompt_tokens": 2}]}})
    over = base.with_overrides({"workload.requests[1].prompt_tokens": 9})
    assert over.to_dict()["workload"]["requests"][1]["prompt_tokens"] == 9
    with pytest.raises(o1sim.ConfigError) as info:
        base.with_overrides({"workload.requests[5].prompt_tokens": 9})
    assert info.value.field == "workload.requests[5]"


@pytest.mark.parametrize("bad", ["", "a..b", ".a", "a.", "a[x]"])
def test_malformed_override_path(bad: str) -> None:
    with pytest.raises(o1sim.ConfigError):
        o1sim.Scenario({}).with_overrides({bad: 1})


def test_from_file_toml_and_json(tmp_path: Path) -> None:
    toml = tmp_path / "s.toml"
    toml.write_text('seed = 3\n[scheduler]\npolicy = "orca"\n')
    sc = o1sim.Scenario.from_file(toml)
    assert sc.payload() == (toml.read_text(), "toml")  # TOML goes to the core as TOML
    assert sc.to_dict() == {"seed": 3, "scheduler": {"policy": "orca"}}
    js = tmp_path / "s.json"
    js.write_text(json.dumps({"seed": 3}))
    assert o1sim.Scenario.from_file(str(js)).to_dict() == {"seed": 3}


def test_from_file_rejects_other_suffixes(tmp_path: Path) -> None:
    p = tmp_path / "s.yaml"
    p.write_text("seed: 1")
    with pytest.raises(o1sim.ConfigError):
        o1sim.Scenario.from_file(p)


def test_simulate_refuses_scenario_text_and_other_types() -> None:
    with pytest.raises(TypeError):
        o1sim.simulate("seed = 1\n[scheduler]\n")
    with pytest.raises(TypeError):
        o1sim.simulate(42)  # type: ignore[arg-type]


def test_default_scenario_matches_the_core_text() -> None:
    assert o1sim.default_scenario() == o1sim.Scenario.default().to_dict()
