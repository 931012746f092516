// The "Capacity & plan" panel: the capacity of the experiment's deployment under an SLO and
// the cheapest configuration meeting it at a load, searched in a Worker of their own (so the
// experiment's runs stay live, and Stop ends a search) by search.js, the same steps as
// Python's o1sim.capacity and o1sim.plan.

import { el, PanelWorker } from "./panelworker.js";

const fmt = (v, d = 2) => (v === null || v === undefined || Number.isNaN(v) ? "—" : Number(v).toFixed(d));

export class CapacityPanel {
  /** `root`: the panel; `current()`: the experiment's scenario for its first policy (or
   *  null); `rate()`: its arrival rate; `wasmUrl`: the module. */
  constructor({ root, current, wasmUrl }) {
    this.root = root;
    this.current = current;
    this.client = new PanelWorker(wasmUrl);
    this.seq = 0;
    const $ = (s) => root.querySelector(s);
    this.$ = $;
    $("#cap-run").disabled = false;
    $("#plan-run").disabled = false;
    $("#cap-run").addEventListener("click", () => this.capacity());
    $("#plan-run").addEventListener("click", () => this.plan());
    $("#cap-stop").addEventListener("click", () => this.client.cancel());
  }

  /** The SLO from the inputs (0 leaves a bound out). */
  slo() {
    const v = (id) => Number(this.$(id).value) || 0;
    const slo = {};
    if (v("#cap-ttft") > 0) slo.ttft_p99_ms = v("#cap-ttft");
    if (v("#cap-tpot") > 0) slo.tpot_p99_ms = v("#cap-tpot");
    if (v("#cap-goodput") > 0) slo.goodput = v("#cap-goodput");
    return slo;
  }

  async start(kind) {
    const seq = ++this.seq;
    if (this.client.busy) this.client.cancel(); // a newer search replaces one in flight
    const ready = this.client.start();
    this.$("#cap-stop").disabled = false;
    this.root.dataset.state = `${kind}-running`;
    await ready;
    return seq;
  }

  finish(seq) {
    if (seq !== this.seq) return;
    this.$("#cap-stop").disabled = true;
  }

  fail(slot, status, e) {
    if (e.name === "Stopped") { status.textContent = "stopped"; this.root.dataset.state = "stopped"; return; }
    slot.textContent = `${e.name || "Error"}: ${e.message}`;
    slot.dataset.field = e.field ?? "";
    status.textContent = "failed";
    this.root.dataset.state = "error";
  }

  async capacity() {
    const slot = this.$("#cap-error");
    const status = this.$("#cap-status");
    const out = this.$("#cap-result");
    slot.textContent = "";
    const scenario = this.current();
    if (!scenario) { slot.textContent = "ConfigError: the experiment has no scenario to search (choose a policy)"; return; }
    const slo = this.slo();
    if (!Object.keys(slo).length) { slot.textContent = "ConfigError: slo: give at least one bound"; return; }
    const t0 = performance.now();
    const seq = await this.start("capacity");
    status.textContent = "searching…";
    try {
      const opts = { seeds: Number(this.$("#cap-seeds").value) || 3, tolerance: (Number(this.$("#cap-tol").value) || 2) / 100 };
      const reply = await this.client.ask("capacity", [scenario, slo, opts], (p) => {
        status.textContent = `round ${p.round}: ${p.rates.map((r) => r.toPrecision(4)).join(", ")} req/s · ${p.runs} runs`;
      });
      if (seq !== this.seq) return;
      this.renderCapacity(out, reply.result, slo);
      status.textContent = `${reply.result.points.length} runs in ${((performance.now() - t0) / 1000).toFixed(2)} s`;
      this.root.dataset.state = "capacity-done";
      this.root.dataset.capacity = reply.result.rate === null ? "none" : String(reply.result.rate);
    } catch (e) {
      if (seq === this.seq) this.fail(slot, status, e);
    } finally {
      this.finish(seq);
    }
  }

  renderCapacity(out, c, slo) {
    out.textContent = "";
    const head = c.rate === null
      ? el("p", { className: "answer", textContent: `No sustainable rate: ${c.message}` })
      : el("p", { className: "answer" }, el("strong", { textContent: `${fmt(c.rate)} req/s` }), ` — ${c.message}`);
    out.append(head);
    const keys = Object.keys(slo).map((k) => (k === "goodput" ? "slo_attainment" : k));
    const table = el("table", {}, el("thead", {}, el("tr", {}, ...["rate (req/s)", "meets (all seeds)", ...keys.map((k) => `${k} (mean)`)].map((h) => el("th", { textContent: h })))));
    const body = el("tbody");
    for (const r of c.rates) {
      const runs = c.points.filter((p) => p.rate === r.rate);
      const mean = (k) => { const v = runs.map((p) => p.metrics[k]).filter((x) => typeof x === "number"); return v.length ? v.reduce((a, b) => a + b, 0) / v.length : null; };
      body.append(el("tr", { className: r.meets ? "meets" : "" }, el("td", { textContent: fmt(r.rate, 3) }),
        el("td", { textContent: r.meets ? "yes" : "no" }), ...keys.map((k) => el("td", { textContent: fmt(mean(k), 1) }))));
    }
    table.append(body);
    out.append(table);
  }

