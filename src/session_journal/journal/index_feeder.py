"""Feeding the project index from a journal writer: `IndexSink`, what the writer needs of an
index (`ProjectIndex` is one), and `IndexFeeder`, the thread that hands it the rows."""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import replace
from typing import Protocol

from .envelope import JournalEnvelope
from .search import IndexRow, index_row

log = logging.getLogger("session_journal.journal")

_GATHER = 0.05  # seconds the index thread gathers rows before a transaction


class IndexSink(Protocol):
    """Where a `JournalWriter` sends the rows of its persisted lines: `store.index` (a
    `ProjectIndex`), or anything else with these two methods."""

    def insert(self, rows: list[IndexRow]) -> None:
        """Store rows; a row whose (session_id, seq) is already stored is left as it is."""

    def writing_in_this_thread(self) -> bool:
        """Whether this thread holds the write transaction that `insert` would wait for (the
        writer then refuses to wait for the index instead of waiting forever)."""


class IndexFeeder:
    """Indexes a writer's persisted lines on a thread of its own, so the index never delays
    the file: it builds the rows from the (redacted) lines and inserts them in batches (what
    arrives within `_GATHER` seconds, at most 500 rows), one transaction per batch.

    Failures are logged, at most once a minute with a count, and never raised.
    """

    def __init__(self, index: IndexSink, session_id: str) -> None:
        self._index = index
        self._session_id = session_id
        self._queue: queue.SimpleQueue[bytes | threading.Event | None] = queue.SimpleQueue()
        self._failures = 0
        self._last_report = 0.0
        self._state_lock = threading.Lock()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="journal-index", daemon=True)
        self._thread.start()

    def put(self, line: bytes) -> None:
        """Queue a persisted line."""
        self._queue.put(line)

    def wait(self) -> None:
        """Return once every line queued before has had its insert attempted."""
        reached = threading.Event()
        with self._state_lock:
            if self._closed:  # close() inserted everything before stopping
                return
            self._queue.put(reached)
        reached.wait()

    def close(self) -> None:
        """Insert what is queued, then stop."""
        with self._state_lock:
            self._closed = True
            self._queue.put(None)
        self._thread.join()

    def _run(self) -> None:
        while True:
            batch: list[IndexRow] = []
            item = self._queue.get()
            deadline = time.monotonic() + _GATHER
            while isinstance(item, bytes):
                row = self._row(item)
                if row is not None:
                    batch.append(row)
                if len(batch) >= 500:
                    break
                try:
                    item = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    item = b""
                    break
            try:
                self._insert(batch)
            finally:  # whatever happened, nobody waits forever
                if isinstance(item, threading.Event):
                    item.set()
            if item is None:
                return

    def _row(self, line: bytes) -> IndexRow | None:
        try:
            text = line.decode("utf-8").rstrip("\n")
            return index_row(self._session_id, JournalEnvelope.model_validate_json(text), text)
        except Exception as error:  # a line the index cannot take is skipped, never fatal
            log.debug("not indexing a line of %s: %s", self._session_id, error)
            return None

    def _insert(self, batch: list[IndexRow]) -> None:
        if not batch:
            return
        try:
            self._index.insert(batch)
            return
        except Exception as error:
            first_error: Exception = error
        # One bad row must not keep its neighbours out: insert them one by one, and a row that
        # still fails without its text content is reported.
        failed = 0
        for row in batch:
            for attempt in (row, replace(row, text_content=None)):
                try:
                    self._index.insert([attempt])
                    break
                except Exception:
                    continue
            else:
                failed += 1
        if failed:
            self._report(failed, first_error)

    def _report(self, failed: int, error: Exception) -> None:
        self._failures += failed
        now = time.monotonic()
        if now - self._last_report >= 60:
            log.error(
                "%d journal event(s) could not be indexed; the events file is unaffected: %s",
                self._failures,
                error,
            )
            self._last_report, self._failures = now, 0
