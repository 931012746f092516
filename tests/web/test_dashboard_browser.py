"""The dashboard in real Chromium: `streamlit run` of the app, driven by Playwright as a user
drives it. AppTest cannot show the bug these tests guard against: a browser sends every
widget's value back on each rerun, so widgets that kept the previous scenario's values
(after a preset switch, an upload or a text edit) were applied on top of the new scenario
at the next click. Each flow here changes the scenario, then only the policy, and checks
what ran (the caption is read from the result itself: model, GPUs, policy)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pagekit import OUT

#: A first render runs the default scenario under four policies.
SLOW_MS = 180_000


@pytest.fixture()
def app(browser: Any, dashboard: str) -> Iterator[Any]:
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = ctx.new_page()
    pg.set_default_timeout(SLOW_MS)
    pg.goto(dashboard)
    settle(pg)
    try:
        yield pg
    finally:
        ctx.close()


def settle(pg: Any) -> None:
    """Wait until the script's run is over and the results (or an error) are drawn."""
    pg.wait_for_timeout(300)  # let a rerun the last input triggered begin
    pg.wait_for_function(
        """() => document.querySelector('[data-testid=stApp]')?.dataset.testScriptState === 'notRunning'
               && ([...document.querySelectorAll('[data-testid=stCaptionContainer]')]
                     .some(c => c.textContent.startsWith('Ran: '))
                   && document.querySelectorAll('[data-testid=stMetricValue]').length >= 8
                   || !!document.querySelector('[data-testid=stAlertContentError]'))""")
    pg.wait_for_timeout(200)
    pg.wait_for_selector("[data-testid=stApp][data-test-script-state=notRunning]", state="attached")


def ran(pg: Any) -> str:
    """The caption of what ran last (not greyed-out previous results)."""
    caps = pg.eval_on_selector_all(
        "[data-testid=stCaptionContainer]",
        "cs => cs.filter(c => !c.closest('.st-key-stale_results')).map(c => c.textContent)")
    runs = [c for c in caps if c.startswith("Ran: ")]
    assert runs, caps
    return str(runs[0])


def choose(pg: Any, key: str, option: str) -> None:
    """Pick `option` in the selectbox of widget `key`, then wait for the rerun."""
    pg.locator(f".st-key-{key} input[role=combobox]").click()
    pg.get_by_role("option", name=option, exact=True).click()
    settle(pg)


def widget_value(pg: Any, key: str) -> str:
    return str(pg.locator(f".st-key-{key} input").first.input_value())


def test_preset_then_policy_runs_the_preset(app: Any) -> None:
    assert re.match(r"Ran: llama-3-70b on 8 × h200 \(2 × TP 4\) · policy vllm", ran(app)), ran(app)
    choose(app, "preset", "small · 8B on 1 H100, tight KV")
    assert "Ran: llama-3-8b on 1 × h100" in ran(app)
    # The sidebar follows the new scenario …
    assert widget_value(app, "model") == "llama-3-8b" and widget_value(app, "gpu") == "h100"
    # … and only changing the policy keeps it.
    choose(app, "policy", "sarathi")
    assert re.match(r"Ran: llama-3-8b on 1 × h100 \(1 × TP 1\) · policy sarathi", ran(app)), ran(app)
    assert widget_value(app, "tp") == "1"


def test_upload_then_policy_runs_the_file(app: Any, tmp_path: Path) -> None:
    f = tmp_path / "mine.toml"
    f.write_text('name = "uploaded"\nmodel = "llama-3-8b"\ngpu = "a100-80g"\n[deployment]\nreplicas = 3\n'
                 '[workload]\nnum_requests = 40\narrival = { kind = "poisson", rate = 5.0 }\n'
                 'prompt = { kind = "fixed", value = 200 }\noutput = { kind = "fixed", value = 20 }\n')
    app.locator(".st-key-source label", has_text="Upload a file").click()
    settle(app)
    app.locator(".st-key-upload input[type=file]").set_input_files(str(f))
    settle(app)
    assert "Ran: llama-3-8b on 3 × a100-80g (3 × TP 1)" in ran(app), ran(app)
    choose(app, "policy", "orca")
    assert re.match(r"Ran: llama-3-8b on 3 × a100-80g \(3 × TP 1\) · policy orca · from mine\.toml", ran(app)), ran(app)


def test_an_upload_naming_a_server_file_shows_a_refusal_and_none_of_the_file(app: Any) -> None:
    """Issue 28: an uploaded scenario with workload.trace.path = "/etc/passwd" is refused by
    name, and no line of the server's /etc/passwd reaches the page."""
    repro = Path(__file__).resolve().parents[1] / "repro" / "dashboard_trace_path_reads_server_file.toml"
    app.locator(".st-key-source label", has_text="Upload a file").click()
    settle(app)
    app.locator(".st-key-upload input[type=file]").set_input_files(str(repro))
    settle(app)
    errors = app.locator("[data-testid=stAlertContentError]").all_text_contents()
    assert any("workload.trace.path" in e and "names a file" in e for e in errors), errors
    page = app.locator("body").inner_text()
    try:
        secret = [ln for ln in Path("/etc/passwd").read_text().splitlines() if ln.strip()]
    except OSError:
        secret = []
    assert not any(ln in page for ln in secret) and "root:x" not in page


