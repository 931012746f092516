"""Conservation across the three front ends (issue 28): over random small scenarios with
client timeouts (``workload.timeout_s``) and fault schedules (``events``: links degraded,
down and up, GPUs removed), every request is counted exactly once by the Python API
(``o1sim.simulate``), the CLI (``o1sim run --json --csv``, in process) and the WASM module
(under Node), and the three agree.

Each drawn scenario must end, in all three, either in a result or in the same user-facing
``SimError`` kind (never ``InternalError``, never another exception). A result must have
``finished + rejected == num_requests`` (a timed-out request is a rejected one, counted
under ``rejections["timeout"]``); each request id ``0..n-1`` exactly once in the per-request
table (the result JSON's ``requests`` columns, the CLI's CSV, ``Result.requests``); as many
per-request rows of each status, and of each rejection reason, as the summary counts; no
timeouts without ``timeout_s``. And the result JSON text is the same bytes from Python, the
CLI's ``--json`` file and WASM (same scenario and seed ⇒ the same result, natively and in
WASM: a project rule).

WASM runs in ONE Node process for the whole module (``tests/web/conservation_worker.mjs``:
a scenario a line on stdin, a reply a line on stdout), so a case costs no process start.
Hypothesis draws the scenarios derandomised (CI is reproducible); ``O1SIM_FUZZ_CASES=N``
runs N cases with fresh seeds (``make fuzz``). Skipped when Node or ``web/pkg`` is absent.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import tempfile
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any, Optional

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import o1sim

from clikit import invoke

ROOT = Path(__file__).resolve().parents[1]
WORKER = ROOT / "tests" / "web" / "conservation_worker.mjs"
WASM = ROOT / "web" / "pkg" / "o1sim.wasm"
CASES = int(os.environ.get("O1SIM_FUZZ_CASES", "0")) or None
#: CI-sized: 15-40 s on a busy 2-core machine.
CI_CASES = 150

PRESETS = o1sim.presets()
#: Every policy the registry lists: the co-located ones, and those that need a topology
#: (``disagg``: prefill and decode replicas).
COLOCATED = [p for p in PRESETS["policies"] if p not in PRESETS["topology_policies"]]
ON_TOPOLOGY = list(PRESETS["topology_policies"])
ROUTERS = list(PRESETS["routers"])
#: The policies on vLLM's scheduler (the only ones ``scheduler.scheduling_policy`` applies to).
VLLM_SCHEDULER = {p["name"] for p in PRESETS["policy_info"] if p["vllm_scheduler"]}
#: Topologies of eight GPUs a node: the GPU each is built of, and its nodes. One node:
#: ``gpu0..gpu7``, each linked to ``nvswitch0``; two: ``n0.gpu0..n1.gpu7``, each linked to
#: its node's ``nvswitch0`` and to its NIC (``n0.nic3``), the NICs to the rails (``ib3``).
TOPOLOGIES = {"hgx-h200": ("h200", 1), "dgx-a100": ("a100-80g", 1), "2x-hgx-h200-ib": ("h200", 2)}
TIMEOUTS: list[Optional[float]] = [None, None, 0.001, 0.002, 0.005, 0.02, 0.05, 0.2, 0.5, 1.0, 2.0, 4.0]
STATUS = ("finished", "rejected")
REASONS = ("", "prompt exceeds max_model_len", "kv cache too small", "dispatch queue full", "timeout",
           "session aborted", "template depth")

STATS: Counter[str] = Counter()


# --------------------------------------------------------------------------- the WASM worker


class Node:
    """One Node process running the WASM module: a scenario's JSON text in, a reply out."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(["node", str(WORKER)], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, encoding="utf-8", bufsize=1)
        ready = self._read()
        assert ready == {"ready": True}, ready

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            err = self.proc.stderr.read() if self.proc.stderr else ""
            raise AssertionError(f"the WASM worker died (exit {self.proc.poll()}): {err[-2000:]}")
        reply: dict[str, Any] = json.loads(line)
        return reply

    def simulate(self, text: str) -> dict[str, Any]:
        assert self.proc.stdin is not None and "\n" not in text
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(scope="module")
def node() -> Iterator[Node]:
    if shutil.which("node") is None:
        pytest.skip("node is not on PATH")
    if not WASM.is_file():
        pytest.skip("web/pkg/o1sim.wasm is not built (make web)")
    n = Node()
    yield n
    n.close()


# --------------------------------------------------------------------------- scenarios


