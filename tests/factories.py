"""factory-boy factories for records and activity snapshots."""

from __future__ import annotations

import factory

from session_journal import (
    ApiActivityDetails,
    ApiActivityKind,
    ApiActivityState,
    SessionRecord,
    SessionState,
)


class SessionFactory(factory.Factory):
    """A running session in the default workspace."""

    class Meta:
        model = SessionRecord

    id = factory.Sequence(lambda n: f"session-{n + 1}")
    project_id = "project-1"
    workspace_id = "default"
    state = SessionState.RUNNING


class ActivityFactory(factory.Factory):
    """An idle activity snapshot."""

    class Meta:
        model = ApiActivityState

    state = "running"
    details = factory.LazyFunction(
        lambda: ApiActivityDetails(kind=ApiActivityKind.IDLE, idle_since_ms=100)
    )
    is_idle = True
    waiting_for_input = False
    capacity_retry = False
