// The page: a form that is the experiment (mirrored in the URL hash), a Worker that runs the
// WASM core, and the results (summary table, CDFs, time series, GPU × time heatmap).
import { Charts, setPolicyColors } from "./charts.js";
import { setChartStyle } from "./chart_style.js";
import { TopologyPanel } from "./topology.js";
import { CheckPanel } from "./check.js";
import { CapacityPanel } from "./capacity.js";
import { StepsPanel } from "./steps.js";
import { formatMetric, metricValue, shownMetrics } from "./metrics.js";

const $ = (sel, root = document) => root.querySelector(sel);
const $$ = (sel, root = document) => [...root.querySelectorAll(sel)];
const form = $("#form");
const statusEl = $("#status");
const timings = (window.o1simTimings = { navToReadyMs: null, initMs: null, firstRunMs: null, runs: [] });

// ---------------------------------------------------------------------------------------
// Worker with request ids; a Stop (or a newer run) terminates and restarts it.
let worker = null;
let nextId = 1;
const pending = new Map();
let compiledModule = null;

function startWorker() {
  worker = new Worker(new URL("./worker.js", import.meta.url), { type: "module" });
  worker.onmessage = (ev) => {
    const p = pending.get(ev.data.id);
    if (!p) return;
    pending.delete(ev.data.id);
    ev.data.ok ? p.resolve(ev.data) : p.reject(Object.assign(new Error(ev.data.error.message), ev.data.error));
  };
  worker.onerror = (ev) => {
    for (const p of pending.values()) p.reject(new Error(`worker failed: ${ev.message}`));
    pending.clear();
  };
}

function ask(op, ...args) {
  const id = nextId++;
  return new Promise((resolve, reject) => {
    pending.set(id, { resolve, reject });
    worker.postMessage({ id, op, args });
  });
}

// ---------------------------------------------------------------------------------------
// Experiment presets: the core's default scenario plus a few variations of it.
let catalog = null;
let defaults = null; // the core's default scenario (resolved), flattened
const PRESETS = {
  "default (llama-3-70b tp4×2, 8×H200, azure-conv)": {},
  "azure-code-like (long prompts, short outputs)": {
    "workload.arrival.rate": 12, "workload.prompt.mean": 2048, "workload.prompt.sigma": 0.7,
    "workload.prompt.max": 7500, "workload.output.mean": 28, "workload.output.sigma": 0.9, "workload.output.max": 500,
  },
  "bursty small (llama-3-8b on one H100, gamma cv 3)": {
    model: "llama-3-8b", gpu: "h100", "deployment.tp": 1, "deployment.replicas": 1, "workload.num_requests": 500,
    "workload.arrival.kind": "gamma", "workload.arrival.rate": 30, "workload.arrival.cv": 3,
    "workload.prompt.mean": 700, "workload.prompt.sigma": 0.8, "workload.prompt.max": 4000,
    "workload.output.mean": 128, "workload.output.sigma": 0.8, "workload.output.max": 512,
    "slo.ttft_ms": 500, "slo.tpot_ms": 30,
  },
  "fabric: llama-3-70b tp8 on one HGX H200 (hgx-h200)": {
    "deployment.tp": 8, "deployment.replicas": 1, "workload.num_requests": 600, "workload.arrival.rate": 6,
    topology: "hgx-h200",
  },
  "2 nodes over InfiniBand: llama-3-70b tp8 × pp2 (2x-hgx-h200-ib)": {
    "deployment.tp": 8, "deployment.pp": 2, "deployment.replicas": 1, "workload.num_requests": 600,
    "workload.arrival.rate": 6, topology: "2x-hgx-h200-ib",
  },
  "disagg vs co-located: llama-3-70b tp8, prefill node + decode node over InfiniBand (2x-hgx-h200-ib)": {
    "deployment.tp": 8, "deployment.replicas": 2, "deployment.prefill_replicas": 1, "workload.num_requests": 300,
    "workload.arrival.rate": 4, topology: "2x-hgx-h200-ib", policies: ["vllm", "disagg"],
  },
  "long context (llama-3.1-405b tp8, 8×H200)": {
    model: "llama-3.1-405b", "deployment.tp": 8, "deployment.replicas": 1, "workload.num_requests": 100,
    "workload.arrival.rate": 0.3, "workload.prompt.mean": 20000, "workload.prompt.sigma": 0.5,
    "workload.prompt.max": 100000, "workload.output.mean": 300, "workload.output.sigma": 0.5, "workload.output.max": 1000,
    "slo.ttft_ms": 10000, "slo.tpot_ms": 100,
  },
};
const DEFAULT_PRESET = Object.keys(PRESETS)[0];
// The core's registry of policies (`presets().policy_info`: name, label, colour, summary,
// needs_topology, disaggregated), in display order. Set by main().
let POLICY_INFO = [];
// The policies ticked by default: every one that runs without a topology.
let DEFAULT_POLICIES = [];
// A policy that needs a topology (`disagg`: prefill and decode on separate replicas, each
// request's KV cache moved over the fabric) is offered once a fabric is chosen; only a
// disaggregated policy's scenario carries prefill_replicas.
const needsFabric = (name) => POLICY_INFO.some((p) => p.name === name && p.needs_topology);
const splits = (name) => POLICY_INFO.some((p) => p.name === name && p.disaggregated);
const PREFILL_REPLICAS = "deployment.prefill_replicas";

