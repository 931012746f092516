"""The ``o1sim`` command line: run, compare policies, list presets, validate, check.

Every error is one red line on stderr with exit status 2, never a traceback or a usage
screen: a ``SimError`` as ``Kind: field: message``, a bad option or argument as
``UsageError: …``, a file that cannot be written as ``OutputError: …`` (output paths are
checked before a run starts). ``check`` exits 1 when a property is violated and 3 when the
search stopped before covering every state without finding one. ``--json -`` writes the
JSON to stdout (the tables then go to stderr). Summary keys are read defensively (``_get``)
and shown as "—" when the core does not report them. ``O1SIM_DEBUG=1`` shows the traceback
of an unexpected error instead of its one line.

The parser is the standard library's argparse (:mod:`o1sim._cli_args`), and only the named
command's parser is built. json, the registry, rich, the API and what it pulls in load only
for the command that needs them, and a run's summary is drawn without rich when it fits
(:mod:`o1sim._cli_table`), so ``o1sim --help`` and small runs start fast
(``benchmarks/cli.py``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from . import _core
from ._cli_args import (
    COMMANDS,
    Parser,
    _load,
    _parse_value,
    _progress_bar,
    command,
    existing_file,
    existing_path,
    help_width,
    int_range,
    not_a_file,
    not_a_folder,
    positive_float,
    scenario_arg,
    seed_opt,
    set_opt,
    trace_opts,
    web_dir,
)
from ._cli_io import (
    UsageError,
    _check_out,
    _echo,
    _fail,
    _one_line,
    _out,
    _tables,
    _write,
    run_command,
    usage_error,
)
from .errors import ConfigError, SimError

TYPE_CHECKING = False
if TYPE_CHECKING:  # (typing costs the start-up ~5 ms: not imported at run time)
    from collections.abc import Sequence
    from typing import Any, Callable, Optional

    from rich.table import Table as RichTable

    from . import registry
    from ._cli_table import Table
    from .api import CheckProgress, CheckResult, Result, Scenario
    from .api import Progress as SimProgress


def default_policies() -> str:
    """What `compare` and `report` run without --policies: every policy of the core's registry
    (o1sim.presets()) that needs no topology."""
    from . import registry

    return ",".join(registry.default_policies())


def policies_help() -> str:
    """The --policies help: the names come from the core's registry too."""
    from . import registry

    return ("Comma-separated scheduler policies to compare, of: "
            + ", ".join(f"{p['name']} ({p['label']}{', needs a topology' if p['needs_topology'] else ''})"
                        for p in registry.policies())
            + ".")


def policies_opt(p: Parser) -> None:
    """``--policies``: its default and help are the registry's, read when the command's parser
    is built (``o1sim --help`` and other commands never load the registry)."""
    p.option("--policies", type=_policy_list, default=default_policies(), show_default=True, help=policies_help())


def __getattr__(name: str) -> Any:  # the registry's values under their former constant names
    if name == "DEFAULT_POLICIES":
        return default_policies()
    if name == "POLICIES_HELP":
        return policies_help()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _policy_list(value: str) -> list[str]:
    """--policies as a list (the core's parser judges each name: an unknown one is a
    ConfigError on scheduler.policy with the closest names)."""
    import argparse

    names = [p.strip() for p in value.split(",") if p.strip()]
    if not names:
        raise argparse.ArgumentTypeError("give at least one policy")
    return names


DASH = "—"

# --------------------------------------------------------------------------- helpers


def _get(summary: Mapping[str, Any], dotted: str, default: Any = None) -> Any:
    """``_get(s, "ttft_ms.p99")``: a nested summary value, or ``default`` when absent/null."""
    node: Any = summary
    for key in dotted.split("."):
        if not isinstance(node, Mapping) or key not in node:
            return default
        node = node[key]
    return default if node is None else node


def _num(value: Any, digits: int = 1, scale: float = 1.0) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return DASH
    if isinstance(value, int) and scale == 1.0:
        return f"{value:,}"
    v = value * scale
    if v != v:  # NaN
        return DASH
    return f"{v:,.{digits}f}"


# --------------------------------------------------------------------------- the command line


#: ``o1sim --help``'s description (then the commands, each with its first sentence).
DESCRIPTION = """o1sim: simulate LLM inference serving (schedulers, KV cache, GPUs, topology).

SCENARIO is a .toml or .json file; without one, the built-in default scenario is used."""


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The ``o1sim`` command: parse ``argv`` (default ``sys.argv[1:]``), run the command it
    names and return its exit status (``-h`` and ``--version`` print and exit 0)."""
    import argparse

    args = list(sys.argv[1:] if argv is None else argv)
    top = _TopParser("o1sim", DESCRIPTION, usage="%(prog)s [OPTIONS] COMMAND [ARGS]...")
    top.option("--version", action="version", version=f"o1sim, version {_core.__version__}",
               help="Show the version and exit.")
    top.argument("command", choices=sorted(COMMANDS), metavar="COMMAND", help=argparse.SUPPRESS)
    top.argument("args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    try:
        if not args:
            raise UsageError("Missing command.")
        ns = top.parse(args, intermixed=False)
    except UsageError as e:
        usage_error(e, None)
        return 2
    name = ns["command"]
    func, arguments = COMMANDS[name]
    parser = Parser(f"o1sim {name}", func.__doc__)
    try:
        for add in arguments:
            add(parser)
        kwargs = parser.parse(ns["args"])
    except UsageError as e:
        usage_error(e, name)
        return 2
    return run_command(name, func, kwargs)


class _TopParser(Parser):
    """``o1sim``'s own parser: its help lists the commands, each with its first sentence."""

    def format_help(self) -> str:
        import re

        width = help_width()
        names = sorted(COMMANDS)
        pad = max(map(len, names)) + 4
        lines = ["Commands:"]
        for name in names:
            doc = COMMANDS[name][0].__doc__ or ""
            first = re.split(r"\n\s*\n", doc.strip())[0]
            sentence = " ".join(first.split(". ")[0].split()).rstrip(".") + "."
            limit = max(width - pad, 20)
            if len(sentence) > limit:  # one line each, cut at a word, as click listed them
                sentence = sentence[: limit - 3].rsplit(" ", 1)[0] + "..."
            lines.append(f"  {name:<{pad - 4}}  {sentence}")
        return super().format_help() + "\n" + "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- commands


