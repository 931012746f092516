"""The WASM core in headless Chromium next to the native core (`make bench`, after `make web`).

Measured in Chromium (Debian's, driven by Playwright), each a median of several runs:
- cold start: a fresh browser context (empty cache) imports o1sim.js while it fetches and
  compiles the .wasm (streaming; both downloads start together, as in the page's worker),
  instantiates and runs the first simulation (10,000 scheduler
  iterations), with the three parts printed apart; and the same for a returning visitor
  (a browser with an on-disk profile, as a user's; a new page after the first visit has
  been open a few seconds: Chromium then has the module in its HTTP cache and V8's
  compiled code in its code cache);
- this machine's floor under that cold start, measured in the same run: the same cold start
  with the scenario cut to 10 requests, and, in a fresh context, fetching o1sim.js alone and
  the .wasm's bytes alone (no compile);
- 10,000 scheduler iterations (benchmarks/scenarios/iterations_10k.toml), warm;
- re-run after a topology edit: the 10k scenario at TP 4 on the `hgx-h100` fabric, then the
  same with gpu1's NVSwitch link lowered 450 → 45 GB/s (the inline table the page's Topology
  panel sends), as the page does on every edit; and after a plain field edit (GPU h100 → h200);
- the page itself: navigation to the first 4-policy result of the default scenario.
Native: the same scenarios through the PyO3 core (`o1sim._core`). Size: the .wasm gzipped.
The bench pages are served by the same local server as the module (not by Playwright's
request interception, which adds a round trip to the driver to every request of the page).
Prints a table and writes benchmarks/out/web.json.
"""

from __future__ import annotations

import argparse
import gzip
import http.server
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from o1sim import _core

ROOT = Path(__file__).resolve().parents[1]
WEB = ROOT / "web"
SCENARIO = (ROOT / "benchmarks" / "scenarios" / "iterations_10k.toml").read_text()
EDITED = SCENARIO.replace('gpu = "h100"', 'gpu = "h200"')
# The same scenario cut to 10 requests (a dozen steps): a cold start that is almost all load and first-call
# compilation, the floor of this machine and browser under the 10k-iteration one.
TRIVIAL = SCENARIO.replace("value = 10000", "value = 10")
# The page's topology edit: TP 4 on an HGX H100 node, then one link lowered (inline table).
TOPO = SCENARIO.replace('gpu = "h100"', 'gpu = "h100"\ntopology = "hgx-h100"') + "[deployment]\ntp = 4\n"
TOPO_EDITED = TOPO.replace(
    'topology = "hgx-h100"',
    'topology = { preset = "hgx-h100", links = [{ src = "gpu1", dst = "nvswitch0", kind = "nvswitch", bandwidth_gbps = 45, latency_us = 1 }] }',
)
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
REPEAT = 11  # cold starts vary by ±15 ms on a busy 2-core machine: an odd count, median
BENCH_PAGE = b"<!doctype html><title>o1sim bench</title>"
# A returning visitor comes back after the first visit stayed open this long: V8 writes a
# module's compiled code to Chromium's code cache a moment after it tiered up.
RETURN_AFTER_MS = 3000


def serve() -> tuple[str, http.server.ThreadingHTTPServer]:
    class H(http.server.SimpleHTTPRequestHandler):
        extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map,
                          ".wasm": "application/wasm", ".js": "text/javascript"}

        def __init__(self, *a, **k):  # type: ignore[no-untyped-def]
            super().__init__(*a, directory=str(WEB), **k)

        def do_GET(self) -> None:
            if self.path.split("?")[0] == "/bench.html":
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(BENCH_PAGE)))
                self.end_headers()
                self.wfile.write(BENCH_PAGE)
                return
            super().do_GET()

        def log_message(self, *a):  # type: ignore[no-untyped-def]
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{srv.server_address[1]}/", srv


