"""Repositories: the only code that builds queries. They receive a connection from the unit of
work, speak domain types, and never begin, commit or close anything."""

from .events import EventRepository
from .sessions import ActivityRepository, SessionRepository

__all__ = ["ActivityRepository", "EventRepository", "SessionRepository"]
