"""docs/fidelity.md's TensorRT-LLM table is what benchmarks/trtllm.py computes now, and what
the text says holds: the KV-starved 70B-on-one-H100 points came within 10% with the runtime
memory; the ones the text names as misses are still above 10%; trtllm-bench's settings are the
published runs' heuristic (TP 8 at 128/128: 4,096 requests, 8,192 tokens)."""

from __future__ import annotations

import re

from benchkit import ROOT, benchmark, generated_table


def test_the_documented_table_is_the_benchmark_s() -> None:
    bench = benchmark("trtllm")
    doc = (ROOT / "docs" / "fidelity.md").read_text(encoding="utf-8")
    rows = bench.rows()
    assert generated_table(doc, "trtllm-table") == bench.markdown(rows).strip(), \
        "regenerate: .venv/bin/python benchmarks/trtllm.py --write"
    assert len(rows) == sum(len(p) for p in bench.PUBLISHED.values()) == 93
    assert all(r["finished"] == bench.NUM_REQUESTS[(r["isl"], r["osl"])] for r in rows)

    by = {r["key"]: r for r in rows}
    s = bench.summary(rows)
    # the text's claims
    assert s["mean_abs"] > 5.0, "the 5% target is met: update the text"
    assert s["within_5"] >= 0.5 and s["within_10"] >= 0.75, s
    one_h100 = [r for r in rows if r["key"].startswith("llama-3.3-70b h100 tp1 ") and r["isl"] != 128 or
                r["key"] == "llama-3.3-70b h100 tp1 128/2048"]
    assert one_h100 and all(abs(r["error_pct"]) < 10 for r in one_h100), one_h100
    for key in ("llama-3.1-8b h200 tp1 128/128", "llama-3.1-8b h200 tp1 2048/128", "llama-3.3-70b h100 tp8 128/4096"):
        assert by[key]["error_pct"] > 10, by[key]
    for key in ("llama-3.3-70b h200 tp1 1000/2000", "llama-3.3-70b h200 tp1 1024/2048"):
        assert by[key]["error_pct"] < -5, by[key]
    tp8 = by["llama-3.3-70b h200 tp8 128/128"]
    assert (tp8["max_batch_size"], tp8["max_num_tokens"]) == (4096, 8192)
    mentioned = re.search(r"the mean absolute error is (\d+\.\d)%", doc)
    assert mentioned and float(mentioned.group(1)) == round(s["mean_abs"], 1), "the text's figure is not the table's"
