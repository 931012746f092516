// o1sim in JavaScript: the Rust core compiled to WebAssembly (crates/sim-wasm), behind a
// small synchronous JSON-in/JSON-out API. Works in the page, in a Web Worker and in Node.
//
//   import * as o1sim from "./o1sim.js";
//   await o1sim.init();                       // or init(bytes | url | WebAssembly.Module)
//   const text = o1sim.simulate(scenario);    // scenario: object, JSON text, or TOML text
//                                             // with {format: "toml"}; returns the exact
//                                             // bytes Python's Result.to_json() gives
//
// Errors are thrown as Error subclasses named like the Python exceptions (ConfigError,
// InfeasibleError, StallError, ResourceError, InternalError; base SimError) with `.field`,
// the dotted path of the offending field ("" for the whole document, null when none
// applies). No other error escapes a call: input JavaScript cannot write as JSON (nesting
// too deep, cycles, BigInt) is a ConfigError, input too large a ResourceError.

const ABI_VERSION = 1;

/** Base class of every error the core reports. */
export class SimError extends Error {
  constructor(message, field = null) {
    super(message);
    this.name = "SimError";
    this.field = field;
  }
}
/** The scenario is malformed or breaks a rule; `.field` names the field. */
export class ConfigError extends SimError {
  constructor(m, f) { super(m, f); this.name = "ConfigError"; }
}
/** Well formed, but cannot run on the hardware it names. */
export class InfeasibleError extends SimError {
  constructor(m, f) { super(m, f); this.name = "InfeasibleError"; }
}
/** The simulation stopped making progress. */
export class StallError extends SimError {
  constructor(m, f) { super(m, f); this.name = "StallError"; }
}
/** The run would need more memory or time than the scenario's `limits` allow, or the input
 * is larger than the core reads; `.field` names the field that drives it. */
export class ResourceError extends SimError {
  constructor(m, f) { super(m, f); this.name = "ResourceError"; }
}
/** A bug in the core (a caught panic). */
export class InternalError extends SimError {
  constructor(m, f) { super(m, f); this.name = "InternalError"; }
}
const CLASSES = { SimError, ConfigError, InfeasibleError, StallError, ResourceError, InternalError };

/** Largest input text the core reads, bytes (its `limits::MAX_INPUT_BYTES`). */
export const MAX_INPUT_BYTES = 64 * 1024 * 1024;

/** Rebuild the error an `{"error": {...}}` envelope (or a worker message) describes. */
export function errorFrom(env) {
  const e = env && env.error ? env.error : env;
  const Cls = CLASSES[e && e.name] || SimError;
  return new Cls(String((e && e.message) ?? "unknown error"), e ? e.field ?? null : null);
}

let compiled = null; // WebAssembly.Module
let wasm = null; // exports of the live instance
const enc = new TextEncoder();
const dec = new TextDecoder();

const isNode = typeof process !== "undefined" && !!(process.versions && process.versions.node);

async function load(src) {
  if (src && typeof src.then === "function") src = await src;
  if (src instanceof WebAssembly.Module) return src;
  if (typeof Response !== "undefined" && src instanceof Response) return compileResponse(src, src.url);
  if (src instanceof ArrayBuffer || ArrayBuffer.isView(src)) return WebAssembly.compile(src);
  const url = src === undefined ? new URL("./pkg/o1sim.wasm", import.meta.url) : new URL(String(src), import.meta.url);
  if (url.protocol === "file:") {
    const { readFile } = await import("node:fs/promises");
    return WebAssembly.compile(await readFile(url));
  }
  return compileResponse(await fetch(url), url);
}

// Compile a fetched module, while it downloads when the server says `application/wasm`.
async function compileResponse(res, url) {
  if (!res.ok) throw new Error(`o1sim: cannot fetch ${url}: HTTP ${res.status}`);
  if (WebAssembly.compileStreaming && (res.headers.get("content-type") || "").startsWith("application/wasm")) {
    return WebAssembly.compileStreaming(res);
  }
  return WebAssembly.compile(await res.arrayBuffer());
}

function instantiate() {
  const inst = new WebAssembly.Instance(compiled, {});
  wasm = inst.exports;
  if (!wasm.o1_abi_version || wasm.o1_abi_version() !== ABI_VERSION) {
    throw new Error(`o1sim: module ABI ${wasm.o1_abi_version && wasm.o1_abi_version()} != ${ABI_VERSION}`);
  }
}

