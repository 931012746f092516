"""The seed's mechanism claims (§2.1 fusion, §2.3 routing, §2.4 tiles, §2.5 remap, §3.2 model
checking, §3.3 decision latency), each run under a stated setup with a verdict."""

from __future__ import annotations

from typing import Any, Optional

from .. import _core
from ..api import Scenario, check, predict_step, simulate
from ._claim import NOT_REPRODUCIBLE, REFUTED, REPRODUCED, Claim
from ._claim import f as _f
from ._claim import pct as _pct

# --------------------------------------------------------------------------- §2.1 fusion


def fusion_rules() -> Claim:
    c = Claim(
        "§2.1", "Fusion rules: 0.8 ms latency threshold, ≤ 15% register-pressure growth",
        "Adjacent operators fuse only when each averages under 0.8 ms, their memory accesses "
        "coalesce, the fused kernel's register pressure grows by at most 15%, and the hardware "
        "supports the fused instructions (`fusion_policy`: granularity, latency_threshold_ms = "
        "0.8, memory_coalesce).",
        "`cost_model.fusion = hybrid` (the seed's policy) against `coarse` (fuse regardless of "
        "the threshold) on Llama-3-8B, one H200, calibrated model; the longest elementwise op "
        "of one layer at 2,048 to 32,768 tokens; register growth taken as 5% per op joined "
        "(an estimate: the seed gives none), so the 15% cap allows 4 ops a kernel.",
    )
    rows = [["tokens in the step", "longest elementwise op / layer (ms)", "hybrid = coarse?", "fused groups"]]
    binds_at: Optional[int] = None
    for tokens in (2048, 8192, 16384, 32768):
        batch = [{"new_tokens": tokens, "context_tokens": 0}]
        model = {"preset": "llama-3-8b", "max_context": 32768}
        none = predict_step(model, "h200", batch=batch, engine="reference")
        elem = [o for o in none.breakdown if o.op in ("rms_norm", "residual_add", "rope_q_and_k", "kv_write",
                                                          "attn_out_transpose", "silu_mul")]
        longest = max(o.ms / (64.0 if o.op in ("rms_norm", "residual_add") else 32.0) for o in elem)
        hyb = predict_step(model, "h200", batch=batch, fusion="hybrid", engine="reference")
        coarse = predict_step(model, "h200", batch=batch, fusion="coarse", engine="reference")
        same = abs(hyb.total_ms - coarse.total_ms) < 1e-9
        if not same and binds_at is None:
            binds_at = tokens
        groups = sorted({o.op for o in hyb.breakdown if "+" in o.op})
        rows.append([_f(tokens, 0), _f(longest, 3), "yes" if same else "no", ", ".join(groups) or "—"])
    c.table = rows
    c.verdict = REPRODUCED
    c.why = (
        "The rules are implemented as stated and decide which groups fuse. In a Llama layer the "
        "groups between GEMMs hold at most 3 ops (add + norm, RoPE + KV write), so the 15% cap "
        "never binds; the 0.8 ms threshold binds only on very large steps "
        + (f"(from {binds_at:,} tokens here: a longer op stays unfused, hybrid ≠ coarse)." if binds_at
           else "(not below 32,768 tokens here: hybrid fuses exactly what coarse does).")
    )
    return c


