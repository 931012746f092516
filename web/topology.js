// The Topology panel: a preset picker, a table of nodes and links, and a graph view where
// clicking a link selects it for editing (bandwidth, latency, up/down).
//
// It switches itself on when the core's catalog lists topologies (the topology model,
// issue 4). Until then it explains what is missing. The shape it edits follows DESIGN.md:
// `{nodes: [{id, kind}], links: [{src, dst, kind, bandwidth_gbps, latency_us, up?}]}`;
// a preset is sent by name until edited, then as the whole (edited) object.

export class TopologyPanel {
  constructor(root, onChange) {
    this.root = root;
    this.onChange = onChange;
    this.enabled = false;
    this.presets = [];
    this.preset = null;
    this.topo = null;
    this.edited = false;
    this.selected = -1;
  }

  init(catalog, features) {
    const list = catalog.topologies;
    if (!list || !features.routes) {
      this.root.innerHTML =
        "This build of the core has no topology model yet, so the deployment runs on each GPU " +
        "preset's nominal NVLink. With it, this panel lists the nodes and links, draws the graph, " +
        "and lets you click a link to change its bandwidth or latency or take it down.";
      return;
    }
    this.enabled = true;
    this.root.classList.remove("muted");
    this.presets = Array.isArray(list) ? list : Object.entries(list).map(([name, t]) => ({ name, ...t }));
    this.root.innerHTML = `<label>Preset <select data-role="preset"></select></label>
      <svg data-role="graph" viewBox="0 0 300 220"></svg>
      <table><thead><tr><th>link</th><th>kind</th><th>GB/s</th><th>µs</th><th>up</th></tr></thead><tbody></tbody></table>`;
    const sel = this.root.querySelector("[data-role=preset]");
    sel.innerHTML = this.presets.map((p) => `<option>${p.name}</option>`).join("");
    sel.addEventListener("change", () => { this.usePreset(sel.value); this.onChange(); });
    this.usePreset(this.presets[0].name);
  }

  usePreset(name) {
    const p = this.presets.find((x) => x.name === name);
    this.preset = name;
    this.topo = structuredClone({ nodes: p.nodes || [], links: p.links || [] });
    this.edited = false;
    this.selected = -1;
    this.render();
  }

  /** What goes into the scenario's `topology` field. */
  value() {
    if (!this.enabled) return undefined;
    return this.edited ? { name: this.preset, ...this.topo } : this.preset;
  }

  dirty() {
    return this.edited;
  }

  load(v) {
    if (!this.enabled) return;
    if (typeof v === "string") return this.usePreset(v);
    if (v.name) this.usePreset(v.name);
    this.topo = { nodes: v.nodes || [], links: v.links || [] };
    this.edited = true;
    this.render();
  }

  /** The error slot for a path like `topology.links[3].bandwidth_gbps`, if shown. */
  errorSlot(field) {
    const m = /^topology\.links\[(\d+)\]/.exec(field);
    const row = m && this.root.querySelector(`tr[data-link="${m[1]}"]`);
    if (!row) return null;
    let slot = row.nextElementSibling;
    if (!slot || !slot.classList.contains("link-error")) {
      slot = document.createElement("tr");
      slot.className = "link-error";
      slot.innerHTML = `<td colspan="5" class="field-error" data-for="${field}"></td>`;
      row.after(slot);
    }
    return slot.firstChild;
  }

  edit(i, key, value) {
    this.topo.links[i][key] = value;
    this.edited = true;
    this.renderGraph();
    this.onChange();
  }

  render() {
    const body = this.root.querySelector("tbody");
    body.textContent = "";
    this.topo.links.forEach((l, i) => {
      const tr = document.createElement("tr");
      tr.dataset.link = String(i);
      tr.className = i === this.selected ? "selected" : "";
      tr.innerHTML = `<td>${l.src}–${l.dst}</td><td>${l.kind ?? ""}</td>
        <td><input type="number" step="any" data-k="bandwidth_gbps"></td>
        <td><input type="number" step="any" data-k="latency_us"></td>
        <td><input type="checkbox" data-k="up"></td>`;
      tr.querySelector("[data-k=bandwidth_gbps]").value = l.bandwidth_gbps ?? "";
      tr.querySelector("[data-k=latency_us]").value = l.latency_us ?? "";
      tr.querySelector("[data-k=up]").checked = l.up !== false;
      tr.addEventListener("input", (e) => {
        e.stopPropagation();
        const k = e.target.dataset.k;
        this.edit(i, k, k === "up" ? e.target.checked : Number(e.target.value));
      });
      body.append(tr);
    });
    this.renderGraph();
  }

  // Nodes on a circle (switches in the middle), links as lines; click a line to select it.
  renderGraph() {
    const svg = this.root.querySelector("svg");
    const nodes = this.topo.nodes;
    const hubs = nodes.filter((n) => /switch/.test(n.kind || ""));
    const ring = nodes.filter((n) => !hubs.includes(n));
    const pos = new Map();
    ring.forEach((n, i) => {
      const a = (2 * Math.PI * i) / Math.max(1, ring.length) - Math.PI / 2;
      pos.set(n.id, [150 + 95 * Math.cos(a), 110 + 90 * Math.sin(a)]);
    });
    hubs.forEach((n, i) => pos.set(n.id, [150 + (i - (hubs.length - 1) / 2) * 30, 110]));
    const lines = this.topo.links.map((l, i) => {
      const [x1, y1] = pos.get(l.src) || [0, 0];
      const [x2, y2] = pos.get(l.dst) || [0, 0];
      const cls = [l.up === false ? "down" : "", i === this.selected ? "selected" : ""].join(" ");
      return `<line data-link="${i}" class="${cls}" x1="${x1}" y1="${y1}" x2="${x2}" y2="${y2}"><title>${l.src}–${l.dst} ${l.bandwidth_gbps} GB/s</title></line>`;
    });
    const circles = nodes.map((n) => {
      const [x, y] = pos.get(n.id);
      return `<circle cx="${x}" cy="${y}" r="9"></circle><text x="${x}" y="${y + 3}">${String(n.id).slice(0, 6)}</text>`;
    });
    svg.innerHTML = lines.join("") + circles.join("");
    svg.querySelectorAll("line").forEach((el) =>
      el.addEventListener("click", () => {
        this.selected = Number(el.dataset.link);
        this.render();
        this.root.querySelector(`tr[data-link="${this.selected}"] input`)?.focus();
      }),
    );
  }
}