def _run_opts(p: Parser) -> None:
    p.option("--json", dest="json_out", metavar="OUT", help="Write the full result (core JSON) to OUT ('-': stdout).")
    p.option("--format", dest="json_format", choices=["core", "vllm-bench"], default="core", show_default=True,
             help="The shape of --json: o1sim's own result, or the JSON `vllm bench serve --save-result` writes "
                  "(its field names and units; rejected requests are its failed ones).")
    p.option("--csv", dest="csv_out", metavar="OUT", help="Write the per-request table to OUT as CSV ('-': stdout).")


@command("run", scenario_arg, _run_opts, trace_opts, seed_opt, set_opt)
def run(scenario: Optional[str], json_out: Optional[str], json_format: str, csv_out: Optional[str],
        trace: Optional[str], trace_format: Optional[str], seed: Optional[int], sets: Sequence[str]) -> None:
    """Run one simulation and print its summary."""
    import time

    if json_out == "-" and csv_out == "-":
        raise UsageError("only one of --json and --csv can go to stdout ('-')", "--csv")
    if json_format != "core" and not json_out:
        raise UsageError(f"{json_format} is the shape of the --json file: give --json OUT", "--format")
    _check_out(json_out, "--json")
    _check_out(csv_out, "--csv")
    from .api import simulate

    sc = _load(scenario, seed, sets, trace, trace_format)
    started = time.perf_counter()
    with _progress_bar() as bar:
        task = bar.add_task("simulating", total=None, detail="")

        def on_progress(p: SimProgress) -> None:
            bar.update(task, total=max(p.total_requests, 1), completed=p.finished_requests,
                       detail=f"{p.finished_requests:,}/{p.total_requests:,} req · t={p.now_ms / 1000:,.1f}s")

        # vllm-bench's ITLs come from the steps: record them now rather than run again.
        result = simulate(sc, progress=on_progress, record_steps=json_format == "vllm-bench")
    wall_s = time.perf_counter() - started
    _print_summary(result, sc, wall_s, err=(json_out if json_out == "-" else csv_out) == "-")
    if json_out:
        if json_format == "vllm-bench":
            from .exports import vllm_bench_json

            _write(json_out, vllm_bench_json(result))
        else:
            _write(json_out, result.to_json())
    if csv_out:
        _write(csv_out, result.requests.to_csv(index=False))


def _print_summary(result: Result, sc: Scenario, wall_s: float, *, err: bool = False) -> None:
    """The run's summary tables, on stdout (``err``: stderr)."""
    from . import registry
    from ._cli_table import Table, show

    s = result.summary
    head = Table(f"o1sim · {sc.source}", header=False)
    head.column("metric", bold=True)
    head.column("value", right=True)
    # The summary's metrics as the core's table lists them (o1sim.registry): the scalars
    # this run reports, one per line; the latency distributions in a grid below.
    shown = registry.shown_metrics("cli")
    for m in shown:
        if "." not in m.path and m.path in s:
            head.row(m.heading, registry.format_metric(m, registry.metric_value(s, m.path)))
    head.row("wall time (s)", f"{wall_s:.3f}")
    show(head, err=err)

    rows = {r["key"]: r for r in registry.summary_metrics()}
    grid: dict[str, dict[str, str]] = {}  # distribution heading → {statistic: text}
    for m in shown:
        stat = m.path.partition(".")[2]
        if stat:
            name = registry.heading(rows[m.metric]["label"], m.unit)
            grid.setdefault(name, {})[stat] = registry.format_metric(m, registry.metric_value(s, m.path))
    stats = list(dict.fromkeys(stat for cells in grid.values() for stat in cells))
    lat = Table("latency")
    lat.column("metric", bold=True)
    for q in stats:
        lat.column(q, right=True)
    for name, cells in grid.items():
        lat.row(name, *(cells.get(q, DASH) for q in stats))
    show(lat, err=err)

    topo = _get(s, "topology")
    if isinstance(topo, Mapping):
        show(_counters("topology", [
            *((label, _num(topo.get(key))) for label, key in (
                ("events applied", "events_applied"), ("events not reached (after the last request)", "events_not_reached"),
                ("route changes", "route_changes"),
                ("replicas stopped", "stopped_replicas"), ("requests moved", "moved_requests"),
                ("replicas restarted", "restarted_replicas"),
                ("steps sharing a link", "shared_steps"), ("KV transfers", "kv_transfers"))),
            ("KV transfer ms mean / p99", f"{_num(_get(topo, 'kv_transfer_ms.mean'), 3)} / {_num(_get(topo, 'kv_transfer_ms.p99'), 3)}")]),
            err=err)

    spec = _get(s, "speculative")
    if isinstance(spec, Mapping):
        per = ", ".join(_num(x, 3) for x in spec.get("acceptance_per_position") or [])
        show(_counters("speculative decoding", [
            ("drafts verified", _num(spec.get("draft_tokens"))), ("drafts accepted", _num(spec.get("accepted_tokens"))),
            ("acceptance rate", _num(spec.get("acceptance_rate"), 3)),
            ("tokens per verify", _num(spec.get("tokens_per_verify"), 3)), ("acceptance per position", per)]), err=err)
    lora = _get(s, "lora")
    if isinstance(lora, Mapping):
        show(_counters("LoRA adapters", [
            ("adapter loads", _num(lora.get("adapter_loads"))), ("of them from disk", _num(lora.get("adapter_loads_from_disk"))),
            ("load time (ms)", _num(lora.get("load_ms"), 3)), ("steps that waited for a load", _num(lora.get("stalled_steps"))),
            ("requests that waited for a slot", _num(lora.get("slot_waits")))]), err=err)

    rej = _get(s, "rejections")
    if isinstance(rej, Mapping) and any(rej.values()):
        t = Table("rejections by reason")
        t.column("reason")
        t.column("count", right=True)
        for reason, count in sorted(rej.items()):
            t.row(str(reason) or "(none)", _num(count))
        show(t, err=err)


