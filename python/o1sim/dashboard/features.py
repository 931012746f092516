"""The sidebar's speculative decoding and LoRA controls, and the results' table of their
counters. The controls edit the scenario dict in place (a section off is left out, so a
scenario without them runs as written) and return what differs from the scenario for the
URL; ``FEATURE_KINDS`` tells the URL reader how to parse them back."""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any, Callable

import streamlit as st

import o1sim

OFF = "off"
#: Widget key → kind, for the URL (see ``app.read_url``).
FEATURE_KINDS: dict[str, str] = {
    "spec_method": "select", "spec_k": "int", "spec_accept": "float", "spec_draft": "select",
    "lora_adapters": "int", "lora_rank": "int", "max_loras": "int",
}
#: The error slot of the section's fields.
ERROR_SLOT_FEATURES = "_features"
#: The draft model offered first (the Llama 3 tokenizer's small member).
DEFAULT_DRAFT = "llama-3.2-1b"


def _section(data: dict[str, Any], name: str) -> dict[str, Any]:
    """``data[name]`` when it is a table, else a new one (put in ``data`` only once written)."""
    node = data.get(name)
    return node if isinstance(node, dict) else {}


def _put(data: dict[str, Any], name: str, node: dict[str, Any]) -> None:
    """Write a section back when it holds anything or the scenario had it."""
    if node or name in data:
        data[name] = node


@functools.lru_cache(maxsize=1)
def _default_workload_json() -> str:
    resolved = o1sim.Scenario({"model": "llama-3-8b", "gpu": "h100"}).validate()["scenario"]
    return json.dumps(resolved["workload"])


def default_workload() -> dict[str, Any]:
    """The workload the core runs when a scenario has no `workload` section."""
    workload: dict[str, Any] = json.loads(_default_workload_json())
    return workload


def features_sidebar(data: dict[str, Any], resolved: Mapping[str, Any], catalog: Mapping[str, Any],
                     slots: dict[str, Any], seed: Callable[[str, Any], None]) -> dict[str, str]:
    """The controls (seeded by ``seed`` from the scenario's own values); edits ``data``.
    ``resolved``: the scenario with its defaults, whose workload adapters are added to when
    the text has no workload section of its own."""
    sched = _section(data, "scheduler")
    work = _section(data, "workload") if "workload" in data else dict(resolved.get("workload") or default_workload())
    spec = sched.get("speculative") if isinstance(sched.get("speculative"), dict) else None
    lora = work.get("lora") if isinstance(work.get("lora"), dict) else None
    methods = [OFF, *(m["name"] for m in catalog.get("speculative_methods", []))]
    models = [m["name"] for m in catalog.get("models", [])]
    seeded: dict[str, Any] = {
        "spec_method": str(spec.get("method", OFF)) if spec else OFF,
        "spec_k": int(spec.get("num_tokens", 3)) if spec else 3,
        "spec_accept": float(spec["acceptance_rate"]) if spec and isinstance(spec.get("acceptance_rate"), (int, float)) else 0.7,
        "spec_draft": str(spec.get("draft_model", DEFAULT_DRAFT)) if spec else DEFAULT_DRAFT,
        "lora_adapters": int(lora.get("adapters", 0)) if lora else 0,
        "lora_rank": int(lora.get("rank", 16)) if lora else 16,
        "max_loras": int(sched.get("max_loras", 1)),
    }
    for key, value in seeded.items():
        seed(key, value)
    if st.session_state["spec_method"] not in methods:
        methods.append(st.session_state["spec_method"])
    with st.sidebar.expander("Speculative decoding & LoRA", expanded=spec is not None or lora is not None):
        method = st.selectbox("Speculative decoding", methods, key="spec_method",
                              help="Drafts verified per decode step (vLLM's speculative_config).")
        c1, c2 = st.columns(2)
        k = c1.number_input("Drafts k", min_value=1, max_value=16, step=1, key="spec_k")
        accept = c2.number_input("Acceptance", min_value=0.0, max_value=1.0, step=0.05, key="spec_accept", format="%g",
                                 help="Each draft accepted with this probability given the ones before it were.")
        draft = st.selectbox("Draft model", models, key="spec_draft") if method == "draft_model" else None
        c3, c4 = st.columns(2)
        adapters = c3.number_input("LoRA adapters", min_value=0, step=1, key="lora_adapters", help="0 = no LoRA.")
        rank = c4.number_input("LoRA rank", min_value=1, step=8, key="lora_rank")
        max_loras = st.number_input("Max LoRAs per step", min_value=1, step=1, key="max_loras",
                                    help="vLLM's max_loras: GPU slots; a request whose adapter would be one too many waits.")
    slots[ERROR_SLOT_FEATURES] = st.sidebar.empty()
    if method == OFF:
        sched.pop("speculative", None)
    else:
        # The scenario's own section where the method is its own (a per-position list stays
        # unless the acceptance widget is changed).
        new: dict[str, Any] = dict(spec) if spec and spec.get("method") == method else {"method": method}
        new["num_tokens"] = int(k)
        if float(accept) != seeded["spec_accept"] or ("acceptance_rate" not in new and method != "mtp"):
            new["acceptance_rate"] = float(accept)
        if draft is not None:
            new["draft_model"] = draft
        else:
            new.pop("draft_model", None)
        sched["speculative"] = new
    if int(adapters) > 0:
        work["lora"] = {**(lora or {}), "adapters": int(adapters), "rank": int(rank)}
        sched["max_loras"] = int(max_loras)
    else:
        work.pop("lora", None)
        sched.pop("max_loras", None)
    _put(data, "scheduler", sched)
    if "workload" in data or "lora" in work:
        data["workload"] = work
    values = {"spec_method": method, "spec_k": int(k), "spec_accept": float(accept), "spec_draft": draft,
              "lora_adapters": int(adapters), "lora_rank": int(rank), "max_loras": int(max_loras)}
    return {key: (f"{v:.15g}" if isinstance(v, float) else str(v)) for key, v in values.items()
            if v is not None and v != seeded[key]}


def features_table(summaries: Mapping[str, Mapping[str, Any]]) -> None:
    """Speculative decoding's and LoRA's counters, a row per policy that ran with either."""
    rows = []
    for policy, s in summaries.items():
        sp, lo = s.get("speculative"), s.get("lora")
        if not sp and not lo:
            continue
        row: dict[str, Any] = {"policy": policy}
        if sp:
            row.update({"acceptance rate": sp.get("acceptance_rate"), "tokens per verify": sp.get("tokens_per_verify"),
                        "drafts accepted": sp.get("accepted_tokens"), "drafts verified": sp.get("draft_tokens")})
        if lo:
            row.update({"requests that waited for a LoRA slot": lo.get("slot_waits"), "adapter loads": lo.get("adapter_loads"),
                        "from disk": lo.get("adapter_loads_from_disk"), "adapter load time (ms)": lo.get("load_ms")})
        rows.append(row)
    if rows:
        import pandas as pd

        st.markdown("**Speculative decoding & LoRA**")
        frame = pd.DataFrame(rows).set_index("policy")
        st.table(frame.map(lambda v: f"{v:,.3f}" if isinstance(v, float) else f"{v:,}" if isinstance(v, int) else v))