/**
 * Load and instantiate the module. `src`: bytes, a URL (default `./pkg/o1sim.wasm` next to
 * this file; file: URLs work in Node), a compiled `WebAssembly.Module`, or a `Response` (or
 * a promise of one): a page that starts `fetch(".../o1sim.wasm")` before importing this file
 * downloads both at once. Idempotent.
 */
export async function init(src) {
  if (wasm && src === undefined) return;
  compiled = await load(src);
  instantiate();
}

/** The compiled module (to hand to a Worker without fetching again). */
export function module() {
  return compiled;
}

function ready() {
  if (!wasm) throw new Error("o1sim: call `await init()` first");
}

function output() {
  const ptr = wasm.o1_out_ptr();
  const len = wasm.o1_out_len();
  const text = dec.decode(new Uint8Array(wasm.memory.buffer, ptr, len));
  wasm.o1_out_clear();
  return text;
}

// Copy each string into module memory, call `fn(ptr0, len0, ptr1, len1, ...extra)`, free.
function call(name, strings, extra = []) {
  ready();
  const fn = wasm[name];
  if (!fn) throw new SimError(`${name.replace(/^o1_/, "")} is not available in this build of the o1sim core`);
  const bufs = strings.map(encodeInput);
  const args = [];
  const held = [];
  let code;
  try {
    for (const b of bufs) {
      const p = wasm.o1_alloc(b.length);
      if (!p && b.length > 0) {
        for (const [q, n] of held) wasm.o1_free(q, n);
        throw new ResourceError(`the module could not allocate ${b.length} bytes for the input`, "");
      }
      held.push([p, b.length]);
      new Uint8Array(wasm.memory.buffer, p, b.length).set(b);
      args.push(p, b.length);
    }
    // Extra (integer) arguments go after the first buffer, as the ABI declares them.
    const a = args.length ? [args[0], args[1], ...extra, ...args.slice(2)] : extra;
    code = fn(...a);
  } catch (err) {
    if (err instanceof WebAssembly.RuntimeError) {
      // A trap (a panic in a build without exception handling, or memory exhaustion):
      // the panic hook left an envelope; report it and start a fresh instance.
      let env = null;
      try { env = JSON.parse(output()); } catch { /* no message */ }
      instantiate();
      throw errorFrom(env || { error: { name: "InternalError", message: `o1sim core trapped: ${err.message}` } });
    }
    throw err;
  }
  for (const [p, n] of held) wasm.o1_free(p, n);
  const text = output();
  if (wasm.memory.buffer.byteLength > RESET_BYTES) instantiate();
  if (code !== 0) throw errorFrom(JSON.parse(text));
  return text;
}

// UTF-8 bytes of an input text, refused before the copy when longer than the core reads.
function encodeInput(s) {
  if (typeof s !== "string") throw new ConfigError(`expected text, got ${typeof s}`, "");
  // A UTF-16 string of n units is at least n bytes of UTF-8: refuse early without encoding.
  if (s.length > MAX_INPUT_BYTES) {
    throw new ResourceError(`the input is longer than the ${MAX_INPUT_BYTES >> 20} MiB o1sim reads`, "");
  }
  const b = enc.encode(s);
  if (b.length > MAX_INPUT_BYTES) {
    throw new ResourceError(`the input is ${(b.length / 1048576).toFixed(0)} MiB, more than the ${MAX_INPUT_BYTES >> 20} MiB o1sim reads`, "");
  }
  return b;
}

function formatCode(format) {
  return format === "toml" ? 1 : format === "json" || format === undefined ? 0 : 99;
}

// JSON text of a value, with what JavaScript cannot write (nesting too deep for the stack,
// cycles, BigInt, undefined) as a ConfigError naming `field`. NaN and ±Infinity, which
// JSON.stringify would silently write as null, are a ConfigError naming their path (Python
// refuses them too).
function jsonText(value, field = "") {
  const paths = new WeakMap();
  const replacer = function (key, v) {
    const base = paths.get(this);
    const path = base === undefined ? field : Array.isArray(this) ? `${base}[${key}]` : base ? `${base}.${key}` : key;
    if (typeof v === "number" && !Number.isFinite(v)) {
      throw new ConfigError(`${path || "value"}: must be a finite number (got ${v})`, path);
    }
    if (v !== null && typeof v === "object") paths.set(v, path);
    return v;
  };
  let text;
  try {
    text = JSON.stringify(value, replacer);
  } catch (err) {
    if (err instanceof SimError) throw err;
    const why = err instanceof RangeError ? "nested too deeply (or too large) to write as JSON" : `cannot be written as JSON: ${err.message}`;
    throw new ConfigError(field ? `${field}: ${why}` : why, field);
  }
  if (text === undefined) throw new ConfigError(`${field ? field + ": " : ""}expected a value, got ${typeof value}`, field);
  return text;
}

