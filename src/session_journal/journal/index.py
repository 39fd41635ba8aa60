"""The names this module held before the project index was split, kept importable from here:
the rows, hits and query parsing now live in `journal/search.py`, the feeder thread in
`journal/index_feeder.py` and `ProjectIndex` in `services/index.py`."""

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

if TYPE_CHECKING:  # for type checkers and IDEs; at run time `__getattr__` imports it
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
    # PEP 562: the service loads the database layer, which the rest of this module does not.
    if name == "ProjectIndex":
        from ..services.index import ProjectIndex

        return ProjectIndex
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
