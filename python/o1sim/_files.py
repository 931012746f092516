"""Which fields of a scenario name a file of the machine it runs on, and the refusal of
them in a scenario that came over the wire (the dashboard's upload or text box,
``Scenario.from_text`` without a base directory): such a scenario may use only what
comes with it, or the server would read its own disk (``workload.trace.path =
"/etc/passwd"``) and show what it read in the error."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from .errors import config_error

__all__ = ["FILE_FIELDS", "file_fields", "refuse_files"]

#: The fields that may name a file (read by the front end: the core reads no files).
FILE_FIELDS = ("workload.trace.path", "cost_model.profile", "model.hf_config", "topology")

_HOW = {
    "workload.trace.path": "upload the trace with it (the dashboard's trace upload) or give it inline as workload.trace.text",
    "cost_model.profile": "give the profile inline as a table",
    "model.hf_config": "give the config inline as a table",
    "topology": "give a preset name or the topology inline as a table",
}


def _is_path(value: Any) -> bool:
    return isinstance(value, (str, bytes, os.PathLike))


def _topology_path(value: Any) -> bool:
    if isinstance(value, os.PathLike):
        return True
    # A preset is a bare name; anything like a file name or with a separator is a path.
    return isinstance(value, str) and (value.lower().endswith((".toml", ".json")) or "/" in value or os.sep in value
                                       or "\\" in value or value.startswith("."))


def file_fields(data: Mapping[str, Any]) -> list[str]:
    """The fields of ``data`` (a scenario dict) that name a file, in :data:`FILE_FIELDS` order."""
    found = []
    workload = data.get("workload")
    trace = workload.get("trace") if isinstance(workload, Mapping) else None
    if isinstance(trace, Mapping) and trace.get("path") is not None:
        found.append("workload.trace.path")
    cm = data.get("cost_model")
    if isinstance(cm, Mapping) and _is_path(cm.get("profile")):
        found.append("cost_model.profile")
    model = data.get("model")
    if isinstance(model, Mapping) and _is_path(model.get("hf_config")):
        found.append("model.hf_config")
    if _topology_path(data.get("topology")):
        found.append("topology")
    return found


def refuse_files(data: Mapping[str, Any]) -> None:
    """A ``ConfigError`` naming the first field of ``data`` that names a file (nothing is
    read: the message holds neither the file's contents nor whether it exists)."""
    for field in file_fields(data):
        raise config_error(
            field,
            "names a file on this machine, which a scenario given as text (an upload) may not read: it may use "
            f"only what comes with it; {_HOW[field]} (or load a local file with Scenario.from_file, or "
            "Scenario.from_text(..., base_dir=...))",
        )
