"""``o1sim sweep``, ``o1sim capacity`` and ``o1sim plan``: the many-run commands.

Axis and bound options take ``KEY=V1,V2,…`` with TOML values (``--grid
scheduler.policy=vllm,sarathi --grid workload.arrival.rate=8,12,16``); commas inside
brackets or quotes do not split. Tables print to the terminal, fitted to its width (the
columns that fit, the most important first, and a line naming the others; ``--wide``: all);
``--csv`` and ``--json`` write every row. Errors print one red line and exit with status 2.
Importing this module registers the three commands (:data:`o1sim._cli_args.COMMANDS`).
"""

from __future__ import annotations

import functools
import math

from ._cli_args import Parser, _load, _parse_value, _progress_bar, command, int_range, scenario_arg, seed_opt, set_opt
from ._cli_io import UsageError, _check_out, _fail, _tables, _write

TYPE_CHECKING = False
if TYPE_CHECKING:  # (typing costs the start-up ~5 ms: not imported at run time)
    from collections.abc import Sequence
    from typing import Any, Callable, Optional, TypeVar

    import pandas as pd

    F = TypeVar("F", bound=Callable[..., Any])

#: Columns a sweep's table shows unless told otherwise (CSV and JSON hold all).
SWEEP_COLUMNS = ["ttft_p99_ms", "tpot_p99_ms", "e2e_p99_ms", "throughput_rps", "goodput_rps"]


def _handle(f: F) -> F:
    """A missing Ray and a lost Ray task → one red line, exit status 2 (core errors and the
    rest: :func:`o1sim._cli_io.run_command`, like every command's)."""

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from .backends import BackendError

        try:
            return f(*args, **kwargs)
        except (BackendError, ImportError) as e:
            _fail(e)
            return 2

    return wrapper  # type: ignore[return-value]


def split_values(text: str) -> list[str]:
    """``a,[1,2],"x,y"`` → ``["a", "[1,2]", '"x,y"']``: commas split outside brackets and quotes."""
    parts, depth, quote, cur = [], 0, "", ""
    for ch in text:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        cur += ch
    parts.append(cur)
    return [p.strip() for p in parts]


def _axes(items: Sequence[str], option: str) -> dict[str, list[Any]]:
    axes: dict[str, list[Any]] = {}
    for item in items:
        key, sep, values = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"expected KEY=V1,V2,…, got {item!r}", option)
        vals = [_parse_value(v) for v in split_values(values) if v]
        axes[key.strip()] = vals
    return axes


def _bounds(items: Sequence[str], option: str = "--slo") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"expected METRIC=VALUE, got {item!r}", option)
        v = _parse_value(value.strip())
        if isinstance(v, float) and not math.isfinite(v):
            raise UsageError(f"{key.strip()}: expected a finite number, got {value.strip()!r}", option)
        out[key.strip()] = v
    return out


def _seeds(text: Optional[str], default: Any) -> Any:
    if text is None:
        return default
    parts = [p for p in split_values(text) if p]
    try:
        values = [int(p) for p in parts]
    except ValueError:
        raise UsageError(f"expected a count (3) or a list of seeds (0,1,2), got {text!r}", "--seeds") from None
    return values[0] if len(values) == 1 and "," not in text else values


def _cell(v: Any) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:,.4g}" if abs(v) < 1e4 else f"{v:,.0f}"
    if isinstance(v, (list, dict)):
        import json

        return json.dumps(v)
    return str(v)


#: Short headings of the tables' columns (the CSV and JSON keep the full names).
HEADINGS = {
    "usd_per_hour": "$/hour", "usd_per_million_tokens": "$/Mtok", "usd_per_million_output_tokens": "$/Mtok out",
    "tokens_per_s_per_gpu": "tok/s/GPU", "throughput_rps": "req/s", "goodput_rps": "good req/s",
    "slo_attainment": "in SLO", "total_tokens_per_s": "tok/s", "n_seeds": "seeds",
}


def _heading(column: str) -> str:
    """A column's heading: a dotted field by its last part (``deployment.tp`` → ``tp``), a
    metric by its short name, ``_ci95`` as ``±``."""
    if column.endswith("_ci95"):
        return "±" + _heading(column[: -len("_ci95")])
    return HEADINGS.get(column, column.rsplit(".", 1)[-1])


