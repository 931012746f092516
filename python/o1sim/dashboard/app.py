"""The o1sim dashboard, a Streamlit app: ``o1sim dashboard`` (or ``streamlit run`` this file).

The sidebar builds a scenario: a preset or an uploaded TOML/JSON file (editable as text),
an optional request trace (any format the core reads: Azure, Mooncake, Vidur, BLIS,
inference-perf, vLLM, plain CSV/JSONL) replayed as the workload through the core's trace
reader, and overrides of the common fields. The main area runs the chosen policy and the ones to compare, and shows the
summary, latency CDFs, KV use and queues over time, a GPU × time heatmap, a load sweep,
the deployment and downloads. A scenario error is shown under the input it concerns.

Runs are cached on the scenario's exact text (``st.cache_resource``: a ``Result`` holds the
core's object, which does not pickle, and is never modified), so a re-render — switching a
tab, a chart, a download — does not simulate again; derived downloads are cached with
``st.cache_data``.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import re
from collections.abc import Mapping
from typing import Any, Optional

import pandas as pd
import streamlit as st

import o1sim
from o1sim import registry
from o1sim._files import refuse_files
from o1sim.dashboard import charts
from o1sim.dashboard.capacity_tab import capacity_tab
from o1sim.dashboard.check_tab import check_tab
from o1sim.dashboard.features import ERROR_SLOT_FEATURES, FEATURE_KINDS, features_sidebar, features_table
from o1sim.dashboard.scenarios import (
    FIELDS,
    MAX_URL_TEXT,
    PRESET_SLUGS,
    PRESETS,
    Field,
    base_value,
    decode_text,
    encode_text,
    preset_scenario,
    trace_workload,
)

st.set_page_config(page_title="o1sim dashboard", layout="wide")

ERROR_SLOT_EDITOR = "_editor"
ERROR_SLOT_TRACE = "_trace"
ERROR_SLOT_TOPOLOGY = "_topology"
ERROR_SLOT_EVENTS = "_events"
NO_TOPOLOGY = "(none)"
FROM_TEXT = "(as in the scenario text)"
MAX_EVENTS = 4
#: Topology event kinds offered in the sidebar, from the core's registry: label → the
#: scenario's ``kind``; and each kind's target (``link``: src/dst; ``gpu``: node).
EVENT_KINDS = {e["label"]: e["name"] for e in registry.event_kinds()}
EVENT_TARGETS = {e["name"]: e["target"] for e in registry.event_kinds()}
#: Session-state keys of the topology widgets (reset with the other fields).
TOPOLOGY_KEYS = ("topology", "n_events") + tuple(f"ev{i}_{k}" for i in range(MAX_EVENTS)
                                                  for k in ("kind", "link", "pct", "at"))


#: The event widgets' defaults (a value equal to one stays out of the URL).
EVENT_AT_S = 60.0
EVENT_PCT = 10.0


# --------------------------------------------------------------------------- cached work


@st.cache_resource(show_spinner=False, max_entries=512)
def run_cached(text: str, fmt: str) -> o1sim.Result:
    """One simulation per distinct scenario text (errors are raised, not cached)."""
    return o1sim.simulate(o1sim.Scenario.from_text(text, fmt))


@st.cache_data(show_spinner=False, max_entries=64)
def validate_cached(text: str, fmt: str) -> dict[str, Any]:
    return o1sim.Scenario.from_text(text, fmt).validate()


@st.cache_data(show_spinner=False, max_entries=8)
def trace_info_cached(text: str, fmt: str) -> dict[str, Any]:
    """The detected format and request count of an uploaded trace (errors raised)."""
    return o1sim.workload.trace_info(text, fmt)


@st.cache_data(show_spinner=False, max_entries=32)
def topology_cached(entry_json: str) -> dict[str, Any]:
    """The expanded topology (nodes and links) of a scenario's ``topology`` entry (a file
    path is refused, unread: the scenario came over the wire)."""
    entry = json.loads(entry_json)
    refuse_files({"topology": entry})
    return o1sim.topology.expand(entry)


@st.cache_data(show_spinner=False, max_entries=16)
def prometheus_cached(text: str, fmt: str) -> str:
    # Its inter-token latencies come from the steps: the run that recorded them (the Steps tab's).
    return steps_run_cached(text, fmt).to_prometheus()


@st.cache_data(show_spinner=False, max_entries=4)
def trace_cached(text: str, fmt: str) -> str:
    return steps_run_cached(text, fmt).to_chrome_trace()


@st.cache_resource(show_spinner=False, max_entries=8)
def steps_run_cached(text: str, fmt: str) -> o1sim.Result:
    """The run again with every step recorded (the Steps tab asks for it)."""
    return o1sim.simulate(o1sim.Scenario.from_text(text, fmt), record_steps=True)


@st.cache_data(show_spinner=False, max_entries=64)
def anatomy_cached(text: str, fmt: str, step: int) -> pd.DataFrame:
    return steps_run_cached(text, fmt).step_anatomy(step)


@st.cache_data(show_spinner=False, max_entries=16)
def csv_cached(text: str, fmt: str) -> str:
    csv: str = run_cached(text, fmt).requests.to_csv(index=False)
    return csv


# --------------------------------------------------------------------------- sidebar


def _error_slot_for(field: Optional[str], slots: Mapping[str, Any]) -> Any:
    """The placeholder under the input an error's field belongs to (else the editor's)."""
    if field:
        if field.startswith(("trace", "workload.trace")):
            return slots[ERROR_SLOT_TRACE]
        if field.startswith("events") and ERROR_SLOT_EVENTS in slots:
            m = re.match(r"events\[(\d+)\]", field)
            index = int(m.group(1)) - int(slots.get("_text_events", 0)) if m else -1
            return slots.get(f"_event{index}", slots[ERROR_SLOT_EVENTS])
        if ERROR_SLOT_FEATURES in slots and field.startswith(("scheduler.speculative", "workload.lora", "scheduler.max_loras",
                                                                "scheduler.max_cpu_loras")):
            return slots[ERROR_SLOT_FEATURES]
        if ERROR_SLOT_TOPOLOGY in slots and (field.startswith("topology") or field == "deployment"
                                             or field.startswith("deployment.placement")):
            return slots[ERROR_SLOT_TOPOLOGY]
        for f in FIELDS:
            if f.key in slots and (field == f.path or field.startswith(f.path + ".") or field.startswith(f.path + "[")):
                return slots[f.key]
    return slots[ERROR_SLOT_EDITOR]


def _show_error(err: BaseException, slots: Mapping[str, Any], field: Optional[str] = None) -> None:
    field = field if field is not None else getattr(err, "field", None)
    if isinstance(err, o1sim.InfeasibleError) and "gpu" in slots:
        slot = slots["gpu"]
    else:
        slot = _error_slot_for(field, slots)
    slot.error(f"{type(err).__name__}: {err}")


def _base_scenario() -> tuple[str, str, str]:
    """(text, format, label) of the chosen preset or uploaded file."""
    source = st.sidebar.radio("Scenario", ["Preset", "Upload a file"], horizontal=True, key="source")
    if source == "Upload a file":
        up = st.sidebar.file_uploader("Scenario (.toml or .json)", type=["toml", "json"], key="upload")
        if up is not None:
            fmt = "json" if up.name.lower().endswith(".json") else "toml"
            return up.getvalue().decode("utf-8", errors="replace"), fmt, up.name
        st.sidebar.caption("No file yet: showing the default scenario.")
    name = st.sidebar.selectbox("Preset", list(PRESETS), key="preset") if source == "Preset" else list(PRESETS)[0]
    text, fmt = preset_scenario(name).payload()
    return text, fmt, name


def _seed(key: str, value: Any) -> None:
    """Give widget ``key`` the value ``value`` unless it already has one this session.

    Widget values live in Session State and are *set* there, never passed as a widget's
    default: a default only applies to a widget the browser does not know yet, so after a
    preset switch, an upload or a text edit the browser would keep showing (and send back
    on the next click) the previous scenario's values. A value set in Session State before
    the widget is drawn is sent to the browser, which then shows it."""
    if key not in st.session_state:
        st.session_state[key] = value


def _reset_widgets() -> None:
    """Forget every override widget's value: they are seeded again from the scenario."""
    for key in (*(f.key for f in FIELDS), *TOPOLOGY_KEYS, *FEATURE_KINDS):
        st.session_state.pop(key, None)


