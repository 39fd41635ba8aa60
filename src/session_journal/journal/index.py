"""Where the project index's names were before the index became a service; they stay
importable from here. The rows, hits and query parsing live in `journal/search.py`, the feeder
thread in `journal/index_feeder.py`, `ProjectIndex` in `services/index.py`."""

import sys
from typing import TYPE_CHECKING, Any

from .index_feeder import IndexFeeder
from .search import (
    MAX_QUERY_CHARS,
    MAX_QUERY_WORDS,
    MAX_SEARCH_LIMIT,
    IndexRow,
    SearchHit,
    SearchTerm,
    index_row,
    parse_query,
    search_terms,
)

if TYPE_CHECKING:  # for type checkers and IDEs; at run time `__getattr__` gives it
    from ..services.index import ProjectIndex

__all__ = [
    "MAX_QUERY_CHARS",
    "MAX_QUERY_WORDS",
    "MAX_SEARCH_LIMIT",
    "IndexFeeder",
    "IndexRow",
    "ProjectIndex",
    "SearchHit",
    "SearchTerm",
    "index_row",
    "parse_query",
    "search_terms",
]


def __getattr__(name: str) -> Any:
    # PEP 562: `ProjectIndex` as the package gives it, imported on first use.
    if name == "ProjectIndex":
        return sys.modules[__package__].ProjectIndex
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