function flatten(obj, prefix = "", out = {}) {
  for (const [k, v] of Object.entries(obj)) {
    const key = prefix ? `${prefix}.${k}` : k;
    if (v && typeof v === "object" && !Array.isArray(v)) flatten(v, key, out);
    else out[key] = v;
  }
  return out;
}

function setDeep(obj, dotted, value) {
  const parts = dotted.split(".");
  let o = obj;
  for (const p of parts.slice(0, -1)) o = o[p] ??= {};
  o[parts.at(-1)] = value;
}

const fields = () => $$("[name]", form).filter((el) => !el.name.startsWith("ui."));

/** The form as flat `{dotted name: value}` plus the chosen policies and the pasted
 *  config.json's text (which replaces the model preset when given). */
function readForm() {
  const flat = {};
  for (const el of fields()) flat[el.name] = el.value;
  const policies = $$("#policies input:checked").map((el) => el.value);
  return { preset: $("#preset").value, flat, policies, hfConfig: $("#hf-config").value.trim() };
}

/** The pasted config.json parsed, `null` when none; throws a ConfigError naming
 *  `model.hf_config` when it is not JSON. */
function hfConfig(state) {
  if (!state.hfConfig) return null;
  try {
    return JSON.parse(state.hfConfig);
  } catch (e) {
    throw Object.assign(new Error(`model.hf_config: not valid JSON: ${e.message}`), { name: "ConfigError", field: "model.hf_config" });
  }
}

/** Say which model the experiment uses: the pasted config or the preset picked. */
function updateHfNote() {
  const given = $("#hf-config").value.trim() !== "";
  $("[name=model]").disabled = given;
  $("#hf-config-note").textContent = given
    ? "The experiment uses this config.json (the model's layers, heads, experts, windows); clear it to use the preset."
    : "Any Llama, Mistral, Mixtral, Qwen2/2.5/3, Yi, Gemma or Llama 4 config.json from the Hugging Face Hub.";
  if (given) $("#hf-config-box").open = true;
}

function writeForm(flat, policies, preset) {
  for (const el of fields()) el.value = flat[el.name] ?? "";
  $$("#policies input").forEach((el) => (el.checked = policies.includes(el.value)));
  if (preset !== undefined) $("#preset").value = preset;
  form.classList.toggle("gamma", flat["workload.arrival.kind"] === "gamma");
  form.classList.toggle("draft", flat["scheduler.speculative.method"] === "draft_model");
}

/** The policies that need a topology follow the fabric: offered once one is chosen, else
 *  unticked; the prefill split shows while a disaggregated policy is ticked. */