def fusion_effect() -> Claim:
    c = Claim(
        "§2.1", "Fusion: end-to-end latency 12.7 → 8.3 ms, memory bandwidth 92 → 64 GB/s",
        "Decoupling and fusion cut end-to-end latency from 12.7 ms to 8.3 ms (−35%) and memory "
        "bandwidth use from 92 GB/s to 64 GB/s.",
        "The seed names no model, GPU or batch. One step priced unfused (the reference engine: "
        "RoPE 16 kernels, SiLU·mul 2) and with the seed's hybrid fusion, calibrated H200/H100 "
        "models, CUDA graphs: decodes of Llama-3-8B (batch 32, 1k context) and Llama-3-70B TP 4 "
        "(batch 64, 2k), and a 2,048-token prefill of Llama-3-8B.",
    )
    cases = [
        ("Llama-3-8B decode, batch 32 (H200)", "llama-3-8b", "h200", 1, [{"new_tokens": 1, "context_tokens": 1023}] * 32),
        ("Llama-3-8B prefill 2,048 (H200)", "llama-3-8b", "h200", 1, [{"new_tokens": 2048, "context_tokens": 0}]),
        ("Llama-3-70B TP 4 decode, batch 64 (H100)", "llama-3-70b", "h100", 4, [{"new_tokens": 1, "context_tokens": 2047}] * 64),
    ]
    rows = [["step", "unfused (ms)", "hybrid fusion (ms)", "saved"]]
    saved = []
    for name, model, gpu, tp, batch in cases:
        a = predict_step(model, gpu, tp=tp, batch=batch, engine="reference").total_ms
        b = predict_step(model, gpu, tp=tp, batch=batch, fusion="hybrid", engine="reference").total_ms
        saved.append(1.0 - b / a)
        rows.append([name, _f(a, 2), _f(b, 2), _pct(1.0 - b / a)])
    rows.append(["seed", "12.7", "8.3", _pct(1.0 - 8.3 / 12.7)])
    c.table = rows
    seed_saving = 1.0 - 8.3 / 12.7
    c.verdict = REFUTED if max(saved) < 0.8 * seed_saving else REPRODUCED
    c.why = (
        f"Fusing the elementwise ops saves {_pct(min(saved), 0)}–{_pct(max(saved), 0)} of a step here, not "
        f"{_pct(seed_saving, 0)}: the GEMMs and attention, which fusion does not touch, dominate; the "
        "largest saving is on small decode steps, where RoPE's 16 launches a layer weigh most. The "
        "bandwidth figures are not reproducible: the seed does not say what was measured, and 92 GB/s "
        "is under 3% of any current HBM's bandwidth, so it cannot be a step's DRAM traffic."
    )
    return c


# --------------------------------------------------------------------------- §2.3 routing


def _two_paths(routing: dict[str, Any], events: Optional[list[dict[str, Any]]] = None,
               y_gbps: float = 40.0, requests: int = 40) -> Any:
    """disagg between two GPUs joined by p–x–d (10 GB/s a link, 1 µs: the shortest) and
    p–y–d (`y_gbps`, 3 µs)."""
    def link(a: str, b: str, gbps: float, us: float) -> dict[str, Any]:
        return {"src": a, "dst": b, "kind": "eth", "bandwidth_gbps": gbps, "latency_us": us}

    sc: dict[str, Any] = {
        "seed": 3, "model": "llama-3-8b", "gpu": "h200",
        "deployment": {"tp": 1, "replicas": 2, "prefill_replicas": 1, "router": "topology_aware"},
        "scheduler": {"policy": "disagg"},
        "workload": {"num_requests": requests, "arrival": {"kind": "poisson", "rate": 2.0},
                     "prompt": {"kind": "fixed", "value": 1000}, "output": {"kind": "fixed", "value": 32}},
        "topology": {"nodes": [{"id": "p", "kind": "gpu", "gpu": "h200"}, {"id": "d", "kind": "gpu", "gpu": "h200"},
                               {"id": "x", "kind": "switch"}, {"id": "y", "kind": "switch"}],
                     "links": [link("p", "x", 10.0, 1.0), link("x", "d", 10.0, 1.0),
                               link("p", "y", y_gbps, 3.0), link("y", "d", y_gbps, 3.0)],
                     "routing": routing},
    }
    if events:
        sc["events"] = events
    return simulate(sc)


