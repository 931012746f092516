"""The page's models in headless Chromium: the picker lists every preset (with its size and
Hugging Face ids, read from the core's presets), and a Hugging Face config.json pasted or
uploaded replaces the preset — giving the Python API's numbers, errors next to the box
naming the key, and surviving a reload through the URL."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import o1sim

from pagekit import OUT, runs, wait_ready
from pagekit import page_scenario as _page_scenario
from pagekit import rows as _rows

HF_CONFIGS = Path(__file__).parent.parent / "data" / "hf_configs"
SMALL = "bursty small (llama-3-8b on one H100, gamma cv 3)"


def _small(page: Any, server: str, live: bool = True) -> None:
    """The small experiment with vllm only (`live`: runs follow edits, else only Run)."""
    page.goto(server)
    wait_ready(page)
    if not live:
        page.uncheck("#live")
    before = runs(page)
    page.select_option("#preset", SMALL)
    for p in ("orca", "sarathi", "o1pro"):
        page.uncheck(f"#policies input[value={p}]")
    page.click("#run")
    page.wait_for_function("n => Number(document.body.dataset.runs) > n && document.body.dataset.runs === document.body.dataset.started && !document.querySelector('#summary tr[data-policy=orca]')", arg=before)


def _paste(page: Any, text: str) -> None:
    if not page.evaluate("document.querySelector('#hf-config-box').open"):
        page.click("#hf-config-box summary")  # as a user opens it
    before = runs(page)
    page.fill("#hf-config", text)
    page.click("#run")
    page.wait_for_function("n => Number(document.body.dataset.runs || 0) > n || document.querySelector('#status').textContent === 'failed'", arg=before)


def _slot(page: Any) -> str:
    return page.text_content(".field-error[data-for='model.hf_config']") or ""


def test_the_model_picker_lists_every_preset_with_its_size(page: Any, server: str) -> None:
    page.goto(server)
    wait_ready(page)
    options = page.evaluate("[...document.querySelectorAll('[name=model] option')].map(o => [o.value, o.textContent, o.title])")
    models = o1sim.presets()["models"]
    assert [o[0] for o in options] == [m["name"] for m in models]
    by_name = {o[0]: o for o in options}
    assert by_name["llama-4-scout"][1] == "llama-4-scout (108B, 17.2B active)"
    assert by_name["llama-2-7b"][1] == "llama-2-7b (6.7B)"
    assert "meta-llama/Llama-3.1-8B" in by_name["llama-3.1-8b"][2]
    gpus = page.evaluate("[...document.querySelectorAll('[name=gpu] option')].map(o => o.value)")
    assert gpus == [g["name"] for g in o1sim.presets()["gpus"]]
    assert {"h100-pcie", "h100-nvl", "a100-40g", "a100-80g-pcie"} <= set(gpus)


def test_a_pasted_config_json_replaces_the_preset_with_python_numbers(page: Any, server: str) -> None:
    _small(page, server, live=False)
    config = json.loads((HF_CONFIGS / "mistral-7b-v0.1.json").read_text())
    _paste(page, json.dumps(config, indent=2))
    sent = _page_scenario(page)
    assert sent["model"] == {"hf_config": config}
    assert page.is_disabled("[name=model]")
    assert "uses this config.json" in (page.text_content("#hf-config-note") or "")
    row = _rows(page)["vllm"]
    s = o1sim.simulate({**sent, "scheduler": {**sent["scheduler"], "policy": "vllm"}}).summary
    assert float(row["tpot_ms.p99"]) == s["tpot_ms"]["p99"]
    assert float(row["ttft_ms.p99"]) == s["ttft_ms"]["p99"]
    # The same sizes as the preset-free Llama 3 8B would not give: a sliding window and a
    # 32k vocabulary make it another model.
    assert s != o1sim.simulate({**sent, "model": "llama-3-8b", "scheduler": {**sent["scheduler"], "policy": "vllm"}}).summary
    OUT.mkdir(exist_ok=True)
    page.screenshot(path=str(OUT / "hf-config.png"), full_page=True)

    # Broken configs: the error names the key, next to the box; the results dim.
    broken = {k: v for k, v in config.items() if k != "num_attention_heads"}
    _paste(page, json.dumps(broken))
    assert _slot(page).startswith("ConfigError: model.hf_config.num_attention_heads: is required"), _slot(page)
    assert "invalid" in (page.get_attribute("#hf-config", "class") or "")
    assert "stale" in (page.get_attribute("#results", "class") or "")
    _paste(page, json.dumps({**config, "model_type": "rwkv"}))
    assert "model.hf_config.model_type: unknown model_type 'rwkv'" in _slot(page), _slot(page)
    _paste(page, '{"model_type": "llama",')
    assert _slot(page).startswith("ConfigError: model.hf_config: not valid JSON"), _slot(page)
    # Clearing the box goes back to the preset.
    _paste(page, "")
    assert _slot(page) == ""
    assert _page_scenario(page)["model"] == "llama-3-8b"
    assert not page.is_disabled("[name=model]")


def test_an_uploaded_config_json_runs_and_the_url_restores_it(page: Any, server: str, browser: Any) -> None:
    _small(page, server)
    page.set_input_files("#hf-config-file", str(HF_CONFIGS / "gemma-3-1b-it.json"))
    # The file is read, then the edit re-runs (debounced): wait for the run that sent it.
    page.wait_for_function(
        "() => document.querySelector('#scenario-json').textContent.includes('gemma3_text')"
        " && !document.querySelector('#status').textContent.startsWith('running')",
        timeout=30_000,
    )
    config = json.loads((HF_CONFIGS / "gemma-3-1b-it.json").read_text())
    assert json.loads(page.input_value("#hf-config")) == config
    assert _page_scenario(page)["model"] == {"hf_config": config}
    rows = _rows(page)
    assert "hf_config=" in page.url
    ctx = browser.new_context()
    try:
        other = ctx.new_page()
        other.goto(page.url)
        wait_ready(other)
        assert json.loads(other.input_value("#hf-config")) == config
        assert _rows(other) == rows
    finally:
        ctx.close()
