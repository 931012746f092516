"""Uploading a trace in real Chromium: the page (WASM core in its Worker) and the Streamlit
dashboard both read the file through the core's trace reader, run it, and show the same
numbers as the Python API; a bad trace shows the line it fails on next to the upload."""

from __future__ import annotations

from typing import Any

import o1sim
from o1sim import registry

from pagekit import OUT, runs, wait_ready
from pagekit import page_scenario as _page_scenario
from pagekit import rows as _rows

AZURE = (
    "TIMESTAMP,ContextTokens,GeneratedTokens\n"
    "2023-11-16 18:17:03.9799600,4808,10\n"
    "2023-11-16 18:17:04.0319600,3180,8\n"
    "2023-11-16 18:17:04.5000000,900,40\n"
    "2023-11-16 18:17:05.5000000,100,1\n"
)


def _upload(name: str, text: str) -> dict[str, Any]:
    return {"name": name, "mimeType": "text/plain", "buffer": text.encode()}


def test_the_page_replays_an_uploaded_trace(page: Any, server: str) -> None:
    page.goto(server)
    wait_ready(page)
    before = runs(page)
    page.set_input_files("#trace-file", files=[_upload("azure.csv", AZURE)])
    wait_ready(page, before)
    assert page.text_content("#trace-info") == "azure.csv: azure · 4 requests"
    sent = _page_scenario(page)
    assert sent["workload"] == {"trace": {"format": "auto", "text": AZURE}}
    assert "4 requests from azure.csv (azure)" in (page.text_content("#run-info") or "")
    rows = _rows(page)
    for policy, row in rows.items():
        s = o1sim.simulate({**sent, "scheduler": {**sent["scheduler"], "policy": policy}}).summary
        assert float(row["ttft_ms.p99"]) == s["ttft_ms"]["p99"], policy
        hit = s.get("prefix_cache_hit_rate")
        shown = row["prefix_cache_hit_rate"]
        assert (None if shown is None else float(shown)) == hit, (policy, shown, hit)
    # Rate scaling re-reads and re-runs it.
    before = runs(page)
    page.fill("#trace-rate-scale", "2")
    page.dispatch_event("#trace-rate-scale", "change")
    wait_ready(page, before)
    assert _page_scenario(page)["workload"]["trace"]["rate_scale"] == 2
    OUT.mkdir(exist_ok=True)
    page.screenshot(path=str(OUT / "trace-upload.png"), full_page=True)
    # A bad row: the error names its line, next to the upload; nothing is run.
    page.set_input_files("#trace-file", files=[_upload("bad.csv", AZURE.replace("3180", "x"))])
    page.wait_for_function("document.querySelector(\".field-error[data-for='workload.trace']\").textContent.length > 0")
    err = page.text_content(".field-error[data-for='workload.trace']") or ""
    assert "ConfigError" in err and "line 3: ContextTokens: expected a whole number" in err, err
    # Back to the generated workload.
    before = runs(page)
    page.click("#trace-clear")
    wait_ready(page, before)
    assert "trace" not in _page_scenario(page)["workload"]
    assert (page.text_content(".field-error[data-for='workload.trace']") or "") == ""


# --------------------------------------------------------------------------- the dashboard


def _metric(page: Any, label: str) -> Any:
    return page.locator("[data-testid='stMetric']", has_text=label).locator("[data-testid='stMetricValue']")


def test_the_dashboard_replays_an_uploaded_trace(browser: Any, dashboard: str) -> None:
    from playwright.sync_api import expect

    ctx = browser.new_context(viewport={"width": 1500, "height": 1100})
    page = ctx.new_page()
    try:
        page.goto(dashboard)
        expect(_metric(page, "TTFT p99 (ms)")).to_be_visible(timeout=120_000)
        page.locator("[data-testid='stSidebar'] input[type=file]").first.set_input_files(files=[_upload("azure.csv", AZURE)])
        expect(page.get_by_text("azure.csv: azure · 4 requests")).to_be_visible(timeout=120_000)
        scenario = o1sim.Scenario.default().with_overrides({"workload": {"trace": {"format": "auto", "text": AZURE}}})
        expected = o1sim.simulate(scenario).summary
        ttft = registry.shown_metric("ttft_ms.p99")
        expect(_metric(page, ttft.heading)).to_have_text(registry.format_metric(ttft, expected["ttft_ms"]["p99"]), timeout=120_000)
        expect(_metric(page, "Rejected")).to_have_text("0")
        hit = expected.get("prefix_cache_hit_rate")
        if hit is not None:
            expect(_metric(page, "Prefix-cache hit rate")).to_have_text(f"{hit * 100:,.1f}%")
        OUT.mkdir(exist_ok=True)
        page.screenshot(path=str(OUT / "dashboard-trace.png"), full_page=True)
        # A bad trace: the error names the line, under the upload.
        page.locator("[data-testid='stSidebar'] input[type=file]").first.set_input_files(
            files=[_upload("bad.csv", AZURE.replace("3180", "x"))])
        expect(page.get_by_text("line 3: ContextTokens: expected a whole number", exact=False).first).to_be_visible(
            timeout=120_000)
    finally:
        ctx.close()


def _shared_prefix_jsonl() -> str:
    """A Mooncake-format trace: 120 requests over 12 system prompts of 8 blocks (512 tokens
    each) plus one block of their own, 50 ms apart."""
    lines = []
    for i in range(120):
        g = (i * 7) % 12
        ids = [g * 8 + k for k in range(8)] + [1000 + i]
        lines.append(f'{{"timestamp": {50 * i}, "input_length": {9 * 512}, "output_length": 16, "hash_ids": {ids}}}')
    return "\n".join(lines) + "\n"


def test_the_cache_aware_routers_run_in_the_page_as_in_python(page: Any, server: str) -> None:
    page.goto(server)
    wait_ready(page)
    for p in ("orca", "sarathi", "o1pro"):
        page.uncheck(f"#policies input[value={p}]")
    before = runs(page)
    page.fill("[name='deployment.replicas']", "4")
    page.dispatch_event("[name='deployment.replicas']", "change")
    wait_ready(page, before)
    before = runs(page)
    text = _shared_prefix_jsonl()
    page.set_input_files("#trace-file", files=[_upload("shared.jsonl", text)])
    wait_ready(page, before)
    hit: dict[str, float] = {}
    for router in ("least_outstanding_tokens", "precise_prefix", "approx_prefix"):
        before = runs(page)
        page.select_option("[name='deployment.router']", router)
        wait_ready(page, before)
        sent = _page_scenario(page)
        assert sent["deployment"]["router"] == router and sent["deployment"]["replicas"] == 4
        # The box elides a long trace's text; the page sent the file as uploaded.
        assert sent["workload"]["trace"]["text"] == f"…({len(text):,} characters)"
        sent["workload"]["trace"]["text"] = text
        shown = float(_rows(page)["vllm"]["prefix_cache_hit_rate"])
        assert shown == o1sim.simulate({**sent, "scheduler": {**sent["scheduler"], "policy": "vllm"}}).summary["prefix_cache_hit_rate"]
        hit[router] = shown
    assert hit["precise_prefix"] > hit["least_outstanding_tokens"] and hit["approx_prefix"] > hit["least_outstanding_tokens"], hit
