"""The many-row tables (`o1sim sweep`, `o1sim plan --all`, `o1sim calibrate`) fit the terminal:
at 80 columns every line printed is at most 80 characters, the columns left out are named
under the table, and `--wide` shows them all."""

from __future__ import annotations

from pathlib import Path

import pytest

from clikit import invoke

SMALL = ["--set", "model=\"llama-3-8b\"", "--set", "gpu=\"h100\"", "--set", "deployment.tp=1", "--set",
         "deployment.replicas=1", "--set", "workload.num_requests=80", "--set", "workload.arrival.rate=6.0"]
SWEEP = ["sweep", *SMALL, "--grid", "scheduler.policy=vllm,sarathi", "--grid", "workload.arrival.rate=4,8",
         "--seeds", "2", "--aggregate", "--workers", "2"]
PLAN = ["plan", *SMALL, "--choice", "gpu=h100,h200", "--choice", "deployment.replicas=1,2", "--slo",
        "ttft_p99_ms=300", "--load", "30", "--seeds", "1", "--all", "--workers", "2"]


def _lines(text: str) -> list[str]:
    return text.splitlines()


def _at(width: int, args: list[str], monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("COLUMNS", str(width))
    res = invoke(args)
    assert res.exit_code == 0, res.output
    return res.stdout


def _calibrate_args(tmp_path: Path) -> list[str]:
    from test_calibrate import _run_dir

    runs = [_run_dir(tmp_path / "runs", f"a-rather-long-run-name-{i}", rate=rate, out=out, ttft_s=0.08,
                     e2e_s=0.08 + out * 0.012) for i, (rate, out) in enumerate([(2.0, 40), (3.0, 60), (4.0, 30)])]
    return ["calibrate", *map(str, runs), "--gpu", "h100", "--holdout", "none"]


@pytest.mark.parametrize("which", ["sweep", "plan", "calibrate"])
def test_tables_fit_80_columns_and_name_what_they_leave_out(which: str, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    args = {"sweep": SWEEP, "plan": PLAN}.get(which) or _calibrate_args(tmp_path)
    out = _at(80, args, monkeypatch)
    too_long = [ln for ln in _lines(out) if len(ln) > 80]
    assert not too_long, f"`o1sim {which}` at 80 columns:\n" + "\n".join(too_long)
    assert "not shown (terminal too narrow):" in out and "--wide" in out
    wide = _at(80, [*args, "--wide"], monkeypatch)
    assert "not shown" not in wide
    assert max(len(ln) for ln in _lines(wide)) > 80  # every column, the terminal notwithstanding
    if which == "sweep":
        assert "±ttft_p99_ms" in wide and "seeds" in wide
    elif which == "plan":
        assert all(h in wide for h in ("sustains", "$/Mtok", "req/s", "pareto", "why"))
        # at 80 columns the reasons come under the table, one configuration a line
        assert "replicas=1:" in out
    else:
        assert all(h in wide for h in ("TTFT ms", "defaults", "fitted", "held out"))


def test_a_wide_terminal_shows_every_column(monkeypatch: pytest.MonkeyPatch) -> None:
    out = _at(400, SWEEP, monkeypatch)
    assert "not shown" not in out and "±good req/s" in out


def test_wide_is_a_flag_and_a_bad_value_is_one_red_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    res = invoke([*SWEEP, "--wide=yes"])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert len([ln for ln in res.stderr.splitlines() if ln.strip()]) == 1
