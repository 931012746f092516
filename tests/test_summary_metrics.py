"""The run summary's metrics in the core's registry (``o1sim.presets()["summary_metrics"]``,
``crates/sim-core/src/metric_info.rs``): the typed accessor, the CLI, the report and the
Prometheus exporter showing each row where it says (the dashboard: ``tests/test_dashboard.py``,
the page: ``tests/web/test_summary_page.py``), the metric added through the table alone
(``output_tokens_per_s_per_gpu``: its value, and every surface its row names showing it), and
a scan refusing hand-kept metric labels in a front end. (The core's own checks:
``metric_info::tests`` and ``registry::tests``.)"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

import o1sim
from o1sim import registry

from clikit import invoke

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden"
NEW = "output_tokens_per_s_per_gpu"
#: Within one row of an HTML table.
ROW = r"(?:(?!</tr>).)*?"
FRONT_ENDS = [ROOT / "python/o1sim/cli.py", ROOT / "python/o1sim/report.py", ROOT / "python/o1sim/exports.py",
              *ROOT.glob("python/o1sim/templates/*"),
              *ROOT.glob("python/o1sim/dashboard/*.py"), *ROOT.glob("web/*.js"), ROOT / "web/index.html"]


@pytest.fixture(scope="module")
def vllm() -> o1sim.Result:
    return o1sim.simulate(GOLDEN / "policy_vllm.toml", record_steps=True)  # the Prometheus export needs its steps


def _text(summary: dict[str, Any], path: str) -> str:
    return registry.format_metric(registry.shown_metric(path), registry.metric_value(summary, path))


def test_the_accessor_is_the_cores_table() -> None:
    rows = registry.summary_metrics()
    assert rows == o1sim.presets()["summary_metrics"]
    assert len({r["label"] for r in rows}) == len(rows), "one label per metric"
    for r in rows:
        assert set(r["shown_in"]) <= set(registry.SURFACES), r["key"]
        assert ("prometheus" in r["shown_in"]) == (r["prometheus"] is not None), r["key"]
    # A distribution's statistics expand into one value each, labelled "<label> <stat>".
    page = registry.shown_metrics("page")
    assert [m.path for m in page[:2]] == ["ttft_ms.p50", "ttft_ms.p99"]
    assert page[1].label == "TTFT p99" and page[1].heading == "TTFT p99 (ms)"
    assert registry.shown_metric("e2e_ms.p99").heading == "E2E p99 (s)"
    with pytest.raises(ValueError):
        registry.shown_metrics("prometheus")
    with pytest.raises(KeyError):
        registry.shown_metric("ttft_ms.p42")


def test_values_are_written_as_the_table_says() -> None:
    e2e, kv, pre = (registry.shown_metric(p) for p in ("e2e_ms.p99", "kv_utilization_peak", "preemptions"))
    assert registry.format_metric(e2e, 12345.6) == "12.35"          # ms shown in s
    assert registry.format_metric(kv, 0.8523) == "85.2%"
    assert registry.format_metric(pre, 12345) == "12,345"
    # An exact tie rounds away from zero, as the page's toFixed does (web/metrics.js; Node: metrics.test.mjs).
    assert registry.format_metric(registry.shown_metric("ttft_ms.p99"), -1234567.25) == "-1,234,567.3"
    assert registry.format_metric(kv, -0.0) == "0.0%"
    assert registry.format_metric(pre, None) == registry.format_metric(kv, float("nan")) == "—"
    assert registry.metric_value({"ttft_ms": {"p99": None}}, "ttft_ms.p99") is None
    assert registry.metric_value({"a": True}, "a") is None


def test_the_cli_shows_the_tables_rows(vllm: o1sim.Result) -> None:
    res = invoke(["run", str(GOLDEN / "policy_vllm.toml")], width=200)
    assert res.exit_code == 0, res.output
    # Every scalar the table shows in the CLI is a line with its heading and value (gpu_hours:
    # under autoscaling only); the distributions' statistics are a grid.
    lines = res.output.splitlines()
    for m in registry.shown_metrics("cli"):
        if "." not in m.path and m.path in vllm.summary:
            line = next(ln for ln in lines if f" {m.heading} " in ln)
            assert _text(vllm.summary, m.path) in line, m.heading
    grid = next(ln for ln in lines if " TTFT (ms) " in ln).split("│")[2:-1]
    assert [c.strip() for c in grid] == [_text(vllm.summary, f"ttft_ms.{q}") for q in ("mean", "p50", "p90", "p99")]
    # compare: one table of every comparison value when it fits, else several, none cut.
    for width in ("400", "80"):
        res = invoke(["compare", str(GOLDEN / "policy_vllm.toml"), "--policies", "vllm"],
                                 env={"COLUMNS": width})
        assert res.exit_code == 0, res.output
        cells = [c for ln in res.output.splitlines() if ln.split()[:1] == ["vllm"] for c in ln.split()[1:]]
        assert cells == [_text(vllm.summary, m.path) for m in registry.shown_metrics("compare")], width
        assert "…" not in res.output and max(len(ln.rstrip()) for ln in res.output.splitlines()) <= int(width)


def test_the_report_shows_the_tables_rows(vllm: o1sim.Result) -> None:
    from o1sim.report import render_html

    sc = o1sim.Scenario.from_file(GOLDEN / "policy_vllm.toml")
    sarathi = o1sim.simulate(sc.with_overrides({"scheduler.policy": "sarathi"}))
    page = render_html(sc, {"vllm": vllm, "sarathi": sarathi})
    runs = {"vllm": vllm, "sarathi": sarathi}
    for m in registry.shown_metrics("report"):
        assert f"<th>{m.heading}</th>" in page, m.heading
        for name, r in runs.items():
            cell = re.search(rf'<tr><td>{name}</td>{ROW}<td data-key="{re.escape(m.path)}"( class="best")?>([^<]*)</td>', page)
            assert cell is not None and cell.group(2) == _text(r.summary, m.path), (name, m.path)
        # The better of the two in bold, where the table says which way is better and they differ.
        values = {name: registry.metric_value(r.summary, m.path) for name, r in runs.items()}
        bold = {name for name in runs
                if re.search(rf'<tr><td>{name}</td>{ROW}<td data-key="{re.escape(m.path)}" class="best">', page)}
        if m.lower_is_better is None or len(set(values.values())) < 2:
            assert not bold, m.path
        else:
            pick = min if m.lower_is_better else max
            assert bold == {pick(values, key=lambda n: values[n] or 0.0)}, m.path


def test_prometheus_families_come_from_the_table(vllm: o1sim.Result) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    fams = {f.name: f for f in text_string_to_metric_families(vllm.to_prometheus())}
    for row in registry.summary_metrics():
        if row["prometheus"] is None:
            continue
        fam = fams[row["prometheus"]["name"]]
        assert fam.type == row["prometheus"]["type"], row["key"]
        assert fam.documentation.startswith(row["doc"]), row["key"]


def test_output_throughput_per_gpu_is_per_gpu_second_held() -> None:
    plain = o1sim.simulate(GOLDEN / "policy_vllm.toml")
    s, gpus = plain.summary, plain.deployment["gpus"]
    assert s[NEW] == pytest.approx(s["output_tokens_per_s"] / gpus, rel=1e-12)
    # Under autoscaling: over the GPU time the replicas actually held (gpu_hours).
    scaled = o1sim.simulate(GOLDEN / "scaling_step.toml")
    req = scaled.requests
    out_tokens = req[req["status"] == "finished"]["output_tokens"].sum()
    assert scaled.summary[NEW] == pytest.approx(out_tokens / (scaled.summary["gpu_hours"] * 3600), rel=1e-9)


def test_the_new_metric_reaches_every_surface_its_row_names(vllm: o1sim.Result) -> None:
    """Added as its computation and one row: the CLI, the comparison tables, the dashboard, the
    page, the report and Prometheus show it (the tests above, over every row, check each
    value; this one that the row says so, and the exporter's series)."""
    from prometheus_client.parser import text_string_to_metric_families

    row = next(r for r in registry.summary_metrics() if r["key"] == NEW)
    assert row["shown_in"] == list(registry.SURFACES) and row["lower_is_better"] is False
    for surface in registry.SURFACES[:-1]:
        assert NEW in [m.path for m in registry.shown_metrics(surface)], surface
    res = invoke(["run", str(GOLDEN / "policy_vllm.toml")])
    line = next(ln for ln in res.output.splitlines() if registry.shown_metric(NEW).heading in ln)
    assert _text(vllm.summary, NEW) in line
    fams = {f.name: f for f in text_string_to_metric_families(vllm.to_prometheus())}
    gauge = fams["o1sim:" + NEW]
    assert gauge.type == "gauge" and [s.value for s in gauge.samples] == [vllm.summary[NEW]]
    assert gauge.samples[0].labels == {"model_name": vllm.deployment["model"]["name"]}


def _quoted(text: str) -> set[str]:
    return set(re.findall(r'"([^"\n]*)"', text)) | set(re.findall(r"'([^'\n]*)'", text))


def test_no_front_end_keeps_metric_labels_of_its_own() -> None:
    """A front end that writes a metric's label or heading itself (``"TTFT p99 (ms)"``, a
    ``<th>`` of the page), or pairs a label of its own with a summary key (``("KV peak",
    "kv_utilization_peak", ...)``), keeps a second table: it fails here. Single-word labels
    (``Steps``, ``Rejected``) are common words and only caught in such pairs."""
    rows = registry.summary_metrics()
    names: set[str] = set()
    for surface in registry.SURFACES[:-1]:
        for m in registry.shown_metrics(surface):
            names |= {m.heading, m.label}
    names |= {r["label"] for r in rows} | {registry.heading(r["label"], r["unit"]) for r in rows}
    names = {n for n in names if " " in n}
    paths = {r["key"] for r in rows} | {f"{r['key']}.{st['name']}" for r in rows for st in r["stats"]}
    keys = "|".join(sorted(map(re.escape, paths), key=len, reverse=True))
    pair = re.compile(rf"""[(\[]\s*["']([^"'\n]*[A-Z /][^"'\n]*)["']\s*,[^\n]*?["']({keys})["']""")
    header = re.compile(r"<th>([^<]+)</th>")
    for f in FRONT_ENDS:
        text = f.read_text(encoding="utf-8")
        rel = f.relative_to(ROOT)
        own = sorted(_quoted(text) & names) + [h for h in header.findall(text) if h.strip() in names]
        assert not own, f"{rel} writes metric labels itself ({own}): read o1sim.registry / presets().summary_metrics"
        m = pair.search(text)
        assert m is None, f"{rel} pairs its own label {m.group(1)!r} with {m.group(2)!r}: read the registry's"


def test_the_scan_catches_the_old_hand_lists() -> None:
    """The lists the front ends kept before the table (as they were written) fail the scan."""
    rows = registry.summary_metrics()
    paths = {r["key"] for r in rows} | {f"{r['key']}.{st['name']}" for r in rows for st in r["stats"]}
    keys = "|".join(sorted(map(re.escape, paths), key=len, reverse=True))
    pair = re.compile(rf"""[(\[]\s*["']([^"'\n]*[A-Z /][^"'\n]*)["']\s*,[^\n]*?["']({keys})["']""")
    old = ['    ("TTFT p50 ms", lambda s: _num(_get(s, "ttft_ms.p50"), 1)),',
           '    ("KV mean %", "kv_utilization_mean", 100.0),',
           '        ("Preemptions", _fmt(s["preemptions"], "", 0)),']
    assert all(pair.search(line) for line in old)
    assert not pair.search('for label, key in (("route changes", "route_changes"),')
    assert not pair.search('(("ttft_p99_ms", "ttft_ms.p99"), ("goodput_rps", "goodput_rps"))')
