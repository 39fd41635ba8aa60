"""`store.snapshot()`: a block of reads that all see one moment of the database, with
`as_of_seq`, the frontier of that moment. What commits meanwhile is not in it; its services
refuse writes and waits (`ReadOnlySnapshot`) and every call once the block is over
(`SnapshotEnded`); an error in the block passes through and the connection goes back. On both
backends and through both APIs (`AsyncStore.snapshot()`, `async with`)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from session_journal import (
    ApiEventFilter,
    InvalidRecord,
    ReadOnlySnapshot,
    SessionRecord,
    SnapshotEnded,
    Store,
    StoreClosed,
    StoreOptions,
)
from tests.backends import database_url
from tests.helpers import left_for_the_collector

pytestmark = pytest.mark.both_apis


def session(session_id: str) -> SessionRecord:
    return SessionRecord(id=session_id, project_id="p", workspace_id="w")


@pytest.fixture
def busy(store: Store) -> Store:
    store.sessions.save(session("before"))
    store.faults.record_startup_fault("before", "one")
    store.faults.record_startup_fault("before", "two")
    return store


def test_the_reads_of_a_snapshot_see_one_moment(busy: Store) -> None:
    with busy.snapshot() as snapshot:
        assert snapshot.as_of_seq == 2
        first = snapshot.sessions.page()
        # Meanwhile, outside the snapshot: a session, an event, a deletion.
        busy.sessions.save(session("after"))
        busy.faults.record_startup_fault("after", "three")
        assert busy.events.latest_seq() == 3
        assert snapshot.events.latest_seq() == 2
        assert [e.seq for e in snapshot.events.load(after_seq=0).events] == [1, 2]
        assert snapshot.events.load_before(before_seq=10).next_before_seq == 1
        assert snapshot.sessions.get("after") is None
        assert snapshot.sessions.page() == first
        assert [s.session.id for s in first.sessions] == ["before"]
        assert snapshot.events.load(ApiEventFilter(session_id="after"), after_seq=0).events == ()
        assert snapshot.projection.load("after") is None
        assert snapshot.projection.transcript("before") is not None
    assert busy.sessions.get("after") is not None
    with busy.snapshot() as later:
        assert later.as_of_seq == 3


def test_a_snapshot_only_reads(busy: Store) -> None:
    with busy.snapshot() as snapshot:
        with pytest.raises(ReadOnlySnapshot, match="only reads"):
            snapshot.sessions.save(session("refused"))
        with pytest.raises(ReadOnlySnapshot, match="only reads"):
            snapshot.events.wait(after_seq=2, timeout=0.1)
        with pytest.raises(InvalidRecord, match="take no uow"), busy.unit_of_work() as uow:
            snapshot.sessions.get("before", uow=uow)
        assert snapshot.sessions.get("before") is not None  # still usable after refusals
    assert busy.sessions.get("refused") is None


def test_a_snapshot_ends_with_its_block(busy: Store) -> None:
    with busy.snapshot() as snapshot:
        pass
    with pytest.raises(SnapshotEnded, match="has ended"):
        snapshot.sessions.get("before")
    with pytest.raises(SnapshotEnded):
        snapshot.events.load(after_seq=0)


def test_an_error_in_the_block_passes_through_and_gives_the_connection_back(
    busy: Store,
) -> None:
    for _ in range(20):  # more than the reader pool holds (5, and 10 more under load)
        with pytest.raises(KeyError, match="mine"), busy.snapshot() as snapshot:
            snapshot.sessions.get("before")
            raise KeyError("mine")
    with busy.snapshot() as snapshot:
        assert snapshot.sessions.get("before") is not None


@pytest.mark.sync_api
def test_a_snapshot_of_a_small_pool_waits_for_nothing_else(backend: str, tmp_path: Path) -> None:
    options = StoreOptions(reader_pool_size=1)
    with (
        database_url(backend, tmp_path) as url,
        Store.open(url, upgrade=True, options=options) as store,
    ):
        store.sessions.save(session("s"))
        with store.snapshot() as snapshot:
            # The store's own reads take another connection (the pool's overflow).
            assert store.sessions.get("s") is not None
            assert snapshot.sessions.get("s") is not None


def test_a_closed_store_closes_its_snapshots(busy: Store) -> None:
    with busy.snapshot() as snapshot:
        busy.close()
        with pytest.raises(StoreClosed):
            snapshot.sessions.page()
    # The snapshot's connection was closed when the block ended, not given back to the pool of
    # the engine the close disposed, where no one would close it (psycopg warns of it when it
    # is collected).
    assert left_for_the_collector() == []


@pytest.mark.sync_api
def test_a_child_after_fork_leaves_the_parents_snapshot_alone(busy: Store) -> None:
    status = 1
    with busy.snapshot() as snapshot:
        child = os.fork()
        if child == 0:  # the child: refused, then it leaves the block, which must end nothing
            try:
                snapshot.sessions.get("before")
                status = 3
            except SnapshotEnded:
                status = 0
            except BaseException:
                status = 4
        else:
            _, waited = os.waitpid(child, 0)  # the child has left the block
            assert os.waitstatus_to_exitcode(waited) == 0
            busy.sessions.save(session("forked"))
            busy.faults.record_startup_fault("forked", "after the fork")
            assert snapshot.sessions.get("forked") is None  # still the parent's one moment
            assert snapshot.events.latest_seq() == snapshot.as_of_seq == 2
    if child == 0:
        os._exit(status)
    assert busy.sessions.get("forked") is not None
