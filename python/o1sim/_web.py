"""The request handler of ``o1sim web``: the page's files and nothing else. A folder is
its ``index.html`` or a 404 (never a listing of what is there), and a path is refused
(404) when any part of it is hidden (``.git``, ``.env``) or when it leads, through a link
or ``..``, outside the served folder."""

from __future__ import annotations

import http.server
import os
from pathlib import Path
from typing import Any, Optional

__all__ = ["page_handler"]


def _inside(root: Path, path: str) -> bool:
    try:
        Path(os.path.realpath(path)).relative_to(root)
    except ValueError:
        return False
    return True


def page_handler(root: Path) -> type[http.server.SimpleHTTPRequestHandler]:
    """A handler class serving the files under ``root`` (resolved) only."""
    root = Path(os.path.realpath(root))

    class Handler(http.server.SimpleHTTPRequestHandler):
        extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map,
                          ".wasm": "application/wasm", ".js": "text/javascript"}

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=str(root), **kwargs)

        def send_head(self) -> Any:
            path = self.translate_path(self.path)
            parts = self.path.split("?", 1)[0].split("#", 1)[0].split("/")
            if any(p.startswith(".") and p not in ("", ".") for p in parts) or not _inside(root, path):
                self.send_error(http.HTTPStatus.NOT_FOUND, "File not found")
                return None
            return super().send_head()

        def list_directory(self, path: "str | os.PathLike[str]") -> Optional[Any]:
            self.send_error(http.HTTPStatus.NOT_FOUND, "File not found")
            return None

        def end_headers(self) -> None:
            self.send_header("Cache-Control", "no-cache")
            super().end_headers()

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - base signature
            pass

    return Handler
