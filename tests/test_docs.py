"""The documents a reader meets: every link in README.md, DEVELOPERS.md and docs/*.md leads to
a file of the repository (and its #anchor to a heading there), nothing points outside the
repository, and every `o1sim` command the README shows exists with the options it names."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from clikit import invoke

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", ROOT / "DEVELOPERS.md", ROOT / "benchmarks" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces → hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    headings = {_slug(m) for m in re.findall(r"^#{1,6} (.+)$", text, flags=re.M)}
    return headings | set(re.findall(r"""<a (?:id|name)=["']([^"']+)["']""", text))


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_links_lead_to_files_and_headings_of_the_repository(doc: Path) -> None:
    for target in LINK.findall(doc.read_text(encoding="utf-8")):
        if re.match(r"https?://", target):
            continue
        file_part, _, anchor = target.partition("#")
        dest = (doc.parent / file_part).resolve() if file_part else doc
        assert dest.is_relative_to(ROOT), f"{doc.name}: {target} points outside the repository"
        assert dest.exists(), f"{doc.name}: {target}: no such file"
        if anchor and dest.suffix == ".md":
            assert anchor in _anchors(dest), f"{doc.name}: {target}: no heading '{anchor}' in {dest.name}"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_nothing_points_outside_the_repository(doc: Path) -> None:
    """Every relative path that climbs (``../x``), in a link or in the text, stays inside the
    repository once resolved from the document's folder; no absolute path of this machine."""
    text = doc.read_text(encoding="utf-8")
    climbing = re.findall(r"(?<![\w.])((?:\.\./)+[\w.-][\w./-]*)", text)
    outside = [p for p in climbing if not (doc.parent / p).resolve().is_relative_to(ROOT)]
    assert not outside, f"{doc.name} points outside the repository: {outside}"
    assert not re.findall(r"(?<![\w.])/(?:work|home|tmp|root)/[\w.-]+", text), f"{doc.name} names a path of this machine"


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    joined = "\n".join(re.findall(r"```sh\n(.*?)```", text, flags=re.S)).replace("\\\n", " ")
    return [ln.split("#")[0].strip() for ln in joined.splitlines() if ln.strip().startswith("o1sim ")]


def test_every_o1sim_command_in_the_readme_exists_with_its_options() -> None:
    commands = _readme_commands()
    assert len(commands) >= 15, commands
    for line in commands:
        sub = line.split()[1]
        res = invoke([sub, "--help"], width=200)
        assert res.exit_code == 0, f"README: `{line}`: {res.output}"
        for opt in re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", line):
            assert opt in res.output, f"README: `{line}`: `o1sim {sub}` has no {opt}"
