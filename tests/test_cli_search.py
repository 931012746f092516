"""`o1sim sweep`, `o1sim capacity` and `o1sim plan` as a user types them."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest

from o1sim.cli_search import split_values

from clikit import invoke

SMALL = ["--set", "model=\"llama-3-8b\"", "--set", "gpu=\"h100\"", "--set", "deployment.tp=1", "--set",
         "deployment.replicas=1", "--set", "workload.num_requests=80", "--set", "workload.arrival.rate=6.0"]


def test_split_values_keeps_brackets_and_quotes() -> None:
    assert split_values('vllm,sarathi') == ["vllm", "sarathi"]
    assert split_values('[1,2],{a=1,b=2},"x,y"') == ["[1,2]", "{a=1,b=2}", '"x,y"']


def test_sweep_prints_a_table_and_writes_every_row(tmp_path: Path) -> None:
    csv_out, json_out = tmp_path / "s.csv", tmp_path / "s.json"
    res = invoke(["sweep", *SMALL, "--grid", "scheduler.policy=vllm,sarathi", "--grid",
                  "workload.arrival.rate=4,8", "--seeds", "2", "--workers", "2",
                  "--csv", str(csv_out), "--json", str(json_out)])
    assert res.exit_code == 0, res.output
    assert "8 rows" in res.stdout and "sarathi" in res.stdout
    df = pd.read_csv(csv_out)
    assert len(df) == 8 and {"scheduler.policy", "seed", "ttft_p99_ms", "error"} <= set(df.columns)
    assert len(json.loads(json_out.read_text())["rows"]) == 8
    res = invoke(["sweep", *SMALL, "--grid", "workload.arrival.rate=4,8", "--seeds", "0,1,2",
                  "--aggregate", "--columns", "ttft_p99_ms"])
    assert res.exit_code == 0, res.output
    assert "±ttft_p99_ms" in res.stdout  # the heading of ttft_p99_ms_ci95


def test_sweep_bad_input_is_one_red_line() -> None:
    res = invoke(["sweep", *SMALL, "--grid", "scheduler.polcy=vllm"])
    assert res.exit_code == 2
    assert "ConfigError: grid.scheduler.polcy: unknown scenario field" in res.stderr
    assert "did you mean 'scheduler.policy'" in res.stderr and "Traceback" not in res.output
    res = invoke(["sweep", *SMALL, "--grid", "scheduler.policy="])
    assert res.exit_code == 2 and "empty axis" in res.stderr
    res = invoke(["sweep", *SMALL])
    assert res.exit_code == 2 and "give at least one axis" in res.output


def test_sweep_without_ray_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)
    res = invoke(["sweep", *SMALL, "--grid", "deployment.tp=1", "--backend", "ray"])
    assert res.exit_code == 2
    assert "pip install 'o1sim[ray]'" in res.stderr


def test_capacity_answers_with_a_rate(tmp_path: Path) -> None:
    out = tmp_path / "c.json"
    res = invoke(["capacity", *SMALL, "--slo", "ttft_p99_ms=400", "--seeds", "1", "--json", str(out)])
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    assert data["status"] == "found" and data["rate"] > 0
    assert f"capacity: {data['rate']:.4g} req/s meets the SLO" in res.stdout
    res = invoke(["capacity", *SMALL, "--slo", "ttft_p99_ms=0.001", "--seeds", "1"])
    assert res.exit_code == 0, res.output
    assert "capacity: none" in res.stdout
    res = invoke(["capacity", *SMALL, "--slo", "ttft_p99=400"])
    assert res.exit_code == 2 and "did you mean ttft_p99_ms" in res.stderr


def test_plan_prints_the_cheapest(tmp_path: Path) -> None:
    csv_out = tmp_path / "p.csv"
    res = invoke(["plan", *SMALL, "--choice", "gpu=h100,h200", "--choice", "deployment.replicas=1,2",
                  "--slo", "ttft_p99_ms=1000", "--load", "8", "--seeds", "1", "--price", "h200=3.1",
                  "--csv", str(csv_out), "--all"])
    assert res.exit_code == 0, res.output
    assert "cheapest: gpu=h100, deployment.replicas=1" in res.stdout
    assert "h200 3.10" in res.stdout
    df = pd.read_csv(csv_out)
    assert len(df) == 4 and {"usd_per_hour", "pareto", "feasible"} <= set(df.columns)
    res = invoke(["plan", *SMALL, "--choice", "gpu=h100", "--slo", "ttft_p99_ms=1000", "--price", "h100=abc"])
    assert res.exit_code == 2


@pytest.mark.parametrize("args", [
    ["sweep", *SMALL, "--grid", "workload.arrival.rate=4", "--csv", "{missing}/s.csv"],
    ["sweep", *SMALL, "--grid", "workload.arrival.rate=4", "--json", "{folder}"],
    ["capacity", *SMALL, "--slo", "ttft_p99_ms=2000", "--json", "{missing}/c.json"],
    ["plan", *SMALL, "--choice", "deployment.tp=1", "--slo", "ttft_p99_ms=2000", "--csv", "{missing}/p.csv"],
])
def test_an_unwritable_output_is_one_red_line_before_any_run(tmp_path: Path, args: list[str]) -> None:
    args = [a.format(missing=tmp_path / "nope", folder=tmp_path) for a in args]
    res = invoke(args)
    assert res.exit_code == 2, res.output
    assert "OutputError:" in res.stderr and "Traceback" not in res.output
    assert "rows" not in res.stdout, "refused before running"


def test_json_to_stdout_is_json_and_the_tables_go_to_stderr() -> None:
    res = invoke(["sweep", *SMALL, "--grid", "workload.arrival.rate=4,8", "--json", "-"])
    assert res.exit_code == 0, res.output
    assert len(json.loads(res.stdout)["rows"]) == 2
    res = invoke(["capacity", *SMALL, "--slo", "ttft_p99_ms=2000", "--seeds", "1", "--json", "-"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["status"] in ("found", "at_least", "none", "lower_bound", "bracketed") or "rate" in json.loads(res.stdout)


@pytest.mark.parametrize("args, option", [
    (["capacity", *SMALL, "--slo", "ttft_p99_ms=nan"], "--slo"),
    (["plan", *SMALL, "--choice", "deployment.tp=1", "--slo", "ttft_p99_ms=2000", "--price", "h100=inf"], "--price"),
    (["web", "--port", "99999"], "--port"),
    (["dashboard", "--port", "-1"], "--port"),
])
def test_non_finite_numbers_and_bad_ports_are_usage_errors(args: list[str], option: str) -> None:
    res = invoke(args)
    assert res.exit_code == 2, res.output
    assert option in res.output and "Traceback" not in res.output
