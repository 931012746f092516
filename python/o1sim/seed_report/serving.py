"""The seed's serving claims (§4.2 speed, §4.3 long-context latency, §4.4 adversarial
traffic), each run under a stated setup with a verdict. §4.2's timings are this machine's."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any, Optional

from .. import _core
from .._cli_args import web_dir
from ..api import Scenario, simulate
from ._claim import NOT_REPRODUCIBLE, REFUTED, REPRODUCED, Claim
from ._claim import f as _f
from ._claim import pct as _pct

# --------------------------------------------------------------------------- §4.2 speed


ITERATIONS_10K = {
    "name": "iterations-10k", "seed": 1, "model": {"preset": "llama-3-8b", "max_context": 16384}, "gpu": "h100",
    "scheduler": {"policy": "vllm"},
    "workload": {"num_requests": 32, "arrival": {"kind": "constant", "rate": 1e9},
                 "prompt": {"kind": "fixed", "value": 128}, "output": {"kind": "fixed", "value": 10000}},
}
TOPOLOGY_EDIT = {"preset": "hgx-h100", "links": [
    {"src": "gpu1", "dst": "nvswitch0", "kind": "nvswitch", "bandwidth_gbps": 45, "latency_us": 1}]}

NODE_SCRIPT = r"""
import { readFileSync } from "node:fs";
const t0 = performance.now();
const o1sim = await import(process.argv[2]);
await o1sim.init(readFileSync(process.argv[3]));
const sc = JSON.parse(process.argv[4]);
o1sim.simulate(sc);
const cold = performance.now() - t0;
const warm = [];
for (let i = 0; i < 15; i++) { const a = performance.now(); o1sim.simulate(sc); warm.push(performance.now() - a); }
const topo = { ...sc, deployment: { tp: 4 }, topology: JSON.parse(process.argv[5]) };
o1sim.simulate({ ...sc, deployment: { tp: 4 }, topology: "hgx-h100" });
const edit = [];
for (let i = 0; i < 15; i++) { const a = performance.now(); o1sim.simulate(topo); edit.push(performance.now() - a); }
console.log(JSON.stringify({ cold, warm: Math.min(...warm), edit: Math.min(...edit) }));
"""


def _web_dir() -> Optional[Path]:
    """The page's folder (as `o1sim web` finds it) when it holds a built module."""
    d = web_dir()
    return d if (d / "o1sim.js").is_file() and (d / "pkg" / "o1sim.wasm").is_file() else None


def _node_timings() -> tuple[Optional[dict[str, float]], str]:
    """Cold start, warm 10k iterations and the re-run after a topology edit under Node; or
    None and why not (Node missing, the module not built, or Node's own failure)."""
    node, web = shutil.which("node"), _web_dir()
    if node is None:
        return None, "Node is not installed here"
    if web is None:
        return None, "the WASM module is not built (make web)"
    try:
        out = subprocess.run(
            [node, "--input-type=module", "-e", NODE_SCRIPT, "-", (web / "o1sim.js").as_uri(),
             str(web / "pkg" / "o1sim.wasm"), json.dumps(ITERATIONS_10K), json.dumps(TOPOLOGY_EDIT)],
            capture_output=True, text=True, timeout=60, check=True,
        )
        result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
        return result, ""
    except subprocess.CalledProcessError as e:
        last = (e.stderr or "").strip().splitlines()[-1:] or [f"exit status {e.returncode}"]
        return None, f"Node failed running the WASM module: {last[0][:200]}"
    except subprocess.TimeoutExpired:
        return None, "Node did not finish within 60 s"
    except (ValueError, IndexError, OSError) as e:
        return None, f"Node's output could not be read ({type(e).__name__})"


