// The "Model check" panel: explore every order of arrivals and step completions of a small
// configuration with the real scheduler (in its own Worker, so the page and its simulations
// stay responsive), show which properties hold, and each violation's shortest counterexample
// as numbered actions, with the counterexample, its replay scenario and the PNML to download.
// Its settings are not part of the experiment (nor of the URL hash).

import { el, PanelWorker } from "./panelworker.js";

/** The bug classes `scheduler.inject_bug` accepts (Python's `o1sim.bug_names()`; a test
 *  keeps them equal). */
export const BUGS = ["leak_on_preempt", "double_admit", "no_preempt", "drop_on_requeue", "no_seat_preempt"];
const NO_BUG = "";


export class CheckPanel {
  /** `root`: the panel's element; `policies`: the core's policy names; `wasmUrl`: the module. */
  constructor({ root, policies, wasmUrl, defaultToml }) {
    this.root = root;
    // The core's starting configuration (the dashboard's check tab starts from it too).
    this.defaultToml = defaultToml;
    this.client = new PanelWorker(wasmUrl);
    this.urls = [];
    this.seq = 0;
    this.build(policies);
  }

  build(policies) {
    const $ = (s) => this.root.querySelector(s);
    this.policy = $("#check-policy");
    this.bug = $("#check-bug");
    this.text = $("#check-toml");
    this.maxStates = $("#check-max-states");
    this.button = $("#check-run");
    this.stop = $("#check-stop");
    this.error = $("#check-error");
    this.status = $("#check-status");
    this.out = $("#check-results");
    this.policy.innerHTML = "";
    for (const p of policies) this.policy.append(el("option", { value: p, textContent: p }));
    this.policy.value = policies.includes("vllm") ? "vllm" : policies[0];
    this.bug.innerHTML = "";
    this.bug.append(el("option", { value: NO_BUG, textContent: "(none: the real policy)" }));
    for (const b of BUGS) this.bug.append(el("option", { value: b, textContent: b }));
    this.text.value = this.defaultToml;
    this.button.disabled = false;
    this.button.addEventListener("click", () => this.run());
    this.stop.addEventListener("click", () => this.client.cancel());
    $("#check-reset").addEventListener("click", () => { this.text.value = this.defaultToml; });
  }

  async run() {
    const seq = ++this.seq;
    if (this.client.busy) this.client.cancel(); // a newer check replaces one in flight
    const ready = this.client.start();
    this.error.textContent = "";
    this.error.dataset.field = "";
    this.text.classList.remove("invalid");
    this.root.dataset.state = "running";
    this.button.disabled = true;
    this.stop.disabled = false;
    const t0 = performance.now();
    const tick = setInterval(() => {
      this.status.textContent = `checking… ${((performance.now() - t0) / 1000).toFixed(1)} s`;
    }, 200);
    this.status.textContent = "checking…";
    const opts = { maxStates: Number(this.maxStates.value) || undefined };
    try {
      await ready;
      const reply = await this.client.ask("modelCheck", [this.text.value, this.policy.value, this.bug.value, opts]);
      if (seq !== this.seq) return;
      this.render(reply.result, performance.now() - t0, reply.ms);
      this.root.dataset.state = "done";
    } catch (e) {
      if (seq !== this.seq) return;
      if (e.name === "Stopped") {
        this.status.textContent = "stopped";
        this.root.dataset.state = "stopped";
        return;
      }
      // The core's message starts with the field it names (as the experiment's errors).
      this.error.textContent = `${e.name || "Error"}: ${e.message}`;
      this.error.dataset.field = e.field ?? "";
      this.text.classList.add("invalid");
      this.out.classList.add("stale");
      this.status.textContent = "failed";
      this.root.dataset.state = "error";
    } finally {
      clearInterval(tick);
      if (seq === this.seq) {
        this.button.disabled = false;
        this.stop.disabled = true;
        this.root.dataset.checks = String(seq);
      }
    }
  }

  /** A download link for `text` (blob URLs of the previous result are released). */
  link(label, text, filename, mime, cls) {
    const url = URL.createObjectURL(new Blob([text], { type: mime }));
    this.urls.push(url);
    return el("a", { href: url, download: filename, textContent: label, className: `download ${cls}` });
  }

