"""`GET /api/events/stream`: the log as Server-Sent Events, exactly once and in commit order
across reconnects, for many clients at once.

**A stream is a cursor.** The streams are served from the store's one window of recent events
through the event loop's `Fanout` (`session_journal.follow`), and the app keeps the window's
events' frames, each made once per process (`_Frames`): `id: <seq>`, `event: api_event`,
`data:` the event's JSON with non-ASCII escaped (agent text cannot end a line and inject a
field). A stream holds no queue, only its cursor: woken when the window holds events its filter
may admit, it takes every frame after its cursor that its filter admits and sends them in one
write (streams without a filter at one cursor share that write, `frames_after`). A stream
without a filter that sent everything the window holds waits with the hub (`_Hub.park`): at
each wake-up the hub reads the window once and begins every such stream's write itself, in one
step of the loop (`_eager.send_now`), without a turn of each stream's task; a write its client
is slow to take goes on in a task of its own and the stream's task takes over. A stream whose
cursor is below the window (a reconnect from far back, a client that fell behind) reads the
database a page at a time until it is back within it; so does a stream of one workspace (which
workspace a session is in is the database's to say). A send blocked for `send_timeout_s`
closes that stream only.

**What a stream holds is bounded in bytes as encoded** (a frame escapes a non-ASCII character to
6 or 12 bytes): a read of the database of about `PAGE_BYTES` of frames, whose texts it drops as
it makes their frames, one write at a time (`WRITE_BYTES`), and at most one write's worth of
the hub's frames.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import logging
import math
import random
import re
import time
from bisect import bisect_left
from collections import Counter, OrderedDict, deque
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from session_journal import ApiEventFilter, CursorExpired, Histogram, SessionJournalError
from session_journal.aio import AsyncStore
from session_journal.follow import Fanout, Row, Waiter, Window, encoded_size, needs_check

from ._eager import send_now
from ._guard import Principal
from ._problems import Problem, Receive, Scope, Send
from ._query import Query, digits, visible_session
from ._redaction import Redaction
from ._settings import WebSettings

LOG = logging.getLogger("session_journal.web")

TICK_S = 0.25
"""How often the hub looks for streams due a heartbeat, a progress frame or rotation, or stuck
in a send past `send_timeout_s` (streams hold no timer of their own)."""
WINDOW_PRELOAD = 2_000
"""The events before the frontier the store's window holds from its first read, when the app
serves streams (clients reconnecting from a little way back are served from memory)."""
WINDOW_PAGE = 200
"""The most events a stream takes of the window at one turn (fewer when large: `WRITE_BYTES`)."""
FRAME_DELAY_BUCKETS_S = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)
"""The upper bounds (seconds) of the buckets of `/metrics`' commit-to-frame histogram."""
FRAME_BYTES = 7 * 1024 * 1024
"""The most bytes of frames the hub keeps (`_Frames`); with the writes it shares
(`JOINED_BYTES`) and the store's window, whose texts take at most
`StoreOptions.follow_window_bytes` (8 MiB by default), 16 MiB in all."""
JOINED_BYTES = 1024 * 1024
"""The most bytes of the writes that streams without a filter at one cursor share, kept for one
window (each write at most `WRITE_BYTES`)."""
PAGE = 1000
"""The most events per read of the database for a stream that is behind..."""
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


def _control(kind: str, data: dict[str, Any], seq: int | None = None) -> bytes:
    head = b"" if seq is None else b"id: %d\n" % seq
    body = json.dumps(data, separators=(",", ":")).encode()
    return head + b"event: %s\ndata: %s\n\n" % (kind.encode(), body)


