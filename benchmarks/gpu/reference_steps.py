"""Whole-model steps of the reference engine, timed on one CUDA GPU (needs PyTorch + CUDA).

The engine is the plain PyTorch Llama decoder that `../shared/data/h200-calibration`'s README
describes, written here from that description (random bf16 weights, never zero):

    rms_norm -> x@W_qkv -> split -> RoPE(q,k) -> index_copy k,v into a contiguous per-layer
    cache -> SDPA (GQA; prefill: causal per request; chunk: lower-right causal over the cache;
    decode: one query per sequence over the cache) -> transpose copy -> @W_o -> residual add
    -> rms_norm -> x@W_gate_up -> SiLU(g)*u -> @W_down -> residual add
    ... final norm -> lm_head on the sampled rows only -> argmax

Each step is timed eagerly (CUDA events around the forward, median of several runs after
warm-up) and, for decode and mixed steps, also as one CUDA-graph replay. The output JSON is
what `benchmarks/steps.py` compares `o1sim.predict_step` against; it never runs in CI.

    python benchmarks/gpu/reference_steps.py --out steps.json [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

import torch
import torch.nn.functional as F

try:  # lower-right causal mask for chunked prefill
    from torch.nn.attention.bias import causal_lower_right
except ImportError:  # pragma: no cover - older torch
    causal_lower_right = None

MODELS = {
    "llama-3-8b": dict(layers=32, hidden=4096, hq=32, hkv=8, hd=128, inter=14336, vocab=128256),
    # the 70B shape cut to 8 layers (as predict_step's {"preset": "llama-3-70b", "layers": 8})
    "llama-3-70b-8l": dict(layers=8, hidden=8192, hq=64, hkv=8, hd=128, inter=28672, vocab=128256),
}

DEV = os.environ.get("O1_REF_DEVICE", "cuda")
DT = torch.bfloat16


class Engine:
    def __init__(self, cfg: dict, seed: int = 0):
        g = torch.Generator(device=DEV).manual_seed(seed)
        self.cfg = cfg
        h, hq, hkv, hd, inter = cfg["hidden"], cfg["hq"], cfg["hkv"], cfg["hd"], cfg["inter"]

        def w(*shape, scale=0.02):
            return (torch.randn(*shape, generator=g, device=DEV, dtype=torch.float32) * scale).to(DT)

        self.embed = w(cfg["vocab"], h)
        self.lm_head = w(h, cfg["vocab"])
        self.final_norm = 1.0 + w(h)
        self.layers = []
        for _ in range(cfg["layers"]):
            self.layers.append(
                dict(
                    n1=1.0 + w(h),
                    qkv=w(h, (hq + 2 * hkv) * hd),
                    o=w(hq * hd, h),
                    n2=1.0 + w(h),
                    gate_up=w(h, 2 * inter),
                    down=w(inter, h, scale=0.01),
                )
            )
        pos = torch.arange(131072, device=DEV, dtype=torch.float32)
        inv = 1.0 / (500000.0 ** (torch.arange(0, hd, 2, device=DEV, dtype=torch.float32) / hd))
        ang = torch.outer(pos, inv)
        ang = torch.cat((ang, ang), -1)
        self.cos, self.sin = ang.cos(), ang.sin()  # fp32 tables, cast per use
        self.cache = None

    # --- the step's inputs -------------------------------------------------------------
    def prepare(self, batch: list[dict]):
        """Allocate per-layer contiguous caches [slots, hkv, hd] with each sequence's earlier
        context filled, and the step's index tensors. `batch` items: new_tokens,
        context_tokens. Decode items (new_tokens == 1) must share one context length."""
        c = self.cfg
        hkv, hd = c["hkv"], c["hd"]
        lens = [b["new_tokens"] + b["context_tokens"] for b in batch]
        slots = sum(lens)
        starts, s = [], 0
        for n in lens:
            starts.append(s)
            s += n
        self.cache = [
            (torch.randn(slots, hkv, hd, device=DEV, dtype=DT) * 0.5, torch.randn(slots, hkv, hd, device=DEV, dtype=DT) * 0.5)
            for _ in range(c["layers"])
        ]
        write, positions, sampled, row = [], [], [], 0
        decode = [i for i, b in enumerate(batch) if b["new_tokens"] == 1]
        prefill = [i for i, b in enumerate(batch) if b["new_tokens"] > 1]
        order = decode + prefill  # decode rows first, then each prefill/chunk
        self.layout = []
        for i in order:
            b = batch[i]
            n, ctx = b["new_tokens"], b["context_tokens"]
            write.extend(range(starts[i] + ctx, starts[i] + ctx + n))
            positions.extend(range(ctx, ctx + n))
            self.layout.append((i, row, n, ctx, starts[i]))
            row += n
            sampled.append(row - 1)
        self.m = row
        self.write_idx = torch.tensor(write, device=DEV, dtype=torch.long)
        self.pos = torch.tensor(positions, device=DEV, dtype=torch.long)
        self.sampled = torch.tensor(sampled, device=DEV, dtype=torch.long)
        self.n_decode = len(decode)
        if decode:
            ctxs = {batch[i]["context_tokens"] for i in decode}
            assert len(ctxs) == 1, "decode rows must share one context length"
            self.decode_len = ctxs.pop() + 1
            # decode sequences sit first and contiguous in the cache: view [b, L, hkv, hd]
            self.decode_base = starts[decode[0]]
            assert all(starts[i] == self.decode_base + k * self.decode_len for k, i in enumerate(decode))
        self.tokens = torch.randint(0, c["vocab"], (self.m,), device=DEV)
        self.masks = {}
        for _, _, n, ctx, _ in self.layout:
            if n > 1 and ctx > 0 and causal_lower_right is not None:
                self.masks[(n, ctx)] = causal_lower_right(n, n + ctx)
        # whether SDPA takes the lower-right mask together with GQA (probed outside any graph)
        self.mask_gqa = True
        if self.masks:
            (n, ctx), mask = next(iter(self.masks.items()))
            q = torch.randn(1, c["hq"], n, hd, device=DEV, dtype=DT)
            kv = torch.randn(1, hkv, n + ctx, hd, device=DEV, dtype=DT)
            try:
                F.scaled_dot_product_attention(q, kv, kv, attn_mask=mask, enable_gqa=True)
            except (RuntimeError, TypeError, ValueError) as e:
                self.mask_gqa = False
                self.mask_note = repr(e)[:200]

    # --- the forward ---------------------------------------------------------------------
    def rope(self, q, k, pos):
        """RoPE on q and k as a plain PyTorch engine writes it: gather and cast the cached
        cos/sin rows, rotate-half in bf16, then make q and k contiguous for attention — 16
        small kernels, like the tables' `rope_q_and_k`."""
        cos = self.cos[pos].to(DT).unsqueeze(1)
        sin = self.sin[pos].to(DT).unsqueeze(1)
        half = q.shape[-1] // 2

        def rot(x):
            return torch.cat((-x[..., half:], x[..., :half]), -1)

        q = q * cos + rot(q) * sin
        k = k * cos + rot(k) * sin
        return q.contiguous(), k.contiguous()

    def attention(self, q, kc, vc):
        c = self.cfg
        hq, hkv, hd = c["hq"], c["hkv"], c["hd"]
        outs = []
        nd = self.n_decode
        if nd:
            L = self.decode_len
            base = self.decode_base
            qd = q[:nd].view(nd, hq, 1, hd)
            k = kc[base : base + nd * L].view(nd, L, hkv, hd).transpose(1, 2)
            v = vc[base : base + nd * L].view(nd, L, hkv, hd).transpose(1, 2)
            o = F.scaled_dot_product_attention(qd, k, v, enable_gqa=True)
            outs.append(o.view(nd, hq, hd))
        for _, row, n, ctx, start in self.layout[nd:]:
            qp = q[row : row + n].transpose(0, 1).unsqueeze(0)  # [1, hq, n, hd]
            k = kc[start : start + ctx + n].transpose(0, 1).unsqueeze(0)
            v = vc[start : start + ctx + n].transpose(0, 1).unsqueeze(0)
            if ctx == 0:
                o = F.scaled_dot_product_attention(qp, k, v, is_causal=True, enable_gqa=True)
            else:
                mask = self.masks.get((n, ctx))
                if self.mask_gqa:
                    o = F.scaled_dot_product_attention(qp, k, v, attn_mask=mask, enable_gqa=True)
                else:
                    rep = hq // hkv
                    o = F.scaled_dot_product_attention(qp, k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1), attn_mask=mask)
            outs.append(o[0].transpose(0, 1))  # [n, hq, hd] (strided)
        return outs

    def forward(self):
        c = self.cfg
        hq, hkv, hd, inter = c["hq"], c["hkv"], c["hd"], c["inter"]
        eps = 1e-5
        x = self.embed[self.tokens]
        h = F.rms_norm(x, (c["hidden"],), self.layers[0]["n1"], eps)
        for li, lw in enumerate(self.layers):
            qkv = h @ lw["qkv"]
            q, k, v = qkv.split([hq * hd, hkv * hd, hkv * hd], -1)
            q, k = self.rope(q.view(-1, hq, hd), k.view(-1, hkv, hd), self.pos)
            kc, vc = self.cache[li]
            kc.index_copy_(0, self.write_idx, k)
            vc.index_copy_(0, self.write_idx, v.view(-1, hkv, hd))
            outs = self.attention(q, kc, vc)
            a = torch.cat(outs, 0).view(-1, hq * hd)  # the head-layout (transpose) copy
            x = x + a @ lw["o"]
            h = F.rms_norm(x, (c["hidden"],), lw["n2"], eps)
            gu = h @ lw["gate_up"]
            act = F.silu(gu[:, :inter]) * gu[:, inter:]
            x = x + act @ lw["down"]
            nxt = self.layers[li + 1]["n1"] if li + 1 < len(self.layers) else self.final_norm
            h = F.rms_norm(x, (c["hidden"],), nxt, eps)
        logits = h[self.sampled] @ self.lm_head
        return logits.argmax(-1)