def _native_timings() -> dict[str, float]:
    """A fresh process's first 10k-iteration run (after importing the module: parse, build,
    run), and the best of 15 warm runs and of 15 re-runs after a topology edit, through the
    Python binding."""
    import sys

    code = ("import time,json;from o1sim import _core;t=time.perf_counter();"
            f"_core.Simulation({json.dumps(json.dumps(ITERATIONS_10K))},'json').finish();"
            "print(time.perf_counter()-t)")
    cold = float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                                check=True).stdout.strip()) * 1e3
    text = json.dumps(ITERATIONS_10K)
    topo = json.dumps({**ITERATIONS_10K, "deployment": {"tp": 4}, "topology": TOPOLOGY_EDIT})

    def best(t: str) -> float:
        times = []
        for _ in range(15):
            a = time.perf_counter()
            _core.Simulation(t, "json").finish()
            times.append(time.perf_counter() - a)
        return min(times) * 1e3

    return {"cold": cold, "warm": best(text), "edit": best(topo)}


_TIMINGS: dict[str, Any] = {}


def _timings() -> tuple[dict[str, float], Optional[dict[str, float]]]:
    """Native and WASM timings, measured once per report."""
    if not _TIMINGS:
        _TIMINGS["native"] = _native_timings()
        _TIMINGS["node"], _TIMINGS["node_why"] = _node_timings()
    return _TIMINGS["native"], _TIMINGS["node"]


SPEED_SETUP = (
    "`benchmarks/scenarios/iterations_10k.toml` (32 requests decoding together for 10,000 "
    "steps, Llama-3-8B on H100, calibrated). Native: a fresh Python process's first run after "
    "importing the module (parse, build, run), and the best of 15 warm runs. WASM: Node "
    "importing `web/o1sim.js`, instantiating the module and running it once (cold), then the "
    "best of 15 warm runs. Topology switch: the same at TP 4 on `hgx-h100` with gpu1's "
    "NVSwitch link cut to 45 GB/s, rebuilt and rerun. Timings are this machine's (2 cores, "
    "shared): best-of runs, a single cold start."
)


def _speed_table(nat: dict[str, float], node: Optional[dict[str, float]]) -> list[list[str]]:
    rows = [["", "cold start (ms)", "10k cycles warm (ms)", "after a topology switch (ms)"],
            ["seed, Rust + WASM", "17", "—", "5"],
            ["seed, Python", "128", "—", "94"],
            ["o1sim native (PyO3)", _f(nat["cold"]), _f(nat["warm"], 2), _f(nat["edit"], 2)]]
    if node:
        rows.append(["o1sim WASM under Node", _f(node["cold"]), _f(node["warm"], 2), _f(node["edit"], 2)])
    else:
        rows.append(["o1sim WASM under Node", "not measured (needs node and `make web`)", "", ""])
    rows.append(["Vidur (Python), recorded", "—", "700–1,000 (10,000 × 70–100 µs)", "—"])
    return rows


def _speed_claim(title: str, quote: str) -> tuple[Claim, dict[str, float], Optional[dict[str, float]]]:
    """A §4.2 speed claim with the timing table filled in, and the timings it was built from;
    judged NOT_REPRODUCIBLE here when there are no WASM timings (the caller judges the rest)."""
    c = Claim("§4.2", title, quote, SPEED_SETUP)
    nat, node = _timings()
    c.table = _speed_table(nat, node)
    if node is None:
        c.verdict = NOT_REPRODUCIBLE
        c.why = f"No WASM timings: {_TIMINGS.get('node_why') or 'not measured'}; the native numbers are in the table."
    return c, nat, node


def cold_start() -> Claim:
    c, nat, node = _speed_claim(
        "10,000 scheduling cycles with a 17 ms cold start (Rust + WASM)",
        "The lightweight Rust + WASM simulator runs 10,000 scheduling cycles with a 17 ms cold start.",
    )
    if node is None:
        return c
    c.verdict = REPRODUCED if node["cold"] <= 17.0 else REFUTED
    c.why = (
        f"The cold start under Node is {_f(node['cold'], 0)} ms: compiling and instantiating the "
        "1.5 MB module and the first run's code takes longer than 17 ms on this machine (in Chromium, "
        "`benchmarks/web.py` measures 75–96 ms for a first visit and 51–61 ms for the machine's floor, "
        "an 11-step run; benchmarks/README.md, *In the browser*). The 10,000 cycles themselves, warm, take "
        f"{_f(node['warm'], 1)} ms in WASM and {_f(nat['warm'], 2)} ms natively."
    )
    return c


