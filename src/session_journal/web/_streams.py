"""`GET /api/events/stream`: the log as Server-Sent Events, exactly once and in commit order
across reconnects, for many clients at once.

**A stream is a cursor.** The app follows the log once (`_Hub`: one `AsyncFollower`, fed from
the store's shared window) and keeps the recent events' frames, each encoded once per process:
`id: <seq>`, `event: api_event`, `data:` the event's JSON with non-ASCII escaped (agent text
cannot end a line and inject a field). A stream holds no queue, only its cursor: on each
wake-up (coalesced up to `COALESCE_S`) it takes every frame after its cursor that its filter
admits and sends them in one write. A stream whose cursor is below the hub's frames (a
reconnect from far back, a client that fell behind) reads the database a page at a time until
it is back among them; so does a stream of one workspace (which workspace a session is in is
the database's to say). A send blocked for `send_timeout_s` closes that stream only: each
stream writes in its own task.

**What a stream holds is bounded in bytes as encoded** (a frame escapes a non-ASCII character to
6 or 12 bytes): a read of the database of about `PAGE_BYTES` of frames, whose texts it drops as
it makes their frames, one write at a time (`WRITE_BYTES`), and at most one write's worth of
the hub's frames.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import random
import re
import time
from bisect import bisect_right
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from session_journal import (
    ApiEvent,
    ApiEventFilter,
    AsyncFollower,
    CursorExpired,
    LegacyNotice,
    SessionJournalError,
    StoreClosed,
)
from session_journal.aio import AsyncStore

from ._guard import Principal
from ._problems import Problem, Receive, Scope, Send
from ._query import Query, digits, visible_session
from ._redaction import Redaction
from ._settings import WebSettings

LOG = logging.getLogger("session_journal.web")

COALESCE_S = (0.002, 0.01)
"""Wake-ups of the streams are at least this far apart under load (the first after a quiet
spell goes at once), from the first figure with few streams to the second with a thousand or
more (each wake-up costs every stream a write): each stream sends all that is pending at once."""
PER_STREAM_S = 10e-6
"""How much a wake-up's spacing grows with each open stream (within `COALESCE_S`)."""
TICK_S = 0.25
"""How often the hub looks for streams due a heartbeat, a progress frame or rotation, or stuck
in a send past `send_timeout_s` (streams hold no timer of their own)."""
HUB_EVENTS = 10_000
"""The most recent frames the hub keeps (older ones are read from the database)..."""
HUB_BYTES = 8 * 1024 * 1024
"""... and at most this many bytes of them."""
HUB_PRELOAD = 2_000
"""The events before the frontier the hub reads when it starts (see `_Hub._preload_from`)."""
PAGE = 1000
"""The most events per read of the database for a stream that is behind..."""
HUB_PAGE = 200
"""The most events of one page of the hub's follower (mostly served from the store's window)."""
FIRST_PAGE = 10
"""The events of a stream's first read of the database (its events' size is not known yet)."""
PAGE_BYTES = 1024 * 1024
"""... which reads fewer when its events are large: about this many bytes of frames a read
(judged by the frames of the stream's last read; a frame escapes non-ASCII text, so it is never
smaller than the event's JSON held in memory)."""
WRITE_BYTES = 64 * 1024
"""A stream sends at most about this many bytes in one write (or one frame, when a frame is
larger), then waits for the client to take it; it encodes each frame only when its write is
made, and takes at most this much of the hub's frames at a time: what a client that takes
nothing pins is bounded in bytes, whatever its text."""
RETRY_MS = 3000
"""The reconnection delay each stream announces (`retry:`), ± 50 % so clients spread out."""
PROGRESS_S = 1.0
"""A filtered stream tells how far it scanned (`event: progress`) at most this often."""
SHUTDOWN_S = 1.0
"""How long `shutdown_streams` waits for the streams to say goodbye and close."""
STREAM_PARAMETERS = frozenset({"after_seq", "session_id", "workspace_id", "type"})

