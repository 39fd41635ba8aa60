"""Scenario: many writer processes and threads append while a follower pages the log by cursor.

Spec: event-log.md, "Writes and concurrency" and "Sequence numbers and the frontier".

4 writer processes x 4 threads each append to their own session, alternating
`store.activity.record` (a new activity label every call, so exactly one `ActivityChanged`) and
`store.faults.record_startup_fault`. Meanwhile a follower process pages with
`store.events.load(after_seq=cursor, limit=7)`, following `next_after_seq`. Every process opens its
own `Store`; the parent creates the schema and the sessions first.

This proves, on SQLite and on PostgreSQL, that concurrent appenders in several processes, whose
threads share transactions (group commit):
- raise nothing (no "database is locked", no serialisation failure, no duplicate key);
- leave seqs exactly 1..N with no hole or duplicate, and `latest_seq == N`;
- commit in seq order, so a follower paging by cursor receives every event exactly once, in
  ascending order, with the same content as the final log;
- keep each writer's events in the order it wrote them.
"""

from __future__ import annotations

import multiprocessing
import queue
import threading
import time
import traceback
from dataclasses import dataclass, field
from multiprocessing.context import SpawnContext, SpawnProcess
from multiprocessing.synchronize import Event as EventType
from typing import TYPE_CHECKING

import pytest

from session_journal import (
    ActivityChanged,
    ApiActivityState,
    ApiEvent,
    SessionFault,
    SessionRecord,
    SessionState,
    Store,
)
from tests.factories import ActivityFactory

if TYPE_CHECKING:
    from multiprocessing.queues import Queue

WRITER_PROCESSES = 4
THREADS_PER_WRITER = 4
APPENDS_PER_THREAD = 25
EXPECTED_EVENTS = WRITER_PROCESSES * THREADS_PER_WRITER * APPENDS_PER_THREAD
FOLLOWER_PAGE = 7
BASE_MS = 1_700_000_000_000
# Generous bounds: a healthy run takes a few seconds; these only keep a broken run from hanging.
STARTUP_TIMEOUT_S = 60.0
RUN_TIMEOUT_S = 120.0

# What a writer thread appended, as read back from an event: ("activity" | "fault", counter).
Step = tuple[str, int]
# One event as the follower saw it: (seq, session_id, JSON of the event).
Seen = tuple[int, str, str]


@dataclass
class Report:
    """The one message every child process sends back when it ends (even on failure)."""

    name: str
    errors: list[str] = field(default_factory=list)
    seen: list[Seen] = field(default_factory=list)
    pages: int = 0
    pages_during_run: int = 0  # pages read while the frontier was still below the total
    batches: int = 0  # a writer: the transactions its write path ran
    calls: int = 0  # and the calls in them (more calls than batches: group commit)


@dataclass
class Ready:
    """Sent by a child once its store is open and it waits for the start signal."""

    name: str


if TYPE_CHECKING:  # multiprocessing's Queue is not subscriptable at runtime on Python 3.11
    Messages = Queue[Report | Ready]


def session_id(process: int, thread: int) -> str:
    return f"s-{process}-{thread}"


def activity(session: str, counter: int) -> ApiActivityState:
    """A snapshot that differs from every other one this thread records (the label changes)."""
    return ActivityFactory(
        busy=True,
        details__turn_started_at_ms=BASE_MS,
        details__last_activity_at_ms=BASE_MS + counter,
        details__label=f"{session}#{counter}",
    )


def fault_message(session: str, counter: int) -> str:
    return f"{session}#{counter}"


def expected_steps() -> list[Step]:
    """What each thread writes, in order: even counters are activity, odd ones faults."""
    return [
        ("activity" if counter % 2 == 0 else "fault", counter)
        for counter in range(APPENDS_PER_THREAD)
    ]


def step_of(event: ApiEvent) -> Step:
    """Decode the step a writer thread encoded in an event's label or message."""
    data = event.event
    if isinstance(data, ActivityChanged):
        assert data.activity.details is not None and data.activity.details.label is not None
        session, _, counter = data.activity.details.label.rpartition("#")
        kind = "activity"
    elif isinstance(data, SessionFault):
        session, _, counter = data.message.rpartition("#")
        kind = "fault"
    else:
        raise AssertionError(f"unexpected event {event!r}")
    assert session == event.session_id, f"seq {event.seq}: written for {session}: {event!r}"
    return kind, int(counter)


# --- child processes (module-level so the "spawn" context can pickle them) ---------------------


