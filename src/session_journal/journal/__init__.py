"""Per-session event files: the JSONL writer, redaction, stats and what the project index
stores and searches.

The journal event classes (one per kind, 48 kinds), `Message`, `JournalEnvelope`, and the pure
functions `event_kind`, `extract_anchors` and `extract_text_content` are all importable here.

Nothing in this package touches a database, and importing it loads no database code.
`ProjectIndex`, the service behind `store.index`, lives in `services/index.py`; it is importable
here too (the public API says so), on first use: imported with the package, it would load the
database layer and close an import cycle (the repositories use `search`).
"""

from typing import TYPE_CHECKING, Any

from . import approvals, kinds
from .approvals import *  # noqa: F403  (its __all__: the kinds it defines)
from .envelope import (
    JOURNAL_EVENT_ADAPTER,
    JOURNAL_EVENT_KINDS,
    JournalEnvelope,
    JournalEvent,
)
from .extract import event_kind, extract_anchors, extract_text_content
from .index_feeder import IndexSink
from .kinds import *  # noqa: F403  (its __all__: the kinds it defines)
from .payloads import (
    FlowStatus,
    Message,
    MessageBlock,
    MessageRole,
    PermissionFlowOwner,
    PermissionGrantPayload,
    PermissionGroupOwner,
    PermissionGroupPayload,
    PermissionRequestPayload,
    PermissionSystemOwner,
    PermissionUserOwner,
    UnrestrictedExecutionPayload,
)
from .redaction import Redactor
from .search import IndexRow, SearchHit
from .stats import SessionStats
from .writer import FlushResult, JournalWriter, WriterStatus

if TYPE_CHECKING:  # for type checkers and IDEs; at run time `__getattr__` imports it
    from ..services.index import ProjectIndex

__all__ = [
    "JOURNAL_EVENT_ADAPTER",
    "JOURNAL_EVENT_KINDS",
    "FlowStatus",
    "FlushResult",
    "IndexRow",
    "IndexSink",
    "JournalEnvelope",
    "JournalEvent",
    "JournalWriter",
    "Message",
    "MessageBlock",
    "MessageRole",
    "PermissionFlowOwner",
    "PermissionGrantPayload",
    "PermissionGroupOwner",
    "PermissionGroupPayload",
    "PermissionRequestPayload",
    "PermissionSystemOwner",
    "PermissionUserOwner",
    "ProjectIndex",
    "Redactor",
    "SearchHit",
    "SessionStats",
    "UnrestrictedExecutionPayload",
    "WriterStatus",
    "event_kind",
    "extract_anchors",
    "extract_text_content",
]
__all__ += approvals.__all__  # the journal event kinds, each listed once beside its class
__all__ += kinds.__all__


def __getattr__(name: str) -> Any:
    # PEP 562. The service imports the database layer, whose repositories import this package's
    # `search` module: importing it here eagerly would be an import cycle, and would load
    # SQLAlchemy for every user of the files alone.
    if name == "ProjectIndex":
        from ..services.index import ProjectIndex

        return ProjectIndex
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
