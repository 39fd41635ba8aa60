"""Reading the ordered log by cursor (`load`, `load_json`), waiting for it (`wait`), following
it (`follow`: the machinery is the `follow` package's) and pruning it."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Annotated, NamedTuple

from pydantic import Field

from .._arguments import Given, Int64, Passed, validate_arguments
from .._clock import now_ms
from .._validation import Id
from ..api_events import (
    ApiEvent,
    ApiEventFilter,
    ApiEventPage,
    ApiEventPageBefore,
    StoredRow,
    decode_events,
    event_texts,
    page_before_json,
    page_json,
)
from ..errors import InvalidRecord, StoreClosed
from ..follow.cursors import check_not_expired, page_after
from ..follow.follower import Follower
from ..follow.following import Following
from ..records import EventRate
from ..storage.protocols import ReadContext, Transactions, WriteContext

MAX_PAGE = 1000
MAX_WAIT_S = 3600.0
"""The longest `timeout` of `wait`."""
MAX_RATE_MINUTES = EventRate.MAX_MINUTES
"""The longest window of `rate`."""
RateMinutes = Annotated[int, Field(ge=1, le=MAX_RATE_MINUTES, strict=True)]
_MINUTE_MS = 60_000
PRUNE_BATCH = 250
"""The most events one transaction of `prune` deletes (a short write lock: appenders of this
process and others take turns between batches)."""
PRUNE_SHARE = 0.25
"""The share of the write path's time a running `prune` takes at most: after each batch it
pauses for three times as long as the batch took, so that appenders keep the rest."""


class JsonEvents(NamedTuple):
    """A page of `load_json_events`: each event's JSON, and the page's cursor, frontier and
    floor of the pruned log, as in `ApiEventPage`; and each event's seq."""

    events: list[str]
    next_after_seq: int
    latest_seq: int
    pruned_through: int
    seqs: tuple[int, ...] = ()
    """The seq of each event of `events`, in the same order (a page pickled by 0.1 has none)."""


@dataclass(frozen=True)
class PrunePlan:
    """What `store.events.prune` would do now (`store.events.plan_prune`)."""

    through_seq: int
    """The floor it would record (`pruned_through` after it; the current floor if higher)."""
    events: int
    """How many events it would delete (those still stored with `seq <= through_seq`)."""
    pruned_through: int
    """The floor now."""
    latest_seq: int
    """The frontier now (pruning never moves it)."""
    held_back_by: str | None = None
    """The durable consumer whose position limited `through_seq` (the lowest live one below
    the target: `store.consumers`), or `None` when none did (or the prune is forced)."""


