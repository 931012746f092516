"""Any Hugging Face model: a config.json (path or dict) in a scenario, Hugging Face ids as
preset names, the presets listing (CLI and Python) with parameter counts, and the GPU
variants with what prices each."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

import o1sim

from clikit import invoke

HF_CONFIGS = Path(__file__).parent / "data" / "hf_configs"

SMALL: dict[str, Any] = {
    "seed": 3,
    "gpu": "h200",
    "workload": {
        "num_requests": 24,
        "arrival": {"kind": "poisson", "rate": 4.0},
        "prompt": {"kind": "fixed", "value": 600},
        "output": {"kind": "fixed", "value": 16},
    },
}


def _scenario(model: Any, **deployment: Any) -> dict[str, Any]:
    return {**SMALL, "model": model, "deployment": {"tp": 1, **deployment}}


# The GPUs each sample needs (the larger models split over TP).
TP = {"llama-4-scout-17b-16e.json": 8, "yi-34b.json": 2, "mixtral-8x7b-v0.1.json": 2, "qwen3-30b-a3b.json": 2,
      "deepseek-v3.json": 8}


@pytest.mark.parametrize("name", sorted(p.name for p in HF_CONFIGS.glob("*.json")))
def test_a_config_json_of_each_family_runs(name: str) -> None:
    config = json.loads((HF_CONFIGS / name).read_text())
    res = o1sim.simulate(_scenario({"hf_config": config}, tp=TP.get(name, 1)))
    assert res.summary["finished"] == 24
    model = res.deployment["model"]
    text = config.get("text_config", config)
    assert model["layers"] == text["num_hidden_layers"] and model["hidden"] == text["hidden_size"]


def test_a_config_json_path_is_read_relative_to_the_scenario_file(tmp_path: Path) -> None:
    shutil.copy(HF_CONFIGS / "gemma-2-9b.json", tmp_path / "config.json")
    (tmp_path / "scenario.toml").write_text(
        'seed = 3\ngpu = "h100"\n[model]\nhf_config = "config.json"\nname = "my-gemma"\n'
        "[workload]\nnum_requests = 10\narrival = {kind = \"poisson\", rate = 2.0}\n"
        'prompt = {kind = "fixed", value = 300}\noutput = {kind = "fixed", value = 8}\n'
    )
    res = o1sim.simulate(str(tmp_path / "scenario.toml"))
    model = res.deployment["model"]
    assert model["name"] == "my-gemma" and model["post_norms"] and model["tied_embeddings"]
    assert model["local_attention"] == {"kind": "sliding", "tokens": 4096, "layers": 21}
    # The same through the CLI, and through a dict scenario whose path is relative to cwd.
    res_cli = invoke(["validate", str(tmp_path / "scenario.toml")])
    assert res_cli.exit_code == 0, res_cli.output
    assert json.loads(res_cli.stdout)["deployment"]["model"]["name"] == "my-gemma"


def test_hugging_face_ids_name_presets_case_insensitively() -> None:
    a = o1sim.simulate(_scenario("meta-llama/Llama-3.1-8B"))
    b = o1sim.simulate(_scenario("llama-3.1-8b"))
    assert a.deployment["model"] == b.deployment["model"]
    assert a.summary == b.summary
    c = o1sim.simulate(_scenario("META-LLAMA/LLAMA-3.1-8B-INSTRUCT"))
    assert c.summary == b.summary


def test_predict_step_takes_a_config_path_and_follows_the_architecture() -> None:
    batch = [{"new_tokens": 1, "context_tokens": 30000}] * 8
    windowed = o1sim.predict_step({"hf_config": str(HF_CONFIGS / "mistral-7b-v0.1.json")}, "h200", batch=batch)
    full = o1sim.predict_step({"hf_config": str(HF_CONFIGS / "mistral-7b-v0.1.json"), "local_attention": {
        "kind": "sliding", "tokens": 1_000_000, "layers": 32}}, "h200", batch=batch)
    w, f = ({o.op: o.ms for o in p.breakdown}["attention"] for p in (windowed, full))  # vLLM: one call a layer
    assert w < 0.25 * f, (w, f)
    scout = o1sim.predict_step("meta-llama/Llama-4-Scout-17B-16E", "h200", tp=8, batch=[{"new_tokens": 1, "context_tokens": 100}] * 4)
    ops = {o.op for o in scout.breakdown}
    assert {"moe_router", "gate_up", "shared_gate_up", "qk_norm"} <= ops, ops
    qwen = o1sim.predict_step("Qwen/Qwen2.5-7B-Instruct", "h200", batch=[{"new_tokens": 1, "context_tokens": 100}])
    assert "qkv_bias" in {o.op for o in qwen.breakdown}


# Every preset and its published parameter count (see crates/sim-core/src/catalog/tests.rs
# for the sources): the listing carries the count the core computes.
PUBLISHED = {
    "llama-2-7b": 6.74e9, "llama-2-70b": 68.98e9, "codellama-34b": 33.74e9, "llama-3.1-8b": 8.03e9,
    "llama-3.1-70b": 70.55e9, "llama-3.1-405b": 405.85e9, "llama-3.3-70b": 70.55e9, "qwen2.5-7b": 7.61e9,
    "qwen2.5-72b": 72.7e9, "qwen3-14b": 14.8e9, "qwen3-32b": 32.8e9, "mistral-nemo-12b": 12.25e9,
    "yi-34b": 34.39e9, "mixtral-8x7b": 46.7e9, "mixtral-8x22b": 141e9, "llama-4-scout": 108.64e9,
}


def test_presets_list_the_models_with_their_ids_and_sizes() -> None:
    models = {m["name"]: m for m in o1sim.presets()["models"]}
    for name, published in PUBLISHED.items():
        assert name in models, name
        assert abs(models[name]["params"] / published - 1) < 0.01, (name, models[name]["params"])
    assert "meta-llama/Llama-3.1-8B" in models["llama-3.1-8b"]["hf_ids"]
    assert models["llama-3.1-8b"]["max_context"] == 131072
    assert models["mixtral-8x7b"]["active_params"] < models["mixtral-8x7b"]["params"] / 3
    # Every listed id resolves to its preset.
    for name, m in models.items():
        by_name = o1sim.predict_step(name, "h200", tp=4, batch=[{"new_tokens": 1}]).total_ms
        for hf_id in m["hf_ids"]:
            assert o1sim.predict_step(hf_id, "h200", tp=4, batch=[{"new_tokens": 1}]).total_ms == by_name, hf_id


def test_presets_list_the_gpu_variants_and_what_prices_them() -> None:
    gpus = {g["name"]: g for g in o1sim.presets()["gpus"]}
    for name in ("h100-pcie", "h100-nvl", "a100-40g", "a100-80g-pcie"):
        assert gpus[name]["priced_by"] == "roofline", name
    for name in ("h100", "h200", "a100-80g"):
        assert gpus[name]["priced_by"] == name
    # The roofline prices a variant, a shipped profile its own part.
    p = o1sim.predict_step("llama-3-8b", "h100-pcie", batch=[{"new_tokens": 1, "context_tokens": 500}])
    assert p.profile is None
    assert o1sim.predict_step("llama-3-8b", "h100", batch=[{"new_tokens": 1, "context_tokens": 500}]).profile


def test_cli_presets_shows_models_and_gpus_tables() -> None:
    res = invoke(["presets", "models"], env={"COLUMNS": "400"})
    assert res.exit_code == 0, res.output
    for text in ("llama-4-scout", "meta-llama/Llama-3.1-8B", "107.8B", "17.2B", "shared expert", "chunked 8192 on 36 layers"):
        assert text in res.stdout, text
    res = invoke(["presets", "gpus"], env={"COLUMNS": "400"})
    assert res.exit_code == 0, res.output
    for text in ("h100-nvl", "a100-80g-pcie", "priced by", "roofline", "1,755"):
        assert text in res.stdout, text
