"""A scenario that came over the wire (the dashboard's upload or text box,
``Scenario.from_text`` without a base directory) may use only what comes with it: a field
naming a file of the machine is a ``ConfigError`` naming the field, nothing is read and
no line of the file is shown (issue 28: ``workload.trace.path = "/etc/passwd"`` echoed its
first line); a local file the user named still reads paths relative to its folder; and
``o1sim web`` serves the page's files only."""

from __future__ import annotations

import http.client
import json
import os
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

import o1sim
from o1sim._web import page_handler
from o1sim.sweeps import base_dict

ROOT = Path(__file__).resolve().parents[1]
REPRO = ROOT / "tests" / "repro" / "dashboard_trace_path_reads_server_file.toml"
BASE = 'model = "llama-3-8b"\ngpu = "h100"\n'
TRACE = "arrival_ms,prompt_tokens,output_tokens\n0,100,10\n50,120,12\n"


def _secret_lines() -> list[str]:
    try:
        return [ln for ln in Path("/etc/passwd").read_text().splitlines() if ln.strip()]
    except OSError:
        return []


def test_the_reproducer_is_refused_naming_the_field_and_showing_no_line() -> None:
    text = REPRO.read_text()
    with pytest.raises(o1sim.ConfigError) as e:
        o1sim.simulate(o1sim.Scenario.from_text(text, "toml"))
    assert e.value.field == "workload.trace.path"
    shown = str(e.value)
    assert not any(line in shown for line in _secret_lines()), shown
    assert "root:" not in shown and "/bin/" not in shown
    with pytest.raises(o1sim.ConfigError):  # validate() and trace() refuse too, unread
        o1sim.Scenario.from_text(text, "toml").validate()
    with pytest.raises(o1sim.ConfigError):
        o1sim.Scenario.from_text(text, "toml").trace()


@pytest.mark.parametrize(("extra", "field"), [
    ('[workload.trace]\npath = "/proc/self/environ"\nformat = "csv"\n', "workload.trace.path"),
    ('[workload.trace]\npath = "trace.csv"\n', "workload.trace.path"),
    ('[cost_model]\nprofile = "/etc/hostname"\n', "cost_model.profile"),
    ('topology = "/etc/fabric.toml"\n', "topology"),
    ('topology = "../fabric.json"\n', "topology"),
])
def test_every_file_field_in_text_is_a_config_error(extra: str, field: str) -> None:
    with pytest.raises(o1sim.ConfigError) as e:
        o1sim.simulate(o1sim.Scenario.from_text(BASE + extra, "toml"))
    assert e.value.field == field, e.value
    assert "names a file" in str(e.value)


def test_a_hf_config_path_and_json_text_are_refused_too() -> None:
    text = json.dumps({"model": {"hf_config": "/etc/passwd"}, "gpu": "h100"})
    with pytest.raises(o1sim.ConfigError) as e:
        o1sim.Scenario.from_text(text, "json").validate()
    assert e.value.field == "model.hf_config"
    # A JSON escape does not hide the key from the check (it reads the parsed table).
    escaped = '{"model": "llama-3-8b", "gpu": "h100", "workload": {"trace": {"p\\u0061th": "/etc/passwd"}}}'
    with pytest.raises(o1sim.ConfigError) as e:
        o1sim.simulate(o1sim.Scenario.from_text(escaped, "json"))
    assert e.value.field == "workload.trace.path"


def test_a_wire_dict_and_its_overrides_and_sweeps_are_refused() -> None:
    data = o1sim.Scenario.from_text(REPRO.read_text(), "toml").to_dict()
    sc = o1sim.Scenario(data, allow_files=False).with_overrides({"scheduler.policy": "orca"})
    with pytest.raises(o1sim.ConfigError) as e:
        sc.payload()
    assert e.value.field == "workload.trace.path"
    with pytest.raises(o1sim.ConfigError):
        base_dict(sc)
    # Presets and inline content are fine.
    ok = o1sim.Scenario.from_text(BASE + 'topology = "hgx-h100"\n[workload.trace]\ntext = """' + TRACE + '"""\n', "toml")
    assert o1sim.simulate(ok).summary["num_requests"] == 2


def test_a_base_dir_or_an_opt_in_reads_local_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "trace.csv").write_text(TRACE)
    text = BASE + '[workload.trace]\npath = "trace.csv"\n'
    assert o1sim.simulate(o1sim.Scenario.from_text(text, "toml", base_dir=tmp_path)).summary["num_requests"] == 2
    monkeypatch.chdir(tmp_path)
    assert o1sim.simulate(o1sim.Scenario.from_text(text, "toml", allow_files=True)).summary["num_requests"] == 2
    # A file the user named reads paths relative to its folder, as before.
    f = tmp_path / "sub" / "sc.toml"
    f.parent.mkdir()
    (f.parent / "trace.csv").write_text(TRACE + "90,10,3\n")
    f.write_text(text)
    monkeypatch.chdir(ROOT)
    assert o1sim.simulate(o1sim.Scenario.from_file(f)).summary["num_requests"] == 3


@pytest.fixture()
def page(tmp_path: Path) -> Iterator[tuple[str, int]]:
    root = tmp_path / "web"
    (root / "pkg").mkdir(parents=True)
    (root / "index.html").write_text("<html>page</html>")
    (root / "pkg" / "o1sim.js").write_text("// js")
    (root / "node_modules").mkdir()
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("secret")
    (tmp_path / "outside.txt").write_text("outside")
    os.symlink(tmp_path / "outside.txt", root / "link.txt")
    server = ThreadingHTTPServer(("127.0.0.1", 0), page_handler(root))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield "127.0.0.1", server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def _get(page: tuple[str, int], path: str) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection(*page, timeout=10)
    conn.request("GET", path)
    r = conn.getresponse()
    body = r.read()
    conn.close()
    return r.status, body


def test_o1sim_web_serves_the_page_and_no_listing_nor_hidden_or_outside_files(page: tuple[str, int]) -> None:
    assert _get(page, "/") == (200, b"<html>page</html>")
    assert _get(page, "/pkg/o1sim.js") == (200, b"// js")
    for path in ("/pkg/", "/node_modules/", "/.git/config", "/.git/", "/link.txt", "/../outside.txt",
                 "/%2e%2e/outside.txt"):
        status, body = _get(page, path)
        assert status == 404, (path, status, body[:200])
        assert b"outside" not in body and b"secret" not in body and b"Directory listing" not in body
