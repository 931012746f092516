"""Every command the README shows is run here (its JavaScript block by
tests/web/readme.test.mjs), exactly as written, from a scratch folder where `examples/` and
`benchmarks/` are the repository's. A command that cannot run as written inside a test has
its equivalent, named in ``EQUIVALENTS`` with the reason:

- `make run` builds what `make test` has already built, then runs `o1sim compare`: its
  recipe is checked with `make -n`, and `o1sim compare` is run and its table compared with
  the README's (the numbers the README prints are the simulator's, to the digit);
- `make test` is the run this test is part of: its recipe is checked with `make -n`;
- servers (`make serve`, `o1sim dashboard`) are started and asked for their page;
- `pip install 'o1sim[dashboard]'`: every requirement of the extra is installed;
- `o1sim calibrate RUN_DIR...` runs on three made-up inference-perf runs;
- the prerequisites' install commands need root: the tools they install are present.

The README is the user's page: it stays within 300 lines.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

import o1sim

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
O1SIM = [sys.executable, "-m", "o1sim"]

#: What runs instead of a command that cannot run as written in a test (see the docstring).
EQUIVALENTS = {
    "make run": "make -n run; o1sim compare, its table equal to the README's",
    "make test": "make -n test (this run is part of it)",
    "make serve": "make -n serve; o1sim web started and its page fetched",
    "pip install": "the extra's requirements are installed",
    "o1sim dashboard": "started; its page fetched",
    "o1sim calibrate": "on made-up runs in place of RUN_DIR...",
}


def _blocks(lang: str) -> list[str]:
    """The README's fenced blocks of a language (``""``: fences without one)."""
    blocks: list[str] = []
    current: list[str] | None = None
    fence = ""
    for line in README.splitlines():
        if current is None and line.startswith("```"):
            fence, current = line[3:].strip(), []
        elif current is not None and line.strip() == "```":
            if fence == lang:
                blocks.append("\n".join(current) + "\n")
            current = None
        elif current is not None:
            current.append(line)
    return blocks


def sh_commands() -> list[list[str]]:
    """Every command line of the README's ``sh`` blocks, continuations joined, comments off."""
    out = []
    for block in _blocks("sh"):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if words:
                out.append(words)
    return out


def _kind(words: list[str]) -> str:
    for key in EQUIVALENTS:
        if words[: len(key.split())] == key.split():
            return key
    return "run"


@pytest.fixture()
def scratch(tmp_path: Path) -> Path:
    for name in ("examples", "benchmarks"):
        (tmp_path / name).symlink_to(ROOT / name, target_is_directory=True)
    return tmp_path