def _counters(title: str, rows: Sequence[tuple[str, str]]) -> Table:
    """A two-column table of a summary section's counters (label, value)."""
    from ._cli_table import Table

    t = Table(title, header=False)
    t.column("metric", bold=True)
    t.column("value", right=True)
    for label, value in rows:
        t.row(label, value)
    return t


def _compare_columns() -> list[tuple[str, Callable[[Mapping[str, Any]], str]]]:
    """`compare`'s columns: the values the core's metric table shows in comparisons."""
    from . import registry

    def cell(m: registry.Shown) -> Callable[[Mapping[str, Any]], str]:
        return lambda s: registry.format_metric(m, registry.metric_value(s, m.path))

    return [(m.heading, cell(m)) for m in registry.shown_metrics("compare")]


def _column_widths(results: Mapping[str, Result | SimError],
                   columns: Sequence[tuple[str, Callable[[Mapping[str, Any]], str]]]) -> list[int]:
    """Each column of `compare`'s table as wide as its widest value or its heading's longest
    word (the heading wraps), so that no cell is cut."""
    from .api import Result

    summaries = [r.summary for r in results.values() if isinstance(r, Result)]
    errors = [len(type(r).__name__) for r in results.values() if not isinstance(r, Result)]
    widths = [max([len(w) for w in header.split()] + [len(fmt(s)) for s in summaries]) for header, fmt in columns]
    return [max([w, *errors]) if i == 0 else w for i, w in enumerate(widths)]  # a failed run's error: first column


def _compare_width(names: Sequence[str], results: Mapping[str, Result | SimError],
                   columns: Sequence[tuple[str, Callable[[Mapping[str, Any]], str]]]) -> int:
    """The width of `compare`'s table: its columns with their padding, the policy column."""
    return sum(w + 3 for w in _column_widths(results, columns)) + max([len(n) for n in names] + [len("policy")]) + 1


def _compare_opts(p: Parser) -> None:
    policies_opt(p)
    p.option("--json", dest="json_out", metavar="OUT",
             help="Write every run's result as {policy: result JSON} to OUT ('-': stdout).")


@command("compare", scenario_arg, _compare_opts, trace_opts, seed_opt, set_opt)
def compare(scenario: Optional[str], policies: list[str], json_out: Optional[str], trace: Optional[str],
            trace_format: Optional[str], seed: Optional[int], sets: Sequence[str]) -> Optional[int]:
    """Run the scenario once per scheduler policy and compare the results."""
    import json

    from .api import Result, simulate

    names = policies
    _check_out(json_out, "--json")
    base = _load(scenario, seed, sets, trace, trace_format)
    results: dict[str, Result | SimError] = {}
    with _progress_bar() as bar:
        task = bar.add_task("comparing", total=len(names), detail="")
        for i, name in enumerate(names):
            sc = base.with_overrides({"scheduler.policy": name})

            def on_progress(p: SimProgress, i: int = i, name: str = name) -> None:
                bar.update(task, completed=i + p.fraction, description=f"{name} ({i + 1}/{len(names)})",
                           detail=f"{p.finished_requests:,}/{p.total_requests:,} req")

            try:
                results[name] = simulate(sc, progress=on_progress)
            except ConfigError:
                raise  # the scenario (or the policy name) is wrong: stop here
            except SimError as e:
                results[name] = e
            bar.update(task, completed=i + 1)

    failed = [(name, r) for name, r in results.items() if not isinstance(r, Result)]
    out = _tables(json_out)
    # One table when the terminal is wide enough for it, else the columns in order, as many
    # to a table as fit.
    c = _compare_columns()
    groups: list[list[tuple[str, Callable[[Mapping[str, Any]], str]]]] = [[]]
    for column in c:
        if groups[-1] and _compare_width(names, results, [*groups[-1], column]) >= out.width:
            groups.append([])
        groups[-1].append(column)
    for n, columns in enumerate(groups):
        title = f"o1sim compare · {base.source}" + ("" if len(groups) == 1 else f" ({n + 1}/{len(groups)})")
        out.print(_compare_table(title, results, columns))
    if json_out:
        parts = []
        for name, r in results.items():
            body = r.to_json() if isinstance(r, Result) else json.dumps({"error": {"kind": type(r).__name__, "message": str(r)}})
            parts.append(f"{json.dumps(name)}:{body}")
        _write(json_out, "{" + ",".join(parts) + "}")
    if failed:
        detail = "; ".join(f"{name}: {type(err).__name__}: {err}" for name, err in failed)
        _echo(_one_line(f"{len(failed)} of {len(names)} run(s) failed: {detail}"), "bold red", err=True)
        return 2
    return None


def _compare_table(
    title: str,
    results: Mapping[str, Result | SimError],
    columns: Sequence[tuple[str, Callable[[Mapping[str, Any]], str]]],
) -> RichTable:
    from rich import box
    from rich.table import Table

    from .api import Result

    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAVY, pad_edge=False)
    table.add_column("policy", style="bold", no_wrap=True)
    for (header, _), width in zip(columns, _column_widths(results, columns)):
        table.add_column(header, justify="right", width=width)
    for name, r in results.items():
        if isinstance(r, Result):
            table.add_row(name, *(fmt(r.summary) for _, fmt in columns))
        else:
            table.add_row(name, f"[red]{type(r).__name__}[/red]", *([DASH] * (len(columns) - 1)))
    return table


def _presets_opts(p: Parser) -> None:
    p.argument("section", nargs="?", metavar="SECTION", help="One part of the catalog (gpus, models, policies, ...).")
    p.flag("--json", dest="as_json", help="Print the raw catalog JSON.")