def topology_switch() -> Claim:
    c, nat, node = _speed_claim(
        "10,000 scheduling cycles in 5 ms after a topology switch (Rust + WASM)",
        "After a topology switch the 10,000 scheduling cycles take 5 ms.",
    )
    if node is None:
        return c
    c.verdict = REPRODUCED if node["edit"] <= 5.0 else REFUTED
    c.why = (
        f"Rebuilt on the edited fabric and rerun, the 10,000 cycles take {_f(node['edit'], 2)} ms in WASM "
        f"(best of 15; {'within' if c.verdict == REPRODUCED else 'over'} 5 ms) and {_f(nat['edit'], 2)} ms "
        "natively. A busy machine stretches the WASM times; `benchmarks/web.py` measures 2.5–2.95 ms in "
        "Chromium on an idle one."
    )
    return c


def python_figures() -> Claim:
    c = Claim(
        "§4.2", "The same in Python: 128 ms cold start, 94 ms after a topology switch",
        "A Python interpreter takes 128 ms (cold start) and 94 ms (after a topology switch) for the "
        "10,000 scheduling cycles.",
        "The seed's Python simulator is not published. The Python simulator we have measured on this "
        "machine kind is Vidur (microsoft/vidur @ 7d47513): ~70–100 µs per batch while simulating "
        "(`vidur-profiling/BASELINE.md`).",
    )
    nat, node = _timings()
    c.table = _speed_table(nat, node)
    c.verdict = NOT_REPRODUCIBLE
    c.why = (
        "Without the seed's Python code there is nothing to rerun. For scale: a Python simulator of "
        "comparable fidelity, Vidur, spends 0.7–1.0 s on 10,000 batches, 5–8× the seed's 128 ms."
    )
    return c


# --------------------------------------------------------------------------- §4.3 long context

LONG = {"preset": "llama-3-70b", "max_context": 131072}


def _long_context(policy: str, context: int = 126_000, n: int = 8, block: int = 16, rate: Optional[float] = None,
                  output: int = 256) -> dict[str, Any]:
    if rate is None:
        work: dict[str, Any] = {"requests": [{"arrival_ms": 0, "prompt_tokens": context, "output_tokens": output}] * n}
    else:
        work = {"num_requests": n, "arrival": {"kind": "poisson", "rate": rate},
                "prompt": {"kind": "fixed", "value": context}, "output": {"kind": "fixed", "value": output}}
    sc = {"seed": 1, "model": LONG, "gpu": "a100-80g", "deployment": {"tp": 4},
          "scheduler": {"policy": policy, "max_num_seqs": 8, "block_size": block}, "workload": work}
    s: dict[str, Any] = simulate(sc).summary
    return s