def timed(fn, reps: int, warm: int = 3) -> tuple[float, float]:
    if DEV != "cuda":  # dry run on the CPU: checks shapes, times nothing
        fn()
        return 0.0, 0.0
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b))
    return statistics.median(ts), min(ts)


def graph_of(eng: Engine):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            eng.forward()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        eng.forward()
    return g


def decode(b: int, ctx_len: int) -> list[dict]:
    """b decode sequences at KV length ctx_len (after this step's token)."""
    return [{"new_tokens": 1, "context_tokens": ctx_len - 1}] * b


def steps_for(name: str, quick: bool) -> list[tuple[str, list[dict], bool]]:
    """(kind, batch, also as a CUDA graph)."""
    out = []
    pre = [128, 512, 2048, 8192] + ([] if quick else [16384])
    if name == "llama-3-8b" and not quick:
        pre.append(32768)
    for n in pre:
        out.append(("prefill", [{"new_tokens": n, "context_tokens": 0}], False))
    out.append(("prefill", [{"new_tokens": 512, "context_tokens": 0}] * 4, False))
    out.append(("prefill", [{"new_tokens": 256, "context_tokens": 0}] * 8, False))
    for n, ctx in [(512, 1536), (2048, 6144), (256, 3840)]:
        out.append(("chunked_prefill", [{"new_tokens": n, "context_tokens": ctx}], False))
    out.append(("mixed", decode(16, 1024) + [{"new_tokens": 256, "context_tokens": 768}], True))
    out.append(("mixed", decode(32, 2048) + [{"new_tokens": 512, "context_tokens": 1536}], True))
    out.append(("mixed", decode(64, 1024) + [{"new_tokens": 64, "context_tokens": 0}], True))
    dec = [(1, 512), (1, 8192), (8, 2048), (32, 2048), (32, 8192), (128, 512), (128, 2048), (256, 1024)]
    if quick:
        dec = dec[:4]
    for b, L in dec:
        out.append(("decode", decode(b, L), True))
    return out