  /** `wallMs`: end to end; `workerMs`: the check in the Worker (WASM has no clock of its
   *  own, so the core reports 0 states/s there: the rate is the Worker's). */
  render(r, wallMs, workerMs) {
    for (const u of this.urls) URL.revokeObjectURL(u);
    this.urls = [];
    this.out.classList.remove("stale");
    this.out.textContent = "";
    const policy = this.policy.value;
    const bug = this.bug.value;
    this.status.textContent = `${r.states.toLocaleString("en-US")} states in ${(wallMs / 1000).toFixed(2)} s end to end`;

    const metric = (key, label, value) => {
      const v = el("span", { className: "value", textContent: value });
      v.dataset.key = key;
      return el("div", { className: "metric" }, el("span", { className: "label", textContent: label }), v);
    };
    const rate = r.states_per_s > 0 ? r.states_per_s : workerMs > 0 ? r.states / (workerMs / 1000) : 0;
    const search = r.complete ? "complete" : `stopped (${r.stopped ?? "limit"})`;
    const metrics = el("div", { className: "metrics" },
      metric("states", "States", r.states.toLocaleString("en-US")),
      metric("states_per_s", "States / s", Math.round(rate).toLocaleString("en-US")),
      metric("search", "Search", search),
      metric("violations", "Violations", String(r.violations.length)));
    metrics.querySelector("[data-key=states]").dataset.value = String(r.states);
    metrics.querySelector("[data-key=search]").dataset.value = r.complete ? "complete" : "stopped";

    const props = el("table", { className: "properties" });
    props.append(el("thead", {}, el("tr", {}, el("th", { textContent: "property" }), el("th", { textContent: "result" }))));
    const body = el("tbody");
    for (const p of r.properties) {
      const tr = el("tr", {}, el("td", { textContent: p.name }), el("td", { textContent: p.status, className: `status ${p.status}` }));
      tr.dataset.property = p.name;
      tr.dataset.status = p.status;
      body.append(tr);
    }
    props.append(body);

    const verdict = r.ok
      ? el("p", { className: "verdict ok", textContent: "All properties hold on every reachable state." })
      : r.violations.length === 0
        ? el("p", { className: "verdict", textContent: "No violation found in the states explored (the search did not finish)." })
        : null;
    this.out.append(el("div", { className: "check-top" }, metrics, props));
    if (verdict) this.out.append(verdict);

    for (const v of r.violations) {
      const box = el("div", { className: "violation" });
      box.dataset.property = v.property;
      box.dataset.length = String(v.length);
      box.append(el("p", { className: "verdict bad" },
        el("strong", { textContent: v.property }), ` violated in ${v.length} action${v.length === 1 ? "" : "s"}: ${v.message}`));
      const ol = el("ol", { className: "trace" });
      for (const a of v.trace) {
        const li = el("li", { value: a.step }, el("span", { className: "action", textContent: a.text }));
        const changes = a.changes || [];
        if (changes.length) {
          const ul = el("ul", { className: "changes" });
          for (const c of changes) ul.append(el("li", { textContent: c }));
          li.append(ul);
        }
        ol.append(li);
      }
      box.append(ol);
      if (v.reproduced !== null && v.reproduced !== undefined) {
        box.append(el("p", { className: "muted replay",
          textContent: `Replayed as a simulation: ${v.reproduced ? "reproduced" : "not reproduced"}${v.replay_note ? ` — ${v.replay_note}` : ""}` }));
      } else if (v.replay_note) {
        box.append(el("p", { className: "muted replay", textContent: v.replay_note }));
      }
      const links = el("div", { className: "links" },
        this.link("Counterexample (JSON)", JSON.stringify(v, null, 2), `counterexample-${v.property}.json`, "application/json", "cx"));
      if (v.replay_scenario) {
        links.append(this.link("Replay scenario (JSON)", JSON.stringify(v.replay_scenario, null, 2),
          `replay-${v.property}.json`, "application/json", "replay"));
      }
      box.append(links);
      this.out.append(box);
    }
    if (r.pnml) {
      const name = bug ? `${policy}-${bug}.pnml` : `${policy}.pnml`;
      this.out.append(el("div", { className: "links" }, this.link("Petri net (PNML)", r.pnml, name, "application/xml", "pnml")));
    }
  }
}
