"""Speculative decoding and multi-LoRA as a Python and CLI user meets them: the summary
tables, `plan` over method × k, the CLI's tables, typed errors naming the field, and the
same bytes from the same seed (the golden `speculative_lora` runs them through WASM and
Chromium too)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import o1sim

from clikit import invoke

GOLDEN = Path(__file__).resolve().parent / "golden" / "speculative_lora.toml"


def batch(n: int, spec: Any = None, **sched: Any) -> dict[str, Any]:
    s: dict[str, Any] = {"policy": "vllm", "max_num_seqs": 256, **sched}
    if spec is not None:
        s["speculative"] = spec
    return {"seed": 3, "model": "llama-3.1-8b", "gpu": "h100", "scheduler": s,
            "workload": {"requests": [{"arrival_ms": 0.0, "prompt_tokens": 256, "output_tokens": 128}] * n}}


def test_speculation_shows_in_the_summary_and_steps() -> None:
    r = o1sim.simulate(batch(4, {"method": "eagle3", "num_tokens": 3, "acceptance_rate": 0.7}), record_steps=True)
    sp = r.summary["speculative"]
    assert 0.4 < sp["acceptance_rate"] < 0.6 and 2.2 < sp["tokens_per_verify"] < 2.8
    assert r.deployment["speculative"]["method"] == "eagle3"
    steps = r.steps
    assert (steps["spec_tokens"] > 0).any() and (steps["spec_tokens"] <= 3 * steps["decode_seqs"]).all()
    # The drafter is a row of the step's anatomy.
    i = int(steps.index[steps["spec_tokens"] > 0][0])
    assert r.step_anatomy(i)["name"].str.startswith("drafter (eagle3").any()
    plain = o1sim.simulate(batch(4))
    assert r.summary["tpot_ms"]["mean"] < 0.7 * plain.summary["tpot_ms"]["mean"]


def test_plan_over_method_and_k() -> None:
    sc = batch(1, {"method": "eagle3", "num_tokens": 1, "acceptance_rate": 0.6})
    sc["workload"] = {"num_requests": 40, "arrival": {"kind": "poisson", "rate": 2.0},
                      "prompt": {"kind": "fixed", "value": 256}, "output": {"kind": "fixed", "value": 128}}
    p = o1sim.plan(o1sim.Scenario(sc), {"scheduler.speculative.method": ["eagle3", "ngram"],
                                        "scheduler.speculative.num_tokens": [1, 3]},
                   slo={"tpot_p99_ms": 5.0}, seeds=1, latency="e2e_p99_ms")
    assert len(p.configs) == 4
    e2e = {(c["scheduler.speculative.method"], c["scheduler.speculative.num_tokens"]): c["e2e_p99_ms"] for c in p.configs.to_dict("records")}
    assert e2e[("eagle3", 3)] < e2e[("eagle3", 1)]
    assert p.cheapest is not None


def test_lora_slot_waits_vanish_with_more_slots() -> None:
    def run(m: int) -> dict[str, Any]:
        sc = {"seed": 2, "model": "llama-3.1-8b", "gpu": "h100", "scheduler": {"policy": "vllm", "max_loras": m},
              "workload": {"num_requests": 120, "arrival": {"kind": "poisson", "rate": 10.0},
                           "prompt": {"kind": "fixed", "value": 300}, "output": {"kind": "fixed", "value": 60},
                           "lora": {"adapters": 8, "rank": 8}}}
        return o1sim.simulate(sc).summary
    few, many = run(1), run(8)
    assert few["lora"]["slot_waits"] > 0 and few["lora"]["adapter_loads"] > 8
    assert many["lora"]["slot_waits"] == 0 and many["lora"]["adapter_loads"] <= 8


@pytest.mark.parametrize("override, field", [
    ({"scheduler.speculative": {"method": "eagle3", "num_tokens": 3}}, "scheduler.speculative.acceptance_rate"),
    ({"scheduler.speculative": {"method": "mtp"}}, "scheduler.speculative.method"),
    ({"scheduler.max_loras": 2}, "scheduler.max_loras"),
    ({"workload.lora": {"adapters": 4, "target_modules": ["qkv_proj"]}}, "workload.lora.target_modules[0]"),
])
def test_bad_settings_are_config_errors_naming_the_field(override: dict[str, Any], field: str) -> None:
    with pytest.raises(o1sim.ConfigError) as e:
        o1sim.simulate(o1sim.Scenario(batch(1)).with_overrides(override))
    assert e.value.field == field, e.value


def test_cli_prints_both_tables_and_the_same_bytes_as_python(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    res = invoke(["run", str(GOLDEN), "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert "speculative decoding" in res.output and "LoRA adapters" in res.output
    assert "requests that waited for a slot" in res.output
    assert out.read_text() == o1sim.simulate(str(GOLDEN)).to_json()
    summary = json.loads(out.read_text())["summary"]
    assert summary["lora"]["slot_waits"] > 0 and summary["speculative"]["accepted_tokens"] > 0
