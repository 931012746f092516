// The capacity search and the plan, run one scenario at a time (in a Worker) exactly as
// Python's `o1sim.capacity` and `o1sim.plan` run them: the core judges each run against the
// SLO (`sloEval`), says which rates to try next (`capacityNext`) and prices the plans
// (`planEval`); this file only builds the scenarios and runs them. With one run at a time
// the search tries the rates Python tries with one worker, so both give the same answer.

/** The field the capacity search varies. */
export const RATE_KEY = "workload.arrival.rate";

/** A ConfigError as the core throws them (`name`, `message` with the field, `field`). */
function configError(field, message) {
  return Object.assign(new Error(field ? `${field}: ${message}` : message), { name: "ConfigError", field });
}

const clone = (x) => JSON.parse(JSON.stringify(x));

/** Set `obj.a.b.c = value` from `"a.b.c"`, creating tables on the way (Python's `with_overrides`). */
export function setPath(obj, dotted, value) {
  const parts = dotted.split(".");
  let node = obj;
  for (const p of parts.slice(0, -1)) {
    if (node[p] === undefined) node[p] = {};
    if (typeof node[p] !== "object" || node[p] === null || Array.isArray(node[p])) {
      throw configError(dotted, `cannot set '${parts.at(-1)}' inside a ${typeof node[p]}`);
    }
    node = node[p];
  }
  node[parts.at(-1)] = value;
}

/** `n` seeds from the scenario's own (Python's `seeds=n`), or a list as given. */
export function seedList(scenario, seeds = 3) {
  if (Array.isArray(seeds)) return seeds;
  const base = Number.isInteger(scenario.seed) ? scenario.seed : 0;
  return Array.from({ length: seeds }, (_, k) => base + k);
}

/** A planned configuration must serve at least 1 − this share of the offered requests within
 *  the per-request SLO on every seed (Python's `o1sim.planning.SUSTAIN_TOLERANCE`). */
export const SUSTAIN_TOLERANCE = 0.02;

/** The scenario ready for the SLO: when `goodput` is bounded and the scenario has no `slo`
 *  table, the SLO's latency bounds become the per-request thresholds (as in Python); with
 *  `fill` (the plan, which counts the requests served) whenever the SLO bounds a latency. */
function prepare(o1sim, scenario, slo, fill = false) {
  const spec = o1sim.sloSpec(slo);
  const sc = clone(scenario);
  const t = Object.fromEntries(Object.entries(spec.per_request).filter(([, v]) => v !== null && v !== undefined));
  if (spec.needs_per_request && !sc.slo) {
    if (!Object.keys(t).length) {
      throw configError("slo.goodput", "counts requests meeting per-request thresholds: bound a TTFT, TPOT or E2E "
        + "latency in the SLO, or give the scenario a [slo] table");
    }
    sc.slo = t;
  } else if (fill && !sc.slo && Object.keys(t).length) {
    sc.slo = t;
  }
  return sc;
}

/** The share of the offered requests a run served: within the per-request SLO, or finished. */
function served(metrics) {
  if (typeof metrics.slo_attainment === "number") return metrics.slo_attainment;
  return metrics.num_requests ? metrics.finished / metrics.num_requests : null;
}

/** One run judged: `{meets, misses, metrics}`; a run the core refuses counts as a miss. */
function judge(o1sim, scenario, slo) {
  try {
    return o1sim.sloEval(slo, o1sim.runSummary(scenario));
  } catch (e) {
    if (e.name === "ConfigError") throw e;
    return { meets: false, misses: [], metrics: {}, error: `${e.name}: ${e.message}` };
  }
}

/**
 * The highest arrival rate (req/s) at which `scenario` meets `slo` on every seed (see
 * Python's `o1sim.capacity`). `progress({round, rates, runs})` after each round. Returns
 * `{status, rate, lo, hi, message, tolerance, seeds, points: [{rate, seed, meets, metrics}],
 * rates: [{rate, meets}]}`.
 */
export function capacity(o1sim, scenario, slo, { seeds = 3, tolerance = 0.02, progress } = {}) {
  const sc = prepare(o1sim, scenario, slo);
  const start = sc.workload?.arrival?.rate;
  if (typeof start !== "number") {
    throw configError(RATE_KEY, "capacity varies the arrival rate: the scenario needs a generated workload with workload.arrival.rate");
  }
  const seedsList = seedList(sc, seeds);
  const request = { start_rate: start, tolerance, parallel: 1, points: [] };
  const points = [];
  for (let round = 1; ; round++) {
    const step = o1sim.capacityNext(request);
    if (step.status !== "run") {
      const rates = request.points.map((p) => ({ ...p })).sort((a, b) => a.rate - b.rate);
      const message = step.message
        ?? `${step.rate.toPrecision(4)} req/s meets the SLO on all ${seedsList.length} seed(s); `
           + `${step.hi.toPrecision(4)} req/s does not (tolerance ${Math.round(tolerance * 100)}%)`;
      return { ...step, rate: step.rate ?? null, message, tolerance, seeds: seedsList, points, rates };
    }
    for (const rate of step.rates) {
      let all = true;
      for (const seed of seedsList) {
        const run = clone(sc);
        run.seed = seed;
        setPath(run, RATE_KEY, rate);
        const v = judge(o1sim, run, slo);
        all = all && v.meets;
        points.push({ rate, seed, meets: v.meets, metrics: v.metrics, misses: v.misses, error: v.error ?? null });
      }
      request.points.push({ rate, meets: all });
    }
    progress?.({ round, rates: step.rates, runs: points.length });
  }
}

