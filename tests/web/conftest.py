"""Fixtures of the browser tests: the page served by `o1sim web --port 0` and Debian's
Chromium driven headless by Playwright (no browser download).

Without a Chromium the tests skip, unless O1SIM_REQUIRE_BROWSER=1 (set by `make test`),
where they fail: CI must not pass quietly without running them."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def _missing(why: str) -> None:
    if os.environ.get("O1SIM_REQUIRE_BROWSER") == "1":
        pytest.fail(why)
    pytest.skip(why)


def chromium_path() -> str | None:
    env = os.environ.get("O1SIM_CHROMIUM")
    if env:
        return env
    for name in ("chromium", "chromium-browser", "google-chrome"):
        p = shutil.which(name)
        if p:
            return p
    return None


@pytest.fixture(scope="session")
def server() -> Iterator[str]:
    if not (ROOT / "web" / "pkg" / "o1sim.wasm").is_file():
        _missing("web/pkg/o1sim.wasm is missing: run `make web`")
    proc = subprocess.Popen(
        [sys.executable, "-m", "o1sim", "web", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if "http://" not in line:
        proc.kill()
        raise RuntimeError(f"o1sim web did not start: {line}{proc.stdout.read()}")
    url = line.split("o1sim page: ", 1)[1].split()[0]
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("playwright is not installed (make test-browser installs it)")
    exe = chromium_path()
    if exe is None:
        _missing("no Chromium found (apt-get install chromium, or set O1SIM_CHROMIUM)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture()
def page(browser: Any, server: str) -> Iterator[Any]:
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = ctx.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.errors = errors
    try:
        yield pg
    finally:
        ctx.close()
    assert not errors, f"uncaught errors in the page: {errors}"


@pytest.fixture(scope="session")
def dashboard() -> Iterator[str]:
    """The dashboard as a user starts it (`o1sim dashboard --no-browser`), one server for every
    dashboard test (each test opens its own browser context, so its own Streamlit session);
    ready when Streamlit's health endpoint answers."""
    pytest.importorskip("streamlit")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    proc = subprocess.Popen(
        [sys.executable, "-m", "o1sim", "dashboard", "--port", str(port), "--no-browser"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "STREAMLIT_SERVER_FILE_WATCHER_TYPE": "none"},
    )
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(f"{url}_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None:
                out = proc.stdout.read() if proc.stdout else ""
                raise RuntimeError(f"o1sim dashboard exited at start: {out}")
            if time.monotonic() > deadline:
                raise RuntimeError("o1sim dashboard did not answer within 90 s")
            time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
