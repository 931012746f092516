// The Topology panel: a preset picker (in the form), a graph view and a table of links and
// nodes. Clicking a link (in the graph or the table) selects it; its bandwidth and latency
// can be changed and it can be taken down. Picking two GPUs (two clicks on the graph, or the
// route selects) lists the RTMPv2 candidate paths between them, from the core
// (`o1sim.routes` on the topology as edited, with the links taken down: path, bottleneck
// bandwidth, latency, score, chosen, Pareto frontier, as the simulation re-routes after
// those links go down at t = 0), and highlights the chosen one (or a clicked row) on the
// graph. Taking a link down or bringing it back re-computes them.
//
// What it sends (the scenario's shapes, docs/design.md, "Topology"):
// - no edits: `topology = "<preset>"`;
// - edits: `topology = {preset, links: [edited links]}` (a link between two preset nodes
//   replaces the preset's link), in the order the links were first edited;
// - a link taken down: an event `{at_s: 0, kind: "link_down", src, dst}` in `events`.
// The preset's full table comes from the core (`o1sim.topology(name)`, in the Worker), so
// the panel draws exactly what the simulation uses. Errors the core reports for
// `topology.links[i]…` / `events[i]…` are shown under the row of the link they name.

const key = (src, dst) => `${src}|${dst}`;
const esc = (s) => String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
const natural = (a, b) => a.localeCompare(b, "en", { numeric: true });

/** Colour of a link by its utilisation in the last run: blue (idle) to red (25% or more),
 * light blue before any run. The legend (`linkLegend`) draws the same function. */
export function linkColor(u) {
  return u === undefined || u === null ? NOT_RUN : `hsl(${Math.round(210 - 210 * Math.min(1, u * 4))} 65% 50%)`;
}
const NOT_RUN = "#8aa4d6";

/** The link colour legend: the utilisation ramp and the other link styles of the graph. */
function linkLegend() {
  const stops = [0, 0.05, 0.1, 0.15, 0.2, 0.25].map((u) => `${linkColor(u)} ${(u / 0.25) * 100}%`).join(", ");
  const swatch = (cls, text) => `<span><span class="swatch ${cls}"></span>${text}</span>`;
  return `<div class="link-legend" data-role="link-legend" aria-label="link colours">
    <span>utilisation 0%</span><span class="ramp" style="background: linear-gradient(to right, ${stops})"></span><span>25% or more</span>
    ${swatch("not-run", "no run yet")} ${swatch("down", "down")} ${swatch("edited", "edited")} ${swatch("route", "route shown")}
  </div>`;
}

export class TopologyPanel {
  /**
   * `select`: the form's preset <select>; `root`: the panel's container; `expand(name)`:
   * async, the core's full table of a preset; `routes(topology, src, dst, {down})`: async,
   * the core's route candidates with links down; `onChange()`: the experiment changed.
   */
  constructor({ select, root, expand, routes, onChange }) {
    this.select = select;
    this.root = root;
    this.expand = expand;
    this.routesOf = routes;
    this.onChange = onChange;
    this.enabled = false;
    this.preset = "";
    this.base = null; // {nodes, links} of the preset, from the core
    this.edits = new Map(); // key → {src, dst, kind, bandwidth_gbps, latency_us}
    this.down = new Set(); // keys of links taken down
    this.emitted = []; // keys in the order value().links lists them
    this.emittedDown = []; // keys in the order events() lists them
    this.selected = null; // key of the selected link
    this.util = null; // key → utilisation of the last run
    this.cache = new Map();
    this.loading = Promise.resolve();
    // Route view: the two GPUs picked, the candidates between them, the one drawn.
    this.route = { src: "", dst: "", list: null, error: null, shown: -1, seq: 0 };
    this.routing = Promise.resolve();
  }

  init(catalog, features) {
    const names = catalog.topologies;
    if (!Array.isArray(names) || !features.topology) {
      this.select.disabled = true;
      this.select.innerHTML = "<option value=''>(not in this build of the core)</option>";
      return;
    }
    this.enabled = true;
    this.select.innerHTML =
      "<option value=''>none (nominal NVLink)</option>" +
      names.map((n) => `<option>${esc(n)}</option>`).join("");
    this.select.addEventListener("change", async () => {
      await this.use(this.select.value);
      this.onChange();
    });
    this.render();
  }

