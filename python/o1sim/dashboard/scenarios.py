"""The dashboard's scenario side, without Streamlit: presets and the override fields shown
as widgets. (An uploaded request trace goes to the core's trace reader as inline text:
``trace_workload``.)"""

from __future__ import annotations

import base64
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional

from ..api import Scenario

__all__ = ["FIELDS", "MAX_URL_TEXT", "PRESETS", "PRESET_SLUGS", "Field", "base_value", "decode_text", "encode_text",
           "preset_scenario", "trace_workload"]

_SMALL = """\
# Llama-3-8B on one H100 with a KV pool of 400 blocks: small enough that the policies
# preempt and differ (the golden `policy_*` scenario).
name = "small: llama-3-8b on 1x h100, tight kv pool"
seed = 7
model = "llama-3-8b"
gpu = "h100"
[scheduler]
policy = "vllm"
num_gpu_blocks = 400
max_num_seqs = 32
max_num_batched_tokens = 2048
chunk_size = 512
[workload]
num_requests = 120
arrival = { kind = "poisson", rate = 20.0 }
prompt = { kind = "lognormal", mean = 700, sigma = 0.8, max = 4000 }
output = { kind = "uniform", min = 16, max = 256 }
[slo]
ttft_ms = 500
tpot_ms = 50
"""

_LONG = """\
# Long prompts (2k-7k tokens) on two A100 replicas: chunked prefill against whole prompts.
name = "long prompts: llama-3-8b on 2x a100-80g"
seed = 3
model = "llama-3-8b"
gpu = "a100-80g"
[deployment]
replicas = 2
router = "least_outstanding_tokens"
[scheduler]
policy = "vllm"
[workload]
num_requests = 600
arrival = { kind = "poisson", rate = 4.0 }
prompt = { kind = "uniform", min = 2000, max = 7000 }
output = { kind = "lognormal", mean = 200, sigma = 0.6, max = 800 }
[slo]
ttft_ms = 2000
tpot_ms = 60
"""

#: Preset name → TOML text (``None``: the core's embedded default).
PRESETS: dict[str, Optional[str]] = {
    "default · 70B, 2 × TP4 on H200": None,
    "small · 8B on 1 H100, tight KV": _SMALL,
    "long prompts · 8B on 2 A100": _LONG,
}


#: A preset's short name in the dashboard's URL (``?preset=small``) → its name.
PRESET_SLUGS: dict[str, str] = {name.split(" ", 1)[0]: name for name in PRESETS}

#: The longest edited scenario text the URL holds (encoded); a longer one is left out.
MAX_URL_TEXT = 8000


def encode_text(text: str) -> str:
    """An edited scenario text as a URL value: zlib-compressed, URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(zlib.compress(text.encode("utf-8"), 9)).decode("ascii").rstrip("=")


def decode_text(value: str) -> str:
    """The text :func:`encode_text` wrote (raises ``ValueError`` on anything else)."""
    try:
        raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
        return zlib.decompress(raw).decode("utf-8")
    except (zlib.error, UnicodeDecodeError, TypeError) as e:
        raise ValueError(str(e)) from None


def preset_scenario(name: str) -> Scenario:
    """A preset as a scenario (its TOML text kept, so errors name fields exactly)."""
    text = PRESETS[name]
    if text is None:
        return Scenario.default()
    return Scenario.from_text(text, "toml", source=f"preset: {name}")


@dataclass(frozen=True)
class Field:
    """One scenario field offered as a widget in the sidebar."""

    key: str
    """Widget key (also the session-state key)."""
    path: str
    """Dotted scenario path it overrides (errors naming it are shown under the widget)."""
    label: str
    kind: str
    """``select`` (options from the catalog), ``int`` or ``float``."""
    group: str
    step: float = 1.0
    help: str = ""


FIELDS: tuple[Field, ...] = (
    Field("policy", "scheduler.policy", "Scheduling policy", "select", "Policy",
          help="The policy whose run is detailed; compare others below."),
    Field("model", "model", "Model", "select", "Deployment"),
    Field("gpu", "gpu", "GPU", "select", "Deployment"),
    Field("tp", "deployment.tp", "Tensor parallel (TP)", "int", "Deployment"),
    Field("pp", "deployment.pp", "Pipeline stages (PP)", "int", "Deployment"),
    Field("replicas", "deployment.replicas", "Replicas", "int", "Deployment"),
    Field("router", "deployment.router", "Router", "select", "Deployment"),
    Field("rate", "workload.arrival.rate", "Arrival rate (req/s)", "float", "Workload", step=1.0),
    Field("num_requests", "workload.num_requests", "Requests", "int", "Workload", step=100),
    Field("seed", "seed", "Seed", "int", "Workload"),
    Field("block_size", "scheduler.block_size", "KV block size (tokens)", "int", "Scheduler",
          help="A power of two."),
    Field("max_num_batched_tokens", "scheduler.max_num_batched_tokens", "Token budget per step", "int",
          "Scheduler", step=512),
    Field("chunk_size", "scheduler.chunk_size", "Sarathi chunk size", "int", "Scheduler", step=128),
    Field("max_num_seqs", "scheduler.max_num_seqs", "Max running requests", "int", "Scheduler", step=16),
    Field("slo_ttft", "slo.ttft_ms", "SLO: TTFT (ms)", "float", "SLO", step=100.0),
    Field("slo_tpot", "slo.tpot_ms", "SLO: TPOT (ms)", "float", "SLO", step=5.0),
)


def base_value(resolved: Mapping[str, Any], path: str) -> Any:
    """The value at a dotted path of a (resolved) scenario dict, or None."""
    node: Any = resolved
    for key in path.split("."):
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
    if isinstance(node, Mapping):  # a model or GPU given as a table: show its preset name
        named = node.get("preset") or node.get("name")
        config = node.get("hf_config")
        if named is None and isinstance(config, Mapping):  # a config.json: its own name
            return config.get("_name_or_path") or f"config.json ({config.get('model_type', '?')})"
        return named
    return node


def trace_workload(text: str, format: str = "auto") -> dict[str, Any]:
    """The workload replaying an uploaded trace: its text inline, read by the core's trace
    reader like a file (every format o1sim reads; ``auto`` detects it)."""
    return {"trace": {"format": format, "text": text}}