def p99_order() -> Claim:
    c = Claim(
        "§4.3", "P99 latency at 128K context, batch 8, Llama-3-70B on 4×A100-80G: O1-Pro 1,247, vLLM 1,583, Orca 1,362 ms",
        "With 128K-token contexts and batch size 8, LLaMA-3-70B on 4 × A100-80G, P99 latency is "
        "1,247 ms for O1-Pro, 1,583 ms for vLLM PagedAttention and 1,362 ms for the Orca "
        "scheduler (jitter ±89 / ±216 / ±134 ms).",
        "The closest setup: eight requests of 126,000 prompt + 256 output tokens arriving together; "
        "Llama-3-70B (context raised to 128K) TP 4 on A100-80G, calibrated A100 model, "
        "`max_num_seqs` 8, block 16. The seed does not say which latency: per-token (TPOT), "
        "first-token (TTFT) and end-to-end P99 are all given.",
    )
    rows = [["policy", "P99 TPOT (ms)", "P99 TTFT (s)", "P99 E2E (s)", "seed P99 (ms)"]]
    seed = {"o1pro": 1247, "vllm": 1583, "orca": 1362}
    got: dict[str, dict[str, Any]] = {}
    for pol in ("o1pro", "vllm", "orca"):
        s = _long_context(pol)
        got[pol] = s
        rows.append([pol, _f(s["tpot_ms"]["p99"]), _f(s["ttft_ms"]["p99"] / 1e3), _f(s["e2e_ms"]["p99"] / 1e3), f"{seed[pol]:,}"])
    v = Scenario({"model": LONG, "gpu": "a100-80g", "deployment": {"tp": 4}}).validate()["deployment"]
    fits = v["kv_capacity_tokens"] / 126_256
    kv_gb = 8 * 131072 * 80 * 2 * 8 * 128 * 2 / 1e9
    c.table = rows

    def order(metric: str) -> str:
        return " < ".join(sorted(got, key=lambda p: got[p][metric]["p99"]))

    c.verdict = NOT_REPRODUCIBLE
    c.why = (
        f"As stated the setup cannot run: eight 128K-token KV caches of Llama-3-70B take {kv_gb:,.0f} GB in "
        "BF16, more than the four GPUs' 320 GB before the 141 GB of weights; 4 × A100-80G hold "
        f"{v['kv_capacity_tokens']:,} KV tokens, {fits:.1f} such sequences, so half the batch waits for "
        f"the other half. In the closest setup the P99 per-token latency orders {order('tpot_ms')} — the "
        f"seed's order — but at magnitudes 2–24× apart from its figures, while P99 TTFT orders "
        f"{order('ttft_ms')} and E2E {order('e2e_ms')}. O1-Pro's per-token lead comes from its "
        "2,048-token per-request cap, which keeps long prefills from stretching the decode steps they "
        "share; the same cap makes each prompt take more steps, hence its later first tokens."
    )
    return c


def ordering_sweep() -> Claim:
    c = Claim(
        "§4.3", "How the ordering changes with load, context length and block size",
        "(The seed reports one operating point.)",
        "The §4.3 setup varied one factor at a time: context 32K / 64K / 126K (all arriving at "
        "once); 126K requests arriving as Poisson at 0.02 and 0.05 req/s; vLLM's block 16 vs 64. "
        "P99 TPOT (ms) per policy, and the resulting order.",
    )
    rows = [["variant", "o1pro", "vllm", "orca", "order (best first)"]]
    variants: list[tuple[str, dict[str, Any]]] = [
        ("context 32K", {"context": 32_000}), ("context 64K", {"context": 64_000}),
        ("context 126K", {}), ("126K, Poisson 0.02 req/s", {"rate": 0.02}), ("126K, Poisson 0.05 req/s", {"rate": 0.05}),
        ("126K, block 64", {"block": 64}),
    ]
    orders = []
    for name, kw in variants:
        p = {pol: _long_context(pol, **kw)["tpot_ms"]["p99"] for pol in ("o1pro", "vllm", "orca")}
        order = " < ".join(sorted(p, key=p.get))  # type: ignore[arg-type]
        orders.append(order)
        rows.append([name, _f(p["o1pro"]), _f(p["vllm"]), _f(p["orca"]), order])
    c.table = rows
    stable = len(set(orders)) == 1
    c.verdict = NOT_REPRODUCIBLE
    c.why = (
        ("The order is the same in every variant: " + orders[0] + "." if stable else
         "The order moves with the setup (see the table): one operating point does not rank the policies.")
        + " The seed gives one point only, so there is nothing to compare these with."
    )
    return c


