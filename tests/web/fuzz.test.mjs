// Fuzzing o1sim.js under Node: mutated scenarios (every field of the goldens and the crash
// reproducers set to nasty values, deleted, renamed, nested deep), mutated scenario text,
// JavaScript values JSON cannot carry (cycles, BigInt, undefined, nesting past the stack),
// garbage for the model checker (maxStates 2^32 must not wrap to 0), the topology and the
// step prediction. Every call must return, or throw one of o1sim.js's error classes other
// than InternalError; never another error, never a trap; a run accounts for every request;
// and each case grows the module's memory by less than the forced limits.max_memory_gib.
// (WASM memory never shrinks, and a large case's freed memory may not fit the next large
// one: the module is reset before a case when it holds more than BASE_BYTES, so that each
// case's growth is its own.)
//
// CI runs a few hundred cases; O1SIM_FUZZ_CASES=N runs N (`make fuzz`), and the counts go
// to benchmarks/out/fuzz-wasm.json.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, readdirSync, mkdirSync, writeFileSync } from "node:fs";
import * as o1sim from "../../web/o1sim.js";

const ROOT = new URL("../../", import.meta.url);
const CASES = Number(process.env.O1SIM_FUZZ_CASES || 0) || 600;
const LIMITS = { max_memory_gib: 0.5, max_seconds: 3 };
const LIMIT_BYTES = LIMITS.max_memory_gib * 2 ** 30;
// WASM has no clock for limits.max_seconds: a case slower than this counts as a hang.
const HANG_MS = 30_000;

await o1sim.init(readFileSync(new URL("web/pkg/o1sim.wasm", ROOT)));
const START = o1sim.memoryBytes();
const BASE_BYTES = 64 * 1024 * 1024;
const stats = { cases: 0, runs: 0, checks: 0, start_memory_bytes: START, limit_bytes: LIMIT_BYTES, peak_case_growth_bytes: 0 };
let caseBase = START;

// Before a case: the module's memory now, after a reset if earlier cases left it large.
function beginCase() {
  if (o1sim.memoryBytes() > BASE_BYTES) {
    o1sim.reset();
    stats.resets = (stats.resets || 0) + 1;
  }
  caseBase = o1sim.memoryBytes();
}

// A small seeded PRNG (xorshift), so a failure names its seed.
function rng(seed) {
  let x = BigInt.asUintN(64, BigInt(seed) * 0x9e3779b97f4a7c15n + 1n);
  const next = () => {
    x ^= x << 13n; x = BigInt.asUintN(64, x); x ^= x >> 7n; x ^= x << 17n; x = BigInt.asUintN(64, x);
    return Number(x >> 11n) / 2 ** 53;
  };
  return { next, below: (n) => Math.floor(next() * n), pick: (a) => a[Math.floor(next() * a.length)] };
}

const seeds = [];
for (const dir of ["tests/golden", "tests/repro"]) {
  for (const f of readdirSync(new URL(dir, ROOT)).sort()) {
    if (!/\.(toml|json)$/.test(f)) continue;
    const text = readFileSync(new URL(`${dir}/${f}`, ROOT), "utf8");
    // The core resolves TOML for us (validate echoes the scenario as JSON); a reproducer
    // that does not validate is kept as written.
    try {
      seeds.push(o1sim.validate(text, { format: f.endsWith(".toml") ? "toml" : "json" }).scenario);
    } catch {
      if (f.endsWith(".json")) seeds.push(JSON.parse(text));
    }
  }
}
const checkSeed = o1sim.defaultCheckScenario();

const NASTY = [-1, 0, 1, 2, 3, 7, 16, 1000, 2 ** 31, 2 ** 32, 2 ** 32 + 1, 2 ** 53, -(2 ** 63), 1e308, -1e308, 1e-300,
  0.5, 1.5, 1e9, 1e12, 1e300, "", "x", "nan", "vllm", "disagg", "hgx-h200", "llama-3-8b", "h200", "poisson", "fixed",
  "link_down", "gpu0", [], [1], {}, { kind: "fixed" }, null, true, false, "x".repeat(5000)];

function leaves(v, at = [], out = []) {
  out.push(at);
  if (v && typeof v === "object" && at.length < 40) {
    const keys = Array.isArray(v) ? v.slice(0, 3).map((_, i) => i) : Object.keys(v);
    for (const k of keys) leaves(v[k], [...at, k], out);
  }
  return out;
}
const get = (v, path) => path.reduce((x, k) => x[k], v);
function deep(n, leaf) {
  for (let i = 0; i < n; i++) leaf = i % 2 ? { a: leaf } : [leaf];
  return leaf;
}
function randomValue(r) {
  switch (r.below(5)) {
    case 0: return r.pick(NASTY);
    case 1: return Math.floor((r.next() - 0.5) * 2 ** (r.below(70)));
    case 2: return (r.next() - 0.3) * 10 ** r.below(12);
    case 3: return String.fromCharCode(...Array.from({ length: r.below(6) }, () => r.below(0x2fff)));
    default: return r.pick([[r.pick(NASTY)], { [r.pick(["kind", "x", "preset"])]: r.pick(NASTY) }]);
  }
}