def _widget(f: Field, base: Any, options: Mapping[str, list[str]], container: Any) -> Any:
    if f.kind == "select":
        opts = list(options[f.key])
        if base is not None and str(base) not in opts:
            opts.append(str(base))
        _seed(f.key, str(base) if base is not None else opts[0])
        if st.session_state[f.key] not in opts:
            opts.append(st.session_state[f.key])
        return container.selectbox(f.label, opts, key=f.key, help=f.help or None)
    if f.kind == "int":
        _seed(f.key, int(base) if base is not None else 0)
        return container.number_input(f.label, step=int(f.step), key=f.key, help=f.help or None)
    _seed(f.key, float(base) if base is not None else 0.0)
    return container.number_input(f.label, step=float(f.step), key=f.key, help=f.help or None, format="%g")


def _link_options(entry: Any) -> tuple[list[str], list[str], dict[str, float]]:
    """(links as "a – b", GPU ids, nominal GB/s per link) of a topology entry ([] if invalid)."""
    try:
        full = topology_cached(json.dumps(entry, sort_keys=True))
    except (o1sim.SimError, TypeError, ValueError):
        return [], [], {}
    links = [f"{x['src']} – {x['dst']}" for x in full["links"]]
    gpus = [str(n["id"]) for n in full["nodes"] if n.get("kind") == "gpu"]
    return links, gpus, {f"{x['src']} – {x['dst']}": float(x["bandwidth_gbps"]) for x in full["links"]}