  /** Switch to a preset ("" = none), dropping edits. */
  async use(name, { edits = [], down = [] } = {}) {
    this.preset = name || "";
    // Names the list lacks (`3x-hgx-h200-ib`, a hand-edited URL) get an option of their own.
    if (this.preset && ![...this.select.options].some((o) => o.value === this.preset)) {
      const o = document.createElement("option");
      o.textContent = this.preset;
      this.select.append(o);
    }
    this.select.value = this.preset;
    this.edits = new Map();
    this.down = new Set();
    this.selected = null;
    this.util = null;
    this.base = null;
    this.route = { src: "", dst: "", list: null, error: null, shown: -1, seq: this.route.seq + 1 };
    if (this.preset) {
      const job = (async () => {
        if (!this.cache.has(this.preset)) this.cache.set(this.preset, await this.expand(this.preset));
        return this.cache.get(this.preset);
      })();
      this.loading = job;
      try {
        this.base = await job;
      } catch (e) {
        this.base = { nodes: [], links: [], error: e };
      }
    }
    for (const l of edits) if (l && l.src !== undefined) this.edits.set(key(l.src, l.dst), { ...l });
    for (const [s, d] of down) this.down.add(key(s, d));
    this.render();
  }

  /** The rows of the table: the preset's links with edits applied, then added links. */
  rows() {
    const out = [];
    const seen = new Set();
    for (const l of this.base?.links || []) {
      const k = key(l.src, l.dst);
      const rk = key(l.dst, l.src);
      const ek = this.edits.has(k) ? k : this.edits.has(rk) ? rk : null;
      seen.add(ek || k);
      out.push({ k: ek || k, base: l, ...l, ...(ek ? this.edits.get(ek) : {}), edited: !!ek, up: !this.down.has(k) && !this.down.has(rk) });
    }
    for (const [k, l] of this.edits) if (!seen.has(k)) out.push({ k, ...l, edited: true, added: true, up: !this.down.has(k) });
    return out;
  }

  /** The topology as edited (preset name, or `{preset, links}`), without side effects. */
  current() {
    if (!this.edits.size) return this.preset;
    return { preset: this.preset, links: [...this.edits.values()].map((l) => ({ ...l })) };
  }

  /** What goes into the scenario's `topology` field (undefined: none). */
  value() {
    if (!this.enabled || !this.preset) return undefined;
    this.emitted = [...this.edits.keys()];
    if (!this.emitted.length) return this.preset;
    return { preset: this.preset, links: this.emitted.map((k) => ({ ...this.edits.get(k) })) };
  }

  /** Scenario `events`: links taken down from the start. */
  events() {
    if (!this.enabled || !this.preset) return [];
    this.emittedDown = [...this.down];
    return this.emittedDown.map((k) => {
      const [src, dst] = k.split("|");
      return { at_s: 0, kind: "link_down", src, dst };
    });
  }

  /** For the URL hash: `{topology, down}` or null. */
  toHash() {
    if (!this.enabled || !this.preset) return null;
    const v = this.value();
    return {
      topology: typeof v === "string" ? v : JSON.stringify(v),
      down: this.down.size ? JSON.stringify([...this.down].map((k) => k.split("|"))) : null,
    };
  }

  /** Restore from the hash's `topology` (name or JSON table) and `links_down` (JSON). */
  async load(topology, down) {
    if (!this.enabled) return;
    let name = topology || "";
    let edits = [];
    if (name.startsWith("{")) {
      try {
        const v = JSON.parse(name);
        name = String(v.preset || "");
        edits = Array.isArray(v.links) ? v.links : [];
      } catch {
        name = "";
      }
    }
    let d = [];
    try { d = down ? JSON.parse(down) : []; } catch { d = []; }
    await this.use(name, { edits, down: Array.isArray(d) ? d.filter(Array.isArray) : [] });
  }

  /** The row key an error path names, if any. */
  keyOf(field) {
    let m = /^topology\.links\[(\d+)\]/.exec(field);
    if (m) return this.emitted[Number(m[1])] ?? null;
    m = /^events\[(\d+)\]/.exec(field);
    if (m) return this.emittedDown[Number(m[1])] ?? null;
    return null;
  }