@command("presets", _presets_opts)
def presets_cmd(section: Optional[str], as_json: bool) -> None:
    """List the built-in catalog (GPUs, models, policies, ...); SECTION shows one part."""
    import json

    from .api import presets

    catalog = presets()
    if section is not None:
        if section not in catalog:
            raise UsageError(f"unknown section {section!r}; sections: {', '.join(catalog) or '(none)'}", "SECTION")
        catalog = {section: catalog[section]}
    if as_json:
        print(json.dumps(catalog, indent=2))
        return
    out = _out()
    if not catalog:
        out.print("the catalog is empty")
        return
    for name, value in catalog.items():
        if name == "models" and isinstance(value, list):
            out.print(_models_table(value))
        elif name == "gpus" and isinstance(value, list):
            out.print(_gpus_table(value))
        else:
            out.print(_catalog_table(name, value))


def _billions(value: Any) -> str:
    return f"{value / 1e9:,.1f}B" if isinstance(value, (int, float)) else DASH


def _models_table(models: list[Any]) -> RichTable:
    """One row per model preset: its size, shape, architecture and Hugging Face ids (each
    accepted in place of the name, case-insensitively)."""
    from rich.table import Table

    table = Table(title="models", title_justify="left")
    for col, justify in [("name", "left"), ("params", "right"), ("active", "right"), ("layers", "right"),
                         ("hidden", "right"), ("heads/kv", "right"), ("experts", "right"), ("context", "right"),
                         ("architecture", "left"), ("Hugging Face ids", "left")]:
        table.add_column(col, justify=justify, style="bold" if col == "name" else None)  # type: ignore[arg-type]
    for m in models:
        features = []
        if m.get("qkv_bias"):
            features.append("qkv bias")
        if m.get("qk_norm_layers"):
            features.append("q/k norm")
        if m.get("shared_expert_intermediate"):
            features.append("shared expert")
        local = m.get("local_attention")
        if isinstance(local, Mapping):
            features.append(f"{local.get('kind')} {local.get('tokens')} on {local.get('layers')} layers")
        if m.get("tied_embeddings"):
            features.append("tied embeddings")
        mla = m.get("mla")
        if isinstance(mla, Mapping):
            features.append(f"MLA (latent {mla.get('kv_lora_rank')} + rope {mla.get('qk_rope_head_dim')})")
        if m.get("attention_sinks"):
            features.append("attention sinks")
        if m.get("expert_format"):
            features.append(f"{m.get('expert_format')} experts")
        if m.get("mtp_layers"):
            features.append(f"{m.get('mtp_layers')} MTP module(s)")
        experts = m.get("experts", 1)
        table.add_row(
            str(m.get("name")),
            _billions(m.get("params")),
            _billions(m.get("active_params")) if experts > 1 else DASH,
            str(m.get("layers")),
            str(m.get("hidden")),
            f"{m.get('heads')}/{m.get('kv_heads')}",
            f"{m.get('experts_per_token')} of {experts}" if experts > 1 else DASH,
            f"{m.get('max_context'):,}" if isinstance(m.get("max_context"), int) else DASH,
            ", ".join(features) or DASH,
            ", ".join(m.get("hf_ids") or []) or DASH,
        )
    return table


def _gpus_table(gpus: list[Any]) -> RichTable:
    """One row per GPU preset: datasheet figures and what prices it (a shipped calibration
    profile, or the roofline)."""
    from rich.table import Table

    cols = [("name", "name"), ("bf16_tflops", "BF16 TFLOP/s"), ("fp8_tflops", "FP8 TFLOP/s"), ("hbm_gib", "HBM GiB"),
            ("hbm_tbps", "HBM TB/s"), ("sms", "SMs"), ("sm_clock_mhz", "clock MHz"), ("nvlink_gbps", "NVLink GB/s"),
            ("nvlink_gpus", "NVLink GPUs"), ("pcie_gbps", "PCIe GB/s"), ("priced_by", "priced by")]
    table = Table(title="gpus", title_justify="left")
    for key, title in cols:
        table.add_column(title, justify="left" if key in ("name", "priced_by") else "right",
                         style="bold" if key == "name" else None)
    for g in gpus:
        table.add_row(*(_cell(g.get(key)) if key in g else DASH for key, _ in cols))
    return table


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.6g}"
    if isinstance(value, (list, tuple)):
        if all(not isinstance(v, (dict, list)) for v in value):
            return ", ".join(str(v) for v in value)
        return f"[{len(value)} items]"
    if isinstance(value, Mapping):
        return f"{{{len(value)} fields}}"
    return str(value)


def _catalog_table(title: str, value: Any) -> RichTable:
    """A table of catalog entries (a name → entry mapping or a list of entries/names)."""
    from rich.table import Table

    if isinstance(value, Mapping):
        entries = [(str(k), v) for k, v in value.items()]
    elif isinstance(value, list):
        entries = [(str(e.get("name", i)) if isinstance(e, Mapping) else str(e), e) for i, e in enumerate(value)]
    else:
        entries = [(title, value)]
    columns: list[str] = []
    for _, e in entries:
        if isinstance(e, Mapping):
            columns += [k for k in e if k != "name" and k not in columns]
    if len(columns) > 5 and all(isinstance(e, Mapping) for _, e in entries):
        # Wide entries (GPU and model specs): one column per entry, one row per field.
        wide = Table(title=title, title_justify="left")
        wide.add_column("field", style="bold")
        for name, _ in entries:
            wide.add_column(name, justify="right", no_wrap=True)
        for c in columns:
            wide.add_row(c, *(_cell(e[c]) if c in e else DASH for _, e in entries))
        return wide
    table = Table(title=title, title_justify="left")
    table.add_column("name", style="bold")
    if not columns and any(not isinstance(e, (Mapping, str)) for _, e in entries):
        table.add_column("value")
    for c in columns:
        table.add_column(c)
    for name, e in entries:
        if isinstance(e, Mapping):
            table.add_row(name, *(_cell(e[c]) if c in e else DASH for c in columns))
        elif isinstance(e, str) or columns:
            table.add_row(name, *([DASH] * len(columns)))
        else:
            table.add_row(name, _cell(e))
    return table


