"""The dashboard's "Model check" tab: explore every order of arrivals and step completions
of a small configuration with the real scheduler, show which properties hold, and show each
violation's shortest counterexample step by step, with its replay scenario to download."""

from __future__ import annotations

import json

import pandas as pd
import streamlit as st

import o1sim
from o1sim import _core

#: The small configuration the tab starts from: the core's (the page's panel starts from it
#: too), six requests with mixed priorities on one replica with 16 blocks of 4 tokens.
DEFAULT_CHECK_TOML = _core.default_check_toml()

NO_BUG = "(none: the real policy)"


def counterexample_frame(v: o1sim.Violation) -> pd.DataFrame:
    """One row per action of a counterexample: step number, what happened, what changed."""
    return pd.DataFrame(
        [{"step": a["step"], "action": a["text"], "changes": "; ".join(a.get("changes", []))} for a in v.trace]
    )


def _run_check(text: str, policy: str, bug: str, max_states: int) -> o1sim.CheckResult:
    sc = o1sim.Scenario.from_text(text, "toml").with_overrides({"scheduler.policy": policy})
    if bug != NO_BUG:
        sc = sc.with_overrides({"scheduler.inject_bug": bug})
    bar = st.progress(0.0, text="exploring …")

    def progress(p: o1sim.CheckProgress) -> None:
        bar.progress(min(1.0, p.states / max_states), text=f"{p.states:,} states explored")

    try:
        return o1sim.check(sc, max_states=max_states, progress=progress)
    finally:
        bar.empty()


def check_tab() -> None:
    st.markdown(
        "Explores **every** order of arrivals and step completions of a small configuration with the "
        "simulator's own scheduler and KV manager, checks the invariants in every state, and shows the "
        "shortest counterexample of each violation. Inject a bug to see one."
    )
    c1, c2, c3 = st.columns([1, 1, 1])
    policy = c1.selectbox("Policy", o1sim.presets()["policies"], index=1, key="check_policy")
    bug = c2.selectbox("Injected bug", [NO_BUG, *o1sim.bug_names()], key="check_bug")
    max_states = c3.number_input("Max states", 1_000, 5_000_000, 2_000_000, step=100_000, key="check_max_states")
    text = st.text_area("Configuration (TOML; ≤ 16 requests, ≤ 64 blocks, `num_gpu_blocks` required)",
                        DEFAULT_CHECK_TOML, height=220, key="check_text")
    key = (text, policy, bug, int(max_states))
    if st.button("Check", type="primary", key="check_run"):
        # Kept in the session (not a cache): a re-render shows the last result without
        # exploring again, and the progress bar belongs to the run that was asked for.
        try:
            st.session_state["check_result"] = (key, _run_check(*key))
        except o1sim.SimError as e:
            st.session_state["check_result"] = (key, e)
    last = st.session_state.get("check_result")
    if last is None or last[0] != key:
        st.caption("Press Check to explore the configuration.")
        return
    res = last[1]
    if isinstance(res, o1sim.SimError):
        field = getattr(res, "field", "")
        st.error(f"{type(res).__name__}: {res}" + (f" (field `{field}`)" if field else ""))
        return
    a, b, c, d = st.columns(4)
    a.metric("States", f"{res.states:,}")
    b.metric("States / s", f"{res.states_per_s:,.0f}")
    c.metric("Search", "complete" if res.complete else f"stopped ({res.stopped})")
    d.metric("Violations", str(len(res.violations)))
    st.dataframe(pd.DataFrame({"property": list(res.properties), "result": list(res.properties.values())}),
                 hide_index=True, key="check_properties")
    if res.ok:
        st.success("All properties hold on every reachable state.")
    for v in res.violations:
        st.error(f"**{v.property}** violated in {v.length} actions: {v.message}")
        st.dataframe(counterexample_frame(v), hide_index=True, width="stretch")
        if v.reproduced is not None:
            st.caption("Replayed as a simulation: " + ("reproduced" if v.reproduced else "not reproduced")
                       + (f" — {v.replay_note}" if v.replay_note else ""))
        replay = v.replay_scenario
        cols = st.columns(2)
        cols[0].download_button("Counterexample (JSON)", json.dumps(v.data, indent=2),
                                file_name=f"counterexample-{v.property}.json", mime="application/json",
                                key=f"dl_cx_{v.property}")
        if replay is not None:
            cols[1].download_button("Replay scenario (JSON)", json.dumps(replay.to_dict(), indent=2),
                                    file_name=f"replay-{v.property}.json", mime="application/json",
                                    key=f"dl_replay_{v.property}")
    st.download_button("Petri net (PNML)", res.pnml, file_name=f"{policy}.pnml", mime="application/xml",
                       key="dl_pnml")
