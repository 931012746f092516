"""One list of policies: python/o1sim/registry.json names exactly the core's policies
(``o1sim.presets()``), and the CLI, the dashboard and the page read it instead of keeping
lists of their own. (The page's own use of it, in Chromium: tests/web/test_registry_page.py;
the core's side: crates/sim-core/tests/registry.rs.)"""

from __future__ import annotations

import re
from pathlib import Path

from click.testing import CliRunner

import o1sim
from o1sim import cli, registry
from o1sim.dashboard import charts

ROOT = Path(__file__).resolve().parents[1]


def test_registry_names_the_cores_policies_in_order() -> None:
    cat = o1sim.presets()
    assert registry.policy_names() == [*cat["policies"], *cat["topology_policies"]]
    assert registry.default_policies() == cat["policies"]
    colors = list(registry.policy_colors().values())
    assert len(set(colors)) == len(colors), "two policies share a colour"
    assert all(re.fullmatch(r"#[0-9a-f]{6}", c) for c in colors)


def test_cli_compares_the_registrys_policies_by_default() -> None:
    assert cli.DEFAULT_POLICIES.split(",") == o1sim.presets()["policies"]
    for command in ("compare", "report"):
        out = CliRunner().invoke(cli.main, [command, "--help"], terminal_width=200).output
        assert ",".join(o1sim.presets()["policies"]) in out.replace("\n", " ").replace(" ", ""), command


def test_dashboard_charts_colour_each_policy_as_the_registry_says() -> None:
    assert list(charts.POLICY_ORDER) == registry.policy_names()
    names = ["o1pro", "vllm", "disagg", "mine"]
    enc = charts.policy_color(names).to_dict()
    domain, colors = enc["scale"]["domain"], enc["scale"]["range"]
    assert domain == ["vllm", "o1pro", "disagg", "mine"]          # registry order, unknown last
    assert colors[:3] == [registry.policy_colors()[n] for n in domain[:3]]
    assert colors[3] not in registry.policy_colors().values()


def test_no_front_end_keeps_a_policy_list_of_its_own() -> None:
    """A literal list of the co-located policies, or a policy → colour table, anywhere in
    the CLI, the dashboard, the report or the page is a second registry: it fails here."""
    names = o1sim.presets()["policies"]
    files = [ROOT / "python/o1sim/cli.py", ROOT / "python/o1sim/report.py", *ROOT.glob("python/o1sim/dashboard/*.py"),
             *ROOT.glob("web/*.js")]
    full_list = re.compile(r"[\[(]\s*" + r"\s*,\s*".join(f"[\"']{n}[\"']" for n in names))
    joined = re.compile("[\"']" + ",".join(names) + "[\"']")
    colour_entry = re.compile(r"[\"']?(" + "|".join(map(re.escape, registry.policy_names())) + r")[\"']?\s*:\s*[\"']#[0-9a-fA-F]{3,6}")
    for f in files:
        text = f.read_text(encoding="utf-8")
        rel = f.relative_to(ROOT)
        assert not full_list.search(text), f"{rel} lists the policies itself: read o1sim.registry / pkg/registry.json"
        assert not joined.search(text), f"{rel} lists the policies itself"
        assert not colour_entry.search(text), f"{rel} colours a policy itself: use the registry's colour"
