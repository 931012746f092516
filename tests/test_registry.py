"""One registry, in the core: ``o1sim.presets()`` lists the policies (with each one's label,
colour and summary), routers, arrival, length and event kinds, GPUs, models and topologies,
each the list the scenario parser accepts; the CLI and the dashboard show exactly those
options and no front end keeps a list of its own. (The page's options, in Chromium:
tests/web/test_registry_page.py; the core's own check of each list against its parser:
``registry::tests`` in crates/sim-core/src/registry.rs.)"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import o1sim
from o1sim import cli, registry
from o1sim.dashboard import charts

from clikit import invoke

ROOT = Path(__file__).resolve().parents[1]
SMALL: dict[str, Any] = {
    "model": "llama-3-8b", "gpu": "h100",
    "workload": {"num_requests": 4, "arrival": {"kind": "poisson", "rate": 1},
                 "prompt": {"kind": "fixed", "value": 8}, "output": {"kind": "fixed", "value": 4}},
}


def _with(path: str, value: Any) -> o1sim.Scenario:
    return o1sim.Scenario(json.loads(json.dumps(SMALL))).with_overrides({path: value})


def _near_misses(name: str) -> list[str]:
    return [f"{name}x", name[1:], name.upper(), f" {name}", ""]


def test_the_python_registry_is_the_cores() -> None:
    cat = o1sim.presets()
    info = cat["policy_info"]
    assert registry.policy_names() == [p["name"] for p in info] == [*cat["policies"], *cat["topology_policies"]]
    assert registry.default_policies() == cat["policies"] == [p["name"] for p in info if not p["needs_topology"]]
    assert registry.policy_colors() == {p["name"]: p["color"] for p in info}
    assert registry.policy_labels() == {p["name"]: p["label"] for p in info}
    assert registry.routers() == cat["routers"]
    assert registry.arrival_kinds() == cat["arrival_kinds"]
    assert registry.length_kinds() == cat["length_kinds"]
    assert [e["name"] for e in registry.event_kinds()] == [e["name"] for e in cat["event_kinds"]]
    assert registry.engine_names() == [e["name"] for e in cat["engines"]]
    colors = list(registry.policy_colors().values())
    assert len(set(colors)) == len(colors), "two policies share a colour"
    assert all(re.fullmatch(r"#[0-9a-f]{6}", c) for c in colors)
    assert not (ROOT / "python/o1sim/registry.json").exists(), "the registry lives in the core"


def test_every_name_in_presets_is_accepted_by_the_parser_and_near_misses_are_not() -> None:
    """Through the binding: what presets() lists validates, anything close to it does not."""
    cat = o1sim.presets()
    for policy in cat["policies"]:
        assert _with("scheduler.policy", policy).validate()["scenario"]["scheduler"]["policy"] == policy
    for policy in cat["topology_policies"]:
        sc = _with("scheduler.policy", policy).with_overrides(
            {"topology": "hgx-h100", "deployment.replicas": 2, "deployment.prefill_replicas": 1})
        assert sc.validate()["scenario"]["scheduler"]["policy"] == policy
    for router in cat["routers"]:
        assert _with("deployment.router", router).validate()["scenario"]["deployment"]["router"] == router
    for kind in cat["arrival_kinds"]:
        arrival: dict[str, Any] = {"kind": kind, "rate": 2}
        if kind == "gamma":
            arrival["cv"] = 2
        sc = _with("workload.arrival", arrival)
        if kind == "poisson_count":
            data = sc.to_dict()
            del data["workload"]["num_requests"]
            data["workload"]["duration_s"] = 2
            sc = o1sim.Scenario(data)
        sc.validate()
    samples = {"fixed": {"value": 8}, "uniform": {"min": 4, "max": 8}, "normal": {"mean": 8, "std": 2},
               "lognormal": {"mean": 8, "sigma": 0.5}, "zipf": {"min": 1, "max": 8, "s": 1.1}}
    assert list(samples) == cat["length_kinds"], "a new length kind needs a sample here"
    for kind, fields in samples.items():
        _with("workload.prompt", {"kind": kind, **fields}).validate()
    events = {"link": {"src": "gpu0", "dst": "nvswitch0"}, "gpu": {"node": "gpu7"}}
    for ev in cat["event_kinds"]:
        extra = {"bandwidth_gbps": 10.0} if ev["name"] == "set_link" else {}
        sc = _with("topology", "hgx-h100").with_overrides(
            {"events": [{"kind": ev["name"], "at_s": 1.0, **events[ev["target"]], **extra}]})
        sc.validate()
    for path, names in [("scheduler.policy", cat["policies"] + cat["topology_policies"]),
                        ("deployment.router", cat["routers"]),
                        ("workload.arrival.kind", cat["arrival_kinds"]),
                        ("workload.prompt.kind", cat["length_kinds"])]:
        for name in names:
            for bad in _near_misses(name):
                if bad in names:
                    continue
                with pytest.raises(o1sim.ConfigError) as info:
                    _with(path, bad).validate()
                assert info.value.field == path, (path, bad)
    for name in [e["name"] for e in cat["event_kinds"]]:
        for bad in _near_misses(name):
            sc = _with("topology", "hgx-h100").with_overrides(
                {"events": [{"kind": bad, "at_s": 1.0, "src": "gpu0", "dst": "nvswitch0"}]})
            with pytest.raises(o1sim.ConfigError) as info:
                sc.validate()
            assert (info.value.field or "").startswith("events[0]"), bad


def test_cli_options_are_the_presets() -> None:
    cat = o1sim.presets()
    assert cli.DEFAULT_POLICIES.split(",") == cat["policies"]
    for command in ("compare", "report"):
        out = invoke([command, "--help"], width=400).output
        flat = " ".join(out.split())
        assert ",".join(cat["policies"]) in flat.replace(" ", ""), command
        for p in cat["policy_info"]:
            assert f"{p['name']} ({p['label']}" in flat, (command, p["name"])
    out = " ".join(invoke(["predict", "--help"], width=400).output.split())
    for e in cat["engines"]:
        assert f"{e['name']} ({e['label']}" in out, e["name"]
    bad = invoke(["predict", "--batch", "1:1023", "--engine", "trtllmx"])
    assert bad.exit_code == 2 and "trtllm" in bad.output
    listed = json.loads(invoke(["presets", "--json"]).output)
    assert listed == cat
    for section in ("policy_info", "routers", "arrival_kinds", "length_kinds", "event_kinds"):
        res = invoke(["presets", section], width=400)
        assert res.exit_code == 0, res.output
        for entry in cat[section]:
            assert (entry["name"] if isinstance(entry, dict) else entry) in res.output, (section, entry)


def test_dashboard_charts_colour_each_policy_as_the_registry_says() -> None:
    assert list(charts.POLICY_ORDER) == registry.policy_names()
    names = ["o1pro", "vllm", "disagg", "mine"]
    enc = charts.policy_color(names).to_dict()
    domain, colors = enc["scale"]["domain"], enc["scale"]["range"]
    assert domain == ["vllm", "o1pro", "disagg", "mine"]          # registry order, unknown last
    assert colors[:3] == [registry.policy_colors()[n] for n in domain[:3]]
    assert colors[3] not in registry.policy_colors().values()


def test_dashboard_options_are_the_presets() -> None:
    """The sidebar's and the tabs' choices, as Streamlit draws them."""
    pytest.importorskip("streamlit")
    from streamlit.testing.v1 import AppTest

    from o1sim.dashboard import APP_PATH

    cat = o1sim.presets()
    at = AppTest.from_file(str(APP_PATH), default_timeout=120)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.selectbox(key="policy").options == cat["policies"]
    assert at.multiselect(key="compare").options == cat["policies"]
    assert at.selectbox(key="router").options == cat["routers"]
    assert at.selectbox(key="model").options == [m["name"] for m in cat["models"]]
    assert at.selectbox(key="gpu").options == [g["name"] for g in cat["gpus"]]
    assert at.selectbox(key="topology").options == ["(none)", *cat["topologies"]]
    assert at.selectbox(key="check_policy").options == cat["policies"]
    assert at.multiselect(key="plan_policies").options == cat["policies"]
    assert at.multiselect(key="plan_gpus").options == [g["name"] for g in cat["gpus"]]
    at.selectbox(key="topology").set_value("hgx-h200").run()
    at.number_input(key="n_events").set_value(1).run()
    assert at.selectbox(key="ev0_kind").options == [e["label"] for e in cat["event_kinds"]]
    gpu_kind = next(e["label"] for e in cat["event_kinds"] if e["target"] == "gpu")
    at.selectbox(key="ev0_kind").set_value(gpu_kind).run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.selectbox(key="ev0_link").label == "GPU"


def test_no_front_end_keeps_a_list_of_its_own() -> None:
    """A literal list of the co-located policies, a policy → colour table, or a run of the
    core's kind names (routers, arrival, length, event kinds) anywhere in the CLI, the
    dashboard, the report or the page is a second registry: it fails here."""
    cat = o1sim.presets()
    names = cat["policies"]
    files = [ROOT / "python/o1sim/cli.py", ROOT / "python/o1sim/report.py", *ROOT.glob("python/o1sim/templates/*"),
             *ROOT.glob("python/o1sim/dashboard/*.py"),
             *ROOT.glob("web/*.js"), ROOT / "web/index.html"]
    full_list = re.compile(r"[\[(]\s*" + r"\s*,\s*".join(f"[\"']{n}[\"']" for n in names))
    joined = re.compile("[\"']" + ",".join(names) + "[\"']")
    colour_entry = re.compile(r"[\"']?(" + "|".join(map(re.escape, registry.policy_names())) + r")[\"']?\s*:\s*[\"']#[0-9a-fA-F]{3,6}")
    kind_lists = {section: [e["name"] if isinstance(e, dict) else e for e in cat[section]]
                  for section in ("routers", "arrival_kinds", "length_kinds", "event_kinds")}

    def lists_two_of(text: str, kinds: list[str]) -> bool:
        # Two of a section's names quoted one after the other: a list or <option>s.
        q = "|".join(map(re.escape, kinds))
        return re.search(rf"[\"']({q})[\"']\s*,\s*[\"']({q})[\"']|<option>({q})</option>\s*<option>({q})<", text) is not None

    for f in files:
        text = f.read_text(encoding="utf-8")
        rel = f.relative_to(ROOT)
        assert not full_list.search(text), f"{rel} lists the policies itself: read o1sim.presets()"
        assert not joined.search(text), f"{rel} lists the policies itself"
        assert not colour_entry.search(text), f"{rel} colours a policy itself: use the registry's colour"
        for section, kinds in kind_lists.items():
            assert not lists_two_of(text, kinds), f"{rel} lists {section} itself: read o1sim.presets()['{section}']"