def op_checks() -> list[dict]:
    """A few isolated ops timed as the calibration tables were, to compare this machine
    with the one the tables come from."""
    res = []
    x1 = torch.randn(1, 4096, device=DEV, dtype=DT)
    w = torch.randn(4096, 4096, device=DEV, dtype=DT)
    nw = torch.ones(4096, device=DEV, dtype=DT)
    res.append(("rms_norm m=1", timed(lambda: F.rms_norm(x1, (4096,), nw, 1e-5), 20)))
    res.append(("residual_add m=1", timed(lambda: x1 + x1, 20)))
    big = torch.randn(8192, 4096, device=DEV, dtype=DT)
    res.append(("gemm 8192x4096x4096", timed(lambda: big @ w, 10)))
    ws = [torch.randn(4096, 28672, device=DEV, dtype=DT) for _ in range(4)]
    it = iter(range(10**9))
    res.append(("gate_up m=1 (llama3-8b tp1)", timed(lambda: x1 @ ws[next(it) % 4], 20)))
    e = Engine(dict(layers=1, hidden=4096, hq=32, hkv=8, hd=128, inter=14336, vocab=1024))
    q = torch.randn(1, 32, 128, device=DEV, dtype=DT)
    pos = torch.zeros(1, device=DEV, dtype=torch.long)
    kk = torch.randn(1, 8, 128, device=DEV, dtype=DT)
    res.append(("rope_q_and_k m=1", timed(lambda: e.rope(q, kk, pos), 20)))
    # one empty-ish kernel back to back: the per-launch CPU cost
    t0 = torch.zeros(1, device=DEV)
    torch.cuda.synchronize()
    a = time.perf_counter()
    for _ in range(2000):
        t0.add_(1.0)
    torch.cuda.synchronize()
    res.append(("launch_us_per_kernel", ((time.perf_counter() - a) / 2000 * 1e6, 0.0)))
    return [{"what": k, "ms": v[0], "ms_min": v[1]} for k, v in res]


