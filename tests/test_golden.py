"""Golden scenarios through the Python wheel and the CLI: the result JSON, re-indented by
`goldenkit.pretty` (textually: every number keeps the writer's text), must equal, byte for
byte, the files the Rust runner checks (`crates/sim-core/tests/golden.rs`).
Regenerate after an intended change with `make golden` and review the diff."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

import o1sim

from clikit import invoke
from goldenkit import GOLDEN, expected, pretty

CASES = sorted(GOLDEN.glob("*.toml"))


def test_there_are_golden_cases() -> None:
    assert len(CASES) >= 4


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_python_api_matches_golden_bytes(path: Path) -> None:
    assert pretty(o1sim.simulate(path).to_json()) == expected(path)


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_same_scenario_as_a_dict_gives_the_same_bytes(path: Path) -> None:
    # TOML text and a Python dict (sent as JSON) must resolve to the same run.
    with path.open("rb") as f:
        as_dict = tomllib.load(f)
    assert pretty(o1sim.simulate(as_dict).to_json()) == expected(path)


@pytest.mark.parametrize("path", CASES[:3], ids=[p.stem for p in CASES[:3]])
def test_cli_writes_the_same_bytes(path: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    res = invoke(["run", str(path), "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert pretty(out.read_text()) == expected(path)


def test_pretty_reindents_without_touching_strings_or_numbers() -> None:
    compact = r'{"a\"{":[],"b":{},"c":[1,{"d":"}],\\","é:[":"x, y"},[ ]],"e":-0.0,"f":1e300,"g":[{}]}'
    want = """{
  "a\\"{": [],
  "b": {},
  "c": [
    1,
    {
      "d": "}],\\\\",
      "é:[": "x, y"
    },
    []
  ],
  "e": -0.0,
  "f": 1e300,
  "g": [
    {}
  ]
}
"""
    got = pretty(compact)
    assert got == want
    assert json.loads(got) == json.loads(compact)
    assert pretty(got) == got  # a golden file re-indents to itself


def test_golden_files_are_in_the_reindented_form() -> None:
    # A file edited by hand (or written compact) would fail every runner with no hint why.
    for path in CASES:
        text = expected(path)
        assert pretty(text) == text, f"{path.name}: not pretty-printed; run `make golden`"


def test_hand_worked_vllm_steps_via_python() -> None:
    # The same hand-worked case as the Rust test, seen from Python with record_steps.
    res = o1sim.simulate(GOLDEN / "vllm_hand.toml", record_steps=True)
    plans = [[tuple(x) for x in scheduled] for scheduled in res.steps["scheduled"]]
    assert plans == [
        [(0, 6), (1, 2)],
        [(0, 1), (1, 3), (2, 4)],
        [(0, 1), (1, 1)],
        [(0, 1), (1, 1)],
        [(2, 5), (3, 3)],
        [(3, 1)],
    ]
    assert res.steps["preempted"].tolist() == [[], [], [2], [], [], []]
    df = res.requests
    assert list(df["finish_ms"]) == [17.0, 17.0, 21.0, 23.0]
    assert list(df["preemptions"]) == [0, 0, 1, 0]
