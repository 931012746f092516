// The charts' one language, shared with the dashboard and the report: the core registry's
// `chart_style` (crates/sim-core/src/registry.rs; Python's `o1sim.chart_style`), which the page
// sets at start-up from the WASM module's presets() (setChartStyle). Policies take their
// registry colour (setPolicyColors in charts.js).
//
// - A latency CDF: the latency on a log x axis, the fraction of requests (0..1) on a linear
//   y axis, drawn as a step.
// - Names the registry does not know take `otherColors` in turn; replicas `replicaPalette`.
// - The GPU × time heatmap ramps from heatRamp[0] (idle) to heatRamp[1] (busy), in RGB.
// - Scheduler steps are coloured by kind (`stepKinds`).
/** Filled by setChartStyle before the first chart is drawn. */
export const CHART_STYLE = {};

/** Take the registry's `chart_style` (`presets().chart_style`). */
export function setChartStyle(style) {
  Object.assign(CHART_STYLE, structuredClone(style));
}

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
