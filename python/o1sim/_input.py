"""Reading what a user hands in, safely: files read up to a cap (``/dev/zero`` included),
text that must be UTF-8, TOML/JSON parsed with every failure as a ``ConfigError`` (Python's
parsers raise ``RecursionError`` on deep nesting), and a depth limit for nested values.

The caps mirror the core's (``crates/sim-core/src/limits.rs``): the core refuses a longer
scenario text itself, so Python never hands it one.
"""

from __future__ import annotations

import json
import math
import os
import stat
import sys
from collections.abc import Mapping
from typing import IO, Any, Union

from .errors import config_error, resource_error

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

#: Largest file or text o1sim reads (bytes); the core refuses longer scenario text.
MAX_INPUT_BYTES = 64 << 20
#: Largest trace file o1sim reads (bytes): streamed in chunks, never held whole, but a
#: longer one would describe more requests than any memory limit admits.
MAX_TRACE_BYTES = 4 << 30
#: Deepest nesting of tables and lists accepted (a scenario needs about 6; serde_json's own
#: limit is 128).
MAX_DEPTH = 64


def checked_path(path: Union[str, os.PathLike[str]], field: str = "") -> str:
    """``path`` as a string; one holding a NUL byte (which no OS call takes: Python raises
    ``ValueError``) is a ``ConfigError`` naming ``field``."""
    p = os.fspath(path)
    if "\0" in p:
        raise config_error(field, f"{p!r} is not a file path: it holds a NUL byte")
    return p


def open_input(path: Union[str, os.PathLike[str]], field: str = "") -> IO[bytes]:
    """``path`` opened for reading, as a regular file: a path holding a NUL byte, a missing
    file, a directory, or anything that is not a regular file (a device such as
    ``/dev/zero``, a FIFO, a socket: endless, or blocking until a writer comes) is a
    ``ConfigError`` naming ``field``. Opened non-blocking, so a FIFO cannot hang the open."""
    p = checked_path(path, field)
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except FileNotFoundError:
        raise config_error(field, f"cannot read {p}: no such file") from None
    except IsADirectoryError:
        raise config_error(field, f"{p} is a directory, not a file") from None
    except OSError as e:
        raise config_error(field, f"cannot read {p}: {e.strerror or e}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        what = "a directory" if stat.S_ISDIR(mode) else "not a regular file (a device, FIFO or socket)"
        raise config_error(field, f"{p} is {what}, not a file o1sim can read")
    return os.fdopen(fd, "rb")


def read_text(path: Union[str, os.PathLike[str]], field: str = "") -> str:
    """The UTF-8 text of the regular file ``path`` (:func:`open_input`), reading at most
    :data:`MAX_INPUT_BYTES` + 1 bytes: a longer file is a ``ResourceError``, an unreadable,
    non-regular or non-UTF-8 one a ``ConfigError``, both naming ``field``."""
    from pathlib import Path

    p = Path(path)
    with open_input(p, field) as f:
        try:
            data = f.read(MAX_INPUT_BYTES + 1)
        except OSError as e:
            raise config_error(field, f"cannot read {p}: {e.strerror or e}") from None
    if len(data) > MAX_INPUT_BYTES:
        raise resource_error(field, f"{p} is longer than the {MAX_INPUT_BYTES >> 20} MiB o1sim reads")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise config_error(field, f"{p} is not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start}, line {line})") from None


def loads(text: str, fmt: str, source: str, field: str = "") -> Any:
    """Parse TOML or JSON text; any failure (syntax, nesting too deep for Python's parser) is
    a ``ConfigError`` naming ``field`` and ``source``."""
    if len(text) > MAX_INPUT_BYTES:
        raise resource_error(field, f"{source} is longer than the {MAX_INPUT_BYTES >> 20} MiB o1sim reads")
    try:
        if fmt == "toml":
            return tomllib.loads(text)
        return json.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as e:
        raise config_error(field, f"{source}: invalid {fmt.upper()}: {e}") from None
    except RecursionError:
        raise config_error(field, f"{source}: nested too deeply (at most {MAX_DEPTH} levels)") from None
    except ValueError as e:  # e.g. JSON numbers too long to convert
        raise config_error(field, f"{source}: invalid {fmt.upper()}: {e}") from None


def too_deep(path: str) -> Exception:
    """The error for a value nested deeper than :data:`MAX_DEPTH`."""
    return config_error(path or "<scenario>", f"nested more than {MAX_DEPTH} levels deep")


def check_depth(value: Any, path: str = "") -> None:
    """Refuse a value nested deeper than :data:`MAX_DEPTH` (or holding itself), without
    recursing: copying or encoding it would hit Python's recursion limit, at a depth that
    depends on the caller's stack."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        v, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise too_deep(path)
        if isinstance(v, Mapping):
            stack.extend((x, depth + 1) for x in v.values())
        elif isinstance(v, (list, tuple)):
            stack.extend((x, depth + 1) for x in v)


def join_path(path: str, key: str | int) -> str:
    """``path`` extended by a table key (``a.b``) or a list index (``a[3]``)."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def jsonable(value: Any, path: str, depth: int = 0) -> Any:
    """A JSON-safe copy of ``value``; a ``ConfigError`` naming ``path`` for what JSON can't
    carry or what is nested deeper than ``MAX_DEPTH`` levels (iterating further would hit
    Python's recursion limit)."""
    if depth > MAX_DEPTH:
        raise too_deep(path)
    if value is None or isinstance(value, (bool, str, int)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise config_error(path, f"must be a finite number (got {float(value)!r})")
        return value
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise config_error(join_path(path, repr(k)), "keys must be strings")
            out[k] = jsonable(v, join_path(path, k), depth + 1)
        return out
    if isinstance(value, (list, tuple)):
        return [jsonable(v, join_path(path, i), depth + 1) for i, v in enumerate(value)]
    np = sys.modules.get("numpy")  # a numpy scalar can only exist once numpy is loaded
    if np is not None and isinstance(value, np.generic):
        return jsonable(value.item(), path, depth)
    pathlib = sys.modules.get("pathlib")  # likewise a path object, once pathlib is loaded
    if pathlib is not None and isinstance(value, pathlib.PurePath):
        return str(value)
    raise config_error(
        path or "<scenario>",
        f"unsupported value of type {type(value).__name__} (expected a number, string, bool, list or table)",
    )
