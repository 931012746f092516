// The WASM module under Node (`make test-node`): every golden scenario gives, byte for byte,
// the JSON the Rust runner and the Python API give (tests/golden/*.json, the compact JSON
// re-indented by `pretty`, which leaves every number's text as written); garbage never
// traps the module; errors carry the Python class names and the field path.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import { fileURLToPath } from "node:url";
import * as o1sim from "../../web/o1sim.js";

const root = fileURLToPath(new URL("../../", import.meta.url));
const golden = `${root}tests/golden/`;
const cases = readdirSync(golden).filter((f) => f.endsWith(".toml")).sort();

await o1sim.init(readFileSync(`${root}web/pkg/o1sim.wasm`));

/** A golden file's text for a result's compact JSON, the walk of `crates/sim-core/tests/golden.rs`
 * and `tests/goldenkit.py`: a newline and two spaces per level after `{`, `[` and `,` and before
 * `}`, `]`; a space after `:`; `{}` and `[]` kept; whitespace between tokens dropped; strings and
 * numbers copied as written; a final newline. */
function pretty(text) {
  const out = [];
  const close = { "{": "}", "[": "]" };
  const space = (c) => c === " " || c === "\t" || c === "\n" || c === "\r";
  let depth = 0;
  let inString = false;
  let escaped = false;
  for (let i = 0; i < text.length; ) {
    const c = text[i++];
    if (inString) {
      out.push(c);
      if (escaped) escaped = false;
      else if (c === "\\") escaped = true;
      else if (c === '"') inString = false;
    } else if (c === '"') {
      inString = true;
      out.push(c);
    } else if (c in close) {
      let j = i;
      while (j < text.length && space(text[j])) j++;
      if (text[j] === close[c]) {
        out.push(c + close[c]);
        i = j + 1;
      } else {
        depth++;
        out.push(c + "\n" + "  ".repeat(depth));
      }
    } else if (c === "}" || c === "]") {
      depth = Math.max(depth - 1, 0);
      out.push("\n" + "  ".repeat(depth) + c);
    } else if (c === ",") {
      out.push(",\n" + "  ".repeat(depth));
    } else if (c === ":") {
      out.push(": ");
    } else if (!space(c)) {
      out.push(c);
    }
  }
  out.push("\n");
  return out.join("");
}

test("pretty re-indents without touching strings or numbers", () => {
  const compact = String.raw`{"a\"{":[],"b":{},"c":[1,{"d":"}],\\","é:[":"x, y"},[ ]],"e":-0.0,"f":1e300,"g":[{}]}`;
  const want = String.raw`{
  "a\"{": [],
  "b": {},
  "c": [
    1,
    {
      "d": "}],\\",
      "é:[": "x, y"
    },
    []
  ],
  "e": -0.0,
  "f": 1e300,
  "g": [
    {}
  ]
}
`;
  const got = pretty(compact);
  assert.equal(got, want);
  assert.deepEqual(JSON.parse(got), JSON.parse(compact));
  assert.equal(pretty(got), got);
});

test("there are golden cases", () => assert.ok(cases.length >= 4));

for (const name of cases) {
  test(`golden ${name}: WASM gives the same bytes as Python and the Rust runner`, () => {
    const toml = readFileSync(golden + name, "utf8");
    const expected = readFileSync(golden + name.replace(/\.toml$/, ".json"), "utf8");
    const got = pretty(o1sim.simulate(toml, { format: "toml" }));
    assert.equal(got.length, expected.length);
    assert.ok(got === expected, `${name}: first difference at ${[...got].findIndex((c, i) => c !== expected[i])}`);
  });
}

test("the same scenario as a JS object (JSON) gives the same bytes as TOML", () => {
  const toml = readFileSync(golden + "vllm_hand.toml", "utf8");
  const resolved = o1sim.validate(toml, { format: "toml" }).scenario;
  assert.equal(pretty(o1sim.simulate(resolved)), readFileSync(golden + "vllm_hand.json", "utf8"));
});

test("init is idempotent and accepts a file: URL", async () => {
  await o1sim.init(new URL("../../web/pkg/o1sim.wasm", import.meta.url));
  assert.ok(o1sim.presets().policies.includes("vllm"));
});

test("init takes a fetch Response, or a promise of one (as the page's worker passes it)", async () => {
  const bytes = readFileSync(`${root}web/pkg/o1sim.wasm`);
  const toml = readFileSync(golden + "vllm_hand.toml", "utf8");
  const expected = readFileSync(golden + "vllm_hand.json", "utf8");
  await o1sim.init(Promise.resolve(new Response(bytes, { headers: { "content-type": "application/wasm" } })));
  assert.equal(pretty(o1sim.simulate(toml, { format: "toml" })), expected);
  await o1sim.init(new Response(bytes)); // no wasm content type: compiled from its bytes
  assert.equal(pretty(o1sim.simulate(toml, { format: "toml" })), expected);
  await assert.rejects(o1sim.init(new Response("missing", { status: 404 })), /HTTP 404/);
  await o1sim.init(bytes); // leave a working instance for the other tests
});

