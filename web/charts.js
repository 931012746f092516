// Charts of the page: latency CDFs and time series with uPlot (copied into pkg/ by
// `make web`), and the GPU × time heatmap drawn on a canvas.
import uPlot from "./pkg/uPlot.esm.js";
import { CHART_STYLE, UPLOT_DISTR, heatColor } from "./chart_style.js";

// Each policy's colour comes from the core's registry (`presets().policy_info`, the
// dashboard's too), set by the page before the first chart; names it does not know take the
// other colours in turn, replicas the replica palette (chart_style.js: the dashboard's and
// the report's conventions).
let COLORS = {};
const otherColor = (i) => CHART_STYLE.otherColors[i % CHART_STYLE.otherColors.length];
const replicaColor = (i) => CHART_STYLE.replicaPalette[i % CHART_STYLE.replicaPalette.length];

/** Each series' colour: its registry colour, else the next of the other colours. */
function seriesColors(names) {
  let other = 0;
  return names.map((name) => COLORS[name] || otherColor(other++));
}

/** Set the policies' colours: `{name: "#rrggbb"}` from the registry. */
export function setPolicyColors(colors) {
  COLORS = { ...colors };
}

// Downsample a sorted sample to at most `n` CDF points.
function cdf(sorted, n = 400) {
  const len = sorted.length;
  if (!len) return [[], []];
  const xs = [];
  const ys = [];
  const step = Math.max(1, Math.floor(len / n));
  for (let i = 0; i < len; i += step) { xs.push(sorted[i]); ys.push((i + 1) / len); }
  xs.push(sorted[len - 1]); ys.push(1);
  return [xs, ys];
}

// uPlot wants one shared x array: merge series on the union of x values (null elsewhere).
function align(series) {
  const xs = [...new Set(series.flatMap((s) => s[0]))].sort((a, b) => a - b);
  const idx = new Map(xs.map((x, i) => [x, i]));
  const ys = series.map(([sx, sy]) => {
    const col = new Array(xs.length).fill(null);
    sx.forEach((x, i) => (col[idx.get(x)] = sy[i]));
    return col;
  });
  return [xs, ...ys];
}

export class Charts {
  constructor(el) {
    this.el = el;
    this.plots = {};
    this.results = [];
    el.policySelect.addEventListener("change", () => this.renderSeries());
    new ResizeObserver(() => this.resize()).observe(el.ttft);
  }

  width(div) {
    return Math.max(240, div.clientWidth || 400);
  }

  plot(key, div, opts, data) {
    this.plots[key]?.destroy();
    div.textContent = "";
    this.plots[key] = new uPlot({ width: this.width(div), height: 220, legend: { live: false }, ...opts }, data, div);
  }

  resize() {
    for (const [key, p] of Object.entries(this.plots)) p.setSize({ width: this.width(this.el[key]), height: 220 });
    this.drawHeatmap();
  }

  render(results) {
    this.results = results;
    const sel = this.el.policySelect;
    const keep = sel.value;
    sel.innerHTML = results.map((r) => `<option>${r.label}</option>`).join("");
    if (results.some((r) => r.label === keep)) sel.value = keep;
    const colors = seriesColors(results.map((r) => r.label));
    const style = CHART_STYLE.cdf;
    for (const [key, name] of [["ttft", "TTFT"], ["tpot", "TPOT"]]) {
      // A log axis has no zero: the CDF starts at the smallest positive latency.
      const data = align(results.map((r) => cdf(r.cdf[key].filter((v) => v > 0))));
      this.plot(key, this.el[key], {
        scales: {
          x: { time: false, distr: UPLOT_DISTR[style.x] },
          y: { distr: UPLOT_DISTR[style.y], range: [...style.yRange] },
        },
        axes: [{ label: `${name} (${style.units[name]}), log scale` }, { label: style.yTitle }],
        series: [{}, ...results.map((r, i) => ({ label: r.label, stroke: colors[i], width: 1.5, spanGaps: true,
                                                   paths: uPlot.paths.stepped({ align: 1 }) }))],
      }, data);
    }
    this.renderSeries();
  }

  // Time series of the selected policy: one line per replica.
  renderSeries() {
    const r = this.results.find((x) => x.label === this.el.policySelect.value) || this.results[0];
    if (!r) return;
    const ts = r.timeseries;
    const replicas = [...new Set(ts.replica)].sort((a, b) => a - b);
    for (const [key, col, label] of [["kv", "kv_usage", "KV used"], ["queue", "waiting", "waiting"]]) {
      const series = replicas.map((rep) => {
        const xs = [];
        const ys = [];
        ts.replica.forEach((x, i) => { if (x === rep) { xs.push(ts.time_ms[i] / 1000); ys.push(ts[col][i]); } });
        return [xs, ys];
      });
      this.plot(key, this.el[key], {
        scales: { x: { time: false } },
        axes: [{ label: "s" }, { label }],
        series: [{}, ...replicas.map((rep) => ({ label: `replica ${rep}`, stroke: replicaColor(rep), width: 1, spanGaps: false }))],
      }, align(series));
    }
    this.drawHeatmap();
  }

  // Rows = GPUs (replica × tp·pp), columns = time buckets, colour = busy fraction.
  drawHeatmap() {
    const r = this.results.find((x) => x.label === this.el.policySelect.value) || this.results[0];
    const canvas = this.el.heatmap;
    const ctx = canvas.getContext("2d");
    canvas.width = canvas.clientWidth || 800;
    ctx.clearRect(0, 0, canvas.width, canvas.height);
    if (!r) return;
    const ts = r.timeseries;
    const d = r.deployment;
    const perReplica = (d.tp || 1) * (d.pp || 1);
    const replicas = d.replicas || 1;
    const rows = replicas * perReplica;
    const tMax = Math.max(...ts.time_ms, 0) + ts.interval_ms;
    const buckets = Math.max(1, Math.round(tMax / ts.interval_ms));
    const left = 60;
    const w = (canvas.width - left) / buckets;
    const h = (canvas.height - 14) / rows;
    ctx.font = "10px system-ui";
    ctx.fillStyle = "#eef0f4";
    ctx.fillRect(left, 0, canvas.width - left, rows * h);
    ts.replica.forEach((rep, i) => {
      const b = Math.round(ts.time_ms[i] / ts.interval_ms);
      const v = Math.max(0, Math.min(1, ts.busy[i]));
      // The scale under the canvas (#heat-scale) is this ramp (chart_style.js's heatRamp).
      ctx.fillStyle = heatColor(v);
      for (let g = 0; g < perReplica; g++) ctx.fillRect(left + b * w, (rep * perReplica + g) * h, Math.max(1, w), Math.max(1, h - 0.5));
    });
    ctx.fillStyle = "#1d2330";
    for (let rep = 0; rep < replicas; rep++) ctx.fillText(`replica ${rep}`, 2, rep * perReplica * h + Math.min(12, perReplica * h));
    ctx.fillText(`0 s`, left, canvas.height - 2);
    ctx.fillText(`${(tMax / 1000).toFixed(1)} s`, canvas.width - 40, canvas.height - 2);
  }
}
