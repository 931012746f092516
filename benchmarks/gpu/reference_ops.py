"""Isolated operator timings of the reference engine (`reference_steps.py`), taken the way
`../shared/data/h200-calibration` was: one eager call between two CUDA events, median of 10
after 3 warm-ups, random inputs, weights rotated among copies worth over 4x the L2 cache.

Writes CSVs with the calibration tables' columns into `--out`, so `tools/make_profile.py
--src DIR --out FILE` turns them into a profile of *this* machine and engine. Predicting
`reference_steps.py`'s whole steps from that profile isolates the step composition's error
from machine-to-machine and engine-to-engine differences in the operators themselves.

    python benchmarks/gpu/reference_ops.py --out DIR
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from reference_steps import DEV, DT, Engine, causal_lower_right, timed  # noqa: E402

SHAPES = {  # model label -> hidden, hq, hkv, hd, inter, vocab (Llama-3 8B / 70B)
    "llama3-8b": (4096, 32, 8, 128, 14336, 128256),
    "llama3-70b": (8192, 64, 8, 128, 28672, 128256),
}
GEMM_M = [1, 8, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384]
ELEM_M = [1, 8, 64, 512, 2048, 8192, 32768]
PREFILL = [(hq, hkv, s) for hq, hkv in [(32, 8), (64, 8), (8, 1)] for s in (512, 2048, 8192, 32768)]
CHUNK = [(hq, 8, c, ctx) for hq in (32, 64) for c in (256, 512, 1024, 2048) for ctx in (0, 2048, 8192, 30720)]
DECODE = [(1, 512), (1, 8192), (1, 32768), (8, 2048), (8, 32768), (32, 2048), (32, 8192), (64, 2048),
          (128, 512), (128, 2048), (256, 512), (256, 1024)]
L2_BYTES = 60e6
if DEV != "cuda":  # dry run on the CPU (shapes only): tiny models, few sizes
    SHAPES = {k: (256, v[1] // 8, 2, 32, 512, 1000) for k, v in SHAPES.items()}
    GEMM_M, ELEM_M = [1, 64], [1, 64]
    PREFILL, CHUNK, DECODE = [(4, 2, 64)], [(4, 2, 32, 0), (4, 2, 32, 64)], [(2, 64)]


def iso(fn, reps: int = 10) -> tuple[float, float]:
    """One isolated eager call between two CUDA events: median and best of `reps` runs."""
    return timed(fn, reps)


def write(path: Path, header: list[str], rows: list[list]) -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


def gemms(out: Path) -> None:
    rows = []
    for model, (h, hq, hkv, hd, inter, vocab) in SHAPES.items():
        for tp in (1, 2, 4, 8):
            shapes = {"qkv": (h, (hq + 2 * hkv) * hd // tp), "o": (hq * hd // tp, h), "gate_up": (h, 2 * inter // tp),
                      "down": (inter // tp, h), "lm_head": (h, vocab // tp)}
            for op, (k, n) in shapes.items():
                copies = max(1, int(4 * L2_BYTES / (k * n * 2)) + 1)
                ws = [torch.randn(k, n, device=DEV, dtype=DT) for _ in range(copies)]
                for m in GEMM_M:
                    x = torch.randn(m, k, device=DEV, dtype=DT)
                    i = [0]

                    def f():
                        i[0] += 1
                        return x @ ws[i[0] % copies]

                    ms, mn = iso(f)
                    rows.append([model, tp, op, m, k, n, ms, mn])
                del ws
            torch.cuda.empty_cache()
        print("gemm", model, flush=True)
    write(out / "gemm_bf16.csv", ["model", "tp", "op", "m", "k", "n", "ms", "ms_min"], rows)


def elementwise(out: Path) -> None:
    rows = []
    for model, (h, hq, hkv, hd, inter, _vocab) in SHAPES.items():
        eng = Engine(dict(layers=1, hidden=h, hq=hq, hkv=hkv, hd=hd, inter=inter, vocab=1024))
        for m in ELEM_M:
            x = torch.randn(m, h, device=DEV, dtype=DT)
            nw = torch.randn(h, device=DEV, dtype=DT)
            pos = torch.arange(m, device=DEV)
            q = torch.randn(m, hq, hd, device=DEV, dtype=DT)
            k = torch.randn(m, hkv, hd, device=DEV, dtype=DT)
            v = torch.randn(m, hkv, hd, device=DEV, dtype=DT)
            cache_k = torch.zeros(m + 16, hkv, hd, device=DEV, dtype=DT)
            cache_v = torch.zeros(m + 16, hkv, hd, device=DEV, dtype=DT)
            idx = torch.arange(8, m + 8, device=DEV)
            gu = torch.randn(m, 2 * inter, device=DEV, dtype=DT)
            o4 = torch.randn(1, hq, m, hd, device=DEV, dtype=DT)
            ops = {
                "rms_norm": lambda: F.rms_norm(x, (h,), nw, 1e-5),
                "rope_q_and_k": lambda: eng.rope(q, k, pos),
                "kv_write": lambda: (cache_k.index_copy_(0, idx, k), cache_v.index_copy_(0, idx, v)),
                "silu_mul": lambda: F.silu(gu[:, :inter]) * gu[:, inter:],
                "residual_add": lambda: x + x,
                "attn_out_transpose": lambda: torch.cat([o4[0].transpose(0, 1)], 0),
            }
            for op, fn in ops.items():
                ms, mn = iso(fn)
                rows.append([model, op, m, ms, mn])
            del x, q, k, v, cache_k, cache_v, gu, o4
        del eng
        torch.cuda.empty_cache()
    write(out / "elementwise_bf16.csv", ["model", "op", "m", "ms", "ms_min"], rows)
    print("elementwise", flush=True)


def attention(out: Path) -> None:
    hd = 128 if DEV == "cuda" else 32
    rows = []
    for hq, hkv, s in PREFILL:
        q = torch.randn(1, hq, s, hd, device=DEV, dtype=DT)
        kk = torch.randn(1, hkv, s, hd, device=DEV, dtype=DT)
        vv = torch.randn(1, hkv, s, hd, device=DEV, dtype=DT)  # distinct K and V: aliasing would halve the bytes read
        ms, mn = iso(lambda: F.scaled_dot_product_attention(q, kk, vv, is_causal=True, enable_gqa=True))
        rows.append([hq, hkv, hd, s, ms, mn])
    write(out / "attention_prefill_bf16.csv", ["hq", "hkv", "hd", "seq", "ms", "ms_min"], rows)
    rows = []
    for hq, hkv, c, ctx in CHUNK:
        q = torch.randn(1, hq, c, hd, device=DEV, dtype=DT)
        kk = torch.randn(1, hkv, c + ctx, hd, device=DEV, dtype=DT)
        vv = torch.randn(1, hkv, c + ctx, hd, device=DEV, dtype=DT)
        if ctx == 0:
            fn = lambda: F.scaled_dot_product_attention(q, kk, vv, is_causal=True, enable_gqa=True)  # noqa: E731
        else:
            mask = causal_lower_right(c, c + ctx)
            fn = lambda: F.scaled_dot_product_attention(q, kk, vv, attn_mask=mask, enable_gqa=True)  # noqa: E731
        ms, mn = iso(fn)
        rows.append([hq, hkv, hd, c, ctx, ms, mn])
    write(out / "attention_chunk_bf16.csv", ["hq", "hkv", "hd", "chunk", "context", "ms", "ms_min"], rows)
    rows = []
    hq, hkv = (32, 8) if DEV == "cuda" else (4, 2)
    for b, L in DECODE:
        # the engine's [slots, hkv, hd] layout; distinct K and V caches
        kc = torch.randn(b * L, hkv, hd, device=DEV, dtype=DT)
        vc = torch.randn(b * L, hkv, hd, device=DEV, dtype=DT)
        k = kc.view(b, L, hkv, hd).transpose(1, 2)
        v = vc.view(b, L, hkv, hd).transpose(1, 2)
        q = torch.randn(b, hq, 1, hd, device=DEV, dtype=DT)
        ms, mn = iso(lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True))
        rows.append([b, L, hq, hkv, hd, ms, mn])
        del kc, vc
    write(out / "attention_decode_bf16.csv", ["b", "ctx", "hq", "hkv", "hd", "ms", "ms_min"], rows)
    print("attention", flush=True)


def ceilings(out: Path) -> None:
    n = 8192 if DEV == "cuda" else 64
    a = torch.randn(n, n, device=DEV, dtype=DT)
    ms, _ = iso(lambda: a @ a)
    src = torch.randn(int(2e9) // 2 if DEV == "cuda" else 1000, device=DEV, dtype=DT)
    dst = torch.empty_like(src)
    cms, _ = iso(lambda: dst.copy_(src))
    # the isolated-timing overhead: one small kernel timed alone vs launched back to back
    x = torch.randn(4096, device=DEV, dtype=DT)
    alone, _ = iso(lambda: x + x, reps=50)
    if DEV == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(2000):
        x.add_(1.0)
    if DEV == "cuda":
        torch.cuda.synchronize()
    launch_ms = (time.perf_counter() - t0) / 2000 * 1e3
    if DEV != "cuda":
        ms = cms = alone = 1.0
    doc = {"device": torch.cuda.get_device_name() if DEV == "cuda" else DEV, "torch": torch.__version__,
           "d2d_copy_gbps_read_plus_write": round(2 * 2e9 / (cms * 1e-3) / 1e9, 1),
           "bf16_gemm_8192_tflops": round(2 * 8192**3 / (ms * 1e-3) / 1e12, 1),
           "launch_us": round(launch_ms * 1e3, 2),
           "isolated_overhead_us": round(max(0.0, alone - launch_ms) * 1e3, 2)}
    (out / "ceilings.json").write_text(json.dumps(doc, indent=1))
    print(doc, flush=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    for part in (ceilings, elementwise, attention, gemms):
        try:
            part(out)
        except Exception as e:  # keep the other tables
            print(part.__name__, "failed:", repr(e)[:300], flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
