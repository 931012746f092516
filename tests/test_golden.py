"""Golden scenarios through the Python wheel and the CLI: the result JSON must equal, byte
for byte, the files the Rust runner checks (`crates/sim-core/tests/golden.rs`).
Regenerate after an intended change with `make golden` and review the diff."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

import o1sim
from o1sim.cli import main

GOLDEN = Path(__file__).parent / "golden"
CASES = sorted(GOLDEN.glob("*.toml"))


def test_there_are_golden_cases() -> None:
    assert len(CASES) >= 4


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_python_api_matches_golden_bytes(path: Path) -> None:
    expected = path.with_suffix(".json").read_text()
    assert o1sim.simulate(path).to_json() == expected


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_same_scenario_as_a_dict_gives_the_same_bytes(path: Path) -> None:
    # TOML text and a Python dict (sent as JSON) must resolve to the same run.
    with path.open("rb") as f:
        as_dict = tomllib.load(f)
    assert o1sim.simulate(as_dict).to_json() == path.with_suffix(".json").read_text()


@pytest.mark.parametrize("path", CASES[:3], ids=[p.stem for p in CASES[:3]])
def test_cli_writes_the_same_bytes(path: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    res = CliRunner().invoke(main, ["run", str(path), "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert out.read_text() == path.with_suffix(".json").read_text()


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