  /** The error slot under the link row an error path names, created on demand. */
  errorSlot(field) {
    const k = this.keyOf(field);
    const row = k && [...this.root.querySelectorAll("tr[data-key]")].find((tr) => tr.dataset.key === k);
    if (!row) return null;
    let slot = row.nextElementSibling;
    if (!slot || !slot.classList.contains("link-error")) {
      slot = document.createElement("tr");
      slot.className = "link-error";
      slot.innerHTML = `<td colspan="6" class="field-error"></td>`;
      row.after(slot);
    }
    const td = slot.firstChild;
    td.dataset.for = field;
    const prop = /\.(bandwidth_gbps|latency_us)$/.exec(field);
    row.querySelector(prop ? `input[data-k=${prop[1]}]` : "input")?.classList.add("invalid");
    return td;
  }

  /** Per-link utilisation of a result's `links` columns (colours the graph). */
  showResult(links) {
    this.util = null;
    if (links && Array.isArray(links.src)) {
      this.util = new Map();
      links.src.forEach((s, i) => this.util.set(key(s, links.dst[i]), links.utilization[i]));
    }
    this.renderTable();
    this.renderGraph();
  }

  edit(k, field, value) {
    const row = this.rows().find((r) => r.k === k);
    if (!row) return;
    if (field === "up") {
      if (value) this.down.delete(k);
      else this.down.add(k);
    } else {
      const cur = this.edits.get(k) || { src: row.src, dst: row.dst, kind: row.kind, bandwidth_gbps: row.bandwidth_gbps, latency_us: row.latency_us };
      cur[field] = value;
      const b = row.base;
      if (b && cur.bandwidth_gbps === b.bandwidth_gbps && cur.latency_us === b.latency_us) this.edits.delete(k);
      else this.edits.set(k, cur);
    }
    this.renderGraph();
    const tr = this.root.querySelector(`tr[data-key="${CSS.escape(k)}"]`);
    if (tr) tr.classList.toggle("edited", this.edits.has(k) || this.down.has(k));
    this.onChange();
    this.refreshRoutes();
  }

  /** Put every link back as the preset has it. */
  reset() {
    this.edits.clear();
    this.down.clear();
    this.render();
    this.onChange();
    this.refreshRoutes();
  }

  /** Pick the route's endpoints (GPU ids; "" leaves one open) and fetch the candidates. */
  pickRoute(src, dst) {
    this.route = { ...this.route, src: src || "", dst: dst || "", list: null, error: null, shown: -1 };
    this.renderRoutes();
    this.renderGraph();
    this.refreshRoutes();
  }

  /** A GPU clicked on the graph: the first click picks the source, the second the destination. */
  clickGpu(id) {
    const { src, dst } = this.route;
    if (!src || (src && dst)) this.pickRoute(id, "");
    else if (id !== src) this.pickRoute(src, id);
  }

  /**
   * Ask the core for the candidates between the picked GPUs on the topology as edited, with
   * the links taken down (in the order `events()` sends them, so the chosen route is the
   * one the run takes).
   */
  refreshRoutes() {
    const { src, dst } = this.route;
    if (!this.preset || !src || !dst || !this.routesOf) return this.routing;
    const seq = ++this.route.seq;
    const down = [...this.down].map((k) => k.split("|"));
    this.routing = (async () => {
      let list = null;
      let error = null;
      try {
        list = await this.routesOf(this.current(), src, dst, { down });
      } catch (e) {
        error = e;
      }
      if (seq !== this.route.seq) return; // a newer pick or edit superseded this one
      this.route = { ...this.route, list, error, shown: list ? list.findIndex((c) => c.chosen) : -1 };
      this.renderRoutes();
      this.renderGraph();
    })();
    return this.routing;
  }