def topology_sidebar(data: dict[str, Any], catalog: Mapping[str, Any], slots: dict[str, Any]) -> dict[str, str]:
    """The topology selector and link events; edits ``data`` (the scenario) in place.
    Returns the choices that differ from the scenario's (and the widgets' defaults), for the URL."""
    st.sidebar.markdown("**Topology**")
    current = data.get("topology")
    presets = [str(t) for t in catalog.get("topologies", [])]
    options = [NO_TOPOLOGY, *presets]
    if current is not None and not (isinstance(current, str) and current in presets):
        options.append(FROM_TEXT)
    seeded = (current if isinstance(current, str) and current in presets
              else FROM_TEXT if current is not None else NO_TOPOLOGY)
    _seed("topology", seeded)
    if st.session_state["topology"] not in options:
        st.session_state["topology"] = options[0]
    choice = st.sidebar.selectbox(
        "GPU fabric", options, key="topology",
        help="Prices TP AllReduces, PP transfers and disagg KV moves on the fabric's links; "
             "the Deployment tab then shows per-link utilisation. A table goes in the scenario text.")
    slots[ERROR_SLOT_TOPOLOGY] = st.sidebar.empty()
    url: dict[str, str] = {} if choice == seeded else {"topology": str(choice)}
    if choice == NO_TOPOLOGY:
        data.pop("topology", None)
        data.pop("events", None)
        return url
    if choice != FROM_TEXT:
        data["topology"] = choice
    text_events = list(data.get("events") or []) if isinstance(data.get("events", []), list) else []
    slots["_text_events"] = len(text_events)
    links, gpus, nominal = _link_options(data["topology"])
    _seed("n_events", 0)
    n = int(st.sidebar.number_input("Link events", min_value=0, max_value=MAX_EVENTS, step=1, key="n_events",
                                    help="What-ifs: degrade, cut or restore a link, or remove a GPU, at a time."))
    if n:
        url["n_events"] = str(n)
    if text_events:
        st.sidebar.caption(f"{len(text_events)} event(s) from the scenario text apply too.")
    slots[ERROR_SLOT_EVENTS] = st.sidebar.empty()
    added: list[dict[str, Any]] = []
    for i in range(n):
        _seed(f"ev{i}_kind", list(EVENT_KINDS)[0])
        kind = EVENT_KINDS[st.sidebar.selectbox(f"Event {i + 1}", list(EVENT_KINDS), key=f"ev{i}_kind")]
        on_gpu = EVENT_TARGETS[kind] == "gpu"
        what = (gpus if on_gpu else links) or ["—"]
        if st.session_state.get(f"ev{i}_link") not in what:
            st.session_state[f"ev{i}_link"] = what[0]
        target = st.sidebar.selectbox("GPU" if on_gpu else "link", what, key=f"ev{i}_link")
        c1, c2 = st.sidebar.columns(2)
        _seed(f"ev{i}_at", EVENT_AT_S)
        at = c1.number_input("at t (s)", step=10.0, key=f"ev{i}_at", format="%g")
        event: dict[str, Any] = {"at_s": float(at), "kind": kind}
        if st.session_state[f"ev{i}_kind"] != list(EVENT_KINDS)[0]:
            url[f"ev{i}_kind"] = str(st.session_state[f"ev{i}_kind"])
        if target != what[0]:
            url[f"ev{i}_link"] = str(target)
        if float(at) != EVENT_AT_S:
            url[f"ev{i}_at"] = _url_value(float(at))
        if kind == "set_link":
            _seed(f"ev{i}_pct", EVENT_PCT)
            pct = c2.number_input("to % of bandwidth", step=5.0, key=f"ev{i}_pct", format="%g")
            event["bandwidth_gbps"] = nominal.get(str(target), 0.0) * float(pct) / 100.0
            if float(pct) != EVENT_PCT:
                url[f"ev{i}_pct"] = _url_value(float(pct))
        if on_gpu:
            event["node"] = str(target)
        else:
            src, _, dst = str(target).partition(" – ")
            event["src"], event["dst"] = src, dst
        added.append(event)
        slots[f"_event{i}"] = st.sidebar.empty()
    if text_events or added:
        data["events"] = text_events + added
    return url


# --------------------------------------------------------------------------- the URL


def _url_value(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.15g}"
    return str(v)


def _parse(kind: str, raw: str) -> Any:
    """A URL value as widget ``kind`` holds it (``ValueError`` if it is not one)."""
    if kind == "int":
        return int(raw)
    if kind == "float":
        v = float(raw)
        if v != v or v in (float("inf"), float("-inf")):
            raise ValueError(raw)
        return v
    return raw


def read_url() -> None:
    """On a session's first run, take the experiment from the URL's query parameters (as
    :func:`write_url` wrote them): the preset now, the edited text and the widget values
    later (``_from_url``), once the scenario they apply to has reset the widgets. A value
    that does not parse is left out."""
    if st.session_state.get("_url_read"):
        return
    st.session_state["_url_read"] = True
    q = st.query_params.to_dict()
    if q.get("preset") in PRESET_SLUGS:
        st.session_state["preset"] = PRESET_SLUGS[q["preset"]]
    kinds = {f.key: f.kind for f in FIELDS}
    kinds.update({"topology": "select", "n_events": "int", **FEATURE_KINDS})
    for i in range(MAX_EVENTS):
        kinds.update({f"ev{i}_kind": "select", f"ev{i}_link": "select", f"ev{i}_at": "float", f"ev{i}_pct": "float"})
    values: dict[str, Any] = {}
    for key, kind in kinds.items():
        if key in q:
            try:
                values[key] = _parse(kind, q[key])
            except ValueError:
                continue
    if "n_events" in values:
        values["n_events"] = min(max(int(values["n_events"]), 0), MAX_EVENTS)
    for i in range(MAX_EVENTS):
        if values.get(f"ev{i}_kind", list(EVENT_KINDS)[0]) not in EVENT_KINDS:
            values.pop(f"ev{i}_kind")
    if "compare" in q:
        policies = list(o1sim.presets()["policies"])
        values["compare"] = [p for p in q["compare"].split(",") if p in policies]
    text: Optional[str] = None
    if "text" in q:
        try:
            text = decode_text(q["text"])
        except ValueError:
            text = None
    st.session_state["_from_url"] = (text, values)


