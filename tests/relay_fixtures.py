"""Relay observations the projection tests share (the seed's `turn` helper)."""

from __future__ import annotations

from session_journal.relay import (
    CommandCompleted,
    CommandQueued,
    CommandStarted,
    ContentBlock,
    PromptCommand,
    PromptOutcome,
    RelayObservation,
)


def turn(stop_reason: str = "end_turn") -> list[RelayObservation]:
    """A prompt queued, started and completed."""
    return [
        CommandQueued(
            command_id="prompt-1",
            command=PromptCommand(prompt=[ContentBlock(type="text", text="Fix the test")]),
            created_at_ms=1,
        ),
        CommandStarted(command_id="prompt-1", started_at_ms=2),
        CommandCompleted(command_id="prompt-1", outcome=PromptOutcome(stop_reason=stop_reason)),
    ]