@command("validate", scenario_arg, trace_opts, seed_opt, set_opt)
def validate(scenario: Optional[str], trace: Optional[str], trace_format: Optional[str], seed: Optional[int],
             sets: Sequence[str]) -> None:
    """Check a scenario and print it resolved (presets expanded) as JSON."""
    import json

    sc = _load(scenario, seed, sets, trace, trace_format)
    resolved = sc.validate()
    print(json.dumps(resolved, indent=2))
    _echo(f"{sc.source}: valid", "bold green", err=True)


def _check_opts(p: Parser) -> None:
    p.argument("scenario", type=existing_file, metavar="SCENARIO", help="A .toml or .json scenario file.")
    p.option("--max-states", type=int_range(1), default=2_000_000, show_default=True, metavar="INTEGER",
             help="Stop after this many states.")
    p.option("--max-seconds", type=positive_float, default=None, metavar="FLOAT", help="Stop after this much wall time.")
    p.option("--timeliness-steps", type=int_range(0, 200), default=2, show_default=True, metavar="INTEGER",
             help="Steps an urgent request may wait while a less urgent one runs (priority policies).")
    p.option("--json", dest="json_out", metavar="OUT",
             help="Write the whole result (counterexamples, Petri net) as JSON ('-': stdout).")
    p.option("--pnml", dest="pnml_out", metavar="OUT", help="Write the policy's Petri net as PNML ('-': stdout).")
    p.option("--replay", dest="replay_dir", metavar="DIR",
             help="Write each counterexample's replay scenario to DIR/<property>.json.")


@command("check", _check_opts, seed_opt, set_opt)
def check_cmd(
    scenario: str,
    max_states: int,
    max_seconds: Optional[float],
    timeliness_steps: int,
    json_out: Optional[str],
    pnml_out: Optional[str],
    replay_dir: Optional[str],
    seed: Optional[int],
    sets: Sequence[str],
) -> Optional[int]:
    """Model-check SCENARIO's scheduler over every order of arrivals and step completions
    (and, with a topology, of its link_down/link_up events and KV arrivals).

    Exit status: 0 every property holds on every reachable state; 1 a property is violated
    (the shortest counterexample is printed); 3 no violation found but the search stopped
    early (max states, seconds or memory); 2 an error.
    """
    import json

    if json_out == "-" and pnml_out == "-":
        raise UsageError("only one of --json and --pnml can go to stdout ('-')", "--pnml")
    _check_out(json_out, "--json")
    _check_out(pnml_out, "--pnml")
    _check_out(replay_dir, "--replay", directory=True)
    from .api import check

    sc = _load(scenario, seed, sets)
    with _progress_bar() as bar:
        task = bar.add_task("checking", total=None, detail="")

        def on_progress(p: CheckProgress) -> None:
            bar.update(task, detail=f"{p.states:,} states · {p.states_per_s:,.0f} states/s · depth {p.depth} · "
                                    f"frontier {p.frontier:,} · {p.violations} violation(s)")

        result = check(sc, max_states=max_states, max_seconds=max_seconds, timeliness_steps=timeliness_steps,
                       progress=on_progress)
    _print_check(result, sc, _tables("-" if "-" in (json_out, pnml_out) else None))
    if json_out:
        _write(json_out, result.to_json())
    if pnml_out:
        _write(pnml_out, result.pnml)
    if replay_dir:
        from pathlib import Path

        Path(replay_dir).mkdir(parents=True, exist_ok=True)
        for v in result.violations:
            raw = v.data.get("replay_scenario")
            if raw is not None:
                _write(str(Path(replay_dir) / f"{v.property}.json"), json.dumps(raw, indent=2))
    if result.violations:
        return 1
    if not result.complete:
        return 3
    return None


def _print_check(result: CheckResult, sc: Scenario, out: Any = None) -> None:
    from rich.table import Table

    out = out or _out()
    c = result.config
    head = Table(title=f"o1sim check · {sc.source}", show_header=False, title_justify="left")
    head.add_column("what", style="bold")
    head.add_column("value", justify="right")
    bug = f" (inject_bug = {c['inject_bug']})" if c.get("inject_bug") else ""
    head.add_row("policy", f"{c['policy']}{bug}")
    head.add_row("requests / replicas / KV blocks per replica", f"{c['requests']} / {c['replicas']} / {c['units_per_replica']}")
    if not c.get("prefix_caching", False):
        head.add_row("prefix caching", "off (cache contents are not part of a checked state)")
    if c.get("links"):
        head.add_row("links going down and up", ", ".join(c["links"]))
    head.add_row("states / transitions", f"{result.states:,} / {result.transitions:,}")
    head.add_row("longest shortest path", f"{result.max_depth}")
    head.add_row("search", "complete" if result.complete else f"incomplete: {result.stopped}")
    head.add_row("time (s) / states per s", f"{result.elapsed_s:.3f} / {result.states_per_s:,.0f}")
    out.print(head)
    props = Table(title="properties", title_justify="left")
    props.add_column("property", style="bold")
    props.add_column("result")
    colour = {"pass": "green", "fail": "bold red", "unknown": "yellow", "not_applicable": "dim"}
    for name, status in result.properties.items():
        props.add_row(name, f"[{colour.get(status, '')}]{status}[/]")
    out.print(props)
    for v in result.violations:
        t = Table(title=f"counterexample: {v.property} ({v.length} steps) — {v.message}", title_justify="left")
        t.add_column("#", justify="right")
        t.add_column("event")
        t.add_column("what changed")
        for step in v.trace:
            t.add_row(str(step["step"]), step["text"], "\n".join(step["changes"]) or DASH)
        out.print(t)
        if v.replay_trace is not None:
            out.print(f"this order has no replay: {v.replay_note}", markup=False, highlight=False)
            t = Table(title=f"replayed order: {v.property} ({len(v.replay_trace)} steps)", title_justify="left")
            t.add_column("#", justify="right")
            t.add_column("ms", justify="right")
            t.add_column("event")
            t.add_column("what changed")
            for step in v.replay_trace:
                at = step.get("at_ms")
                t.add_row(str(step["step"]), DASH if at is None else f"{at:g}", step["text"], "\n".join(step["changes"]) or DASH)
            out.print(t)
        if v.reproduced is not None:
            verdict = "reproduced" if v.reproduced else "NOT reproduced"
            out.print(f"replayed as a simulation: {verdict} ({v.data.get('replay_message')})", markup=False, highlight=False)
        elif v.replay_note:
            out.print(f"no replay scenario: {v.replay_note}", markup=False, highlight=False)
    if result.ok:
        out.print("all properties hold on every reachable state", style="bold green")
    elif not result.violations:
        out.print(f"no violation found, but the search is incomplete ({result.stopped})", style="yellow")