# As the page's worker does: the module's download starts alongside o1sim.js's import.
COLD = """async (text) => {
    const t0 = performance.now();
    const wasm = fetch('/pkg/o1sim.wasm');
    const o = await import('/o1sim.js');
    const ti = performance.now();
    await o.init(wasm);
    const t1 = performance.now();
    const r = o.simulate(text, {format: 'toml'});
    const t2 = performance.now();
    return {total: t2 - t0, import: ti - t0, init: t1 - t0, load: t1 - ti, first: t2 - t1,
            steps: JSON.parse(r).summary.steps};
}"""

# What the network part costs here, apart from any compiling: in a fresh context, fetching
# o1sim.js (10 KB) and the .wasm's bytes (no compile), each alone.
FETCH_ONLY = """async () => {
    const t = performance.now();
    await (await fetch('/o1sim.js')).text();
    return {js: performance.now() - t};
}"""
BYTES_ONLY = """async () => {
    const t = performance.now();
    const n = (await (await fetch('/pkg/o1sim.wasm')).arrayBuffer()).byteLength;
    return {wasm: performance.now() - t, n};
}"""


def fresh(browser: Any, base: str, script: str, arg: object = None) -> Any:
    """Evaluate `script` on the bench page in a new, empty browser context."""
    ctx = browser.new_context()
    page = ctx.new_page()
    page.goto(base + "bench.html")
    out = page.evaluate(script, arg)
    ctx.close()
    return out


# Alternates each base with its edit, as the page does (base run, edit, re-run, ...).
WARM = """async ([pairs, n]) => {
    const o = await import('/o1sim.js');
    await o.init();
    const out = pairs.map(() => ({base: [], edit: []}));
    pairs.forEach(([a, b]) => { o.simulate(a, {format: 'toml'}); o.simulate(b, {format: 'toml'}); });
    for (let i = 0; i < n; i++) {
        pairs.forEach(([a, b], j) => {
            let t = performance.now(); o.simulate(a, {format: 'toml'}); out[j].base.push(performance.now() - t);
            t = performance.now(); o.simulate(b, {format: 'toml'}); out[j].edit.push(performance.now() - t);
        });
    }
    return out;
}"""


