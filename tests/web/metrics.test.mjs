// The page's reading of the core's summary-metric table (web/metrics.js) under Node: the values
// a surface shows, distributions expanded, and numbers written as Python's
// o1sim.registry.format_metric writes them (tests/test_summary_metrics.py has the same cases).
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import * as o1sim from "../../web/o1sim.js";
import { formatMetric, metricValue, shownMetrics } from "../../web/metrics.js";

const root = fileURLToPath(new URL("../../", import.meta.url));
await o1sim.init(readFileSync(`${root}web/pkg/o1sim.wasm`));
const rows = o1sim.presets().summary_metrics;
const one = (path) => {
  for (const surface of ["cli", "compare", "dashboard", "page", "report"]) {
    const m = shownMetrics(rows, surface).find((c) => c.path === path);
    if (m) return m;
  }
  throw new Error(path);
};

test("the page shows the table's page rows, a distribution's statistics expanded", () => {
  const page = shownMetrics(rows, "page");
  assert.deepEqual(page.slice(0, 2).map((m) => m.path), ["ttft_ms.p50", "ttft_ms.p99"]);
  assert.equal(page[1].heading, "TTFT p99 (ms)");
  assert.ok(page.some((m) => m.path === "output_tokens_per_s_per_gpu"));
  for (const m of page) assert.ok(m.label && m.doc, m.path);
});

test("values are written as the table says", () => {
  assert.equal(formatMetric(one("e2e_ms.p99"), 12345.6), "12.35");
  assert.equal(formatMetric(one("kv_utilization_peak"), 0.8523), "85.2%");
  assert.equal(formatMetric(one("preemptions"), 12345), "12,345");
  assert.equal(formatMetric(one("ttft_ms.p99"), -1234567.25), "-1,234,567.3");
  assert.equal(formatMetric(one("preemptions"), null), "—");
  assert.equal(formatMetric(one("kv_utilization_peak"), NaN), "—");
  assert.equal(metricValue({ ttft_ms: { p99: null } }, "ttft_ms.p99"), null);
  assert.equal(metricValue({ ttft_ms: { p99: 3.5 } }, "ttft_ms.p99"), 3.5);
  assert.equal(metricValue({}, "ttft_ms.p99"), null);
});