def _batch_item(text: str) -> list[dict[str, int]]:
    """``NEW:CTX`` or ``NEW:CTXxCOUNT`` (COUNT identical requests) → batch entries."""
    import re

    m = re.fullmatch(r"\s*(-?\d+)\s*(?::\s*(-?\d+))?\s*(?:[xX*]\s*(\d+))?\s*", text)
    if not m:
        raise UsageError(f"{text!r}: expected NEW[:CONTEXT][xCOUNT], e.g. 2048:0 or 1:1023x64", "--batch")
    new, ctx, count = int(m.group(1)), int(m.group(2) or 0), int(m.group(3) or 1)
    return [{"new_tokens": new, "context_tokens": ctx}] * count


def _preset_or_table(text: str) -> Any:
    return _parse_value(text) if text.lstrip().startswith("{") else text


def _predict_opts(p: Parser) -> None:
    p.option("--model", default="llama-3-8b", show_default=True,
             help="Model preset or Hugging Face id, or a TOML table such as '{preset=\"llama-3-70b\", layers=8}' or "
                  "'{hf_config=\"config.json\"}'.")
    p.option("--gpu", default="h200", show_default=True, help="GPU preset, or a TOML table.")
    p.option("--tp", type=int, default=1, show_default=True, metavar="INTEGER", help="Tensor-parallel degree.")
    p.option("--batch", action="append", required=True, metavar="NEW[:CTX][xN]",
             help="Requests in the step: NEW tokens over CTX cached ones, N times (repeatable). 2048:0 is a prefill, "
                  "1:1023x64 64 decodes at KV length 1024.")
    p.flag("--eager", help="Launch kernels eagerly instead of replaying a CUDA graph.")
    p.option("--dtype", default="bf16", show_default=True, help="bf16 | fp8 | int8 | int4 (weight-only).")
    p.option("--kv-dtype", default="bf16", show_default=True, help="bf16 | fp8.")
    from . import registry

    p.option("--engine", default="vllm", show_default=True, choices=registry.engine_names(),
             help="The engine whose kernels price the step: "
                  + "; ".join(f"{e['name']} ({e['label']}: {e['summary']})" for e in registry.engines()) + ".")
    p.option("--fusion", default="none", show_default=True, help="none | fine | coarse | hybrid (reference engine).")
    p.option("--profile", type=not_a_folder, default=None, metavar="FILE",
             help="Calibration profile JSON replacing the GPU's shipped one (tools/make_profile.py, o1sim calibrate).")
    p.flag("--json", dest="as_json", help="Print the prediction as JSON.")


@command("predict", _predict_opts)
def predict(model: str, gpu: str, tp: int, batch: Sequence[str], eager: bool, dtype: str, kv_dtype: str, engine: str,
            fusion: str, profile: Optional[str], as_json: bool) -> None:
    """Predict the execution time of one step, per operator with its source."""
    import json

    from rich.table import Table

    from .api import predict_step

    items = [entry for b in batch for entry in _batch_item(b)]
    p = predict_step(_preset_or_table(model), _preset_or_table(gpu), tp=tp, batch=items, cuda_graphs=not eager,
                     dtype=dtype, fusion=fusion, kv_dtype=kv_dtype, profile=profile, engine=engine)
    if as_json:
        print(json.dumps({"total_ms": p.total_ms, "mode": p.mode, "profile": p.profile,
                               "breakdown": [o._asdict() for o in p.breakdown]}, indent=2))
        return
    table = Table(title=f"{len(items)} request(s), {p.mode} — {p.total_ms:,.3f} ms", title_justify="left")
    table.add_column("op", style="bold")
    table.add_column("ms", justify="right")
    table.add_column("share", justify="right")
    table.add_column("source")
    for o in p.breakdown:
        table.add_row(o.op, f"{o.ms:,.4f}", f"{o.ms / p.total_ms:.1%}" if p.total_ms > 0 else DASH, o.source)
    _out().print(table)
    _echo(f"profile: {p.profile or 'none (roofline from datasheet numbers)'}", err=True)


def _calibrate_opts(p: Parser) -> None:
    p.argument("runs", nargs="+", type=existing_path, metavar="RUNS",
               help="inference-perf result directories or vLLM benchmark_serving JSON files.")
    p.option("--gpu", required=True, help="The GPU preset the runs ran on (the runs do not record it).")
    p.option("--server", action="append", default=[], metavar="KEY=VALUE",
             help="The server's settings where the runs do not record them: model, tp, max_num_seqs, "
                  "max_num_batched_tokens, max_model_len, block_size, gpu_memory_utilization (repeatable).")
    p.option("-o", "--out", dest="out", metavar="OUT", help="Write the calibration profile (JSON) here.")
    p.option("--per", choices=["all", "deployment"], default="all", show_default=True,
             help="One profile for all runs, or one per deployment (model and TP) in the cross-validation.")
    p.option("--holdout", choices=["workload", "model", "run", "none"], default="workload", show_default=True,
             help="Cross-validation: hold out each workload (the same benchmark on every deployment), model or run in turn.")
    p.flag("--wide", help="Show every column, however wide (default: the columns that fit the terminal).")


