"""Speculative decoding and multi-LoRA: what they do to a step and to a run.

* EAGLE-3 (k = 3, per-position acceptance 0.7) on Llama-3.1-8B, one H100, at batch 1 to
  256: ``batch`` requests of 512 prompt + 256 output tokens arriving together, TPOT with and
  without speculation. Then the other methods at batch 1 and 64 (a draft model with low
  acceptance must lose), and MTP on DeepSeek-V3 (H200 × 8) with its published acceptance.
* The anatomy of one step: batch 8 decoding with EAGLE-3 (the target's verification and
  the drafter's passes), from ``o1sim.step_anatomy`` on the shape the run recorded.
* LoRA: 400 Poisson requests at 12 req/s on Llama-3.1-8B / H100 through 32 Zipf-popular
  adapters of rank 16, with ``max_loras`` 1 → 32 (slot waits, loads, TTFT); then rank 8 → 64
  with 4 adapters and 4 slots (the LoRA kernels' time in a batch-64 decode step, TPOT).

``docs/speculative-lora.md`` holds the tables this prints (``tests/test_speculative_doc.py``
checks the document says what this computes).

    .venv/bin/python benchmarks/speculative.py            # print the tables
    .venv/bin/python benchmarks/speculative.py --write    # and put them in the document
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any, Optional

import o1sim
from o1sim import _core

DOC = Path(__file__).resolve().parents[1] / "docs" / "speculative-lora.md"
FIDELITY = DOC.parent / "fidelity.md"
BATCHES = [1, 2, 4, 8, 16, 32, 64, 128, 256]
EAGLE3 = {"method": "eagle3", "num_tokens": 3, "acceptance_rate": 0.7}

#: (label, scheduler.speculative) of the method table, on Llama-3.1-8B / H100.
METHODS: list[tuple[str, dict[str, Any]]] = [
    ("eagle3, k = 3, 0.7", EAGLE3),
    ("eagle, k = 3, 0.6", {"method": "eagle", "num_tokens": 3, "acceptance_rate": 0.6}),
    ("ngram, k = 4, 0.3", {"method": "ngram", "num_tokens": 4, "acceptance_rate": 0.3}),
    ("draft llama-3.2-1b, k = 4, 0.6", {"method": "draft_model", "draft_model": "llama-3.2-1b", "num_tokens": 4, "acceptance_rate": 0.6}),
    ("draft llama-3.2-1b, k = 4, 0.1", {"method": "draft_model", "draft_model": "llama-3.2-1b", "num_tokens": 4, "acceptance_rate": 0.1}),
]


def batch(n: int, spec: Optional[dict[str, Any]], model: str = "llama-3.1-8b", gpu: str = "h100", tp: int = 1,
          output: int = 256) -> dict[str, Any]:
    """``n`` requests arriving together: a batch of ``n`` decoding side by side."""
    sched: dict[str, Any] = {"policy": "vllm", "max_num_seqs": 512, "max_num_batched_tokens": 8192}
    if spec is not None:
        sched["speculative"] = spec
    return {"seed": 5, "model": model, "gpu": gpu, "deployment": {"tp": tp}, "scheduler": sched,
            "workload": {"requests": [{"arrival_ms": 0.0, "prompt_tokens": 512, "output_tokens": output}] * n}}


def _tpot(sc: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    s = o1sim.simulate(sc).summary
    return float(s["tpot_ms"]["mean"]), s


def eagle_rows() -> list[dict[str, Any]]:
    out = []
    for n in BATCHES:
        base, _ = _tpot(batch(n, None))
        spec, s = _tpot(batch(n, EAGLE3))
        out.append({"batch": n, "tpot_ms": base, "tpot_spec_ms": spec, "speedup": base / spec,
                    "tokens_per_verify": s["speculative"]["tokens_per_verify"]})
    return out


def method_rows() -> list[dict[str, Any]]:
    out = []
    for label, spec in METHODS:
        row: dict[str, Any] = {"method": label}
        for n in (1, 64):
            base, _ = _tpot(batch(n, None))
            sp, s = _tpot(batch(n, spec))
            row[f"speedup_{n}"] = base / sp
            row["acceptance"] = s["speculative"]["acceptance_rate"]
        out.append(row)
    for n in (1, 8, 64):
        base, _ = _tpot(batch(n, None, "deepseek-v3", "h200", 8, 128))
        sp, s = _tpot(batch(n, {"method": "mtp"}, "deepseek-v3", "h200", 8, 128))
        out.append({"method": f"mtp on deepseek-v3 (H200 × 8), batch {n}", f"speedup_{n}": base / sp,
                    "acceptance": s["speculative"]["acceptance_rate"]})
    return out


def shape_anatomy(sc: dict[str, Any], shape: dict[str, Any]) -> dict[str, Any]:
    """The anatomy of a step of ``shape`` (a bare step shape) priced by ``sc``'s cost model."""
    a: dict[str, Any] = json.loads(_core.step_anatomy_json(*o1sim.Scenario(sc).payload(), json.dumps(shape)))
    return a


