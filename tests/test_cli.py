"""The o1sim command line, run in process (tests/clikit.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import o1sim
from o1sim.cli import _get, _parse_value

from clikit import invoke


def test_help_lists_the_commands() -> None:
    res = invoke(["--help"])
    assert res.exit_code == 0, res.output
    for cmd in ("run", "compare", "presets", "validate"):
        assert cmd in res.output


@pytest.mark.parametrize("cmd", ["run", "compare", "presets", "validate"])
def test_each_command_has_help(cmd: str) -> None:
    res = invoke([cmd, "--help"])
    assert res.exit_code == 0, res.output
    assert "Usage" in res.output


def test_version() -> None:
    res = invoke(["--version"])
    assert res.exit_code == 0
    assert o1sim.__version__ in res.output


def test_presets_works() -> None:
    res = invoke(["presets"])
    assert res.exit_code == 0, res.output + res.stderr
    res = invoke(["presets", "--json"])
    assert res.exit_code == 0
    assert json.loads(res.stdout) == o1sim.presets()


def test_config_error_exits_2_with_a_red_one_liner() -> None:
    res = invoke(["run", "--set", "workload.arrival.rate=nan"])
    assert res.exit_code == 2
    assert "ConfigError: workload.arrival.rate: must be a finite number (got nan)" in res.stderr
    assert "Traceback" not in res.stderr + res.output


def test_config_error_in_compare_and_validate() -> None:
    for cmd in ("compare", "validate"):
        res = invoke([cmd, "--set", "scheduler.gpu_memory_utilization=inf"])
        assert res.exit_code == 2, cmd
        assert "ConfigError: scheduler.gpu_memory_utilization: must be a finite number (got inf)" in res.stderr


def test_unknown_file_type_exits_2(tmp_path: Path) -> None:
    p = tmp_path / "scenario.yaml"
    p.write_text("seed: 1\n")
    res = invoke(["validate", str(p)])
    assert res.exit_code == 2
    assert res.stderr.startswith("ConfigError:")


def test_missing_file_exits_2(tmp_path: Path) -> None:
    res = invoke(["run", str(tmp_path / "nope.toml")])
    assert res.exit_code == 2


def test_bad_set_syntax_is_a_usage_error() -> None:
    res = invoke(["run", "--set", "no-equals-sign"])
    assert res.exit_code == 2
    assert "KEY=VALUE" in res.stderr


def test_parse_value_uses_toml_syntax() -> None:
    assert _parse_value("16") == 16
    assert _parse_value("0.9") == 0.9
    assert _parse_value("true") is True
    assert _parse_value("vllm") == "vllm"
    assert _parse_value('"16"') == "16"
    assert _parse_value("[1, 2]") == [1, 2]


def test_get_reads_nested_keys_defensively() -> None:
    s = {"ttft_ms": {"p99": 12.5, "p50": None}, "finished": 3}
    assert _get(s, "ttft_ms.p99") == 12.5
    assert _get(s, "ttft_ms.p50") is None
    assert _get(s, "ttft_ms.p90", "—") == "—"
    assert _get(s, "finished.p99") is None
    assert _get(s, "finished") == 3


# --- with real results from the core -------------------------------------------------


def test_run_default_prints_a_summary_and_writes_outputs(tmp_path: Path) -> None:
    out_json, out_csv = tmp_path / "r.json", tmp_path / "r.csv"
    res = invoke(["run", "--json", str(out_json), "--csv", str(out_csv)])
    assert res.exit_code == 0, res.output + res.stderr
    assert "Requests" in res.stdout and "TTFT (ms)" in res.stdout
    expected = o1sim.simulate(o1sim.Scenario.default())
    # Byte for byte the core's JSON: the CLI must not re-serialise it.
    assert out_json.read_text(encoding="utf-8") == expected.to_json()
    lines = out_csv.read_text().splitlines()
    assert len(lines) == 1 + expected.summary["num_requests"]
    assert lines[0].startswith("request_id,")


def test_run_seed_changes_only_the_seed(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    res = invoke(["run", "--seed", "12345", "--json", str(out)])
    assert res.exit_code == 0, res.stderr
    expected = o1sim.simulate(o1sim.Scenario.default().with_overrides({"seed": 12345}))
    assert out.read_text(encoding="utf-8") == expected.to_json()


def test_compare_prints_one_row_per_policy(tmp_path: Path) -> None:
    out = tmp_path / "c.json"
    res = invoke(["compare", "--json", str(out)])
    assert res.exit_code == 0, res.output + res.stderr
    policies = o1sim.presets()["policies"]  # the co-located ones, as compare runs them
    rows = [line for line in res.stdout.splitlines() if line.split() and line.split()[0] in policies]
    # Rows repeat once per table group; every policy appears the same number of times.
    n = len(policies)
    assert {p: sum(1 for r in rows if r.split()[0] == p) for p in policies} == {p: len(rows) // n for p in policies}
    assert len(rows) >= n
    data = json.loads(out.read_text())
    assert list(data) == policies
    for p in policies:
        assert data[p]["summary"]["num_requests"] > 0
    # Different policies make different schedules on the default scenario.
    assert len({json.dumps(data[p]["summary"], sort_keys=True) for p in policies}) > 1


def test_compare_unknown_policy_is_a_config_error() -> None:
    res = invoke(["compare", "--policies", "vllm,fifo-magic"])
    assert res.exit_code == 2
    assert "ConfigError: scheduler.policy:" in res.stderr


def test_validate_prints_the_resolved_scenario() -> None:
    res = invoke(["validate"])
    assert res.exit_code == 0, res.stderr
    resolved = json.loads(res.stdout)
    assert resolved["scenario"]["scheduler"]["policy"] in o1sim.presets()["policies"]
    assert resolved["deployment"]["num_gpu_blocks"] > 0


def test_routes_with_links_down() -> None:
    args = ["routes", "2x-hgx-h200-ib", "n0.gpu3", "n1.gpu3"]
    res = invoke([*args, "--down", "ib3:n0.nic3", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout) == o1sim.routes("2x-hgx-h200-ib", "n0.gpu3", "n1.gpu3", down=[("ib3", "n0.nic3")])
    res = invoke([*args, "--down", "ib3:n0.nic3"])
    assert res.exit_code == 0, res.output
    assert "(down: ib3:n0.nic3)" in res.stdout and "ib0" in res.stdout and "ib3 " not in res.stdout
    # Both links of n0.gpu3 down: no route, said plainly.
    res = invoke([*args, "--down", "ib3:n0.nic3", "--down", "n0.gpu3:n0.nic3", "--down", "n0.gpu3:n0.nvswitch0"])
    assert res.exit_code == 0, res.output
    assert "no route from n0.gpu3 to n1.gpu3" in res.stdout
    res = invoke([*args, "--down", "n0.gpu0:n1.gpu0"])
    assert res.exit_code == 2
    assert "ConfigError: down[0]: no link between 'n0.gpu0' and 'n1.gpu0'" in res.stderr
    res = invoke([*args, "--down", "n0.gpu0"])
    assert res.exit_code == 2 and "A:B" in res.stderr