@command("calibrate", _calibrate_opts)
def calibrate(runs: Sequence[str], gpu: str, server: Sequence[str], out: Optional[str], per: str, holdout: str,
              wide: bool) -> None:
    """Fit the GPU's kernel speed and the serving front end to measured runs (inference-perf
    result directories, vLLM benchmark_serving JSON) and write a profile scenarios name in
    cost_model.profile. Prints each run's error at defaults, fitted, and held out."""
    import json

    from . import calibrate as cal
    from ._cli_io import fitted_table, table_width

    measured = cal.read_runs(runs, gpu=gpu, server=cal.parse_server(server))
    if not measured:
        raise UsageError("no runs found", "RUNS")
    with _progress_bar() as bar:
        task = bar.add_task("calibrate", total=None, detail="")
        ev = cal.calibrate(measured, gpu, per=per, holdout_by=holdout, progress=lambda msg: bar.update(task, description=msg.strip()[:60]))
    def cell(errs: Optional[Mapping[str, float]]) -> str:
        return DASH if errs is None else " / ".join(f"{errs[k]:+.1%}" for k in ("ttft", "e2e", "itl"))

    rows: list[tuple[list[str], Optional[str]]] = []
    for r in measured:
        if r.saturated:
            rows.append(([r.name, "saturated", DASH, DASH, DASH], None))
            continue
        rows.append(([r.name, f"{r.ttft_ms:,.1f}", cell(ev.defaults.get(r.name)), cell(ev.in_sample.get(r.name)),
                      cell(ev.held_out.get(r.name))], None))
    columns = [("run", "run", "left"), ("TTFT ms", "TTFT ms", "right"), ("defaults", "defaults", "right"),
               ("fitted", "fitted", "right"), ("held out", "held out", "right")]
    console = _out()
    table, left_out = fitted_table(f"{len(measured)} run(s) on {gpu}: error of mean TTFT / E2E / ITL", columns, rows,
                                   console.width, ["run", "held out", "fitted", "defaults", "TTFT ms"], wide=wide)
    if wide:
        natural = [max([len(h), *(len(c[i]) for c, _ in rows)]) for i, (_, h, _) in enumerate(columns)]
        console.width = max(console.width, table_width(natural))
        console.print(table)
    else:
        console.print(table)
    if left_out:
        console.print(f"not shown (terminal too narrow): {', '.join(left_out)} — --wide shows every column",
                      style="dim", markup=False, highlight=False)
    for which, label in (("defaults", "defaults"), ("in_sample", "fitted (in sample)"), ("held_out", f"held out by {holdout}")):
        m = [ev.mape(which, k) for k in ("ttft", "e2e", "itl")]
        _out().print(f"MAPE {label:24} TTFT {m[0]:6.1%}  E2E {m[1]:6.1%}  ITL {m[2]:6.1%}", markup=False, highlight=False)
    prof = ev.profile
    prof["fit"] = {
        "runs": [r.name for r in measured if not r.saturated],
        "mape": {w: {k: ev.mape(w, k) for k in ("ttft", "e2e", "itl")} for w in ("defaults", "in_sample", "held_out")},
        "holdout": holdout,
    }
    _out().print(f"gpu_time_scale {prof.get('gpu_time_scale')}, frontend {prof.get('frontend')}", markup=False, highlight=False)
    if out:
        _write(out, json.dumps(prof, indent=1) + "\n")
        _echo(f"name it in a scenario: cost_model.profile = \"{out}\"", "dim", err=True)


def _dashboard_opts(p: Parser) -> None:
    p.option("--port", type=int_range(1, 65535), default=8501, show_default=True, metavar="INTEGER",
             help="Port to serve the dashboard on.")
    p.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (127.0.0.1: this machine only).")
    p.flag("--no-browser", help="Do not open a browser window.")


@command("dashboard", _dashboard_opts)
def dashboard(port: int, host: str, no_browser: bool) -> int:
    """Open the dashboard: scenario editor, policy comparison, charts and downloads (Streamlit)."""
    import importlib.util
    import subprocess

    if importlib.util.find_spec("streamlit") is None:
        _fail(RuntimeError("the dashboard needs Streamlit: pip install 'o1sim[dashboard]'"))
        return 2
    from .dashboard import APP_PATH

    cmd = [sys.executable, "-m", "streamlit", "run", str(APP_PATH), "--server.port", str(port),
           "--server.address", host, "--server.headless", "true" if no_browser else "false",
           "--browser.gatherUsageStats", "false", "--client.toolbarMode", "minimal"]
    if os.name == "posix":
        # Become the server (exec): a signal to `o1sim dashboard` (Ctrl-C, a supervisor's or a
        # test's terminate) reaches Streamlit itself instead of orphaning it.
        sys.stdout.flush()
        os.execv(sys.executable, cmd)
    return subprocess.call(cmd)


def _report_opts(p: Parser) -> None:
    p.option("-o", "--output", dest="output", default="report.html", show_default=True, metavar="OUT",
             help="Where to write the HTML report.")
    policies_opt(p)


@command("report", scenario_arg, _report_opts, trace_opts, seed_opt, set_opt)
def report(scenario: Optional[str], output: str, policies: list[str], trace: Optional[str], trace_format: Optional[str],
           seed: Optional[int], sets: Sequence[str]) -> Optional[int]:
    """Write one self-contained HTML file comparing the policies (tables and charts; opens offline)."""
    import importlib.util

    names = policies
    if importlib.util.find_spec("vl_convert") is None or importlib.util.find_spec("altair") is None:
        _fail(RuntimeError("the report needs Altair and vl-convert: pip install 'o1sim[dashboard]'"))
        return 2
    from .report import write_report

    _check_out(output, "--output")
    base = _load(scenario, seed, sets, trace, trace_format)
    with _progress_bar() as bar:
        task = bar.add_task("report", total=len(names), detail="")

        def on_run(policy: str, i: int, n: int) -> None:
            bar.update(task, completed=i, description=f"{policy} ({i + 1}/{n})")

        _, failures = write_report(base, names, output, on_run=on_run)
    _echo(f"wrote {output}", "dim", err=True)
    if failures:
        detail = "; ".join(f"{name}: {type(err).__name__}: {err}" for name, err in failures.items())
        _echo(_one_line(f"{len(failures)} of {len(names)} run(s) failed: {detail}"), "bold red", err=True)
        return 2
    return None