def fragmentation() -> Claim:
    c = Claim(
        "§4.3", "vLLM's fragmentation above 37% with 16-token blocks; allocation failures 11.2% → 0.3%",
        "At 128K, vLLM's fixed 16-token blocks leave over 37% of the KV cache fragmented; O1-Pro's "
        "dynamic block reservation cuts the KV-cache allocation failure rate from 11.2% to 0.3%.",
        "The §4.3 setup: mean internal fragmentation (reserved − used slots, time-weighted) and the "
        "allocation failure rate (failed / attempted block allocations, admission refusals "
        "included) per policy.",
    )
    rows = [["policy", "fragmentation", "allocation failures / attempts"]]
    got = {}
    for pol in ("vllm", "o1pro", "orca"):
        s = _long_context(pol)
        got[pol] = s
        rows.append([pol, _pct(s["fragmentation_mean"], 3), _pct(s["allocation_failure_rate"], 2)])
    c.table = rows
    c.verdict = REFUTED
    more = got["o1pro"]["fragmentation_mean"] > got["vllm"]["fragmentation_mean"]
    c.why = (
        f"16-token blocks waste at most 15 slots per sequence: {_pct(got['vllm']['fragmentation_mean'], 3)} "
        "of the reserved slots here, not 37%; O1-Pro's 64-token blocks waste up to 63 slots a sequence "
        f"({_pct(got['o1pro']['fragmentation_mean'], 3)}, {'more' if more else 'no more'} than vLLM over the "
        "run). Allocation failures here are mostly admissions refused while the cache is full: "
        f"{_pct(got['vllm']['allocation_failure_rate'], 1)} of vLLM's attempts and "
        f"{_pct(got['o1pro']['allocation_failure_rate'], 1)} of O1-Pro's (it tries fewer times: its "
        "2,048-token chunks grow a request in smaller steps). Block size does not change how many "
        "128K sequences fit, so nothing like 11.2% → 0.3%."
    )
    return c


# --------------------------------------------------------------------------- §3.2 priorities


def _urgent_ttft(policy: str, bug: Optional[str] = None) -> tuple[float, float, int]:
    """Mean TTFT (ms) of urgent and background requests, and the preemptions, when 48
    background requests fill a batch of 16 and 20 urgent ones arrive every 500 ms."""
    reqs = [{"arrival_ms": 0, "prompt_tokens": 300, "output_tokens": 600, "priority": 1} for _ in range(48)]
    reqs += [{"arrival_ms": 1000 + 500 * i, "prompt_tokens": 300, "output_tokens": 50, "priority": 0} for i in range(20)]
    sched: dict[str, Any] = {"policy": policy, "max_num_seqs": 16}
    if bug:
        sched["inject_bug"] = bug
    # A known bug is accepted with the invariant checks on (as a checker's replay runs).
    r = simulate({"seed": 1, "model": "llama-3-8b", "gpu": "h100", "scheduler": sched, "workload": {"requests": reqs}},
                 check_invariants=bug is not None)
    q = r.requests
    ttft = q.first_token_ms - q.arrival_ms
    urgent = q.request_id >= 48
    return float(ttft[urgent].mean()), float(ttft[~urgent].mean()), int(r.summary["preemptions"])


def urgent_requests() -> Claim:
    c = Claim(
        "§3.2", "High-priority requests are never starved: they preempt less urgent ones",
        "Preemption timeliness: when a higher-priority task is queued, the scheduler switches to it "
        "within a bounded number of steps (the TLA+ property `PreemptWithinOneStep`).",
        "Llama-3-8B on one H100, `max_num_seqs` 16, ample KV: 48 background requests (priority 1, "
        "600 output tokens) fill the batch at t = 0; 20 urgent ones (priority 0, 50 tokens) arrive "
        "every 500 ms from t = 1 s. o1pro as implemented, o1pro preempting only on a full KV cache "
        "(`inject_bug = no_seat_preempt`, its former behaviour), and vLLM (FCFS).",
    )
    rows = [["scheduler", "urgent mean TTFT (ms)", "background mean TTFT (ms)", "preemptions"]]
    got = {}
    for name, pol, bug in (("o1pro", "o1pro", None), ("o1pro, KV-full preemption only", "o1pro", "no_seat_preempt"),
                           ("vLLM (FCFS)", "vllm", None)):
        u, b, p = _urgent_ttft(pol, bug)
        got[name] = u
        rows.append([name, _f(u), _f(b), str(p)])
    c.table = rows
    drop = got["o1pro, KV-full preemption only"] / got["o1pro"]
    c.verdict = REPRODUCED if drop >= 10.0 else REFUTED
    c.why = (
        f"With the batch full, an urgent request takes the seat of the least urgent, latest admitted "
        f"running request: its mean TTFT is {_f(got['o1pro'])} ms, {drop:.0f}× less than when preemption "
        f"fires only on a full KV cache ({_f(got['o1pro, KV-full preemption only'])} ms: it waits for a "
        "background request to finish) and far from FCFS. The model checker proves the bound on small "
        "configurations (§3.2 above)."
    )
    return c


