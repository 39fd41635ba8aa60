"""The demo scenario behind `session-journal demo`: what a client following the feed sees."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from ._clock import now_ms
from .api_events import ApiActivityDetails, ApiActivityKind, ApiActivityState, ApiEvent
from .elicitation import Accept, ElicitationRequest
from .records import CheckpointMetadata, SessionRecord, SessionState
from .relay import (
    AgentMessage,
    CommandCompleted,
    CommandQueued,
    CommandStarted,
    ContentBlock,
    ElicitationRequested,
    ElicitationResolved,
    PromptCommand,
    PromptOutcome,
    RelayChain,
    RelayObservation,
)
from .store import Store

WORKSPACE = "demo-workspace"
DEMO_SESSIONS = ("demo-alpha", "demo-beta")
"""The sessions the demo creates (it refuses a database holding others unless told)."""


def _activity(kind: ApiActivityKind, at_ms: int, label: str | None = None) -> ApiActivityState:
    idle = kind is ApiActivityKind.IDLE
    return ApiActivityState(
        state="running",
        details=ApiActivityDetails(
            kind=kind,
            idle_since_ms=at_ms if idle else None,
            turn_started_at_ms=at_ms if kind is ApiActivityKind.TURN else None,
            background_started_at_ms=at_ms if kind is ApiActivityKind.BACKGROUND else None,
            label=label,
        ),
        is_idle=idle,
        waiting_for_input=False,
        capacity_retry=False,
    )


def _question_turn(store: Store, session_id: str) -> None:
    materialized = store.projection.load(session_id)
    assert materialized is not None
    chain = RelayChain.after(materialized)  # a re-run continues the session's chain
    prompt = f"prompt-{chain.ordinal + 1}"
    question = ElicitationRequest.from_acp_params(
        f"question-{chain.ordinal + 1}",
        {
            "mode": "form",
            "sessionId": session_id,
            "message": "Which directory?",
            "requestedSchema": {
                "type": "object",
                "properties": {"directory": {"type": "string"}},
                "required": ["directory"],
            },
        },
    )
    text = ContentBlock(type="text", text="Fix the failing test")
    now = now_ms()
    observations: list[RelayObservation] = [
        CommandQueued(command_id=prompt, command=PromptCommand(prompt=[text]), created_at_ms=now),
        CommandStarted(command_id=prompt, started_at_ms=now),
        ElicitationRequested(request=question),
        ElicitationResolved(
            elicitation_id=question.id,
            action="accept",
            reply=question.reply_text(Accept(content={"directory": "src"})),
        ),
        AgentMessage(message_id=f"{prompt}-reply", text="Fixed the test in src/."),
        CommandCompleted(command_id=prompt, outcome=PromptOutcome(stop_reason="end_turn")),
    ]
    store.projection.apply(session_id, chain.extend(observations))


def run_demo(store: Store, say: Callable[[str], None]) -> list[ApiEvent]:
    """Run the scenario; `say` narrates each step. Returns the events appended, in feed order."""
    cursor = store.events.load().next_after_seq  # a client starts following at the frontier
    now = now_ms()
    alpha = SessionRecord(
        id="demo-alpha",
        project_id="demo-project",
        workspace_id=WORKSPACE,
        state=SessionState.RUNNING,
    )
    beta = SessionRecord(
        id="demo-beta",
        project_id="demo-project",
        workspace_id=WORKSPACE,
        state=SessionState.PROVISIONING,
    )
    say(f"two sessions in workspace {WORKSPACE}: {alpha.id}, {beta.id}")
    store.sessions.save(alpha)
    store.sessions.save(beta)

    say(f"{alpha.id} goes idle, starts a turn, goes idle again; {beta.id} works in the background")
    store.activity.record([(alpha.id, _activity(ApiActivityKind.IDLE, now))], now)
    store.activity.record(
        [
            (alpha.id, _activity(ApiActivityKind.TURN, now + 10, "fix the failing test")),
            (beta.id, _activity(ApiActivityKind.BACKGROUND, now + 10, "indexing")),
        ],
        now + 10,
    )
    store.activity.record([(alpha.id, _activity(ApiActivityKind.IDLE, now + 20))], now + 20)
    say("the same snapshot again is not an event")
    store.activity.record([(alpha.id, _activity(ApiActivityKind.IDLE, now + 20))], now + 30)

    say(f"{beta.id} fails to start")
    store.faults.record_startup_fault(beta.id, "image pull failed: registry unreachable")

    say(f"{alpha.id} runs a turn: the agent asks which directory, the user answers, it completes")
    _question_turn(store, alpha.id)

    say(f"{alpha.id} checkpoints: a barrier is correlated, then the archive is saved")
    store.checkpoints.begin(
        alpha.model_copy(update={"state": SessionState.CHECKPOINTING}), "checkpoint-1"
    )
    store.checkpoints.correlate_barrier(alpha.id, "checkpoint-1", "barrier-1")
    archive = CheckpointMetadata(
        archive_path="/var/lib/session-journal/demo-alpha/checkpoint-1.tar.zst",
        sha256="3f" * 32,
        created_at=datetime.now(UTC).isoformat().replace("+00:00", "Z"),
        event_frontier=store.events.latest_seq(),
    )
    store.checkpoints.save_requested(
        alpha.model_copy(update={"checkpoint": archive}), "checkpoint-1"
    )

    say(f"{alpha.id} asks for another checkpoint while a turn runs: it is deferred")
    alpha = alpha.model_copy(update={"checkpoint": archive})
    store.checkpoints.begin(
        alpha.model_copy(update={"state": SessionState.CHECKPOINTING}), "checkpoint-2"
    )
    store.checkpoints.finish_failed(
        alpha, "checkpoint-2", deferred=True, message="a turn is in progress; retry when idle"
    )

    say(f"{alpha.id} fails a lifecycle step; saving the same error twice emits one fault")
    failed = alpha.model_copy(
        update={
            "state": SessionState.ERROR,
            "last_error": "worker bootstrap failed: Connection closed by host",
        }
    )
    store.sessions.save_lifecycle(failed)
    store.sessions.save_lifecycle(failed)

    events: list[ApiEvent] = []
    while page := store.events.load(after_seq=cursor, limit=1000).events:
        events.extend(page)
        cursor = page[-1].seq
    return events