function updateDisagg() {
  const fabric = topology.enabled && topology.preset ? topology.preset : "";
  const gpus = (topology.base?.nodes || []).filter((n) => n.kind === "gpu").length;
  const notes = [];
  for (const p of POLICY_INFO.filter((q) => q.needs_topology)) {
    const box = $(`#policies input[value="${p.name}"]`);
    if (!box) continue;
    box.disabled = !fabric;
    if (!fabric) box.checked = false;
    notes.push(fabric
      ? `${p.name}: ${p.summary}, over ${fabric}` + (gpus && p.disaggregated ? ` (${gpus} GPUs; needs ≥ 2 replicas of tp × pp GPUs)` : "")
      : `${p.name} (${p.summary}) needs a fabric: choose one under Topology.`);
  }
  $("#disagg-note").textContent = notes.join(" ");
  form.classList.toggle("disagg", $$("#policies input:checked").some((el) => splits(el.value)));
}

async function applyPreset(name) {
  const { topology: topo = "", policies, ...fields } = PRESETS[name] || {};
  const flat = { ...defaults, ...fields };
  const current = readForm().policies;
  writeForm(flat, policies || (current.length ? current.filter((p) => !needsFabric(p)) : DEFAULT_POLICIES), name);
  await topology.use(topo);
  updateDisagg();
}

// ---------------------------------------------------------------------------------------
// An uploaded trace: its text goes to the core inline (`workload.trace.text`), read by the
// same trace reader as the Python API's files; it is not kept in the URL.
const MAX_TRACE_BYTES = 64 << 20;
let trace = null; // {name, text, info: {format, requests}} once read

function traceSpec() {
  const spec = { format: $("#trace-format").value || "auto", text: trace.text };
  const scale = Number($("#trace-rate-scale").value);
  if ($("#trace-rate-scale").value !== "" && scale !== 1) spec.rate_scale = scale;
  return spec;
}

async function loadTrace(file) {
  clearErrors();
  if (file.size > MAX_TRACE_BYTES) {
    throw Object.assign(new Error(`${file.name} is ${(file.size / 2 ** 20).toFixed(0)} MiB: the page reads traces up to ` +
      `${MAX_TRACE_BYTES >> 20} MiB (the Python API and the CLI stream any size)`), { name: "ConfigError", field: "workload.trace" });
  }
  trace = { name: file.name, text: await file.text(), info: null };
  await describeTrace();
}

async function describeTrace() {
  form.classList.add("trace-mode");
  $("#trace-info").textContent = "reading…";
  try {
    trace.info = (await ask("traceInfo", traceSpec())).result;
    $("#trace-info").textContent = `${trace.name}: ${trace.info.format} · ${trace.info.requests.toLocaleString("en")} requests`;
  } catch (e) {
    trace.info = null;
    $("#trace-info").textContent = `${trace.name}: not readable`;
    showError({ name: e.name, message: e.message, field: e.field ? `workload.${e.field}` : "workload.trace" });
    throw e;
  }
}

function clearTrace() {
  trace = null;
  $("#trace-file").value = "";
  $("#trace-info").textContent = "";
  form.classList.remove("trace-mode");
}

/** One scenario object per chosen policy (the form's numbers as numbers, blanks left out). */
function scenarios(state) {
  const base = {};
  for (const el of fields()) {
    const raw = state.flat[el.name];
    if (raw === "" || raw === undefined || el.name === PREFILL_REPLICAS) continue;
    if (el.name === "workload.arrival.cv" && state.flat["workload.arrival.kind"] !== "gamma") continue;
    const isNum = el.type === "number";
    setDeep(base, el.name, isNum ? Number(raw) : raw);
  }
  base.workload.prompt = { kind: "lognormal", ...base.workload.prompt };
  base.workload.output = { kind: "lognormal", ...base.workload.output };
  // Speculative decoding and LoRA: off (their section left out) unless a method / adapters
  // are chosen; a draft model only with the method that runs one.
  const spec = base.scheduler?.speculative;
  if (spec && !spec.method) delete base.scheduler.speculative;
  else if (spec && spec.method !== "draft_model") delete spec.draft_model;
  const lora = base.workload.lora;
  if (!lora || !lora.adapters) {
    delete base.workload.lora;
    if (base.scheduler) delete base.scheduler.max_loras;
  }
  if (trace) base.workload = { trace: traceSpec(), ...(base.workload.lora ? { lora: base.workload.lora } : {}) };
  base.name = `web: ${state.preset}`;
  const hf = hfConfig(state);
  if (hf !== null) base.model = { hf_config: hf };
  const t = topology.value();
  if (t !== undefined) base.topology = t;
  const events = topology.events();
  if (events.length) base.events = events;
  return state.policies.map((policy) => {
    const s = structuredClone(base);
    s.scheduler = { ...(s.scheduler || {}), policy };
    const prefill = state.flat[PREFILL_REPLICAS];
    if (splits(policy) && prefill !== "" && prefill !== undefined) {
      s.deployment = { ...(s.deployment || {}), prefill_replicas: Number(prefill) };
    }
    return { label: policy, scenario: s };
  });
}

