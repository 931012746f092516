"""The page's layout in Chromium: no horizontal overflow at 800 px (the summary table scrolls
in its own box), a legend for the link colours of the topology graph that matches the
colours drawn, and a scale under the GPU × time heatmap that matches its ramp."""

from __future__ import annotations

from typing import Any

import pytest

from pagekit import OUT, runs, wait_ready


@pytest.mark.parametrize("width", [800, 1024, 1440])
def test_the_page_never_overflows_horizontally(browser: Any, server: str, width: int) -> None:
    ctx = browser.new_context(viewport={"width": width, "height": 900})
    pg = ctx.new_page()
    try:
        pg.goto(server + "#topology=hgx-h200")
        wait_ready(pg)
        pg.wait_for_selector("#topology svg g.link")
        scroll, client = pg.evaluate("[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
        assert scroll <= client, f"{scroll} px of content in a {client} px window"
        OUT.mkdir(exist_ok=True)
        pg.screenshot(path=str(OUT / f"page-{width}.png"), full_page=True)
    finally:
        ctx.close()


def test_link_colours_and_the_heatmap_have_a_legend(page: Any, server: str) -> None:
    page.goto(server + "#policies=vllm")
    wait_ready(page)
    before = runs(page)
    page.select_option("#topology-preset", "hgx-h200")
    page.wait_for_function("n => Number(document.body.dataset.runs) > n && document.body.dataset.runs === document.body.dataset.started && document.querySelector('#topology svg g.link')",
                           arg=before)
    legend = page.locator("#topology [data-role=link-legend]")
    assert legend.count() == 1
    text = legend.text_content() or ""
    for word in ("utilisation", "25% or more", "down", "edited", "route"):
        assert word in text, text
    # The ramp's ends are the colours the graph gives an idle and a 25%-busy link.
    ramp = legend.locator(".ramp").evaluate("e => e.style.background")
    rgb = page.evaluate("""cs => cs.map(c => { const d = document.createElement('div'); d.style.color = c;
        document.body.append(d); const v = getComputedStyle(d).color; d.remove(); return v; })""",
                        ["hsl(210 65% 50%)", "hsl(0 65% 50%)"])
    assert f"{rgb[0]} 0%" in ramp and f"{rgb[1]} 100%" in ramp, (ramp, rgb)
    wires = page.evaluate("() => [...document.querySelectorAll('#topology svg line.wire')].map(l => l.style.stroke)")
    assert wires and all(w.startswith("rgb(") for w in wires), wires
    # The heatmap's scale spans its ramp: idle and fully busy.
    scale = page.locator("#heat-scale")
    assert scale.count() == 1 and "busy 0%" in (scale.text_content() or "") and "100%" in (scale.text_content() or "")
    bg = scale.locator(".ramp").evaluate("e => getComputedStyle(e).backgroundImage")
    assert "rgb(255, 250, 255)" in bg and "rgb(55, 110, 225)" in bg, bg
