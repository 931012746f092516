"""The dashboard's "Capacity & plan" tab: the highest rate the scenario's deployment holds
under an SLO (:func:`o1sim.capacity`), and the cheapest configuration of a few choices that
meets it at a load (:func:`o1sim.plan`), with the Pareto front of cost against tail latency.

Both run on every CPU (threads; the core releases the GIL) and keep their answer in the
session keyed by the scenario's text, so switching tabs shows it again without a run.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Optional

import altair as alt
import pandas as pd
import streamlit as st

import o1sim

#: The SLO inputs: label, SLO key, default, step.
SLO_INPUTS = [
    ("TTFT p99 ≤ (ms)", "ttft_p99_ms", 2000.0, 100.0),
    ("TPOT p99 ≤ (ms)", "tpot_p99_ms", 50.0, 5.0),
]


def _key(scenario: o1sim.Scenario, *parts: Any) -> str:
    h = hashlib.sha1(scenario.payload()[0].encode())
    h.update(json.dumps(parts, sort_keys=True, default=str).encode())
    return h.hexdigest()


def slo_inputs(prefix: str) -> dict[str, Any]:
    """The SLO widgets (0 leaves a bound out); the SLO as :func:`o1sim.capacity` takes it."""
    cols = st.columns(len(SLO_INPUTS) + 1)
    slo: dict[str, Any] = {}
    for col, (label, key, default, step) in zip(cols, SLO_INPUTS):
        v = col.number_input(label, min_value=0.0, value=default, step=step, key=f"{prefix}_{key}",
                             help="0 leaves this bound out")
        if v > 0:
            slo[key] = float(v)
    g = cols[-1].number_input("goodput ≥ (fraction)", min_value=0.0, max_value=1.0, value=0.0, step=0.01,
                              key=f"{prefix}_goodput", help="Share of all requests within the per-request SLO; 0 leaves it out")
    if g > 0:
        slo["goodput"] = float(g)
    return slo


def binding_bound(c: o1sim.Capacity) -> tuple[str, float]:
    """The bound that decided the search: the latency closest to (or furthest past) its bound
    at the rates tried (goodput when the SLO bounds nothing else)."""
    latencies = [(k, float(v)) for k, v in c.slo.items() if k != "goodput" and k in c.points.columns]
    if not latencies:
        return "slo_attainment", float(c.slo.get("goodput", 0.0))
    return max(latencies, key=lambda kv: float((c.points[kv[0]] / kv[1]).max()))


def capacity_chart(points: pd.DataFrame, metric: str, bound: float) -> alt.LayerChart:
    """Every rate evaluated: the bounded metric (mean over seeds) against the rate, coloured
    by whether every seed met the SLO, with the bound as a rule."""
    frame = points.groupby("rate", as_index=False).agg(value=(metric, "mean"), meets=("meets", "all"))
    frame["meets"] = frame["meets"].map({True: "meets", False: "misses"})
    dots = alt.Chart(frame).mark_circle(size=90).encode(
        x=alt.X("rate:Q", title="arrival rate (req/s)"),
        y=alt.Y("value:Q", title=metric),
        color=alt.Color("meets:N", scale=alt.Scale(domain=["meets", "misses"], range=["#2ca02c", "#d62728"]), title="SLO"),
        tooltip=["rate", "value", "meets"],
    )
    rule = alt.Chart(pd.DataFrame({"bound": [bound]})).mark_rule(strokeDash=[4, 4]).encode(y="bound:Q")
    chart: alt.LayerChart = (dots + rule).properties(height=260, title=f"{metric} at each rate tried")
    return chart


def pareto_chart(configs: pd.DataFrame, latency: str, params: list[str]) -> alt.LayerChart:
    """Feasible configurations' cost against latency; the Pareto front joined by a line."""
    f = configs[configs["feasible"]].copy()
    f["config"] = f[params].astype(str).agg(" · ".join, axis=1)
    f["front"] = f["pareto"].map({True: "Pareto front", False: "dominated"})
    dots = alt.Chart(f).mark_circle(size=90).encode(
        x=alt.X("usd_per_hour:Q", title="$ per hour"),
        y=alt.Y(f"{latency}:Q", title=latency),
        color=alt.Color("front:N", title=""),
        tooltip=["config", "usd_per_hour", latency, "usd_per_million_tokens"],
    )
    line = alt.Chart(f[f["pareto"]].sort_values("usd_per_hour")).mark_line().encode(x="usd_per_hour:Q", y=f"{latency}:Q")
    chart: alt.LayerChart = (line + dots).properties(height=300, title=f"cost against {latency} (feasible configurations)")
    return chart


def _show_error(err: BaseException) -> None:
    field = getattr(err, "field", "")
    st.error(f"{type(err).__name__}: {err}" + (f" (field: {field})" if field and field not in str(err) else ""))