test("errors carry the Python class name and the field path", () => {
  const base = o1sim.validate(o1sim.defaultScenario(), { format: "toml" }).scenario;
  const cases = [
    [{ ...base, deployment: { ...base.deployment, tp: 3 } }, "ConfigError", "deployment.tp"],
    [{ ...base, scheduler: { ...base.scheduler, block_size: 0 } }, "ConfigError", "scheduler.block_size"],
    [{ ...base, gpu: "h2000" }, "ConfigError", "gpu"],
    // JSON.stringify would write these as null: the page must refuse what Python refuses
    [{ ...base, workload: { ...base.workload, arrival: { ...base.workload.arrival, rate: NaN } } }, "ConfigError", "workload.arrival.rate"],
    [{ ...base, deployment: { ...base.deployment, placement: [[0, Infinity]] } }, "ConfigError", "deployment.placement[0][1]"],
    [{ ...base, model: "llama-3.1-405b", deployment: { ...base.deployment, tp: 1 } }, "InfeasibleError", null],
  ];
  for (const [scenario, name, field] of cases) {
    assert.throws(() => o1sim.simulate(scenario), (e) => {
      assert.equal(e.name, name, e.message);
      assert.ok(e instanceof o1sim.SimError);
      assert.equal(e.field, field);
      return true;
    });
  }
  assert.throws(() => o1sim.simulate("x = ", { format: "toml" }), (e) => e.name === "ConfigError" && e.field === "");
});

test("a panic inside the core is an InternalError, not a trap, and the module keeps working", () => {
  assert.throws(() => o1sim._testPanic(), (e) => e.name === "InternalError" && /o1_test_panic/.test(e.message));
  const toml = readFileSync(golden + "vllm_hand.toml", "utf8");
  assert.equal(pretty(o1sim.simulate(toml, { format: "toml" })), readFileSync(golden + "vllm_hand.json", "utf8"));
});

test("garbage never traps the module", () => {
  let seed = 0x2545f491;
  const rnd = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32);
  const base = readFileSync(golden + "vllm_hand.toml", "utf8");
  const inputs = ["", "{", "[]", "null", "\u0000\uffff", "{\"model\": {\"preset\": 3}}"];
  for (let i = 0; i < 300; i++) {
    const chars = [...base];
    for (let k = 0; k < 1 + Math.floor(rnd() * 3); k++) {
      const at = Math.floor(rnd() * chars.length);
      const op = Math.floor(rnd() * 3);
      if (op === 0) chars.splice(at, 1);
      else if (op === 1) chars[at] = "0123456789-.e\"[]{}=,x "[Math.floor(rnd() * 22)];
      else chars.length = at;
    }
    inputs.push(chars.join(""));
  }
  let errors = 0;
  for (const text of inputs) {
    for (const format of ["toml", "json"]) {
      try {
        o1sim.validate(text, { format });
      } catch (e) {
        assert.ok(e instanceof o1sim.SimError, `not a SimError: ${e}`);
        assert.notEqual(e.name, "InternalError", `${e.message} for ${JSON.stringify(text)}`);
        errors++;
      }
    }
  }
  assert.ok(errors > 300);
});

test("the model checker runs in WASM (no clock needed)", () => {
  const scenario = readFileSync(`${root}benchmarks/check/vllm_6req.toml`, "utf8");
  const r = o1sim.check(scenario, { format: "toml", maxStates: 200000 });
  assert.equal(typeof r.ok, "boolean");
  assert.ok(r.states > 0);
  assert.equal(r.elapsed_s, 0);
});

test("optional entry points say what this build has", () => {
  const f = o1sim.features();
  assert.equal(f.check, true);
  if (!f.routes) assert.throws(() => o1sim.routes({}), /not available/);
  assert.equal(f.predictStep, true);
});

test("predictStep gives the core's prediction; bad input names the field", () => {
  const p = o1sim.predictStep({ model: "llama-3-8b", gpu: "h200", batch: [{ new_tokens: 2048, context_tokens: 0 }] });
  assert.ok(p.total_ms > 0 && Array.isArray(p.breakdown), JSON.stringify(p));
  assert.throws(
    () => o1sim.predictStep({ model: "llama-3-8b", gpu: "h200", batch: [{ new_tokens: 1, context_tokens: 0, bogus: 1 }] }),
    (e) => e.name === "ConfigError" && e.field.startsWith("batch"),
  );
});

