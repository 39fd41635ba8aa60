"""Repositories: the only code that builds queries. They receive a connection from the unit of
work, speak domain types, and never begin, commit or close anything."""

from .activity import ActivityRepository
from .checkpoints import CheckpointRepository
from .consumers import ConsumerRepository, LeaseHolder, LeaseTaken, StoredConsumer
from .events import EventRepository, LogVersion
from .project_events import ProjectEventRepository
from .projection import ProjectionRepository, StoredProjection
from .sessions import SessionRepository, StoredLifecycle

__all__ = [
    "ActivityRepository",
    "CheckpointRepository",
    "ConsumerRepository",
    "EventRepository",
    "LeaseHolder",
    "LeaseTaken",
    "LogVersion",
    "ProjectEventRepository",
    "ProjectionRepository",
    "SessionRepository",
    "StoredConsumer",
    "StoredLifecycle",
    "StoredProjection",
]