class EventService:
    """`store.events`."""

    def __init__(self, transactions: Transactions, following: Following | None = None) -> None:
        """`following`: the store's (`Store.following`); a snapshot's service has none (its
        waits and follows are refused)."""
        self._transactions = transactions
        self._following = following

    @validate_arguments()
    def load(
        self,
        filter: Given[ApiEventFilter] | None = None,
        after_seq: Int64 | None = None,
        limit: int = 100,
        *,
        uow: Passed[WriteContext | None] = None,
    ) -> ApiEventPage:
        """Events with `seq > after_seq` matching `filter`, ascending, at most `limit` (clamped
        to 1..1000). `after_seq=None` starts at the frontier. `next_after_seq` is the last
        returned seq, else `max(latest_seq, after_seq)`: it never moves back and an empty filtered
        page still advances it. The page and `latest_seq` come from one snapshot."""
        cursor, latest, pruned, rows = self._rows(filter, after_seq, limit, uow)
        return page_after(cursor, latest, decode_events(rows), pruned)

    @validate_arguments()
    def load_json(
        self,
        filter: Given[ApiEventFilter] | None = None,
        after_seq: Int64 | None = None,
        limit: int = 100,
        *,
        uow: Passed[WriteContext | None] = None,
    ) -> bytes:
        """The page `load` gives for these arguments, as its JSON (UTF-8): exactly
        `page.model_dump_json().encode()`, with the same rules and errors, built from the stored
        text (a body stored in its canonical form is put in as it is, without decoding)."""
        page = self._json_page(filter, after_seq, limit, uow)
        return page_json(page.events, page.next_after_seq, page.latest_seq, page.pruned_through)

    @validate_arguments()
    def load_json_events(
        self,
        filter: Given[ApiEventFilter] | None = None,
        after_seq: Int64 | None = None,
        limit: int = 100,
        *,
        uow: Passed[WriteContext | None] = None,
    ) -> JsonEvents:
        """`load_json`'s page in parts (`JsonEvents`): each event's JSON as a `str` (exactly
        `event.model_dump_json()` of the typed event, the elements of `load_json`'s `events`),
        with the page's cursor, frontier and floor; for a server that sends events one by one
        (a Server-Sent Event each) or a command line that prints one per line."""
        return self._json_page(filter, after_seq, limit, uow)

    @validate_arguments()
    def rate(
        self,
        minutes: RateMinutes = 15,
        *,
        workspace_id: Id | None = None,
        uow: Passed[WriteContext | None] = None,
    ) -> EventRate:
        """How many events were recorded in each of the last `minutes` whole minutes (1 to
        `MAX_RATE_MINUTES`; the last is the current one), of one workspace's sessions when
        `workspace_id` is given: `EventRate`. One range of the index on `recorded_at_ms`
        (revision 0015): the read costs what the window holds, and counts every event recorded
        in it, stored in whatever order. Times are the events' `recorded_at_ms`, as their
        writers gave them."""
        now = now_ms()
        until = (now // _MINUTE_MS + 1) * _MINUTE_MS
        since = until - minutes * _MINUTE_MS
        with self._transactions.reading("count events per minute", uow) as read:
            latest, found = read.events.minute_counts(since, until, workspace_id)
        return EventRate(
            as_of_seq=latest,
            as_of_ms=now,
            start_ms=since,
            counts=tuple(found.get(minute, 0) for minute in range(minutes)),
        )

    @validate_arguments()
    def load_before(
        self,
        filter: Given[ApiEventFilter] | None = None,
        *,
        before_seq: Int64,
        limit: int = 100,
        uow: Passed[WriteContext | None] = None,
    ) -> ApiEventPageBefore:
        """The newest events with `seq < before_seq` matching `filter`, newest first, at most
        `limit` (clamped to 1..1000): history for a client paging back from where it started
        (`before_seq=page.next_before_seq` for the next older page; an empty page: nothing
        older is retained). Events at or below the floor of the pruned log are never returned,
        nor is a cursor below it an error: history simply ends there. The page, `latest_seq`
        and `pruned_through` come from one snapshot."""
        latest, pruned, rows = self._rows_before(filter, before_seq, limit, uow)
        events = decode_events(rows)[::-1]
        after = events[-1].seq if events else before_seq
        return ApiEventPageBefore(
            events=events, next_before_seq=after, latest_seq=latest, pruned_through=pruned
        )

    @validate_arguments()
    def load_before_json(
        self,
        filter: Given[ApiEventFilter] | None = None,
        *,
        before_seq: Int64,
        limit: int = 100,
        uow: Passed[WriteContext | None] = None,
    ) -> bytes:
        """The page `load_before` gives for these arguments, as its JSON (UTF-8): exactly
        `page.model_dump_json().encode()`, built from the stored text as `load_json` is."""
        latest, pruned, rows = self._rows_before(filter, before_seq, limit, uow)
        rows.reverse()
        after = rows[-1][0] if rows else before_seq
        return page_before_json(event_texts(rows), after, latest, pruned)

    def _rows_before(
        self,
        event_filter: ApiEventFilter | None,
        before_seq: int,
        limit: int,
        uow: WriteContext | None,
    ) -> tuple[int, int, list[StoredRow]]:
        """The frontier, the floor and the retained rows (ascending) of a `load_before` page."""
        event_filter = ApiEventFilter() if event_filter is None else event_filter
        with self._transactions.reading_one_statement("load events before a seq", uow) as read:
            latest, pruned, rows = read.events.page_rows_before(
                event_filter, before_seq, page_size(limit)
            )
        # Rows at or below the floor belong to a prune under way (or one interrupted): they are
        # the oldest of the page, and not retained.
        return latest, pruned, [row for row in rows if row[0] > pruned]

    def _json_page(
        self,
        event_filter: ApiEventFilter | None,
        after_seq: int | None,
        limit: int,
        uow: WriteContext | None,
    ) -> JsonEvents:
        cursor, latest, pruned, rows = self._rows(event_filter, after_seq, limit, uow)
        after = rows[-1][0] if rows else max(latest, cursor)
        return JsonEvents(event_texts(rows), after, latest, pruned, tuple(row[0] for row in rows))

    def _rows(
        self,
        event_filter: ApiEventFilter | None,
        after_seq: int | None,
        limit: int,
        uow: WriteContext | None,
    ) -> tuple[int, int, int, list[StoredRow]]:
        """What a page of `load` is made of: its cursor (the frontier for `None`), the frontier,
        the floor of the pruned log and the stored rows, from one snapshot."""
        event_filter = ApiEventFilter() if event_filter is None else event_filter
        cursor = after_seq
        while True:
            with self._transactions.reading_one_statement("load events", uow) as read:
                if cursor is None:  # the tail: nothing is after the frontier in this snapshot
                    version = read.events.version()
                    latest = version.latest_seq
                    return latest, latest, version.pruned_through, []
                latest, pruned, rows = read.events.page_rows(event_filter, cursor, page_size(limit))
            assert after_seq is not None
            check_not_expired(after_seq, pruned, self._transactions.counters)
            if after_seq == 0 and rows and rows[0][0] <= pruned:
                # From the oldest retained event: the rows of a prune under way (or one that
                # was interrupted) are not retained. Read again from the floor, once more if
                # another prune raised it meanwhile.
                cursor = pruned
                continue
            return after_seq, latest, pruned, rows

    @validate_arguments()
    def latest_seq(self, *, uow: Passed[WriteContext | None] = None) -> int:
        """The frontier: the largest seq ever assigned; deleting events never lowers it."""
        with self._transactions.reading_one_statement("read latest seq", uow) as read:
            return read.events.latest_seq()

    @validate_arguments()
    def pruned_through(self, *, uow: Passed[WriteContext | None] = None) -> int:
        """The floor of the pruned log: the highest seq `prune` deleted through (0: never
        pruned). A cursor `0 < after_seq < pruned_through` is expired (`CursorExpired`)."""
        with self._transactions.reading_one_statement("read pruned_through", uow) as read:
            return read.events.pruned_through()

    @validate_arguments()
    def plan_prune(
        self,
        *,
        through_seq: Int64 | None = None,
        older_than_ms: Int64 | None = None,
        force: bool = False,
    ) -> PrunePlan:
        """What `prune` with these arguments would do now (a dry run: nothing is written),
        and which consumer, if any, would hold it back."""
        with self._transactions.reading("plan a prune") as read:
            floor = read.events.pruned_through()
            # As `prune` does: a floor recorded by an interrupted prune is deleted through too.
            target = max(_prune_target(read, through_seq, older_than_ms), floor)
            through, held_back_by = _held_back(read, target, floor, force)
            return PrunePlan(
                through_seq=through,
                events=read.events.count_through(through),
                pruned_through=floor,
                latest_seq=read.events.latest_seq(),
                held_back_by=held_back_by,
            )

    @validate_arguments()
    def prune(
        self,
        *,
        through_seq: Int64 | None = None,
        older_than_ms: Int64 | None = None,
        force: bool = False,
    ) -> int:
        """Delete a prefix of the log; how many events went. Give exactly one of:
        `through_seq`, to delete the events with `seq <= through_seq` (at most the frontier:
        `InvalidRecord` above it); or `older_than_ms`, to delete the longest prefix whose events
        were all recorded (`recorded_at_ms`) before that time, so no hole is ever punched
        above the prefix, whatever the order of the times.

        Retention waits for durable consumers (`store.consumers`): the prefix ends at the
        lowest position of the consumers that hold it back (every consumer, but one idle past
        its `max_idle_s`), read with the log's row locked in the transaction that raises the
        floor, so that no `register` or `reset` slips below it. `force=True` prunes past them:
        their next read raises `CursorExpired`. `plan_prune` says which consumer held a prune
        back.

        The first transaction records the floor (`pruned_through`, never lowered) and raises
        the database's minimum compatible level to 7 (older code must refuse a pruned log),
        and deletes nothing; then the prefix goes in batches of `PRUNE_BATCH` events,
        each its own transaction on the write path, so appenders wait for one batch at most,
        paced so that the prune takes at most `PRUNE_SHARE` of the write path's time.
        The frontier never moves. Idempotent, and safe to interrupt: running it again (with
        any arguments) finishes the deletion below the recorded floor. It runs its own
        transactions, so it takes no `uow=`. Each prune done is counted with its duration
        (`store.metrics()`)."""
        started = time.monotonic()
        deleted = self._prune(through_seq, older_than_ms, force)
        self._transactions.counters.pruned(time.monotonic() - started)
        return deleted

    def _prune(self, through_seq: int | None, older_than_ms: int | None, force: bool) -> int:
        """`prune`, its duration left out."""
        with self._transactions.reading("plan a prune") as read:
            target = max(
                _prune_target(read, through_seq, older_than_ms), read.events.pruned_through()
            )

        def record_floor(uow: WriteContext) -> int:
            """The floor, recorded before anything is deleted, in a transaction of its own
            (solo, and deleting nothing): it locks the log's row and reads the positions of the
            consumers then. Deleting (which moves the deletion counter's row) comes in later
            transactions, which do not lock the log's row: a writer that deletes a session
            and appends takes those two rows the other way round."""
            _, floor = uow.events.lock_log()
            through, _ = _held_back(uow, max(target, floor), floor, force)
            uow.events.raise_floor(through)
            uow.commit()
            return through

        def batch(uow: WriteContext) -> tuple[int, bool]:
            """Delete one batch; how many went, and whether any event at or below the floor
            may be left."""
            deleted = uow.events.delete_pruned(through, PRUNE_BATCH)
            # A batch that deleted nothing is not the end: on PostgreSQL every row it chose can
            # belong to a session deleted meanwhile (chosen in a snapshot older than that
            # delete's commit) while more are left. A new statement sees what is left now.
            left = deleted > 0 or uow.events.count_through(through) > 0
            uow.commit()
            return deleted, left

        action = f"prune events through seq {target}"
        through = self._transactions.submit(record_floor, action, solo=True)
        total, left = 0, True
        # Until nothing at or below the floor is left, whatever the size of a batch.
        while left:
            began = time.monotonic()
            deleted, left = self._transactions.submit(batch, action)
            total += deleted
            if left:  # paced: a batch runs in the write path's transactions, where appends wait
                time.sleep((time.monotonic() - began) * (1 / PRUNE_SHARE - 1))
        return total

    @validate_arguments()
    def wait(
        self,
        filter: Given[ApiEventFilter] | None = None,
        after_seq: Int64 | None = None,
        limit: int = 100,
        *,
        timeout: object,
    ) -> ApiEventPage:
        """`load`, but when no event matching `filter` is after the cursor, block until one
        commits (in this process or another) or `timeout` seconds pass; then an empty page whose
        `next_after_seq` follows `load`'s rules (an empty filtered page still advances).
        `after_seq=None` is the frontier at the call; `timeout` is a finite number of seconds
        from 0 to 3,600 (0: a plain load). A cursor above the frontier raises `CursorAhead`
        (it comes from a restored backup or another database: waiting would skip events)."""
        seconds = _timeout(timeout)
        cursor = self.latest_seq() if after_seq is None else after_seq
        follower = self._follower(filter, cursor, page_size(limit))
        page = follower.next_page(seconds, events_only=True)
        if page is not None:
            return page
        if follower.last_read is None or follower.store_closed:
            raise StoreClosed("wait for events: the store was closed")
        return follower.last_read  # empty; its cursor follows `load`'s rules

    @validate_arguments()
    def wait_json(
        self,
        filter: Given[ApiEventFilter] | None = None,
        after_seq: Int64 | None = None,
        limit: int = 100,
        *,
        timeout: object,
    ) -> bytes:
        """`wait`, as the page's JSON (UTF-8): exactly `page.model_dump_json().encode()` of the
        page `wait` returns, with the same rules and errors."""
        return self._json_of(self.wait(filter, after_seq, limit, timeout=timeout))

    def event_json(self, event: ApiEvent) -> bytes:
        """One event's JSON (UTF-8): exactly `event.model_dump_json().encode()`, the element of
        `load_json`'s `events`. For an event of a page the followers' window served (`wait`,
        `follow`), the text the window made when it read the event, so a server that sends
        each event to many clients encodes it once per store; any other event is encoded.
        `InvalidRecord` for anything but an `ApiEvent`."""
        return self._event_text(event).encode()

    def _event_text(self, event: ApiEvent) -> str:
        """`event_json` as a `str`."""
        if not isinstance(event, ApiEvent):
            raise InvalidRecord(f"event must be an ApiEvent, got {type(event).__name__}")
        following = self._following
        text = None if following is None else following.window.text_of(event)
        return event.model_dump_json() if text is None else text

    def _json_of(self, page: ApiEventPage) -> bytes:
        """A page's JSON (UTF-8), exactly `page.model_dump_json().encode()`, its events' JSON
        taken from the followers' window where it has them (`event_json`)."""
        texts = [self._event_text(event) for event in page.events]
        return page_json(texts, page.next_after_seq, page.latest_seq, page.pruned_through)

    @validate_arguments()
    def follow(
        self,
        filter: Given[ApiEventFilter] | None = None,
        after_seq: Int64 | None = None,
        limit: int = 100,
    ) -> Follower:
        """A `Follower`: an iterator of the pages after `after_seq` (else the frontier now), each
        returned as soon as events matching `filter` commit (or the cursor moves past events of
        other sessions), and a context manager; `close()` ends it from any thread, as does
        closing the store.

        The cursor is checked here, before the follower is returned, by one statement:
        `CursorExpired` below the floor of the pruned log, `CursorAhead` above the frontier (so
        a server answers before its response starts). A page raises them later only if the log
        changed in between (a prune past the cursor: `CursorExpired`)."""
        size = page_size(limit)
        following = self._followed("follow events")
        return following.follower(self.load, filter, following.start_cursor(after_seq), size)

    def _follower(self, filter: ApiEventFilter | None, cursor: int, limit: int) -> Follower:
        """A follower of this log from `cursor` (checked already), `limit` clamped."""
        return self._followed("wait for events").follower(self.load, filter, cursor, limit)

    def _followed(self, action: str) -> Following:
        """The store's `Following` (which refuses a closed store itself); a snapshot has none:
        refused as `Transactions.check_followable` says (`ReadOnlySnapshot`, `SnapshotEnded`)."""
        if self._following is None:
            self._transactions.check_followable(action)
            raise AssertionError("only a snapshot's events service has no following")
        return self._following


def _held_back(
    read: ReadContext | WriteContext, target: int, floor: int, force: bool
) -> tuple[int, str | None]:
    """Where a prune aimed at `target` stops, and the consumer that stopped it: at the lowest
    position of the consumers holding retention back, when it is below the target (never
    below the floor); at the target when none is, or when `force`."""
    if not force:
        held = read.consumers.lowest_live(floor, now_ms())
        if held is not None and held[0] < target:
            return max(held[0], floor), held[1]
    return target, None


def _prune_target(read: ReadContext, through_seq: int | None, older_than_ms: int | None) -> int:
    """The seq a prune with these arguments deletes through, read in `read`'s snapshot;
    `InvalidRecord` unless exactly one is given, or for a `through_seq` above the frontier."""
    if (through_seq is None) == (older_than_ms is None):
        raise InvalidRecord(
            "prune: give exactly one of through_seq and older_than_ms; nothing was pruned"
        )
    if through_seq is None:
        assert older_than_ms is not None
        return read.events.prune_horizon(older_than_ms)
    latest = read.events.latest_seq()
    if through_seq > latest:
        raise InvalidRecord(
            f"through_seq {through_seq} is above the frontier {latest}: there is nothing to "
            "prune there (a floor above the frontier would hide events not appended yet); "
            "nothing was pruned"
        )
    return through_seq


def page_size(limit: int) -> int:
    """A page's `limit` clamped to 1..`MAX_PAGE`, as `load`, `wait` and `follow` take it."""
    return max(1, min(limit, MAX_PAGE))


def _timeout(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidRecord(f"timeout must be a number of seconds, got {type(value).__name__}")
    if not math.isfinite(value) or not 0 <= value <= MAX_WAIT_S:
        raise InvalidRecord(f"timeout must be between 0 and {MAX_WAIT_S:g} seconds, got {value!r}")
    return float(value)
