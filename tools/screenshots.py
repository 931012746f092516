"""Regenerate the README's screenshots (docs/img/): the Python API and the CLI as terminal
images (rich's SVG export of what they print), the dashboard and the page as PNGs taken in
Chromium by Playwright, each on the embedded default scenario.

    make build web && .venv/bin/python tools/screenshots.py     # needs Debian's chromium

Review the images before committing them; tests/test_docs.py checks that the README's images
exist, not what they show.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from rich.console import Console
from rich.syntax import Syntax
from rich.text import Text

ROOT = Path(__file__).resolve().parents[1]
IMG = ROOT / "docs" / "img"
WIDTH = 100
API_SNIPPET = """\
import o1sim

base = o1sim.Scenario.default()
for policy in ["vllm", "sarathi"]:
    s = o1sim.simulate(base.with_overrides({"scheduler.policy": policy})).summary
    print(f"{policy:8} TTFT p99 {s['ttft_ms']['p99']:8.1f} ms   TPOT p99 {s['tpot_ms']['p99']:6.2f} ms")
"""


def terminal_svg(path: Path, title: str, body: list[Text | Syntax]) -> None:
    console = Console(record=True, width=WIDTH, force_terminal=True, color_system="truecolor", file=open(os.devnull, "w"))
    for part in body:
        console.print(part)
    console.save_svg(str(path), title=title)


def api() -> None:
    out = subprocess.run([sys.executable, "-c", API_SNIPPET], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    terminal_svg(IMG / "api.svg", "Python", [Syntax(API_SNIPPET, "python", theme="ansi_dark"), Text(out.rstrip())])


def cli() -> None:
    env = {**os.environ, "COLUMNS": str(WIDTH), "FORCE_COLOR": "1", "TERM": "xterm-256color"}
    out = subprocess.run([sys.executable, "-m", "o1sim", "compare"], capture_output=True, text=True, check=True,
                         cwd=ROOT, env=env).stdout
    terminal_svg(IMG / "cli.svg", "o1sim compare", [Text("$ o1sim compare", style="bold"), Text.from_ansi(out.rstrip())])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def browser_shots() -> None:
    from playwright.sync_api import sync_playwright

    exe = os.environ.get("O1SIM_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        sys.exit("tools/screenshots.py: no Chromium (apt-get install chromium, or set O1SIM_CHROMIUM)")
    page_srv = subprocess.Popen([sys.executable, "-m", "o1sim", "web", "--port", "0"], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    port = _free_port()
    dash = subprocess.Popen([sys.executable, "-m", "o1sim", "dashboard", "--port", str(port), "--no-browser"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    try:
        assert page_srv.stdout is not None
        page_url = page_srv.stdout.readline().split("o1sim page: ", 1)[1].split()[0]
        dash_url = f"http://127.0.0.1:{port}/"
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(f"{dash_url}_stcore/health", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline or dash.poll() is not None:
                    sys.exit("tools/screenshots.py: the dashboard did not start")
                time.sleep(0.3)
        with sync_playwright() as p:
            b = p.chromium.launch(executable_path=exe, args=["--headless", "--no-sandbox", "--disable-gpu"])
            ctx = b.new_context(viewport={"width": 1280, "height": 860})
            pg = ctx.new_page()
            pg.goto(page_url)
            pg.wait_for_function("document.body.dataset.ready === '1' && Number(document.body.dataset.runs || 0) > 0",
                                 timeout=60_000)
            pg.wait_for_timeout(500)
            pg.screenshot(path=str(IMG / "page.png"))
            pg.goto(dash_url)
            pg.locator("[data-testid='stMetric']").first.wait_for(timeout=180_000)
            pg.wait_for_timeout(2_000)
            pg.screenshot(path=str(IMG / "dashboard.png"))
            b.close()
    finally:
        for proc in (page_srv, dash):
            proc.terminate()
            proc.wait(timeout=20)


if __name__ == "__main__":
    IMG.mkdir(parents=True, exist_ok=True)
    api()
    cli()
    browser_shots()
    for f in sorted(IMG.iterdir()):
        print(f"{f.relative_to(ROOT)}: {f.stat().st_size:,} bytes")
