"""What the page's chart library costs it to load: uPlot (what the page uses) against
Vega-Lite rendered by vega-embed (what the dashboard and the report use), in headless
Chromium (`make bench`, after `make web`).

Each measurement is a fresh browser context (empty cache) on a blank page served locally:
- the library's bytes, raw and gzip -9;
- "load": importing/evaluating the library (uPlot's ES module from web/pkg/; the Vega,
  Vega-Lite and vega-embed bundle that vl-convert inlines into the report, as a script);
- "first chart": from the start to the first latency CDF drawn (4 policies × 200 points,
  the dashboard's own spec from o1sim.dashboard.charts for vega-embed, the page's uPlot
  options for uPlot), load included.
Medians of REPEAT runs. Prints a table and writes benchmarks/out/charts.json.
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
import threading
from pathlib import Path
from typing import Any

import o1sim
from o1sim.dashboard import charts

ROOT = Path(__file__).resolve().parents[1]
WEB = ROOT / "web"
REPEAT = 9
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
BLANK = b"<!doctype html><title>charts bench</title><div id=c style='width:480px'></div>"

UPLOT = """async (series) => {
    const t0 = performance.now();
    const { default: uPlot } = await import('/pkg/uPlot.esm.js');
    const t1 = performance.now();
    const xs = [...new Set(series.flatMap(s => s.x))].sort((a, b) => a - b);
    const idx = new Map(xs.map((x, i) => [x, i]));
    const ys = series.map(s => { const c = new Array(xs.length).fill(null); s.x.forEach((x, i) => c[idx.get(x)] = s.q[i]); return c; });
    new uPlot({ width: 480, height: 220, scales: { x: { time: false, distr: 3 }, y: { range: [0, 1] } },
                series: [{}, ...series.map(s => ({ label: s.name, stroke: s.color, spanGaps: true,
                                                    paths: uPlot.paths.stepped({ align: 1 }) }))] },
              [xs, ...ys], document.getElementById('c'));
    await new Promise(requestAnimationFrame);
    return { load: t1 - t0, first: performance.now() - t0 };
}"""

VEGA = """async ([spec]) => {
    const t0 = performance.now();
    await new Promise((ok, err) => { const s = document.createElement('script'); s.src = '/vega-bundle.js';
                                     s.onload = ok; s.onerror = err; document.head.appendChild(s); });
    const t1 = performance.now();
    await window.vegaEmbed('#c', spec, { actions: false, renderer: 'canvas' });
    await new Promise(requestAnimationFrame);
    return { load: t1 - t0, first: performance.now() - t0 };
}"""


def serve(files: dict[str, bytes]) -> tuple[str, http.server.ThreadingHTTPServer]:
    class H(http.server.SimpleHTTPRequestHandler):
        extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map, ".js": "text/javascript"}

        def __init__(self, *a: Any, **k: Any) -> None:
            super().__init__(*a, directory=str(WEB), **k)

        def do_GET(self) -> None:
            body = files.get(self.path.split("?")[0])
            if body is None:
                super().do_GET()
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/html" if self.path.endswith(".html") else "text/javascript")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a: Any) -> None:
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{srv.server_address[1]}/", srv


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
        import vl_convert
        from playwright.sync_api import sync_playwright
    except ImportError as e:
        sys.exit(f"{e.name} is missing: `make bench` installs it (pip install playwright 'o1sim[dashboard]')")

    uplot_path = WEB / "pkg" / "uPlot.esm.js"
    if not uplot_path.is_file():
        sys.exit("web/pkg/uPlot.esm.js is missing: run `make web`")
    base_sc = o1sim.Scenario.default().with_overrides({"workload.num_requests": 400})
    results = {p: o1sim.simulate(base_sc.with_overrides({"scheduler.policy": p})) for p in o1sim.registry.default_policies()}
    spec = charts.latency_cdf_chart(results, "ttft_ms").to_dict()
    series = []
    for p, r in results.items():
        x, q = charts._cdf(charts.latency_frame(r)["ttft_ms"].to_numpy())
        series.append({"name": p, "color": o1sim.registry.policy_colors()[p], "x": x.tolist(), "q": q.tolist()})
    bundle = vl_convert.javascript_bundle("window.vegaEmbed = vegaEmbed;").encode()
    uplot = uplot_path.read_bytes()
    base, srv = serve({"/bench.html": BLANK, "/vega-bundle.js": bundle})
    out: dict[str, Any] = {}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=exe, args=ARGS)
        for name, script, arg, size in (("uPlot", UPLOT, series, uplot), ("vega-embed", VEGA, [spec], bundle)):
            runs = []
            for _ in range(REPEAT):
                ctx = browser.new_context()
                page = ctx.new_page()
                page.goto(base + "bench.html")
                runs.append(page.evaluate(script, arg))
                ctx.close()
            out[name] = {"bytes": len(size), "gzip_bytes": len(gzip.compress(size, 9)),
                         "load_ms": statistics.median(r["load"] for r in runs),
                         "first_chart_ms": statistics.median(r["first"] for r in runs)}
        browser.close()
    srv.shutdown()
    print(f"{'library':<12} {'KiB':>8} {'KiB gz':>8} {'load ms':>9} {'first chart ms':>15}")
    for name, m in out.items():
        print(f"{name:<12} {m['bytes'] / 1024:>8.0f} {m['gzip_bytes'] / 1024:>8.0f} {m['load_ms']:>9.1f} {m['first_chart_ms']:>15.1f}")
    (ROOT / "benchmarks" / "out").mkdir(exist_ok=True)
    (ROOT / "benchmarks" / "out" / "charts.json").write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