/** Every combination of `choices` (dotted field → values), the first axis varying slowest. */
export function expand(choices) {
  let combos = [{}];
  for (const [key, values] of Object.entries(choices)) {
    if (!Array.isArray(values) || !values.length) throw configError(`choices.${key}`, "empty axis: give at least one value");
    combos = combos.flatMap((c) => values.map((v) => ({ ...c, [key]: v })));
  }
  return combos;
}

const gpuName = (g) => (typeof g === "string" ? g : g?.name ?? g?.preset ?? "custom");

function mean(values) {
  const v = values.filter((x) => typeof x === "number" && Number.isFinite(x));
  return v.length ? v.reduce((a, b) => a + b, 0) / v.length : null;
}

/**
 * Every configuration of `choices` at `load` req/s judged against `slo` and priced (see
 * Python's `o1sim.plan`). `progress({done, total})` after each run. Returns `{configs:
 * [{params, gpus, feasible, sustains, why, usd_per_hour, usd_per_million_tokens, latency, …,
 * pareto}], cheapest (index or null), latency}`. Feasible: meets the SLO and sustains the load.
 */
export function plan(o1sim, scenario, choices, slo, { load, prices = {}, latency = "e2e_p99_ms", seeds = 1, progress } = {}) {
  const sc = prepare(o1sim, scenario, slo, true);
  if (load !== undefined && load !== null) {
    if (!(typeof load === "number" && load > 0 && Number.isFinite(load))) throw configError("load", `must be a positive rate in req/s (got ${load})`);
    setPath(sc, RATE_KEY, load);
  }
  const combos = expand(choices);
  const seedsList = seedList(sc, seeds);
  const total = combos.length * seedsList.length;
  const inputs = [];
  const configs = [];
  let done = 0;
  for (const params of combos) {
    const base = clone(sc);
    for (const [k, v] of Object.entries(params)) setPath(base, k, v);
    const d = base.deployment || {};
    let gpus = (d.tp ?? 1) * (d.pp ?? 1) * (d.replicas ?? 1);
    let meets = true;
    const why = [];
    const runs = [];
    for (const seed of seedsList) {
      const v = judge(o1sim, { ...clone(base), seed }, slo);
      done += 1;
      progress?.({ done, total });
      if (v.error) { meets = false; why.push(v.error); continue; }
      meets = meets && v.meets;
      if (v.misses.length) why.push(`seed ${seed}: ${v.misses.map((m) => `${m.metric} ${m.value === null ? "n/a" : Number(m.value).toPrecision(4)} (want ${m.bound === "at_most" ? "≤" : "≥"} ${m.limit})`).join("; ")}`);
      runs.push(v.metrics);
    }
    const shares = runs.map(served).filter((x) => typeof x === "number");
    const sustains = runs.length > 0 && shares.every((x) => x >= 1 - SUSTAIN_TOLERANCE);
    if (runs.length > 0 && !sustains) {
      const lo = Math.min(...shares), hi = Math.max(...shares);
      const pc = (x) => `${(100 * x).toFixed(1)}%`;
      const span = pc(lo) === pc(hi) ? pc(lo) : `${pc(lo)}–${pc(hi)}`;
      why.unshift(`does not sustain the load: ${span} of the requests served within the per-request SLO (want ≥ ${Math.round(100 * (1 - SUSTAIN_TOLERANCE))}%)`);
    }
    const m = (k) => mean(runs.map((r) => r[k]));
    const gpuHours = m("gpu_hours");
    const duration = m("duration_s");
    if (gpuHours !== null && duration) gpus = (gpuHours * 3600) / duration;
    inputs.push({ gpu: gpuName(base.gpu), gpus, meets: meets && sustains, latency_ms: m(latency),
                  tokens_per_s: m("total_tokens_per_s"), output_tokens_per_s: m("output_tokens_per_s") });
    configs.push({ params, gpus, sustains, why: why.join("; ") || null, [latency]: m(latency), throughput_rps: m("throughput_rps"),
                   goodput_rps: m("goodput_rps"), slo_attainment: m("slo_attainment"), total_tokens_per_s: m("total_tokens_per_s") });
  }
  const priced = o1sim.planEval({ configs: inputs, prices });
  priced.rows.forEach((row, i) => Object.assign(configs[i], row));
  return { configs, cheapest: priced.cheapest, latency };
}