  async plan() {
    const slot = this.$("#plan-error");
    const status = this.$("#plan-status");
    const out = this.$("#plan-result");
    slot.textContent = "";
    const scenario = this.current();
    if (!scenario) { slot.textContent = "ConfigError: the experiment has no scenario to plan (choose a policy)"; return; }
    const list = (id, num) => this.$(id).value.split(",").map((x) => x.trim()).filter(Boolean).map((x) => (num ? Number(x) : x));
    const choices = { gpu: list("#plan-gpus"), "deployment.tp": list("#plan-tp", true), "deployment.replicas": list("#plan-replicas", true) };
    const slo = this.slo();
    if (!Object.keys(slo).length) { slot.textContent = "ConfigError: slo: give at least one bound"; return; }
    const load = Number(this.$("#plan-load").value) || scenario.workload?.arrival?.rate;
    const t0 = performance.now();
    const seq = await this.start("plan");
    status.textContent = "planning…";
    try {
      const opts = { load, seeds: Number(this.$("#plan-seeds").value) || 1 };
      const reply = await this.client.ask("plan", [scenario, choices, slo, opts], (p) => { status.textContent = `${p.done}/${p.total} runs`; });
      if (seq !== this.seq) return;
      const prices = (await this.client.ask("defaultPrices", [])).result;
      this.$("#plan-prices").textContent = "Prices per GPU-hour: " + choices.gpu.filter((g) => prices[g])
        .map((g) => `${g} $${prices[g].usd_per_hour.toFixed(2)} (${prices[g].source})`).join("; ");
      this.renderPlan(out, reply.result, Object.keys(choices));
      status.textContent = `${reply.result.configs.length} configurations in ${((performance.now() - t0) / 1000).toFixed(2)} s`;
      this.root.dataset.state = "plan-done";
      const best = reply.result.cheapest;
      this.root.dataset.cheapest = best === null ? "none" : String(reply.result.configs[best].usd_per_hour);
    } catch (e) {
      if (seq === this.seq) this.fail(slot, status, e);
    } finally {
      this.finish(seq);
    }
  }

  renderPlan(out, p, keys) {
    out.textContent = "";
    const n = p.configs.filter((c) => c.feasible).length;
    const best = p.cheapest === null ? null : p.configs[p.cheapest];
    out.append(best === null
      ? el("p", { className: "answer", textContent: `No configuration meets the SLO and sustains this load (0 of ${p.configs.length}).` })
      : el("p", { className: "answer" }, el("strong", { textContent: `$${fmt(best.usd_per_hour)}/hour` }),
        ` — cheapest: ${keys.map((k) => `${k} ${best.params[k]}`).join(" · ")}; $${fmt(best.usd_per_million_tokens, 3)} per million tokens; ${n} of ${p.configs.length} configurations meet the SLO and sustain the load`));
    const cols = [...keys, "GPUs", "$/hour", "$/M tokens", p.latency, "req/s", "goodput req/s", "sustains", "feasible", "Pareto"];
    const table = el("table", {}, el("thead", {}, el("tr", {}, ...cols.map((h) => el("th", { textContent: h })))));
    const body = el("tbody");
    const order = p.configs.map((c, i) => i).sort((a, b) => (p.configs[b].feasible - p.configs[a].feasible) || (p.configs[a].usd_per_hour - p.configs[b].usd_per_hour));
    for (const i of order) {
      const c = p.configs[i];
      const tr = el("tr", { className: i === p.cheapest ? "cheapest" : c.feasible ? "meets" : "", title: c.why || "" },
        ...keys.map((k) => el("td", { textContent: String(c.params[k]) })), el("td", { textContent: fmt(c.gpus, 1) }),
        el("td", { textContent: fmt(c.usd_per_hour) }), el("td", { textContent: fmt(c.usd_per_million_tokens, 3) }),
        el("td", { textContent: fmt(c[p.latency], 0) }), el("td", { textContent: fmt(c.throughput_rps, 2) }),
        el("td", { textContent: fmt(c.goodput_rps, 2) }), el("td", { textContent: c.sustains ? "yes" : "no" }),
        el("td", { textContent: c.feasible ? "yes" : "no" }),
        el("td", { textContent: c.pareto ? "●" : "" }));
      body.append(tr);
    }
    table.append(body);
    out.append(table);
  }
}