def alpha_table() -> Claim:
    c = Claim(
        "§2.3", "RTMPv2's α table (ResNet-50 AllReduce 214 / 238 / 269 ms at α = 0.9 / 0.5 / 0.2)",
        "The route score is w = α·B/B_min + (1−α)·D_max/D (α = 0.65 by default); on an 8-node "
        "AllReduce topology, α = 0.9 / 0.5 / 0.2 gives ResNet-50 AllReduce times of 214 / 238 / "
        "269 ms and communication volumes of 1.82 / 1.76 / 1.71 TB, from 127 measured (B, D) "
        "points whose non-dominated set forms a 3-level trade-off curve.",
        "ResNet-50 training is not LLM serving and the topology is not given, so the table itself "
        "cannot be rerun. What α decides is shown instead: disagg prefill → decode on two GPUs "
        "joined by a short narrow path (10 GB/s, 2 µs) and a long wide one (40 GB/s, 6 µs); the "
        "Pareto frontier holds both; mean KV-transfer time by α (Llama-3-8B, 1,000-token prompts).",
    )
    rows = [["α", "route chosen", "mean KV transfer (ms)"]]
    for alpha in (0.9, 0.65, 0.5, 0.2):
        r = _two_paths({"alpha": alpha})
        links = r.links
        assert links is not None
        via_y = float(links[(links.src == "p") & (links.dst == "y")].bytes.iloc[0]) > 0
        rows.append([f"{alpha:g}", "p–y–d (wide, long)" if via_y else "p–x–d (narrow, short)",
                     _f(r.summary["topology"]["kv_transfer_ms"]["mean"], 3)])
    split = _two_paths({"multipath_kv": True})
    rows.append(["0.65 + multipath_kv", "both, 1 : 4 by bandwidth", _f(split.summary["topology"]["kv_transfer_ms"]["mean"], 3)])
    c.table = rows
    c.verdict = NOT_REPRODUCIBLE
    c.why = (
        "The table's workload (ResNet-50 AllReduce) and its 8-node topology are not specified well "
        "enough to rerun, and the 127 measured points are not published. The mechanism is "
        "reproduced: α trades bandwidth for latency on the frontier, and here the choice flips "
        "between α = 0.5 and 0.2 (the wide path wins from α = 3/7), moving the transfer time 4×; "
        "splitting over the frontier (an option the seed implies) is faster still."
    )
    return c


def hysteresis() -> Claim:
    c = Claim(
        "§2.3", "RTMPv2 hysteresis: a route is replaced only when beaten by more than 3%",
        "`if score > routeTable[dst].score * 1.03`: the route table is updated only when the "
        "new score beats the old by 3%, to prevent flapping.",
        "The two-path disagg fabric with α = 1 (score = bandwidth / B_min), the narrow path at "
        "10 GB/s chosen over the other at 9.5 GB/s; at 10 s the other path's links are raised to "
        "2%, 2.9%, 3.1% and 4% above the chosen one's; route changes counted by the run.",
    )
    rows = [["other path after the event", "score vs the chosen route", "route changes"]]
    ok = True
    for gain in (0.02, 0.029, 0.031, 0.04):
        gbps = 10.0 * (1.0 + gain)
        ev = [{"at_s": 10.0, "kind": "set_link", "src": a, "dst": b, "bandwidth_gbps": gbps}
              for a, b in (("p", "y"), ("y", "d"))]
        r = _two_paths({"alpha": 1.0}, events=ev, y_gbps=9.5, requests=30)
        changes = int(r.summary["topology"]["route_changes"])
        ok &= changes == (1 if gain > 0.03 else 0)
        rows.append([f"{gbps:g} GB/s", f"+{_pct(gain)}", str(changes)])
    c.table = rows
    c.verdict = REPRODUCED if ok else REFUTED
    c.why = ("A candidate 2.9% better leaves the route in place; 3.1% better replaces it." if ok
             else "The route changed against the 3% rule: see the table.")
    return c


# --------------------------------------------------------------------------- §2.4 tiles


def tiles() -> Claim:
    c = Claim(
        "§2.4", "Tile constraints: CUDA 16×16 (≤ 255 registers/thread), TPU MXU 8×8 with INT8 weights",
        "Constraints are generated per target: CUDA `min_tile = (16, 16)`, `max_reg_per_thread = "
        "255`; TPU `tile_shape = (8, 8)`, `weight_quant_bits = 8`. TPU tile alignment is a hard "
        "constraint; the CUDA block size is then adjusted.",
        "The qkv GEMM of Llama-3-8B at 8 and 9 rows on one chip priced with tensor cores (16×16) "
        "and with MXUs (the seed's 8×8): the `tpu-v5e` preset with its memory made fast enough "
        "that the GEMM is compute-bound, so padding shows (roofline).",
    )
    def fast(unit: str) -> dict[str, Any]:
        return {"preset": "tpu-v5e", "matrix_unit": unit, "hbm_tbps": 1000.0}

    rows = [["rows (M)", "tensor cores, 16×16 (ms)", "MXU, 8×8 (ms)", "MXU / tensor cores"]]
    ratios = {}
    for m in (1, 8, 9, 16):
        batch = [{"new_tokens": 1, "context_tokens": 1}] * m
        t = [next(o.ms for o in predict_step("llama-3-8b", fast(u), batch=batch, engine="reference").breakdown if o.op == "qkv")
             for u in ("tensor_core", "mxu")]
        ratios[m] = t[1] / t[0]
        rows.append([str(m), _f(t[0], 4), _f(t[1], 4), f"{ratios[m]:.2f}"])
    c.table = rows
    c.verdict = REPRODUCED
    c.why = (
        f"The rules are applied as stated: up to 8 rows the MXU pads less ({ratios[8]:.2f}× the time), "
        "at 9 to 16 rows both pad to 16. TPU-then-CUDA alignment is consistent (8 divides 16). Two "
        "caveats: a TPU v5e's MXUs are 128×128 (Google's TPU designs since v2), so the seed's 8×8 "
        "understates a TPU's padding; and the 255-register cap is a CUDA compiler limit the step model "
        "does not price."
    )
    return c


