"""An async follower of one session is woken by every commit of its session: also by one that
another request of the store read first, at the same generation of the commit signal, before
the store heard of the commit (the window that request's first read republished holds it, and
the routing that its close set off woke the follower at that generation). On both backends."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import pytest

from session_journal import ApiEventFilter, SessionRecord, Store
from session_journal.aio import AsyncStore


def held_pulses(store: Store, monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """While the event is set, each move of `store`'s commit signal comes half a second late (a
    notification or `data_version` read that arrives late)."""
    signal = store.following.watched_signal()
    pulse: Callable[[], None] = signal.pulse
    held = threading.Event()

    def late() -> None:
        if held.is_set():
            time.sleep(0.5)
        pulse()

    monkeypatch.setattr(signal, "pulse", late)
    return held


def test_a_commit_another_request_read_first_still_wakes_the_follower_of_its_session(
    migrated_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Store.open(migrated_url) as mine, Store.open(migrated_url) as other:
        for session_id in ("s", "t"):
            other.sessions.save(SessionRecord(id=session_id, project_id="p"))
        other.faults.record_startup_fault("t", "before")
        held = held_pulses(mine, monkeypatch)
        signal = mine.following.watched_signal()

        async def main() -> tuple[list[int], int, float]:
            store = AsyncStore.from_store(mine)
            start = (await store.events.load(after_seq=None, limit=1)).latest_seq
            began = time.monotonic()
            waiting = asyncio.create_task(
                store.events.wait(ApiEventFilter(session_id="s"), after_seq=start, timeout=5)
            )
            while signal.waiting() == 0:
                await asyncio.sleep(0.005)
            await asyncio.sleep(0.05)  # it read: nothing of s yet, it waits
            held.set()
            await asyncio.to_thread(other.faults.record_startup_fault, "s", "E")
            # Before this store hears of E: another request, whose first read finds E.
            await store.events.wait(ApiEventFilter(session_id="t"), after_seq=start, timeout=0)
            held.clear()
            page = await waiting
            await store.close()
            return [event.seq for event in page.events], start, time.monotonic() - began

        seqs, start, took = asyncio.run(main())
    assert seqs == [start + 1]
    assert took < 4  # woken by E, not by the end of its wait