def write_url(state: Mapping[str, str]) -> None:
    """Put the experiment in the URL's query parameters (only what differs from the preset),
    so that reloading or sharing the URL brings it back."""
    if st.query_params.to_dict() != dict(state):
        st.query_params.from_dict(dict(state))


def sidebar() -> tuple[Optional[o1sim.Scenario], str, list[str], dict[str, Any]]:
    """Build the scenario from the sidebar. Returns (scenario or None on error, label,
    policies to compare, error slots)."""
    st.sidebar.title("o1sim")
    read_url()
    slots: dict[str, Any] = {}
    base_text, base_fmt, label = _base_scenario()
    uploaded = st.session_state.get("source") == "Upload a file" and label not in PRESETS

    # A new preset or file resets the editor and the overrides to its values.
    base_id = hashlib.sha1(f"{label}\0{base_text}".encode()).hexdigest()
    if st.session_state.get("_base_id") != base_id:
        _reset_widgets()
        st.session_state["scenario_text"] = base_text
        st.session_state["_base_id"] = base_id
    url_text, url_values = st.session_state.pop("_from_url", (None, {}))
    if url_text is not None:
        st.session_state["scenario_text"] = url_text

    with st.sidebar.expander("Edit the scenario text", expanded=False):
        text = st.text_area("Scenario (TOML or JSON)", key="scenario_text", height=320,
                            help="Every field of the scenario reference; unknown fields are errors.")
    slots[ERROR_SLOT_EDITOR] = st.sidebar.empty()
    # Edited text resets the widgets to its values (else they would silently override it).
    text_id = hashlib.sha1(text.encode()).hexdigest()
    if st.session_state.get("_text_id") != text_id:
        _reset_widgets()
        st.session_state["_text_id"] = text_id
    st.session_state.update(url_values)  # the URL's choices, on this scenario
    fmt = base_fmt
    if text.lstrip().startswith("{"):
        fmt = "json"
    elif base_fmt == "json":
        fmt = "toml"

    trace = st.sidebar.file_uploader(
        "Request trace (optional)", type=["csv", "jsonl", "json", "txt"], key="trace",
        help="Replayed as the workload: Azure LLM inference (TIMESTAMP, ContextTokens, GeneratedTokens), Mooncake "
             "JSONL (timestamp, input_length, output_length, hash_ids), Vidur, BLIS trace v2, inference-perf's "
             "per-request JSON, a vLLM benchmark result, or CSV/JSONL with arrival_ms, prompt_tokens, output_tokens.")
    trace_format = "auto"
    st.session_state["_trace_name"] = trace.name if trace is not None else None
    if trace is not None:
        trace_format = st.sidebar.selectbox("Trace format", o1sim.workload.TRACE_FORMATS, key="trace_format",
                                            help="auto: told apart by the file's first line.")
    trace_caption = st.sidebar.empty()
    slots[ERROR_SLOT_TRACE] = st.sidebar.empty()

    catalog = o1sim.presets()
    options = {
        "policy": list(catalog["policies"]), "router": list(catalog["routers"]),
        "model": [m["name"] for m in catalog["models"]], "gpu": [g["name"] for g in catalog["gpus"]],
    }

    error: Optional[tuple[BaseException, Optional[str]]] = None
    data: dict[str, Any] = {}
    resolved: dict[str, Any] = {}
    try:
        data = o1sim.Scenario.from_text(text, fmt, source=label).to_dict()
    except o1sim.SimError as e:  # not TOML/JSON at all
        error = (e, None)
    try:
        resolved = validate_cached(text, fmt)["scenario"]
    except o1sim.SimError:
        # Invalid as written: the widgets show what the text says and the check of the final
        # scenario below reports the error (a widget may already correct it).
        resolved = {}
    if trace is not None:
        trace_text = trace.getvalue().decode("utf-8", errors="replace")
        data["workload"] = trace_workload(trace_text, trace_format)
        resolved["workload"] = data["workload"]
        try:
            info = trace_info_cached(trace_text, trace_format)
            trace_caption.caption(f"{trace.name}: {info['format']} · {info['requests']:,} requests")
        except o1sim.ConfigError as e:
            error = error or (e, "trace")
    shown = resolved or data

    overrides: dict[str, Any] = {}
    compare: list[str] = []
    # Lay the fields out: selects on their own line, numbers two to a line. Each line gets
    # one full-width error slot under it.
    lines: list[list[tuple[Field, Any]]] = []
    for f in FIELDS:
        base_v = base_value(shown, f.path)
        if f.key in ("rate", "num_requests") and base_v is None:
            continue  # an explicit or duration-bound workload: not applicable
        paired = f.kind != "select" and lines and len(lines[-1]) == 1 and lines[-1][0][0].kind != "select" \
            and lines[-1][0][0].group == f.group
        if paired:
            lines[-1].append((f, base_v))
        else:
            lines.append([(f, base_v)])

    group = ""
    for line in lines:
        if line[0][0].group != group:
            group = line[0][0].group
            if group != "Policy":
                st.sidebar.markdown(f"**{group}**")
        containers: list[Any] = [st.sidebar] if line[0][0].kind == "select" else list(st.sidebar.columns(2))
        values = [_widget(f, base_v, options, c) for (f, base_v), c in zip(line, containers)]
        slot = st.sidebar.empty()
        for (f, base_v), value in zip(line, values):
            slots[f.key] = slot
            if base_v is None and not resolved:
                continue  # the text does not validate and does not set it: no known value
            if base_v is None and f.path.startswith("slo.") and value == 0:
                continue  # 0 = no SLO on this metric
            if base_v is None or value != base_v:
                overrides[f.path] = value
        if line[0][0].key == "policy":
            _seed("compare", list(options["policy"]))
            compare = st.sidebar.multiselect("Compare with", options["policy"], key="compare")

    topo_url = topology_sidebar(data, catalog, slots)
    topo_url.update(features_sidebar(data, resolved, catalog, slots, _seed))

    # The experiment in the URL: what differs from the preset (an upload cannot go in it).
    url: dict[str, str] = {}
    if not uploaded:
        if label != list(PRESETS)[0]:
            url["preset"] = next(slug for slug, name in PRESET_SLUGS.items() if name == label)
        too_long = False
        if text != base_text:
            encoded = encode_text(text)
            too_long = len(encoded) > MAX_URL_TEXT
            if not too_long:
                url["text"] = encoded
        url.update({f.key: _url_value(overrides[f.path]) for f in FIELDS if f.path in overrides})
        if list(compare) != list(options["policy"]):
            url["compare"] = ",".join(compare)
        url.update(topo_url)
        write_url(url)
        note = "This page's URL holds the experiment (preset, edits, policy, topology): reload or share it."
        if trace is not None:
            note = "The URL holds everything but the uploaded trace: a file cannot go into a URL (upload it again)."
        if too_long:
            note += " The edited scenario text is too long for it and is left out."
        st.sidebar.caption(note)
    else:
        write_url(url)
        st.sidebar.caption("An uploaded file cannot go into a URL: this page's URL does not hold this scenario "
                         "(a reload shows the default preset).")

    if error is not None:
        _show_error(error[0], slots, error[1])
        return None, label, compare, slots
    try:
        # An upload or the text box: it may use only what comes with it (no server files).
        scenario = o1sim.Scenario(data, allow_files=False).with_overrides(overrides)
        scenario.source = label
        validate_cached(*scenario.payload())
    except o1sim.SimError as e:
        _show_error(e, slots)
        return None, label, compare, slots
    return scenario, label, compare, slots