def _length(draw: Any, lo: int, hi: int) -> dict[str, Any]:
    if draw(st.booleans()):
        return {"kind": "fixed", "value": draw(st.integers(lo, hi))}
    a, b = sorted((draw(st.integers(lo, hi)), draw(st.integers(lo, hi))))
    return {"kind": "uniform", "min": a, "max": b}


def _links(topo: str, gpus: list[int]) -> list[tuple[str, str]]:
    """Links of the GPUs ``gpus`` (numbered across the nodes): each GPU's NVSwitch link and,
    on the two-node topology, its NIC and the NIC's InfiniBand rail."""
    per_node = TOPOLOGIES[topo][1] > 1
    out = []
    for g in gpus:
        if not per_node:
            out.append((f"gpu{g}", "nvswitch0"))
            continue
        k, i = divmod(g, 8)
        out += [(f"n{k}.gpu{i}", f"n{k}.nvswitch0"), (f"n{k}.gpu{i}", f"n{k}.nic{i}"), (f"n{k}.nic{i}", f"ib{i}")]
    return out


def _gpu(topo: str, g: int) -> str:
    return f"n{g // 8}.gpu{g % 8}" if TOPOLOGIES[topo][1] > 1 else f"gpu{g}"


def _events(draw: Any, topo: str, gpus: list[int]) -> list[dict[str, Any]]:
    """A fault schedule on the GPUs' links: degraded, down, up, a GPU removed. Times mostly
    within the first 100 ms (while requests are in flight)."""
    links = _links(topo, gpus)
    out: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(0, 8))):
        at = draw(st.one_of(st.sampled_from([0.0, 0.001, 0.005, 0.02, 0.1, 1.0]),
                            st.integers(0, 1 << 16).map(lambda i: i / (1 << 16) * 0.1)))
        kind = draw(st.sampled_from(["link_down", "link_down", "link_up", "link_up", "set_link", "remove_gpu"]))
        if kind == "remove_gpu":
            out.append({"at_s": at, "kind": kind, "node": _gpu(topo, draw(st.sampled_from(gpus)))})
            continue
        src, dst = draw(st.sampled_from(links))
        ev: dict[str, Any] = {"at_s": at, "kind": kind, "src": src, "dst": dst}
        if kind == "set_link":
            ev["bandwidth_gbps"] = draw(st.sampled_from([0.1, 1.0, 45.0, 450.0]))
            if draw(st.booleans()):
                ev["latency_us"] = draw(st.sampled_from([1.0, 100.0, 10000.0]))
        out.append(ev)
    return sorted(out, key=lambda e: e["at_s"]) if draw(st.booleans()) else out


