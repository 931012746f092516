"""Speculative decoding and LoRA on the page, in headless Chromium: choosing EAGLE-3 shows
its acceptance and lowers TPOT, policies off vLLM's scheduler show the core's typed error
for the field, adapters beyond the slots show slot waits, and the URL restores it all."""

from __future__ import annotations

from typing import Any

from pagekit import OUT, runs, wait_ready
from pagekit import page_scenario as _page_scenario
from pagekit import rows as _rows


def settle(page: Any, before: int) -> None:
    """Wait for the run after the last edit (edits are debounced into one run)."""
    wait_ready(page, before)


def features(page: Any) -> dict[str, dict[str, Any]]:
    return page.evaluate(
        """() => Object.fromEntries([...document.querySelectorAll('#features tbody tr')].map(tr => [
            tr.dataset.policy, {acceptance: tr.children[1].dataset.acceptance ?? null,
                                slotWaits: tr.children[2].dataset.slotWaits ?? null,
                                text: tr.textContent}]))"""
    )


def test_speculation_and_lora_on_the_page(page: Any, server: str) -> None:
    page.goto(server)
    wait_ready(page)
    assert page.locator("#features").is_hidden()
    plain = float(_rows(page)["vllm"]["tpot_ms.p99"])
    before = runs(page)
    page.select_option("[name='scheduler.speculative.method']", "eagle3")
    page.fill("[name='scheduler.speculative.num_tokens']", "3")
    page.fill("[name='scheduler.speculative.acceptance_rate']", "0.7")
    page.wait_for_function("() => document.querySelector('#features tr[data-policy=vllm]') !== null", timeout=60_000)
    settle(page, before)
    f = features(page)
    assert 0.45 < float(f["vllm"]["acceptance"]) < 0.58, f
    assert "tokens per verify" in f["vllm"]["text"]
    sent = _page_scenario(page)
    assert sent["scheduler"]["speculative"] == {"method": "eagle3", "num_tokens": 3, "acceptance_rate": 0.7}
    assert "draft_model" not in sent["scheduler"]["speculative"]
    assert float(_rows(page)["vllm"]["tpot_ms.p99"]) < plain
    # Orca reserves KV per request off vLLM's scheduler: its row shows the core's error.
    orca = page.text_content("#summary tr[data-policy=orca]") or ""
    assert "ConfigError: scheduler.speculative" in orca, orca
    # The draft model's picker shows only for the method that runs one.
    assert page.locator("[name='scheduler.speculative.draft_model']").is_hidden()
    page.select_option("[name='scheduler.speculative.method']", "draft_model")
    assert page.locator("[name='scheduler.speculative.draft_model']").is_visible()
    before = runs(page)
    page.select_option("[name='scheduler.speculative.method']", "eagle3")
    # LoRA: 16 adapters through one slot.
    page.fill("[name='workload.lora.adapters']", "16")
    page.fill("[name='scheduler.max_loras']", "1")
    page.wait_for_function("() => document.querySelector('#features tr[data-policy=vllm] td[data-slot-waits]') !== null",
                           timeout=60_000)
    settle(page, before)
    f = features(page)
    assert int(f["vllm"]["slotWaits"]) > 0, f
    assert "adapter loads" in f["vllm"]["text"]
    assert _page_scenario(page)["workload"]["lora"] == {"adapters": 16}
    OUT.mkdir(exist_ok=True)
    page.screenshot(path=str(OUT / "speculative_lora.png"), full_page=True)
    # The URL holds the experiment: a reload restores the settings and the tables.
    url = page.url
    page.goto("about:blank")
    page.goto(url)
    page.wait_for_function("() => document.querySelector('#features tr[data-policy=vllm] td[data-slot-waits]') !== null",
                           timeout=60_000)
    assert page.input_value("[name='scheduler.speculative.method']") == "eagle3"
    assert page.input_value("[name='workload.lora.adapters']") == "16"
    # Off again: the sections leave the scenario and the table goes.
    before = runs(page)
    page.select_option("[name='scheduler.speculative.method']", "")
    page.fill("[name='workload.lora.adapters']", "")
    page.wait_for_function("() => document.querySelector('#features').hidden", timeout=60_000)
    settle(page, before)
    sent = _page_scenario(page)
    assert "speculative" not in sent["scheduler"] and "max_loras" not in sent["scheduler"] and "lora" not in sent["workload"]