# --------------------------------------------------------------------------- main area


#: Whether this Streamlit sizes charts with ``width``/``height`` (newer) or only ``use_container_width``.
_SIZED_CHARTS = "height" in inspect.signature(st.altair_chart).parameters


def _show(container: Any, chart: Any, width: str = "stretch") -> None:
    """A chart at the width of its column (or its own, ``width="content"``). The element's
    height is given explicitly (the plot's height plus room for title, axes and legend):
    Streamlit's theme otherwise collapses some charts (stretched with a legend underneath,
    layered ordinal grids) to their axes."""
    height = getattr(chart, "height", None)
    if not isinstance(height, int):
        layers = getattr(chart, "layer", None)
        height = getattr(layers[0], "height", None) if layers else None
    if _SIZED_CHARTS:
        container.altair_chart(chart, width=width, height=height + 100 if isinstance(height, int) else "content")
    else:  # Streamlit before width/height on charts: Altair's own theme does not collapse
        container.altair_chart(chart, use_container_width=width == "stretch", theme=None)


def metrics_row(summary: Mapping[str, Any]) -> None:
    """The headline metrics (those the core's metric table shows on the dashboard, with its
    labels and formats) in rows of at most five: eight or more in one row truncate their
    values (an ellipsis instead of digits) on screens up to about 1,440 px wide."""
    cells = [(m.heading, registry.format_metric(m, registry.metric_value(summary, m.path)))
             for m in registry.shown_metrics("dashboard")]
    per_row = 5
    for start in range(0, len(cells), per_row):
        row = cells[start:start + per_row]
        for col, (label, value) in zip(st.columns(len(row)), row):
            col.metric(label, value)


def _policy_scenario(scenario: o1sim.Scenario, policy: str) -> tuple[str, str]:
    return scenario.with_overrides({"scheduler.policy": policy}).payload()


def run_all(scenario: o1sim.Scenario, names: list[str]) -> tuple[dict[str, o1sim.Result], dict[str, o1sim.SimError]]:
    results: dict[str, o1sim.Result] = {}
    failures: dict[str, o1sim.SimError] = {}
    bar = st.progress(0.0, text="simulating …")
    for i, name in enumerate(names):
        bar.progress(i / len(names), text=f"simulating {name} ({i + 1}/{len(names)}) …")
        try:
            results[name] = run_cached(*_policy_scenario(scenario, name))
        except o1sim.SimError as e:
            failures[name] = e
    bar.empty()
    return results, failures


def _offered_rate(data: Mapping[str, Any]) -> Optional[float]:
    """The scenario's offered load in req/s (a generated rate, or an explicit list's or an
    uploaded trace's mean)."""
    wl = data.get("workload", {})
    trace = wl.get("trace")
    if isinstance(trace, Mapping) and isinstance(trace.get("text"), str):
        try:
            info = trace_info_cached(trace["text"], str(trace.get("format", "auto")))
        except o1sim.SimError:
            return None
        span = info.get("span_s")
        scale = float(trace.get("rate_scale", 1.0))
        return info["requests"] / span * scale if span else None
    arrival = wl.get("arrival")
    if isinstance(arrival, Mapping) and isinstance(arrival.get("rate"), (int, float)):
        return float(arrival["rate"])
    reqs = wl.get("requests")
    if isinstance(reqs, list) and len(reqs) > 1:
        span_s = (max(r["arrival_ms"] for r in reqs) - min(r["arrival_ms"] for r in reqs)) / 1e3
        return len(reqs) / span_s if span_s > 0 else None
    return None


