"""Never crash, never lose a request (issue 15) from Python: every crash reproducer gives a
typed error or a correct run, resource limits refuse what would not fit before anything is
allocated, input that Python's own parsers choke on (deep nesting, non-UTF-8, endless
files) is a ``ConfigError`` or ``ResourceError``, and progress reports come at least every
5% of the requests."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

import o1sim
from o1sim._input import MAX_DEPTH, MAX_INPUT_BYTES

from clikit import invoke

ROOT = Path(__file__).resolve().parents[1]
REPRO = ROOT / "tests" / "repro"
SHARED = ROOT.parent / "shared" / "repro"
if not SHARED.is_dir():  # a worktree: ../shared is next to the worktrees' folder
    SHARED = Path("/work/shared/repro")


def small(**over: Any) -> dict[str, Any]:
    sc: dict[str, Any] = {"model": "llama-3-8b", "gpu": "h200",
                          "workload": {"num_requests": 50, "arrival": {"kind": "poisson", "rate": 20.0},
                                       "prompt": {"kind": "fixed", "value": 100}, "output": {"kind": "fixed", "value": 10}}}
    sc.update(over)
    return sc


#: Reproducers in ../shared/repro that the open reliability issue (28: timeouts that lose
#: requests, reads of server files and of /dev/zero, aborts under a memory cap, untyped NUL
#: errors) is about: each is committed to tests/repro, and so tested here, when it is fixed.
#: `test_the_committed_reproducers_are_the_shared_ones` keeps this list honest.
OPEN_ISSUE_28: set[str] = set()


def _repro_files() -> list[Path]:
    files = sorted(REPRO.glob("*"))
    if SHARED.is_dir():
        names = {f.name for f in files} | OPEN_ISSUE_28
        files += sorted(f for f in SHARED.glob("*") if f.name not in names)
    return files


def _limited(path: Path) -> o1sim.Scenario:
    """The reproducer under ``limits.max_memory_gib = 1`` (what a test may allocate). A
    fuzzer's ``.case.json`` holds the scenario as its payload, given as a table."""
    if path.name.endswith(".case.json"):
        case = json.loads(path.read_text())
        assert case["mode"] == "dict", path.name
        return o1sim.Scenario(case["payload"]).with_overrides({"limits.max_memory_gib": 1.0})
    sc = o1sim.Scenario.from_file(path)
    return sc.with_overrides({"limits.max_memory_gib": 1.0})


@pytest.mark.parametrize("path", _repro_files(), ids=lambda p: p.name)
def test_every_reproducer_gives_a_typed_error_or_a_correct_run(path: Path) -> None:
    try:
        sc = _limited(path)  # reading it resolves its file paths: a typed error too
        if path.name.startswith("check_"):
            r = o1sim.check(sc, max_states=20_000, max_seconds=20)
            assert not r.violations, [v.message for v in r.violations]
            return
        res = o1sim.simulate(sc)
    except o1sim.SimError as e:
        assert not isinstance(e, o1sim.InternalError), e
        # A stall only as the time horizon's answer to an absurd cost (a run that cannot end).
        assert type(e) in (o1sim.ConfigError, o1sim.ResourceError, o1sim.InfeasibleError) or (
            isinstance(e, o1sim.StallError) and "10^9 s" in str(e)
        ), e
        return
    s = res.summary
    assert s["finished"] + s["rejected"] == s["num_requests"] == len(res.requests)
    assert (res.requests["status"] == "finished").sum() == s["finished"]


def test_the_committed_reproducers_are_the_shared_ones() -> None:
    if not SHARED.is_dir():
        pytest.skip("../shared/repro is not here")
    for f in SHARED.glob("*"):
        if f.name in OPEN_ISSUE_28:
            assert not (REPRO / f.name).exists(), f"{f.name} is committed: take it off OPEN_ISSUE_28"
            continue
        assert (REPRO / f.name).read_bytes() == f.read_bytes(), f.name
    assert OPEN_ISSUE_28 <= {f.name for f in SHARED.glob("*")}, "OPEN_ISSUE_28 names a file no longer shared"


