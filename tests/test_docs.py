"""The README is a front page under 10 KB; every link in it and in docs/ points at a file."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def test_the_readme_is_a_front_page():
    assert (ROOT / "README.md").stat().st_size < 10 * 1024


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_resolves(page):
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if "://" in target or target.startswith("mailto:"):
            continue
        assert (page.parent / target).exists(), f"{page.name} links to missing {target}"


def test_the_readme_links_every_guide():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for guide in sorted((ROOT / "docs").glob("*.md")):
        assert f"docs/{guide.name}" in readme, f"README does not link docs/{guide.name}"