@dataclass(eq=False)
class _Stream:
    """One open stream: its cursor and what it needs to be woken."""

    principal: Principal
    event_filter: ApiEventFilter
    cursor: int
    opened: float = field(default_factory=time.monotonic)
    # What its task awaits: its registration with the loop's `Fanout`, or, parked with the
    # hub (`_Hub.park`), the hub's future; `wake` sets either.
    waker: asyncio.Future[Any] | None = None
    closing: str | None = None  # why it ends, once it must
    due: float = math.inf  # when it must send without an event (heartbeat, progress, rotation)
    sending_since: float = 0.0  # when its send in progress began (0: none)
    task: asyncio.Task[Any] | None = None  # what serves it (cancelled by a send timeout)
    send: Send | None = None  # its ASGI `send`, once its response started...
    context: contextvars.Context | None = None  # ...and its task's context (`send_now`)
    last_sent: float = 0.0  # when it last wrote
    rotate_at: float = math.inf  # when it must end with `rotate`
    pending: asyncio.Future[None] | None = None  # a write of the hub's that had to wait
    delivered_at: float = 0.0  # when the hub last read the window for it (`_deliver_window`)
    every_event: bool = field(init=False)  # no filter: it shares writes with its cursor's

    def __post_init__(self) -> None:
        self.every_event = self.event_filter == ApiEventFilter()  # once: a model's == costs

    def wake(self) -> None:
        if self.waker is not None and not self.waker.done():
            self.waker.set_result(None)


class _Frames:
    """The SSE frames of the window's events, each redacted and encoded once per process, keyed
    by seq, at most `FRAME_BYTES` of them (counted as sent: escaped). A frame goes once the
    window's floor passes it or its event is deleted (`Window.missing`), and the oldest made go
    first when the bound is reached: the frame is made again if a stream asks for it later."""

    def __init__(self, redaction: Redaction) -> None:
        self._redaction = redaction
        self._frames: OrderedDict[int, bytes] = OrderedDict()  # in the order made: mostly by seq
        # From an event's `recorded_at_ms` to its frame's making for the streams at the log's
        # end (`live`, the hub's delivery), once per event (the highest seq observed: a frame
        # made for a stream catching up is not, nor one made again), by bucket of
        # `FRAME_DELAY_BUCKETS_S` (the last: above them all).
        self._delays = [0] * (len(FRAME_DELAY_BUCKETS_S) + 1)
        self._delays_s = 0.0
        self._observed_through = 0
        self.size = 0  # bytes of the frames
        self._missing: frozenset[int] = frozenset()  # the window's, when last swept

    def delays(self) -> Histogram:
        """The commit-to-frame delays observed (`/metrics`)."""
        return Histogram(
            bounds_s=FRAME_DELAY_BUCKETS_S, counts=tuple(self._delays), sum_s=self._delays_s
        )

    def held(self) -> list[bytes]:
        """The frames held now, by seq."""
        return [self._frames[seq] for seq in sorted(self._frames)]

    def __len__(self) -> int:
        return len(self._frames)

    async def of(self, rows: list[Row], window: Window, *, live: bool = False) -> list[bytes]:
        """The frames of `rows` (rows of `window`), in their order: those held, and the others
        made now (their texts redacted together, off the loop when a text may hold a secret).
        `live`: for streams at the log's end, whose new events' delays are observed."""
        frames = self._frames
        known = {row[0]: frames[row[0]] for row in rows if row[0] in frames}
        new = [row for row in rows if row[0] not in known]
        if new:
            texts = await self._redaction.texts([row[2] for row in new])
            now = time.time_ns() // 1_000_000
            for row, text in zip(new, texts, strict=True):
                if live and row[0] > self._observed_through:
                    self._observed_through = row[0]
                    delay = max(0, now - row[3].recorded_at_ms) / 1000
                    self._delays[bisect_left(FRAME_DELAY_BUCKETS_S, delay)] += 1
                    self._delays_s += delay
                known[row[0]] = frame = event_frame(row[0], text.encode())
                if row[0] not in frames:
                    frames[row[0]] = frame
                    self.size += len(frame)
            self._trim(window)
        return [known[row[0]] for row in rows]

    def _trim(self, window: Window) -> None:
        frames = self._frames
        if window.missing is not self._missing:  # events deleted since: their frames go
            for seq in window.missing - self._missing:
                self._drop(seq)
            self._missing = window.missing
        while frames:  # the oldest made first; stop at the first one kept
            seq = next(iter(frames))
            if seq > window.lo and self.size <= FRAME_BYTES:
                break
            self._drop(seq)

    def _drop(self, seq: int) -> None:
        frame = self._frames.pop(seq, None)
        if frame is not None:
            self.size -= len(frame)