// ---------------------------------------------------------------------------------------
// URL hash: the whole experiment, readable (`#model=llama-3-8b&deployment.tp=2&…`).
function toHash(state) {
  const p = new URLSearchParams();
  p.set("preset", state.preset);
  p.set("policies", state.policies.join(","));
  for (const [k, v] of Object.entries(state.flat)) if (String(v) !== String(defaults[k] ?? "")) p.set(k, v);
  if (state.hfConfig) {
    let text = state.hfConfig;
    try { text = JSON.stringify(JSON.parse(text)); } catch { /* kept as typed: the error shows */ }
    p.set("hf_config", text);
  }
  const t = topology.toHash();
  if (t) {
    p.set("topology", t.topology);
    if (t.down) p.set("links_down", t.down);
  }
  return "#" + p.toString();
}

const HASH_KEYS = new Set(["preset", "policies", "topology", "links_down", "hf_config"]);

async function fromHash(hash) {
  const p = new URLSearchParams(hash.replace(/^#/, ""));
  const preset = PRESETS[p.get("preset")] ? p.get("preset") : DEFAULT_PRESET;
  const flat = { ...defaults };
  for (const [k, v] of p) if (!HASH_KEYS.has(k)) flat[k] = v;
  const policies = p.has("policies") ? p.get("policies").split(",").filter(Boolean) : DEFAULT_POLICIES;
  writeForm(flat, policies, preset);
  $("#hf-config").value = p.get("hf_config") ?? "";
  updateHfNote();
  await topology.load(p.get("topology"), p.get("links_down"));
  updateDisagg();
}

// ---------------------------------------------------------------------------------------
// Errors next to the field they name: the longest `data-for` that is a prefix of the path.
function clearErrors() {
  // The route view's error belongs to its route query (the topology view sets and clears it),
  // not to a run: a run starting after an edit must not wipe it.
  $$(".field-error").filter((el) => el.dataset.role !== "route-error").forEach((el) => (el.textContent = ""));
  $$(".invalid").forEach((el) => el.classList.remove("invalid"));
}

function showError(err) {
  const field = err.field ?? "";
  const slots = $$(".field-error").filter((el) => {
    const f = el.dataset.for;
    return f !== "" && (field === f || field.startsWith(f + ".") || field.startsWith(f + "["));
  });
  slots.sort((a, b) => b.dataset.for.length - a.dataset.for.length);
  let slot = slots[0] || $("#general-error");
  if (/^(topology|events)\b/.test(field)) slot = topology.errorSlot(field) || slot;
  const line = `${err.name}: ${err.message}`;
  if (!slot.textContent.includes(line)) slot.textContent += (slot.textContent ? "\n" : "") + line;
  const input = $$("[name]", form).find((el) => el.name === field) || (slot !== $("#general-error") && form.contains(slot) && $(`[name="${slot.dataset.for}"]`));
  if (input) input.classList.add("invalid");
  if (/^model\.hf_config\b/.test(field)) $("#hf-config").classList.add("invalid");
}

// ---------------------------------------------------------------------------------------
// Runs: the latest request wins; a run in flight when a newer one starts is abandoned.
let runSeq = 0;
let running = false;
let queued = false;
const charts = (window.o1simCharts = new Charts({
  ttft: $("#cdf-ttft"), tpot: $("#cdf-tpot"), kv: $("#ts-kv"), queue: $("#ts-queue"),
  heatmap: $("#heatmap"), policySelect: $("#ts-policy"),
}));

// `started` names the run whose results will be on screen; "pending" while a change waits for
// its run (debounced or queued behind the one in flight), so `runs === started` means the page
// shows every change made so far.
const markPending = () => { document.body.dataset.started = "pending"; };
// Nothing ran (the form itself is wrong): the results on screen are the last ones there are.
const settled = () => { document.body.dataset.started = document.body.dataset.runs || "0"; };

async function run() {
  if (running) { queued = true; markPending(); return; }
  running = true;
  const seq = ++runSeq;
  const state = readForm();
  history.replaceState(null, "", toHash(state));
  clearErrors();
  let list;
  try {
    list = state.policies.length ? scenarios(state) : [];
  } catch (e) {
    showError(e);
    $("#results").classList.add("stale");
    statusEl.textContent = "failed";
    running = false;
    settled();
    if (queued) { queued = false; run(); }
    return;
  }
  // A trace's text is shown by its size, not in full.
  const shown = (k, v) => (k === "text" && typeof v === "string" && v.length > 2000 ? `…(${v.length.toLocaleString("en")} characters)` : v);
  $("#scenario-json").textContent = list.length ? JSON.stringify(list[0].scenario, shown, 2) : "";
  if (!list.length) {
    showError({ name: "ConfigError", message: "choose at least one policy", field: "scheduler.policy" });
    running = false;
    settled();
    return;
  }
  // The run whose results are on screen once `runs` catches up with it (tests wait for that
  // state: a run queued behind another must not be read from the one before).
  document.body.dataset.started = String(seq);
  statusEl.textContent = "running…";
  const t0 = performance.now();
  try {
    const reply = await ask("runAll", list);
    const wall = performance.now() - t0;
    const results = reply.result;
    const coreMs = results.reduce((a, r) => a + (r.ms || 0), 0);
    timings.runs.push({ wallMs: wall, coreMs });
    if (timings.firstRunMs === null) timings.firstRunMs = wall;
    for (const r of results) if (!r.ok) showError(r.error);
    const n = results.filter((r) => r.ok).length;
    // Nothing ran: keep the last results on screen, dimmed, next to the errors.
    $("#results").classList.toggle("stale", n === 0);
    if (n > 0) {
      renderSummary(results);
      renderFeatures(results);
      charts.render(results.filter((r) => r.ok));
      steps.setRuns(list.filter((_, i) => results[i].ok));
      topology.showResult(results.find((r) => r.ok)?.links);
    }
    statusEl.textContent = `${n}/${results.length} policies simulated in ${coreMs.toFixed(1)} ms (core, WASM) · ${wall.toFixed(1)} ms end to end`;
    $("#run-info").textContent = trace?.info
      ? `seed ${state.flat.seed}, ${trace.info.requests} requests from ${trace.name} (${trace.info.format})`
      : `seed ${state.flat.seed}, ${state.flat["workload.num_requests"]} requests`;
    document.body.dataset.runs = String(seq);
  } catch (e) {
    showError(e);
    statusEl.textContent = "failed";
  } finally {
    running = false;
    if (queued) { queued = false; run(); }
  }
}

const fmt = (v, d = 1) => (v === null || v === undefined || Number.isNaN(v) ? "—" : Number(v).toFixed(d));
// The summary table's columns: the core's metric table's rows shown on the page (set at start-up).
let SUMMARY_COLUMNS = [];

function renderSummaryHead() {
  const tr = $("#summary thead tr");
  tr.textContent = "";
  for (const [text, title] of [["policy", ""], ...SUMMARY_COLUMNS.map((c) => [c.heading, c.doc])]) {
    const th = document.createElement("th");
    th.textContent = text;
    if (title) th.title = title;
    tr.append(th);
  }
}

function renderSummary(results) {
  const body = $("#summary tbody");
  body.textContent = "";
  for (const r of results) {
    const tr = document.createElement("tr");
    tr.dataset.policy = r.label;
    if (!r.ok) {
      tr.innerHTML = `<td>${r.label}</td><td class="error" colspan="${SUMMARY_COLUMNS.length}"></td>`;
      tr.lastChild.textContent = `${r.error.name}: ${r.error.message}`;
      body.append(tr);
      continue;
    }
    const s = r.summary;
    const name = document.createElement("td");
    name.textContent = r.label;
    const kv = s.topology?.kv_transfers;
    if (kv) {
      // disagg: how many KV caches crossed the fabric, and what a move took.
      const small = document.createElement("small");
      small.className = "kv";
      small.textContent = `${kv} KV moves, ${fmt(s.topology.kv_transfer_ms?.mean, 2)} ms mean`;
      name.append(small);
    }
    tr.append(name);
    for (const c of SUMMARY_COLUMNS) {
      const td = document.createElement("td");
      const value = metricValue(s, c.path);
      td.dataset.key = c.path;
      if (value !== null) td.dataset.value = String(value);
      td.textContent = formatMetric(c, value);
      tr.append(td);
    }
    body.append(tr);
  }
}

/** Speculative decoding's and LoRA's counters, one row per policy that ran with either. */
function renderFeatures(results) {
  const table = $("#features");
  const body = $("tbody", table);
  body.textContent = "";
  for (const r of results) {
    const sp = r.ok && r.summary.speculative;
    const lo = r.ok && r.summary.lora;
    if (!sp && !lo) continue;
    const tr = document.createElement("tr");
    tr.dataset.policy = r.label;
    const cells = [
      r.label,
      sp ? `acceptance ${fmt(sp.acceptance_rate, 3)} · ${fmt(sp.tokens_per_verify, 2)} tokens per verify · ` +
        `${sp.accepted_tokens.toLocaleString("en")} of ${sp.draft_tokens.toLocaleString("en")} drafts accepted` : "—",
      lo ? `${lo.slot_waits.toLocaleString("en")} requests waited for a slot · ${lo.adapter_loads.toLocaleString("en")} ` +
        `adapter loads (${lo.adapter_loads_from_disk.toLocaleString("en")} from disk, ${fmt(lo.load_ms, 1)} ms)` : "—",
    ];
    for (const [i, text] of cells.entries()) {
      const td = document.createElement("td");
      td.textContent = text;
      if (i === 1 && sp) td.dataset.acceptance = String(sp.acceptance_rate);
      if (i === 2 && lo) td.dataset.slotWaits = String(lo.slot_waits);
      tr.append(td);
    }
    body.append(tr);
  }
  table.hidden = body.children.length === 0;
}

// ---------------------------------------------------------------------------------------
const steps = (window.o1simSteps = new StepsPanel({ root: $("#steps"), ask }));

const topology = new TopologyPanel({
  select: $("#topology-preset"),
  root: $("#topology-body"),
  expand: async (name) => (await ask("topology", name)).result,
  routes: async (t, src, dst, options) => (await ask("routes", t, src, dst, options)).result,
  onChange: () => { updateDisagg(); schedule(); },
});

let debounce = null;
function schedule() {
  if (!$("#live").checked) return;
  markPending();
  clearTimeout(debounce);
  debounce = setTimeout(run, 120);
}

async function main() {
  startWorker();
  const t0 = performance.now();
  const wasmUrl = new URL("./pkg/o1sim.wasm", import.meta.url).href;
  const { result } = await ask("init", wasmUrl);
  timings.initMs = performance.now() - t0;
  catalog = result.presets;
  // The core's registry: each policy's label, summary and chart colour (the dashboard's too).
  POLICY_INFO = catalog.policy_info;
  setPolicyColors(Object.fromEntries(POLICY_INFO.map((p) => [p.name, p.color])));
  setChartStyle(catalog.chart_style);
  SUMMARY_COLUMNS = shownMetrics(catalog.summary_metrics, "page");
  renderSummaryHead();
  DEFAULT_POLICIES = POLICY_INFO.filter((p) => !p.needs_topology).map((p) => p.name);
  defaults = flatten(result.defaultScenario);
  delete defaults.name;
  delete defaults["scheduler.policy"];
  defaults[PREFILL_REPLICAS] = 1; // disagg's split when the form leaves it: one prefill replica

  const opts = (sel, names) => { sel.innerHTML = names.map((n) => `<option>${n}</option>`).join(""); };
  // Models: the preset's name, its size, and its Hugging Face ids on hover.
  const size = (p) => (p >= 1e9 ? `${(p / 1e9).toFixed(p >= 1e11 ? 0 : 1)}B` : `${(p / 1e6).toFixed(0)}M`);
  $("[name=model]").innerHTML = catalog.models
    .map((m) => {
      const active = m.active_params < m.params ? `, ${size(m.active_params)} active` : "";
      return `<option value="${m.name}" title="${(m.hf_ids || []).join(", ")}">${m.name} (${size(m.params)}${active})</option>`;
    })
    .join("");
  opts($("[name=gpu]"), catalog.gpus.map((g) => g.name));
  opts($("[name='deployment.router']"), catalog.routers);
  opts($("[name='workload.arrival.kind']"), catalog.arrival_kinds);
  $("[name='scheduler.speculative.method']").innerHTML = `<option value="">off</option>` +
    (catalog.speculative_methods || []).map((m) => `<option>${m.name}</option>`).join("");
  opts($("[name='scheduler.speculative.draft_model']"), catalog.models.map((m) => m.name));
  defaults["scheduler.speculative.draft_model"] = "llama-3.2-1b";
  opts($("#preset"), Object.keys(PRESETS));
  $("#policies").innerHTML = POLICY_INFO
    .map((p) => `<label title="${p.label}: ${p.summary}">` +
      `<input type="checkbox" value="${p.name}"> <span class="swatch" style="background:${p.color}"></span>${p.name}</label>`)
    .join("");
  topology.init(catalog, result.features);
  // The Model check panel: outside the form, so neither the experiment's runs nor its URL
  // hash see its settings; it starts its own Worker on the first Check.
  if (result.features.check) window.o1simCheck = new CheckPanel({ root: $("#check"), policies: catalog.policies, wasmUrl,
                                                                defaultToml: result.defaultCheckScenario });
  else $("#check").hidden = true;
  // The Capacity & plan panel searches the experiment's scenario (its first policy's).
  if (result.features.capacity) {
    window.o1simCapacity = new CapacityPanel({ root: $("#capacity"), wasmUrl, current: () => {
      const state = readForm();
      return state.policies.length ? scenarios(state)[0].scenario : null;
    } });
  } else $("#capacity").hidden = true;

  if (location.hash.length > 1) await fromHash(location.hash);
  else await applyPreset(DEFAULT_PRESET);

  $("#preset").addEventListener("change", async (e) => { await applyPreset(e.target.value); schedule(); });
  form.addEventListener("input", (e) => {
    if (e.target.id === "preset" || e.target.id === "live" || e.target.id === "topology-preset") return;
    if (e.target.id.startsWith("trace-")) return; // the trace's own handlers re-read it first
    form.classList.toggle("gamma", $("[name='workload.arrival.kind']").value === "gamma");
    form.classList.toggle("draft", $("[name='scheduler.speculative.method']").value === "draft_model");
    updateDisagg();
    schedule();
  });
  form.addEventListener("submit", (e) => { e.preventDefault(); run(); });
  const formats = catalog.trace_formats || ["auto"];
  $("#trace-format").innerHTML = formats.map((f) => `<option>${f}</option>`).join("");
  $("#trace-file").addEventListener("change", async (e) => {
    const file = e.target.files[0];
    if (!file) return;
    try {
      await loadTrace(file);
      schedule();
    } catch (err) {
      if (!trace) showError(err);
    }
  });
  for (const id of ["#trace-format", "#trace-rate-scale"]) {
    $(id).addEventListener("change", async () => {
      if (!trace) return;
      try { await describeTrace(); schedule(); } catch { /* shown next to the field */ }
    });
  }
  $("#trace-clear").addEventListener("click", () => { clearTrace(); schedule(); });
  $("#hf-config").addEventListener("input", updateHfNote);
  $("#hf-config-file").addEventListener("change", async (e) => {
    const file = e.target.files?.[0];
    if (!file) return;
    $("#hf-config").value = await file.text();
    e.target.value = "";
    updateHfNote();
    schedule();
  });
  updateHfNote();
  $("#share").addEventListener("click", () => navigator.clipboard?.writeText(location.href));
  window.addEventListener("hashchange", async () => { await fromHash(location.hash); run(); });
  $("#run").disabled = false;
  statusEl.textContent = `core loaded in ${timings.initMs.toFixed(1)} ms`;
  await run();
  timings.navToReadyMs = performance.now();
  document.body.dataset.ready = "1";
}

main().catch((e) => {
  statusEl.textContent = `failed to start: ${e.message}`;
  $("#general-error").textContent = `${e.name || "Error"}: ${e.message}`;
});
