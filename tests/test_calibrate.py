"""o1sim calibrate: reading measured runs, fitting a profile, naming it in a scenario."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import o1sim
from o1sim import calibrate as cal

from clikit import invoke

CONFIG = """api:
  type: completion
data:
  type: shared_prefix
  path: null
  shared_prefix:
    num_groups: 2
    num_prompts_per_group: 3
    system_prompt_len: 40
    question_len: 200
    output_len: {out}
load:
  type: constant
  interval: 1.0
  stages:
  - rate: {rate}
    duration: 8
  sweep: null
"""


def _run_dir(root: Path, name: str, *, rate: float, out: int, ttft_s: float, e2e_s: float, model: str = "meta-llama/Llama-2-7b-hf") -> Path:
    """A made-up inference-perf result in the layout of ../shared/data/real-vllm-h100."""
    d = root / name
    (d / "results").mkdir(parents=True)
    (d / "exp-config.yaml").write_text(f"model: {model}\ntensor_parallelism: 1\nmax_model_len: 4096\n"
                                       "max_num_batched_tokens: 2048\nmax_num_seqs: 64\napp: inference-perf\n")
    (d / "results" / "config.yaml").write_text(CONFIG.format(out=out, rate=rate))
    lat = lambda v: {"mean": v, "median": v * 0.98, "p99": v * 1.2}  # noqa: E731
    n = int(rate * 8)
    summary = {
        "load_summary": {"count": n},
        "successes": {"count": n, "latency": {"time_to_first_token": lat(ttft_s), "request_latency": lat(e2e_s)},
                      "throughput": {"output_tokens_per_sec": n * out / 9.0}, "prompt_len": {"mean": 250.0}},
        "failures": {"count": 0},
    }
    (d / "results" / "summary_lifecycle_metrics.json").write_text(json.dumps(summary))
    return d


@pytest.fixture
def runs_dir(tmp_path: Path) -> Path:
    # three workloads on one deployment, a server ~10% slower than the defaults predict
    base = o1sim.simulate(cal.read_inference_perf(_run_dir(tmp_path / "probe", "p", rate=2.0, out=40, ttft_s=1, e2e_s=1), gpu="h100").scenario)
    ttft, e2e = base.summary["ttft_ms"]["mean"] / 1e3, base.summary["e2e_ms"]["mean"] / 1e3
    root = tmp_path / "runs"
    for i, (rate, out) in enumerate([(2.0, 40), (3.0, 60), (4.0, 30)]):
        scale = out / 40
        _run_dir(root, f"run{i}", rate=rate, out=out, ttft_s=ttft * 1.3, e2e_s=ttft * 1.3 + (e2e - ttft) * scale * 1.1)
    return root


def test_reads_an_inference_perf_run_as_its_workload(runs_dir: Path) -> None:
    runs = cal.read_runs([runs_dir], gpu="h100")
    assert [r.name for r in runs] == ["run0", "run1", "run2"]
    wl = runs[1].scenario["workload"]
    assert wl["shared_prefix"]["groups"] == 2 and wl["shared_prefix"]["users_per_group"] == 3
    assert wl["shared_prefix"]["prefix_tokens"] + wl["shared_prefix"]["question"] == 250  # the client's count
    assert wl["arrival"] == {"kind": "poisson_count", "stages": [{"rate": 3.0, "duration_s": 8.0}]}
    assert runs[1].scenario["scheduler"]["max_num_seqs"] == 64 and runs[1].scenario["model"] == "meta-llama/Llama-2-7b-hf"


def test_saturated_throughput_counts_the_tokens_the_server_generated(tmp_path: Path) -> None:
    # inference-perf divides the client's re-tokenised count of the streamed text by its span;
    # with ignore_eos the server generated output_len tokens per finished request whatever
    # that text re-tokenises to, and that is what a simulation predicts
    d = _run_dir(tmp_path, "sat", rate=2.0, out=40, ttft_s=1, e2e_s=3)
    f = d / "results" / "summary_lifecycle_metrics.json"
    summary = json.loads(f.read_text())
    summary["failures"]["count"] = 4
    summary["successes"]["count"] = 12
    summary["successes"]["throughput"] = {"output_tokens_per_sec": 12 * 31 / 20.0, "requests_per_sec": 12 / 20.0}
    f.write_text(json.dumps(summary))
    run = cal.read_inference_perf(d, gpu="h100")
    assert run.saturated
    assert run.output_tokens_per_s == pytest.approx(12 * 40 / 20.0)
    assert run.extra["client_output_tokens_per_s"] == pytest.approx(12 * 31 / 20.0)
    # a summary without requests_per_sec keeps the client's figure
    del summary["successes"]["throughput"]["requests_per_sec"]
    f.write_text(json.dumps(summary))
    assert cal.read_inference_perf(d, gpu="h100").output_tokens_per_s == pytest.approx(12 * 31 / 20.0)


def test_calibrate_fits_the_machine_and_beats_the_defaults(runs_dir: Path, tmp_path: Path) -> None:
    runs = cal.read_runs([runs_dir], gpu="h100")
    ev = cal.calibrate(runs, "h100", holdout_by="run")
    prof = ev.profile
    assert prof["base"] == "shipped" and prof["gpu"] == "h100"
    assert 1.05 < prof["gpu_time_scale"] < 1.15  # the made-up server is ~10% slower per token
    assert ev.mape("held_out", "itl") < ev.mape("defaults", "itl")
    assert ev.mape("held_out", "ttft") < ev.mape("defaults", "ttft")
    # the profile is what a scenario names
    path = tmp_path / "calib.json"
    path.write_text(json.dumps(prof))
    sc = dict(runs[0].scenario, cost_model={"profile": str(path)})
    r = o1sim.simulate(sc)
    assert r.summary["ttft_ms"]["mean"] > o1sim.simulate(runs[0].scenario).summary["ttft_ms"]["mean"]


def test_cli_calibrate_writes_the_profile(runs_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "p.json"
    res = invoke(["calibrate", str(runs_dir), "--gpu", "h100", "-o", str(out), "--holdout", "none"])
    assert res.exit_code == 0, res.output
    prof = json.loads(out.read_text())
    assert {"gpu_time_scale", "frontend", "fit"} <= set(prof) and "MAPE" in res.stdout
    bad = invoke(["calibrate", str(runs_dir), "--gpu", "h100", "--server", "tp"])
    assert bad.exit_code == 2 and "server" in bad.stderr
    bad = invoke(["calibrate", str(tmp_path), "--gpu", "h100"])
    assert bad.exit_code == 2 and "no inference-perf results" in bad.stderr


def test_fit_with_the_kernel_scale_fixed_fits_the_front_end_alone(runs_dir: Path) -> None:
    runs = cal.read_runs([runs_dir], gpu="h100")
    free = cal.fit(runs, "h100")
    # held at the scale the free fit found, the front end is the free fit's (one pass, same simulations)
    held = cal.fit(runs, "h100", gpu_time_scale=free["gpu_time_scale"])
    assert held["gpu_time_scale"] == free["gpu_time_scale"]
    assert held["frontend"] == pytest.approx(free["frontend"], rel=1e-3)
    # held at the shipped tables (the made-up server is ~10% slower per token and 30% slower to
    # its first token than the defaults): the kernels stay, the front end takes more than vLLM's
    one = cal.fit(runs, "h100", gpu_time_scale=1.0)
    fe = one["frontend"]
    assert one["gpu_time_scale"] == 1.0 and free["gpu_time_scale"] > 1.05
    default_a = cal.DEFAULT_FRONTEND["request_ms"] + cal.DEFAULT_FRONTEND["token_ms"]
    assert fe["request_ms"] + fe["token_ms"] > default_a
    assert fe["request_ms"] + fe["token_ms"] > free["frontend"]["request_ms"] + free["frontend"]["token_ms"]
    for bad in (0.0, -1.0, float("nan"), 11.0):
        with pytest.raises(o1sim.ConfigError, match="gpu_time_scale"):
            cal.fit(runs, "h100", gpu_time_scale=bad)
