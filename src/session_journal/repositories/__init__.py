"""Repositories: the only code that builds queries. They receive a connection from the unit of
work, speak domain types, and never begin, commit or close anything."""

from .checkpoints import CheckpointRepository
from .events import EventRepository
from .projection import ProjectionRepository, StoredProjection
from .sessions import ActivityRepository, SessionRepository, StoredLifecycle

__all__ = [
    "ActivityRepository",
    "CheckpointRepository",
    "EventRepository",
    "ProjectionRepository",
    "SessionRepository",
    "StoredLifecycle",
    "StoredProjection",
]