def _trace_label(scenario: o1sim.Scenario) -> Optional[str]:
    """What the capacity and plan captions call the scenario's trace (None: no trace)."""
    wl = scenario.to_dict().get("workload") or {}
    if not isinstance(wl, Mapping) or not isinstance(wl.get("trace"), Mapping):
        return None
    name = st.session_state.get("_trace_name")
    return f"the uploaded trace {name}" if name else "the scenario's trace"


def _at_load(data: dict[str, Any], factor: float) -> dict[str, Any]:
    """The scenario with its offered load multiplied by ``factor``."""
    wl = data["workload"]
    if isinstance(wl.get("trace"), Mapping):
        wl["trace"] = {**wl["trace"], "rate_scale": float(wl["trace"].get("rate_scale", 1.0)) * factor}
    elif isinstance(wl.get("arrival"), Mapping):
        wl["arrival"] = {**wl["arrival"], "rate": wl["arrival"]["rate"] * factor}
    else:
        wl["requests"] = [{**r, "arrival_ms": r["arrival_ms"] / factor} for r in wl["requests"]]
    return data


def sweep_tab(scenario: o1sim.Scenario, names: list[str]) -> None:
    data = scenario.to_dict()
    rate = _offered_rate(data)
    if rate is None:
        st.info("This workload has no arrival rate to sweep (a duration-bound or single-request workload).")
        return
    key = hashlib.sha1(scenario.payload()[0].encode()).hexdigest()
    c1, c2, c3 = st.columns([1, 2, 1])
    points = c1.slider("Points per policy", 3, 12, 6, key="sweep_points")
    low, high = c2.slider("Offered load (× the scenario's)", 0.1, 3.0, (0.25, 1.5), step=0.05, key="sweep_range")
    c3.write("")
    go = c3.button("Run sweep", type="primary", key="sweep_run")
    st.caption(f"Scenario load: {rate:,.2f} req/s. Each point is one run per policy ({', '.join(names)}); runs are cached.")
    if go:
        factors = [r / rate for r in charts.sweep_rates(rate, points, low, high)]
        rows, failed = [], []
        bar = st.progress(0.0, text="sweeping …")
        total = len(factors) * len(names)
        for i, (f, policy) in enumerate((f, p) for f in factors for p in names):
            bar.progress(i / total, text=f"{policy} at {rate * f:,.2f} req/s ({i + 1}/{total})")
            sc = o1sim.Scenario(_at_load(scenario.to_dict(), f), allow_files=False).with_overrides({"scheduler.policy": policy})
            try:
                rows.append(charts.sweep_row(policy, rate * f, run_cached(*sc.payload()).summary))
            except o1sim.SimError as e:
                failed.append(f"{policy} at {rate * f:,.2f} req/s: {type(e).__name__}: {e}")
        bar.empty()
        st.session_state["sweep"] = {"key": key, "rows": rows, "failed": failed}
    sweep = st.session_state.get("sweep")
    if not sweep:
        st.caption("Run the sweep to see P99 latencies against offered load.")
        return
    if sweep["key"] != key:
        st.info("The scenario changed since the last sweep: run it again.")
        return
    frame = pd.DataFrame(sweep["rows"])
    for msg in sweep["failed"]:
        st.warning(msg)
    if frame.empty:
        return
    # One chart per row, at the page's width: side by side they were too narrow to read.
    for metric, path in (("ttft_p99_ms", "ttft_ms.p99"), ("tpot_p99_ms", "tpot_ms.p99"), ("goodput_rps", "goodput_rps")):
        _show(st, charts.sweep_chart(frame, metric, registry.shown_metric(path).heading))


STEPS_SHOWN = 400