# --------------------------------------------------------------------------- web page


def _web_opts(p: Parser) -> None:
    p.option("--port", type=int_range(0, 65535), default=8000, show_default=True, metavar="INTEGER",
             help="Port to listen on (0 picks a free one).")
    p.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
    p.option("--dir", dest="directory", type=not_a_file, metavar="PATH",
             help="Folder to serve (default: web/ of the source tree).")


@command("web", _web_opts)
def web_cmd(port: int, host: str, directory: Optional[str]) -> Optional[int]:
    """Serve the in-browser page (a plain static server of web/; build it with `make web`)."""
    import http.server
    import mimetypes
    from pathlib import Path

    root = (Path(directory) if directory else web_dir()).resolve()
    if not (root / "index.html").is_file():
        _fail(RuntimeError(f"no page at {root} (run from a source checkout, or pass --dir)"), "Error")
        return 2
    if not (root / "pkg" / "o1sim.wasm").is_file():
        _fail(RuntimeError(f"{root / 'pkg' / 'o1sim.wasm'} is missing: run `make web` first"), "Error")
        return 2
    mimetypes.add_type("application/wasm", ".wasm")
    mimetypes.add_type("text/javascript", ".js")

    from ._web import page_handler

    server = http.server.ThreadingHTTPServer((host, port), page_handler(root))
    shown = "127.0.0.1" if host in ("", "0.0.0.0") else host
    _echo(f"o1sim page: http://{shown}:{server.server_address[1]}/  (serving {root}; Ctrl-C to stop)")
    sys.stdout.flush()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return None


def _seed_report_opts(p: Parser) -> None:
    p.option("-o", "--output", dest="output", default="docs/seed-claims.md", show_default=True, type=not_a_folder,
             metavar="PATH", help="Markdown report; the HTML one goes next to it.")
    p.option("--html", dest="html_out", default=None, type=not_a_folder, metavar="PATH",
             help="HTML report (default: the Markdown path with .html).")


@command("seed-report", _seed_report_opts)
def seed_report_cmd(output: str, html_out: Optional[str]) -> None:
    """Test the seed article's numeric claims: run each under a stated setup and write the
    verdicts (reproduced / refuted / not reproducible, and why) as Markdown and HTML."""
    from pathlib import Path

    from . import seed_report

    # the folders must exist: a mistyped path is an error, not a new folder
    _check_out(output, "--output")
    _check_out(html_out or str(Path(output).with_suffix(".html")), "--html")
    out = _out()

    def on_claim(c: seed_report.Claim) -> None:
        out.print(f"{c.section} {c.title}: [bold]{c.verdict}[/bold] ({c.seconds:.1f} s)")

    claims = seed_report.write(Path(output), Path(html_out) if html_out else None, on_claim=on_claim)
    counts = {v: sum(c.verdict == v for c in claims) for v in seed_report.VERDICTS}
    html_path = html_out or str(Path(output).with_suffix(".html"))
    out.print(f"{len(claims)} claims: " + ", ".join(f"{n} {v}" for v, n in counts.items()) + f" → {output}, {html_path}")


def _routes_opts(p: Parser) -> None:
    p.argument("topology", metavar="TOPOLOGY", help="A preset name, a .toml/.json file, or an inline TOML table.")
    p.argument("src", metavar="SRC", help="The route's first node.")
    p.argument("dst", metavar="DST", help="The route's last node.")
    p.option("--down", action="append", default=[], metavar="A:B",
             help="The link between nodes A and B is down (repeatable): routes as the simulation re-routes after "
                  "link_down events at t = 0.")
    p.flag("--json", dest="as_json", help="Print the candidates as JSON.")


@command("routes", _routes_opts)
def routes_cmd(topology: str, src: str, dst: str, down: Sequence[str], as_json: bool) -> None:
    """RTMPv2 candidate routes from SRC to DST on TOPOLOGY (a preset name, a .toml/.json
    file, or an inline TOML table), with bandwidth, latency, score, the chosen route and
    the Pareto frontier."""
    import json

    from rich.table import Table

    from .topology import routes

    pairs: list[tuple[str, str]] = []
    for item in down:
        a, sep, b = item.partition(":")
        if not sep or not a or not b or ":" in b:
            raise UsageError(f"expected A:B (two node ids), got {item!r}", "--down")
        pairs.append((a, b))
    cands = routes(_preset_or_table(topology), src, dst, down=pairs)
    if as_json:
        print(json.dumps(cands, indent=2))
        return
    if not cands:
        why = "the links down cut them apart" if down else "they are not connected"
        print(f"no route from {src} to {dst}: {why}")
        return
    title = f"routes {src} → {dst}" + (f" (down: {', '.join(down)})" if down else "")
    table = Table(title=title, title_justify="left")
    for col, just in (("", "left"), ("path", "left"), ("GB/s", "right"), ("µs", "right"), ("score", "right"), ("frontier", "left")):
        table.add_column(col, justify=just)  # type: ignore[arg-type]
    for c in cands:
        table.add_row("✓" if c["chosen"] else "", " → ".join(c["path"]), f"{c['bandwidth_gbps']:,.4g}", f"{c['latency_us']:,.4g}",
                      f"{c['score']:.4f}", "yes" if c["frontier"] else "")
    _out().print(table)


# The many-run commands live in their own module (it registers them in COMMANDS).
from . import cli_search  # noqa: E402, F401

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
