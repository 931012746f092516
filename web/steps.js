// The page's step timeline: every scheduler step of one policy's run, one lane per replica,
// drawn on a canvas; a click on a step opens its anatomy (its kernels in launch order on a
// waterfall, and a table per operator), priced by the core in the Worker
// (`stepAnatomy`, the same model as Python's `Result.step_anatomy`).
//
// The steps are recorded on demand (a second run of the scenario, with `record_steps`),
// the first time the panel is opened after a run, and kept in the Worker; the page gets a
// digest (start, end, replica, tokens, kind) and asks for one step's anatomy by index.

import { CHART_STYLE } from "./chart_style.js";

// The kinds in the Worker's digest order (kind 0, 1, 2), coloured as the dashboard's steps.
const KIND_NAMES = ["decode", "prefill", "mixed"];
const kindColor = (i) => CHART_STYLE.stepKinds[KIND_NAMES[i]];
const STREAMS = ["cpu", "compute", "communication"];
const LANE_H = 22;

const $ = (sel, root = document) => root.querySelector(sel);

/** A stable colour per operator name. */
function opColor(name) {
  let h = 0;
  for (const c of name) h = (h * 31 + c.charCodeAt(0)) >>> 0;
  return `hsl(${h % 360} 55% 52%)`;
}

const fmt = (v, d = 1) => Number(v).toFixed(d);

export class StepsPanel {
  /** `root`: the panel's <details>; `ask(op, ...args)`: a Worker call returning `{result}`. */
  constructor({ root, ask }) {
    this.root = root;
    this.ask = ask;
    this.runs = [];
    this.digest = null; // {label, start_ms, end_ms, replica, tokens, kind, replicas}
    this.anatomy = null;
    this.seq = 0;
    root.innerHTML = `
      <summary>Scheduler steps <span class="muted">one lane per replica; click a step to see its kernels</span></summary>
      <div class="row steps-controls">
        <label>Policy <select id="steps-policy"></select></label>
        <label>From (ms) <input id="steps-from" type="number" step="any" min="0"></label>
        <label>To (ms) <input id="steps-to" type="number" step="any" min="0"></label>
        <span id="steps-info" class="muted"></span>
      </div>
      <canvas id="steps-canvas" height="80"></canvas>
      <div id="steps-legend" class="legend muted"></div>
      <div id="anatomy" class="anatomy"><p class="muted">Click a step above.</p></div>`;
    this.canvas = $("#steps-canvas", root);
    root.addEventListener("toggle", () => { if (root.open) this.load(); });
    $("#steps-policy", root).addEventListener("change", () => this.load(true));
    for (const id of ["#steps-from", "#steps-to"]) $(id, root).addEventListener("input", () => this.draw());
    this.canvas.addEventListener("click", (e) => this.click(e));
    new ResizeObserver(() => { this.draw(); this.drawAnatomy(); }).observe(root);
  }

  /** After a run: the policies that ran (`[{label, scenario}]`); reloads if open. */
  setRuns(list) {
    this.runs = list;
    // The chart style arrives with the core's presets, before the first run.
    $("#steps-legend", this.root).innerHTML = KIND_NAMES.map((k, i) => `<span style="color:${kindColor(i)}">■</span> ${k}`).join(" ");
    const sel = $("#steps-policy", this.root);
    const keep = sel.value;
    sel.innerHTML = list.map((r) => `<option>${r.label}</option>`).join("");
    if (list.some((r) => r.label === keep)) sel.value = keep;
    this.digest = null;
    this.root.dataset.steps = "";
    if (this.root.open) this.load();
  }

  async load(force = false) {
    const label = $("#steps-policy", this.root).value;
    const run = this.runs.find((r) => r.label === label);
    if (!run || (!force && this.digest?.label === label)) return;
    const seq = ++this.seq;
    $("#steps-info", this.root).textContent = "recording steps…";
    try {
      const { result } = await this.ask("steps", label, run.scenario);
      if (seq !== this.seq) return;
      this.digest = { label, ...result };
      const end = result.end_ms.length ? Math.max(...result.end_ms) : 0;
      $("#steps-from", this.root).value = "0";
      $("#steps-to", this.root).value = String(Math.ceil(end));
      $("#steps-info", this.root).textContent = `${result.start_ms.length} steps over ${fmt(end / 1000, 2)} s`;
      this.root.dataset.steps = String(result.start_ms.length);
      this.draw();
    } catch (e) {
      $("#steps-info", this.root).textContent = `${e.name}: ${e.message}`;
    }
  }

  range() {
    const from = Number($("#steps-from", this.root).value) || 0;
    const to = Number($("#steps-to", this.root).value) || from + 1;
    return [from, Math.max(to, from + 1e-3)];
  }

  draw() {
    const d = this.digest;
    const c = this.canvas;
    const w = Math.max(300, this.root.clientWidth - 8);
    const lanes = d ? d.replicas : 1;
    c.width = w;
    c.height = lanes * LANE_H + 14;
    const g = c.getContext("2d");
    g.clearRect(0, 0, c.width, c.height);
    if (!d) return;
    const [from, to] = this.range();
    const x = (t) => ((t - from) / (to - from)) * w;
    g.font = "10px sans-serif";
    for (let i = 0; i < d.start_ms.length; i++) {
      if (d.end_ms[i] < from || d.start_ms[i] > to) continue;
      const x0 = x(d.start_ms[i]);
      g.fillStyle = kindColor(d.kind[i]);
      g.fillRect(x0, d.replica[i] * LANE_H + 2, Math.max(1, x(d.end_ms[i]) - x0 - 0.5), LANE_H - 4);
    }
    if (this.selected !== undefined) {
      const i = this.selected;
      g.strokeStyle = "#000";
      g.lineWidth = 2;
      g.strokeRect(x(d.start_ms[i]), d.replica[i] * LANE_H + 1, Math.max(2, x(d.end_ms[i]) - x(d.start_ms[i])), LANE_H - 2);
    }
    g.fillStyle = "#555";
    g.fillText(`${fmt(from, 0)} ms`, 2, c.height - 2);
    const label = `${fmt(to, 0)} ms`;
    g.fillText(label, w - g.measureText(label).width - 2, c.height - 2);
  }