  render() {
    if (!this.enabled) {
      this.root.innerHTML = `<p class="muted">This build of the core has no topology model.</p>`;
      return;
    }
    if (!this.preset) {
      this.root.innerHTML = `<p class="muted">No topology: TP and PP traffic is priced on each GPU preset's nominal
        NVLink. Choose a fabric under <em>Topology</em> to see its links, edit them and watch P99 move.</p>`;
      return;
    }
    if (this.base?.error) {
      this.root.innerHTML = `<p class="field-error"></p>`;
      this.root.firstChild.textContent = `${this.base.error.name}: ${this.base.error.message}`;
      return;
    }
    const nodes = this.base?.nodes || [];
    this.root.innerHTML = `<div class="topo-grid">
      <div><svg data-role="graph" role="img" aria-label="topology graph"></svg>
        <p class="muted legend">Click a link to edit it. Width: bandwidth; colour: utilisation in the last run
        (first policy); dashed red: down; orange ring: edited; purple: the route shown below.</p>
        ${linkLegend()}
        <div class="routes" data-role="routes">
          <div class="row">
            <label>Route from <select data-role="route-src" aria-label="route source GPU"></select></label>
            <label>to <select data-role="route-dst" aria-label="route destination GPU"></select></label>
          </div>
          <div class="field-error" data-role="route-error"></div>
          <div data-role="route-body"></div>
        </div></div>
      <div class="topo-tables">
        <div class="topo-head"><strong>${esc(this.preset)}</strong> · ${nodes.length} nodes · ${(this.base?.links || []).length} links
          <button type="button" data-role="reset">Reset links</button></div>
        <div class="scroll"><table class="links"><thead><tr><th>link</th><th>kind</th><th>GB/s</th><th>µs</th><th>up</th><th>util</th></tr></thead>
        <tbody></tbody></table></div>
        <details><summary>Nodes (${nodes.length})</summary><div class="scroll"><table class="nodes">
          <thead><tr><th>id</th><th>kind</th><th>links</th></tr></thead><tbody>${this.nodeRows()}</tbody></table></div></details>
      </div></div>`;
    this.root.querySelector("[data-role=reset]").addEventListener("click", () => this.reset());
    const gpus = nodes.filter((n) => n.kind === "gpu").map((n) => n.id).sort(natural);
    for (const role of ["route-src", "route-dst"]) {
      const sel = this.root.querySelector(`select[data-role=${role}]`);
      sel.innerHTML = `<option value="">—</option>` + gpus.map((g) => `<option>${esc(g)}</option>`).join("");
      sel.addEventListener("change", (e) => {
        e.stopPropagation();
        const other = this.root.querySelector(`select[data-role=${role === "route-src" ? "route-dst" : "route-src"}]`).value;
        if (role === "route-src") this.pickRoute(sel.value, other);
        else this.pickRoute(other, sel.value);
      });
    }
    this.renderTable();
    this.renderGraph();
    this.renderRoutes();
  }

  /** The route selects, the error slot and the candidates table. */
  renderRoutes() {
    const box = this.root.querySelector("[data-role=routes]");
    if (!box) return;
    const { src, dst, list, error, shown } = this.route;
    box.querySelector("select[data-role=route-src]").value = src;
    box.querySelector("select[data-role=route-dst]").value = dst;
    box.querySelector("[data-role=route-error]").textContent = error ? `${error.name || "Error"}: ${error.message}` : "";
    const body = box.querySelector("[data-role=route-body]");
    if (!src || !dst || !list) {
      const hint = error ? ""
        : src && dst ? "finding routes…"
        : src ? `From ${esc(src)}: click a second GPU (or pick one above) for the RTMPv2 candidates.`
        : "Click two GPUs in the graph (or pick them above) to see the RTMPv2 candidate routes between them.";
      body.innerHTML = hint ? `<p class="muted">${hint}</p>` : "";
      return;
    }
    if (!list.length) {
      const why = this.down.size ? "the links taken down cut them apart" : "they are not connected";
      body.innerHTML = `<p class="muted" data-role="no-route">No route from ${esc(src)} to ${esc(dst)}: ${why}
        (a replica using this pair stops in the run).</p>`;
      return;
    }
    const downNote = this.down.size ? " Links taken down are avoided, as the run re-routes after they go down at t = 0." : "";
    body.innerHTML = `<div class="scroll"><table class="routes"><thead><tr><th>#</th><th>path</th><th>GB/s</th><th>µs</th>
      <th>score</th><th>chosen</th><th>frontier</th></tr></thead><tbody></tbody></table></div>
      <p class="muted">Candidates: the k shortest loop-free paths by latency; score = α·B/B<sub>min</sub> + (1−α)·D<sub>max</sub>/D;
      frontier: not beaten on both bandwidth and latency. Click a row to draw it.${downNote}</p>`;
    const tbody = body.querySelector("tbody");
    list.forEach((c, i) => {
      const tr = document.createElement("tr");
      tr.dataset.index = String(i);
      tr.dataset.chosen = c.chosen ? "1" : "0";
      tr.dataset.frontier = c.frontier ? "1" : "0";
      tr.className = [c.chosen ? "chosen" : "", i === shown ? "shown" : ""].join(" ").trim();
      tr.innerHTML = `<td>${i + 1}</td><td></td><td>${c.bandwidth_gbps}</td><td>${c.latency_us}</td>
        <td>${c.score.toFixed(3)}</td><td>${c.chosen ? "✓" : ""}</td><td>${c.frontier ? "✓" : ""}</td>`;
      tr.children[1].textContent = c.path.join(" → ");
      tr.addEventListener("click", () => {
        this.route = { ...this.route, shown: i };
        this.renderRoutes();
        this.renderGraph();
      });
      tbody.append(tr);
    });
  }

