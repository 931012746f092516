// The page's simulation worker: owns the WASM instance so runs never block the UI thread.
// Messages in:  {id, op, args}  with op one of init | simulate | runAll | validate | check
//               | modelCheck | steps | anatomy | predictStep | routes | topology | traceInfo
//               | capacity | plan | defaultPrices
// Messages out: {id, ok: true, result, ms} or {id, ok: false, error: {name, message, field}};
//               capacity and plan also send {id, progress} while they run.
// The module's download starts with the worker, alongside o1sim.js's (not after it).
const WASM_URL = new URL("./pkg/o1sim.wasm", import.meta.url).href;
const early = { response: fetch(WASM_URL) };
early.response.catch(() => {}); // a failed early fetch is reported by init's own fetch
let o1sim = null;
const lib = import("./o1sim.js").then((m) => (o1sim = m));
const search = import("./search.js");

let ready = null;
// Recorded steps of the step timeline, by policy label: {scenario, steps}.
const recorded = new Map();

// What the page needs from one result (the full text stays here unless asked for).
function digest(text) {
  const r = JSON.parse(text);
  const q = r.requests;
  const ttft = [];
  const tpot = [];
  const e2e = [];
  // the summary's view: client-side (send to receipt, the default) or engine-side
  const engine = r.summary.latency_view === "engine";
  for (let i = 0; i < q.request_id.length; i++) {
    if (q.status[i] !== 0) continue;
    const a = engine ? q.engine_arrival_ms[i] : q.arrival_ms[i];
    const f = engine ? q.first_token_ms[i] : q.client_first_token_ms[i];
    const d = engine ? q.finish_ms[i] : q.client_finish_ms[i];
    ttft.push(f - a);
    e2e.push(d - a);
    if (q.output_tokens[i] > 1) tpot.push((d - f) / (q.output_tokens[i] - 1));
  }
  const num = (a, b) => a - b;
  return {
    summary: r.summary,
    deployment: r.deployment,
    timeseries: r.timeseries,
    cdf: { ttft: ttft.sort(num), tpot: tpot.sort(num), e2e: e2e.sort(num) },
    links: r.links || null,
    bytes: text.length,
  };
}

const ops = {
  async init(src) {
    const t0 = performance.now();
    await lib;
    // The default module: take the download already under way (once; a restart fetches).
    let from = src;
    if ((src === undefined || String(src) === WASM_URL) && early.response) {
      from = early.response.then((r) => (r.ok ? r : fetch(WASM_URL)), () => fetch(WASM_URL));
      early.response = null;
    }
    await o1sim.init(from);
    return {
      initMs: performance.now() - t0,
      features: o1sim.features(),
      presets: o1sim.presets(),
      defaultScenario: o1sim.validate(o1sim.defaultScenario(), { format: "toml" }).scenario,
      defaultCheckScenario: o1sim.features().check ? o1sim.defaultCheckScenario() : null,
    };
  },
  simulate: (scenario, opts) => o1sim.simulate(scenario, opts),
  // Run one scenario per label; each entry is a digest or an error, so one bad policy does
  // not hide the others.
  runAll(list) {
    return list.map(({ label, scenario }) => {
      const t0 = performance.now();
      try {
        const d = digest(o1sim.simulate(scenario));
        return { label, ok: true, ms: performance.now() - t0, ...d };
      } catch (e) {
        return { label, ok: false, error: { name: e.name, message: e.message, field: e.field ?? null } };
      }
    });
  },
  validate: (scenario, opts) => o1sim.validate(scenario, opts),
  traceInfo: (spec) => o1sim.traceInfo(spec),
  check: (scenario, opts) => o1sim.check(scenario, opts),
  // The page's Model check panel: a TOML configuration, with the chosen policy and injected
  // bug set on it (as the dashboard's with_overrides), model-checked.
  modelCheck(text, policy, bug, opts) {
    const sc = o1sim.validate(text, { format: "toml" }).scenario;
    sc.scheduler = { ...(sc.scheduler || {}), policy };
    if (bug) sc.scheduler.inject_bug = bug;
    return o1sim.check(sc, opts);
  },
  // The step timeline: record a policy's steps (kept here by label) and send a digest;
  // a step's anatomy is priced from the kept record.
  steps(label, scenario) {
    const steps = JSON.parse(o1sim.simulateSteps(scenario));
    recorded.set(label, { scenario, steps });
    const d = { start_ms: [], end_ms: [], replica: [], tokens: [], kind: [], replicas: 1 };
    for (const s of steps) {
      d.start_ms.push(s.start_ms);
      d.end_ms.push(s.end_ms);
      d.replica.push(s.replica);
      d.tokens.push(s.scheduled.reduce((a, e) => a + e[1], 0));
      const pre = s.shape.prefill.length;
      d.kind.push(pre === 0 ? 0 : s.shape.decode_seqs === 0 ? 1 : 2);
      d.replicas = Math.max(d.replicas, s.replica + 1);
    }
    return d;
  },
  anatomy(label, index) {
    const r = recorded.get(label);
    if (!r || !r.steps[index]) throw Object.assign(new Error(`no recorded step ${index} for ${label}`), { name: "ConfigError" });
    return o1sim.stepAnatomy(r.scenario, r.steps[index]);
  },
  predictStep: (request) => o1sim.predictStep(request),
  routes: (topology, src, dst, options) => o1sim.routes(topology, src, dst, options),
  topology: (entry) => o1sim.topology(entry),
  // The Capacity & plan panel: the searches of search.js, progress posted as they go.
  async capacity(scenario, slo, opts, progress) {
    return (await search).capacity(o1sim, scenario, slo, { ...opts, progress });
  },
  async plan(scenario, choices, slo, opts, progress) {
    return (await search).plan(o1sim, scenario, choices, slo, { ...opts, progress });
  },
  defaultPrices: () => o1sim.defaultPrices(),
};
// Ops that report progress: `{id, progress}` messages before their answer.
const PROGRESS = { capacity: 3, plan: 4 };

self.onmessage = async (ev) => {
  const { id, op, args = [] } = ev.data;
  const t0 = performance.now();
  try {
    if (op === "init") ready = ops.init(...args);
    else if (!ready) throw new Error("worker: init first");
    await ready;
    if (op in PROGRESS) args[PROGRESS[op]] = (progress) => self.postMessage({ id, progress });
    const result = op === "init" ? await ready : await ops[op](...args);
    self.postMessage({ id, ok: true, result, ms: performance.now() - t0 });
  } catch (e) {
    self.postMessage({ id, ok: false, error: { name: e.name, message: e.message, field: e.field ?? null } });
  }
};