  /** The step under a click: in the clicked lane, the step covering the time (else the nearest). */
  stepAt(px, py) {
    const d = this.digest;
    if (!d) return -1;
    const rect = this.canvas.getBoundingClientRect();
    const lane = Math.floor(((py - rect.top) * (this.canvas.height / rect.height)) / LANE_H);
    const [from, to] = this.range();
    const t = from + ((px - rect.left) / rect.width) * (to - from);
    let best = -1;
    let dist = Infinity;
    for (let i = 0; i < d.start_ms.length; i++) {
      if (d.replica[i] !== lane) continue;
      const e = t < d.start_ms[i] ? d.start_ms[i] - t : t > d.end_ms[i] ? t - d.end_ms[i] : 0;
      if (e < dist) { dist = e; best = i; }
      if (e === 0) break;
    }
    return best;
  }

  async click(e) {
    const i = this.stepAt(e.clientX, e.clientY);
    if (i >= 0) await this.open(i);
  }

  /** Open step `i`'s anatomy. */
  async open(i) {
    const d = this.digest;
    this.selected = i;
    this.draw();
    const box = $("#anatomy", this.root);
    box.innerHTML = `<p class="muted">pricing step ${i}…</p>`;
    try {
      const { result } = await this.ask("anatomy", d.label, i);
      this.anatomy = { index: i, ...result };
      this.renderAnatomy();
    } catch (err) {
      box.innerHTML = "";
      const p = document.createElement("p");
      p.className = "field-error";
      p.textContent = `${err.name}: ${err.message}`;
      box.append(p);
    }
  }

  renderAnatomy() {
    const a = this.anatomy;
    const d = this.digest;
    const k = a.kernels;
    const i = a.index;
    const box = $("#anatomy", this.root);
    box.dataset.step = String(i);
    box.dataset.kernels = String(k.name.length);
    box.dataset.stepMs = String(a.step_ms);
    // Per operator, in order of first launch.
    const ops = new Map();
    for (let j = 0; j < k.name.length; j++) {
      const o = ops.get(k.name[j]) || { n: 0, us: 0, occ: 0, sources: new Set(), stream: k.stream[j] };
      o.n += 1;
      o.us += k.end_us[j] - k.start_us[j];
      o.occ += k.sm_occupancy[j];
      o.sources.add(k.source[j]);
      ops.set(k.name[j], o);
    }
    const total = a.step_ms * 1000;
    const rows = [...ops].map(([name, o]) => `<tr data-op="${name}"><td><span style="color:${opColor(name)}">■</span> ${name}</td>
        <td>${o.stream}</td><td>${o.n}</td><td>${fmt(o.us, 1)}</td><td>${fmt((100 * o.us) / total, 1)}%</td>
        <td>${[...o.sources].join(", ")}</td><td>${fmt((100 * o.occ) / o.n, 0)}%</td></tr>`).join("");
    box.innerHTML = `
      <h3>Step ${i} <span class="muted">replica ${d.replica[i]}, ${KIND_NAMES[d.kind[i]]}, ${d.tokens[i]} tokens,
        at ${fmt(d.start_ms[i], 3)} ms: ${k.name.length} kernels, ${fmt(a.step_ms, 3)} ms
        (${a.graph ? "one CUDA-graph replay" : "eager launches"}; the run charged ${fmt(a.recorded_ms, 3)} ms)</span></h3>
      <canvas id="anatomy-canvas" height="${STREAMS.length * LANE_H + 14}"></canvas>
      <table id="anatomy-table"><thead><tr><th>operator</th><th>stream</th><th>kernels</th><th>µs</th>
        <th>of step</th><th>time source</th><th>SM occupancy</th></tr></thead><tbody>${rows}</tbody></table>`;
    this.drawAnatomy();
  }

  drawAnatomy() {
    const a = this.anatomy;
    const c = $("#anatomy-canvas", this.root);
    if (!a || !c) return;
    const k = a.kernels;
    const w = Math.max(300, this.root.clientWidth - 8);
    c.width = w;
    const g = c.getContext("2d");
    g.clearRect(0, 0, c.width, c.height);
    const total = Math.max(1e-9, a.step_ms * 1000);
    g.font = "10px sans-serif";
    const labelW = 90;
    STREAMS.forEach((s, lane) => {
      g.fillStyle = "#555";
      g.fillText(s, 2, lane * LANE_H + 14);
    });
    const x = (us) => labelW + (us / total) * (w - labelW);
    for (let j = 0; j < k.name.length; j++) {
      const lane = STREAMS.indexOf(k.stream[j]);
      g.fillStyle = opColor(k.name[j]);
      const x0 = x(k.start_us[j]);
      g.fillRect(x0, lane * LANE_H + 3, Math.max(0.5, x(k.end_us[j]) - x0), LANE_H - 6);
    }
    g.fillStyle = "#555";
    const end = `${fmt(total, 0)} µs`;
    g.fillText("0", labelW, c.height - 2);
    g.fillText(end, w - g.measureText(end).width - 2, c.height - 2);
  }
}
