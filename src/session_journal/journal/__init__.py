"""Per-session event files: the JSONL writer, redaction, stats and the project index."""

from .events import JournalEnvelope, JournalEvent, Message
from .extract import event_kind, extract_anchors, extract_text_content
from .index import IndexRow, ProjectIndex, SearchHit
from .redaction import Redactor
from .stats import SessionStats
from .writer import FlushResult, JournalWriter, WriterStatus

__all__ = [
    "FlushResult",
    "IndexRow",
    "JournalEnvelope",
    "JournalEvent",
    "JournalWriter",
    "Message",
    "ProjectIndex",
    "Redactor",
    "SearchHit",
    "SessionStats",
    "WriterStatus",
    "event_kind",
    "extract_anchors",
    "extract_text_content",
]
