"""examples/quickstart.ipynb runs top to bottom with nbclient, on a kernel that is this
interpreter (so it sees the o1sim built into this environment, in CI too)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

NOTEBOOK = Path(__file__).resolve().parents[1] / "examples" / "quickstart.ipynb"
KERNEL = "o1sim-test-python"


@pytest.fixture
def kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A kernelspec that starts ``sys.executable``, found through JUPYTER_PATH."""
    spec = tmp_path / "jupyter" / "kernels" / KERNEL
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "o1sim test", "language": "python",
    }))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    return KERNEL


def test_quickstart_notebook_executes(kernel: str, tmp_path: Path) -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    # Committed without outputs, so the file shows the code and diffs stay small.
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")
    work = tmp_path / "work"
    work.mkdir()
    client = nbclient.NotebookClient(nb, kernel_name=kernel, timeout=300,
                                     resources={"metadata": {"path": str(work)}})
    client.execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors, errors
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    # Four charts came out as Vega-Lite (a mimetype bundle or Altair's HTML renderer, by setup).
    def is_chart(o: dict) -> bool:  # type: ignore[type-arg]
        data = o.get("data", {})
        return any(k.startswith("application/vnd.vegalite") for k in data) or "vegaEmbed" in data.get("text/html", "")

    assert sum(is_chart(o) for o in outputs) == 4
    text = "\n".join(o.get("text", "") for o in outputs)
    assert "vllm:time_to_first_token_seconds_count" in text
    assert "scheduler.block_size →" in text and "InfeasibleError →" in text
    trace = json.loads((work / "quickstart.trace.json").read_text())
    assert trace["traceEvents"]
