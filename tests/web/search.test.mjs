// The page's capacity search and plan (web/search.js) on the WASM module under Node: the
// same rates and answer as Python's o1sim.capacity with one worker (tests/test_sweeps.py
// checks these numbers from Python), the same cheapest plan, and errors by field.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import * as o1sim from "../../web/o1sim.js";
import { capacity, plan, expand } from "../../web/search.js";

const root = fileURLToPath(new URL("../../", import.meta.url));
await o1sim.init(readFileSync(`${root}web/pkg/o1sim.wasm`));

// tests/test_sweeps.py's LINEAR scenario.
const LINEAR = {
  seed: 0, model: "llama-3-8b", gpu: "h100",
  cost_model: { kind: "linear", base_ms: 5.0, per_prefill_token_ms: 0.02, per_decode_seq_ms: 0.2 },
  workload: { num_requests: 400, arrival: { kind: "constant", rate: 20.0 },
              prompt: { kind: "fixed", value: 256 }, output: { kind: "fixed", value: 32 } },
};
// o1sim.capacity(LINEAR, {"ttft_p99_ms": 200}, seeds=1, workers=1): the rates it ran, in order.
export const PY_RATES = [20, 40, 80, 160, 120, 100, 110, 105, 102.5, 101.25];

test("the page's capacity search takes Python's steps to Python's answer", () => {
  const rounds = [];
  const c = capacity(o1sim, LINEAR, { ttft_p99_ms: 200 }, { seeds: 1, progress: (p) => rounds.push(p.round) });
  assert.equal(c.status, "found");
  assert.deepEqual(c.points.map((p) => p.rate), PY_RATES);
  assert.equal(c.rate, 101.25);
  assert.equal(c.hi, 102.5);
  assert.equal(rounds.length, PY_RATES.length);
  assert.ok(c.points.every((p) => p.meets === p.metrics.ttft_p99_ms <= 200));
});

test("an SLO no rate meets is an answer, not an error", () => {
  const c = capacity(o1sim, LINEAR, { ttft_p99_ms: 0.001 }, { seeds: 1 });
  assert.equal(c.status, "none");
  assert.equal(c.rate, null);
  assert.match(c.message, /no rate meets the SLO/);
});

test("the page's plan picks Python's cheapest configuration", () => {
  const p = plan(o1sim, LINEAR, { gpu: ["h100", "h200"], "deployment.replicas": [1, 2] }, { ttft_p99_ms: 200 }, { load: 150 });
  assert.deepEqual(p.configs.map((c) => c.feasible), [false, true, false, true]);
  assert.deepEqual(p.configs[p.cheapest].params, { gpu: "h100", "deployment.replicas": 2 });
  assert.equal(p.configs[p.cheapest].usd_per_hour, 6.0);
  assert.deepEqual(p.configs.map((c) => c.pareto), [false, true, false, false]);
});

test("bad input names the field", () => {
  const err = (fn, field) => assert.throws(fn, (e) => e.name === "ConfigError" && e.field === field);
  err(() => capacity(o1sim, LINEAR, { ttft_p99: 200 }), "slo.ttft_p99");
  err(() => capacity(o1sim, LINEAR, { goodput: 0.9 }), "slo.goodput");
  err(() => capacity(o1sim, { ...LINEAR, workload: { requests: [{ arrival_ms: 0, prompt_tokens: 5, output_tokens: 2 }] } }, { ttft_p99_ms: 1 }), "workload.arrival.rate");
  err(() => expand({ gpu: [] }), "choices.gpu");
  err(() => plan(o1sim, LINEAR, { gpu: ["h100"] }, { ttft_p99_ms: 200 }, { load: -1 }), "load");
});

test("the page's plan, as Python's, picks only configurations that sustain the load", () => {
  // The README's plan at 20 req/s: H200 TP 4 × 2 keeps its TTFT P99 under 2 s, but serves
  // too few requests within the scenario's per-request SLO (tests/test_sweeps.py).
  const base = o1sim.validate(o1sim.defaultScenario(), { format: "toml" }).scenario;
  const p = plan(o1sim, base, { "deployment.tp": [4, 8], "deployment.replicas": [2] }, { ttft_p99_ms: 2000 }, { load: 20 });
  assert.deepEqual(p.configs.map((c) => c.sustains), [false, true]);
  assert.deepEqual(p.configs.map((c) => c.feasible), [false, true]);
  assert.match(p.configs[0].why, /^does not sustain the load: [\d.]+% of the requests served within the per-request SLO \(want ≥ 98%\)/);
  assert.deepEqual(p.configs[p.cheapest].params, { "deployment.tp": 8, "deployment.replicas": 2 });
});
