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


# Fake credentials, each in a shape redaction knows (docs: Serving the feed, "Redaction"), with
# the text the server serves for each. The last is kept: no secret, and non-ASCII.
OPENAI_KEY = "sk-proj-Xf3kP9qLm2Rt7vWz1Yb4Nc8Hd6Gj0Ks5Ua_TeQ-oIr"
PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0t\n"
    "-----END RSA PRIVATE KEY-----"
)
LEAKS = {
    f"the key is {OPENAI_KEY}": "the key is [REDACTED]",
    "curl -H 'Authorization: Bearer 8f14e45fceea167a5a36dedd4bea2543' https://api.example.com": (
        "curl -H 'Authorization: Bearer [REDACTED]' https://api.example.com"
    ),
    "login with password=hunter2 failed": "login with password=[REDACTED] failed",
    "API_KEY=abc123 GITHUB_TOKEN=gh-tok-42": "API_KEY=[REDACTED] GITHUB_TOKEN=[REDACTED]",
    "export AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG": "export AWS_SECRET_ACCESS_KEY=[REDACTED]",
    "env:\n  DB_PASSWORD: swordfish9\n  DB_USER: app": (
        "env:\n  DB_PASSWORD: [REDACTED]\n  DB_USER: app"
    ),
    f"key:\n{PEM}\nend": "key:\n[REDACTED]\nend",
    "dsn postgresql://app:s3cr3t-P4ss@db:5432/app": "dsn postgresql://app:[REDACTED]@db:5432/app",
    "naïve ☃: token count: 5, max_tokens=100": "naïve ☃: token count: 5, max_tokens=100",
}
SECRETS = (
    OPENAI_KEY,
    "8f14e45fceea167a5a36dedd4bea2543",
    "hunter2",
    "abc123",
    "gh-tok-42",
    "wJalrXUtnFEMI",
    "swordfish9",
    "MIIEowIBAAKCAQEAu1SU1",
    "s3cr3t-P4ss",
)
"""What no redacted answer holds."""