// A node id or other plain text argument (anything `String()` cannot convert is a
// ConfigError naming `field`).
function plainText(v, field) {
  try {
    return String(v);
  } catch {
    throw new ConfigError(`${field}: expected text, got ${typeof v}`, field);
  }
}

function asText(scenario) {
  return typeof scenario === "string" ? scenario : jsonText(scenario);
}

/**
 * Run a scenario to the end. `scenario`: an object, JSON text, or TOML text with
 * `{format: "toml"}`. Returns the result JSON text (parse it yourself: large runs carry
 * per-request columns).
 */
export function simulate(scenario, { format } = {}) {
  return call("o1_simulate", [asText(scenario)], [formatCode(format)]);
}

/**
 * Run a scenario recording every scheduler step; returns the steps JSON text
 * (`[{replica, start_ms, end_ms, scheduled, preempted, finished, free_blocks_after, shape}]`,
 * Python's `Result.steps`).
 */
export function simulateSteps(scenario, { format } = {}) {
  return call("o1_simulate_steps", [asText(scenario)], [formatCode(format)]);
}

/**
 * The kernels of one recorded step (an element of `simulateSteps`' output, object or JSON)
 * under the run's scenario: `{step_ms, graph, pipelined, sms, recorded_ms, kernels: {name,
 * layer, part, parts, launched_us, start_us, end_us, stream, source, ctas, sm_occupancy}}`
 * (Python's `Result.step_anatomy`).
 */
export function stepAnatomy(scenario, step, { format } = {}) {
  return JSON.parse(call("o1_step_anatomy", [asText(scenario), asText(step)], [formatCode(format)]));
}

/** Validate and resolve a scenario; returns `{scenario, deployment}` (parsed). */
export function validate(scenario, { format } = {}) {
  return JSON.parse(call("o1_validate", [asText(scenario)], [formatCode(format)]));
}

/** The catalog: GPUs, models, policies, routers (and topologies when the core has them). */
export function presets() {
  return JSON.parse(call("o1_presets", []));
}

/** The embedded default scenario, as TOML text. */
export function defaultScenario() {
  return call("o1_default_scenario", []);
}

/** The model-check views' starting configuration (TOML text; the same for the dashboard). */
export function defaultCheckScenario() {
  return call("o1_default_check", []);
}

/** Model-check a small scenario; options `{maxStates, timelinessSteps}`. Returns parsed JSON. */
export function check(scenario, { format, maxStates, timelinessSteps } = {}) {
  const opts = {};
  const count = (v, field) => {
    if (!Number.isSafeInteger(v) || v < 0) throw new ConfigError(`${field}: must be a non-negative whole number (got ${String(v)})`, field);
    return v;
  };
  if (maxStates !== undefined) opts.max_states = count(maxStates, "max_states");
  if (timelinessSteps !== undefined) opts.timeliness_steps = count(timelinessSteps, "timeliness_steps");
  return JSON.parse(call("o1_check", [asText(scenario), JSON.stringify(opts)], [formatCode(format)]));
}

/**
 * The execution-time model of one step, with provenance per operator. `request`:
 * `{model, gpu, tp?, pp?, batch: [{new_tokens, context_tokens, sampled?}], cuda_graphs?,
 * dtype?, kv_dtype?, fusion?, block_size?}` (as Python's `o1sim.predict_step`). Returns
 * `{total_ms, mode, profile, breakdown: [{op, ms, source}]}`.
 */
export function predictStep(request) {
  return JSON.parse(call("o1_predict_step", [asText(request)]));
}

/**
 * RTMPv2 candidate routes between two nodes of a topology, shortest latency first:
 * `[{path, bandwidth_gbps, latency_us, score, chosen, frontier}]` (Python's `o1sim.routes`).
 * `topology`: a preset name (`"hgx-h200"`) or a table `{preset?, nodes, links, routing?}`.
 * `down`: links that are down, `[[a, b], …]` node-id pairs (any iterable), taken down in
 * that order as `link_down` events at t = 0 re-route a simulation; an empty list when they
 * cut the pair apart; a bad pair throws a ConfigError with `field` `down[i]`.
 */