def _run(words: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run([*O1SIM, *words[1:]], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)


def test_the_readme_fits_its_reader() -> None:
    lines = README.count("\n")
    assert lines <= 300, f"README.md has {lines} lines"


def test_every_command_has_a_runner() -> None:
    commands = sh_commands()
    assert len(commands) >= 20
    kinds = [_kind(w) for w in commands]
    assert all(k != "run" or w[0] == "o1sim" for w, k in zip(commands, kinds)), \
        [" ".join(w) for w, k in zip(commands, kinds) if k == "run" and w[0] != "o1sim"]
    assert set(EQUIVALENTS) <= set(kinds), "an equivalent no README command needs: remove it"


PLAIN = [w for w in sh_commands() if _kind(w) == "run"]


@pytest.mark.parametrize("words", PLAIN, ids=[" ".join(w[:3]) for w in PLAIN])
def test_a_readme_command_runs(words: list[str], scratch: Path) -> None:
    res = _run(words, scratch)
    assert res.returncode == 0, f"`{' '.join(words)}`: {res.stderr}"
    # The files it was told to write are there.
    for opt in ("--json", "--csv", "-o"):
        i = words.index(opt) + 1 if opt in words else len(words)
        if i < len(words) and not words[i].startswith("-"):  # `presets --json` is a flag
            written = scratch / words[i]
            assert written.is_file() and written.stat().st_size > 0, f"`{' '.join(words)}` wrote no {written.name}"


def _make_n(target: str) -> str:
    if shutil.which("make") is None:
        pytest.skip("no make")
    res = subprocess.run(["make", "-n", target], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    return res.stdout


def test_make_run_compares_the_policies_and_prints_the_readmes_table(scratch: Path) -> None:
    recipe = _make_n("run")
    assert "maturin develop" in recipe and "build-wasm.sh" in recipe
    assert any(line.strip().endswith("o1sim compare") for line in recipe.splitlines())
    res = _run(["o1sim", "compare"], scratch)
    assert res.returncode == 0, res.stderr
    # The table's headings wrap over a few lines (the core's metric labels); its rows start
    # with the policies' names.
    policies = o1sim.presets()["policies"]
    table = next(b for b in _blocks("") if any(ln.split()[:1] == ["policy"] for ln in b.splitlines()))
    shown = {line.split()[0]: line.split()[1:] for line in res.stdout.splitlines() if line.split()[:1] in (
        [p] for p in policies)}
    rows = [line.split() for line in table.strip().splitlines() if line.split()[:1] in ([p] for p in policies)]
    assert [name for name, *_ in rows] == policies
    for name, *numbers in rows:
        assert shown.get(name) == numbers, f"README's {name} row differs from `o1sim compare`: {shown.get(name)}"


def test_make_test_runs_every_suite() -> None:
    recipe = _make_n("test")
    for part in ("cargo test --workspace", "-m pytest", "node --test tests/web/", "O1SIM_REQUIRE_BROWSER=1"):
        assert part in recipe, part


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serves(url: str, proc: subprocess.Popen[str], seconds: float) -> str:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the server exited: {proc.stdout.read() if proc.stdout else ''}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                body: str = r.read().decode("utf-8", "replace")
                return body
        except OSError:
            time.sleep(0.3)
    raise AssertionError(f"nothing served at {url} after {seconds} s")


@pytest.fixture()
def started() -> Iterator[list[subprocess.Popen[str]]]:
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for p in procs:
        p.terminate()
        try:
            p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            p.kill()


def test_make_serve_serves_the_page(started: list[subprocess.Popen[str]]) -> None:
    assert any(w[:2] == ["make", "serve"] for w in sh_commands())
    assert re.search(r"o1sim web --port \d+", _make_n("serve"))
    if not (ROOT / "web" / "pkg" / "o1sim.wasm").is_file():
        pytest.skip("web/pkg is not built (make web)")
    port = _free_port()
    proc = subprocess.Popen([*O1SIM, "web", "--port", str(port)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    started.append(proc)
    page = _serves(f"http://127.0.0.1:{port}/", proc, 30)
    assert "<title>" in page and "app.js" in page


def test_the_dashboard_command_starts_and_serves(started: list[subprocess.Popen[str]], scratch: Path) -> None:
    pytest.importorskip("streamlit")
    words = next(w for w in sh_commands() if w[:2] == ["o1sim", "dashboard"])
    port = _free_port()
    args = [str(port) if prev == "--port" else w for prev, w in zip(["", *words], words)]
    proc = subprocess.Popen([*O1SIM, *args[1:]], cwd=scratch, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env={**os.environ, "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false"})
    started.append(proc)
    assert "Streamlit" in _serves(f"http://127.0.0.1:{port}/", proc, 90)
    assert _serves(f"http://127.0.0.1:{port}/_stcore/health", proc, 30).strip() == "ok"


def test_the_dashboard_extra_is_installed() -> None:
    words = next(w for w in sh_commands() if w[:2] == ["pip", "install"])
    extra = re.fullmatch(r"o1sim\[(\w+)\]", words[2])
    assert extra is not None
    reqs = importlib.metadata.requires("o1sim") or []
    wanted = [r.split(";")[0] for r in reqs if re.search(rf"extra == [\"']{extra.group(1)}[\"']", r)]
    assert wanted
    for req in wanted:
        name = re.split(r"[<>=!~ \[]", req, maxsplit=1)[0]
        importlib.metadata.version(name)  # raises PackageNotFoundError when it is missing


def test_calibrate_as_the_readme_shows_it(scratch: Path) -> None:
    from test_calibrate import _run_dir

    words = next(w for w in sh_commands() if w[:2] == ["o1sim", "calibrate"])
    runs = [_run_dir(scratch / "runs", f"run{i}", rate=rate, out=out, ttft_s=0.08, e2e_s=0.08 + out * 0.012)
            for i, (rate, out) in enumerate([(2.0, 40), (3.0, 60), (4.0, 30)])]
    i = words.index("RUN_DIR...")
    res = _run([*words[:i], *map(str, runs), *words[i + 1:]], scratch)
    assert res.returncode == 0, res.stderr
    out = scratch / words[words.index("-o") + 1]
    assert out.is_file()
    assert "gpu_time_scale" in out.read_text(encoding="utf-8")


def test_the_python_block_runs(scratch: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    (block,) = _blocks("python")
    monkeypatch.chdir(scratch)
    namespace: dict[str, object] = {}
    exec(compile(block, "README.md (python)", "exec"), namespace)
    import pandas as pd

    import o1sim

    result = namespace["result"]
    assert isinstance(result, o1sim.Result)
    assert isinstance(result.steps, pd.DataFrame) and len(result.steps) > 0
    assert "2000 / 2000" in capsys.readouterr().out  # the progress callback's last report


def test_the_prerequisites_are_installed() -> None:
    """The table's install commands need root; what they install is here (CI's `.ci/run`
    installs the same Debian packages)."""
    table = README[README.index("**Prerequisites**"):README.index("`make` fetches the rest")]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    for pkgs in re.findall(r"apt-get install ([\w. -]+?)`", table):
        for pkg in pkgs.split():
            if pkg not in ("make", "build-essential", "curl", "python3"):
                assert pkg in ci, f"README installs {pkg}; .ci/run does not"
    for tool in ("make", "cc", "cargo", "python3", "node", "npm"):
        assert shutil.which(tool), f"{tool} is missing"
    if not (os.environ.get("O1SIM_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")):
        pytest.skip("no Chromium here: `make test-browser` needs it")