# --------------------------------------------------------------------------- §2.5 remap


def remap() -> Claim:
    c = Claim(
        "§2.5", "Context remap at 128K: A100 1.82 TB/s, H100 3.47 TB/s; remap latency 7.2 → 3.8 ns",
        "With a 128K context window, remapping throughput is 1.82 TB/s on A100-SXM4 and 3.47 TB/s "
        "on H100-SXM5; H100's remap unit cuts the mean remap latency from 7.2 ns to 3.8 ns (hint "
        "4 → 2 cycles) and its descriptor cache grows from 64 to 256 entries.",
        "Decode attention of one 128K-token sequence (Llama-3-70B TP 4, per GPU and layer) read "
        "through a paged cache of 16-token blocks, calibrated A100 and H100 models (§2.5's "
        "descriptor cache and miss cycles on the GPU records): KV bytes read / attention time.",
    )
    rows = [["GPU", "contiguous (TB/s)", "paged, block 16 (TB/s)", "remap per miss (ns)", "HBM peak (TB/s)", "seed (TB/s)"]]
    model = {"preset": "llama-3-70b", "max_context": 131072}
    kv = 131071 * 2 * 2 * 128 * 2  # tokens × (K, V) × KV heads per GPU × head dim × bf16
    got = {}
    for gpu, seed_tbps, peak, miss_ns in (("a100-80g", 1.82, 2.039, 4 / 1.41), ("h100", 3.47, 3.35, 2 / 1.98)):
        tb = []
        for bs in (None, 16):
            p = predict_step(model, gpu, tp=4, batch=[{"new_tokens": 1, "context_tokens": 131071}], block_size=bs, engine="reference")
            att = next(o.ms for o in p.breakdown if o.op == "attention_decode") / 80.0
            tb.append(kv / (att * 1e-3) / 1e12)
        got[gpu] = tb[1]
        rows.append([gpu, _f(tb[0], 2), _f(tb[1], 2), _f(miss_ns, 2), _f(peak, 2), _f(seed_tbps, 2)])
    c.table = rows
    c.verdict = REFUTED
    c.why = (
        "H100's 3.47 TB/s is above its HBM3 peak (3.35 TB/s): no KV read reaches it, remapped or "
        f"not. Here the paged decode reads at {_f(got['a100-80g'], 2)} TB/s (A100) and "
        f"{_f(got['h100'], 2)} TB/s (H100); the ratio ({got['h100'] / got['a100-80g']:.2f}×) is set by "
        "HBM bandwidth and the remap misses together. The miss latencies follow from the seed's own "
        "hints (4 cycles at 1.41 GHz = 2.84 ns, 2 at 1.98 GHz = 1.01 ns), not 7.2 and 3.8 ns."
    )
    return c


# --------------------------------------------------------------------------- §3.2 / §3.3