def steps_tab(scenario: o1sim.Scenario, names: list[str]) -> None:
    """The scheduler steps of one policy on a timeline (recorded on request); a click on a
    step (or its number) shows its kernels: a waterfall by stream and a table per operator."""
    if not st.toggle("Record the steps", key="steps_on",
                     help="Runs the scenario again with every scheduler step recorded, to show them and their kernels."):
        st.caption("Each scheduler step of a run, and what one step is made of: its kernels in launch order, "
                   "their streams, time sources and SM occupancy. Switch on to record them.")
        return
    c1, c2, c3 = st.columns(3)
    which = c1.selectbox("Policy", names, key="steps_policy")
    text, fmt = _policy_scenario(scenario, which)
    steps = steps_run_cached(text, fmt).steps
    n = len(steps)
    first = int(c2.number_input("First step shown", min_value=0, max_value=max(0, n - 1), value=0,
                                step=STEPS_SHOWN // 2, key="steps_first"))
    frame = charts.steps_frame(steps, first, STEPS_SHOWN)
    chart = charts.steps_chart(frame)
    # Altair's own theme: Streamlit's moves the legend under the plot and fits it all into
    # the element's height, which leaves the lanes a few pixels.
    sized = {"width": "stretch", "height": chart.height + 100} if _SIZED_CHARTS else {"use_container_width": True}
    event = st.altair_chart(chart, on_select="rerun", key="steps_chart", theme=None, **sized)
    picked = [int(p["step"]) for p in (event.selection.get("step") or []) if "step" in p] if event else []
    if picked and picked[0] != st.session_state.get("anatomy_step"):
        st.session_state["anatomy_step"] = picked[0]
    step = int(c3.number_input("Step", min_value=0, max_value=max(0, n - 1), step=1, key="anatomy_step",
                               help="Click a step above, or give its number."))
    st.caption(f"{n:,} steps; showing {len(frame)} from step {first}.")
    anatomy = anatomy_cached(text, fmt, step)
    a = anatomy.attrs
    st.markdown(f"**Step {step}** · replica {a['replica']} · at {a['start_ms']:,.3f} ms · {len(anatomy):,} kernels · "
                f"{a['step_ms']:,.3f} ms ({'one CUDA-graph replay' if a['graph'] else 'eager launches'}; "
                f"the run charged {a['recorded_ms']:,.3f} ms)")
    _show(st, charts.anatomy_chart(anatomy, title=f"Kernels of step {step}"))
    st.dataframe(charts.anatomy_table(anatomy), width="stretch", key="anatomy_table",
                 column_config={"us": st.column_config.NumberColumn("µs", format="%.1f"),
                                "share": st.column_config.NumberColumn("of step", format="percent"),
                                "sm_occupancy": st.column_config.NumberColumn("SM occupancy", format="percent")})


def topology_view(result: o1sim.Result, scenario: o1sim.Scenario) -> None:
    """The fabric graph with per-link utilisation and the busiest links."""
    links = result.links
    if links is None or links.empty:
        st.info("No topology in this scenario: choose one in the sidebar (Topology) to price TP/PP traffic "
                "on the fabric's links and see each link's utilisation here.")
        return
    nodes = None
    try:
        entry = scenario.to_dict().get("topology")
        nodes = topology_cached(json.dumps(entry, sort_keys=True))["nodes"]
    except (o1sim.SimError, TypeError, ValueError):
        pass  # a topology file path: kinds are guessed from the link table's ids
    _show(st, charts.topology_chart(links, nodes, result.deployment.get("placement")), width="content")
    topo = result.summary.get("topology") or {}
    st.caption(f"Utilisation over the whole run (Result.links: bytes carried / what the link could carry). "
               f"Link colour and width: utilisation; dashed: degraded; dotted: down. Events applied: "
               f"{topo.get('events_applied', 0)} · route changes {topo.get('route_changes', 0)} · replicas stopped "
               f"{topo.get('stopped_replicas', 0)} · requests moved {topo.get('moved_requests', 0)} · replicas "
               f"restarted {topo.get('restarted_replicas', 0)} · steps sharing a link {topo.get('shared_steps', 0)} · "
               f"KV transfers {topo.get('kv_transfers', 0)}.")
    frame = charts.link_frame(links)
    st.markdown("**Busiest links**")
    st.dataframe(frame.head(12), width="stretch", hide_index=True, key="busiest_links", column_config={
        "utilisation": st.column_config.ProgressColumn("utilisation", format="percent", min_value=0.0,
                                                       max_value=max(1e-9, float(frame["utilisation"].max()))),
        "GB/s": st.column_config.NumberColumn(format="%.0f"),
        "nominal GB/s": st.column_config.NumberColumn(format="%.0f"),
        "GB carried": st.column_config.NumberColumn(format="%.1f"),
    })


def deployment_tab(result: o1sim.Result, scenario: o1sim.Scenario) -> None:
    dep = result.deployment
    _show(st, charts.deployment_chart(dep), width="content")
    mem = dep.get("memory", {})
    model, gpu = dep.get("model", {}), dep.get("gpu", {})
    rows = [
        ("model", f"{model.get('name')} · {model.get('layers')} layers · hidden {model.get('hidden')}"),
        ("GPU", f"{gpu.get('name')} · {gpu.get('hbm_gib', 0):.0f} GiB · {gpu.get('hbm_tbps')} TB/s · "
                f"NVLink {gpu.get('nvlink_gbps')} GB/s"),
        ("layout", f"{dep.get('replicas')} replica(s) × TP {dep.get('tp')} × PP {dep.get('pp')} = {dep.get('gpus')} GPUs"),
        ("memory per GPU", f"{mem.get('weights_gib', 0):.1f} GiB weights + {mem.get('activation_gib', 0):.1f} GiB "
                           f"activations + {mem.get('kv_gib', 0):.1f} GiB KV"),
        ("KV per replica", f"{dep.get('num_gpu_blocks', 0):,} blocks × {dep.get('block_size')} tokens"),
    ]
    st.markdown("| | deployment |\n|---|---|\n" + "\n".join(f"| **{k}** | {v} |" for k, v in rows))
    topology_view(result, scenario)


def export_tab(scenario: o1sim.Scenario, results: Mapping[str, o1sim.Result], primary: str) -> None:
    text, fmt = _policy_scenario(scenario, primary)
    r = results[primary]
    st.markdown(f"Downloads for **{primary}**:")
    c1, c2, c3, c4 = st.columns(4)
    c1.download_button("Result JSON", r.to_json(), file_name=f"o1sim-{primary}.json", mime="application/json",
                       key="dl_json")
    c2.download_button("Requests CSV", csv_cached(text, fmt), file_name=f"o1sim-{primary}-requests.csv",
                       mime="text/csv", key="dl_csv")
    c3.download_button("Prometheus metrics", prometheus_cached(text, fmt), file_name=f"o1sim-{primary}.prom",
                       mime="text/plain", key="dl_prom")
    all_json = "{" + ",".join(f"{json.dumps(n)}:{res.to_json()}" for n, res in results.items()) + "}"
    c4.download_button("All policies JSON", all_json, file_name="o1sim-compare.json", mime="application/json",
                       key="dl_all")
    if st.toggle("Prepare a Perfetto trace (re-runs with every step recorded)", key="want_trace"):
        st.download_button("Chrome trace JSON", trace_cached(text, fmt), file_name=f"o1sim-{primary}.trace.json",
                           mime="application/json", key="dl_trace")
        st.caption("Open it in Perfetto (ui.perfetto.dev) or chrome://tracing: a track of steps per replica, "
                   "queued → prefill → decode slices per request, KV and queue counters.")
    st.download_button("Scenario (JSON)", json.dumps(scenario.to_dict(), indent=2), file_name="scenario.json",
                       mime="application/json", key="dl_scenario")


def ran_caption(result: o1sim.Result, policy: str, label: str, name: Optional[str]) -> str:
    """What ran, read from the result itself (never from the widgets or the scenario's
    name, which can describe something else): model, GPUs, layout, policy, source."""
    dep = result.deployment
    layout = f"{dep.get('replicas')} × TP {dep.get('tp')}" + (f" × PP {dep['pp']}" if dep.get("pp", 1) != 1 else "")
    source = label if not name or name == label else f"{label} ({name})"
    return (f"Ran: {dep.get('model', {}).get('name')} on {dep.get('gpus')} × {dep.get('gpu', {}).get('name')} "
            f"({layout}) · policy {policy} · from {source}")


#: Previous results stay on screen, greyed and inert, while the scenario has an error (as on
#: the page): the key of their container, styled below.
STALE_KEY = "stale_results"
STALE_CSS = f"<style>.st-key-{STALE_KEY} {{ opacity: .45; pointer-events: none; }}</style>"


def main() -> None:
    scenario, label, compare, _slots = sidebar()
    st.title("o1sim dashboard")
    if scenario is None:
        st.error("The scenario has an error: the message is in the sidebar, under the input it concerns.")
        show_previous()
        return
    resolved = validate_cached(*scenario.payload())
    sc = resolved["scenario"]
    primary = str(sc["scheduler"]["policy"])
    names = [primary] + [p for p in compare if p != primary]
    results, failures = run_all(scenario, names)
    if primary not in results:
        err = failures[primary]
        st.error(f"{type(err).__name__}: {err}")
        show_previous()
        return
    st.session_state["_last_ok"] = (*scenario.payload(), label, names)
    render(scenario, label, sc.get("name"), primary, results, failures)


def show_previous() -> None:
    """The last results that ran, greyed out under the error (nothing before a first run)."""
    last = st.session_state.get("_last_ok")
    if not last:
        return
    text, fmt, label, names = last
    scenario = o1sim.Scenario.from_text(text, fmt, source=label)
    results, failures = run_all(scenario, names)  # cached: nothing is simulated again
    if names[0] not in results:
        return
    st.markdown(STALE_CSS, unsafe_allow_html=True)
    with st.container(key=STALE_KEY):
        st.caption("The previous results, until the scenario runs again:")
        render(scenario, label, scenario.to_dict().get("name"), names[0], results, failures)


def render(scenario: o1sim.Scenario, label: str, name: Optional[str], primary: str,
           results: dict[str, o1sim.Result], failures: Mapping[str, o1sim.SimError]) -> None:
    """Everything below the title for one scenario's results."""
    st.caption(ran_caption(results[primary], primary, label, name))
    for policy, err in failures.items():
        st.warning(f"{policy}: {type(err).__name__}: {err}")

    st.subheader(f"Policy: {primary}")
    metrics_row(results[primary].summary)

    tabs = st.tabs(["Compare", "Over time", "GPU heatmap", "Steps", "Load sweep", "Deployment", "Requests", "Export",
                    "Model check", "Capacity & plan"])
    with tabs[0]:
        frame = charts.summary_frame({n: r.summary for n, r in results.items()})
        st.dataframe(frame, width="stretch", column_config={c: st.column_config.NumberColumn(format=f)
                                                           for c, f in charts.summary_formats().items()})
        features_table({n: r.summary for n, r in results.items()})
        cols = st.columns(3)
        for col, (metric, _) in zip(cols, charts.LATENCIES):
            _show(col, charts.latency_cdf_chart(results, metric))
    with tabs[1]:
        _show(st, charts.over_time_chart(results, "kv_usage", "KV-cache use (mean over replicas)", "KV used",
                                               percent=True))
        _show(st, charts.over_time_chart(results, "waiting", "Waiting requests (all replicas)", "waiting",
                                               how="sum"))
        _show(st, charts.over_time_chart(results, "running", "Running requests (all replicas)", "running",
                                               how="sum"))
    with tabs[2]:
        which = st.selectbox("Policy", list(results), key="heatmap_policy")
        _show(st, charts.heatmap_chart(results[which], title=f"GPU × time utilisation · {which}"))
        st.caption("Busy fraction of each GPU per time column; a replica's TP·PP GPUs run its steps together.")
    with tabs[3]:
        steps_tab(scenario, list(results))
    with tabs[4]:
        sweep_tab(scenario, list(results))
    with tabs[5]:
        deployment_tab(results[primary], scenario)
    with tabs[6]:
        st.dataframe(results[primary].requests, width="stretch", height=420)
    with tabs[7]:
        export_tab(scenario, results, primary)
    with tabs[8]:
        check_tab()
    with tabs[9]:
        capacity_tab(scenario, _offered_rate(scenario.to_dict()), _trace_label(scenario))


main()