function mutate(r, seed) {
  const sc = structuredClone(seed);
  for (let m = 0, n = r.pick([1, 1, 1, 2, 3]); m < n; m++) {
    let paths = leaves(sc).filter((p) => p.length);
    const op = r.pick(["nudge", "nudge", "nudge", "nudge", "set", "set", "delete", "unknown", "deep", "grow"]);
    const numeric = paths.filter((p) => typeof get(sc, p) === "number");
    if (op === "nudge" && numeric.length) paths = numeric;
    if (!paths.length) break;
    const path = r.pick(paths);
    const parent = get(sc, path.slice(0, -1));
    const key = path[path.length - 1];
    const old = parent[key];
    if (op === "nudge" && typeof old === "number") {
      parent[key] = Number.isInteger(old) ? r.below(2 * Math.abs(old) + 9) : r.next() * (2 * Math.abs(old) + 1);
    } else if (op === "set" || op === "nudge") parent[key] = randomValue(r);
    else if (op === "delete") Array.isArray(parent) ? parent.splice(key, 1) : delete parent[key];
    else if (op === "unknown" && !Array.isArray(parent)) parent[r.pick(["blok_size", "x", "schedulr", "Model"])] = r.pick(NASTY);
    else if (op === "deep") parent[key] = deep(r.pick([10, 70, 130, 600, 20000]), r.pick(NASTY));
    else if (op === "grow" && Array.isArray(old) && old.length) parent[key] = Array(r.below(50) + 2).fill(old).flat();
  }
  if (sc && typeof sc === "object" && !Array.isArray(sc)) sc.limits = { ...LIMITS };
  return sc;
}

function mutateText(r, text) {
  let b = [...Buffer.from(text)];
  for (let m = 0, n = 1 + r.below(6); m < n; m++) {
    const at = r.below(Math.max(1, b.length));
    const op = r.below(4);
    if (op === 0) b.splice(at, 1);
    else if (op === 1) b[at] = r.pick([..."0123456789-.e\"[]{}=,x \n#'"].map((c) => c.charCodeAt(0)));
    else if (op === 2) b.splice(at, 0, r.below(256));
    else b = b.slice(0, at);
  }
  return Buffer.from(b).toString("utf8");
}

const ALLOWED = new Set(["ConfigError", "InfeasibleError", "StallError", "ResourceError"]);
function typed(e, what) {
  stats[e?.name] = (stats[e?.name] || 0) + 1;
  assert.ok(e instanceof o1sim.SimError && ALLOWED.has(e.name), `${what}: ${e?.name}: ${e?.message}`);
}
function memoryOk(what, input) {
  const m = o1sim.memoryBytes();
  stats.peak_memory_bytes = Math.max(stats.peak_memory_bytes || 0, m);
  stats.peak_case_growth_bytes = Math.max(stats.peak_case_growth_bytes, m - caseBase);
  if (m - caseBase < LIMIT_BYTES) return;
  let shown = "";
  try {
    shown = `: ${(typeof input === "string" ? input : JSON.stringify(input) ?? "").slice(0, 2000)}`;
  } catch { /* too deep to show */ }
  assert.fail(`${what}: module memory ${m} bytes, grown by ${m - caseBase} in this case${shown}`);
}
function simulateOk(scenario, opts, what) {
  beginCase();
  stats.cases++;
  const t0 = performance.now();
  try {
    const r = JSON.parse(o1sim.simulate(scenario, opts));
    const s = r.summary;
    assert.equal(s.finished + s.rejected, s.num_requests, what);
    assert.equal(r.requests.request_id.length, s.num_requests, what);
    stats.runs++;
  } catch (e) {
    if (e instanceof assert.AssertionError) throw e;
    typed(e, what);
  }
  const ms = performance.now() - t0;
  if (ms > (stats.slowest_case_ms || 0)) Object.assign(stats, { slowest_case_ms: ms, slowest_case: what });
  assert.ok(ms < HANG_MS, `${what} took ${ms} ms: a hang`);
  memoryOk(what, scenario);
}

test(`${CASES} mutated scenarios end in a result or a typed error`, () => {
  for (let i = 0; i < CASES; i++) {
    const r = rng(i);
    const sc = mutate(r, r.pick(seeds));
    simulateOk(sc, {}, `scenario case ${i}`);
  }
});