  /** Link keys (as the table's rows name them) along the route shown, and its endpoints. */
  routeLinks(rows) {
    const { src, dst, list, shown } = this.route;
    const ends = new Set([src, dst].filter(Boolean));
    const keys = new Set();
    const path = list && shown >= 0 ? list[shown]?.path : null;
    if (path) {
      const byPair = new Map();
      for (const r of rows) {
        byPair.set(key(r.src, r.dst), r.k);
        byPair.set(key(r.dst, r.src), r.k);
      }
      for (let i = 0; i + 1 < path.length; i++) {
        const k = byPair.get(key(path[i], path[i + 1]));
        if (k) keys.add(k);
      }
    }
    return { keys, ends, picking: !!src && !dst };
  }

  nodeRows() {
    const deg = new Map();
    for (const l of this.base?.links || []) for (const n of [l.src, l.dst]) deg.set(n, (deg.get(n) || 0) + 1);
    return (this.base?.nodes || [])
      .map((n) => `<tr><td>${esc(n.id)}</td><td>${esc(n.kind)}${n.gpu ? ` (${esc(n.gpu)})` : ""}</td><td>${deg.get(n.id) || 0}</td></tr>`)
      .join("");
  }

  renderTable() {
    const body = this.root.querySelector("table.links tbody");
    if (!body) return;
    body.textContent = "";
    for (const r of this.rows()) {
      const tr = document.createElement("tr");
      tr.dataset.key = r.k;
      tr.dataset.link = `${r.src}–${r.dst}`;
      tr.className = [r.k === this.selected ? "selected" : "", r.edited || !r.up ? "edited" : ""].join(" ").trim();
      const u = this.util?.get(r.k);
      tr.innerHTML = `<td></td><td>${esc(r.kind ?? "")}</td>
        <td><input type="number" step="any" min="0" data-k="bandwidth_gbps" aria-label="bandwidth GB/s"></td>
        <td><input type="number" step="any" min="0" data-k="latency_us" aria-label="latency µs"></td>
        <td><input type="checkbox" data-k="up" aria-label="link up"></td>
        <td>${u === undefined ? "—" : `${(100 * u).toFixed(1)}%`}</td>`;
      tr.firstChild.textContent = `${r.src}–${r.dst}`;
      tr.querySelector("[data-k=bandwidth_gbps]").value = r.bandwidth_gbps ?? "";
      tr.querySelector("[data-k=latency_us]").value = r.latency_us ?? "";
      tr.querySelector("[data-k=up]").checked = r.up;
      tr.addEventListener("input", (e) => {
        e.stopPropagation();
        const k = e.target.dataset.k;
        if (!k) return;
        this.edit(r.k, k, k === "up" ? e.target.checked : e.target.value === "" ? 0 : Number(e.target.value));
      });
      tr.addEventListener("click", (e) => {
        if (e.target.tagName === "INPUT") return;
        this.select_(r.k);
      });
      body.append(tr);
    }
  }

  select_(k) {
    this.selected = k;
    for (const tr of this.root.querySelectorAll("table.links tr[data-key]")) tr.classList.toggle("selected", tr.dataset.key === k);
    this.renderGraph();
    const tr = [...this.root.querySelectorAll("table.links tr[data-key]")].find((t) => t.dataset.key === k);
    if (tr) {
      tr.scrollIntoView({ block: "nearest" });
      tr.querySelector("input[data-k=bandwidth_gbps]")?.focus();
    }
  }

  // Layout in tiers: NVSwitches on top, GPUs, NICs/hosts, then network switches; within a
  // tier by id (natural order), spread evenly.
  layout(W, H) {
    const tierOf = { nvswitch: 0, gpu: 1, host: 2, nic: 2, switch: 3 };
    const tiers = [[], [], [], []];
    for (const n of this.base?.nodes || []) tiers[tierOf[n.kind] ?? 2].push(n);
    const used = tiers.map((t, i) => [t, i]).filter(([t]) => t.length);
    const pos = new Map();
    used.forEach(([t, _], row) => {
      t.sort((a, b) => natural(a.id, b.id));
      const y = used.length === 1 ? H / 2 : 26 + (row * (H - 48)) / (used.length - 1);
      t.forEach((n, i) => pos.set(n.id, [40 + ((W - 40) * (i + 0.5)) / t.length, y]));
    });
    return pos;
  }

