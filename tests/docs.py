"""The documents a reader sees: README.md and the pages of the docs site (docs/, in the order of
mkdocs.yml's `nav`), for the tests that check what they say."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCS = REPO / "docs"
MKDOCS = REPO / "mkdocs.yml"

_NAV_ENTRY = re.compile(r'^\s*-\s+(?:(?:"[^"]*"|[^:"]+):\s+)?(?P<page>[\w./-]+\.md)\s*$')


def nav_pages() -> list[Path]:
    """The pages named by mkdocs.yml's `nav`, in its order (an entry `- Title: path.md`)."""
    lines = MKDOCS.read_text(encoding="utf-8").split("\nnav:\n", 1)[1].splitlines()
    found = []
    for line in lines:
        if line and not line.startswith(" "):  # the next top-level key ends the nav
            break
        entry = _NAV_ENTRY.match(line)
        if entry is not None:
            found.append(DOCS / entry["page"])
    return found


_SNIPPET = re.compile(r'^--8<-- "(?P<path>[^"]+)"\s*$', re.MULTILINE)


def documents() -> list[Path]:
    """README.md, then every page of the site in navigation order, each followed by the files
    it includes (`--8<-- "PATH"`, pymdownx.snippets, paths from the repository's root)."""
    found = [README]
    for page in nav_pages():
        found.append(page)
        included = _SNIPPET.findall(page.read_text(encoding="utf-8"))
        found.extend(REPO / path for path in included if REPO / path not in found)
    return found


def page(name: str) -> str:
    """The text of a docs page, by its path under docs/."""
    return (DOCS / name).read_text(encoding="utf-8")


def relative(path: Path) -> str:
    """A document's path as a reader of the checkout names it (`docs/api/errors.md`)."""
    return str(path.relative_to(REPO))


_FENCE = re.compile(r"^ *(`{3,}|~{3,})")


def headings(path: Path) -> list[str]:
    """The ATX headings of a Markdown document, without their `#`s, attribute lists
    (`{ #anchor }`) or fenced blocks' comment lines."""
    found: list[str] = []
    fenced = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        heading = re.match(r"^#{1,6} +(?P<text>.+?)(?: +\{[^}]*\})? *$", line)
        if heading is not None and not fenced:
            found.append(heading["text"])
    return found
