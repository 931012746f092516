"""The dashboard through Streamlit's AppTest (the script run headless, widgets driven from
Python), its helpers, the `o1sim dashboard` and `o1sim report` commands, and the report's
HTML (self-contained: no script or stylesheet from the network)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

import o1sim
from o1sim import registry
from o1sim.dashboard import APP_PATH, charts
from o1sim.dashboard.scenarios import FIELDS, PRESETS, preset_scenario, trace_workload

from clikit import invoke

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

TIMEOUT = 120


def _app() -> AppTest:
    at = AppTest.from_file(str(APP_PATH), default_timeout=TIMEOUT)
    at.run()
    return at


def _metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def _text(summary: dict[str, Any], path: str) -> str:
    """The value at ``path`` of a summary as every front end writes it (the core's metric table)."""
    return registry.format_metric(registry.shown_metric(path), registry.metric_value(summary, path))


def _no_exception(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


@pytest.fixture(scope="module")
def app() -> AppTest:
    return _app()


def test_default_runs_and_shows_the_summary(app: AppTest) -> None:
    _no_exception(app)
    assert not app.error
    metrics = _metrics(app)
    expected = o1sim.simulate(o1sim.Scenario.default()).summary
    assert metrics["TTFT p99 (ms)"] == _text(expected, "ttft_ms.p99")
    assert metrics["Rejected"] == "0"
    assert app.selectbox(key="policy").value == "vllm"
    # All four policies are compared: one row each in the comparison table.
    table = app.dataframe[0].value
    assert sorted(table.index) == sorted(o1sim.presets()["policies"])


def test_headline_and_compare_table_are_the_metric_tables_rows(app: AppTest) -> None:
    """The headline metrics are the rows the core's table shows on the dashboard, labelled and
    written as it says; the Compare tab's table has one column per row it shows in comparisons,
    with each policy's value as shown (a percentage × 100)."""
    _no_exception(app)
    metrics = _metrics(app)
    expected = o1sim.simulate(o1sim.Scenario.default()).summary
    shown = registry.shown_metrics("dashboard")
    assert list(metrics) == [m.heading for m in shown]
    assert metrics == {m.heading: _text(expected, m.path) for m in shown}
    new = registry.shown_metric("output_tokens_per_s_per_gpu")  # added through the table alone
    assert metrics[new.heading] == _text(expected, new.path) != "—"
    table = app.dataframe[0].value
    compare = registry.shown_metrics("compare")
    assert new.heading in table.columns
    assert list(table.columns) == [m.heading for m in compare]
    for policy in table.index:
        s = o1sim.simulate(o1sim.Scenario.default().with_overrides({"scheduler.policy": policy})).summary
        for m in compare:
            v, got = registry.metric_value(s, m.path), table.loc[policy, m.heading]
            assert (got != got) if v is None else got == v * m.scale, (policy, m.path)  # NaN where none


def test_switching_policy_changes_the_summary() -> None:
    at = _app()
    before = _metrics(at)
    at.selectbox(key="policy").set_value("sarathi").run()
    _no_exception(at)
    after = _metrics(at)
    assert after != before
    sarathi = o1sim.simulate(o1sim.Scenario.default().with_overrides({"scheduler.policy": "sarathi"})).summary
    assert after["TPOT p99 (ms)"] == _text(sarathi, "tpot_ms.p99")
    assert any("Policy: sarathi" in h.value for h in at.subheader)


def test_overrides_reach_the_run() -> None:
    at = _app()
    at.number_input(key="rate").set_value(5.0).run()
    _no_exception(at)
    five = o1sim.simulate(o1sim.Scenario.default().with_overrides({"workload.arrival.rate": 5.0})).summary
    assert _metrics(at)["TTFT p99 (ms)"] == _text(five, "ttft_ms.p99")


def test_bad_override_shows_an_error_under_its_input_not_a_traceback() -> None:
    at = _app()
    at.number_input(key="tp").set_value(3).run()
    _no_exception(at)
    sidebar_errors = [e.value for e in at.sidebar.error]
    assert any("deployment.tp" in e and "must divide" in e for e in sidebar_errors), sidebar_errors
    assert at.error  # and a pointer in the main area
    # Nothing new ran: the previous results stay, greyed, under a note saying so.
    assert _stale(at)
    # Fixing the input recovers.
    at.number_input(key="tp").set_value(4).run()
    _no_exception(at)
    assert not at.error and at.metric and not _stale(at)


def _stale(at: Any) -> bool:
    """Whether the main area shows the previous results (greyed) under an error."""
    return any(c.value.startswith("The previous results") for c in at.caption)


def test_bad_scenario_text_shows_an_error() -> None:
    at = _app()
    at.text_area(key="scenario_text").input("model = 'llama-3-8b'\ngpu = 'h100'\n[scheduler]\nblock_size = 24\n").run()
    _no_exception(at)
    errors = [e.value for e in at.sidebar.error]
    assert any("scheduler.block_size" in e for e in errors), errors
    # The widgets show the text's values, and correcting one in its widget runs the scenario.
    assert at.number_input(key="block_size").value == 24
    at.number_input(key="block_size").set_value(16).run()
    _no_exception(at)
    assert not at.error and _metrics(at)["Rejected"] == "0"
    assert at.selectbox(key="model").value == "llama-3-8b"
    at.text_area(key="scenario_text").input("this is = = not toml").run()
    _no_exception(at)
    assert at.sidebar.error


def test_a_config_json_model_is_kept_and_its_keys_named() -> None:
    """A scenario whose model is a Hugging Face config.json (inline) runs as that model: the
    model picker shows it instead of replacing it with a preset, and a broken key is named."""
    import json

    config = json.loads((Path(__file__).parent / "data" / "hf_configs" / "mistral-7b-v0.1.json").read_text())
    text = json.dumps({"model": {"hf_config": config}, "gpu": "h100",
                       "workload": {"num_requests": 40, "arrival": {"kind": "poisson", "rate": 4.0},
                                    "prompt": {"kind": "fixed", "value": 500}, "output": {"kind": "fixed", "value": 20}}})
    at = _app()
    at.text_area(key="scenario_text").input(text).run()
    _no_exception(at)
    assert not at.error and not at.sidebar.error, [e.value for e in at.error] + [e.value for e in at.sidebar.error]
    assert at.selectbox(key="model").value == "config.json (mistral)"
    expected = o1sim.simulate(json.loads(text) | {"scheduler": {"policy": "vllm"}}).summary
    assert _metrics(at)["TTFT p99 (ms)"] == _text(expected, "ttft_ms.p99")
    broken = {k: v for k, v in config.items() if k != "hidden_size"}
    at.text_area(key="scenario_text").input(json.dumps({"model": {"hf_config": broken}, "gpu": "h100"})).run()
    _no_exception(at)
    errors = [e.value for e in at.sidebar.error] + [e.value for e in at.error]
    assert any("model.hf_config.hidden_size" in e for e in errors), errors


def test_infeasible_deployment_is_reported() -> None:
    at = _app()
    at.selectbox(key="gpu").set_value("l40s")
    at.number_input(key="tp").set_value(1).run()
    _no_exception(at)
    assert any("InfeasibleError" in e.value for e in at.sidebar.error)


def test_presets_switch_and_sweep_runs() -> None:
    at = _app()
    at.selectbox(key="preset").set_value(list(PRESETS)[1]).run()
    _no_exception(at)
    assert at.number_input(key="num_requests").value == 120
    assert int(_metrics(at)["Preemptions"]) > 0
    at.slider(key="sweep_points").set_value(3)
    at.button(key="sweep_run").click().run()
    _no_exception(at)
    sweep = at.session_state["sweep"]
    assert len(sweep["rows"]) == 3 * len(o1sim.presets()["policies"]) and not sweep["failed"]
    rates = sorted({r["rate"] for r in sweep["rows"]})
    assert rates == pytest.approx([5.0, 17.5, 30.0])


def test_trace_download_is_prepared_on_request() -> None:
    at = _app()
    at.toggle(key="want_trace").set_value(True).run()
    _no_exception(at)
    assert any("Perfetto" in c.value for c in at.caption)


def test_a_rerun_does_not_simulate_again(monkeypatch: pytest.MonkeyPatch) -> None:
    at = _app()
    calls: list[Any] = []
    real = o1sim.simulate

    def counting(*args: Any, **kwargs: Any) -> o1sim.Result:
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(o1sim, "simulate", counting)
    at.run()  # a re-render with the same scenario
    _no_exception(at)
    assert calls == []


# --------------------------------------------------------------------------- helpers


def test_every_preset_is_valid_and_every_field_exists() -> None:
    for name in PRESETS:
        resolved = preset_scenario(name).validate()["scenario"]
        for f in FIELDS:
            if f.path.startswith(("workload.", "slo.")):
                continue
            node: Any = resolved
            for key in f.path.split("."):
                node = node[key]


def test_an_uploaded_trace_goes_through_the_core_reader() -> None:
    text = "arrival_s,prompt_tokens,output_tokens\n10.5,100,20\n10.0,300,5\n"
    # Not sorted by time: the reader says which line goes back.
    with pytest.raises(o1sim.ConfigError) as e:
        o1sim.simulate(o1sim.Scenario.default().with_overrides({"workload": trace_workload(text)}))
    assert e.value.field == "workload.trace" and "line 3" in str(e.value)
    text = "arrival_s,prompt_tokens,output_tokens\n10.0,300,5\n10.5,100,20\n"
    r = o1sim.simulate(o1sim.Scenario.default().with_overrides({"workload": trace_workload(text)}))
    assert list(r.requests["prompt_tokens"]) == [300, 100] and list(r.requests["arrival_ms"]) == [0.0, 500.0]
    assert o1sim.workload.trace_info(text) == {"format": "csv", "requests": 2, "span_s": 0.5}


def test_a_scenario_naming_a_server_file_is_refused_showing_none_of_it() -> None:
    """Issue 28's reproducer as the text an upload fills in: the refusal names
    workload.trace.path under the trace input, and no line of /etc/passwd is on the page."""
    repro = Path(__file__).resolve().parent / "repro" / "dashboard_trace_path_reads_server_file.toml"
    at = _app()
    at.text_area(key="scenario_text").input(repro.read_text()).run()
    _no_exception(at)
    errors = [e.value for e in at.sidebar.error] + [e.value for e in at.error]
    assert any("workload.trace.path" in e and "names a file" in e for e in errors), errors
    try:
        secret = [ln for ln in Path("/etc/passwd").read_text().splitlines() if ln.strip()]
    except OSError:
        secret = []
    shown = "\n".join(str(getattr(el, "value", "")) for el in [*at.sidebar.error, *at.error, *at.markdown, *at.caption])
    assert not any(ln in shown for ln in secret) and "root:x" not in shown


def test_busy_frame_integrates_the_busy_time() -> None:
    r = o1sim.simulate(o1sim.Scenario.default())
    frame = charts.busy_frame(r)
    dep = r.deployment
    assert frame["gpu"].nunique() == dep["gpus"]
    assert frame["busy"].between(0, 1).all()
    # Busy seconds per replica: the frame's integral equals the time series'.
    ts = r.timeseries
    width = float(frame["t1_s"].iloc[0] - frame["t0_s"].iloc[0])
    for rep in range(dep["replicas"]):
        gpu0 = frame[(frame.replica == rep) & (frame.gpu_index == rep * dep["tp"])]
        expected = float((ts[ts.replica == rep]["busy"]).sum()) * r.timeseries_interval_ms / 1e3
        assert float(gpu0["busy"].sum()) * width == pytest.approx(expected, rel=1e-9)


# --------------------------------------------------------------------------- commands


def test_dashboard_command_starts_streamlit(monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess

    seen: list[list[str]] = []

    def fake_call(cmd: list[str]) -> int:
        seen.append(cmd)
        return 0

    def fake_execv(path: str, cmd: list[str]) -> None:
        assert path == cmd[0]
        seen.append(cmd)
        raise SystemExit(0)

    monkeypatch.setattr(subprocess, "call", fake_call)
    # On POSIX the command execs Streamlit: unpatched, that would replace the test process.
    monkeypatch.setattr(os, "execv", fake_execv)
    res = invoke(["dashboard", "--port", "8599", "--no-browser"])
    assert res.exit_code == 0, res.output
    cmd = seen[0]
    assert cmd[1:4] == ["-m", "streamlit", "run"] and cmd[4] == str(APP_PATH)
    assert "8599" in cmd and "127.0.0.1" in cmd


def test_report_is_one_self_contained_html(tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    scenario = Path(__file__).parent / "golden" / "policy_vllm.toml"
    res = invoke(["report", str(scenario), "-o", str(out), "--policies", "vllm,sarathi"])
    assert res.exit_code == 0, res.output + res.stderr
    page = out.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>")
    # Nothing is loaded from elsewhere: every script is inline, and the markup outside the
    # scripts has no src/href at all (no stylesheet, image or frame to fetch).
    scripts = re.findall(r"<script([^>]*)>", page, re.I)
    assert scripts and all("src" not in attrs.lower() for attrs in scripts)
    markup = re.sub(r"<script[^>]*>.*?</script>", "", page, flags=re.I | re.S)
    assert not re.search(r"""\b(src|href)\s*=""", markup, re.I)
    assert not re.search(r"""@import""", markup, re.I)
    assert "vegaEmbed" in page and page.count('class="figure"') >= 5
    # The comparison table holds each policy's numbers.
    for policy in ("vllm", "sarathi"):
        s = o1sim.simulate(o1sim.Scenario.from_file(scenario).with_overrides({"scheduler.policy": policy})).summary
        assert f"<td>{policy}</td>" in page
        assert _text(s, "ttft_ms.p99") in page


def test_report_comes_from_the_packaged_template_with_autoescape() -> None:
    """The page is the package's Jinja2 template (a file under o1sim/, so the wheel ships it),
    rendered with autoescape: markup in a name or an error message is text, not tags."""
    from importlib.resources import files

    from o1sim.report import TEMPLATE, _environment, build_report, render_html

    assert (files("o1sim") / "templates" / TEMPLATE).is_file()
    assert _environment().autoescape is True
    scenario = o1sim.Scenario.default().with_overrides({"workload.num_requests": 20})
    results, _ = build_report(scenario, ["vllm"])
    page = render_html(scenario, results, {"sarathi": o1sim.InfeasibleError("<b>too & big</b>")}, title="<i>x</i>")
    assert "<title>&lt;i&gt;x&lt;/i&gt;</title>" in page and "<i>x</i>" not in page
    assert '<p class="error">sarathi: InfeasibleError: &lt;b&gt;too &amp; big&lt;/b&gt;</p>' in page
    assert page.startswith("<!DOCTYPE html>") and page.endswith("</body></html>\n")


def test_report_bad_scenario_is_a_red_line(tmp_path: Path) -> None:
    res = invoke(["report", "--set", "scheduler.block_size=24", "-o", str(tmp_path / "r.html")])
    assert res.exit_code == 2
    assert "scheduler.block_size" in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "r.html").exists()


def test_model_check_tab_shows_a_counterexample_for_an_injected_bug() -> None:
    at = _app()
    at.selectbox(key="check_bug").set_value("leak_on_preempt").run()
    at.button(key="check_run").click().run()
    _no_exception(at)
    errors = [e.value for e in at.error]
    assert any("block_accounting" in e and "violated" in e for e in errors), errors
    assert any(m.label == "Violations" and m.value != "0" for m in at.metric)
    # The real policy passes the same configuration.
    at.selectbox(key="check_bug").set_value("(none: the real policy)").run()
    at.button(key="check_run").click().run()
    _no_exception(at)
    assert any("All properties hold" in s.value for s in at.success)


def test_model_check_tab_names_a_bad_field() -> None:
    at = _app()
    at.text_area(key="check_text").set_value('model = "llama-3-8b"\ngpu = "h200"\n[scheduler]\nblock_size = 24\n').run()
    at.button(key="check_run").click().run()
    _no_exception(at)
    assert any("scheduler.block_size" in e.value for e in at.error)


# --------------------------------------------------------------------------- topology


def _sidebar_order(at: AppTest) -> list[str]:
    """The sidebar's elements in order: widget keys, and ``error:<text>`` for errors."""
    out: list[str] = []

    def walk(node: Any) -> None:
        kind = getattr(node, "type", "")
        if kind == "error":
            out.append(f"error:{node.value}")
        elif getattr(node, "key", None) and not str(node.key).startswith("$$"):
            out.append(str(node.key))
        children = getattr(node, "children", None)
        if isinstance(children, dict):
            for i in sorted(children):
                walk(children[i])

    walk(at.sidebar)
    return out


def _error_after(at: AppTest, key: str, needle: str) -> None:
    """An error containing ``needle`` is the sidebar's next error after widget ``key``."""
    order = _sidebar_order(at)
    assert key in order, order
    errors = [e for e in order[order.index(key) + 1:] if e.startswith("error:")]
    assert errors and needle in errors[0], order


def test_topology_preset_shows_the_graph_and_busy_tp_links() -> None:
    at = _app()
    assert at.selectbox(key="topology").value == "(none)"
    assert any("choose one in the sidebar" in i.value for i in at.info)
    at.selectbox(key="topology").set_value("hgx-h200").run()
    _no_exception(at)
    assert not at.error
    table = next(d.value for d in at.dataframe if "utilisation" in getattr(d.value, "columns", []))
    # Default: 2 replicas × TP 4 on gpu0-3 and gpu4-7: every GPU's NVSwitch link carries its AllReduces.
    assert len(table) == 8 and (table["utilisation"] > 0).all()
    assert set(table["kind"]) == {"nvswitch"} and (table["state"] == "up").all()
    expected = o1sim.simulate(o1sim.Scenario.default().with_overrides({"topology": "hgx-h200"})).links
    assert table["utilisation"].max() == pytest.approx(expected["utilization"].max())
    assert not any("choose one in the sidebar" in i.value for i in at.info)


def test_link_degradation_event_from_the_sidebar() -> None:
    at = _app()
    at.selectbox(key="topology").set_value("hgx-h200").run()
    at.number_input(key="n_events").set_value(1).run()
    _no_exception(at)
    assert at.selectbox(key="ev0_link").value == "gpu0 – nvswitch0"
    at.number_input(key="ev0_at").set_value(30.0)
    at.number_input(key="ev0_pct").set_value(10.0).run()
    _no_exception(at)
    assert not at.error
    table = next(d.value for d in at.dataframe if "utilisation" in getattr(d.value, "columns", []))
    row = table[table["link"] == "gpu0 – nvswitch0"].iloc[0]
    assert row["state"] == "degraded" and row["GB/s"] == pytest.approx(45.0)
    scenario = o1sim.Scenario.default().with_overrides({"topology": "hgx-h200", "events": [
        {"at_s": 30.0, "kind": "set_link", "src": "gpu0", "dst": "nvswitch0", "bandwidth_gbps": 45.0}]})
    expected = o1sim.simulate(scenario).summary
    assert _metrics(at)["TPOT p99 (ms)"] == _text(expected, "tpot_ms.p99")
    assert expected["topology"]["events_applied"] == 1


def test_bad_event_shows_its_error_under_the_event() -> None:
    at = _app()
    at.selectbox(key="topology").set_value("hgx-h200").run()
    at.number_input(key="n_events").set_value(1).run()
    at.number_input(key="ev0_at").set_value(-5.0).run()
    _no_exception(at)
    _error_after(at, "ev0_link", "events[0].at_s")
    assert at.error and _stale(at)
    at.number_input(key="ev0_at").set_value(5.0).run()
    _no_exception(at)
    assert not at.error and at.metric and not _stale(at)


def test_bad_topology_shows_its_error_under_the_selector() -> None:
    at = _app()
    # A fabric too small for the deployment: named at the topology selector.
    at.selectbox(key="topology").set_value("pcie-4x-l40s").run()
    _no_exception(at)
    _error_after(at, "topology", "the topology has 4")
    # A bad topology or event in the scenario text: the error is under the topology section.
    text = at.text_area(key="scenario_text").value
    at.text_area(key="scenario_text").input('topology = "hgx-h2000"\n' + text).run()
    _no_exception(at)
    assert at.selectbox(key="topology").value == "(as in the scenario text)"
    _error_after(at, "topology", "unknown topology preset 'hgx-h2000'")
    bad_event = '\n[[events]]\nat_s = 1\nkind = "link_down"\nsrc = "gpu0"\ndst = "gpu9"\n'
    at.text_area(key="scenario_text").input('topology = "hgx-h200"\n' + text + bad_event).run()
    _no_exception(at)
    assert at.selectbox(key="topology").value == "hgx-h200"
    _error_after(at, "n_events", "events[0].dst")


def test_report_shows_the_topology(tmp_path: Path) -> None:
    from o1sim.report import build_report, render_html

    scenario = o1sim.Scenario.default().with_overrides({"topology": "hgx-h200", "workload.num_requests": 200})
    results, failures = build_report(scenario, ["vllm"])
    page = render_html(scenario, results, failures)
    assert "Busiest links" in page and "gpu0 – nvswitch0" in page
    assert "Topology: per-link utilisation" in page
    plain = render_html(o1sim.Scenario.default().with_overrides({"workload.num_requests": 50}),
                        *build_report(o1sim.Scenario.default().with_overrides({"workload.num_requests": 50}), ["vllm"]))
    assert "Busiest links" not in plain and "Topology:" not in plain


def test_topology_layout_is_deterministic_and_complete() -> None:
    from o1sim.topology import expand

    for name in o1sim.presets()["topologies"]:
        nodes = expand(name)["nodes"]
        pos = charts.topology_layout(nodes)
        assert set(pos) == {n["id"] for n in nodes}
        assert len(set(pos.values())) == len(pos), name  # no two nodes on one spot
        assert pos == charts.topology_layout(list(nodes))
    r = o1sim.simulate(o1sim.Scenario.default().with_overrides({"topology": "hgx-h200", "workload.num_requests": 50}))
    assert r.links is not None
    spec = charts.topology_chart(r.links).to_dict()  # kinds guessed from the ids
    assert spec["layer"]


def test_steps_tab_shows_a_steps_kernels() -> None:
    at = _app()
    at.toggle(key="steps_on").set_value(True).run()
    _no_exception(at)
    sc = o1sim.Scenario.default()
    r = o1sim.simulate(sc, record_steps=True)
    first = r.step_anatomy(0)
    text = " ".join(m.value for m in at.markdown)
    assert f"**Step 0** · replica {first.attrs['replica']}" in text and f"{len(first):,} kernels" in text
    table = next(d.value for d in at.dataframe if d.value.index.name == "operator")
    assert list(table.index) == list(dict.fromkeys(first.name))
    assert int(table["kernels"].sum()) == len(first)
    at.number_input(key="anatomy_step").set_value(25).run()
    _no_exception(at)
    other = r.step_anatomy(25)
    assert f"**Step 25** · replica {other.attrs['replica']}" in " ".join(m.value for m in at.markdown)


def test_a_trace_workload_sweeps_its_rate_scale() -> None:
    at = _app()
    rows = "".join(f"{i * 0.5:.1f},{200 + 10 * i},{20 + i}\n" for i in range(41))  # 40 s, 41 requests
    text = ('model = "llama-3-8b"\ngpu = "h100"\n[scheduler]\npolicy = "vllm"\n[workload.trace]\nformat = "csv"\n'
            f'text = """arrival_s,prompt_tokens,output_tokens\n{rows}"""\n')
    at.text_area(key="scenario_text").input(text).run()
    _no_exception(at)
    assert not at.error, [e.value for e in at.error]
    at.slider(key="sweep_points").set_value(3)
    at.button(key="sweep_run").click().run()
    _no_exception(at)
    sweep = at.session_state["sweep"]
    assert not sweep["failed"], sweep["failed"]
    rates = sorted({r["rate"] for r in sweep["rows"]})
    assert rates == pytest.approx([41 / 20 * f for f in (0.25, 0.875, 1.5)], rel=1e-6)


SMALL = "small · 8B on 1 H100, tight KV"


def _ran(at: AppTest) -> str:
    return next(c.value for c in at.caption if c.value.startswith("Ran: "))


def test_the_url_holds_the_experiment_and_a_new_session_restores_it() -> None:
    """Issue 28: the experiment lives in the URL's query parameters (only what differs from
    the preset), and a session opened on that URL (a reload, a shared link) runs it again."""
    at = _app()
    assert dict(at.query_params) == {}
    at.selectbox(key="preset").set_value(SMALL).run()
    at.selectbox(key="policy").set_value("sarathi").run()
    at.number_input(key="rate").set_value(12.0).run()
    at.number_input(key="replicas").set_value(2).run()
    at.multiselect(key="compare").set_value(["vllm", "sarathi"]).run()
    _no_exception(at)
    q = {k: v[0] if isinstance(v, list) else v for k, v in at.query_params.items()}
    assert q == {"preset": "small", "policy": "sarathi", "rate": "12", "replicas": "2", "compare": "vllm,sarathi"}
    assert any("URL holds the experiment" in c.value for c in at.sidebar.caption)

    again = AppTest.from_file(str(APP_PATH), default_timeout=TIMEOUT)
    again.query_params.update(q)
    again.run()
    _no_exception(again)
    assert again.selectbox(key="preset").value == SMALL
    assert again.selectbox(key="policy").value == "sarathi"
    assert again.number_input(key="rate").value == 12.0 and again.number_input(key="replicas").value == 2
    assert again.multiselect(key="compare").value == ["vllm", "sarathi"]
    assert _ran(again) == _ran(at) and _metrics(again) == _metrics(at)
    expected = o1sim.simulate(preset_scenario(SMALL).with_overrides(
        {"scheduler.policy": "sarathi", "workload.arrival.rate": 12.0, "deployment.replicas": 2})).summary
    assert _metrics(again)["TTFT p99 (ms)"] == _text(expected, "ttft_ms.p99")


def test_the_url_holds_the_topology_edits_and_the_edited_text() -> None:
    at = _app()
    at.selectbox(key="topology").set_value("hgx-h200").run()
    at.number_input(key="n_events").set_value(1).run()
    at.number_input(key="ev0_at").set_value(30.0)
    at.number_input(key="ev0_pct").set_value(25.0).run()
    _no_exception(at)
    q = {k: v[0] if isinstance(v, list) else v for k, v in at.query_params.items()}
    assert q == {"topology": "hgx-h200", "n_events": "1", "ev0_at": "30", "ev0_pct": "25"}
    again = AppTest.from_file(str(APP_PATH), default_timeout=TIMEOUT)
    again.query_params.update(q)
    again.run()
    _no_exception(again)
    assert again.selectbox(key="topology").value == "hgx-h200" and again.number_input(key="ev0_pct").value == 25.0
    assert _metrics(again) == _metrics(at)

    # An edited text goes in too (compressed), and the widgets apply on top of it.
    text = preset_scenario(SMALL).payload()[0].replace("num_requests = 120", "num_requests = 60")
    at.text_area(key="scenario_text").input(text).run()
    at.selectbox(key="policy").set_value("orca").run()
    q = {k: v[0] if isinstance(v, list) else v for k, v in at.query_params.items()}
    assert set(q) == {"text", "policy"} and q["policy"] == "orca"
    again = AppTest.from_file(str(APP_PATH), default_timeout=TIMEOUT)
    again.query_params.update(q)
    again.run()
    _no_exception(again)
    assert again.text_area(key="scenario_text").value == text
    assert again.number_input(key="num_requests").value == 60 and again.selectbox(key="policy").value == "orca"
    assert _metrics(again) == _metrics(at)


class _Upload:
    """What ``st.file_uploader`` returns for a file (AppTest cannot upload one)."""

    def __init__(self, name: str, text: str) -> None:
        self.name = name
        self._data = text.encode()

    def getvalue(self) -> bytes:
        return self._data


def test_capacity_and_plan_scale_an_uploaded_trace(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 28: on an uploaded trace, capacity and plan vary the trace's rate_scale (the core's
    trace reader divides every arrival time by it); the captions name the file and the scale."""
    from streamlit.delta_generator import DeltaGenerator

    rows = "".join(f"{i * 0.25:.2f},{600 + 7 * (i % 13)},{40 + i % 50}\n" for i in range(200))
    trace = f"arrival_s,prompt_tokens,output_tokens\n{rows}"
    real = DeltaGenerator.file_uploader

    def fake(self: Any, label: str, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("key") == "trace":
            real(self, label, *args, **kwargs)
            return _Upload("mine.csv", trace)
        return real(self, label, *args, **kwargs)

    monkeypatch.setattr(DeltaGenerator, "file_uploader", fake)
    at = AppTest.from_file(str(APP_PATH), default_timeout=TIMEOUT)
    at.run()
    at.selectbox(key="preset").set_value(SMALL).run()
    _no_exception(at)
    assert any("everything but the uploaded trace" in c.value for c in at.sidebar.caption)
    assert any(c.value.startswith("mine.csv: csv · 200 requests") for c in at.sidebar.caption)
    at.button(key="cap_run").click().run()
    _no_exception(at)
    scenario = preset_scenario(SMALL).with_overrides({"workload": trace_workload(trace)})
    expected = o1sim.capacity(scenario, {"ttft_p99_ms": 2000.0, "tpot_p99_ms": 50.0}, seeds=3)
    assert expected.rate is not None and expected.rate_scale is not None
    assert expected.rate_scale == pytest.approx(expected.rate / (200 / 49.75))
    assert _metrics(at)["Capacity (req/s)"] == f"{expected.rate:,.2f}"
    captions = [c.value for c in at.caption]
    assert any("the uploaded trace mine.csv" in c and f"rate_scale {expected.rate_scale:.4g}" in c
               for c in captions), captions

    at.number_input(key="plan_load").set_value(8.0)
    at.multiselect(key="plan_gpus").set_value(["h100"])
    at.multiselect(key="plan_tp").set_value([1, 2])
    at.multiselect(key="plan_replicas").set_value([1, 2]).run()
    at.button(key="plan_run").click().run()
    _no_exception(at)
    plan = o1sim.plan(scenario, {"gpu": ["h100"], "deployment.tp": [1, 2], "deployment.replicas": [1, 2],
                                 "scheduler.policy": ["vllm"]}, {"ttft_p99_ms": 2000.0, "tpot_p99_ms": 50.0},
                      load=8.0, seeds=1)
    assert plan.rate_scale == pytest.approx(8.0 / (200 / 49.75))
    captions = [c.value for c in at.caption]
    assert any("Planned on the uploaded trace mine.csv" in c and f"rate_scale {plan.rate_scale:.4g}" in c
               for c in captions), captions
    assert any(f"{int(plan.configs['feasible'].sum())} of 4 configurations meet the SLO and sustain the load" in c
               for c in captions), captions


def test_speculation_and_lora_on_a_text_without_a_workload_section() -> None:
    """The section's widgets add to the scenario as written: a text with no `workload` runs
    the core's default workload, with adapters added to it (not a workload of adapters alone)."""
    at = _app()
    at.text_area(key="scenario_text").input("model = 'llama-3-8b'\ngpu = 'h100'\n").run()
    _no_exception(at)
    at.number_input(key="lora_adapters").set_value(4).run()
    at.selectbox(key="spec_method").set_value("ngram").run()
    _no_exception(at)
    assert not at.error, [e.value for e in at.error]
    columns = [c for t in at.table for c in t.value.columns]
    assert "tokens per verify" in columns and "requests that waited for a LoRA slot" in columns, columns
    at.selectbox(key="spec_method").set_value("off").run()
    at.number_input(key="lora_adapters").set_value(0).run()
    assert not at.error and not at.table