def _frame_table(out: Any, title: str, df: pd.DataFrame, columns: Sequence[str], priority: Sequence[str], wide: bool,
                 style: Optional[Callable[[Any], str]] = None, fold: Optional[str] = None) -> list[str]:
    """Print ``columns`` of ``df`` as a table fitted to the terminal (``wide``: all of them),
    the most important (``priority``, then the rest in order) first, and a line naming the
    columns left out."""
    from pandas.api.types import is_bool_dtype, is_numeric_dtype

    from ._cli_io import fitted_table, left_out_line, table_width

    numeric = {c: is_numeric_dtype(df[c]) and not is_bool_dtype(df[c]) for c in columns}
    cols = [(c, _heading(c), "right" if numeric[c] and c != fold else "left") for c in columns]
    rows = [([_cell(row[c]) for c in columns], style(row) if style else None) for _, row in df.iterrows()]
    table, left_out = fitted_table(title, cols, rows, out.width, list(priority), wide=wide, fold=fold)
    if wide:
        natural = [max([len(h), *(len(r[i]) for r, _ in rows)]) for i, (_, h, _) in enumerate(cols)]
        width, out.width = out.width, max(out.width, table_width(natural))
        out.print(table)
        out.width = width
    else:
        out.print(table)
    line = left_out_line(left_out)
    if line:
        out.print(line, style="dim", markup=False, highlight=False)
    return left_out


def _check_outputs(csv_out: Optional[str], json_out: Optional[str]) -> None:
    """Refuse unwritable outputs (and both on stdout) before any run."""
    if csv_out == "-" and json_out == "-":
        raise UsageError("only one of --json and --csv can go to stdout ('-')", "--csv")
    _check_out(csv_out, "--csv")
    _check_out(json_out, "--json")


def _tables_for(csv_out: Optional[str], json_out: Optional[str]) -> Any:
    """Where the tables go: stderr when the CSV or the JSON goes to stdout."""
    return _tables(csv_out if csv_out == "-" else json_out)


def _outputs(df: pd.DataFrame, csv_out: Optional[str], json_out: Optional[str], extra: Optional[dict[str, Any]] = None) -> None:
    import json

    if csv_out:
        _write(csv_out, df.to_csv(index=False))
    if json_out:
        rows = json.loads(df.to_json(orient="records"))
        _write(json_out, json.dumps({**(extra or {}), "rows": rows}, indent=1))


def backend_opts(p: Parser) -> None:
    """Where the runs run, and where the rows go."""
    p.option("--backend", choices=["local", "ray"], default="local", show_default=True,
             help="Run on this machine's cores, or on a Ray cluster (pip install 'o1sim[ray]').")
    p.option("--address", default=None, metavar="ADDR",
             help="Ray cluster address (ray.init(address=…)); default: a new local one.")
    p.option("--workers", type=int_range(1), default=None, metavar="INTEGER",
             help="Threads for --backend local (default: every CPU).")
    p.option("--csv", dest="csv_out", metavar="OUT", help="Write every row as CSV.")
    p.option("--json", dest="json_out", metavar="OUT", help="Write every row (and the answer) as JSON.")
    p.flag("--wide", help="Show every column, however wide (default: the columns that fit the terminal).")


def _sweep_opts(p: Parser) -> None:
    p.option("--grid", action="append", default=[], metavar="KEY=V1,V2",
             help="An axis: a dotted field and its values (repeatable; the product of all axes runs).")
    p.option("--zip", dest="zipped", action="append", default=[], metavar="KEY=V1,V2",
             help="A paired axis: all --zip axes advance together (equal lengths).")
    p.option("--seeds", default=None, metavar="N|S1,S2", help="A count of seeds (from the scenario's) or a list.")
    p.flag("--aggregate", dest="agg",
           help="One row per point: means over the seeds and 95% Student-t intervals (<metric>_ci95).")
    p.option("--columns", default=",".join(SWEEP_COLUMNS), show_default=True, help="Metrics the table shows.")


@command("sweep", scenario_arg, _sweep_opts, backend_opts, seed_opt, set_opt)
@_handle
def sweep_cmd(scenario: Optional[str], grid: Sequence[str], zipped: Sequence[str], seeds: Optional[str], agg: bool,
              columns: str, backend: str, address: Optional[str], workers: Optional[int], csv_out: Optional[str],
              json_out: Optional[str], wide: bool, seed: Optional[int], sets: Sequence[str]) -> None:
    """Run SCENARIO over a grid of field values and seeds; one row per point and seed."""
    from .sweeps import aggregate, sweep

    if not grid and not zipped:
        raise UsageError("give at least one axis", "--grid")
    _check_outputs(csv_out, json_out)
    base = _load(scenario, seed, sets)
    with _progress_bar() as bar:
        task = bar.add_task("sweeping", total=None, detail="")

        def tick(done: int, total: int) -> None:
            bar.update(task, total=total, completed=done, detail=f"{done:,}/{total:,} runs")

        df = sweep(base, _axes(grid, "--grid"), zip=_axes(zipped, "--zip") or None, seeds=_seeds(seeds, None),
                   backend=backend, workers=workers, address=address, progress=tick)
    if agg:
        df = aggregate(df)
    params = list(df.attrs.get("o1sim_params", []))
    wanted = [c for c in split_values(columns) if c]
    # (every run failed: no metric columns exist, the error column says why)
    ok = "error" not in df.columns or bool(df["error"].isna().any())
    unknown = [c for c in wanted if c not in df.columns] if ok else []
    wanted = [c for c in wanted if c in df.columns]
    if unknown:
        raise UsageError(f"no such column(s): {', '.join(unknown)}", "--columns")
    shown = params + (["n_seeds"] if agg else ["seed"])
    shown += [x for c in wanted for x in ([c, c + "_ci95"] if agg else [c])]
    if not agg and df["error"].notna().any():
        shown.append("error")
    # The point's values first, then the metrics as asked, their intervals, the seed last.
    priority = params + wanted + (["n_seeds"] if agg else []) + [c + "_ci95" for c in wanted if agg] + ["seed"]
    _frame_table(_tables_for(csv_out, json_out), f"o1sim sweep · {base.source} · {len(df):,} rows", df, shown,
                 priority, wide, fold="error")
    _outputs(df, csv_out, json_out)