_NON_ASCII = re.compile(r"[^\x00-\x7f]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code > 0xFFFF:
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
    return f"\\u{code:04x}"


def ascii_json(text: bytes) -> bytes:
    """JSON text (UTF-8) with every non-ASCII character written as a `\\u` escape: the same
    JSON value, on one line, safe in an SSE `data:` field."""
    if text.isascii():
        return text
    return _NON_ASCII.sub(_escape, text.decode()).encode()


def event_frame(seq: int, text: bytes) -> bytes:
    """The SSE frame of one event: its id, `event: api_event` and its JSON."""
    return b"id: %d\nevent: api_event\ndata: %s\n\n" % (seq, ascii_json(text))


def _stored_type(event: ApiEvent) -> str:
    """The type tag of an event's stored body, which a type filter reads (as `load` does): a
    body of an earlier shape is served as a `legacy_notice` that keeps it (`original_type`)."""
    body = event.event
    return body.original_type if isinstance(body, LegacyNotice) else body.type


def _control(kind: str, data: dict[str, Any], seq: int | None = None) -> bytes:
    head = b"" if seq is None else b"id: %d\n" % seq
    body = json.dumps(data, separators=(",", ":")).encode()
    return head + b"event: %s\ndata: %s\n\n" % (kind.encode(), body)


def _seq_of(text: str) -> int:
    """The seq of an event's JSON (`{"seq":N,...`, as `ApiEvent` writes it)."""
    if text.startswith('{"seq":'):
        return int(text[7 : text.index(",", 7)])
    seq: int = json.loads(text)["seq"]
    return seq


@dataclass(eq=False)
class _Stream:
    """One open stream: its cursor and what it needs to be woken."""

    principal: Principal
    event_filter: ApiEventFilter
    cursor: int
    opened: float = field(default_factory=time.monotonic)
    waker: asyncio.Future[None] | None = None
    closing: str | None = None  # why it ends, once it must
    due: float = math.inf  # when it must send without an event (heartbeat, progress, rotation)
    sending_since: float = 0.0  # when its send in progress began (0: none)
    task: asyncio.Task[Any] | None = None  # what serves it (cancelled by a send timeout)

    def wake(self) -> None:
        if self.waker is not None and not self.waker.done():
            self.waker.set_result(None)


class _Hub:
    """The app's one reader of the log for its streams (see the module docstring), and the
    streams' registry and counters."""

    def __init__(self, store: AsyncStore, settings: WebSettings) -> None:
        self.store = store
        self.settings = settings
        self.redaction = Redaction(settings.redact)  # the app's, for every route
        self.streams: set[_Stream] = set()
        self.per_key: Counter[str] = Counter()
        self.closes: Counter[str] = Counter()
        self.heartbeats = 0
        self.shutting_down = False
        self.polls: set[asyncio.Task[Any]] = set()  # the long-polls in progress
        # The frames of the events with lo < seq <= hi that the hub read, in seq order.
        self.seqs: list[int] = []
        self.sessions: list[str] = []
        self.types: list[str] = []
        self.frames: list[bytes] = []
        self.size = 0  # bytes of the frames
        self.lo = self.hi = 0
        self.pruned = 0
        self.running = False
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._started: asyncio.Event | None = None
        self._follower: AsyncFollower | None = None
        self._ticker: asyncio.Task[None] | None = None
        self._joined: dict[int, bytes] = {}  # cursor -> the frames after it, joined, at:
        self._joined_at = -1  # the `hi` they were joined at

    async def start(self) -> None:
        """Follow the log from its frontier now, unless already following on this loop."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._task is None or self._task.done():
            self.stop()
            self._loop, self._started = loop, asyncio.Event()
            self._task = loop.create_task(self._run(), name="session-journal web hub")
            self._ticker = loop.create_task(self._tick(), name="session-journal web ticker")
        assert self._started is not None
        await self._started.wait()

    def stop(self) -> None:
        """Stop following (the streams then read the database)."""
        self.running = False
        if self._follower is not None:
            self._follower.close()  # its `async for` ends; the task then ends by itself
        tasks, self._task, self._ticker = (self._task, self._ticker), None, None
        for task in tasks:
            if task is not None and not task.done() and self._loop is not None:
                with contextlib.suppress(RuntimeError):  # its loop is closed: nothing runs it
                    self._loop.call_soon_threadsafe(task.cancel)

    async def _tick(self) -> None:
        """Wake the streams due a frame without an event; end those stuck in a send."""
        timeout = self.settings.send_timeout_s
        while True:
            await asyncio.sleep(TICK_S)
            now = time.monotonic()
            for stream in list(self.streams):
                if stream.sending_since and now - stream.sending_since > timeout:
                    if stream.closing is None and stream.task is not None:
                        stream.closing = "send_timeout"
                        stream.task.cancel()
                elif stream.due <= now:
                    stream.wake()

    async def _run(self) -> None:
        assert self._started is not None
        after = await self._preload_from()
        while not self.shutting_down:
            try:
                self._follower = follower = self.store.events.follow(
                    after_seq=after, limit=HUB_PAGE
                )
                await follower
                self._reset(follower.cursor or 0)
                self.running = True
                self._started.set()
                await self._follow(follower)
                if follower.store_closed:
                    break
            except CursorExpired:  # the hub fell behind a prune: start again at the frontier
                after = None
            except StoreClosed:
                break
            except SessionJournalError as error:  # a failed read: try again from where it was
                LOG.warning("the stream hub failed to read the log (%s); retrying", error)
                after = self.hi if self.running else None
                self.running = False
                self._started.set()
                await asyncio.sleep(1.0)
            finally:
                self.running = False
        self._started.set()
        for stream in self.streams:  # the store closed: the streams end
            stream.closing = stream.closing or "store_closed"
            stream.wake()

    async def _preload_from(self) -> int | None:
        """Where the hub starts following: `HUB_PRELOAD` events before the frontier (above the
        floor of the pruned log), so that the streams of clients reconnecting from a little
        way back share its frames instead of each reading the database; `None` (the frontier)
        when the log cannot be read now."""
        try:
            page = await self.store.events.load(after_seq=None, limit=1)
        except SessionJournalError:
            return None
        return max(page.pruned_through, page.latest_seq - HUB_PRELOAD)

    async def _follow(self, follower: AsyncFollower) -> None:
        low, high = COALESCE_S
        last_wake = 0.0
        async for page in follower:
            if page.pruned_through > self.pruned:
                self._pruned(page.pruned_through)
            # Each event's frame, redacted, made once per process for every stream.
            events = self.store.events
            texts = await self.redaction.encoded([events.event_json(e) for e in page.events])
            for event, text in zip(page.events, texts, strict=True):
                self.seqs.append(event.seq)
                self.sessions.append(event.session_id)
                self.types.append(_stored_type(event))
                frame = event_frame(event.seq, text)
                self.frames.append(frame)
                self.size += len(frame)
            self.hi = page.next_after_seq
            if len(self.seqs) > HUB_EVENTS or self.size > HUB_BYTES:
                self._trim(self._over())
            spacing = min(high, max(low, len(self.streams) * PER_STREAM_S))
            wait = last_wake + spacing - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)  # what commits meanwhile joins this wake-up
            last_wake = time.monotonic()
            for stream in self.streams:
                stream.wake()

    def _over(self) -> int:
        """How many of the oldest frames to drop: down to half the bounds (a trim is rare)."""
        count, size = 0, self.size
        while count < len(self.frames) and (
            len(self.frames) - count > HUB_EVENTS // 2 or size > HUB_BYTES // 2
        ):
            size -= len(self.frames[count])
            count += 1
        return count

    def _reset(self, cursor: int) -> None:
        self._joined = {}
        self.size = 0
        self.seqs, self.sessions, self.types, self.frames = [], [], [], []
        self.lo = self.hi = cursor

    def _pruned(self, floor: int) -> None:
        self.pruned = floor
        self._trim(bisect_right(self.seqs, floor))
        self.lo = max(self.lo, floor)

    def _trim(self, count: int) -> None:
        if count <= 0:
            return
        self._joined = {}
        self.lo = self.seqs[count - 1]
        self.size -= sum(len(frame) for frame in self.frames[:count])
        del self.seqs[:count], self.sessions[:count], self.types[:count], self.frames[:count]

    def serves(self, stream: _Stream) -> bool:
        """Whether the hub's frames can answer `stream` now."""
        return (
            self.running
            and stream.event_filter.workspace_id is None
            and self.lo <= stream.cursor
            and not (0 < stream.cursor < self.pruned)
        )

    def frames_after(self, stream: _Stream) -> tuple[list[bytes], int]:
        """The frames after the stream's cursor that its filter admits, about `WRITE_BYTES` of
        them at most (at least one), and the cursor past the frames scanned: past every frame
        the hub holds when it took them all (or the stream's own, when it is ahead of the hub).
        A stream that is far behind takes the rest at its next turns: it never holds more of
        the hub's frames than one write, even once the hub has dropped them."""
        wanted = stream.event_filter
        session, types = wanted.session_id, wanted.types
        frames, seqs = self.frames, self.seqs
        start = bisect_right(seqs, stream.cursor)
        if session is None and types is None:
            if self._joined_at != self.hi:
                self._joined, self._joined_at = {}, self.hi
            joined = self._joined.get(stream.cursor)  # streams at one cursor share one write
            if joined is None:
                end, size = start, 0
                while end < len(seqs) and (end == start or size + len(frames[end]) <= WRITE_BYTES):
                    size += len(frames[end])
                    end += 1
                if end < len(seqs):  # far behind: one write's worth now
                    return frames[start:end], seqs[end - 1]
                joined = self._joined[stream.cursor] = b"".join(frames[start:])
            return ([joined] if joined else []), max(self.hi, stream.cursor)
        taken: list[bytes] = []
        size = 0
        for i in range(start, len(seqs)):
            if (session is None or self.sessions[i] == session) and (
                types is None or self.types[i] in types
            ):
                if taken and size + len(frames[i]) > WRITE_BYTES:
                    return taken, seqs[i - 1]  # the rest at its next turn
                taken.append(frames[i])
                size += len(frames[i])
        return taken, max(self.hi, stream.cursor)

    def status(self) -> dict[str, object]:
        """What `/api/status` shows of the streams."""
        lags = [max(0, self.hi - stream.cursor) for stream in self.streams]
        return {
            "streams": len(self.streams),
            "max_streams": self.settings.max_streams,
            "lag_max": max(lags, default=0),
            "lag_total": sum(lags),
            "closes": dict(self.closes),
            "heartbeats": self.heartbeats,
            "following": self.running,
            "cursor": self.hi,
            "frames_held": len(self.seqs),
        }

    async def shutdown(self) -> None:
        """Tell every stream `event: shutdown` and wait (at most `SHUTDOWN_S`) until they closed."""
        self.shutting_down = True
        for stream in self.streams:
            stream.closing = stream.closing or "shutdown"
            stream.wake()
        for poll in list(self.polls):  # a long-poll answers 503 `unavailable`
            poll.cancel()
        deadline = time.monotonic() + SHUTDOWN_S
        while self.streams and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        for stream in list(self.streams):  # stuck in a send to a client that takes nothing
            if stream.task is not None:
                stream.task.cancel()
        self.stop()


class StreamRoute:
    """The raw ASGI endpoint of `GET /api/events/stream` (see the module docstring)."""

    def __init__(self, hub: _Hub, expired: Callable[[int], Awaitable[dict[str, object]]]) -> None:
        self.hub = hub
        self._expired = expired  # the members of the 410 document for a cursor

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        hub, settings = self.hub, self.hub.settings
        try:
            if scope["method"] not in ("GET", "HEAD"):
                raise Problem(
                    "method_not_allowed", "this route takes GET", headers={"Allow": "GET, HEAD"}
                )
            principal: Principal = scope["state"]["principal"]
            query = Query(scope["query_string"], STREAM_PARAMETERS, frozenset({"type"}))
            event_filter = query.event_filter(principal.workspace)
            cursor = query.seq("after_seq")
            for name, value in scope["headers"]:
                given = value.decode("latin-1").strip()
                if name.lower() == b"last-event-id" and given:  # wins over after_seq
                    cursor = digits("Last-Event-ID", given)
            if principal.workspace is not None and event_filter.session_id is not None:
                await visible_session(hub.store, principal.workspace, event_filter.session_id)
            if hub.shutting_down:
                raise Problem(
                    "unavailable", "the server is shutting down", headers={"Retry-After": "1"}
                )
            if len(hub.streams) >= settings.max_streams:
                raise Problem(
                    "too_many_streams",
                    f"{settings.max_streams} streams are open, the most this server holds",
                    headers={"Retry-After": str(random.randint(2, 10))},
                )
            if hub.per_key[principal.key] >= settings.max_streams_per_token:
                raise Problem(
                    "rate_limited",
                    f"this token holds {settings.max_streams_per_token} streams already",
                    headers={"Retry-After": str(random.randint(2, 10))},
                )
            stream = _Stream(principal, event_filter, cursor or 0)
            hub.streams.add(stream)  # counted now: a concurrent start sees the cap
            hub.per_key[principal.key] += 1
        except Problem as problem:
            await problem.send(send)
            return
        try:
            await self._serve(stream, cursor, scope, receive, send)
        finally:
            hub.streams.discard(stream)
            hub.per_key[principal.key] -= 1
            if hub.per_key[principal.key] <= 0:
                del hub.per_key[principal.key]

    async def _serve(
        self, stream: _Stream, cursor: int | None, scope: Scope, receive: Receive, send: Send
    ) -> None:
        hub, settings, events = self.hub, self.hub.settings, self.hub.store.events
        # The first page checks the cursor before anything is sent (410, 409) and gives the
        # frontier and floor for `ready`.
        try:
            first = await events.load_json_events(stream.event_filter, cursor, FIRST_PAGE)
        except CursorExpired as error:
            await Problem(
                "cursor_expired", str(error), extra=await self._expired(error.cursor)
            ).send(send)
            hub.closes["cursor_expired"] += 1
            return
        if cursor is not None and cursor > first.latest_seq:
            await Problem(
                "cursor_ahead",
                f"after_seq {cursor} is above the frontier {first.latest_seq}: the cursor comes "
                "from another database or a restored backup; resync the client",
                extra={"cursor": cursor, "latest_seq": first.latest_seq},
            ).send(send)
            hub.closes["cursor_ahead"] += 1
            return
        stream.cursor = cursor = first.latest_seq if cursor is None else cursor
        await hub.start()
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"text/event-stream; charset=utf-8"),
                    (b"cache-control", b"no-store, no-transform"),
                    (b"x-accel-buffering", b"no"),
                    (b"content-encoding", b"identity"),
                ],
            }
        )
        if scope["method"] == "HEAD":
            await send({"type": "http.response.body", "body": b""})
            return
        ready = {
            "cursor": cursor,
            "latest_seq": first.latest_seq,
            "pruned_through": first.pruned_through,
            "heartbeat_s": settings.heartbeat_s,
        }
        retry = int(RETRY_MS * random.uniform(0.5, 1.5))
        opening = b"retry: %d\n\n" % retry + _control("ready", ready)
        # The page's texts go to the stream's backlog, which it empties as it sends: nothing
        # here holds them while the client is slow to take them.
        backlog = _Backlog(await hub.redaction.texts(first.events))
        scanned = first.next_after_seq
        del first
        watcher = asyncio.create_task(_watch_disconnect(receive, stream))
        stream.task = asyncio.current_task()
        reason = "error"
        try:
            reason = await self._pump(stream, backlog, scanned, opening, send)
        except asyncio.CancelledError:
            if stream.closing not in ("send_timeout", "shutdown"):
                raise  # the server's own cancellation
            current = asyncio.current_task()
            if current is not None:
                current.uncancel()
            reason = stream.closing
            return  # the client takes nothing: no goodbye
        except TimeoutError:  # the goodbye of a stopping server was not taken in time
            reason = "send_timeout"
        except SessionJournalError as error:  # a read failed mid-stream: the client resumes
            LOG.warning("a stream ended: reading the log failed (%s)", error)
            reason = "error"
        except OSError:
            reason = "client_gone"
        finally:
            watcher.cancel()
            hub.closes[reason] += 1
        with contextlib.suppress(Exception):
            async with asyncio.timeout(1.0):
                await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _pump(
        self, stream: _Stream, backlog: _Backlog, scanned: int, opening: bytes, send: Send
    ) -> str:
        """Send what is pending after the stream's cursor at each wake-up until it must end;
        why it ended. `backlog` holds the JSON of the events of the first page, read through
        `scanned`; each read of the database refills it."""
        hub, settings, events = self.hub, self.hub.settings, self.hub.store.events
        loop = asyncio.get_running_loop()
        filtered = stream.event_filter != ApiEventFilter()
        lifetime = settings.stream_lifetime_s * random.uniform(0.9, 1.1)
        rotate_at = stream.opened + lifetime
        parts: list[bytes] = [opening]
        stream.cursor = max(stream.cursor, scanned)
        sent_cursor = -1  # a filtered stream's last id sent (an event's or a progress frame's)
        last_sent = time.monotonic()
        last_progress = last_sent - PROGRESS_S  # the first may go at once
        while True:
            if stream.closing is not None:
                if stream.closing in ("shutdown", "store_closed"):
                    # What the stream read and did not send yet is left: the client resumes
                    # from the last id it took.
                    async with asyncio.timeout(1.0):  # as the server stops: no longer
                        await self._send(send, stream, [*parts, _control("shutdown", {})])
                return stream.closing
            if parts or backlog.texts:
                last_sent = time.monotonic()
                await self._send(send, stream, parts, backlog)
                parts = []
            now = time.monotonic()
            if now >= rotate_at:
                await self._send(send, stream, [_control("rotate", {})])
                return "rotate"
            if not hub.serves(stream):
                limit = backlog.next_limit()
                try:
                    page = await events.load_json_events(stream.event_filter, stream.cursor, limit)
                except CursorExpired as error:
                    # The data is the 410 answer's document, as a client starting now gets it.
                    expired = Problem(
                        "cursor_expired", str(error), extra=await self._expired(error.cursor)
                    )
                    frame = b"event: expired\ndata: %s\n\n" % expired.body()
                    await self._send(send, stream, [frame])
                    return "cursor_expired"
                # Redacted now; encoded as its writes are made.
                backlog.refill(await hub.redaction.texts(page.events))
                if backlog.texts:
                    sent_cursor = _seq_of(backlog.texts[-1])
                stream.cursor = max(stream.cursor, page.next_after_seq)
                behind = len(page.events) == limit
                del page
                if behind or backlog.texts:
                    continue
            else:
                frames, after = hub.frames_after(stream)
                if frames:
                    parts = frames
                    if filtered:  # its frames are one event each
                        sent_cursor = _frame_seq(frames[-1])
                stream.cursor = after
                if parts:
                    continue
            if filtered and stream.cursor > sent_cursor and now - last_progress >= PROGRESS_S:
                progress = {"scanned_through": stream.cursor}
                parts = [_control("progress", progress, seq=stream.cursor)]
                sent_cursor, last_progress = stream.cursor, now
                continue
            due = min(last_sent + settings.heartbeat_s, rotate_at)
            if filtered and stream.cursor > sent_cursor:
                due = min(due, last_progress + PROGRESS_S)
            if due <= time.monotonic():
                parts = [b": heartbeat\n\n"]
                hub.heartbeats += 1
                continue
            stream.due = due  # the hub's ticker wakes it then, if nothing does before
            stream.waker = loop.create_future()
            try:
                await stream.waker
            finally:
                stream.waker = None

    async def _send(
        self, send: Send, stream: _Stream, parts: list[bytes], backlog: _Backlog | None = None
    ) -> None:
        """`parts`, then the frames of `backlog`'s events (encoded one write at a time, each
        text dropped once its frame is made), in writes of about `WRITE_BYTES` at most; the
        hub's ticker ends the stream if one takes over `send_timeout_s`."""
        stream.sending_since = time.monotonic()
        try:
            for body in _writes(parts, backlog):
                await send({"type": "http.response.body", "body": body, "more_body": True})
                stream.sending_since = time.monotonic()
        finally:
            stream.sending_since = 0.0