export function routes(topology, src, dst, { down } = {}) {
  let pairs;
  try {
    pairs = down == null ? [] : Array.isArray(down) ? down : [...down];
  } catch {
    throw new ConfigError("down: must be a list of [a, b] node-id pairs", "down");
  }
  return JSON.parse(call("o1_routes", [jsonText(topology, "topology"), plainText(src, "src"), plainText(dst, "dst"), jsonText(pairs, "down")]));
}

/**
 * Resolve and validate a topology entry (preset name or table) into its full table
 * `{nodes, links, routing}`, presets expanded. Errors name fields as inside a scenario
 * (`topology.links[3].bandwidth_gbps`).
 */
export function topology(entry) {
  return JSON.parse(call("o1_topology", [jsonText(entry, "topology")]));
}

/** Run a scenario to the end and return only its summary (parsed): what the capacity
 *  search and the plan read of a run (Python's `_core.run_summary_json`). */
export function runSummary(scenario, { format } = {}) {
  return JSON.parse(call("o1_run_summary", [asText(scenario)], [formatCode(format)]));
}

/** An SLO `{metric: bound}` parsed by the core: `{objectives, per_request, needs_per_request}`. */
export function sloSpec(slo) {
  return JSON.parse(call("o1_slo_spec", [JSON.stringify(slo)]));
}

/** Judge a summary against an SLO: `{meets, misses: [{metric, value, bound, limit}], metrics}`. */
export function sloEval(slo, summary) {
  return JSON.parse(call("o1_slo_eval", [JSON.stringify({ slo, summary })]));
}

/** The capacity search's next step: `{status: "run", rates}` or its answer (`found`, `none`,
 *  `above_max`); `request` is `{start_rate, tolerance?, parallel?, min_rate?, max_rate?,
 *  points: [{rate, meets}]}` (see `search.js`). */
export function capacityNext(request) {
  return JSON.parse(call("o1_capacity_next", [JSON.stringify(request)]));
}

/** A plan's cost table: `{configs: [{gpu, gpus, meets, latency_ms, tokens_per_s,
 *  output_tokens_per_s}], prices}` → `{rows: [{usd_per_hour, …, pareto}], cheapest}`. */
export function planEval(request) {
  return JSON.parse(call("o1_plan_eval", [JSON.stringify(request)]));
}

/** The default GPU prices, `{gpu: {usd_per_hour, source}}` (Python's `o1sim.default_prices()`). */
export function defaultPrices() {
  return JSON.parse(call("o1_default_prices", []));
}

/**
 * Read a trace given inline, as a run would: `spec` is a `workload.trace` table
 * (`{format: "auto", text}`; also `rate_scale`, `start_s`, `window_s`, `max_requests`, …).
 * Returns `{format, requests}` (the detected format and the requests kept); a bad trace
 * throws the ConfigError a run would, naming the line.
 */
export function traceInfo(spec) {
  return JSON.parse(call("o1_trace_info", [JSON.stringify(spec)]));
}

/** Which optional entry points this build has (`predictStep`, `routes`, `topology`, `check`,
 *  `traceInfo`, `capacity`, `stepAnatomy`). */
export function features() {
  ready();
  return {
    predictStep: !!wasm.o1_predict_step,
    routes: !!wasm.o1_routes,
    topology: !!wasm.o1_topology,
    check: !!wasm.o1_check,
    traceInfo: !!wasm.o1_trace_info,
    capacity: !!wasm.o1_capacity_next,
    stepAnatomy: !!wasm.o1_step_anatomy,
  };
}

/** Bytes of the module's linear memory: its high-water mark (WASM memory never shrinks). */
export function memoryBytes() {
  ready();
  return wasm.memory.buffer.byteLength;
}

/**
 * Start a fresh instance of the compiled module, releasing the memory earlier calls grew:
 * WASM memory never shrinks, and a large run's freed memory may not fit the next large
 * one (fragmentation), so a long-lived module's memory could creep towards the 4 GiB a
 * module can address. `call` does it by itself after a call that left more than
 * `RESET_BYTES`; results are plain text, nothing held in the old instance is lost.
 */
export function reset() {
  ready();
  instantiate();
}

/** Memory a finished call may leave before the next call starts a fresh instance. */
export const RESET_BYTES = 1024 * 1024 * 1024;

/** For tests: a panic inside the core must come back as an InternalError, not a trap. */
export function _testPanic() {
  return call("o1_test_panic", []);
}

export const inNode = isNode;