def test_resource_errors_name_the_field_the_estimate_and_the_limit() -> None:
    with pytest.raises(o1sim.ResourceError) as e:
        o1sim.simulate(small(deployment={"replicas": 65536}))
    assert e.value.field == "deployment.replicas"
    assert "GiB" in str(e.value) and "limits.max_memory_gib = 4 GiB" in str(e.value)
    assert isinstance(e.value, o1sim.SimError)
    # The same scenario fits a larger limit's estimate (and the limit is validated).
    big = small(deployment={"replicas": 2000}, limits={"max_memory_gib": 0.25})
    with pytest.raises(o1sim.ResourceError):
        o1sim.simulate(big)
    with pytest.raises(o1sim.ConfigError) as c:
        o1sim.simulate(small(limits={"max_memory_gib": -1}))
    assert c.value.field == "limits.max_memory_gib"
    with pytest.raises(o1sim.ResourceError) as e:
        o1sim.check(ROOT / "tests" / "repro" / "check_16req_4rep_64blk.toml", max_states=10**7)
    assert e.value.field == "max_states"


def test_inject_bug_is_refused_outside_the_model_checker() -> None:
    sc = small(scheduler={"policy": "orca", "inject_bug": "double_admit"})
    with pytest.raises(o1sim.ConfigError) as e:
        o1sim.simulate(sc)
    assert e.value.field == "scheduler.inject_bug" and "o1sim check" in str(e.value)


def test_a_workload_no_request_of_which_fits_is_a_config_error() -> None:
    sc = small()
    sc["workload"]["prompt"] = {"kind": "fixed", "value": 10_000_000}
    with pytest.raises(o1sim.ConfigError) as e:
        o1sim.simulate(sc)
    assert e.value.field == "workload.prompt"
    # A distribution that only sometimes exceeds it still rejects per request.
    sc["workload"]["prompt"] = {"kind": "uniform", "min": 100, "max": 12_000}
    r = o1sim.simulate(sc)
    assert 0 < r.summary["rejected"] < 50 and r.summary["rejections"]["prompt exceeds max_model_len"] > 0


def test_deep_nesting_is_a_config_error_everywhere() -> None:
    deep: Any = 1
    for _ in range(1500):
        deep = {"a": deep}
    with pytest.raises(o1sim.ConfigError) as e:
        o1sim.simulate(small(model=deep))
    assert "nested" in str(e.value)
    lst: Any = 1
    for _ in range(1500):
        lst = [lst]
    with pytest.raises(o1sim.ConfigError):
        o1sim.simulate(small(workload=lst))
    with pytest.raises(o1sim.ConfigError):  # a topology entry goes through the same walk
        o1sim.topology.expand({"nodes": lst})
    assert MAX_DEPTH >= 16


