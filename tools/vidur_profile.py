"""Derive A100 and H100 calibration profiles from Vidur's public operator profiles.

Reads ../shared/data/vidur-profiling/compute/<device>/<org>/<model>/mlp.csv (Microsoft's
Vidur, MIT licence; see crates/sim-core/profiles/VIDUR-NOTICE.md) and writes
crates/sim-core/profiles/<gpu>.json in the format of profiles/h200.json:

* GEMM tables per (model, TP shard, op): `attn_pre_proj` → qkv, `attn_post_proj` → o,
  `mlp_up_proj` → gate_up, `mlp_down_proj` → down, with K and N from the row's model
  dimensions; the median time (ms) per token count, thinned to powers of two and the points
  half-way between them in log space (the full grid is 8–256 tokens apart).
* elementwise tables: `input_layernorm` → rms_norm (width = hidden), `attn_rope` →
  rope_q_and_k (width = q + k heads × head dim of one shard), `mlp_act` → silu_mul (width =
  intermediate of one shard), `add` → residual_add (width = hidden).
* attention: Vidur's attention.csv files are not in ../shared. For the A100 the 205 real
  upstream rows of Llama-3-8B at TP 1 that ../shared keeps
  (`reconstructed/attention_samples_real_llama3-8b_a100_tp1.csv`: only the measured rows,
  none of the fitted ones) become its attention tables (prefill, chunked prefill by chunk
  size, decode by batch × KV length); the H100 has none, and the model prices attention
  there by its roofline and flags it.
* `timing = "in_stream"`: Vidur times each op with CUDA events inside a running forward
  pass, so a row is the op's GPU time (no isolated-call launch to remove). Its kernels are
  sarathi-serve's fused ones: `kernels = {rope_q_and_k: 1, silu_mul: 1}` tells the step
  model so (its reference engine launches 16 and 2), for the graph floor, the gaps between
  kernels and the eager launches.
* ceilings: copy bandwidth from the fastest residual add of ≥ 2,048 tokens (3 × 2 bytes ×
  hidden per token), GEMM rate = the median over shapes of each shape's best rate at
  ≥ 1,024 tokens.

    python3 tools/vidur_profile.py [--src ../shared/data/vidur-profiling]
"""

from __future__ import annotations

import argparse
import csv
import json
import math
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SRC = ROOT.parent / "shared" / "data" / "vidur-profiling"
OUT = ROOT / "crates" / "sim-core" / "profiles"
DEVICES = {"a100": "a100-80g", "h100": "h100"}
COMMIT = "7d47513363ec447a741ac5e47241580b47724fbf"
GEMMS = {"attn_pre_proj": "qkv", "attn_post_proj": "o", "mlp_up_proj": "gate_up", "mlp_down_proj": "down"}
ELEMS = {"input_layernorm": "rms_norm", "attn_rope": "rope_q_and_k", "mlp_act": "silu_mul", "add": "residual_add"}


def keep_tokens(ts: list[int]) -> list[int]:
    """Powers of two and the geometric midpoints between them that the grid has (nearest)."""
    targets = []
    for e in range(0, 16):
        targets += [2**e, 2**e * math.sqrt(2)]
    chosen = {min(ts, key=lambda t: abs(math.log(t / x))) for x in targets if ts[0] <= x * 1.2 and x <= ts[-1] * 1.2}
    return sorted(chosen)


