"""`JournalWriter`: appends a session's events to `events.jsonl` on a background thread.

Each line is written with `os.write` and made durable with `fdatasync` before the next one. When
the disk fails, the writer degrades instead of raising: the file is truncated back to the last
durable offset (a failed `fdatasync` may have lost anything after it, so those bytes are
rewritten, never just synced again), and events wait in a bounded buffer that is retried every
`recovery_interval`, on `flush()` and on `close()`.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import logging
import os
import queue
import threading
import time
import weakref
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._json_text import compact_json
from .._validation import require_id
from ..errors import InvalidRecord, WriteInsideUnitOfWork, WriterClosed
from .extract import event_kind
from .index_feeder import IndexFeeder, IndexSink
from .redaction import Redactor
from .stats import EVENTS_FILE, SessionStats

log = logging.getLogger("session_journal.journal")

TORN_FILE = EVENTS_FILE + ".torn"
_STATS_INTERVAL = 0.5  # seconds between stats.json updates while events stream in

# Writers still open at interpreter exit are closed then, so queued events are not lost with
# the daemon threads.
_LIVE: weakref.WeakSet[JournalWriter] = weakref.WeakSet()


@atexit.register
def _close_live_writers() -> None:
    for writer in list(_LIVE):
        writer.close()


@dataclass(frozen=True)
class WriterStatus:
    """Whether the writer is degraded, how many events wait in its buffer, how many it dropped
    (the oldest, when the buffer was full) and the last write error."""

    degraded: bool
    buffered: int
    dropped: int
    last_error: str | None


@dataclass(frozen=True)
class FlushResult:
    """What `flush()` found: `persisted` is true when every event sent before it is on disk
    (written and fsynced); otherwise the rest waits in the degraded buffer (`status`)."""

    persisted: bool
    status: WriterStatus


@dataclass
class _Line:
    data: bytes
    kind: str
    seq: int | None
    indexable: bool  # a real envelope (not an encode_error line)


@dataclass
class _Barrier:
    done: threading.Event
    result: FlushResult | None = None


_CLOSE = object()


class JournalWriter:
    """Appends envelopes to `session_dir/events.jsonl` in the order sent. Thread-safe `send()`
    never blocks on I/O and never raises for I/O trouble; see the module docstring."""

    def __init__(
        self,
        session_dir: str | os.PathLike[str],
        *,
        redactor: Redactor | None = None,
        index: IndexSink | None = None,
        session_id: str | None = None,
        max_buffered: int = 10_000,
        recovery_interval: float = 2.0,
    ) -> None:
        if session_id is not None:
            require_id(session_id, "session_id")
        if isinstance(max_buffered, bool) or not isinstance(max_buffered, int) or max_buffered < 1:
            raise InvalidRecord(f"max_buffered must be a positive integer, got {max_buffered!r}")
        if index is not None and session_id is None:
            raise InvalidRecord("a writer with an index needs the session_id to index")
        self.session_dir = Path(session_dir)
        self.session_dir.mkdir(parents=True, exist_ok=True)
        self.events_path = self.session_dir / EVENTS_FILE
        self._redactor = redactor
        self._session_id = session_id
        self._max_buffered = max_buffered
        self._recovery_interval = recovery_interval
        self._fd = os.open(self.events_path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            self._offset = _repair_torn_tail(self._fd, self.events_path)
            os.lseek(self._fd, self._offset, os.SEEK_SET)
            self._stats = SessionStats.load_or_rebuild(self.session_dir)
        except BaseException:
            os.close(self._fd)
            raise
        self._stats_dirty = False
        self._stats_saved = time.monotonic()
        self._next_retry = 0.0
        self._buffer: deque[_Line] = deque()
        self._dropped = 0
        self._last_error: str | None = None
        self._status_lock = threading.Lock()
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._feeder = IndexFeeder(index, session_id) if index is not None and session_id else None
        self._index = index
        self._dropped_at_barrier = 0
        self._state_lock = threading.Lock()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="journal-writer", daemon=True)
        self._thread.start()
        _LIVE.add(self)

    # -- the caller's side -------------------------------------------------------------------

    def send(self, envelope: Any) -> None:
        """Queue an envelope for writing (it is serialised on the writer's thread)."""
        with self._state_lock:  # never queued behind the close: it would be lost
            if self._closed:
                raise WriterClosed(
                    f"the writer of {self.events_path} is closed; open a new JournalWriter"
                )
            self._queue.put(envelope)

    def flush(self) -> FlushResult:
        """Wait until everything sent before is written and fsynced (and its index insert
        attempted), or held in the degraded buffer after a retry. `persisted` is false if an
        event sent before was dropped or still waits in the buffer."""
        self._refuse_inside_a_unit_of_work("flush")
        with self._state_lock:
            if self._closed:
                return FlushResult(persisted=not self._buffer, status=self.status)
            barrier = _Barrier(threading.Event())
            self._queue.put(barrier)
        barrier.done.wait()
        if self._feeder is not None:
            # On this thread, not the writer's: the index may be slow, the file goes on.
            self._feeder.wait()
        assert barrier.result is not None
        return barrier.result

    def close(self) -> None:
        """Drain, retry the buffer a last time, fsync and stop the thread; idempotent."""
        self._refuse_inside_a_unit_of_work("close")
        with self._state_lock:
            if self._closed:
                return
            self._closed = True
            self._queue.put(_CLOSE)
        self._thread.join()
        _LIVE.discard(self)

    async def aflush(self) -> FlushResult:
        """`flush()` for asyncio code: the wait happens on a thread of its own, never on the
        event loop's."""
        return await asyncio.to_thread(self.flush)

    async def aclose(self) -> None:
        """`close()` for asyncio code: the drain and the last fsync happen on a thread of its
        own, never on the event loop's."""
        await asyncio.to_thread(self.close)

    def _refuse_inside_a_unit_of_work(self, action: str) -> None:
        # The index thread would wait for the write lock that this thread holds.
        if self._index is not None and self._index.writing_in_this_thread():
            raise WriteInsideUnitOfWork(
                f"{action}() of a journal writer inside a unit of work of its index's store "
                "(a unit_of_work() block, a function the write path runs, or a transaction "
                "bound with store.bind) would wait forever for the index; call it after that "
                "unit of work ends"
            )

    def __enter__(self) -> JournalWriter:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    @property
    def status(self) -> WriterStatus:
        """A snapshot of the writer's health."""
        with self._status_lock:
            return WriterStatus(
                degraded=bool(self._buffer),
                buffered=len(self._buffer),
                dropped=self._dropped,
                last_error=self._last_error,
            )

    # -- the writer's thread -----------------------------------------------------------------

    def _run(self) -> None:
        while True:
            try:
                item = self._queue.get(timeout=self._idle_timeout())
            except queue.Empty:
                item = None
            if item is _CLOSE:
                self._finish()
                return
            try:
                if isinstance(item, _Barrier):
                    self._retry()
                    self._save_stats()
                elif item is not None:
                    self._handle(self._serialize(item))
                self._housekeeping()
            except Exception:  # a bug must not leave flush() and close() waiting forever
                log.exception("journal writer of %s: unexpected error", self.events_path)
            if isinstance(item, _Barrier):
                self._complete(item)

    def _complete(self, barrier: _Barrier) -> None:
        persisted = not self._buffer and self._dropped == self._dropped_at_barrier
        self._dropped_at_barrier = self._dropped
        barrier.result = FlushResult(persisted=persisted, status=self.status)
        barrier.done.set()

    def _idle_timeout(self) -> float | None:
        deadlines = []
        if self._buffer:
            deadlines.append(self._next_retry)
        if self._stats_dirty:
            deadlines.append(self._stats_saved + _STATS_INTERVAL)
        return max(0.0, min(deadlines) - time.monotonic()) if deadlines else None

    def _housekeeping(self) -> None:
        # Runs after every event too, so a steady stream does not hold off the retries.
        now = time.monotonic()
        if self._buffer and now >= self._next_retry:
            self._retry()
        if now - self._stats_saved >= _STATS_INTERVAL:
            self._save_stats()

    def _handle(self, line: _Line) -> None:
        if self._buffer or not self._write(line):  # degraded: keep the order, retry later
            self._hold(line)

    def _write(self, line: _Line) -> bool:
        try:
            view = memoryview(line.data)
            while view:
                written = os.write(self._fd, view)
                view = view[written:]
            os.fdatasync(self._fd)
        except OSError as error:
            self._fail(error)
            return False
        self._offset += len(line.data)
        self._stats.count(line.kind, line.seq, len(line.data))
        self._stats_dirty = True
        if self._feeder is not None and line.indexable:
            self._feeder.put(line.data)
        return True

    def _fail(self, error: OSError) -> None:
        # Whatever followed the last durable offset may be half-written, or lost by a failed
        # fdatasync even if a later one succeeds: cut it off and rewrite it later.
        first = not self._buffer
        with self._status_lock:
            self._last_error = f"{error.strerror or error} (errno {error.errno})"
        try:
            os.ftruncate(self._fd, self._offset)
        except OSError as truncate_error:
            log.error(
                "cannot truncate %s back to %d: %s", self.events_path, self._offset, truncate_error
            )
        # Even if the truncate failed, the next write goes to the last durable offset, over
        # the half-written bytes, never after them.
        os.lseek(self._fd, self._offset, os.SEEK_SET)
        if first:
            self._next_retry = time.monotonic() + self._recovery_interval
            log.warning(
                "writes to %s failed, buffering events: %s", self.events_path, self._last_error
            )

    def _hold(self, line: _Line) -> None:
        with self._status_lock:
            if len(self._buffer) >= self._max_buffered:
                self._buffer.popleft()
                self._dropped += 1
            self._buffer.append(line)

    def _retry(self) -> None:
        if not self._buffer:
            return
        self._next_retry = time.monotonic() + self._recovery_interval
        while self._buffer:
            if not self._write(self._buffer[0]):
                return
            with self._status_lock:
                self._buffer.popleft()
        log.warning("writes to %s recovered", self.events_path)

    def _save_stats(self) -> None:
        # At most every _STATS_INTERVAL while events stream in, and whenever the writer idles,
        # flushes or closes: a stale stats.json is noticed (by size) and rebuilt on load.
        if not self._stats_dirty:
            return
        self._stats_saved = time.monotonic()
        try:
            self._stats.save(self.session_dir)
            self._stats_dirty = False
        except OSError as error:
            log.debug("cannot save stats of %s: %s", self.session_dir, error)

    def _finish(self) -> None:
        while True:  # events sent before close()
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if isinstance(item, _Barrier):
                self._complete(item)
            elif item is not _CLOSE:
                self._handle(self._serialize(item))
        self._retry()
        self._save_stats()
        if self._buffer or self._dropped:
            log.error(
                "closing %s: %d events not persisted, %d dropped, last error: %s",
                self.events_path,
                len(self._buffer),
                self._dropped,
                self._last_error,
            )
        if self._feeder is not None:
            self._feeder.close()
        os.close(self._fd)

    def _serialize(self, envelope: Any) -> _Line:
        """The envelope's line; never raises (an unencodable event becomes `encode_error`)."""
        seq = getattr(envelope, "seq", None)
        try:
            value = envelope.model_dump(mode="json")
            if self._redactor is not None:
                self._redactor.redact_json(value)
            text = compact_json(value)
            data = (text + "\n").encode("utf-8")
            kind = event_kind(envelope.event)
        except Exception as error:  # any failure to encode must not stop the writer
            number = seq if isinstance(seq, int) else None
            fallback = {
                "seq": number,
                "type": "encode_error",
                "error": f"{type(error).__name__}: {error}",
            }
            data = (json.dumps(fallback) + "\n").encode("utf-8")
            return _Line(data, "encode_error", number, False)
        return _Line(data, kind, seq, True)


def _repair_torn_tail(fd: int, path: Path) -> int:
    """Move an unterminated last line (a crash mid-write) to `events.jsonl.torn` and cut it
    off, so no later line is glued to it. Returns the end offset."""
    size = os.fstat(fd).st_size
    if size == 0:
        return 0
    with path.open("rb") as reader:
        reader.seek(max(0, size - 1))
        if reader.read(1) == b"\n":
            return size
        start, chunk = size, 65536
        while start > 0:  # find the last newline, reading backwards
            begin = max(0, start - chunk)
            reader.seek(begin)
            block = reader.read(start - begin)
            newline = block.rfind(b"\n")
            if newline >= 0:
                start = begin + newline + 1
                break
            start = begin
        reader.seek(start)
        fragment = reader.read()
    with (path.parent / TORN_FILE).open("ab") as torn:
        torn.write(fragment + b"\n")
        torn.flush()
        os.fsync(torn.fileno())
    os.ftruncate(fd, start)
    os.fsync(fd)
    log.warning(
        "%s ended with a torn line of %d bytes, moved to %s", path, len(fragment), TORN_FILE
    )
    return start