# --------------------------------------------------------------------------- §4.4 adversarial

#: The §4.4 experiments' normal traffic: Llama-3-8B on one H100, 400 requests at 8 req/s.
FLOOD_BASE: dict[str, Any] = {
    "seed": 5, "model": "llama-3-8b", "gpu": "h100",
    "workload": {"num_requests": 400, "arrival": {"kind": "poisson", "rate": 8.0},
                 "prompt": {"kind": "lognormal", "mean": 600, "sigma": 0.6, "max": 4000},
                 "output": {"kind": "uniform", "min": 16, "max": 200}},
}


def _flood(policy: str, attack: Optional[dict[str, Any]], scheduler: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    """The normal class's summary (the whole summary without attackers) and the run's."""
    sc = json.loads(json.dumps(FLOOD_BASE))
    sc["scheduler"] = {"policy": policy, **(scheduler or {})}
    if attack is not None:
        sc["workload"]["adversarial"] = attack
    r = simulate(sc)
    s: dict[str, Any] = r.summary
    normal: dict[str, Any] = s["classes"]["normal"] if "classes" in s else s
    return {"normal": normal, "all": s, "deployment": r.deployment}


def adversarial_flood() -> Claim:
    c = Claim(
        "§4.4", "Under a malicious-prompt flood, admission control keeps the service responsive (latency ∞ → 127 ms)",
        "Prompts nesting `{{` 1,024 deep, 512 at a time, exhaust the scheduler; with a template "
        "nesting limit of 8 and at most 2,048 tokens of a request per step, mean response latency "
        "goes from unbounded (timeouts) to 127 ms.",
        "`workload.adversarial` mixed into 400 normal requests (Llama-3-8B, one H100, 8 req/s): "
        "as many attackers as normal requests, arriving within 5 s from t = 10 s — deep "
        "templates (depth 64), a plain flood of 512-token prompts, and the same flood classed one "
        "priority below the normal traffic; and 20% long prompts (32,000 tokens) spread over the "
        "run; the flood classed one priority below the normal traffic also with `max_num_seqs` 32 "
        "(the default 256 seats never fill). The normal class's P99 TTFT against the same run "
        "without attackers.",
    )
    flood = {"share": 0.5, "kind": "flood", "start_s": 10.0, "duration_s": 5.0}
    attacks: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
        ("deep templates", {"share": 0.5, "kind": "deep_template", "start_s": 10.0, "duration_s": 5.0}, {}),
        ("flood", flood, {}),
        ("flood, attackers at priority 1", {**flood, "priority": 1}, {}),
        ("flood, attackers at priority 1, 32 seats", {**flood, "priority": 1}, {"max_num_seqs": 32}),
        ("long prompts (20%)", {"share": 0.2, "kind": "long_prompt"}, {}),
    ]
    rows = [["attack", "policy", "normal P99 TTFT, no attack (ms)", "under attack (ms)", "× no attack", "attackers rejected"]]
    ratios: dict[tuple[str, str], float] = {}
    for name, attack, sched in attacks:
        for pol in ("vllm", "o1pro"):
            base = _flood(pol, None, sched)["normal"]["ttft_ms"]["p99"]
            run = _flood(pol, attack, sched)
            hit = run["normal"]["ttft_ms"]["p99"]
            adv = run["all"]["classes"]["adversarial"]
            ratios[(name, pol)] = hit / base
            rows.append([name, pol, _f(base), _f(hit), f"{hit / base:.2f}", f"{adv['rejected']:,} / {adv['num_requests']:,}"])
    c.table = rows
    kept = ratios[("deep templates", "o1pro")] <= 1.5 and ratios[("deep templates", "vllm")] > 1.5
    c.verdict = REPRODUCED if kept else REFUTED
    c.why = (
        f"Against the seed's attack, deep templates, o1pro keeps the normal traffic's P99 TTFT at "
        f"{ratios[('deep templates', 'o1pro')]:.2f}× its no-attack value (every attacker rejected at arrival, "
        f"reason `template depth`) while vLLM, which serves them, goes to {ratios[('deep templates', 'vllm')]:.1f}×. "
        "The defence is specific to that attack: a flood of ordinary prompts is indistinguishable from "
        f"traffic, and o1pro fares like vLLM ({ratios[('flood', 'o1pro')]:.1f}× vs {ratios[('flood', 'vllm')]:.1f}×); "
        f"classed one priority lower, the flood costs o1pro {ratios[('flood, attackers at priority 1', 'o1pro')]:.1f}× "
        "(its priority order; the attackers already admitted still share the steps), and with the batch capped "
        f"at 32 seats, where a normal request preempts an attacker's seat, "
        f"{ratios[('flood, attackers at priority 1, 32 seats', 'o1pro')]:.2f}× against vLLM's "
        f"{ratios[('flood, attackers at priority 1, 32 seats', 'vllm')]:.1f}×. Long prompts cost both "
        f"({ratios[('long prompts (20%)', 'o1pro')]:.1f}× and {ratios[('long prompts (20%)', 'vllm')]:.1f}×): o1pro's "
        "2,048-token cap spreads each prompt over more steps but does not make it cheaper. The seed's "
        "'∞ → 127 ms' names no model or load, so its numbers are not comparable."
    )
    return c