def decision_latency() -> Claim:
    c = Claim(
        "§3.3", "Decision latency bound: 256 KB over 600 GB/s NVLink = 344 ns",
        "Synchronising 256 KB of control metadata over NVLink 3.0 (600 GB/s) bounds a scheduling "
        "decision below by ≈ 344 ns; L2 line contention adds 42 / 187 / 392 cycles for 1 / 4 / 8 SMs.",
        "The arithmetic, and o1pro's decision latency in the simulator (`perf::seed::"
        "o1pro_decision_latency_s`: the metadata over the GPU's NVLink plus the contention of the "
        "replica's TP ranks) on the default scenario (Llama-3-70B TP 4 on H200, 2,000 requests): "
        "how often async dispatch hides it.",
    )
    kib = 256 * 1024 * 8 / (600e9 * 8) * 1e9
    kb = 256_000 / 600e9 * 1e9
    r = simulate(Scenario.default().with_overrides({"scheduler.policy": "o1pro"}), record_steps=True)
    decisions = r.steps["decision_ms"]
    exposed = decisions[decisions > 0].tolist()
    c.table = [
        ["quantity", "value"],
        ["256 KiB / 600 GB/s", f"{kib:.0f} ns"],
        ["256 kB (decimal) / 600 GB/s", f"{kb:.0f} ns"],
        ["seed", "344 ns"],
        ["o1pro decision, H200 TP 4 (900 GB/s, 4 SMs contending)", f"{exposed[0] * 1e6:.0f} ns" if exposed else "—"],
        ["steps waiting for a decision / all steps", f"{len(exposed):,} / {len(r.steps):,}"],
    ]
    c.verdict = REFUTED
    c.why = (
        f"256 KiB at 600 GB/s is {kib:.0f} ns (256 kB decimal: {kb:.0f} ns); 344 ns follows from neither. "
        "In the simulation the bound is far below a step (milliseconds): async dispatch hides it behind "
        f"the running step, and only a step after an idle gap waits for it ({len(exposed):,} of "
        f"{len(r.steps):,} steps)."
    )
    return c


#: A configuration where only the batch's seats are scarce: 2 seats, ample KV (16 blocks of
#: 4 tokens), two background and two urgent requests.
FULL_BATCH: dict[str, Any] = {
    "name": "check: 4 requests, 2 seats, 16 blocks", "model": "llama-3-8b", "gpu": "h200",
    "scheduler": {"policy": "o1pro", "block_size": 4, "num_gpu_blocks": 16, "max_num_batched_tokens": 8,
                  "chunk_size": 8, "max_tokens_per_request": 8, "max_num_seqs": 2},
    "workload": {"requests": [{"arrival_ms": 0, "prompt_tokens": p, "output_tokens": o, "priority": pr}
                              for p, o, pr in ((4, 4, 1), (4, 4, 1), (3, 3, 0), (3, 3, 0))]},
}


def model_check() -> Claim:
    c = Claim(
        "§3.2", "Model checking: boundedness, liveness, preemption timeliness; counterexample traces",
        "The preemptive task queue is model-checked (TLA+/Petri net): no task runs twice, bounded "
        "queues, high-priority tasks are never starved (preemption timeliness), with an 8-step "
        "counterexample trace for a violation.",
        "`o1sim check` with the simulator's own scheduler, every order of arrivals and step "
        "completions: the default check configuration (six requests with mixed priorities, one "
        "replica, 16 KV blocks of 4 tokens, 8 seats: the KV cache is what fills) and one where the "
        "batch fills (two background and two urgent requests, 2 seats, ample KV); the real "
        "policies, and o1pro with each injected bug class (`no_seat_preempt`: priority preemption "
        "only when the KV cache is full).",
    )
    configs = {"KV full": Scenario.from_text(_core.default_check_toml(), "toml"), "batch full": Scenario(FULL_BATCH)}
    rows = [["configuration", "policy", "states", "result"]]
    ok = True
    for name, base in configs.items():
        for pol in ("vllm", "o1pro"):
            res = check(base.with_overrides({"scheduler.policy": pol}))
            ok &= bool(res.ok)
            rows.append([name, pol, f"{res.states:,}", "every property holds" if res.ok else ", ".join(v.property for v in res.violations)])
    for bug in _core.bug_names():
        name = "batch full" if bug == "no_seat_preempt" else "KV full"
        res = check(configs[name].with_overrides({"scheduler.policy": "o1pro", "scheduler.inject_bug": bug}))
        caught = [v.property for v in res.violations]
        ok &= bool(caught)
        rows.append([name, f"o1pro + {bug}", f"{res.states:,}", "caught: " + ", ".join(caught) if caught else "NOT caught"])
    c.table = rows
    c.verdict = REPRODUCED if ok else REFUTED
    c.why = ("The properties hold for the real schedulers and every injected bug is caught, each with "
             "the shortest counterexample (a replayable list of actions); preemption timeliness covers "
             "an urgent request kept waiting by a full KV cache and by a full batch alike." if ok
             else "A property failed or a mutant escaped: see the table.")
    return c