test("routes and topology: the same candidates as Python, errors with the field path", () => {
  assert.ok(o1sim.features().routes && o1sim.features().topology);
  assert.ok(o1sim.presets().topologies.includes("hgx-h200"));
  const cands = o1sim.routes("hgx-h200", "gpu0", "gpu5");
  assert.ok(cands.length >= 1 && cands.filter((c) => c.chosen).length === 1);
  assert.deepEqual(cands.find((c) => c.chosen).path, ["gpu0", "nvswitch0", "gpu5"]);
  const t = o1sim.topology("2x-hgx-h200-ib");
  assert.ok(t.nodes.some((n) => n.id === "n1.gpu7") && t.links.some((l) => l.kind === "ib"));
  // An edited table routes around a slow link when it can, and keeps it when it cannot.
  const table = { preset: "hgx-h200", links: [{ src: "gpu0", dst: "nvswitch0", kind: "nvswitch", bandwidth_gbps: 45, latency_us: 1 }] };
  assert.equal(o1sim.routes(table, "gpu0", "gpu5").find((c) => c.chosen).bandwidth_gbps, 45);
  const bad = { preset: "hgx-h200", links: [{ ...table.links[0], bandwidth_gbps: 0 }] };
  assert.throws(() => o1sim.topology(bad), (e) => e.name === "ConfigError" && e.field === "topology.links[0].bandwidth_gbps");
  assert.throws(() => o1sim.routes("hgx-h200", "gpu0", "gpu9"), (e) => e.name === "ConfigError" && e.field === "dst");
  // Links down: the chosen route leaves the rail taken down (the simulator's re-route), the
  // list never crosses it, and either order or a Set of pairs names the same link.
  const [src, dst] = ["n0.gpu3", "n1.gpu3"];
  assert.deepEqual(o1sim.routes("2x-hgx-h200-ib", src, dst).find((c) => c.chosen).path, [src, "n0.nic3", "ib3", "n1.nic3", dst]);
  const after = o1sim.routes("2x-hgx-h200-ib", src, dst, { down: [["ib3", "n0.nic3"]] });
  const crosses = (p) => p.some((n, i) => i > 0 && [p[i - 1], n].sort().join("|") === "ib3|n0.nic3");
  assert.ok(after.length > 0 && !after.some((c) => crosses(c.path)));
  assert.notDeepEqual(after.find((c) => c.chosen).path, [src, "n0.nic3", "ib3", "n1.nic3", dst]);
  assert.deepEqual(o1sim.routes("2x-hgx-h200-ib", src, dst, { down: new Set([["n0.nic3", "ib3"]]) }), after);
  assert.deepEqual(o1sim.routes("2x-hgx-h200-ib", src, dst, { down: [] }), o1sim.routes("2x-hgx-h200-ib", src, dst));
  const cut = [["n0.gpu3", "n0.nic3"], ["n0.gpu3", "n0.nvswitch0"]];
  assert.deepEqual(o1sim.routes("2x-hgx-h200-ib", src, dst, { down: cut }), []);
  assert.throws(() => o1sim.routes("2x-hgx-h200-ib", src, dst, { down: [["n0.gpu0", "n1.gpu0"]] }),
    (e) => e.name === "ConfigError" && e.field === "down[0]" && /no link between/.test(e.message));
  assert.throws(() => o1sim.routes("2x-hgx-h200-ib", src, dst, { down: [["ib3", "n0.nic3"], ["n0.gpu0", "gpu0"]] }),
    (e) => e.name === "ConfigError" && e.field === "down[1]");
  assert.throws(() => o1sim.routes("2x-hgx-h200-ib", src, dst, { down: ["ib3|n0.nic3"] }),
    (e) => e.name === "ConfigError" && e.field === "down[0]");
  // Inside a scenario the same bad link names the same field.
  const base = o1sim.validate(o1sim.defaultScenario(), { format: "toml" }).scenario;
  assert.throws(() => o1sim.simulate({ ...base, topology: bad }), (e) => e.name === "ConfigError" && e.field === "topology.links[0].bandwidth_gbps");
  assert.throws(() => o1sim.simulate({ ...base, topology: "hgx-h200", events: [{ at_s: 0, kind: "link_down", src: "gpu0", dst: "gpu9" }] }),
    (e) => e.name === "ConfigError" && /^events\[0\]/.test(e.field));
});

test("the topology golden carries per-link results", () => {
  const r = JSON.parse(o1sim.simulate(readFileSync(golden + "topology_hgx.toml", "utf8"), { format: "toml" }));
  assert.equal(r.links.src.length, 8);
  assert.equal(r.links.up[6], false);
  assert.equal(r.summary.topology.events_applied, 2);
});

test("simulateSteps and stepAnatomy: a recorded step's kernels end where the step ended", () => {
  assert.ok(o1sim.features().stepAnatomy);
  const toml = readFileSync(golden + "policy_vllm.toml", "utf8");
  const steps = JSON.parse(o1sim.simulateSteps(toml, { format: "toml" }));
  assert.ok(steps.length > 100 && steps.every((s) => s.shape && Array.isArray(s.shape.prefill)));
  const a = o1sim.stepAnatomy(toml, steps[10], { format: "toml" });
  const recorded = steps[10].end_ms - steps[10].start_ms;
  assert.ok(Math.abs(a.step_ms / recorded - 1) < 2e-3, `${a.step_ms} vs ${recorded}`);
  assert.equal(a.recorded_ms, recorded);
  assert.ok(a.kernels.name.length > 100 && a.kernels.name.includes("qkv"));
  assert.throws(
    () => o1sim.stepAnatomy(toml, { shape: { decode_seqs: -1 } }, { format: "toml" }),
    (e) => e.name === "ConfigError" && e.field === "step.shape.decode_seqs",
  );
});