def shapes(r: dict[str, str]) -> tuple[dict[str, tuple[int, int]], dict[str, int]]:
    h, nh, nkv = int(r["n_embd"]), int(r["n_head"]), int(r["n_kv_head"])
    inter, tp = int(r["n_expanded_embd"]), int(r["num_tensor_parallel_workers"])
    hd = h // nh
    gated = r["use_gated_mlp"].strip().lower() == "true"
    gemm = {
        "qkv": (h, (nh + 2 * nkv) * hd // tp),
        "o": (nh * hd // tp, h),
        "gate_up": (h, (2 if gated else 1) * inter // tp),
        "down": (inter // tp, h),
    }
    width = {"rms_norm": h, "rope_q_and_k": (nh + nkv) * hd // tp, "silu_mul": inter // tp, "residual_add": h}
    return gemm, width


def attention(src: Path, device: str) -> dict[str, list]:
    """Attention tables from the real upstream rows kept in ../shared (A100, Llama-3-8B, TP 1:
    32 query heads, 8 KV heads, head dim 128)."""
    path = src / "reconstructed" / f"attention_samples_real_llama3-8b_{device}_tp1.csv"
    out: dict[str, list] = {"attention_prefill": [], "attention_chunk": [], "attention_decode": []}
    if not path.exists():
        return out
    heads = {"hq": 32, "hkv": 8, "hd": 128}
    prefill: dict[int, float] = {}
    chunks: dict[int, dict[int, float]] = defaultdict(dict)
    decode: list[tuple[int, int, float]] = []
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            ms = float(r["attn_median_ms"])
            if r["kind"] == "prefill":
                chunk, ctx = int(r["prefill_chunk_size"]), int(r["kv_cache_size"])
                chunks[chunk][ctx] = ms
                if ctx == 0:
                    prefill[chunk] = ms
            else:
                decode.append((int(r["batch_size"]), int(r["kv_cache_size"]), ms))
    out["attention_prefill"] = [{**heads, "seq": sorted(prefill), "ms": [prefill[k] for k in sorted(prefill)]}]
    out["attention_chunk"] = [{**heads, "chunk": c, "context": sorted(v), "ms": [v[k] for k in sorted(v)]}
                              for c, v in sorted(chunks.items())]
    decode.sort()
    out["attention_decode"] = [{**heads, "b": [d[0] for d in decode], "ctx": [d[1] for d in decode],
                                "ms": [d[2] for d in decode]}]
    return out


def profile(src: Path, device: str, gpu: str) -> dict:
    gemm_pts: dict[tuple, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    elem_pts: dict[tuple, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    copy_bps = 0.0
    best: dict[tuple, float] = defaultdict(float)  # per GEMM shape: best rate at >= 1,024 tokens
    models = sorted(p.parent for p in (src / "compute" / device).glob("*/*/mlp.csv"))
    for mdir in models:
        with open(mdir / "mlp.csv", newline="") as f:
            for r in csv.DictReader(f):
                gshape, width = shapes(r)
                tokens, tp = int(r["num_tokens"]), int(r["num_tensor_parallel_workers"])
                label = f"{mdir.name} tp{tp}"
                for col, op in GEMMS.items():
                    ms = float(r[f"time_stats.{col}.median"])
                    k, n = gshape[op]
                    if ms > 0:
                        gemm_pts[(label, op, k, n)][tokens].append(ms)
                        if tokens >= 1024:
                            best[(k, n)] = max(best[(k, n)], 2 * tokens * k * n / (ms * 1e-3))
                for col, op in ELEMS.items():
                    ms = float(r[f"time_stats.{col}.median"])
                    if ms > 0:
                        elem_pts[(mdir.name, op, width[op])][tokens].append(ms)
                        if op == "residual_add" and tokens >= 2048:
                            copy_bps = max(copy_bps, 3 * 2 * width[op] * tokens / (ms * 1e-3))
    rates = sorted(best.values())
    best_flops = rates[len(rates) // 2]  # the median shape's best large-M rate
    # one table per shape: the same (K, N) from two models or TP degrees is one operator
    by_shape: dict[tuple, tuple[str, str, dict[int, list[float]]]] = {}
    for (label, op, k, n), pts in sorted(gemm_pts.items()):
        if (k, n) in by_shape:
            for t, v in pts.items():
                by_shape[(k, n)][2][t].extend(v)
        else:
            by_shape[(k, n)] = (label, op, pts)
    gemm = []
    for (k, n), (label, op, pts) in by_shape.items():
        ts = keep_tokens(sorted(pts))
        gemm.append({"dtype": "bf16", "op": op, "label": label, "k": k, "n": n, "m": ts,
                     "ms": [round(sorted(pts[t])[len(pts[t]) // 2], 5) for t in ts]})
    elementwise = []
    for (model, op, width), pts in sorted(elem_pts.items()):
        ts = keep_tokens(sorted(pts))
        elementwise.append({"op": op, "label": model, "width": width, "m": ts,
                            "ms": [round(sorted(pts[t])[len(pts[t]) // 2], 5) for t in ts]})
    att = attention(src, device)
    what = ("attention from its 205 real Llama-3-8B TP1 rows" if att["attention_decode"]
            else "no attention tables")
    return {
        "gpu": gpu,
        "source": f"Vidur's {device.upper()} operator profiles (microsoft/vidur {COMMIT[:7]}, data/profiling, "
                  "MIT licence, Copyright (c) Microsoft Corporation; sarathi-serve kernels, median of CUDA-event "
                  f"timings inside the forward pass); derived by tools/vidur_profile.py; {what}",
        "timing": "in_stream",
        # sarathi-serve's fused custom ops (pos_encoding_ops.rotary_embedding,
        # activation_ops.silu_and_mul): one kernel each, not the reference engine's 16 and 2
        "kernels": {"rope_q_and_k": 1, "silu_mul": 1},
        "copy_gbps": round(copy_bps / 1e9, 1),
        "gemm_tflops": round(best_flops / 1e12, 1),
        "gemm": gemm,
        **att,
        "elementwise": elementwise,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", type=Path, default=DEFAULT_SRC)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    for device, gpu in DEVICES.items():
        doc = profile(args.src, device, gpu)
        text = json.dumps(doc, separators=(",", ":")).replace("},{", "},\n{").replace(":[{", ":[\n{")
        path = args.out / f"{gpu}.json"
        path.write_text(text + "\n")
        print(f"wrote {path} ({len(text):,} bytes, {len(doc['gemm'])} GEMM tables, "
              f"{len(doc['elementwise'])} elementwise tables, copy {doc['copy_gbps']} GB/s, GEMM {doc['gemm_tflops']} TFLOP/s)")
    print("shipped profiles changed: run `make profiles` to rebuild their static snapshot")


if __name__ == "__main__":
    main()
