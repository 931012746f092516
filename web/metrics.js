// The run summary's metrics as the core's table describes them (crates/sim-core/src/metric_info.rs,
// the WASM module's presets().summary_metrics; Python's o1sim.registry reads the same rows): each
// one's label, unit, format and where it is shown. The page's summary table is built from the
// rows whose `shown_in` (a distribution: whose statistic's) includes "page", so a new metric
// appears here with no edit of the page.

/** The values `surface` shows, in the table's order, a distribution's statistics expanded:
 * `{path, label, heading, unit, format, decimals, scale, lowerIsBetter, doc}`. */
export function shownMetrics(rows, surface) {
  const out = [];
  const one = (m, path, label) => ({
    path, label, heading: metricHeading(label, m.unit), unit: m.unit, format: m.format,
    decimals: m.decimals, scale: m.scale, lowerIsBetter: m.lower_is_better, doc: m.doc,
  });
  for (const m of rows) {
    if (m.stats.length) {
      for (const st of m.stats) if (st.shown_in.includes(surface)) out.push(one(m, `${m.key}.${st.name}`, `${m.label} ${st.name}`));
    } else if (m.shown_in.includes(surface)) {
      out.push(one(m, m.key, m.label));
    }
  }
  return out;
}

/** A label with its unit, as every front end writes it (`TTFT p99 (ms)`); none for `%` or a count. */
export function metricHeading(label, unit) {
  return unit === "" || unit === "%" ? label : `${label} (${unit})`;
}

/** The number at `path` (`ttft_ms.p99`) of a summary; null when absent, null or NaN. */
export function metricValue(summary, path) {
  let node = summary;
  for (const part of path.split(".")) {
    if (node === null || typeof node !== "object" || !(part in node)) return null;
    node = node[part];
  }
  return typeof node === "number" && !Number.isNaN(node) ? node : null;
}

/** `value` written as the table says, the text Python's `o1sim.registry.format_metric` writes:
 * "—" when missing; a count whole, a number with its decimals after scaling, a fraction as a
 * percentage; thousands separated by commas (`toFixed` rounds the exact binary value, a tie
 * away from zero: Python rounds the same way). */
export function formatMetric(shown, value) {
  if (value === null || value === undefined || Number.isNaN(value)) return "—";
  const group = (text) => {
    const [whole, frac] = text.split(".");
    const g = whole.replace(/\B(?=(\d{3})+(?!\d))/g, ",");
    return frac === undefined ? g : `${g}.${frac}`;
  };
  if (shown.format === "integer") return group(value.toFixed(0));
  const text = group((value * shown.scale).toFixed(shown.decimals));
  return shown.format === "percent" ? `${text}%` : text;
}