def take(window: Window, event_filter: ApiEventFilter, cursor: int) -> tuple[list[Row], int] | None:
    """The rows a stream at `cursor` may take of `window` at one turn: those after `cursor` that
    `event_filter` admits, about `WRITE_BYTES` of their texts in UTF-8 at most (at least one:
    a frame is never smaller), and the cursor past them (past every row the window holds when
    it took them all); `None` when the window cannot answer (the stream reads the database: a
    workspace's stream, a cursor below the window or below the floor of the pruned log)."""
    if 0 < cursor < window.pruned:  # expired: the database says so (`CursorExpired`)
        return None
    served = window.answer(event_filter, cursor, WINDOW_PAGE)
    if served is None:
        return None
    latest, _, rows = served
    taken, size = 0, 0
    while taken < len(rows) and (taken == 0 or size + encoded_size(rows[taken][2]) <= WRITE_BYTES):
        size += encoded_size(rows[taken][2])
        taken += 1
    if taken < len(rows) or len(rows) == WINDOW_PAGE:  # more after these: at its next turn
        return rows[:taken], rows[taken - 1][0]
    return rows, max(latest, cursor)


class _Hub:
    """The app's streams: their registry and counters, the frames of the window's events
    (`_Frames`), and the loop's `Fanout`, which wakes a stream when the window holds events its
    filter may admit (see the module docstring)."""

    def __init__(self, store: AsyncStore, settings: WebSettings) -> None:
        self.store = store
        self.settings = settings
        self.redaction = Redaction(settings.redact)  # the app's, for every route
        self.streams: set[_Stream] = set()
        self.per_key: Counter[str] = Counter()
        self.closes: Counter[str] = Counter()
        self.opened = 0  # streams opened (200 sent)
        self.heartbeats = 0
        self.shutting_down = False
        self.polls: set[asyncio.Task[Any]] = set()  # the long-polls in progress
        self.frames = _Frames(self.redaction)
        self.fanout: Fanout | None = None  # of the loop the streams are served on
        self._loop: asyncio.AbstractEventLoop | None = None
        self._starting: asyncio.Task[None] | None = None
        self._ticker: asyncio.Task[None] | None = None
        # Streams without a filter at one cursor share one write, made once per window.
        self._joined: dict[int, tuple[bytes, int, int]] = {}
        self._joined_window: Window | None = None
        self._joined_bytes = 0
        # Streams without a filter at the window's end, left to the hub's delivery (`park`),
        # and the delivery's registration with the loop's `Fanout` (woken by the hub itself
        # when the last parked stream leaves: the delivery ends, registered no longer).
        self._parked: set[_Stream] = set()
        self._delivering: asyncio.Task[None] | None = None
        self._delivery_waiter: Waiter | None = None

    async def start(self) -> Fanout:
        """The loop's `Fanout`, the window read first with the last `WINDOW_PRELOAD` events
        (once per loop: streams reconnecting from a little way back are served from memory)
        and the ticker running."""
        loop = asyncio.get_running_loop()
        starting = self._starting
        failed = (
            starting is not None
            and starting.done()
            and (starting.cancelled() or starting.exception() is not None)
        )
        if self._loop is not loop or starting is None or failed or self._ticker is None:
            self.stop()
            self._loop = loop
            starting = loop.create_task(self._start(), name="session-journal web start")
            self._starting = starting
            self._ticker = loop.create_task(self._tick(), name="session-journal web ticker")
        await asyncio.shield(starting)
        assert self.fanout is not None
        return self.fanout

    async def _start(self) -> None:
        following = self.store.following
        try:
            await following.runner.run(following.following.window.preload, WINDOW_PRELOAD)
        except SessionJournalError as error:  # read at the first wake-up instead
            LOG.warning("the streams' window could not be read now (%s)", error)
        self.fanout = following.fanout()

    def stop(self) -> None:
        """Stop the ticker and the delivery (the streams' loop is gone or the app stops)."""
        ticker, self._ticker = self._ticker, None
        delivering, self._delivering = self._delivering, None
        for task in (ticker, delivering):
            if task is not None and not task.done() and self._loop is not None:
                with contextlib.suppress(RuntimeError):  # its loop is closed: nothing runs it
                    self._loop.call_soon_threadsafe(task.cancel)

    @property
    def store_closed(self) -> bool:
        """Whether the store (or the async view the app serves) closed: the streams end."""
        fanout = self.fanout
        return self.store.following.runner.closed or (fanout is not None and fanout.signal.closed)

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

    def serves(self, stream: _Stream) -> bool:
        """Whether the window may answer `stream` (else it reads the database)."""
        return self.fanout is not None and stream.event_filter.workspace_id is None

    async def frames_after(
        self, stream: _Stream, window: Window, *, live: bool = False
    ) -> tuple[list[bytes], int, int] | None:
        """The frames of what the stream takes of `window` at one turn (`take`), the cursor
        past it and the seq of its last event (else the stream's cursor); `None` when the
        window cannot answer. Streams without a filter at one cursor share one write. `live`:
        the stream was at the log's end (the hub's delivery: see `_Frames.of`)."""
        cursor = stream.cursor
        shared = stream.every_event
        if shared:
            if self._joined_window is not window:
                self._joined, self._joined_window, self._joined_bytes = {}, window, 0
            joined = self._joined.get(cursor)
            if joined is not None:
                return ([joined[0]] if joined[0] else []), joined[1], joined[2]
        taken = take(window, stream.event_filter, cursor)
        if taken is None:
            return None
        rows, after = taken
        frames = await self.frames.of(rows, window, live=live)
        # At most one write (at least one frame): escaped text makes a frame larger than its
        # text, up to 12 bytes a character.
        kept, size = 0, 0
        while kept < len(frames) and (kept == 0 or size + len(frames[kept]) <= WRITE_BYTES):
            size += len(frames[kept])
            kept += 1
        if kept < len(frames):
            frames, rows, after = frames[:kept], rows[:kept], rows[kept - 1][0]
        last = rows[-1][0] if rows else cursor
        # Kept for the other streams at this cursor until the window moves, `JOINED_BYTES`
        # at most: streams gather at the window's end, and streams that reconnect at once from
        # one cursor go through the window in step.
        if shared and self._joined_window is window:
            joined = self._joined.get(cursor)  # made meanwhile, while this one's were redacted
            if joined is None:
                joined = (b"".join(frames), after, last)
                if self._joined_bytes + len(joined[0]) <= JOINED_BYTES:
                    self._joined[cursor] = joined
                    self._joined_bytes += len(joined[0])
            return ([joined[0]] if joined[0] else []), joined[1], joined[2]
        return frames, after, last

    def joined_bytes(self) -> int:
        """The bytes of the shared writes kept now (`JOINED_BYTES` at most)."""
        return self._joined_bytes

    def park(self, stream: _Stream, window: Window) -> Waiter | None:
        """Leave `stream` to the hub's delivery until its task must run again: it has no
        filter, read `window` to its end and has nothing to send. What the stream's task awaits
        (`stream.waker`: set when it must run, by the delivery, its close or the ticker);
        `None` when the window moved since it read it (the stream reads it again)."""
        fanout = self.fanout
        if fanout is None or fanout.window is not window or self.store_closed:
            return None
        loop = asyncio.get_running_loop()
        waiter: Waiter = loop.create_future()
        stream.waker = waiter
        self._parked.add(stream)
        if self._delivering is None or self._delivering.done():
            self._delivering = loop.create_task(
                self._deliver(fanout), name="session-journal web delivery"
            )
        return waiter

    def unpark(self, stream: _Stream) -> None:
        """`stream`'s task runs again (see `park`); the delivery ends with the last one."""
        self._parked.discard(stream)
        stream.wake()
        waiter = self._delivery_waiter
        if not self._parked and waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def _deliver(self, fanout: Fanout) -> None:
        """While streams are parked: one registration with the loop's `Fanout` for all of
        them, and at each wake-up their writes, made by this task (`_deliver_window`)."""
        every = ApiEventFilter()
        failed: Exception | None = None
        try:
            while self._parked and not self.store_closed:
                waiter = fanout.register(every)  # before the read: no commit goes unnoticed
                self._delivery_waiter = waiter
                try:
                    await self._deliver_window(fanout.window)
                    if self._parked:
                        await waiter
                finally:
                    self._delivery_waiter = None
                    fanout.unregister(every, waiter)
                    if waiter.done() and not waiter.cancelled():
                        waiter.exception()  # seen: the streams are told below
        except Exception as error:  # a failed read of the window, say: each stream raises it
            failed = error
        finally:
            parked, self._parked = self._parked, set()
            for stream in parked:  # each runs itself (and sees why)
                waker = stream.waker
                if failed is not None and waker is not None and not waker.done():
                    waker.set_exception(failed)
                stream.wake()

    async def _deliver_window(self, window: Window) -> None:
        """Write to each parked stream what it takes of `window` (one shared write per cursor,
        `frames_after`), in this task's step: a stream whose write must wait for its client,
        that has more to take or that the window cannot answer leaves the hub's care (its task
        runs)."""
        by_cursor: dict[int, _Stream] = {}
        for stream in self._parked:
            by_cursor.setdefault(stream.cursor, stream)
        writes: dict[int, tuple[list[bytes], int, int] | None] = {}
        for cursor, stream in by_cursor.items():
            writes[cursor] = await self.frames_after(stream, window, live=True)
        # From here on nothing awaits: no stream's task runs while the hub writes. A stream
        # parked during the reads above read a later window than `window`: its cursor is not
        # among `writes` (it waits for the next wake-up), or it is, and `window` holds exactly
        # what follows it too (both windows hold every committed event after it).
        heartbeat, now = self.settings.heartbeat_s, time.monotonic()
        for stream in self._parked:  # read for them: a later read of theirs checks after it
            stream.delivered_at = now
        for stream in list(self._parked):
            waker, send, context = stream.waker, stream.send, stream.context
            if waker is None or waker.done():
                self._parked.discard(stream)  # its task runs already
                continue
            if stream.closing is not None or send is None or context is None:
                self.unpark(stream)  # (its send and context are set before it parks)
                continue
            if stream.cursor not in writes:
                continue  # parked meanwhile, with a later window: at the next wake-up
            taken = writes[stream.cursor]
            if taken is None:
                self.unpark(stream)  # its task reads the database
                continue
            frames, stream.cursor, _ = taken
            if frames:
                stream.last_sent = now
                stream.due = min(now + heartbeat, stream.rotate_at)
                body = frames[0] if len(frames) == 1 else b"".join(frames)  # one write
                message = {"type": "http.response.body", "body": body, "more_body": True}
                try:
                    pending: asyncio.Future[None] | None = send_now(send(message), context)
                except Exception as error:  # the stream's task raises it, as its send would
                    pending = asyncio.get_running_loop().create_future()
                    pending.set_exception(error)
                if pending is not None:  # the client is slow to take it: its task waits
                    stream.pending, stream.sending_since = pending, now  # (the send timeout)
                    self.unpark(stream)
                    continue
            if stream.cursor < window.hi:  # more to take: its own turns
                self.unpark(stream)

    def status(self) -> dict[str, object]:
        """What `/api/status` shows of the streams."""
        fanout = self.fanout
        window = None if fanout is None else fanout.window
        latest = 0 if window is None else window.hi
        lags = [max(0, latest - stream.cursor) for stream in self.streams]
        return {
            "streams": len(self.streams),
            "max_streams": self.settings.max_streams,
            "lag_max": max(lags, default=0),
            "lag_total": sum(lags),
            "closes": dict(self.closes),
            "heartbeats": self.heartbeats,
            "following": fanout is not None and not self.store_closed,
            "cursor": latest,
            "frames_held": len(self.frames),
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
        backlog = _Backlog(await hub.redaction.texts(first.events), first.seqs)
        scanned = first.next_after_seq
        del first
        watcher = asyncio.create_task(_watch_disconnect(receive, stream))
        stream.task = asyncio.current_task()
        reason = "error"
        hub.opened += 1  # a stream from here on: its close is counted below
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
        `scanned`; each read of the database refills it. The stream waits registered with the
        loop's `Fanout` (registered before each read of the window, so that no commit after
        the read goes unnoticed)."""
        hub, settings, events = self.hub, self.hub.settings, self.hub.store.events
        fanout = await hub.start()
        filtered = not stream.every_event
        lifetime = settings.stream_lifetime_s * random.uniform(0.9, 1.1)
        stream.rotate_at = stream.opened + lifetime
        stream.send, stream.context = send, contextvars.copy_context()
        parts: list[bytes] = [opening]
        # A filtered stream's last id sent (an event's or a progress frame's): the client has
        # everything through the cursor it came with, so a progress frame goes above it.
        sent_cursor = backlog.last_seq(stream.cursor)
        stream.cursor = max(stream.cursor, scanned)
        stream.last_sent = time.monotonic()
        last_progress = stream.last_sent - PROGRESS_S  # the first may go at once
        waiter: Waiter | None = None
        # When its last read ended: the window answers it only for what committed before then
        # (other processes' prunes and deletes), or is checked first.
        since = time.monotonic()
        window_failed = False  # the last wake-up was a failed read of the window
        try:
            while True:
                if stream.pending is not None:  # a write of the hub's that had to wait
                    await stream.pending  # its error is the stream's, as its send's
                    stream.pending, stream.sending_since = None, 0.0
                if stream.closing is None and hub.store_closed:
                    stream.closing = "store_closed"
                if stream.closing is not None:
                    if stream.closing in ("shutdown", "store_closed"):
                        # What the stream read and did not send yet is left: the client
                        # resumes from the last id it took.
                        async with asyncio.timeout(1.0):  # as the server stops: no longer
                            await self._send(send, stream, [*parts, _control("shutdown", {})])
                    return stream.closing
                if parts or backlog.texts:
                    stream.last_sent = time.monotonic()
                    await self._send(send, stream, parts, backlog)
                    parts = []
                now = time.monotonic()
                if now >= stream.rotate_at:
                    await self._send(send, stream, [_control("rotate", {})])
                    return "rotate"
                if waiter is None or waiter.done():  # registered before the read below
                    if waiter is not None:
                        fanout.unregister(stream.event_filter, waiter)
                        if not waiter.cancelled() and waiter.exception() is not None:
                            window_failed = True  # a read of the window failed meanwhile
                    waiter = stream.waker = fanout.register(stream.event_filter)
                taken, read = None, None
                if hub.serves(stream) and not window_failed:
                    since = max(since, stream.delivered_at)  # the hub's reads for it count
                    checked = fanout.checked_since(since)  # before the window it covers
                    read = fanout.window
                    if read.lo <= stream.cursor and needs_check(checked, stream.cursor, read.hi):
                        try:
                            await fanout.verify()  # one statement, shared by the streams asking
                            read = fanout.window
                        except SessionJournalError as error:
                            LOG.warning("checking the streams' window failed (%s)", error)
                            read = None  # the database answers this time
                    if read is not None:
                        taken = await hub.frames_after(stream, read)
                        since = time.monotonic()
                window_failed = False
                if taken is None:
                    limit = backlog.next_limit()
                    try:
                        page = await events.load_json_events(
                            stream.event_filter, stream.cursor, limit
                        )
                    except CursorExpired as error:
                        # The data is the 410 answer's document, as a client starting now
                        # gets it.
                        expired = Problem(
                            "cursor_expired", str(error), extra=await self._expired(error.cursor)
                        )
                        frame = b"event: expired\ndata: %s\n\n" % expired.body()
                        await self._send(send, stream, [frame])
                        return "cursor_expired"
                    since = time.monotonic()
                    # Redacted now; encoded as its writes are made.
                    backlog.refill(await hub.redaction.texts(page.events), page.seqs)
                    sent_cursor = backlog.last_seq(sent_cursor)
                    stream.cursor = max(stream.cursor, page.next_after_seq)
                    behind = len(page.events) == limit
                    del page
                    if behind or backlog.texts:
                        continue
                else:
                    frames, after, last = taken
                    if frames:
                        parts = frames
                        sent_cursor = max(sent_cursor, last)
                    stream.cursor = after
                    if parts:
                        continue
                if filtered and stream.cursor > sent_cursor and now - last_progress >= PROGRESS_S:
                    progress = {"scanned_through": stream.cursor}
                    parts = [_control("progress", progress, seq=stream.cursor)]
                    sent_cursor, last_progress = stream.cursor, now
                    continue
                due = min(stream.last_sent + settings.heartbeat_s, stream.rotate_at)
                if filtered and stream.cursor > sent_cursor:
                    due = min(due, last_progress + PROGRESS_S)
                if due <= time.monotonic():
                    parts = [b": heartbeat\n\n"]
                    hub.heartbeats += 1
                    continue
                stream.due = due  # the hub's ticker wakes it then, if nothing does before
                if stream.closing is not None or hub.store_closed:
                    continue  # told while it sent or read: its waiter may be spent already
                parked = False
                if taken is not None and read is not None and stream.every_event:
                    # At the end of the window it read: the hub writes what comes next to it
                    # and to the other streams parked, without a turn of this task each.
                    park = hub.park(stream, read)
                    if park is None:
                        continue  # the window moved since it read it: it reads it again
                    fanout.unregister(stream.event_filter, waiter)  # the hub's stands for it
                    waiter, parked = park, True
                try:
                    await waiter
                except SessionJournalError as error:  # the read of the window failed
                    LOG.warning("reading the streams' window failed (%s)", error)
                    window_failed = True  # the database answers this time
                finally:
                    if parked:  # its task runs: registered again before its next read
                        hub.unpark(stream)
                        waiter = None
        finally:
            hub.unpark(stream)
            pending, stream.pending = stream.pending, None
            if pending is not None and not pending.done():  # cancelled before it awaited it
                pending.cancel()
            elif pending is not None and not pending.cancelled():
                pending.exception()  # its error, if any, ended the stream already: seen
            if waiter is not None:
                fanout.unregister(stream.event_filter, waiter)
                if waiter.done() and not waiter.cancelled():
                    waiter.exception()  # a failed read it did not wait for: seen, not logged
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

    def __init__(self, texts: list[str], seqs: tuple[int, ...]) -> None:
        """`texts` and their events' `seqs` (a page of `load_json_events`)."""
        self.texts = deque(texts)
        self._seqs = deque(seqs)
        self._average: int | None = None  # bytes a frame, of the last read with events
        self._bytes = self._made = 0  # of the frames made of the current read

    def refill(self, texts: list[str], seqs: tuple[int, ...]) -> None:
        """The events of a new read (the backlog is empty: every read is sent first)."""
        if self._made:
            self._average = max(1, self._bytes // self._made)
        self._bytes = self._made = 0
        self.texts.extend(texts)
        self._seqs.extend(seqs)

    def last_seq(self, otherwise: int) -> int:
        """The seq of the last event held, else `otherwise`."""
        return self._seqs[-1] if self._seqs else otherwise

    def frame(self) -> bytes:
        """The next event's frame; its text leaves the backlog."""
        text = self.texts.popleft()
        frame = event_frame(self._seqs.popleft(), text.encode())
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


async def _watch_disconnect(receive: Receive, stream: _Stream) -> None:
    """Close the stream when its client goes away."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            stream.closing = stream.closing or "client_gone"
            stream.wake()
            return
