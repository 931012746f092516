"""The WASM module under Node against the Python API, byte for byte, beyond the goldens:
the default scenario (2,000 requests, every policy) and a step prediction."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

import o1sim
from o1sim import _core

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import * as o from %r;
import { readFileSync } from 'node:fs';
await o.init(readFileSync(%r));
const input = JSON.parse(readFileSync(0, 'utf8'));
const out = {};
for (const [k, s] of Object.entries(input.scenarios)) out[k] = o.simulate(s);
out.predict = JSON.stringify(o.predictStep(input.predict));
process.stdout.write(JSON.stringify(out));
"""

PREDICT = {"model": "llama-3-70b", "gpu": "h200", "tp": 4,
           "batch": [{"new_tokens": 512, "context_tokens": 0}] + [{"new_tokens": 1, "context_tokens": 1500}] * 30}


def test_wasm_and_python_give_the_same_bytes() -> None:
    node = shutil.which("node")
    if node is None or not (ROOT / "web" / "pkg" / "o1sim.wasm").is_file():
        pytest.skip("needs node and `make web`")
    base = o1sim.default_scenario()
    scenarios = {p: json.dumps({**base, "scheduler": {**base["scheduler"], "policy": p}}) for p in o1sim.presets()["policies"]}
    script = SCRIPT % (str(ROOT / "web" / "o1sim.js"), str(ROOT / "web" / "pkg" / "o1sim.wasm"))
    res = subprocess.run([node, "--input-type=module", "-e", script], input=json.dumps({"scenarios": scenarios, "predict": PREDICT}),
                         capture_output=True, text=True, timeout=120, check=True)
    got = json.loads(res.stdout)
    for policy, text in scenarios.items():
        assert got[policy] == o1sim.simulate(json.loads(text)).to_json(), policy
    # predict_step (parsed by o1sim.js, so compared as values: every float exactly equal).
    assert json.loads(got["predict"]) == json.loads(_core.predict_step_json(json.dumps(PREDICT)))


PRESETS_SCRIPT = """
import * as o from %r;
import { readFileSync } from 'node:fs';
await o.init(readFileSync(%r));
process.stdout.write(JSON.stringify(o.presets()));
"""


def test_wasm_presets_are_the_python_registry() -> None:
    """The page's registry (the module's presets()) is the extension's, record for record:
    the same policies with the same colours, kinds, GPUs, models and topologies."""
    node = shutil.which("node")
    if node is None or not (ROOT / "web" / "pkg" / "o1sim.wasm").is_file():
        pytest.skip("needs node and `make web`")
    script = PRESETS_SCRIPT % (str(ROOT / "web" / "o1sim.js"), str(ROOT / "web" / "pkg" / "o1sim.wasm"))
    res = subprocess.run([node, "--input-type=module", "-e", script], capture_output=True, text=True, timeout=60, check=True)
    wasm = json.loads(res.stdout)
    extras = {"bugs": o1sim.bug_names(), "status_names": o1sim.status_names(), "reason_names": o1sim.reason_names(),
              "trace_formats": _core.trace_formats()}
    assert wasm == {**o1sim.presets(), **extras}
