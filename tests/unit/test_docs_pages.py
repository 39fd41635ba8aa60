"""The documentation is split by reader (issue 24): a short README.md and the MkDocs site in
docs/. These tests hold what the split promised: every section the README had before the site
is a heading of some page, every page is in the navigation once, the README stays short and its
links lead somewhere, and the page of API event bodies shows every field of every model it is
generated from. (That every fenced block runs is tests/integration/test_readme_examples.py;
that links and references resolve is `mkdocs build --strict`, `make docs`.)"""

from __future__ import annotations

import re

import pytest
from pydantic import BaseModel

from session_journal._values import Value
from tests.docs import DOCS, README, REPO, headings, nav_pages, relative
from tools import api_event_page

FROZEN_HEADINGS = (
    # The README's section headings (## and ###) before the docs site, as they were.
    "Install",
    "The two commands",
    "Configuration",
    "Command line",
    "Public API",
    "Building the inputs",
    "Relay projection",
    "Session event files (`session_journal.journal`)",
    "The asyncio API (`AsyncStore`)",
    "Errors",
    "Backends: how to choose",
    "Guarantees",
    "The SQLite file: what never to do while it is open",
    "Upgrading",
    "Downgrading",
    "Offline SQL",
    "With only the installed package",
    "Embedding in an application with its own migrations",
    "Retention",
    "Performance",
    "Layout",
)


def test_every_section_the_readme_had_is_a_heading_of_a_page() -> None:
    found = {heading for page in nav_pages() for heading in headings(page)}
    missing = [heading for heading in FROZEN_HEADINGS if heading not in found]
    assert not missing, f"no docs page has these README sections as headings: {missing}"


def test_every_page_is_in_the_navigation_once() -> None:
    listed = nav_pages()
    assert len(listed) == len(set(listed)), "a page is listed twice in mkdocs.yml's nav"
    absent = [relative(page) for page in listed if not page.exists()]
    assert not absent, f"mkdocs.yml's nav names pages that do not exist: {absent}"
    unlisted = sorted(set(DOCS.rglob("*.md")) - set(listed))
    assert not unlisted, f"pages missing from mkdocs.yml's nav: {[relative(p) for p in unlisted]}"
    assert len(listed) >= 15


def test_the_readme_is_short_and_its_links_lead_somewhere() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    targets = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    assert len(targets) >= 10
    broken = [target for target in targets if not (REPO / target).exists()]
    assert not broken, f"README.md links to files that do not exist: {broken}"


# -- the API event bodies page ---------------------------------------------------------------


def _models() -> list[type[BaseModel | Value]]:
    """Every model the page is generated from: the bodies, the models their fields name (one
    level after another) and the event and page envelopes."""
    page = api_event_page.Page()
    found: list[type[BaseModel | Value]] = []
    queue: list[type] = [*api_event_page.bodies(), api_event_page.ApiEvent]
    queue += [api_event_page.ApiEventPage, api_event_page.ApiEventPageBefore]
    while queue:
        model = queue.pop(0)
        if not (isinstance(model, type) and issubclass(model, BaseModel | Value)) or model in found:
            continue
        found.append(model)
        for field in model.model_fields.values():
            page.type_text(field.annotation)  # collects the models and enums it names
        queue.extend(page.pending)
        page.pending.clear()
    return found


def _section(text: str, model: type[BaseModel]) -> str:
    """The page's text under the heading of `model` (its anchor), up to the next heading."""
    anchor = f"{{ #{model.__name__.lower()} }}"
    [start] = [i for i, line in enumerate(text.splitlines()) if line.endswith(anchor)]
    lines = text.splitlines()[start + 1 :]
    end = next((i for i, line in enumerate(lines) if line.startswith("#")), len(lines))
    return "\n".join(lines[:end])


def _shown_fields(section: str) -> set[str]:
    return set(re.findall(r"^\| `(\w+)` \|", section, flags=re.MULTILINE))


def test_the_api_event_page_is_what_the_models_give() -> None:
    committed = (DOCS / "api" / "events.md").read_text(encoding="utf-8")
    assert committed == api_event_page.render(), (
        "docs/api/events.md differs from the models: run `make docs-pages` and commit the page"
    )


@pytest.mark.parametrize("model", _models(), ids=lambda model: model.__name__)
def test_the_api_event_page_shows_every_field(model: type[BaseModel | Value]) -> None:
    section = _section((DOCS / "api" / "events.md").read_text(encoding="utf-8"), model)
    shown = _shown_fields(section)
    expected = set(model.model_fields) - ({"type"} if model in api_event_page.bodies() else set())
    assert shown == expected, f"{model.__name__}: the page shows {shown}, the model has {expected}"
    if model in api_event_page.bodies():
        tag = model.model_fields["type"].default
        assert f'{{"type": "{tag}", "data": {{...}}}}' in section


def test_the_field_check_fails_for_a_field_the_page_lacks() -> None:
    """The check above can fail: a model with a field its section does not show."""

    class Shown(BaseModel):
        """A model of the page."""

        seq: int
        added: str

    text = "### `Shown` { #shown }\n\n| field | type |\n| --- | --- |\n| `seq` | integer |\n"
    assert _shown_fields(_section(text, Shown)) == {"seq"} != set(Shown.model_fields)
