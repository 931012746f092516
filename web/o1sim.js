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
// InfeasibleError, StallError, InternalError; base SimError) with `.field`, the dotted path
// of the offending field ("" for the whole document, null when none applies).

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
/** A bug in the core (a caught panic). */
export class InternalError extends SimError {
  constructor(m, f) { super(m, f); this.name = "InternalError"; }
}
const CLASSES = { SimError, ConfigError, InfeasibleError, StallError, InternalError };

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
  const bufs = strings.map((s) => enc.encode(s));
  const args = [];
  const held = [];
  let code;
  try {
    for (const b of bufs) {
      const p = wasm.o1_alloc(b.length);
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
  if (code !== 0) throw errorFrom(JSON.parse(text));
  return text;
}

function formatCode(format) {
  return format === "toml" ? 1 : format === "json" || format === undefined ? 0 : 99;
}

function asText(scenario) {
  return typeof scenario === "string" ? scenario : JSON.stringify(scenario);
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
  if (maxStates !== undefined) opts.max_states = maxStates;
  if (timelinessSteps !== undefined) opts.timeliness_steps = timelinessSteps;
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
  const pairs = down == null ? [] : Array.isArray(down) ? down : [...down];
  return JSON.parse(call("o1_routes", [JSON.stringify(topology), String(src), String(dst), JSON.stringify(pairs)]));
}

/**
 * Resolve and validate a topology entry (preset name or table) into its full table
 * `{nodes, links, routing}`, presets expanded. Errors name fields as inside a scenario
 * (`topology.links[3].bandwidth_gbps`).
 */
export function topology(entry) {
  return JSON.parse(call("o1_topology", [JSON.stringify(entry)]));
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

/** Which optional entry points this build has (`predictStep`, `routes`, `topology`, `check`, `traceInfo`, `stepAnatomy`). */
export function features() {
  ready();
  return {
    predictStep: !!wasm.o1_predict_step,
    routes: !!wasm.o1_routes,
    topology: !!wasm.o1_topology,
    check: !!wasm.o1_check,
    traceInfo: !!wasm.o1_trace_info,
    stepAnatomy: !!wasm.o1_step_anatomy,
  };
}

/** For tests: a panic inside the core must come back as an InternalError, not a trap. */
export function _testPanic() {
  return call("o1_test_panic", []);
}

export const inNode = isNode;