  renderGraph() {
    const svg = this.root.querySelector("svg[data-role=graph]");
    if (!svg) return;
    const nodes = this.base?.nodes || [];
    const W = Math.max(360, 40 + 26 * Math.max(...[0, 1, 2, 3].map((t) => nodes.filter((n) => ({ nvswitch: 0, gpu: 1, host: 2, nic: 2, switch: 3 })[n.kind] === t).length)));
    const H = 230;
    svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
    const pos = this.layout(W, H);
    const rows = this.rows();
    const route = this.routeLinks(rows);
    const maxBw = Math.max(1, ...rows.map((r) => Number(r.bandwidth_gbps) || 0));
    const lines = rows.map((r) => {
      const [x1, y1] = pos.get(r.src) || [0, 0];
      const [x2, y2] = pos.get(r.dst) || [0, 0];
      const w = 1 + 4 * Math.sqrt(Math.max(0, Number(r.bandwidth_gbps) || 0) / maxBw);
      const u = this.util?.get(r.k);
      const color = linkColor(u);
      const cls = [r.up ? "" : "down", r.k === this.selected ? "selected" : "", r.edited ? "edited" : "",
        route.keys.has(r.k) ? "route" : ""].join(" ").trim();
      const title = `${r.src}–${r.dst}: ${r.bandwidth_gbps} GB/s, ${r.latency_us} µs${r.up ? "" : " (down)"}${u === undefined ? "" : `, ${(100 * u).toFixed(1)}% used`}`;
      return `<g class="link ${cls}" data-key="${esc(r.k)}"><line class="hit" x1="${x1}" y1="${y1}" x2="${x2}" y2="${y2}"></line>` +
        `<line class="wire" x1="${x1}" y1="${y1}" x2="${x2}" y2="${y2}" style="stroke:${color};stroke-width:${w.toFixed(1)}"></line><title>${esc(title)}</title></g>`;
    });
    const circles = nodes.map((n) => {
      const [x, y] = pos.get(n.id) || [0, 0];
      const bare = String(n.id).replace(/^n\d+\./, "");
      const label = n.kind === "nvswitch" ? "NVS" : n.kind === "gpu" || n.kind === "nic" ? bare.replace(/^\D+/, "") : bare;
      const end = route.ends.has(n.id) ? (route.picking ? " route-pick" : " route-end") : "";
      return `<g class="node ${esc(n.kind)}${end}" data-id="${esc(n.id)}"><circle cx="${x}" cy="${y}" r="${n.kind === "switch" ? 11 : 9}"></circle>` +
        `<text x="${x}" y="${y + 3}">${esc(label.slice(0, 5))}</text><title>${esc(n.id)} (${esc(n.kind)})</title></g>`;
    });
    // Tier names on the left, and each host's id under its GPUs.
    const tiers = [];
    const seenY = new Set();
    for (const n of nodes) {
      const [, y] = pos.get(n.id) || [0, 0];
      if (seenY.has(y)) continue;
      seenY.add(y);
      tiers.push(`<text class="tier" x="3" y="${y - 12}">${{ gpu: "GPUs", nvswitch: "NVSwitch", nic: "NICs", host: "hosts", switch: "switches" }[n.kind] || n.kind}</text>`);
    }
    const hosts = new Map();
    for (const n of nodes) {
      const m = /^(n\d+)\./.exec(n.id);
      if (m && n.kind === "gpu") (hosts.get(m[1]) || hosts.set(m[1], []).get(m[1])).push(pos.get(n.id));
    }
    for (const [h, ps] of hosts) {
      const xs = ps.map((p) => p[0]);
      const x = (Math.min(...xs) + Math.max(...xs)) / 2;
      tiers.push(`<text class="host" x="${x}" y="${ps[0][1] + 20}">${esc(h)}</text>`);
    }
    svg.innerHTML = tiers.join("") + lines.join("") + circles.join("");
    svg.querySelectorAll("g.link").forEach((el) => el.addEventListener("click", () => this.select_(el.dataset.key)));
    svg.querySelectorAll("g.node.gpu").forEach((el) => el.addEventListener("click", () => this.clickGpu(el.dataset.id)));
  }
}