test(`${CASES} mutated scenario texts end in a result or a typed error`, () => {
  for (let i = 0; i < CASES; i++) {
    const r = rng(1e9 + i);
    // The limits go first, after the mutation (the seeds have none of their own): a case's
    // memory limit is always the forced one, never a mutated one.
    const body = mutateText(r, JSON.stringify(r.pick(seeds)));
    const text = body.startsWith("{")
      ? `{"limits": ${JSON.stringify(LIMITS)}${/^\s*(\}|$)/.test(body.slice(1)) ? "" : ","}${body.slice(1)}`
      : body;
    simulateOk(text, {}, `text case ${i}`);
  }
});

test(`${Math.ceil(CASES / 5)} mutated model checks end in a result or a typed error`, () => {
  for (let i = 0; i < Math.ceil(CASES / 5); i++) {
    const r = rng(2e9 + i);
    // The limits table after the mutation, untouched by it (a second one would be an error).
    const text = (r.below(3) ? mutateText(r, checkSeed) : checkSeed) + `\n[limits]\nmax_memory_gib = ${LIMITS.max_memory_gib}\n`;
    beginCase();
    stats.cases++;
    try {
      const maxStates = r.pick([1, 300, 2000, 2 ** 32, 2 ** 40]);
      const res = o1sim.check(text, { format: "toml", maxStates });
      assert.ok(res.states >= 1 && res.states <= 2000, `check case ${i}: ${res.states} states`);
      stats.checks++;
    } catch (e) {
      if (e instanceof assert.AssertionError) throw e;
      typed(e, `check case ${i}`);
    }
    memoryOk(`check case ${i}`);
  }
});

test("maxStates 2^32 is refused with the field named, never wrapped to 0", () => {
  assert.throws(() => o1sim.check(checkSeed, { format: "toml", maxStates: 2 ** 32 }),
    (e) => e.name === "ResourceError" && e.field === "max_states");
  assert.throws(() => o1sim.check(checkSeed, { format: "toml", maxStates: 0 }),
    (e) => e.name === "ConfigError" && e.field === "max_states");
  for (const bad of [-1, 1.5, NaN, "10", 2 ** 60]) {
    assert.throws(() => o1sim.check(checkSeed, { format: "toml", maxStates: bad }), (e) => e instanceof o1sim.SimError);
  }
});

test("values JSON cannot carry are ConfigErrors, not TypeErrors or RangeErrors", () => {
  const cyclic = { model: "llama-3-8b" };
  cyclic.self = cyclic;
  const inputs = [cyclic, { model: 1n }, deep(200000, 1), { model: deep(200000, "x") }, undefined, () => 1, Symbol("s")];
  for (const v of inputs) {
    for (const call of [() => o1sim.simulate(v), () => o1sim.validate(v), () => o1sim.check(v),
      () => o1sim.topology(v), () => o1sim.predictStep(v), () => o1sim.routes(v, "gpu0", "gpu1")]) {
      stats.cases++;
      assert.throws(call, (e) => { typed(e, String(typeof v)); return true; });
    }
  }
  assert.throws(() => o1sim.routes("hgx-h200", Symbol("a"), "gpu1"), (e) => e.name === "ConfigError" && e.field === "src");
});

test("input over the size cap is a ResourceError before it is copied in", () => {
  beginCase();
  const huge = "#".repeat(o1sim.MAX_INPUT_BYTES + 1);
  assert.throws(() => o1sim.simulate(huge, { format: "toml" }), (e) => e.name === "ResourceError");
  memoryOk("huge input");
});

test(`${CASES} garbage topologies, routes and step predictions give typed errors`, () => {
  for (let i = 0; i < CASES; i++) {
    const r = rng(3e9 + i);
    beginCase();
    stats.cases++;
    try {
      switch (r.below(3)) {
        case 0: o1sim.topology(r.pick([randomValue(r), "hgx-h200", { preset: "hgx-h200", links: [randomValue(r)] }])); break;
        case 1: o1sim.routes(r.pick(["hgx-h200", "2x-hgx-h200-ib", randomValue(r)]), r.pick(["gpu0", "n0.gpu0", randomValue(r)]),
          r.pick(["gpu1", "nvswitch0", randomValue(r)]), { down: r.pick([[], [["gpu0", "nvswitch0"]], [[randomValue(r)]]]) }); break;
        default: o1sim.predictStep({ model: r.pick(["llama-3-8b", "x", randomValue(r)]), gpu: r.pick(["h200", randomValue(r)]),
          tp: r.pick([1, 2, randomValue(r)]), batch: [{ new_tokens: randomValue(r), context_tokens: randomValue(r) }] });
      }
    } catch (e) {
      if (e instanceof assert.AssertionError) throw e;
      typed(e, `garbage case ${i}`);
    }
    memoryOk(`garbage case ${i}`);
  }
});

test("report", () => {
  mkdirSync(new URL("benchmarks/out/", ROOT), { recursive: true });
  writeFileSync(new URL("benchmarks/out/fuzz-wasm.json", ROOT), JSON.stringify(stats, null, 2));
  assert.ok(stats.runs > 0 && stats.cases > 0);
});
