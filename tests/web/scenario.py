"""The controller every web test serves: two sessions in two workspaces, a relay turn with a
pending question, faults, and index rows."""

from __future__ import annotations

from session_journal import SessionRecord, Store
from session_journal.elicitation import ElicitationRequest
from session_journal.journal.search import IndexRow
from session_journal.relay import AgentMessage, ElicitationRequested, RelayChain

QUESTION = ElicitationRequest(
    id="question-1",
    session_id="native-1",
    message="Which directory?",
    requested_schema={
        "type": "object",
        "properties": {"directory": {"type": "string"}},
        "required": ["directory"],
    },
)


def index_row(session_id: str, seq: int, text: str) -> IndexRow:
    return IndexRow(session_id, seq, "2026-11-29T12:00:00Z", "user_msg", None, None, text, "{}")


def controller(store: Store) -> Store:
    """s-1 in w-1 (two agent messages, then a pending question: seq 1 `input_required`), s-2
    in w-2 (a startup fault: seq 2 `session_fault`), and index rows of both."""
    store.sessions.save(SessionRecord(id="s-1", project_id="p", workspace_id="w-1"))
    store.sessions.save(SessionRecord(id="s-2", project_id="p", workspace_id="w-2"))
    said = [
        AgentMessage(message_id="m-1", text="hello <script>alert(1)</script>"),
        AgentMessage(message_id="m-2", text="naïve café ☃"),
        ElicitationRequested(request=QUESTION),
    ]
    store.projection.apply("s-1", RelayChain().extend(said, recorded_at_ms=100))
    store.faults.record_startup_fault("s-2", "the image is missing")
    store.index.insert(
        [index_row("s-1", 1, "deploy failed in w-1"), index_row("s-2", 1, "deploy ok in w-2")]
    )
    return store
