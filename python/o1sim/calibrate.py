"""``o1sim calibrate``: fit a machine's kernel speed and its serving front end to measured
runs, and write a calibration profile scenarios can name (``cost_model.profile``).

A measured run is a serving benchmark against a real server plus that server's settings:

* an **inference-perf** result directory (``results/summary_lifecycle_metrics.json`` and
  ``results/config.yaml``, the workload inference-perf actually ran; the server's settings
  from an ``exp-config.yaml`` next to it, as the runs in ``../shared/data/real-vllm-h100``
  have, or from ``server=``);
* a vLLM **benchmark_serving** result JSON saved with ``--save-detailed`` (its requests and
  their client-side latencies; the server's settings from ``server=``).

Two sets of physical parameters are fitted, everything else stays at o1sim's defaults:

* ``gpu_time_scale``: every GEMM, attention and elementwise kernel's time on this machine
  relative to the GPU's tables (clocks, power limits, library versions). Set so that the
  simulated inter-token latency ((E2E − TTFT) / (output − 1), engine-side) matches the
  measured one in the median run.
* the front end (``request_ms`` + ``token_ms``, and ``batch_token_us``): the measured TTFT
  and E2E less the engine's, fitted by least squares over the runs against
  ``a + b·(B + 1)/2`` (B: the run's mean batch), ``a`` split between ingest and the way back
  in vLLM's default proportion; tokenisation per prompt token stays at its default (the
  runs' prompt lengths rarely vary enough to tell it apart). ``fit(..., gpu_time_scale=1)``
  keeps the kernels as shipped and fits the front end alone.

Cross-validation holds out whole groups (by default one model at a time: fit on the others'
runs, predict its runs) and compares the held-out errors with the defaults'.
"""

from __future__ import annotations

import json
import math
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence, Union

from . import api
from .errors import config_error

#: aiohttp's default total timeout (what inference-perf's client runs under unless told).
CLIENT_TIMEOUT_S = 300.0
#: vLLM v0.15's front-end defaults (``o1sim.frontend``), for the split of ``a``.
DEFAULT_FRONTEND = {"request_ms": 3.0, "prompt_token_us": 1.0, "token_ms": 2.5, "batch_token_us": 60.0}
#: Fields of the server settings (``server=``) and their scenario paths.
SERVER_FIELDS = {
    "model": "model",
    "tp": "deployment.tp",
    "max_num_seqs": "scheduler.max_num_seqs",
    "max_num_batched_tokens": "scheduler.max_num_batched_tokens",
    "max_model_len": "scheduler.max_model_len",
    "block_size": "scheduler.block_size",
    "gpu_memory_utilization": "scheduler.gpu_memory_utilization",
}


@dataclass
class MeasuredRun:
    """One measured serving run: the scenario that reproduces it (o1sim's defaults) and the
    client-side figures it measured (ms), and the output tokens/s the server generated for
    the finished requests over the benchmark's whole span (``output_tokens_per_s``)."""

    name: str
    group: str
    scenario: dict[str, Any]
    ttft_ms: float
    e2e_ms: float
    itl_ms: float
    output_len: int
    saturated: bool = False
    output_tokens_per_s: float = float("nan")
    extra: dict[str, Any] = field(default_factory=dict)


# ----------------------------------------------------------------------------- readers