def _capacity_opts(p: Parser) -> None:
    p.option("--slo", action="append", required=True, metavar="METRIC=VALUE",
             help="An objective: ttft_p99_ms=2000, tpot_p99_ms=50, goodput=0.99, or METRIC={max=…}/{min=…} (repeatable).")
    p.option("--tolerance", type=float, default=0.02, show_default=True, metavar="FLOAT",
             help="Relative width of the final bracket.")
    p.option("--seeds", default="3", show_default=True, metavar="N|S1,S2",
             help="Seeds per rate; a rate counts only if every seed meets the SLO.")
    p.option("--start-rate", type=float, default=None, metavar="FLOAT",
             help="First rate to try, req/s (default: the scenario's).")
    p.option("--min-rate", type=float, default=None, metavar="FLOAT", help="Lowest rate to try (default: start / 1024).")
    p.option("--max-rate", type=float, default=None, metavar="FLOAT", help="Highest rate to try (default: start × 1024).")


@command("capacity", scenario_arg, _capacity_opts, backend_opts, seed_opt, set_opt)
@_handle
def capacity_cmd(scenario: Optional[str], slo: Sequence[str], tolerance: float, seeds: str, start_rate: Optional[float],
                 min_rate: Optional[float], max_rate: Optional[float], backend: str, address: Optional[str],
                 workers: Optional[int], csv_out: Optional[str], json_out: Optional[str], wide: bool,
                 seed: Optional[int], sets: Sequence[str]) -> None:
    """The highest arrival rate (req/s) at which SCENARIO meets the SLO on every seed."""
    from .planning import capacity

    _check_outputs(csv_out, json_out)
    slo_map = _bounds(slo)
    base = _load(scenario, seed, sets)
    with _progress_bar() as bar:
        task = bar.add_task("searching", total=None, detail="")
        rounds = [0]

        def on_round(line: str) -> None:
            rounds[0] += 1
            bar.update(task, detail=f"round {rounds[0]}: {line}")

        c = capacity(base, slo_map, seeds=_seeds(seeds, 3), tolerance=tolerance, start_rate=start_rate,
                     min_rate=min_rate, max_rate=max_rate, backend=backend, workers=workers, address=address,
                     progress=on_round)
    out = _tables_for(csv_out, json_out)
    rates = c.rates
    _frame_table(out, f"o1sim capacity · {base.source} · {len(c.points):,} runs ({len(c.seeds)} seeds per rate)",
                 rates, list(rates.columns), list(rates.columns), wide, style=lambda r: "green" if r["meets"] else "")
    if c.rate is None:
        out.print(f"capacity: none — {c.message}", style="bold yellow", markup=False, highlight=False)
    elif c.status == "found":
        out.print(f"capacity: {c.message}", style="bold green", markup=False, highlight=False)
    else:
        out.print(f"capacity: at least {c.rate:.4g} req/s — {c.message}", style="bold green", markup=False, highlight=False)
    _outputs(c.points, csv_out, json_out, extra={"status": c.status, "rate": c.rate, "lo": c.lo, "hi": c.hi,
                                                 "tolerance": c.tolerance, "seeds": c.seeds, "slo": c.slo,
                                                 "message": c.message})