class _Backlog:
    """The JSON of the events a stream read from the database and has not sent yet, emptied
    as their frames are made (one write at a time), and the size of those frames: the next
    read takes about `PAGE_BYTES` of frames, judged by the frames of the last read that had
    events."""

    def __init__(self, texts: list[str]) -> None:
        self.texts = deque(texts)
        self._average: int | None = None  # bytes a frame, of the last read with events
        self._bytes = self._made = 0  # of the frames made of the current read

    def refill(self, texts: list[str]) -> None:
        """The events of a new read (the backlog is empty: every read is sent first)."""
        if self._made:
            self._average = max(1, self._bytes // self._made)
        self._bytes = self._made = 0
        self.texts.extend(texts)

    def frame(self) -> bytes:
        """The next event's frame; its text leaves the backlog."""
        text = self.texts.popleft()
        frame = event_frame(_seq_of(text), text.encode())
        self._bytes += len(frame)
        self._made += 1
        return frame

    def next_limit(self) -> int:
        """The events of the stream's next read: `PAGE`, fewer when frames are large (about
        `PAGE_BYTES` a read); `FIRST_PAGE` while their size is not known yet."""
        average = max(1, self._bytes // self._made) if self._made else self._average
        if average is None:
            return FIRST_PAGE
        return max(1, min(PAGE, PAGE_BYTES // average))


def _writes(parts: list[bytes], backlog: _Backlog | None) -> Iterator[bytes]:
    """The bodies of the writes of `parts` and then of `backlog`'s events: about `WRITE_BYTES`
    each (or one frame, when a frame is larger)."""
    batch: list[bytes] = []
    size = 0
    pending = iter(parts)
    while True:
        part = next(pending, None)
        if part is None:
            if backlog is None or not backlog.texts:
                break
            part = backlog.frame()
        if batch and size + len(part) > WRITE_BYTES:
            body = b"".join(batch)
            batch, size = [], 0  # held no longer than the write
            yield body
            del body
        batch.append(part)
        size += len(part)
    if batch:
        body = b"".join(batch)
        batch = []
        yield body


def _frame_seq(frame: bytes) -> int:
    """The id of an event frame (`id: N\\n...`)."""
    return int(frame[4 : frame.index(b"\n")])


async def _watch_disconnect(receive: Receive, stream: _Stream) -> None:
    """Close the stream when its client goes away."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            stream.closing = stream.closing or "client_gone"
            stream.wake()
            return
