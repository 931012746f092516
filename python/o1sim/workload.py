"""Workloads from traces: ``from_trace`` turns a trace file into a scenario's ``workload``.

The core parses every format (it reads no files): this module reads the file in chunks
and feeds them to the core's incremental reader, so a trace of millions of rows streams
without its text being held. The same reader serves ``workload = {trace = {path = …}}`` in
a scenario, the CLI's ``--trace``, and the dashboard's and the page's uploads (those pass
the uploaded text inline as ``trace.text``).

>>> section = o1sim.workload.from_trace("conversation_trace.jsonl", rate_scale=2)
>>> o1sim.simulate({**scenario, "workload": section})
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Callable, Optional, Union

from . import _core
from ._input import MAX_TRACE_BYTES, checked_path, open_input
from .errors import ConfigError, config_error, resource_error

if TYPE_CHECKING:  # pathlib loads when a trace is read (it costs the CLI's start-up ~3 ms)
    from pathlib import Path

__all__ = ["CHUNK_BYTES", "TRACE_FORMATS", "from_trace", "load_trace", "load_trace_data", "read_trace_file", "trace_info"]

#: Bytes read from a trace file per call into the core.
CHUNK_BYTES = 1 << 20

#: The formats ``trace.format`` accepts (``auto`` tells them apart by the first line).
TRACE_FORMATS: list[str] = _core.trace_formats()


def _under(err: ConfigError, prefix: str) -> ConfigError:
    """The same error with its field under ``prefix`` (``trace.path`` → ``workload.trace.path``)."""
    field = err.field
    message = str(err)
    if field and message.startswith(f"{field}: "):
        message = message[len(field) + 2 :]
    return config_error(f"{prefix}.{field}" if field else prefix, message)


def load_trace(trace: Mapping[str, Any], *, base: Optional[Path] = None, prefix: str = "") -> _core.LoadedTrace:
    """Read the file ``trace["path"]`` (relative to ``base``) through the core's reader with
    the table's options; the result can be passed once to ``_core.Simulation(...,
    trace=)``. Errors are ``ConfigError``s naming the field (``trace.format``, under
    ``prefix`` when given: ``workload.trace.format``) or, for a bad row, its line."""
    field = f"{prefix}.trace" if prefix else "trace"
    path = _spec_path(trace, base, field)

    def feed(loader: _core.TraceLoader) -> None:
        with open_input(path, "trace.path") as f:
            _feed(loader, f, path, f"{field}.path")

    return _load(trace, path, feed, prefix)


def load_trace_data(trace: Mapping[str, Any], data: Any, *, prefix: str = "") -> _core.LoadedTrace:
    """:func:`load_trace` from the file's bytes already read (``data``: ``bytes`` or a
    numpy ``uint8`` array, as :func:`read_trace_file` gave them): what a sweep's runs use,
    on threads or machines that do not read the file themselves. Same errors."""
    field = f"{prefix}.trace" if prefix else "trace"
    path = _spec_path(trace, None, field)

    def feed(loader: _core.TraceLoader) -> None:
        view = memoryview(data).cast("B")
        for at in range(0, max(len(view), 1), CHUNK_BYTES):
            if not loader.feed(view[at : at + CHUNK_BYTES].tobytes()):
                break

    return _load(trace, path, feed, prefix)


def read_trace_file(path: Union[str, os.PathLike[str]], field: str = "trace.path") -> bytes:
    """The whole trace file at ``path``, read once to be shipped to a sweep's runs (at most
    :data:`MAX_TRACE_BYTES`: a ``ResourceError`` naming ``field`` past it; a missing or
    unreadable file is a ``ConfigError`` naming it)."""
    limit = f"the {MAX_TRACE_BYTES >> 30} GiB of trace o1sim reads"
    with open_input(path, field) as f:
        if os.fstat(f.fileno()).st_size > MAX_TRACE_BYTES:
            raise resource_error(field, f"{path} is longer than {limit}")
        try:
            data = f.read(MAX_TRACE_BYTES + 1)
        except OSError as e:
            raise config_error(field, f"cannot read {path}: {e.strerror or e}") from None
    if len(data) > MAX_TRACE_BYTES:  # it grew while being read
        raise resource_error(field, f"{path} is longer than {limit}")
    return bytes(data)


def _spec_path(trace: Mapping[str, Any], base: Optional[Path], field: str) -> Path:
    raw = trace.get("path")
    if not isinstance(raw, (str, os.PathLike)):
        raise config_error(f"{field}.path", "required: a file path (or give the content as text)")
    from pathlib import Path

    path = Path(raw)
    if base is not None and not path.is_absolute():
        path = base / path
    return path


def _load(trace: Mapping[str, Any], path: Path, feed: Callable[[_core.TraceLoader], None],
          prefix: str) -> _core.LoadedTrace:
    """The core's reader over what ``feed`` hands it, the table's options as its spec;
    errors under ``prefix``."""
    field = f"{prefix}.trace" if prefix else "trace"
    spec = {k: v for k, v in trace.items() if k != "text"}
    spec["path"] = str(path)
    try:
        loader = _core.TraceLoader(json.dumps(spec, allow_nan=False))
        feed(loader)
        return loader.finish()
    except ConfigError as e:
        if not prefix:
            raise
        raise _under(e, prefix) from None
    except (TypeError, ValueError) as e:
        raise config_error(field, f"cannot be passed to the core: {e}") from None


def _feed(loader: _core.TraceLoader, f: Any, path: Path, field: str) -> None:
    """Feed the file ``f`` to ``loader`` in chunks, at most :data:`MAX_TRACE_BYTES` (a
    ``ResourceError`` naming ``field`` past it, checked on the size first)."""
    limit = f"the {MAX_TRACE_BYTES >> 30} GiB of trace o1sim reads"
    if os.fstat(f.fileno()).st_size > MAX_TRACE_BYTES:
        raise resource_error(field, f"{path} is longer than {limit}")
    read = 0
    try:
        while chunk := f.read(CHUNK_BYTES):
            read += len(chunk)
            if read > MAX_TRACE_BYTES:  # it grew while being read
                raise resource_error(field, f"{path} is longer than {limit}")
            if not loader.feed(chunk):
                break
    except OSError as e:
        raise config_error("trace.path", f"cannot read {path}: {e.strerror or e}") from None


def trace_info(text: Union[str, bytes], format: str = "auto", **options: Any) -> dict[str, Any]:
    """``{"format", "requests", "span_s"}`` of a trace given as text (an upload): the
    detected format, the requests a run would replay and the seconds from the first to the
    last arrival (None when the arrivals are generated); a bad trace raises the
    ``ConfigError`` a run would (field ``trace``, naming the line)."""
    loader = _core.TraceLoader(json.dumps({"format": format, **options}, allow_nan=False))
    data = text.encode("utf-8") if isinstance(text, str) else text
    for at in range(0, max(len(data), 1), CHUNK_BYTES):
        if not loader.feed(data[at : at + CHUNK_BYTES]):
            break
    loaded = loader.finish()
    return {"format": loaded.format, "requests": len(loaded), "span_s": loaded.span_s}


def from_trace(
    path: Union[str, os.PathLike[str]],
    format: str = "auto",
    *,
    rate_scale: Optional[float] = None,
    start_s: Optional[float] = None,
    window_s: Optional[float] = None,
    max_requests: Optional[int] = None,
    hash_block_tokens: Optional[int] = None,
    columns: Optional[Mapping[str, str]] = None,
    time_unit: Optional[str] = None,
) -> dict[str, Any]:
    """A scenario ``workload`` section replaying the trace at ``path``.

    ``format``: one of :data:`TRACE_FORMATS` (``azure``, ``mooncake``, ``vidur``, ``blis``,
    ``inference_perf``, ``vllm``, ``csv``, ``jsonl``; ``auto`` detects it). ``rate_scale``
    divides every arrival time (2 = twice the rate); ``start_s``/``window_s`` keep a window
    of trace time; ``max_requests`` the first rows; ``hash_block_tokens`` is the tokens per
    ``hash_ids`` entry (Mooncake: 512); ``columns``/``time_unit`` map the columns of a plain
    ``csv``/``jsonl`` file. The whole file is read once here, so a bad row raises now
    (``ConfigError`` naming the line); the section returned names the file by its absolute
    path and the detected format, and is read again when simulated.
    """
    options: dict[str, Any] = {
        "rate_scale": rate_scale,
        "start_s": start_s,
        "window_s": window_s,
        "max_requests": max_requests,
        "hash_block_tokens": hash_block_tokens,
        "columns": dict(columns) if columns is not None else None,
        "time_unit": time_unit,
    }
    from pathlib import Path

    section: dict[str, Any] = {"path": str(Path(checked_path(path, "trace.path")).resolve()), "format": format}
    section.update({k: v for k, v in options.items() if v is not None})
    loaded = load_trace(section)
    section["format"] = loaded.format
    return {"trace": section}


def trace_for(data: Mapping[str, Any]) -> Optional[_core.LoadedTrace]:
    """The loaded trace a scenario dict needs (``workload.trace`` given by ``path`` without
    inline ``text``), or None."""
    workload = data.get("workload")
    if not isinstance(workload, Mapping):
        return None
    trace = workload.get("trace")
    if not isinstance(trace, Mapping) or trace.get("text") is not None or trace.get("path") is None:
        return None
    return load_trace(trace, prefix="workload")