def test_text_edit_then_policy_runs_the_text(app: Any) -> None:
    app.get_by_text("Edit the scenario text").click()
    box = app.locator(".st-key-scenario_text textarea")
    box.fill('model = "llama-3-8b"\ngpu = "l40s"\n[deployment]\nreplicas = 2\n[workload]\nnum_requests = 30\n'
             'arrival = { kind = "poisson", rate = 4.0 }\nprompt = { kind = "fixed", value = 100 }\n'
             'output = { kind = "fixed", value = 10 }\n')
    box.press("Control+Enter")
    settle(app)
    assert "Ran: llama-3-8b on 2 × l40s" in ran(app), ran(app)
    choose(app, "policy", "o1pro")
    assert re.match(r"Ran: llama-3-8b on 2 × l40s \(2 × TP 1\) · policy o1pro", ran(app)), ran(app)
    assert widget_value(app, "gpu") == "l40s" and widget_value(app, "replicas") == "2"


def test_an_error_keeps_the_previous_results_greyed(app: Any) -> None:
    before = ran(app)
    tp = app.locator(".st-key-tp input")
    tp.fill("3")
    tp.press("Enter")
    settle(app)
    assert app.locator("[data-testid=stAlertContentError]").count() >= 1
    stale = app.locator(".st-key-stale_results")
    assert stale.count() == 1
    assert float(stale.evaluate("e => getComputedStyle(e).opacity")) < 0.6
    caps = stale.locator("[data-testid=stCaptionContainer]").all_text_contents()
    assert before in caps, caps


@pytest.mark.parametrize("width", [800, 1024, 1440])
def test_metric_values_are_not_truncated(browser: Any, dashboard: str, width: int) -> None:
    ctx = browser.new_context(viewport={"width": width, "height": 900})
    pg = ctx.new_page()
    pg.set_default_timeout(SLOW_MS)
    try:
        pg.goto(dashboard)
        settle(pg)
        cut = pg.eval_on_selector_all(
            "[data-testid=stMetricValue]",
            "ms => ms.map(m => [m.textContent, m.scrollWidth, m.clientWidth, "
            "[...m.querySelectorAll('*')].some(c => c.scrollWidth > c.clientWidth + 1)])")
        assert len(cut) >= 8, cut
        for text, scroll, client, inner in cut:
            assert scroll <= client + 1 and not inner, f"{text!r} truncated at {width} px: {cut}"
        OUT.mkdir(exist_ok=True)
        pg.screenshot(path=str(OUT / f"dashboard-{width}.png"))
    finally:
        ctx.close()


def test_stopping_o1sim_dashboard_stops_its_server() -> None:
    """`o1sim dashboard` is the server: terminating it (Ctrl-C, a supervisor) leaves nothing
    listening (it used to start Streamlit as a child and leave it running)."""
    import socket
    import subprocess
    import sys
    import time
    import urllib.request

    pytest.importorskip("streamlit")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    health = f"http://127.0.0.1:{port}/_stcore/health"
    proc = subprocess.Popen([sys.executable, "-m", "o1sim", "dashboard", "--port", str(port), "--no-browser"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(health, timeout=2):
                    break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "o1sim dashboard did not start"
                time.sleep(0.3)
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    time.sleep(0.5)
    with pytest.raises(OSError):
        urllib.request.urlopen(health, timeout=2)


def _wait_ran(pg: Any, policy: str) -> None:
    """Wait (on the page's content, no fixed sleep) until the run shown is of ``policy``."""
    pg.wait_for_function(
        """p => document.querySelector('[data-testid=stApp]')?.dataset.testScriptState === 'notRunning'
               && [...document.querySelectorAll('[data-testid=stCaptionContainer]')]
                    .some(c => !c.closest('.st-key-stale_results') && c.textContent.startsWith('Ran: ')
                               && c.textContent.includes(' · policy ' + p + ' · '))""", arg=policy)


def test_reloading_the_url_restores_the_policy(browser: Any, dashboard: str) -> None:
    """Issue 28: the experiment is in the URL's query parameters, so a reload runs it again."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = ctx.new_page()
    pg.set_default_timeout(SLOW_MS)
    try:
        pg.goto(dashboard)
        _wait_ran(pg, "vllm")
        pg.locator(".st-key-policy input[role=combobox]").click()
        pg.get_by_role("option", name="sarathi", exact=True).click()
        pg.wait_for_url(re.compile(r"[?&]policy=sarathi(&|$)"))
        _wait_ran(pg, "sarathi")
        url = pg.url
        pg.reload()
        _wait_ran(pg, "sarathi")
        assert widget_value(pg, "policy") == "sarathi"
        assert pg.url == url
        assert "URL holds the experiment" in pg.locator("section[data-testid=stSidebar]").inner_text()
    finally:
        ctx.close()
