"""`store.events.rate(minutes)`: events recorded per minute over the last whole minutes, counted
on the index of `recorded_at_ms` (every event recorded in the window, whatever order it was
stored in), of one workspace when given; bounded to 60 minutes. On both backends, through both
APIs."""

from __future__ import annotations

import pytest

from session_journal import EventRate, InvalidRecord, SessionRecord, Store
from session_journal._clock import now_ms
from tests.web.client import fault

pytestmark = pytest.mark.both_apis

MINUTE = 60_000


def append_at(store: Store, events: list[tuple[str, int]]) -> None:
    """Append a fault to each session at each `recorded_at_ms`, in this order (their seqs)."""
    with store.unit_of_work() as uow:
        for session_id, at in events:
            uow.events.append(session_id, at, fault("at a time"))
        uow.commit()


def expected(rate: EventRate, times: list[int]) -> tuple[int, ...]:
    """What each minute of `rate`'s window must hold for events recorded at `times`."""
    counts = [0] * len(rate.counts)
    for at in times:
        minute = (at - rate.start_ms) // MINUTE
        if 0 <= minute < len(counts):
            counts[minute] += 1
    return tuple(counts)


@pytest.fixture
def two_workspaces(store: Store) -> Store:
    store.sessions.save(SessionRecord(id="s-1", project_id="p", workspace_id="w-1"))
    store.sessions.save(SessionRecord(id="s-2", project_id="p", workspace_id="w-2"))
    return store


def test_each_minute_of_the_window_counts_the_events_recorded_in_it(two_workspaces: Store) -> None:
    store = two_workspaces
    now = now_ms()
    ones = [now - 30 * MINUTE, now - 10 * MINUTE, now - 10 * MINUTE + 7, now - 2 * MINUTE, now]
    twos = [now - 3 * MINUTE, now + 5 * MINUTE]  # the last is ahead of the window: not counted
    append_at(store, [("s-1", at) for at in ones] + [("s-2", at) for at in twos])

    before = now_ms()
    rate = store.events.rate(15)
    after = now_ms()
    assert rate.start_ms % MINUTE == 0 and len(rate.counts) == 15 and rate.minute_ms == MINUTE
    assert before < rate.start_ms + 15 * MINUTE and rate.start_ms + 14 * MINUTE <= after  # now
    assert rate.counts == expected(rate, ones + twos)
    assert sum(rate.counts) == 5  # the event 30 minutes old and the one ahead are outside it
    assert rate.as_of_seq == 7

    workspace = store.events.rate(15, workspace_id="w-1")
    assert workspace.counts == expected(workspace, ones) and sum(workspace.counts) == 4
    assert sum(store.events.rate(15, workspace_id="w-9").counts) == 0
    hour = store.events.rate(60)
    assert len(hour.counts) == 60 and sum(hour.counts) == 6  # the 30-minute-old one too
    # The current minute alone: the event recorded now (seq 5) counts, though stored before one
    # recorded three minutes ago (seq 6).
    one = store.events.rate(1)
    assert one.counts == expected(one, ones + twos)
    if one.start_ms <= now:  # (no minute began since `now`)
        assert one.counts[0] >= 1


def test_events_stored_late_with_old_times_hide_nothing(two_workspaces: Store) -> None:
    store = two_workspaces
    now = now_ms()
    # Seq 1 is in the window; seq 2, stored after it, was recorded 40 minutes ago (a writer
    # catching up, another process's clock): both the events before and after it count.
    times = [now - 5 * MINUTE, now - 40 * MINUTE, now - MINUTE, now - 50 * MINUTE, now]
    append_at(store, [("s-1", at) for at in times])
    rate = store.events.rate(15)
    assert rate.counts == expected(rate, times) and sum(rate.counts) == 3


def test_many_events_are_counted_to_the_floor_of_the_pruned_log(two_workspaces: Store) -> None:
    store = two_workspaces
    now = now_ms()
    spread = [("s-2", now - 2 * MINUTE + (n * 7) % MINUTE) for n in range(10_000)]
    append_at(store, [("s-1", now - 20 * MINUTE), *spread])  # each at its own millisecond
    rate = store.events.rate(15)
    assert sum(rate.counts) == 10_000 and rate.as_of_seq == 10_001
    assert sum(store.events.rate(15, workspace_id="w-2").counts) == 10_000
    store.events.prune(through_seq=5_000)
    pruned = store.events.rate(15)
    assert sum(pruned.counts) == 5_001


@pytest.mark.parametrize("minutes", [0, 61, -1, True, 1.5, "15"])
def test_the_window_is_one_to_sixty_whole_minutes(store: Store, minutes: object) -> None:
    with pytest.raises(InvalidRecord, match="minutes"):
        store.events.rate(minutes)  # type: ignore[arg-type]
    assert EventRate.MAX_MINUTES == 60