def capacity_section(scenario: o1sim.Scenario, trace: Optional[str] = None) -> None:
    st.markdown("**Capacity**: the highest arrival rate at which this deployment meets the SLO on every seed "
                "(a bracketing search: doubling or halving from the scenario's rate, then narrowing).")
    if trace:
        st.caption(f"On {trace}: the search scales the trace's arrival rate (workload.trace.rate_scale divides "
                   "every arrival time); a rate is the trace's requests over its scaled span.")
    slo = slo_inputs("cap")
    c1, c2, c3 = st.columns([1, 1, 1])
    seeds = c1.number_input("Seeds per rate", 1, 10, 3, key="cap_seeds")
    tol = c2.number_input("Tolerance (%)", 0.5, 20.0, 2.0, step=0.5, key="cap_tol")
    c3.write("")
    go = c3.button("Find capacity", type="primary", key="cap_run")
    key = _key(scenario, slo, seeds, tol)
    if go:
        if not slo:
            st.error("Give at least one bound.")
            return
        box = st.empty()
        rounds: list[str] = []

        def progress(line: str) -> None:
            rounds.append(line)
            box.caption(f"round {len(rounds)}: {line}")

        try:
            c = o1sim.capacity(scenario, slo, seeds=int(seeds), tolerance=float(tol) / 100, progress=progress)
        except (o1sim.SimError, ValueError) as e:
            box.empty()
            _show_error(e)
            return
        box.empty()
        st.session_state["capacity"] = {"key": key, "answer": c}
    got = st.session_state.get("capacity")
    if not got:
        return
    if got["key"] != key:
        st.info("The scenario or the SLO changed since the last search: run it again.")
        return
    c = got["answer"]
    if c.rate is None:
        st.warning(f"No sustainable rate: {c.message}")
    else:
        st.metric("Capacity (req/s)", f"{c.rate:,.2f}", help=c.message)
        st.caption(c.message)
        if trace and c.rate_scale is not None:
            st.caption(f"Capacity on {trace}: its arrival rate × {c.rate_scale:.4g} (rate_scale {c.rate_scale:.4g}, "
                       f"{c.rate:,.2f} req/s).")
    metric, bound = binding_bound(c)
    st.altair_chart(capacity_chart(c.points, metric, bound), width="stretch")
    st.dataframe(c.rates, width="stretch", hide_index=True)


def plan_section(scenario: o1sim.Scenario, rate: Optional[float], trace: Optional[str] = None) -> None:
    st.markdown("**Plan**: every configuration of the choices at a load, judged against the SLO and priced; "
                "the cheapest that meets it, and the Pareto front of cost against tail latency.")
    catalog = o1sim.presets()
    prices = o1sim.default_prices()
    c1, c2, c3, c4 = st.columns(4)
    gpus = c1.multiselect("GPUs", [g["name"] for g in catalog["gpus"]], default=["h100", "h200"], key="plan_gpus")
    tps = c2.multiselect("TP", [1, 2, 4, 8], default=[2, 4, 8], key="plan_tp")
    reps = c3.multiselect("Replicas", [1, 2, 3, 4, 6, 8], default=[1, 2, 4], key="plan_replicas")
    policies = c4.multiselect("Policies", catalog["policies"], default=["vllm"], key="plan_policies")
    slo = slo_inputs("plan")
    d1, d2, d3 = st.columns([1, 1, 1])
    load = d1.number_input("Load (req/s)", min_value=0.01, value=float(rate or 1.0), key="plan_load")
    seeds = d2.number_input("Seeds per configuration", 1, 10, 1, key="plan_seeds")
    edited = st.data_editor(
        pd.DataFrame([{"gpu": g, "usd_per_hour": prices[g]["usd_per_hour"], "source": prices[g]["source"]} for g in gpus]),
        disabled=["gpu", "source"], hide_index=True, key="plan_prices", width="stretch",
    ) if gpus else pd.DataFrame(columns=["gpu", "usd_per_hour"])
    d3.write("")
    go = d3.button("Plan", type="primary", key="plan_run")
    choices = {"gpu": gpus, "deployment.tp": tps, "deployment.replicas": reps, "scheduler.policy": policies}
    price_map = {str(r["gpu"]): float(r["usd_per_hour"]) for _, r in edited.iterrows()}
    key = _key(scenario, choices, slo, load, seeds, price_map)
    if go:
        empty = [k for k, v in choices.items() if not v]
        if empty or not slo:
            st.error(f"Choose at least one value for {', '.join(empty)}." if empty else "Give at least one bound.")
            return
        bar = st.progress(0.0, text="planning …")

        def tick(done: int, total: int) -> None:
            bar.progress(done / total, text=f"{done:,}/{total:,} runs")

        try:
            p = o1sim.plan(scenario, choices, slo, load=float(load), prices=price_map, seeds=int(seeds), progress=tick)
        except (o1sim.SimError, ValueError) as e:
            bar.empty()
            _show_error(e)
            return
        bar.empty()
        st.session_state["plan"] = {"key": key, "answer": p}
    got = st.session_state.get("plan")
    if not got:
        return
    if got["key"] != key:
        st.info("The scenario or the choices changed since the last plan: run it again.")
        return
    p = got["answer"]
    best = p.cheapest
    if best is None:
        st.warning("No configuration meets the SLO at this load.")
    else:
        what = " · ".join(f"{k} {best[k]}" for k in p.params)
        st.metric("Cheapest ($/hour)", f"{best['usd_per_hour']:,.2f}", help=what)
        st.caption(f"Cheapest: {what} — ${best['usd_per_million_tokens']:,.3f} per million tokens")
        st.altair_chart(pareto_chart(p.configs, p.latency, p.params), width="stretch")
    st.caption(f"{int(p.configs['feasible'].sum())} of {len(p.configs)} configurations meet the SLO and sustain the "
               "load (98% of the requests served within the per-request SLO).")
    if trace and p.rate_scale is not None:
        st.caption(f"Planned on {trace}: its arrival rate × {p.rate_scale:.4g} (rate_scale {p.rate_scale:.4g}) "
                   f"offers the load of {float(load):,.2f} req/s.")
    st.dataframe(p.configs, width="stretch", hide_index=True)


def capacity_tab(scenario: o1sim.Scenario, rate: Optional[float], trace: Optional[str] = None) -> None:
    """``trace``: what to call the scenario's replayed trace in the captions (None: none)."""
    capacity_section(scenario, trace)
    st.divider()
    plan_section(scenario, rate, trace)
