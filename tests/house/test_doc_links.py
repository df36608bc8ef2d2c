"""Every relative link of README.md and docs/*.md leads to a file of the repository, and every
`#anchor` to a heading of the page it names: a reader of the published docs (or of a wheel's
sdist) has no other checkout beside this one to follow a link into."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|^\[[^\]]+\]:\s*(\S+)", re.MULTILINE)
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def anchors(page: Path) -> set[str]:
    """GitHub's anchors of a page's headings: lower case, punctuation dropped, spaces to hyphens."""
    found: set[str] = set()
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*$", FENCE.sub("", page.read_text(encoding="utf-8")), re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        candidate, n = slug, 0
        while candidate in found:
            n += 1
            candidate = f"{slug}-{n}"
        found.add(candidate)
    return found


def links(page: Path) -> list[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    text = re.sub(r"`[^`\n]*`", "", text)  # code spans show links, they do not make them
    return [a or b for a, b in LINK.findall(text)]


def broken(page: Path, root: Path = ROOT) -> list[str]:
    found = []
    for target in links(page):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.is_relative_to(root):
            found.append(f"{target}: outside the repository")
        elif not file.exists():
            found.append(f"{target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            found.append(f"{target}: no heading #{anchor} in {file.relative_to(root)}")
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves_inside_the_repository(page: Path) -> None:
    assert broken(page) == []


def test_the_check_sees_a_link_outside_a_missing_file_and_a_missing_anchor(tmp_path: Path) -> None:
    assert anchors(ROOT / "docs" / "collector.md") >= {"the-dashboard", "srtds-richer-feed-each-jobs-journal"}
    repo = tmp_path / "repo"
    (repo / "docs").mkdir(parents=True)
    (repo / "docs" / "collector.md").write_text("# The collector\n\n## Its `limits`, in full\n")
    probe = repo / "docs" / "probe.md"
    probe.write_text(
        "# Top\n\n[a](../../shared/x.md) [b](nope.md) [c](collector.md#nowhere) [d](#top) [e](https://x.org)\n"
        "[g](collector.md#its-limits-in-full) `[f](nope.md)`\n"
    )
    assert broken(probe, repo) == [
        "../../shared/x.md: outside the repository",
        "nope.md: no such file",
        "collector.md#nowhere: no heading #nowhere in docs/collector.md",
    ]