def anatomy() -> dict[str, Any]:
    """One decode step of batch 8 with EAGLE-3: its kernels' rows summed by kind."""
    sc = batch(8, EAGLE3)
    r = o1sim.simulate(sc, record_steps=True)
    i = next(i for i, s in enumerate(r.step_records) if s["shape"].get("spec_tokens") == 24 and not s["shape"]["prefill"])
    shape = r.step_records[i]["shape"]
    k = r.step_anatomy(i)
    drafter = k[k["name"].str.startswith("drafter")]
    drafter_ms = float((drafter["end_us"] - drafter["start_us"]).sum()) / 1e3
    plain = shape_anatomy(batch(8, None), {"decode_seqs": 8, "decode_context_sum": shape["decode_context_sum"],
                                           "context_sum_after": shape["context_sum_after"], "sampled": 8})
    step_ms = float(k.attrs["step_ms"])
    return {"shape": shape, "step_ms": step_ms, "drafter_ms": drafter_ms, "verify_ms": step_ms - drafter_ms,
            "plain_step_ms": plain["step_ms"], "drafter_row": str(drafter["name"].iloc[0]), "kernels": len(k)}


def lora_scenario(adapters: int, rank: int, max_loras: int) -> dict[str, Any]:
    return {"seed": 9, "model": "llama-3.1-8b", "gpu": "h100",
            "scheduler": {"policy": "vllm", "max_loras": max_loras},
            "workload": {"num_requests": 400, "arrival": {"kind": "poisson", "rate": 12.0},
                         "prompt": {"kind": "uniform", "min": 256, "max": 1024},
                         "output": {"kind": "uniform", "min": 64, "max": 256},
                         "lora": {"adapters": adapters, "rank": rank, "popularity": "zipf"}}}


def lora_rows() -> list[dict[str, Any]]:
    out = []
    for m in (1, 2, 8, 32):
        s = o1sim.simulate(lora_scenario(32, 16, m)).summary
        lo = s["lora"]
        out.append({"setting": f"32 adapters, rank 16, max_loras = {m}", "slot_waits": lo["slot_waits"],
                    "loads": lo["adapter_loads"], "disk_loads": lo["adapter_loads_from_disk"], "load_ms": lo["load_ms"],
                    "ttft_mean_ms": s["ttft_ms"]["mean"], "tpot_mean_ms": s["tpot_ms"]["mean"],
                    "finished": s["finished"], "requests": s["num_requests"]})
    return out


def rank_rows() -> list[dict[str, Any]]:
    shape = {"decode_seqs": 64, "decode_context_sum": 64 * 800, "context_sum_after": 64 * 800, "sampled": 64, "lora_adapters": 4}
    out = []
    for rank in (8, 16, 64):
        sc = lora_scenario(4, rank, 4)
        a = shape_anatomy(sc, shape)
        k = a["kernels"]
        lora_us = sum(e - s for n, s, e in zip(k["name"], k["start_us"], k["end_us"]) if n.startswith("lora kernels"))
        r = o1sim.simulate(sc)
        out.append({"rank": rank, "lora_ms": lora_us / 1e3, "step_ms": a["step_ms"],
                    "adapter_mib": r.deployment["lora"]["adapter_mib"], "tpot_mean_ms": r.summary["tpot_ms"]["mean"],
                    "blocks": r.deployment["num_gpu_blocks"]})
    return out


def markdown_eagle(rs: list[dict[str, Any]]) -> str:
    lines = ["| batch | TPOT, no speculation (ms) | TPOT, EAGLE-3 (ms) | speedup | tokens per verify |", "|---|---|---|---|---|"]
    for r in rs:
        lines.append(f"| {r['batch']} | {r['tpot_ms']:.2f} | {r['tpot_spec_ms']:.2f} | {r['speedup']:.2f}× | {r['tokens_per_verify']:.2f} |")
    return "\n".join(lines) + "\n"


def markdown_methods(rs: list[dict[str, Any]]) -> str:
    lines = ["| method | acceptance rate (drafts) | TPOT speedup, batch 1 | TPOT speedup, batch 64 |", "|---|---|---|---|"]
    cell = lambda r, n: f"{r[f'speedup_{n}']:.2f}×" if f"speedup_{n}" in r else "—"  # noqa: E731
    for r in rs:
        first = cell(r, 1) if "speedup_1" in r else cell(r, 8) + " (batch 8)" if "speedup_8" in r else "—"
        lines.append(f"| {r['method']} | {r['acceptance']:.3f} | {first} | {cell(r, 64)} |")
    return "\n".join(lines) + "\n"


def markdown_anatomy(a: dict[str, Any]) -> str:
    sh = a["shape"]
    return (f"| step | ms |\n|---|---|\n"
            f"| one step without speculation (8 decodes) | {a['plain_step_ms']:.3f} |\n"
            f"| the target's verification (8 × (1 + 3) tokens: {sh['decode_seqs']} decodes, {sh['spec_tokens']} drafts) | {a['verify_ms']:.3f} |\n"
            f"| {a['drafter_row']} | {a['drafter_ms']:.3f} |\n"
            f"| the whole speculative step ({a['kernels']} kernel rows) | {a['step_ms']:.3f} |\n")