def append_steps(store: Store, session: str, start: threading.Barrier) -> None:
    """One writer thread: append this session's steps in order, checking each call appended."""
    start.wait(timeout=STARTUP_TIMEOUT_S)
    for kind, counter in expected_steps():
        if kind == "activity":
            appended = store.activity.record([(session, activity(session, counter))], BASE_MS)
            assert appended == 1, f"{session}#{counter}: activity.record returned {appended}"
        else:
            recorded = store.faults.record_startup_fault(session, fault_message(session, counter))
            assert recorded, f"{session}#{counter}: record_startup_fault returned False"


def writer_process(url: str, writer: int, reports: Messages, start: EventType) -> None:
    """A writer process: its own store, THREADS_PER_WRITER threads appending at once."""
    report = Report(name=f"writer-{writer}")
    errors_lock = threading.Lock()
    try:
        with Store.open(url) as store:
            reports.put(Ready(report.name))
            if not start.wait(timeout=STARTUP_TIMEOUT_S):
                raise TimeoutError("no start signal")
            barrier = threading.Barrier(THREADS_PER_WRITER)

            def run(thread: int) -> None:
                try:
                    append_steps(store, session_id(writer, thread), barrier)
                except BaseException:
                    with errors_lock:
                        report.errors.append(f"thread {thread}:\n{traceback.format_exc()}")
                    barrier.abort()

            threads = [
                threading.Thread(target=run, args=(thread,), name=f"{report.name}-{thread}")
                for thread in range(THREADS_PER_WRITER)
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            report.batches = store._database.write_path.batches
            report.calls = store._database.write_path.calls
    except BaseException:
        report.errors.append(traceback.format_exc())
    finally:
        reports.put(report)


def follower_process(
    url: str, reports: Messages, start: EventType, writers_done: EventType
) -> None:
    """The follower: page from seq 0 by cursor until it has EXPECTED_EVENTS events, or until the
    writers are done and one last pass finds nothing more (so a broken run still ends)."""
    report = Report(name="follower")
    try:
        with Store.open(url) as store:
            reports.put(Ready(report.name))
            if not start.wait(timeout=STARTUP_TIMEOUT_S):
                raise TimeoutError("no start signal")
            cursor = 0
            while len(report.seen) < EXPECTED_EVENTS:
                finishing = writers_done.is_set()
                page = store.events.load(after_seq=cursor, limit=FOLLOWER_PAGE)
                report.pages += 1
                report.pages_during_run += page.latest_seq < EXPECTED_EVENTS
                if page.events:
                    assert page.next_after_seq == page.events[-1].seq, page
                else:
                    assert page.next_after_seq == max(cursor, page.latest_seq), page
                assert page.next_after_seq >= cursor, f"cursor moved back from {cursor}: {page}"
                assert page.latest_seq >= page.next_after_seq, page
                report.seen.extend(
                    (event.seq, event.session_id, event.event.model_dump_json())
                    for event in page.events
                )
                cursor = page.next_after_seq
                if not page.events:
                    if finishing:
                        break
                    time.sleep(0.002)
    except BaseException:
        report.errors.append(traceback.format_exc())
    finally:
        reports.put(report)


# --- the scenario ---------------------------------------------------------------------------------


def all_events(store: Store) -> list[ApiEvent]:
    """The whole log, paged from seq 0 with the largest page."""
    events: list[ApiEvent] = []
    cursor = 0
    while True:
        page = store.events.load(after_seq=cursor, limit=1000)
        if not page.events:
            return events
        events.extend(page.events)
        cursor = page.next_after_seq


def gaps_and_duplicates(seqs: list[int], expected: int) -> str:
    counts: dict[int, int] = {}
    for seq in seqs:
        counts[seq] = counts.get(seq, 0) + 1
    missing = [seq for seq in range(1, expected + 1) if seq not in counts]
    duplicated = sorted(seq for seq, count in counts.items() if count > 1)
    unexpected = sorted(seq for seq in counts if not 1 <= seq <= expected)
    return (
        f"{len(seqs)} seqs; missing {missing[:20]}, duplicated {duplicated[:20]}, "
        f"out of range {unexpected[:20]}"
    )


def collect(
    reports: Messages, processes: list[SpawnProcess], count: int, kind: type, timeout: float
) -> list[Report | Ready]:
    """Receive `count` messages of `kind` (a `Report` cut short by a failure counts as one)."""
    received: list[Report | Ready] = []
    deadline = time.monotonic() + timeout
    while len(received) < count:
        try:
            message = reports.get(timeout=max(0.1, min(1.0, deadline - time.monotonic())))
        except queue.Empty:
            states = {process.name: process.exitcode for process in processes}
            crashed = any(state not in (None, 0) for state in states.values())
            if crashed or time.monotonic() > deadline:
                pytest.fail(f"no {kind.__name__} message; children's exit codes: {states}")
            continue
        if isinstance(message, Report) and kind is not Report:
            pytest.fail(f"{message.name} ended before starting:\n" + "\n".join(message.errors))
        received.append(message)
    return received


@pytest.mark.slow
def test_concurrent_writers_and_a_cursor_follower_see_one_gapless_ordered_log(
    store: Store, migrated_url: str
) -> None:
    sessions = [
        session_id(writer, thread)
        for writer in range(WRITER_PROCESSES)
        for thread in range(THREADS_PER_WRITER)
    ]
    for session in sessions:
        store.sessions.save(SessionRecord(id=session, project_id="p", state=SessionState.RUNNING))
    assert store.events.latest_seq() == 0

    context: SpawnContext = multiprocessing.get_context("spawn")
    reports: Messages = context.Queue()
    start = context.Event()
    writers_done = context.Event()
    writers = [
        context.Process(
            target=writer_process,
            args=(migrated_url, writer, reports, start),
            name=f"writer-{writer}",
            daemon=True,
        )
        for writer in range(WRITER_PROCESSES)
    ]
    follower = context.Process(
        target=follower_process,
        args=(migrated_url, reports, start, writers_done),
        name="follower",
        daemon=True,
    )
    processes = [*writers, follower]
    try:
        for process in processes:
            process.start()
        collect(reports, processes, len(processes), Ready, STARTUP_TIMEOUT_S)
        started = time.monotonic()
        start.set()

        finished: dict[str, Report] = {}
        while len(finished) < len(processes):
            (report,) = collect(reports, processes, 1, Report, RUN_TIMEOUT_S)
            assert isinstance(report, Report)
            finished[report.name] = report
            if all(writer.name in finished for writer in writers):
                writers_done.set()
        elapsed = time.monotonic() - started
        for process in processes:
            process.join(timeout=STARTUP_TIMEOUT_S)
    finally:
        for process in processes:
            if process.is_alive():
                process.terminate()
                process.join(timeout=5)

    errors = {name: report.errors for name, report in finished.items() if report.errors}
    assert not errors, "a worker raised:\n" + "\n".join(
        f"--- {name} ---\n" + "\n".join(messages) for name, messages in errors.items()
    )
    assert [process.exitcode for process in processes] == [0] * len(processes)

    # Each writer's threads shared transactions (group commit): fewer batches than calls.
    for writer in writers:
        report = finished[writer.name]
        assert report.calls == THREADS_PER_WRITER * APPENDS_PER_THREAD, report
        assert report.batches < report.calls, f"{writer.name} formed no group commit"

    # The final log: seqs exactly 1..N, the frontier at N.
    log = all_events(store)
    seqs = [event.seq for event in log]
    assert seqs == list(range(1, EXPECTED_EVENTS + 1)), gaps_and_duplicates(seqs, EXPECTED_EVENTS)
    assert store.events.latest_seq() == EXPECTED_EVENTS

    # Each writer thread's events are in the order it wrote them.
    by_session: dict[str, list[Step]] = {}
    for event in log:
        by_session.setdefault(event.session_id, []).append(step_of(event))
    assert sorted(by_session) == sorted(sessions)
    for session, steps in by_session.items():
        assert steps == expected_steps(), f"{session} out of order: {steps}"
        last_activity = max(counter for kind, counter in steps if kind == "activity")
        assert store.activity.get(session) == activity(session, last_activity)

    # The follower received every event exactly once, in order, as the final log has it.
    follower_report = finished["follower"]
    followed = [seq for seq, _, _ in follower_report.seen]
    assert followed == list(range(1, EXPECTED_EVENTS + 1)), gaps_and_duplicates(
        followed, EXPECTED_EVENTS
    )
    assert follower_report.pages_during_run > 0, "the follower only read after the writers ended"
    assert follower_report.seen == [
        (event.seq, event.session_id, event.event.model_dump_json()) for event in log
    ]
    print(
        f"{EXPECTED_EVENTS} events from {WRITER_PROCESSES}x{THREADS_PER_WRITER} writers in "
        f"{elapsed:.2f}s; follower read {follower_report.pages} pages, "
        f"{follower_report.pages_during_run} of them while the writers were appending"
    )