def native(text: str, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        _core.Simulation(text, "toml").finish()
        out.append((time.perf_counter() - t) * 1e3)
    return out


def chromium() -> str:
    """Debian's Chromium (or $O1SIM_CHROMIUM). Without one the benchmark is skipped, not
    failed, so that `make bench` runs the others to the end (as the ones needing the
    development data set do without it)."""
    exe = os.environ.get("O1SIM_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe:
        print(f"{Path(__file__).name}: skipped: no Chromium found (apt-get install chromium, or set O1SIM_CHROMIUM)")
        sys.exit(0)
    return exe


def main() -> None:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    exe = chromium()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sys.exit("playwright is missing: `make bench` installs it (pip install playwright)")

    wasm = WEB / "pkg" / "o1sim.wasm"
    if not wasm.is_file():
        sys.exit("web/pkg/o1sim.wasm is missing: run `make web`")
    base, srv = serve()
    res: dict[str, object] = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=ARGS)
        cold = [fresh(browser, base, COLD, SCENARIO) for _ in range(REPEAT)]
        assert all(c["steps"] >= 10_000 for c in cold), cold
        trivial = [fresh(browser, base, COLD, TRIVIAL) for _ in range(REPEAT)]
        # The page runs as many steps as the native core does (12 since the vLLM engine's
        # defaults; a count written here went stale once and stopped `make bench`).
        native_steps = json.loads(_core.Simulation(TRIVIAL, "toml").finish().summary_json())["steps"]
        assert all(c["steps"] == native_steps for c in trivial), (native_steps, trivial)
        js_only = [fresh(browser, base, FETCH_ONLY) for _ in range(REPEAT)]
        bytes_only = [fresh(browser, base, BYTES_ONLY) for _ in range(REPEAT)]
        # A returning visitor: a browser with an on-disk profile (as a user's is), so the
        # HTTP cache and V8's code cache of the compiled module persist between visits; a
        # new page each time. (Playwright's plain contexts are off the record: no code cache
        # is kept there, and a "returning" visit measured in one compiles everything again.)
        recold = []
        with tempfile.TemporaryDirectory(prefix="o1sim-chromium-") as profile:
            ctx = p.chromium.launch_persistent_context(profile, executable_path=exe, args=ARGS, headless=True)
            for i in range(REPEAT + 1):
                page = ctx.new_page()
                page.goto(base + "bench.html")
                c = page.evaluate(COLD, SCENARIO)
                if i:
                    recold.append(c)
                else:
                    page.wait_for_timeout(RETURN_AFTER_MS)
                page.close()
            ctx.close()
        ctx = browser.new_context()
        page = ctx.new_page()
        page.goto(base + "bench.html")
        plain, topo = page.evaluate(WARM, [[[SCENARIO, EDITED], [TOPO, TOPO_EDITED]], 20])
        ctx.close()
        pages = []
        for _ in range(3):
            ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
            page = ctx.new_page()
            page.goto(base)
            page.wait_for_function("document.body.dataset.ready === '1'", timeout=60_000)
            pages.append(page.evaluate("({ready: window.o1simTimings.navToReadyMs, init: window.o1simTimings.initMs, run: window.o1simTimings.runs[0]})"))
            ctx.close()
        version = browser.version
        browser.close()
    srv.shutdown()

    med = statistics.median
    nat10k = native(SCENARIO, REPEAT)
    natedit = native(EDITED, REPEAT)
    nattopo = native(TOPO, REPEAT)
    nattopoedit = native(TOPO_EDITED, REPEAT)
    default_toml = _core.default_scenario_toml()
    nat_default = []
    for _ in range(3):
        t = time.perf_counter()
        for pol in ("orca", "vllm", "sarathi", "o1pro"):
            _core.Simulation(default_toml.replace('policy = "vllm"', f'policy = "{pol}"'), "toml").finish()
        nat_default.append((time.perf_counter() - t) * 1e3)
    raw = wasm.read_bytes()
    gz = len(gzip.compress(raw, 9))
    res = {
        "chromium": version,
        "cold_start_ms": med(c["total"] for c in cold),
        "cold_start_min_ms": min(c["total"] for c in cold),
        "cold_fetch_instantiate_ms": med(c["init"] for c in cold),
        "cold_import_js_ms": med(c["import"] for c in cold),
        "cold_fetch_compile_instantiate_wasm_ms": med(c["load"] for c in cold),
        "cold_start_trivial_ms": med(c["total"] for c in trivial),
        "cold_trivial_first_simulation_ms": med(c["first"] for c in trivial),
        "fresh_fetch_js_ms": med(c["js"] for c in js_only),
        "fresh_fetch_wasm_bytes_ms": med(c["wasm"] for c in bytes_only),
        "cold_start_cached_ms": med(c["total"] for c in recold),
        "cold_cached_first_simulation_ms": med(c["first"] for c in recold),
        "cold_first_simulation_ms": med(c["first"] for c in cold),
        "iterations_10k_ms": med(plain["base"]),
        "iterations_10k_best_ms": min(plain["base"]),
        "rerun_after_edit_best_ms": min(plain["edit"]),
        "rerun_after_topology_edit_best_ms": min(topo["edit"]),
        "iterations_10k_native_ms": med(nat10k),
        "rerun_after_edit_ms": med(plain["edit"]),
        "rerun_after_edit_native_ms": med(natedit),
        "iterations_10k_topology_ms": med(topo["base"]),
        "iterations_10k_topology_native_ms": med(nattopo),
        "rerun_after_topology_edit_ms": med(topo["edit"]),
        "rerun_after_topology_edit_native_ms": med(nattopoedit),
        "page_ready_ms": med(x["ready"] for x in pages),
        "page_default_4_policies_core_ms": med(x["run"]["coreMs"] for x in pages),
        "default_4_policies_native_ms": med(nat_default),
        "wasm_bytes": len(raw),
        "wasm_gzip_bytes": gz,
    }
    rows = [
        ("cold start: fetch + instantiate + first 10k-iteration run", f"{res['cold_start_ms']:.1f} ms", "—", "≤ 50 ms"),
        ("  import o1sim.js (the .wasm downloading meanwhile)", f"{res['cold_import_js_ms']:.1f} ms", "—", ""),
        ("  rest of the .wasm's fetch + compile + instantiate", f"{res['cold_fetch_compile_instantiate_wasm_ms']:.1f} ms", "—", ""),
        ("  first simulation (baseline code, tiering up)", f"{res['cold_first_simulation_ms']:.1f} ms", "—", ""),
        ("  floor here: the same cold start, scenario cut to 10 requests", f"{res['cold_start_trivial_ms']:.1f} ms", "—", ""),
        ("    of which its first simulation", f"{res['cold_trivial_first_simulation_ms']:.1f} ms", "—", ""),
        ("  floor here: fresh context, fetch o1sim.js alone", f"{res['fresh_fetch_js_ms']:.1f} ms", "—", ""),
        ("  floor here: fresh context, fetch the .wasm's bytes alone (no compile)", f"{res['fresh_fetch_wasm_bytes_ms']:.1f} ms", "—", ""),
        ("cold start, returning visitor (on-disk profile: cached module and code)", f"{res['cold_start_cached_ms']:.1f} ms", "—", "≤ 50 ms"),
        ("  of which the first simulation", f"{res['cold_cached_first_simulation_ms']:.1f} ms", "—", ""),
        ("10,000 scheduler iterations (warm; median, best)", f"{res['iterations_10k_ms']:.2f} ms ({res['iterations_10k_best_ms']:.1f})", f"{res['iterations_10k_native_ms']:.2f} ms", "≤ 5 ms (WASM), ≤ 2 ms native"),
        ("10k iterations, TP 4 on the hgx-h100 fabric (warm)", f"{res['iterations_10k_topology_ms']:.2f} ms", f"{res['iterations_10k_topology_native_ms']:.2f} ms", ""),
        ("re-run after a topology edit (gpu1 link 450→45 GB/s)", f"{res['rerun_after_topology_edit_ms']:.2f} ms ({res['rerun_after_topology_edit_best_ms']:.1f})", f"{res['rerun_after_topology_edit_native_ms']:.2f} ms", "≤ 5 ms"),
        ("re-run after a field edit (gpu h100→h200)", f"{res['rerun_after_edit_ms']:.2f} ms ({res['rerun_after_edit_best_ms']:.1f})", f"{res['rerun_after_edit_native_ms']:.2f} ms", "≤ 5 ms"),
        ("page: navigation → 4-policy default results", f"{res['page_ready_ms']:.0f} ms", "—", ""),
        ("default scenario, 4 policies × 2,000 requests (core)", f"{res['page_default_4_policies_core_ms']:.0f} ms", f"{res['default_4_policies_native_ms']:.0f} ms", ""),
        (".wasm size (gzip -9)", f"{gz / 1024:.0f} KiB ({len(raw) / 1024:.0f} KiB raw)", "—", "≤ 1 MB"),
    ]
    w = max(len(r[0]) for r in rows)
    print(f"{'':{w}}  {'Chromium (WASM)':>22}  {'native':>10}  target   [{version}]")
    for name, a, b, t in rows:
        print(f"{name:{w}}  {a:>22}  {b:>10}  {t}")
    out = ROOT / "benchmarks" / "out"
    out.mkdir(exist_ok=True)
    (out / "web.json").write_text(json.dumps(res, indent=2) + "\n")


if __name__ == "__main__":
    main()
