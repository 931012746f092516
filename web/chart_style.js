// The charts' one language, shared with the dashboard and the report: the same as
// `o1sim.chart_style.page_style()` in Python (python/o1sim/chart_style.py), held equal by
// tests/web/test_chart_style.py. Policies take their registry colour (setPolicyColors in
// charts.js); the rest is here.
//
// - A latency CDF: the latency on a log x axis, the fraction of requests (0..1) on a linear
//   y axis, drawn as a step.
// - Names the registry does not know take `otherColors` in turn; replicas `replicaPalette`.
// - The GPU × time heatmap ramps from heatRamp[0] (idle) to heatRamp[1] (busy), in RGB.
// - Scheduler steps are coloured by kind (`stepKinds`).
export const CHART_STYLE = Object.freeze({
  cdf: Object.freeze({
    x: "log",
    y: "linear",
    yTitle: "fraction of requests",
    yRange: Object.freeze([0, 1]),
    units: Object.freeze({ TTFT: "ms", TPOT: "ms", E2E: "s" }),
  }),
  otherColors: Object.freeze(["#555555", "#16a085", "#d35400", "#7f8c8d"]),
  replicaPalette: Object.freeze(["#4c78a8", "#f58518", "#54a24b", "#b279a2", "#e45756", "#72b7b2", "#9d755d", "#bab0ac"]),
  heatRamp: Object.freeze(["#fffaff", "#376ee1"]),
  stepKinds: Object.freeze({ decode: "#2f6fdf", prefill: "#e0752d", mixed: "#8e44ad" }),
});

/** uPlot's `distr` of a scale kind: 3 is logarithmic, 1 linear. */
export const UPLOT_DISTR = Object.freeze({ log: 3, linear: 1 });

/** `[r, g, b]` of a `#rrggbb` colour. */
export function rgbOf(hex) {
  return [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16));
}

/** The heatmap's colour at a busy fraction `v` (0..1): the ramp, linear in RGB. */
export function heatColor(v) {
  const [a, b] = CHART_STYLE.heatRamp.map(rgbOf);
  const t = Math.max(0, Math.min(1, v));
  return `rgb(${a.map((x, i) => Math.round(x + (b[i] - x) * t)).join(", ")})`;
}