def profile_steps(path: str) -> None:
    """Per-kernel GPU time of a few eager 8B steps (torch.profiler), for diagnosis."""
    from torch.profiler import ProfilerActivity, profile

    eng = Engine(MODELS["llama-3-8b"])
    with open(path, "w") as f:
        for kind, batch in [("decode b=32 L=2048", decode(32, 2048)), ("prefill 2048", [{"new_tokens": 2048, "context_tokens": 0}]),
                            ("mixed 16x1024 + 256/768", decode(16, 1024) + [{"new_tokens": 256, "context_tokens": 768}])]:
            eng.prepare(batch)
            for _ in range(3):
                eng.forward()
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                eng.forward()
                torch.cuda.synchronize()
            f.write(f"==== {kind}\n")
            f.write(prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=45, max_name_column_width=70))
            f.write("\n")
            f.flush()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--reps", type=int, default=8)
    ap.add_argument("--profile", help="also write a per-kernel profile of three 8B steps here")
    ap.add_argument("--dry-run", action="store_true", help="tiny models on the CPU: shapes only")
    args = ap.parse_args()
    if args.dry_run:
        for cfg in MODELS.values():
            cfg.update(layers=2, hidden=256, hq=cfg["hq"] // 8, hkv=2, hd=32, inter=512, vocab=1000)
    torch.backends.cuda.matmul.allow_tf32 = False
    doc = {
        "source": "o1sim's own measurements with benchmarks/gpu/reference_steps.py",
        "date": time.strftime("%Y-%m-%d"),
        "device": torch.cuda.get_device_name() if DEV == "cuda" else DEV,
        "torch": torch.__version__,
        "kernel": platform.release(),
        "method": f"CUDA events, median of {args.reps} eager runs / 20 graph replays after 3 warm-ups",
        "op_checks": [],
        "steps": [],
    }

    def save():
        with open(args.out, "w") as f:
            json.dump(doc, f, indent=1)

    try:
        doc["op_checks"] = op_checks() if DEV == "cuda" else []
    except Exception as e:  # keep going: the steps matter more
        doc["op_checks_error"] = repr(e)
    save()
    print(json.dumps(doc["op_checks"]), flush=True)
    for name in args.models.split(","):
        t0 = time.time()
        eng = Engine(MODELS[name])
        for kind, batch, graphable in steps_for(name, args.quick):
            rec = {"model": name, "kind": kind, "batch": batch}
            try:
                eng.prepare(batch)
                rec["eager_ms"], rec["eager_ms_min"] = timed(eng.forward, args.reps)
                if getattr(eng, "mask_note", None):
                    rec["note"] = "chunk attention with repeated KV heads: " + eng.mask_note
                if graphable and DEV == "cuda":
                    g = graph_of(eng)
                    rec["graph_ms"], rec["graph_ms_min"] = timed(g.replay, 20)
                    del g
            except Exception as e:
                rec["error"] = repr(e)[:400]
            eng.cache = None
            torch.cuda.empty_cache()
            doc["steps"].append(rec)
            short = {k: (round(v, 4) if isinstance(v, float) else v) for k, v in rec.items() if k != "batch"}
            print(name, kind, len(batch), batch[-1], short, flush=True)
            save()
        del eng
        torch.cuda.empty_cache()
        print(f"{name}: {time.time() - t0:.1f} s", flush=True)
    save()
    if args.profile:
        try:
            profile_steps(args.profile)
        except Exception as e:
            print("profile failed:", repr(e), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