def test_deep_files_non_utf8_and_endless_paths(tmp_path: Path) -> None:
    deep = tmp_path / "deep.toml"
    deep.write_text("model = " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(o1sim.ConfigError):
        o1sim.simulate(deep)
    deep_json = tmp_path / "deep.json"
    deep_json.write_text('{"model": ' + "[" * 5000 + "]" * 5000 + "}")
    with pytest.raises(o1sim.ConfigError):
        o1sim.simulate(deep_json)
    with pytest.raises(o1sim.ConfigError):  # Python parses it to resolve file paths
        o1sim.Scenario.from_file(deep).with_overrides({"seed": 1})
    bad = tmp_path / "latin1.toml"
    bad.write_bytes('model = "llama-3-8b"\ngpu = "h200"\nname = "caf\xe9"\n'.encode("latin-1"))
    with pytest.raises(o1sim.ConfigError) as e:
        o1sim.simulate(bad)
    assert "not UTF-8" in str(e.value) and "line 3" in str(e.value)
    if os.path.exists("/dev/zero"):  # endless, and not a regular file: refused before a read
        endless = tmp_path / "zero.toml"
        endless.symlink_to("/dev/zero")
        with pytest.raises(o1sim.ConfigError, match="not a regular file"):
            o1sim.simulate(endless)
        with pytest.raises(o1sim.ConfigError, match="not a regular file") as e:
            o1sim.predict_step("llama-3-8b", "h200", batch=[{"new_tokens": 1, "context_tokens": 0}], profile=endless)
        assert e.value.field == "profile"
    with pytest.raises(o1sim.ConfigError):
        o1sim.simulate(tmp_path)  # a folder


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_files_that_are_not_regular_are_refused_naming_the_field(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # no writer: opening it blocking would hang, reading it too
    base = small()
    cases = [
        ({"workload": {"trace": {"path": str(fifo)}}}, "workload.trace.path"),
        ({"cost_model": {"profile": str(fifo)}}, "cost_model.profile"),
        ({"model": {"hf_config": str(fifo)}}, "model.hf_config"),
    ]
    if os.path.exists("/dev/zero"):
        cases.append(({"workload": {"trace": {"path": "/dev/zero"}}}, "workload.trace.path"))
    for over, field in cases:
        with pytest.raises(o1sim.ConfigError, match="not a regular file") as e:
            o1sim.simulate({**base, **over})
        assert e.value.field == field, over
    scenario_fifo = tmp_path / "fifo.toml"
    os.mkfifo(scenario_fifo)
    with pytest.raises(o1sim.ConfigError, match="not a regular file"):
        o1sim.simulate(scenario_fifo)
    with pytest.raises(o1sim.ConfigError) as e:
        o1sim.workload.load_trace({"path": str(tmp_path)})
    assert e.value.field == "trace.path" and "directory" in str(e.value)


def test_a_trace_over_the_size_bound_is_a_resource_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "2023-11-16 18:17:03.98,480,10\n" * 20)
    monkeypatch.setattr(o1sim.workload, "MAX_TRACE_BYTES", 200)
    with pytest.raises(o1sim.ResourceError) as e:
        o1sim.simulate(small(workload={"trace": {"path": str(trace)}}))
    assert e.value.field == "workload.trace.path" and "longer than" in str(e.value)


def test_a_nul_byte_in_a_file_path_is_a_config_error_naming_the_field() -> None:
    cases = [
        ({"model": {"hf_config": "a\0b"}}, "model.hf_config"),
        ({"cost_model": {"profile": "a\0b"}}, "cost_model.profile"),
        ({"workload": {"trace": {"path": "a\0b"}}}, "workload.trace.path"),
    ]
    for over, field in cases:
        with pytest.raises(o1sim.ConfigError, match="NUL") as e:
            o1sim.simulate({**small(), **over})
        assert e.value.field == field, over
    with pytest.raises(o1sim.ConfigError, match="NUL") as e:
        o1sim.workload.from_trace("a\0b")
    assert e.value.field == "trace.path"
    with pytest.raises(o1sim.ConfigError, match="NUL") as e:
        o1sim.predict_step("llama-3-8b", "h200", batch=[{"new_tokens": 1, "context_tokens": 0}], profile="a\0b")
    assert e.value.field == "profile"


def test_text_over_the_cap_is_a_resource_error() -> None:
    text = "# " + "x" * (MAX_INPUT_BYTES) + "\nmodel = 'llama-3-8b'\ngpu = 'h200'\n"
    with pytest.raises(o1sim.ResourceError):
        o1sim.simulate(o1sim.Scenario.from_text(text, "toml"))


def test_type_errors_read_in_plain_words_and_unknown_fields_suggest() -> None:
    sc = small()
    sc["workload"]["num_requests"] = 1000.0
    with pytest.raises(o1sim.ConfigError) as e:
        o1sim.simulate(sc)
    assert str(e.value) == "workload.num_requests: expected a whole number, got 1000.0"
    with pytest.raises(o1sim.ConfigError) as e:
        o1sim.simulate(small(scheduler={"blok_size": 16}))
    assert e.value.field == "scheduler.blok_size" and "did you mean block_size" in str(e.value)


def test_progress_reports_come_every_five_percent() -> None:
    seen: list[o1sim.Progress] = []
    sc = small()
    sc["workload"].update(num_requests=4000, arrival={"kind": "poisson", "rate": 400.0})
    r = o1sim.simulate(sc, progress=seen.append)
    total = r.summary["num_requests"]
    done = [p.finished_requests for p in seen]
    assert done[0] == 0 and done[-1] == total
    gaps = [b - a for a, b in zip(done, done[1:])]
    # A step finishes at most max_num_seqs requests past the 5% mark.
    assert max(gaps) <= total // 20 + 256, gaps
    assert len(seen) >= 20


def test_a_far_future_event_is_not_reached() -> None:
    r = o1sim.simulate(REPRO / "far_future_event.json")
    assert r.summary["finished"] == 20
    assert r.summary["topology"]["events_not_reached"] == 1


def test_the_dashboard_charts_draw_degraded_links_dashed_and_replicas_in_one_palette() -> None:
    from o1sim.dashboard import charts

    sc = o1sim.Scenario.default().with_overrides({
        "topology": "hgx-h200", "workload.num_requests": 40,
        "events": [{"at_s": 0.5, "kind": "set_link", "src": "gpu0", "dst": "nvswitch0", "bandwidth_gbps": 50.0},
                   {"at_s": 0.6, "kind": "link_down", "src": "gpu7", "dst": "nvswitch0"}]})
    r = o1sim.simulate(sc)
    spec = charts.topology_chart(r.links, None, r.deployment["placement"]).to_dict()
    edges = spec["layer"][0]
    assert edges["mark"]["strokeCap"] == "butt"  # round caps fill short dash gaps on wide links
    dash = edges["encoding"]["strokeDash"]["scale"]
    assert dict(zip(dash["domain"], dash["range"])) == charts.LINK_DASHES
    assert min(charts.LINK_DASHES["degraded"][1], charts.LINK_DASHES["down"][1]) >= 5
    states = {row["state"] for row in charts.link_frame(r.links).to_dict("records")}
    assert {"degraded", "down"} <= states
    nodes = spec["layer"][1]["encoding"]["color"]["scale"]
    dep = charts.deployment_chart(r.deployment).to_dict()["layer"][0]["encoding"]["color"]["scale"]
    topo_colours = dict(zip(nodes["domain"], nodes["range"]))
    assert all(topo_colours[name] == colour for name, colour in zip(dep["domain"], dep["range"]))


def test_sweep_charts_use_a_log_axis_past_saturation() -> None:
    import pandas as pd

    from o1sim.dashboard import charts

    frame = pd.DataFrame({"rate": [1, 2, 4, 8], "policy": ["vllm"] * 4, "ttft_p99_ms": [50, 60, 400, 30_000]})
    spec = charts.sweep_chart(frame).to_dict()
    assert spec["encoding"]["y"]["scale"]["type"] == "log"
    flat = frame.assign(ttft_p99_ms=[50, 55, 60, 70])
    assert charts.sweep_chart(flat).to_dict()["encoding"]["y"]["scale"].get("type") is None


def test_json_results_stay_json() -> None:
    r = o1sim.simulate(REPRO / "link_flap_double_finish.json")
    data = json.loads(r.to_json())
    assert data["summary"]["finished"] == 40


# --------------------------------------------------------------------------- CLI


def _cli(args: list[str]) -> Any:
    return invoke(args)


def _one_red_line(res: Any) -> str:
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, res.stderr
    assert "Traceback" not in res.stderr + res.output
    return str(lines[0])


def test_cli_errors_are_one_line_and_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "latin1.toml"
    bad.write_bytes(b'model = "llama-3-8b"\ngpu = "h\xe9"\n')
    cases = [
        (["run", str(bad)], "ConfigError: "),
        (["run", "--json", str(tmp_path / "no" / "such" / "dir.json")], "OutputError: "),
        (["run", "--bogus"], "UsageError: "),
        (["run", str(tmp_path / "missing.toml")], "UsageError: "),
        (["run", str(REPRO / "num_requests_5e7.json")], "ResourceError: workload.num_requests"),
        (["validate", str(REPRO / "orca_double_admit.json")], "ConfigError: scheduler.inject_bug"),
        (["compare", "--csv", "x"], "UsageError: "),
        (["check", str(REPRO / "check_16req_4rep_64blk.toml"), "--max-states", "10000000"], "ResourceError: max_states"),
    ]
    for args, start in cases:
        res = _cli(args)
        assert res.exit_code == 2, (args, res.output, res.stderr)
        assert _one_red_line(res).startswith(start), (args, res.stderr)


def test_cli_output_paths_are_checked_before_the_run(tmp_path: Path) -> None:
    folder = tmp_path / "out"
    folder.mkdir()
    res = _cli(["run", str(REPRO / "link_flap_double_finish.json"), "--json", str(folder)])
    assert res.exit_code == 2 and "is a folder" in _one_red_line(res)
    assert res.stdout == ""  # no summary: nothing ran


def test_cli_json_dash_writes_to_stdout() -> None:
    res = _cli(["run", str(REPRO / "link_flap_double_finish.json"), "--json", "-"])
    assert res.exit_code == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["summary"]["finished"] == 40
    assert "requests" in res.stderr  # the tables went to stderr


def test_cli_check_exit_codes() -> None:
    base = ["check", str(ROOT / "benchmarks" / "check" / "vllm_6req.toml")]
    assert _cli([*base, "--max-states", "2000"]).exit_code == 3  # incomplete, nothing found
    assert _cli([*base, "--set", 'scheduler.inject_bug="leak_on_preempt"']).exit_code == 1
    assert _cli(["check", str(REPRO / "check_disagg_false_deadlock.toml")]).exit_code == 0


#: Issue 28's reproducers that passed the memory estimate under the default limit and then
#: aborted the process under a 3 GB address-space limit (`ulimit -v 3000000`). The two huge
#: KV pools (10⁹ and 460 M blocks) now store only the blocks their requests use: they run.
MEMORY_CAPPED = ("num_gpu_blocks_1e9_sarathi_abort_under_3GB.case.json", "stages_rate_1e6_abort_under_3GB.case.json",
                 # A prefix-caching pool's free queue doubled (8 B a block, the estimate said 4)
                 # when the first freed block rejoined it; then it was reserved whole.
                 "hbm_gib_1e6_sessions_abort_under_3GB.case.json")
#: Those of them that are now correct runs under the cap.
MEMORY_CAPPED_RUN = {"num_gpu_blocks_1e9_sarathi_abort_under_3GB.case.json", "hbm_gib_1e6_sessions_abort_under_3GB.case.json"}

_UNDER_ULIMIT = """
import json, sys
import o1sim
case = json.loads(open(sys.argv[1]).read())
try:
    r = o1sim.simulate(o1sim.Scenario(case["payload"]))
    s = r.summary
    assert s["finished"] + s["rejected"] == s["num_requests"] == len(r.requests)
    print("ran")
except o1sim.SimError as e:
    assert not isinstance(e, o1sim.InternalError), e
    print(type(e).__name__, getattr(e, "field", ""), e)
"""


@pytest.mark.parametrize("name", MEMORY_CAPPED)
def test_memory_capped_reproducers_do_not_abort_under_a_3gb_address_space(name: str) -> None:
    """The default memory limit follows the address space the process may still map
    (RLIMIT_AS): an estimate over it is a ResourceError before anything is allocated."""
    import subprocess
    import sys

    path = REPRO / name
    proc = subprocess.run(["bash", "-c", f'ulimit -v 3000000; exec "{sys.executable}" -c "$0" "$1"', _UNDER_ULIMIT, str(path)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    out = proc.stdout.strip()
    assert out == "ran" or (out.startswith("ResourceError") and name not in MEMORY_CAPPED_RUN), out


def test_the_default_memory_limit_follows_the_process_ceiling(monkeypatch: pytest.MonkeyPatch) -> None:
    from o1sim import _memory

    monkeypatch.setattr(_memory, "process_memory_ceiling", lambda: 64 << 20)  # 64 MiB left
    with pytest.raises(o1sim.ResourceError) as e:
        o1sim.simulate(small(deployment={"replicas": 1000}))
    assert e.value.field == "deployment.replicas"
    assert "this process may still use" in str(e.value) and "64 MiB" in str(e.value), e.value
    # A scenario that sets its own limit keeps it; a small run fits the ceiling.
    assert o1sim.simulate(small(deployment={"replicas": 1000}, limits={"max_memory_gib": 2})).summary["finished"] == 50
    assert o1sim.simulate(small()).summary["finished"] == 50
    monkeypatch.setattr(_memory, "process_memory_ceiling", lambda: None)
    assert o1sim.simulate(small(deployment={"replicas": 1000})).summary["finished"] == 50


def test_the_process_ceiling_reads_rlimit_as() -> None:
    import subprocess
    import sys

    code = "from o1sim._memory import process_memory_ceiling as c; print(c())"
    proc = subprocess.run(["bash", "-c", f'ulimit -v 3000000; exec "{sys.executable}" -c "{code}"'],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert 0 < int(proc.stdout) < 3000000 * 1024 * 0.75


def test_the_process_ceiling_reads_its_proc_tables_field_by_field(tmp_path: Path) -> None:
    """The kB figures the ceiling is made of are found wherever their line is in the table
    (first, between others, last without a newline) and only there: a missing line or
    file is no figure (the ceiling then leaves that bound out), never another line's."""
    from o1sim._memory import _status_kib

    table = tmp_path / "status"
    table.write_text("MemTotal:       100 kB\nMemFree:  20 kB\nMemAvailable:   30 kB\nVmSize:\t  77 kB")
    assert [_status_kib(k, str(table)) for k in ("MemTotal", "MemFree", "MemAvailable", "VmSize")] == [100, 20, 30, 77]
    assert _status_kib("Free", str(table)) is None and _status_kib("VmRSS", str(table)) is None
    assert _status_kib("MemTotal", str(tmp_path / "absent")) is None
    assert (_status_kib("MemAvailable", "/proc/meminfo") or 0) > 0
