"""``o1sim seed-report``: the seed article's numeric claims, each run under a stated setup
and given a verdict — reproduced, refuted or not reproducible, and why.

The seed (``seed/`` in the project's shared material, Chinese) describes "O1-Pro", an LLM
scheduler, with figures for operator fusion (§2.1), RTMPv2 routing (§2.3), tile rules
(§2.4), context remapping (§2.5), decision latency (§3.3), cold start (§4.2), long-context
P99 latency (§4.3) and a malicious-prompt defence (§4.4). It is partly speculative and its
arithmetic is sometimes wrong; o1sim implements its mechanisms (DESIGN.md) so that each
claim can be checked by running them rather than trusting them.

Each claim is a function returning a :class:`Claim`: what the seed says, what we ran, the
numbers, a verdict and the reason. Verdicts follow the numbers (thresholds in the code),
so a model change that moves a number can flip a verdict; timings (§4.2) are this
machine's. :func:`write` renders Markdown and HTML from the same data.
"""

from __future__ import annotations

import html
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Optional

from .. import _core
from ._claim import NOT_REPRODUCIBLE, REFUTED, REPRODUCED, VERDICTS, Claim
from .mechanisms import (
    alpha_table,
    decision_latency,
    fusion_effect,
    fusion_rules,
    hysteresis,
    model_check,
    remap,
    tiles,
)
from .serving import (
    adversarial_flood,
    adversarial_memory,
    cold_start,
    fragmentation,
    ordering_sweep,
    p99_order,
    python_figures,
    topology_switch,
    urgent_requests,
)

__all__ = ["Claim", "CLAIMS", "VERDICTS", "run_claims", "render_markdown", "render_html", "write"]

# --------------------------------------------------------------------------- report

#: The claims, in the seed's order.
CLAIMS: tuple[Callable[[], Claim], ...] = (
    fusion_rules, fusion_effect, alpha_table, hysteresis, tiles, remap, model_check, urgent_requests, decision_latency,
    cold_start, topology_switch, python_figures, p99_order, ordering_sweep, fragmentation,
    adversarial_flood, adversarial_memory,
)


def run_claims(claims: Sequence[Callable[[], Claim]] = CLAIMS, on_claim: Optional[Callable[[Claim], None]] = None) -> list[Claim]:
    """Run every claim's experiment (each timed)."""
    out = []
    for fn in claims:
        t0 = time.perf_counter()
        c = fn()
        c.seconds = time.perf_counter() - t0
        out.append(c)
        if on_claim is not None:
            on_claim(c)
    return out


INTRO = (
    "What the simulator shows about each numeric claim of the seed article (the O1-Pro "
    "write-up in the project's `seed/`, Chinese; partly speculative). Every row below was "
    "produced by `o1sim seed-report`, which reruns all of it; the setups are stated, and a "
    "verdict says whether the claim is **reproduced**, **refuted** or **not reproducible** "
    "(the seed does not give enough to rerun it), and why. Simulated numbers are "
    "deterministic; timings (§4.2) are this machine's."
)


def render_markdown(claims: Sequence[Claim]) -> str:
    """The report as Markdown."""
    lines = [f"# The seed's claims, tested (o1sim {_core.__version__})", "", INTRO, "",
             "| § | claim | verdict |", "|---|---|---|"]
    for i, c in enumerate(claims, 1):
        lines.append(f"| {c.section} | [{c.title}](#claim-{i}) | **{c.verdict}** |")
    for i, c in enumerate(claims, 1):
        lines += ["", f'<a id="claim-{i}"></a>', f"## {c.section} {c.title}", "",
                  f"**The seed:** {c.claim}", "", f"**Setup:** {c.setup}", ""]
        if c.table:
            head, *body = c.table
            lines.append("| " + " | ".join(head) + " |")
            lines.append("|" + "---|" * len(head))
            lines += ["| " + " | ".join(r) + " |" for r in body]
            lines.append("")
        lines.append(f"**Verdict: {c.verdict}.** {c.why}")
    lines.append("")
    return "\n".join(lines)


def _inline(text: str) -> str:
    """Markdown's `code` and **bold** in escaped HTML."""
    t = html.escape(text)
    t = re.sub(r"`([^`]+)`", r"<code>\1</code>", t)
    return re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", t)


def render_html(claims: Sequence[Claim]) -> str:
    """The report as one self-contained HTML page."""
    colour = {REPRODUCED: "#2a9d5b", REFUTED: "#c0392b", NOT_REPRODUCIBLE: "#7f8c8d"}
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>The seed's claims, tested (o1sim {html.escape(_core.__version__)})</title>",
        "<style>body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}"
        "table{border-collapse:collapse;margin:.6rem 0}td,th{border:1px solid #ccc;padding:.2rem .5rem;text-align:left}"
        "th{background:#f3f3f3}.v{font-weight:700;color:#fff;padding:.05rem .4rem;border-radius:3px}"
        "code{background:#f3f3f3;padding:0 .2rem}</style></head><body>",
        f"<h1>The seed's claims, tested <small>(o1sim {html.escape(_core.__version__)})</small></h1>",
        f"<p>{_inline(INTRO)}</p><table><tr><th>§</th><th>claim</th><th>verdict</th></tr>",
    ]
    for i, c in enumerate(claims, 1):
        parts.append(f"<tr><td>{html.escape(c.section)}</td><td><a href='#claim-{i}'>{_inline(c.title)}</a></td>"
                     f"<td><span class='v' style='background:{colour[c.verdict]}'>{c.verdict}</span></td></tr>")
    parts.append("</table>")
    for i, c in enumerate(claims, 1):
        parts.append(f"<h2 id='claim-{i}'>{html.escape(c.section)} {_inline(c.title)}</h2>")
        parts.append(f"<p><strong>The seed:</strong> {_inline(c.claim)}</p><p><strong>Setup:</strong> {_inline(c.setup)}</p>")
        if c.table:
            head, *body = c.table
            parts.append("<table><tr>" + "".join(f"<th>{_inline(h)}</th>" for h in head) + "</tr>")
            parts += ["<tr>" + "".join(f"<td>{_inline(x)}</td>" for x in r) + "</tr>" for r in body]
            parts.append("</table>")
        parts.append(f"<p><span class='v' style='background:{colour[c.verdict]}'>{c.verdict}</span> {_inline(c.why)}</p>")
    parts.append("</body></html>\n")
    return "\n".join(parts)


def write(markdown_path: Path, html_path: Optional[Path] = None,
          on_claim: Optional[Callable[[Claim], None]] = None) -> list[Claim]:
    """Run the claims and write the Markdown report (and the HTML one, by default next to
    it with the ``.html`` suffix)."""
    claims = run_claims(on_claim=on_claim)
    markdown_path.parent.mkdir(parents=True, exist_ok=True)
    markdown_path.write_text(render_markdown(claims), encoding="utf-8")
    html_path = html_path or markdown_path.with_suffix(".html")
    html_path.parent.mkdir(parents=True, exist_ok=True)
    html_path.write_text(render_html(claims), encoding="utf-8")
    return claims