def _plan_opts(p: Parser) -> None:
    p.option("--choice", dest="choices", action="append", required=True, metavar="KEY=V1,V2",
             help="A choice: gpu=h100,h200, deployment.tp=2,4,8, deployment.replicas=1,2,4, "
                  "scheduler.policy=vllm,sarathi (repeatable).")
    p.option("--slo", action="append", required=True, metavar="METRIC=VALUE",
             help="An objective (as for capacity; repeatable).")
    p.option("--load", type=float, default=None, metavar="FLOAT", help="Arrival rate to serve, req/s (default: the scenario's).")
    p.option("--price", dest="prices", action="append", default=[], metavar="GPU=USD",
             help="Price per GPU-hour, over the defaults (repeatable).")
    p.option("--latency", default="e2e_p99_ms", show_default=True, help="The latency of the cost/latency Pareto front.")
    p.option("--seeds", default="3", show_default=True, metavar="N|S1,S2",
             help="Seeds per configuration (all must meet the SLO).")
    p.flag("--all", dest="show_all", help="Show infeasible configurations too, with why.")


@command("plan", scenario_arg, _plan_opts, backend_opts, seed_opt, set_opt)
@_handle
def plan_cmd(scenario: Optional[str], choices: Sequence[str], slo: Sequence[str], load: Optional[float],
             prices: Sequence[str], latency: str, seeds: str, show_all: bool, backend: str, address: Optional[str],
             workers: Optional[int], csv_out: Optional[str], json_out: Optional[str], wide: bool, seed: Optional[int],
             sets: Sequence[str]) -> None:
    """Every configuration of the choices at a load: feasible ones with their cost, the
    cheapest, and the Pareto front of cost against tail latency."""
    import json

    from .planning import default_prices, plan

    price_map: dict[str, float] = {}
    for k, v in _bounds(prices, "--price").items():
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise UsageError(f"{k}: expected a number of dollars per GPU-hour, got {v!r}", "--price")
        price_map[k] = float(v)
    _check_outputs(csv_out, json_out)
    slo_map = _bounds(slo)
    base = _load(scenario, seed, sets)
    with _progress_bar() as bar:
        task = bar.add_task("planning", total=None, detail="")

        def tick(done: int, total: int) -> None:
            bar.update(task, total=total, completed=done, detail=f"{done:,}/{total:,} runs")

        p = plan(base, _axes(choices, "--choice"), slo_map, load=load, prices=price_map, latency=latency,
                 seeds=_seeds(seeds, 3), backend=backend, workers=workers, address=address, progress=tick)
    df = p.configs if show_all else p.feasible
    cols = p.params + ["gpus", "usd_per_hour", "usd_per_million_tokens", latency, "throughput_rps", "goodput_rps",
                       "slo_attainment", "pareto"]
    priority = p.params + ["usd_per_hour", latency, "throughput_rps", "goodput_rps", "usd_per_million_tokens",
                           "gpus", "slo_attainment", "pareto"]
    if show_all:
        cols = p.params + ["feasible", "sustains"] + cols[len(p.params):] + ["why"]
        priority = p.params + ["feasible", "sustains"] + priority[len(p.params):]
    cheapest = p.cheapest
    key = None if cheapest is None else tuple(json.dumps(cheapest[k], default=str) for k in p.params)

    def style(row: Any) -> str:
        return "bold green" if key is not None and tuple(json.dumps(row[k], default=str) for k in p.params) == key else ""

    out = _tables_for(csv_out, json_out)
    n_ok = int(p.configs["feasible"].sum())
    offered = "the load" if p.load is None else f"{p.load:.4g} req/s"
    left_out = _frame_table(out, f"o1sim plan · {base.source} · {n_ok} of {len(p.configs)} configurations meet the "
                                 f"SLO and sustain {offered}", df, cols, priority, wide, style=style, fold="why")
    if "why" in left_out:  # the reasons, one configuration a line, wrapped to the terminal
        for _, row in df[df["why"].notna()].iterrows():
            name = " ".join(f"{_heading(k)}={_cell(row[k])}" for k in p.params)
            out.print(f"{name}: {row['why']}", markup=False, highlight=False)
    if cheapest is None:
        out.print("cheapest: none — no configuration meets the SLO and sustains the load (see --all for why)",
                  style="bold yellow", markup=False, highlight=False)
    else:
        what = ", ".join(f"{k}={_cell(cheapest[k])}" for k in p.params)
        out.print(f"cheapest: {what} — ${cheapest['usd_per_hour']:,.2f}/hour, "
                  f"${_cell(cheapest['usd_per_million_tokens'])} per million tokens", style="bold green",
                  markup=False, highlight=False)
    used = {g: info["usd_per_hour"] for g, info in default_prices().items()}
    used.update(price_map)
    gpus = sorted({str(g) for g in p.configs[p.params[0]]}) if p.params and p.params[0] == "gpu" else []
    if gpus:
        out.print("prices ($/GPU-hour): " + ", ".join(f"{g} {used[g]:.2f}" for g in gpus if g in used)
                  + ("" if price_map else " (defaults: o1sim.default_prices() for sources)"), style="dim",
                  markup=False, highlight=False)
    _outputs(p.configs, csv_out, json_out, extra={"cheapest": cheapest, "latency": latency, "prices": used})
