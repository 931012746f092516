// Traces under Node through the WASM module: read inline (as the page passes an upload),
// the same requests as the Python API's reader, errors naming the line.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import * as o1sim from "../../web/o1sim.js";

const root = fileURLToPath(new URL("../../", import.meta.url));
await o1sim.init(readFileSync(`${root}web/pkg/o1sim.wasm`));

const AZURE = "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.98,4808,10\n2023-11-16 18:17:04.03,3180,8\n";

test("traceInfo detects the format and counts the requests", () => {
  assert.ok(o1sim.features().traceInfo);
  assert.deepEqual(o1sim.traceInfo({ format: "auto", text: AZURE }), { format: "azure", requests: 2, span_s: 0.05 });
  const moon = '{"timestamp": 0, "input_length": 600, "output_length": 3, "hash_ids": [1, 2]}\n';
  assert.deepEqual(o1sim.traceInfo({ text: moon, max_requests: 1 }), { format: "mooncake", requests: 1, span_s: 0 });
  assert.ok(o1sim.presets().trace_formats.includes("mooncake"));
});

test("a bad trace throws the ConfigError a run gives, naming the line", () => {
  assert.throws(() => o1sim.traceInfo({ format: "auto", text: AZURE.replace("3180", "x") }), (e) => {
    assert.equal(e.name, "ConfigError");
    assert.equal(e.field, "trace");
    assert.match(e.message, /line 3: ContextTokens: expected a whole number >= 0 \(got 'x'\)/);
    return true;
  });
  assert.throws(() => o1sim.traceInfo({ format: "azur", text: AZURE }), (e) => e.field === "trace.format" && /did you mean azure/.test(e.message));
  const base = o1sim.validate(o1sim.defaultScenario(), { format: "toml" }).scenario;
  assert.throws(() => o1sim.simulate({ ...base, workload: { trace: { text: "" } } }), (e) => e.field === "workload.trace" && /empty/.test(e.message));
  assert.throws(() => o1sim.simulate({ ...base, workload: { trace: { path: "x.csv" } } }), (e) => e.field === "workload.trace.path");
});

test("a trace given inline runs", () => {
  const base = o1sim.validate(o1sim.defaultScenario(), { format: "toml" }).scenario;
  const r = JSON.parse(o1sim.simulate({ ...base, workload: { trace: { format: "azure", text: AZURE } } }));
  assert.deepEqual(r.requests.prompt_tokens, [4808, 3180]);
  assert.deepEqual(r.requests.arrival_ms, [0, 50]);
});
