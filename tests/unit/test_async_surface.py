"""The async API has every method of the sync services, under the same names, awaitable."""

from __future__ import annotations

import inspect
import typing

import pytest

from session_journal import aio
from session_journal.services.activity import ActivityService
from session_journal.services.checkpoints import CheckpointService
from session_journal.services.consumers import ConsumerService, Lease
from session_journal.services.events import EventService
from session_journal.services.faults import FaultService
from session_journal.services.index import ProjectIndex
from session_journal.services.projection import ProjectionService
from session_journal.services.sessions import SessionService

PAIRS = [
    (SessionService, aio.AsyncSessionService),
    (EventService, aio.AsyncEventService),
    (ActivityService, aio.AsyncActivityService),
    (FaultService, aio.AsyncFaultService),
    (CheckpointService, aio.AsyncCheckpointService),
    (ProjectionService, aio.AsyncProjectionService),
    (ProjectIndex, aio.AsyncProjectIndex),
    (ConsumerService, aio.AsyncConsumerService),
    (Lease, aio.AsyncLease),
]
# The journal writer's question to the sync index, and the async twin's to the sync faults.
NOT_CALLS = {"writing_in_this_thread", "startup_fault"}


@pytest.mark.parametrize(("sync", "asynchronous"), PAIRS)
def test_every_service_method_is_awaitable_under_its_name(sync: type, asynchronous: type) -> None:
    names = {
        name
        for name, member in vars(sync).items()
        if callable(member) and not name.startswith("_") and name not in NOT_CALLS
    }
    assert names
    for name in names:
        method = getattr(asynchronous, name, None)
        assert method is not None, f"{asynchronous.__name__} lacks {name}"
        if sync is ConsumerService and name == "follow":  # awaited: it reads the position
            assert inspect.iscoroutinefunction(method)
            assert inspect.signature(method).return_annotation == "AsyncFollower"
            continue
        if name == "follow":  # a plain call whose follower is awaitable, iterable, a context
            assert not inspect.iscoroutinefunction(method)
            assert inspect.signature(method).return_annotation == "AsyncFollower"
            continue
        if name == "event_json":  # a plain call: it reads memory, never the database
            assert not inspect.iscoroutinefunction(method)
            continue
        assert inspect.iscoroutinefunction(method), f"{asynchronous.__name__}.{name}"


def test_an_async_follower_is_awaitable_an_async_iterator_and_an_async_context_manager() -> None:
    follower = aio.AsyncFollower
    for hook in ("__await__", "__aiter__", "__anext__", "__aenter__", "__aexit__"):
        assert callable(getattr(follower, hook, None)), hook
    for hook in ("__anext__", "__aenter__", "__aexit__"):
        assert inspect.iscoroutinefunction(getattr(follower, hook)), hook
    assert not inspect.iscoroutinefunction(follower.__await__)


@pytest.mark.parametrize(("sync", "asynchronous"), PAIRS)
def test_every_awaitable_shows_the_sync_parameters_and_docstring(
    sync: type, asynchronous: type
) -> None:
    for name, member in vars(sync).items():
        if not callable(member) or name.startswith("_") or name in NOT_CALLS:
            continue
        method = getattr(asynchronous, name)
        mine, theirs = inspect.signature(method), inspect.signature(member)
        assert list(mine.parameters.values()) == list(theirs.parameters.values()), name
        if name not in ("follow", "wait", "wait_json", "acquire"):  # may differ in return only
            assert mine.return_annotation == theirs.return_annotation, name
        assert method.__doc__ and (member.__doc__ or "").strip() in method.__doc__, name
        assert method.__qualname__ == f"{asynchronous.__name__}.{name}"
        assert "args" not in mine.parameters and "kwargs" not in mine.parameters
        assert typing.get_type_hints(method).keys() >= typing.get_type_hints(member).keys() - {
            "return"
        }