def adversarial_memory() -> Claim:
    c = Claim(
        "§4.4", "Peak memory under the attack: 4.2 GB → 312 MB with the limits",
        "With the nesting limit and the per-request token cap, the attack's peak memory falls "
        "from 4.2 GB to 312 MB.",
        "The deep-template flood above: the simulator has no template parser or process memory, "
        "so what it can show is the memory the attackers hold in the engine — the KV cache at its "
        "peak (peak utilisation × the pool's bytes) and the requests held in queues.",
    )
    rows = [["policy", "peak KV in use (GB)", "no attack (GB)", "attackers served"]]
    got = {}
    for pol in ("vllm", "o1pro"):
        run = _flood(pol, {"share": 0.5, "kind": "deep_template", "start_s": 10.0, "duration_s": 5.0})
        base = _flood(pol, None)
        d = run["deployment"]
        pool_gb = d["kv_capacity_tokens"] * d["memory"]["kv_bytes_per_token"] * d["tp"] * d["pp"] / 1e9
        peak = run["all"]["kv_utilization_peak"] * pool_gb
        got[pol] = peak
        adv = run["all"]["classes"]["adversarial"]
        rows.append([pol, _f(peak, 2), _f(base["all"]["kv_utilization_peak"] * pool_gb, 2), f"{adv['finished']:,} / {adv['num_requests']:,}"])
    c.table = rows
    c.verdict = NOT_REPRODUCIBLE
    c.why = (
        "The 4.2 GB and 312 MB are the attacked process's memory (a template parser's buffers), which "
        "the simulator does not model. In the engine, o1pro's rejection at arrival keeps the attackers "
        f"out of the KV cache (peak {_f(got['o1pro'], 2)} GB, the normal traffic's) while vLLM holds them "
        f"(peak {_f(got['vllm'], 2)} GB)."
    )
    return c