def markdown_lora(rs: list[dict[str, Any]], ranks: list[dict[str, Any]]) -> str:
    lines = ["| setting | requests that waited for a slot | adapter loads | from disk | load time (ms) | TTFT mean (ms) | TPOT mean (ms) |",
             "|---|---|---|---|---|---|---|"]
    for r in rs:
        lines.append(f"| {r['setting']} | {r['slot_waits']} | {r['loads']} | {r['disk_loads']} | {r['load_ms']:.0f} "
                     f"| {r['ttft_mean_ms']:.1f} | {r['tpot_mean_ms']:.2f} |")
    lines += ["", "| rank (4 adapters, 4 slots) | one adapter (MiB) | LoRA kernels in a batch-64 decode step (ms) | that step (ms) | TPOT mean (ms) | KV blocks |",
              "|---|---|---|---|---|---|"]
    for r in ranks:
        lines.append(f"| {r['rank']} | {r['adapter_mib']:.1f} | {r['lora_ms']:.3f} | {r['step_ms']:.3f} | {r['tpot_mean_ms']:.2f} | {r['blocks']:,} |")
    return "\n".join(lines) + "\n"


#: Published speculative-decoding speedups o1sim is set beside (no constant is fitted to them):
#: (key, source, setting, published speedup, batch of the o1sim row, the o1sim scenario).
PUBLISHED: list[tuple[str, str, str, float, int, str]] = [
    ("sglang-eagle3-b1", "SGLang docs, speculative decoding (EAGLE-3 row)",
     "Llama-3.1-8B-Instruct, MT-Bench, 1 × H100, batch 1: 158.34 → 373.25 tok/s (tree drafts)", 373.25 / 158.34, 1, "eagle3"),
    ("eagle3-paper-b64", "EAGLE-3 paper (arXiv 2503.01840), abstract",
     "SGLang, batch 64: 1.38× throughput", 1.38, 64, "eagle3"),
    ("deepseek-v3-mtp", "DeepSeek-V3 technical report (arXiv 2412.19437), §5.4.3",
     "MTP, 85–90% acceptance of the second token: 1.8× tokens per second", 1.8, 1, "mtp"),
]


def published_rows() -> list[dict[str, Any]]:
    """o1sim's TPOT speedup beside each published figure: EAGLE-3 at k = 3, 0.7 on
    Llama-3.1-8B / H100, MTP at its default acceptance on DeepSeek-V3 / H200 × 8."""
    out = []
    for key, source, setting, published, n, method in PUBLISHED:
        if method == "mtp":
            base, _ = _tpot(batch(n, None, "deepseek-v3", "h200", 8, 128))
            sp, _ = _tpot(batch(n, {"method": "mtp"}, "deepseek-v3", "h200", 8, 128))
            ours = "MTP k = 1 at 0.85, DeepSeek-V3 on H200 × 8, batch 1"
        else:
            base, _ = _tpot(batch(n, None))
            sp, _ = _tpot(batch(n, EAGLE3))
            ours = f"EAGLE-3 chain k = 3 at 0.7, Llama-3.1-8B on H100, batch {n}"
        out.append({"key": key, "source": source, "setting": setting, "published": published, "o1sim": base / sp,
                    "o1sim_setting": ours, "error_pct": (base / sp / published - 1) * 100})
    return out


def markdown_published(rs: list[dict[str, Any]]) -> str:
    lines = ["| source | published | speedup | o1sim | speedup | difference |", "|---|---|---|---|---|---|"]
    for r in rs:
        lines.append(f"| {r['source']} | {r['setting']} | {r['published']:.2f}× | {r['o1sim_setting']} | {r['o1sim']:.2f}× "
                     f"| {r['error_pct']:+.0f}% |")
    return "\n".join(lines) + "\n"


def tables() -> dict[str, str]:
    """Each generated table of ``docs/speculative-lora.md`` by its marker."""
    return {"eagle-table": markdown_eagle(eagle_rows()), "methods-table": markdown_methods(method_rows()),
            "anatomy-table": markdown_anatomy(anatomy()), "lora-table": markdown_lora(lora_rows(), rank_rows())}


def write_doc(path: Path = DOC, which: Optional[dict[str, str]] = None) -> None:
    """Put the tables between their markers in ``path``."""
    text = path.read_text(encoding="utf-8")
    for marker, table in (tables() if which is None else which).items():
        text = re.sub(rf"(<!-- {marker}:[^\n]*-->\n).*?(<!-- /{marker} -->)", lambda m: m.group(1) + table + m.group(2),
                      text, flags=re.S)
    path.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write", action="store_true", help="put the tables into docs/speculative-lora.md and docs/fidelity.md")
    if ap.parse_args().write:
        write_doc()
        write_doc(FIDELITY, {"spec-table": markdown_published(published_rows())})
    for table in tables().values():
        print(table)
