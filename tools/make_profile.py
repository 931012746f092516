"""Derive the shipped H200 calibration profile from our own measurements.

Reads ../shared/data/h200-calibration/*.csv (see its README) and writes
crates/sim-core/profiles/h200.json: the median times (ms) of every measured point, grouped
into one table per operator shape, with the ceilings. Only the columns the model needs are
kept (no min, no derived rates), so the file stays small.

    python3 tools/make_profile.py [--src path/to/h200-calibration] [--out profile.json]

With `--src` pointing at tables written by `benchmarks/gpu/reference_ops.py` (same columns,
no FP8 file needed) it derives a profile of the machine those ran on.
"""

from __future__ import annotations

import argparse
import csv
import json
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SRC = ROOT.parent / "shared" / "data" / "h200-calibration"
OUT = ROOT / "crates" / "sim-core" / "profiles" / "h200.json"
# What one isolated timing adds beyond the op's launch and GPU time (event records, the
# synchronising call), µs: an isolated residual_add at M=1 took 23.6 µs and back-to-back
# launches of one small kernel 10.3 µs each on an H200 of the same kind (Firecracker, PyTorch
# 2.11) on 2026-11-30 (benchmarks/gpu/reference_ops.py); the tables' own isolated
# residual_add at M=1 is 23.5 µs. Used when ceilings.json does not measure it.
ISOLATED_OVERHEAD_US = 13.3
SOURCE = ("o1sim's own H200 SXM measurements, 2026-11-29, PyTorch 2.11.0+cu130, CUDA events, "
          "median of 8-10 runs (../shared/data/h200-calibration); derived by tools/make_profile.py")
# Width (elements per token) each elementwise op touches, per table model: the op's table is
# reused for other models by scaling tokens by width (see calib::Profile).
WIDTH = {
    "llama3-8b": {"hidden": 4096, "q": 4096, "kv": 1024, "inter": 14336},
    "llama3-70b": {"hidden": 8192, "q": 8192, "kv": 1024, "inter": 28672},
}
OP_WIDTH = {
    "rms_norm": lambda w: w["hidden"],
    "residual_add": lambda w: w["hidden"],
    "rope_q_and_k": lambda w: w["q"] + w["kv"],
    "silu_mul": lambda w: w["inter"],
    "attn_out_transpose": lambda w: w["q"],
    "kv_write": lambda w: 2 * w["kv"],
}


def rows(src: Path, name: str) -> list[dict[str, str]]:
    with open(src / name, newline="") as f:
        return list(csv.DictReader(f))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", type=Path, default=DEFAULT_SRC)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--source", default=SOURCE, help="provenance line stored in the profile")
    args = ap.parse_args()
    src = args.src
    ceil = json.loads((src / "ceilings.json").read_text())
    gemm = []
    for dtype in ("bf16", "fp8"):
        if not (src / f"gemm_{dtype}.csv").exists() and dtype != "bf16":
            continue
        groups: dict[tuple, list] = defaultdict(list)
        for r in rows(src, f"gemm_{dtype}.csv"):
            key = (r["model"], int(r["tp"]), r["op"], int(r["k"]), int(r["n"]))
            groups[key].append((int(r["m"]), float(r["ms"])))
        for (model, tp, op, k, n), pts in groups.items():
            pts.sort()
            gemm.append({"dtype": dtype, "op": op, "label": f"{model} tp{tp}", "k": k, "n": n,
                         "m": [p[0] for p in pts], "ms": [p[1] for p in pts]})
    prefill: dict[tuple, list] = defaultdict(list)
    for r in rows(src, "attention_prefill_bf16.csv"):
        prefill[(int(r["hq"]), int(r["hkv"]), int(r["hd"]))].append((int(r["seq"]), float(r["ms"])))
    chunk: dict[tuple, list] = defaultdict(list)
    for r in rows(src, "attention_chunk_bf16.csv"):
        chunk[(int(r["hq"]), int(r["hkv"]), int(r["hd"]), int(r["chunk"]))].append(
            (int(r["context"]), float(r["ms"])))
    decode: dict[tuple, list] = defaultdict(list)
    for r in rows(src, "attention_decode_bf16.csv"):
        decode[(int(r["hq"]), int(r["hkv"]), int(r["hd"]))].append((int(r["b"]), int(r["ctx"]), float(r["ms"])))
    elem: dict[tuple, list] = defaultdict(list)
    for r in rows(src, "elementwise_bf16.csv"):
        elem[(r["model"], r["op"])].append((int(r["m"]), float(r["ms"])))
    profile = {
        "gpu": "h200",
        "source": args.source,
        "copy_gbps": ceil["d2d_copy_gbps_read_plus_write"],
        "gemm_tflops": ceil["bf16_gemm_8192_tflops"],
        "isolated_overhead_us": ceil.get("isolated_overhead_us", ISOLATED_OVERHEAD_US),
        "gemm": gemm,
        "attention_prefill": [{"hq": k[0], "hkv": k[1], "hd": k[2], "seq": [p[0] for p in sorted(v)],
                               "ms": [p[1] for p in sorted(v)]} for k, v in prefill.items()],
        "attention_chunk": [{"hq": k[0], "hkv": k[1], "hd": k[2], "chunk": k[3],
                             "context": [p[0] for p in sorted(v)], "ms": [p[1] for p in sorted(v)]}
                            for k, v in sorted(chunk.items())],
        "attention_decode": [{"hq": k[0], "hkv": k[1], "hd": k[2], "b": [p[0] for p in v],
                              "ctx": [p[1] for p in v], "ms": [p[2] for p in v]} for k, v in decode.items()],
        "elementwise": [{"op": op, "label": model, "width": OP_WIDTH[op](WIDTH[model]),
                         "m": [p[0] for p in sorted(v)], "ms": [p[1] for p in sorted(v)]}
                        for (model, op), v in elem.items()],
    }
    text = json.dumps(profile, separators=(",", ":"))
    # one table per line: small diffs, still compact
    text = text.replace("},{", "},\n{").replace(":[{", ":[\n{")
    args.out.write_text(text + "\n")
    print(f"wrote {args.out} ({len(text):,} bytes, {len(gemm)} GEMM tables)")
    if args.out.resolve().parent == (ROOT / "crates/sim-core/profiles"):
        print("a shipped profile changed: run `make profiles` to rebuild its static snapshot")


if __name__ == "__main__":
    main()