@st.composite
def scenarios(draw: Any) -> dict[str, Any]:
    """A small scenario (the ``small()`` of test_reliability.py, varied): Llama-3-8B or
    Qwen2.5-7B, ≤ 50 requests, every policy, with or without a topology and a fault schedule,
    a client timeout from 1 ms to seconds or none."""
    shape = draw(st.sampled_from(["plain", "topology", "topology", "disagg"]))
    model = draw(st.sampled_from(["llama-3-8b", "qwen2.5-7b"]))
    # Now and then 0: a ConfigError, which must be the same error in all three.
    n = draw(st.one_of(st.integers(1, 50), st.sampled_from([1, 50]))) if draw(st.sampled_from([True] * 24 + [False])) else 0
    workload: dict[str, Any] = {
        "num_requests": n,
        "arrival": {"kind": draw(st.sampled_from(["poisson", "poisson", "constant"])),
                    "rate": draw(st.sampled_from([1.0, 10.0, 50.0, 200.0, 1000.0, 1e5]))},
        "prompt": _length(draw, 1, draw(st.sampled_from([200, 2000, 9000]))),
        "output": _length(draw, 1, draw(st.sampled_from([16, 200]))),
    }
    timeout = draw(st.one_of(st.sampled_from(TIMEOUTS), st.integers(1, 3000).map(lambda ms: ms / 1000)))
    if timeout is not None:
        workload["timeout_s"] = timeout
    sc: dict[str, Any] = {"seed": draw(st.integers(0, 2**32 - 1)), "model": model, "workload": workload}
    scheduler: dict[str, Any] = {}
    if shape == "plain":
        sc["gpu"] = draw(st.sampled_from(["h200", "h100", "a100-80g"]))
        tp = draw(st.sampled_from([1, 1, 2]))
        deployment: dict[str, Any] = {"tp": tp, "replicas": draw(st.integers(1, 3)),
                                      "router": draw(st.sampled_from([r for r in ROUTERS if r != "topology_aware"]))}
        scheduler["policy"] = draw(st.sampled_from(COLOCATED))
    else:
        topo = draw(st.sampled_from(sorted(TOPOLOGIES)))
        sc["topology"], sc["gpu"] = topo, TOPOLOGIES[topo][0]
        total = 8 * TOPOLOGIES[topo][1]
        tp = draw(st.sampled_from([1, 2, 4, 8][:2 + TOPOLOGIES[topo][1]]))
        lo = 2 if shape == "disagg" else 1
        replicas = draw(st.integers(lo, max(lo, min(4, total // tp))))
        if tp * replicas > total:
            tp = 1
        deployment = {"tp": tp, "replicas": replicas, "router": draw(st.sampled_from(ROUTERS))}
        if shape == "disagg":
            scheduler["policy"] = draw(st.sampled_from(ON_TOPOLOGY))
            deployment["prefill_replicas"] = draw(st.integers(1, replicas - 1))
        else:
            scheduler["policy"] = draw(st.sampled_from(COLOCATED))
        sc["events"] = _events(draw, topo, list(range(tp * replicas)) + [draw(st.integers(0, total - 1))])
    if draw(st.booleans()):
        # Tight batches and queues: more waiting, more timeouts, dispatch-queue rejections.
        scheduler["max_num_seqs"] = draw(st.sampled_from([1, 2, 8]))
        if draw(st.booleans()):
            scheduler["max_waiting"] = draw(st.sampled_from([1, 4]))
    if draw(st.integers(0, 3)) == 0:
        # A small KV pool: preemptions and KV rejections.
        scheduler["num_gpu_blocks"] = draw(st.sampled_from([8, 64, 512]))
    if scheduler["policy"] in VLLM_SCHEDULER and draw(st.integers(0, 3)) == 0:
        scheduler["scheduling_policy"] = "priority"
    sc["scheduler"] = scheduler
    sc["deployment"] = deployment
    return sc


# --------------------------------------------------------------------------- checks


def _columns_check(where: str, n: int, summary: dict[str, Any], ids: list[Any], status: list[str],
                   reason: list[str], timeout: Optional[float]) -> None:
    """The invariants of one front end's result: the summary's counts and the per-request
    table's rows account for every request, once."""
    assert summary["num_requests"] == n, f"{where}: num_requests {summary['num_requests']} != {n}"
    fin, rej = summary["finished"], summary["rejected"]
    assert fin + rej == n, f"{where}: finished {fin} + rejected {rej} != num_requests {n} (a request lost or counted twice)"
    rejections = summary["rejections"]
    assert sum(rejections.values()) == rej, f"{where}: rejections {rejections} do not add up to rejected {rej}"
    assert [int(i) for i in ids] == list(range(n)), f"{where}: request ids are not 0..{n - 1} once each: {ids}"
    assert len(status) == len(reason) == n, f"{where}: {len(status)} statuses, {len(reason)} reasons for {n} requests"
    got = Counter(status)
    assert got == Counter({k: v for k, v in (("finished", fin), ("rejected", rej)) if v}), \
        f"{where}: per-request statuses {dict(got)} != summary finished {fin}, rejected {rej}"
    for s, r in zip(status, reason):
        assert (s == "finished") == (r == ""), f"{where}: a {s} request with reason {r!r}"
    by_reason = Counter(r for r in reason if r)
    assert by_reason == Counter({k: v for k, v in rejections.items() if v}), \
        f"{where}: per-request reasons {dict(by_reason)} != summary rejections {rejections}"
    if timeout is None:
        assert rejections.get("timeout", 0) == 0, f"{where}: {rejections['timeout']} timeouts without a timeout_s"


def _check_result_json(where: str, n: int, text: str, timeout: Optional[float]) -> dict[str, Any]:
    r = json.loads(text)
    cols = r["requests"]
    _columns_check(where, n, r["summary"], cols["request_id"], [STATUS[s] for s in cols["status"]],
                   [REASONS[x] for x in cols["reason"]], timeout)
    return r


def _error_kind(where: str, name: str, message: str) -> str:
    assert name in {"ConfigError", "InfeasibleError", "StallError", "ResourceError"}, f"{where}: {name}: {message}"
    return name


def _python(sc: dict[str, Any], n: int, timeout: Optional[float]) -> tuple[str, str]:
    """("ok", result JSON) or ("error", kind) from the Python API."""
    try:
        r = o1sim.simulate(sc)
    except o1sim.SimError as e:
        return "error", _error_kind("python", type(e).__name__, str(e))
    df = r.requests
    _columns_check("python Result.requests", n, r.summary, df["request_id"].tolist(), [str(s) for s in df["status"]],
                   ["" if str(x) in ("", "nan") else str(x) for x in df["reason"]], timeout)
    text = r.to_json()
    _check_result_json("python to_json", n, text, timeout)
    return "ok", text


def _cli(sc: dict[str, Any], n: int, timeout: Optional[float]) -> tuple[str, str]:
    """The same from ``o1sim run SCENARIO.json --json OUT --csv OUT``, in process."""
    with tempfile.TemporaryDirectory() as d:
        path, out_json, out_csv = Path(d) / "scenario.json", Path(d) / "r.json", Path(d) / "r.csv"
        path.write_text(json.dumps(sc), encoding="utf-8")
        res = invoke(["run", str(path), "--json", str(out_json), "--csv", str(out_csv)])
        if res.exit_code != 0:
            err = (res.stderr or res.output).strip()
            assert res.exit_code == 2 and ":" in err, f"cli: exit {res.exit_code}: {err} {res.exception!r}"
            name, _, message = err.partition(":")
            return "error", _error_kind("cli", name.strip(), message)
        text = out_json.read_text(encoding="utf-8")
        rows = list(csv.DictReader(io.StringIO(out_csv.read_text(encoding="utf-8"))))
    summary = json.loads(text)["summary"]
    _columns_check("cli --csv", n, summary, [r["request_id"] for r in rows], [r["status"] for r in rows],
                   [r["reason"] for r in rows], timeout)
    _check_result_json("cli --json", n, text, timeout)
    return "ok", text


def _wasm(node: Node, sc: dict[str, Any], n: int, timeout: Optional[float]) -> tuple[str, str]:
    reply = node.simulate(json.dumps(sc))
    if "error" in reply:
        return "error", _error_kind("wasm", reply["error"], reply["message"])
    _check_result_json("wasm", n, reply["ok"], timeout)
    return "ok", str(reply["ok"])


def _first_difference(a: str, b: str) -> str:
    ja, jb = json.loads(a), json.loads(b)
    keys = [k for k in sorted(set(ja) | set(jb)) if ja.get(k) != jb.get(k)]
    if "summary" in keys:
        sa, sb = ja["summary"], jb["summary"]
        return "summary: " + ", ".join(f"{k}: {sa.get(k)!r} != {sb.get(k)!r}"
                                      for k in sorted(set(sa) | set(sb)) if sa.get(k) != sb.get(k))
    at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return f"sections {keys}; first differing byte {at}: {a[at - 40:at + 40]!r} vs {b[at - 40:at + 40]!r}"


def check_fronts(sc: dict[str, Any], node: Node) -> None:
    wl = sc["workload"]
    n, timeout = wl["num_requests"], wl.get("timeout_s")
    py = _python(sc, n, timeout)
    cl = _cli(sc, n, timeout)
    wa = _wasm(node, sc, n, timeout)
    STATS["cases"] += 1
    STATS[py[1] if py[0] == "error" else "runs"] += 1
    if py[0] == "error" or cl[0] == "error" or wa[0] == "error":
        assert py == cl == wa, f"the front ends disagree: python {py[0]} {py[1][:80]}, cli {cl[0]} {cl[1][:80]}, " \
                               f"wasm {wa[0]} {wa[1][:80]}"
        return
    s = json.loads(py[1])["summary"]
    STATS["timeouts"] += s["rejections"]["timeout"]
    STATS["requests"] += n
    assert cl[1] == py[1], f"cli --json != python to_json: {_first_difference(cl[1], py[1])}"
    assert wa[1] == py[1], f"wasm != python (same scenario and seed): {_first_difference(wa[1], py[1])}"


# --------------------------------------------------------------------------- the tests


@settings(max_examples=CASES or CI_CASES, deadline=timedelta(seconds=60), database=None, derandomize=CASES is None,
          suppress_health_check=list(HealthCheck), print_blob=True)
@given(sc=scenarios())
def test_every_request_is_counted_once_in_python_cli_and_wasm(sc: dict[str, Any], node: Node) -> None:
    check_fronts(sc, node)


#: Reproducers of the cross-front kind (a lost or doubled request, a timeout or fault schedule
#: the fronts saw differently): each runs through all three front ends too.
REPROS = ["disagg_timeout_lost_request.json", "fault_double_finish_slice_dependent.json",
          "link_flap_double_finish.json", "timeout_false_stall.json"]


@pytest.mark.parametrize("name", REPROS)
def test_the_reproducers_are_counted_once_in_every_front(name: str, node: Node) -> None:
    check_fronts(json.loads((ROOT / "tests" / "repro" / name).read_text(encoding="utf-8")), node)


def test_the_strategy_covers_every_policy_timeouts_and_faults() -> None:
    """The draw reaches what the property is about (so a change to it cannot quietly stop
    drawing disagg, timeouts or fault events)."""
    seen: Counter[str] = Counter()

    @settings(max_examples=200, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
    @given(scenarios())
    def draw(sc: dict[str, Any]) -> None:
        seen["policy " + sc["scheduler"]["policy"]] += 1
        seen["timeout" if "timeout_s" in sc["workload"] else "no timeout"] += 1
        for e in sc.get("events", []):
            seen["event " + e["kind"]] += 1

    draw()
    want = {f"policy {p}" for p in PRESETS["policies"]} | {"timeout", "no timeout"} | \
        {f"event {k['name']}" for k in PRESETS["event_kinds"]}
    assert want <= set(seen), f"never drawn: {sorted(want - set(seen))}"


@pytest.fixture(scope="module", autouse=True)
def _report() -> Iterator[None]:
    yield
    if STATS:
        out = ROOT / "benchmarks" / "out"
        out.mkdir(parents=True, exist_ok=True)
        (out / "conservation-fronts.json").write_text(json.dumps(dict(STATS), indent=2, sort_keys=True))


# --------------------------------------------------------------------------- every reproducer


def _every_reproducer() -> list[Path]:
    """tests/repro, and any ../shared/repro file not committed yet (absent on CI)."""
    files = sorted((ROOT / "tests" / "repro").glob("*"))
    shared = ROOT.parent / "shared" / "repro"
    if shared.is_dir():
        names = {f.name for f in files}
        files += sorted(f for f in shared.glob("*") if f.name not in names)
    return files


def _as_table(path: Path) -> Optional[dict[str, Any]]:
    """The reproducer as a scenario table for WASM (a fuzzer case's payload), or None when it
    is not one (TOML: the CLI reads it)."""
    if path.name.endswith(".case.json"):
        case = json.loads(path.read_text(encoding="utf-8"))
        return dict(case["payload"])
    if path.suffix == ".json":
        return dict(json.loads(path.read_text(encoding="utf-8")))
    return None


@pytest.mark.parametrize("path", _every_reproducer(), ids=lambda p: p.name)
def test_every_reproducer_ends_typed_or_conserved_in_the_cli_and_wasm(path: Path, node: Node, tmp_path: Path) -> None:
    """Issue 28's acceptance: each reproducer ends in a typed error (one red line, exit 2) or
    a correct run through the CLI, and through WASM where it applies (a scenario table; WASM
    has no files, so one naming a local file is a typed refusal there). Python:
    ``test_reliability.test_every_reproducer_gives_a_typed_error_or_a_correct_run``. Under
    ``limits.max_memory_gib = 1`` (what a test may allocate)."""
    table = _as_table(path)
    scenario = path
    if path.name.endswith(".case.json"):
        scenario = tmp_path / "scenario.json"
        scenario.write_text(json.dumps(table), encoding="utf-8")
    limit = ["--set", "limits.max_memory_gib=1"]
    if path.name.startswith("check_"):
        res = invoke(["check", str(scenario), "--max-states", "20000", "--max-seconds", "20"])
        assert res.exit_code in (0, 3), (res.exit_code, res.output[-2000:], res.exception)
        return
    out = tmp_path / "r.json"
    res = invoke(["run", str(scenario), "--json", str(out), *limit])
    if res.exit_code == 0:
        r = json.loads(out.read_text(encoding="utf-8"))
        n = r["summary"]["num_requests"]
        _check_result_json(f"cli {path.name}", n, out.read_text(encoding="utf-8"), r["summary"].get("timeout_s", 1.0))
    else:
        err = (res.stderr or res.output).strip()
        assert res.exit_code == 2 and len(err.splitlines()) == 1, (res.exit_code, err, res.exception)
        _error_kind(f"cli {path.name}", err.partition(":")[0].strip(), err)
        if "InternalError" in err:
            raise AssertionError(err)
    if table is None:
        return
    table.setdefault("limits", {})
    if isinstance(table["limits"], dict):
        table["limits"]["max_memory_gib"] = 1.0
    try:
        text = json.dumps(table, allow_nan=False)
    except ValueError:
        return  # NaN/Infinity have no JSON spelling: the page cannot send them
    reply = node.simulate(text)
    if "error" in reply:
        _error_kind(f"wasm {path.name}", reply["error"], reply["message"])
        return
    r = json.loads(reply["ok"])
    _check_result_json(f"wasm {path.name}", r["summary"]["num_requests"], reply["ok"], 1.0)
