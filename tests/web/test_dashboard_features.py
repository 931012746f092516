"""Speculative decoding and LoRA in the dashboard, in real Chromium: the sidebar's section
turns EAGLE-3 on (its acceptance shows in the Compare tab and the URL keeps the choice),
adapters beyond the one slot show slot waits, and off leaves the scenario as it was."""

from __future__ import annotations

from typing import Any

from test_dashboard_browser import app, choose, ran, settle  # noqa: F401  (the fixture)

from pagekit import OUT


def features_text(pg: Any) -> str:
    tables = pg.locator("[data-testid=stTable]").all_text_contents()
    return " ".join(t for t in tables if "tokens per verify" in t or "LoRA slot" in t)


def test_speculation_and_lora_in_the_sidebar(app: Any) -> None:  # noqa: F811
    choose(app, "preset", "small · 8B on 1 H100, tight KV")
    assert "Ran: llama-3-8b on 1 × h100" in ran(app)
    assert features_text(app) == ""
    app.locator("[data-testid=stExpander] summary", has_text="Speculative decoding & LoRA").click()
    app.locator(".st-key-spec_method input[role=combobox]").wait_for(state="visible")
    choose(app, "spec_method", "eagle3")
    text = features_text(app)
    assert "tokens per verify" in text, text
    assert "spec_method=eagle3" in app.url
    # 16 adapters through the default single slot: requests wait for it.
    box = app.locator(".st-key-lora_adapters input")
    box.fill("16")
    box.press("Enter")
    settle(app)
    text = features_text(app)
    assert "requests that waited for a LoRA slot" in text, text
    assert "lora_adapters=16" in app.url
    OUT.mkdir(exist_ok=True)
    app.screenshot(path=str(OUT / "dashboard_features.png"), full_page=True)
    # Both off again: no table.
    box.fill("0")
    box.press("Enter")
    settle(app)
    choose(app, "spec_method", "off")
    assert features_text(app) == ""
    assert "spec_method" not in app.url and "lora_adapters" not in app.url