def _yaml_scalars(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        if ":" in line and not line.startswith(" ") and not line.startswith("#"):
            k, v = line.split(":", 1)
            out[k.strip()] = v.strip()
    return out


def _ran_config(path: Path) -> dict[str, Any]:
    """The shared-prefix fields and load stages of inference-perf's parsed
    ``results/config.yaml`` (a reader for the layout it writes)."""
    sp: dict[str, int] = {}
    stages: list[dict[str, float]] = []
    section = None
    kind = None
    load_type = None
    for line in path.read_text().splitlines():
        s = line.strip()
        if line.startswith("data:"):
            section = "data"
        elif line.startswith("load:"):
            section = "load"
        elif not line.startswith(" "):
            section = None
        if section == "data" and s.startswith("type:") and line.startswith("  type:"):
            kind = s.split(":", 1)[1].strip()
        if section == "load" and line.startswith("  type:"):
            load_type = s.split(":", 1)[1].strip()
        if s.startswith("shared_prefix:") and section == "data":
            section = "sp"
            continue
        if s.startswith("stages:"):
            section = "stages"
            continue
        if section == "sp":
            if ":" in s and line.startswith("    ") and not s.endswith(":"):
                k, v = s.split(":", 1)
                try:
                    sp[k.strip()] = int(v)
                except ValueError:
                    pass
            elif not line.startswith("    "):
                section = "data"
        elif section == "stages":
            if s.startswith("- rate:"):
                stages.append({"rate": float(s.split(":", 1)[1])})
            elif s.startswith("duration:") and stages:
                stages[-1]["duration"] = float(s.split(":", 1)[1])
            elif not line.startswith("  "):
                section = None
    return {"data": kind, "load": load_type, "shared_prefix": sp, "stages": stages}


def read_inference_perf(path: Union[str, Path], *, gpu: str, server: Optional[Mapping[str, Any]] = None,
                        group: Optional[str] = None) -> MeasuredRun:
    """A run from an inference-perf result directory (or its ``results`` folder): the
    workload it ran (``shared_prefix`` data under its ``constant`` load, which is
    ``poisson_count``), the server from ``exp-config.yaml`` (or ``server``), the client-side
    means of its summary, and whether requests failed (a saturated run: its throughput is
    what it measured, in generated tokens: :func:`_generated_tokens_per_s`)."""
    d = Path(path)
    if d.name == "results":
        d = d.parent
    res = d / "results"
    summary_file = res / "summary_lifecycle_metrics.json"
    if not summary_file.is_file():
        raise config_error("runs", f"{d}: no results/summary_lifecycle_metrics.json (not an inference-perf result)")
    exp = _yaml_scalars(d / "exp-config.yaml") if (d / "exp-config.yaml").is_file() else {}
    settings: dict[str, Any] = {}
    if exp:
        settings = {
            "model": exp.get("model"),
            "tp": int(exp.get("tensor_parallelism", 1)),
            "max_num_seqs": int(exp["max_num_seqs"]) if "max_num_seqs" in exp else None,
            "max_num_batched_tokens": int(exp["max_num_batched_tokens"]) if "max_num_batched_tokens" in exp else None,
            "max_model_len": int(exp["max_model_len"]) if "max_model_len" in exp else None,
        }
    settings.update({k: v for k, v in (server or {}).items()})
    if not settings.get("model"):
        raise config_error("server.model", f"{d}: the server's model is not recorded; give server model=...")
    ran = _ran_config(res / "config.yaml")
    if ran["data"] != "shared_prefix" or not ran["stages"]:
        raise config_error("runs", f"{d}: only inference-perf shared_prefix data with load stages is read (got {ran['data']})")
    summary = json.loads(summary_file.read_text())
    ok = summary["successes"]
    lat = ok["latency"]
    sp = ran["shared_prefix"]
    out_len = int(sp["output_len"])
    prompt = round(ok["prompt_len"]["mean"])
    # the client counts the re-tokenised prompt: the system prompt's share of it
    sys_len = round(sp["system_prompt_len"] * prompt / (sp["system_prompt_len"] + sp["question_len"]))
    sc = _scenario(settings, gpu, name=d.name)
    sc["workload"] = {
        "shared_prefix": {
            "groups": sp["num_groups"], "users_per_group": sp["num_prompts_per_group"], "prefix_tokens": sys_len,
            "question": prompt - sys_len, "output": out_len,
        },
        "arrival": {"kind": "poisson_count" if ran["load"] in (None, "constant") else "poisson",
                    "stages": [{"rate": st["rate"], "duration_s": st["duration"]} for st in ran["stages"]]},
    }
    if _supports("timeout_s"):
        sc["workload"]["timeout_s"] = CLIENT_TIMEOUT_S
    ttft, e2e = lat["time_to_first_token"]["mean"] * 1e3, lat["request_latency"]["mean"] * 1e3
    thr = ok["throughput"]
    client_tok_s = float(thr["output_tokens_per_sec"])
    return MeasuredRun(
        name=d.name, group=group or str(settings["model"]), scenario=sc, ttft_ms=ttft, e2e_ms=e2e,
        itl_ms=(e2e - ttft) / max(1, out_len - 1), output_len=out_len,
        saturated=summary["failures"]["count"] > 0,
        output_tokens_per_s=_generated_tokens_per_s(thr, out_len),
        extra={"ttft_p99_ms": lat["time_to_first_token"]["p99"] * 1e3, "e2e_p99_ms": lat["request_latency"]["p99"] * 1e3,
               "ttft_p50_ms": lat["time_to_first_token"]["median"] * 1e3,
               "successes": ok["count"], "failures": summary["failures"]["count"],
               "client_output_tokens_per_s": client_tok_s},
    )


def _generated_tokens_per_s(throughput: Mapping[str, Any], output_len: int) -> float:
    """The output tokens/s the server generated for the finished requests, from an
    inference-perf summary's ``throughput``.

    inference-perf's ``output_tokens_per_sec`` is Σ over successful requests of the client's
    count of the streamed text re-tokenised (``apis/completion.py``: ``count_tokens(output_text)``)
    divided by ``total_time`` = last end − first start over *all* requests, timed-out ones
    included (``reportgen/base.py``, ``summarize_requests``). With ``ignore_eos`` the server
    generates exactly ``output_len`` tokens per finished request, but the re-tokenised text
    can count far fewer (Llama-2-7B's degenerate outputs decode to little text: a median of
    1,448 and a mean of 1,101 client tokens in the 7B ``reasoning`` run). What a simulator
    predicts is the generated tokens, so this is ``requests_per_sec`` (finished requests over
    the same ``total_time``) × ``output_len``; a summary without ``requests_per_sec`` keeps
    the client's figure."""
    rps = throughput.get("requests_per_sec")
    if rps is None:
        return float(throughput["output_tokens_per_sec"])
    return float(rps) * output_len


def read_vllm_benchmark(path: Union[str, Path], *, gpu: str, server: Mapping[str, Any],
                        group: Optional[str] = None) -> MeasuredRun:
    """A run from a vLLM ``benchmark_serving`` result saved with ``--save-detailed``: its
    requests replayed (``workload.trace`` in the ``vllm`` format) and its mean TTFT, ITL and
    E2E (``mean_e2el_ms``, else TTFT + (output − 1)·ITL)."""
    from .workload import from_trace

    p = Path(path)
    doc = json.loads(p.read_text())
    settings = dict(server)
    settings.setdefault("model", doc.get("model_id"))
    if not settings.get("model"):
        raise config_error("server.model", f"{p}: the server's model is not recorded; give server model=...")
    try:
        ttft, itl = float(doc["mean_ttft_ms"]), float(doc["mean_itl_ms"])
    except KeyError as e:
        raise config_error("runs", f"{p}: a benchmark_serving result needs {e.args[0]}") from None
    outs = [int(x) for x in doc.get("output_lens", []) if x]
    out_len = round(statistics.mean(outs)) if outs else 2
    e2e = float(doc.get("mean_e2el_ms", ttft + itl * (out_len - 1)))
    sc = _scenario(settings, gpu, name=p.stem)
    sc["workload"] = from_trace(p, format="vllm")
    return MeasuredRun(name=p.stem, group=group or str(settings["model"]), scenario=sc, ttft_ms=ttft, e2e_ms=e2e,
                       itl_ms=(e2e - ttft) / max(1, out_len - 1), output_len=out_len,
                       saturated=int(doc.get("completed", len(outs))) < int(doc.get("num_prompts", len(outs))),
                       output_tokens_per_s=float(doc.get("output_throughput", float("nan"))))


def read_runs(paths: Iterable[Union[str, Path]], *, gpu: str, server: Optional[Mapping[str, Any]] = None,
              group_by: str = "model") -> list[MeasuredRun]:
    """Every run under ``paths`` (directories holding inference-perf results, or
    benchmark_serving JSON files), sorted by name."""
    runs: list[MeasuredRun] = []
    for p in map(Path, paths):
        if p.is_file() and p.suffix == ".json":
            if not server:
                raise config_error("server", f"{p}: a benchmark_serving result needs the server's settings (server=)")
            runs.append(read_vllm_benchmark(p, gpu=gpu, server=server))
        elif (p / "results" / "summary_lifecycle_metrics.json").is_file() or (p / "summary_lifecycle_metrics.json").is_file():
            runs.append(read_inference_perf(p, gpu=gpu, server=server))
        elif p.is_dir():
            found = sorted(q.parent.parent for q in p.glob("*/results/summary_lifecycle_metrics.json"))
            if not found:
                raise config_error("runs", f"{p}: no inference-perf results under it")
            runs.extend(read_inference_perf(q, gpu=gpu, server=server) for q in found)
        else:
            raise config_error("runs", f"{p}: not an inference-perf result directory nor a benchmark_serving JSON")
    if group_by == "run":
        for r in runs:
            r.group = r.name
    return sorted(runs, key=lambda r: r.name)


_SUPPORTED: dict[str, bool] = {}


def _supports(workload_field: str) -> bool:
    """Whether this o1sim's workload section has ``workload_field`` (client timeouts)."""
    if workload_field not in _SUPPORTED:
        probe = {"model": "llama-3-8b", "gpu": "h100", "workload": {
            "requests": [{"arrival_ms": 0, "prompt_tokens": 8, "output_tokens": 2}], workload_field: 1.0}}
        try:
            api.Scenario(probe).validate()
            _SUPPORTED[workload_field] = True
        except Exception:  # noqa: BLE001 - any refusal means no
            _SUPPORTED[workload_field] = False
    return _SUPPORTED[workload_field]


def _scenario(settings: Mapping[str, Any], gpu: str, name: str) -> dict[str, Any]:
    sc: dict[str, Any] = {"name": name, "gpu": gpu, "scheduler": {"policy": "vllm"}}
    for key, value in settings.items():
        if value is None:
            continue
        if key not in SERVER_FIELDS:
            raise config_error(f"server.{key}", f"unknown server setting (one of {', '.join(SERVER_FIELDS)})")
        node = sc
        parts = SERVER_FIELDS[key].split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    return sc


# ----------------------------------------------------------------------------- simulation


def profile_dict(gpu: str, scale: float, frontend: Optional[Mapping[str, Any]], source: str) -> dict[str, Any]:
    """A calibration profile on the GPU's shipped tables (or its roofline)."""
    priced_by = {g["name"]: g.get("priced_by") for g in api.presets()["gpus"]}
    base = "shipped" if priced_by.get(gpu) == gpu else "roofline"
    prof: dict[str, Any] = {"gpu": gpu, "source": source, "base": base, "gpu_time_scale": scale}
    if frontend is not None:
        prof["frontend"] = dict(frontend)
    return prof


@dataclass
class Simulated:
    ttft_ms: float
    e2e_ms: float
    itl_ms: float
    engine_ttft_ms: float
    engine_e2e_ms: float
    engine_ttft_p50_ms: float
    mean_batch: float
    prompt_tokens: float
    output_tokens_per_s: float
    finished: int


def simulate_run(run: MeasuredRun, profile: Optional[Mapping[str, Any]] = None) -> Simulated:
    """Simulate ``run`` at o1sim's defaults, or with a calibration ``profile``."""
    sc = json.loads(json.dumps(run.scenario))
    if profile is not None:
        sc.setdefault("cost_model", {})["profile"] = dict(profile)
    res = api.simulate(sc)
    s = res.summary
    def ms(d: Mapping[str, Any]) -> float:
        return float(d["mean"]) if d.get("mean") is not None else float("nan")

    ttft, e2e = ms(s["ttft_ms"]), ms(s["e2e_ms"])
    df = res.requests
    prompt = float(df["prompt_tokens"].mean()) if len(df) else 0.0
    p50 = s["engine_ttft_ms"].get("p50")
    return Simulated(ttft, e2e, (e2e - ttft) / max(1, run.output_len - 1), ms(s["engine_ttft_ms"]), ms(s["engine_e2e_ms"]),
                     float(p50) if p50 is not None else float("nan"),
                     float(s["mean_batch_size"]), prompt, float(s["output_tokens_per_s"]), int(s["finished"]))


def _errors(run: MeasuredRun, sim: Simulated) -> dict[str, float]:
    def e(p: float, m: float) -> float:
        return p / m - 1.0 if m else float("nan")

    return {"ttft": e(sim.ttft_ms, run.ttft_ms), "e2e": e(sim.e2e_ms, run.e2e_ms), "itl": e(sim.itl_ms, run.itl_ms)}


# ----------------------------------------------------------------------------- fitting


#: No front end, and the engine's side in the headline (the fit's view).
ENGINE_ONLY: dict[str, Any] = {"request_ms": 0.0, "prompt_token_us": 0.0, "token_ms": 0.0, "batch_token_us": 0.0, "report": "engine"}


def fit(
    runs: Sequence[MeasuredRun],
    gpu: str,
    *,
    iterations: int = 3,
    gpu_time_scale: Optional[float] = None,
    progress: Optional[Callable[[str], None]] = None,
) -> dict[str, Any]:
    """Fit ``gpu_time_scale`` and the front end to ``runs`` (saturated runs are left out:
    their latencies are their queue's). Returns the calibration profile.

    ``gpu_time_scale``: keep the kernels at this scale (1: the GPU's tables as shipped) and
    fit the front end alone. The front end is the server's CPU work, not the GPU's, so this
    is how to fit it on runs whose kernel speed is taken as known."""
    lat = [r for r in runs if not r.saturated]
    if not lat:
        raise config_error("runs", "no run without failures to fit latencies on")
    if gpu_time_scale is not None and not (math.isfinite(gpu_time_scale) and 0.0 < gpu_time_scale <= 10.0):
        raise config_error("gpu_time_scale", f"must be in (0, 10] (got {gpu_time_scale})")
    say = progress or (lambda _msg: None)
    scale = 1.0 if gpu_time_scale is None else float(gpu_time_scale)
    sims: list[Simulated] = []
    for it in range(iterations if gpu_time_scale is None else 0):
        prof = profile_dict(gpu, scale, ENGINE_ONLY, "fit")
        sims = [simulate_run(r, prof) for r in lat]
        ratio = statistics.median(r.itl_ms / s.itl_ms for r, s in zip(lat, sims))
        say(f"  pass {it + 1}: gpu_time_scale {scale:.4f} -> x{ratio:.4f}")
        scale *= ratio
        if abs(ratio - 1.0) < 0.002:
            break
    prof = profile_dict(gpu, scale, ENGINE_ONLY, "fit")
    sims = [simulate_run(r, prof) for r in lat]
    # front end: measured minus engine-side TTFT = a + b·(B + 1)/2 + tokenisation, on the
    # median TTFT where the run has it (a mean holds the queue's tail, which is not the
    # front end's; an E2E's residual also holds (output − 1) times the step model's error),
    # weighted to minimise relative errors
    tok_us = DEFAULT_FRONTEND["prompt_token_us"]
    rows, ys, ws = [], [], []
    for r, s in zip(lat, sims):
        meas, eng = r.extra.get("ttft_p50_ms"), s.engine_ttft_p50_ms
        if meas is None or not finite(eng):
            meas, eng = r.ttft_ms, s.engine_ttft_ms
        rows.append((1.0, (s.mean_batch + 1.0) / 2.0))
        ys.append(meas - eng - tok_us * 1e-3 * s.prompt_tokens)
        ws.append(1.0 / meas**2)
    xs = [row[1] for row in rows]
    a, b = _least_squares(rows, ys, ws) if len(rows) >= 4 and max(xs) >= 2.0 * min(xs) else (-1.0, -1.0)
    if b < 0.0 or a < 0.0:
        # too few runs, or too little spread in batch size, to tell the two apart: vLLM's
        # per-token cost, and the fixed part from the runs
        b = DEFAULT_FRONTEND["batch_token_us"] * 1e-3
        a = max(0.0, statistics.median(y - b * x for x, y in zip(xs, ys)))
    share = DEFAULT_FRONTEND["request_ms"] / (DEFAULT_FRONTEND["request_ms"] + DEFAULT_FRONTEND["token_ms"])
    frontend = {"request_ms": round(a * share, 4), "prompt_token_us": tok_us, "token_ms": round(a * (1 - share), 4),
                "batch_token_us": round(b * 1e3, 3)}
    say(f"  front end: a = {a:.3f} ms, b = {b * 1e3:.1f} µs per output of a step")
    return profile_dict(gpu, round(scale, 5), frontend, f"o1sim calibrate on {len(lat)} runs ({', '.join(r.name for r in lat)})")


def _least_squares(rows: Sequence[tuple[float, float]], ys: Sequence[float], ws: Sequence[float]) -> tuple[float, float]:
    """(a, b) minimising Σ w·(a·r0 + b·r1 − y)² (two unknowns, normal equations)."""
    s00 = sum(w * r[0] * r[0] for r, w in zip(rows, ws))
    s01 = sum(w * r[0] * r[1] for r, w in zip(rows, ws))
    s11 = sum(w * r[1] * r[1] for r, w in zip(rows, ws))
    t0 = sum(w * r[0] * y for r, y, w in zip(rows, ys, ws))
    t1 = sum(w * r[1] * y for r, y, w in zip(rows, ys, ws))
    det = s00 * s11 - s01 * s01
    if abs(det) < 1e-12:
        return t0 / s00, 0.0
    return (t0 * s11 - t1 * s01) / det, (s00 * t1 - s01 * t0) / det


@dataclass
class Evaluation:
    """Errors (predicted / measured − 1) per run: at defaults, fitted on all runs (in
    sample), and held out (fitted on the other groups)."""

    runs: list[MeasuredRun]
    defaults: dict[str, dict[str, float]]
    in_sample: dict[str, dict[str, float]]
    held_out: dict[str, dict[str, float]]
    profile: dict[str, Any]
    folds: list[tuple[str, dict[str, Any]]]

    def mape(self, which: str, metric: str) -> float:
        table = getattr(self, which)
        vals = [abs(table[r.name][metric]) for r in self.runs if not r.saturated and r.name in table]
        return sum(vals) / len(vals) if vals else float("nan")


def deployment_of(run: MeasuredRun) -> str:
    """What a calibration profile describes: the model and parallelism on the GPU."""
    sc = run.scenario
    return f"{sc['model']} tp{sc.get('deployment', {}).get('tp', 1)} on {sc['gpu']}"


def workload_of(run: MeasuredRun) -> str:
    """The run's workload (what it asked, not what it ran on): its workload section less
    the file names, so that the same benchmark against two deployments is one workload."""
    wl = run.scenario.get("workload", {})
    return json.dumps({k: v for k, v in wl.items() if k != "timeout_s"}, sort_keys=True)


def calibrate(runs: Sequence[MeasuredRun], gpu: str, *, per: str = "all", holdout_by: str = "workload",
              progress: Optional[Callable[[str], None]] = None) -> Evaluation:
    """Fit on the runs, and cross-validate: for each value of ``holdout_by`` (``workload``:
    the same benchmark on every deployment; ``model``; ``run``; or ``none``) fit without those
    runs and predict them. ``per``: one profile for all runs (``all``), or one per deployment
    (``deployment``: its model and parallelism; a run is then predicted with its own
    deployment's profile)."""
    if per not in ("all", "deployment"):
        raise config_error("per", f"must be 'all' or 'deployment' (got '{per}')")
    keys = {"workload": workload_of, "model": lambda r: r.group, "run": lambda r: r.name, "none": None}
    if holdout_by not in keys:
        raise config_error("holdout", f"must be one of {', '.join(keys)} (got '{holdout_by}')")
    say = progress or (lambda _msg: None)
    part = deployment_of if per == "deployment" else (lambda _r: "all")

    def fit_parts(train: Sequence[MeasuredRun]) -> dict[str, dict[str, Any]]:
        out = {}
        for d in sorted({part(r) for r in train}):
            mine = [r for r in train if part(r) == d]
            if any(not r.saturated for r in mine):
                say(f"fit {d}: {len(mine)} runs")
                out[d] = fit(mine, gpu, progress=say)
        return out

    lat = [r for r in runs if not r.saturated]
    say(f"defaults: {len(lat)} runs")
    defaults = {r.name: _errors(r, simulate_run(r)) for r in lat}
    profiles = fit_parts(runs)
    in_sample = {r.name: _errors(r, simulate_run(r, profiles[part(r)])) for r in lat if part(r) in profiles}
    held: dict[str, dict[str, float]] = {}
    folds: list[tuple[str, dict[str, Any]]] = []
    key = keys[holdout_by]
    if key is not None:
        for g in sorted({key(r) for r in lat}):
            test = [r for r in lat if key(r) == g]
            train = [r for r in runs if key(r) != g]
            label = test[0].name if holdout_by == "workload" else g
            say(f"hold out {len(test)} run(s) ({label}...), fit on {len(train)}")
            fitted = fit_parts(train)
            for r in test:
                if part(r) in fitted:
                    held[r.name] = _errors(r, simulate_run(r, fitted[part(r)]))
            folds.extend((f"{label}: {d}", p) for d, p in fitted.items())
    profile = profiles.get("all") or next(iter(profiles.values()), {})
    return Evaluation(list(runs), defaults, in_sample, held, profile, folds)


def parse_server(items: Iterable[str]) -> dict[str, Any]:
    """``key=value`` server settings (numbers parsed)."""
    out: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise config_error("server", f"'{item}' is not key=value")
        k, v = item.split("=", 1)
        k = k.strip().replace("-", "_")
        if k not in SERVER_FIELDS:
            raise config_error(f"server.{k}", f"unknown server setting (one of {', '.join(SERVER_FIELDS)})")
        out[k] = int(v) if re.fullmatch(r"-?\d+", v) else (float(v) if re.fullmatch(r"-?[\d.]+(e-?\d+)?", v) else v)
    return out


def finite(x: float) -> bool:
    return isinstance(x, float) and math.isfinite(x)
