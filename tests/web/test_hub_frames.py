"""What a stream takes of the store's window at each turn (`_Hub.frames_after`): every event
after its cursor that its filter admits, once and in order, at most about one write
(`WRITE_BYTES`, counted in frames as sent, escaped) at a time however far behind it is, and
nothing at all once it is at the window's frontier (a stream at the frontier must not be handed
an empty write to send again and again)."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from session_journal import ApiEvent, ApiEventFilter, OutcomeReason, SessionFault
from session_journal.follow import Window
from session_journal.web import WebSettings
from session_journal.web._streams import JOINED_BYTES, WRITE_BYTES, _Hub, _Stream, event_frame
from tests.web.client import ADMIN

FAULT = SessionFault(reason=OutcomeReason.STARTUP_FAILED, message="m")


def window_of(
    count: int, text: str, missing: frozenset[int] = frozenset(), at_ms: int = 0
) -> Window:
    """A window holding events 1..count whose JSON holds `text`, of sessions a and b in turn
    (b's are `turn_ended`), recorded at `at_ms`."""
    rows = [
        (
            seq,
            "a" if seq % 2 else "b",
            json.dumps({"seq": seq, "m": text}, ensure_ascii=False),
            ApiEvent(
                seq=seq, session_id="a" if seq % 2 else "b", recorded_at_ms=at_ms, event=FAULT
            ),
            "session_fault" if seq % 2 else "turn_ended",
        )
        for seq in range(1, count + 1)
    ]
    return Window(
        generation=1, filled=True, lo=0, covered=count, hi=count, rows=rows, missing=missing
    )


def hub() -> _Hub:
    return _Hub(store=Any, settings=WebSettings(tokens={ADMIN: None}, redact=False))  # type: ignore[arg-type]


def drain(hub: _Hub, window: Window, stream: _Stream, *, live: bool = False) -> list[list[int]]:
    """The seqs of the frames `stream` takes at each turn until it takes nothing (`live`: as
    the hub delivers to streams at the log's end)."""
    turns = []
    while True:
        taken = asyncio.run(hub.frames_after(stream, window, live=live))
        assert taken is not None
        frames, stream.cursor, last = taken
        seqs = [
            int(line[4:]) for frame in frames for line in frame.split(b"\n") if line[:4] == b"id: "
        ]
        if not frames:
            return turns
        assert last == seqs[-1]
        assert sum(map(len, frames)) <= WRITE_BYTES or len(seqs) == 1
        turns.append(seqs)


@pytest.mark.parametrize(
    ("event_filter", "expected"),
    [
        (ApiEventFilter(), list(range(1, 301))),
        (ApiEventFilter(session_id="a"), list(range(1, 301, 2))),
        (ApiEventFilter(types=("turn_ended",)), list(range(2, 301, 2))),
    ],
    ids=["every event", "one session", "one type"],
)
@pytest.mark.parametrize(
    "text", ["x" * 1000, "漢" * 1000, "😀" * 1000], ids=["ascii", "cjk", "emoji"]
)
def test_a_stream_far_behind_takes_the_frames_one_write_at_a_time(
    event_filter: ApiEventFilter, expected: list[int], text: str
) -> None:
    window = window_of(300, text)  # 300 KB of ASCII frames, 1.8 MB of CJK, 3.6 MB of emoji
    stream = _Stream(principal=Any, event_filter=event_filter, cursor=0)  # type: ignore[arg-type]
    streams_hub = hub()
    turns = drain(streams_hub, window, stream)
    # The writes of a stream without a filter are kept for the streams that follow it through
    # the same window (a reconnect storm), `JOINED_BYTES` of them at most, counted exactly.
    kept = [write for write, _, _ in streams_hub._joined.values()]
    assert streams_hub.joined_bytes() == sum(map(len, kept)) <= JOINED_BYTES
    if event_filter == ApiEventFilter():
        # Every write while they fit (the empty one at the end too), else until the bound.
        full = streams_hub.joined_bytes() > JOINED_BYTES - WRITE_BYTES
        assert len(kept) == len(turns) + 1 if text == "x" * 1000 else full
        follower = _Stream(principal=Any, event_filter=event_filter, cursor=0)  # type: ignore[arg-type]
        first = asyncio.run(streams_hub.frames_after(follower, window))
        assert first is not None and first[0][0] is kept[0]  # the same write, not a copy
    else:
        assert not kept  # a filtered stream's writes are its own
    assert [seq for turn in turns for seq in turn] == expected
    frame = len(event_frame(1, window.rows[0][2].encode()))
    per_write = max(1, WRITE_BYTES // frame)
    assert len(turns) == -(-len(expected) // per_write)
    assert stream.cursor == 300


def test_a_deleted_event_is_never_taken() -> None:
    window = window_of(10, "x", missing=frozenset({3, 4}))
    stream = _Stream(principal=Any, event_filter=ApiEventFilter(), cursor=0)  # type: ignore[arg-type]
    assert drain(hub(), window, stream) == [[1, 2, 5, 6, 7, 8, 9, 10]]


def test_streams_at_the_frontier_take_nothing_and_streams_at_one_cursor_share_a_write() -> None:
    streams_hub, window = hub(), window_of(10, "x" * 100)
    first, second = (
        _Stream(principal=Any, event_filter=ApiEventFilter(), cursor=4)  # type: ignore[arg-type]
        for _ in range(2)
    )
    taken = asyncio.run(streams_hub.frames_after(first, window))
    again = asyncio.run(streams_hub.frames_after(second, window))
    assert taken is not None and again is not None
    assert taken[1:] == (10, 10) and again == taken
    assert taken[0][0] is again[0][0]  # one joined write, shared
    first.cursor = second.cursor = 10
    assert asyncio.run(streams_hub.frames_after(first, window)) == ([], 10, 10)
    assert asyncio.run(streams_hub.frames_after(second, window)) == ([], 10, 10)


def test_a_stream_below_the_window_or_the_floor_reads_the_database() -> None:
    window = window_of(10, "x")
    behind = Window(generation=1, filled=True, lo=5, covered=10, hi=10, rows=window.rows[5:])
    pruned = Window(
        generation=1, filled=True, lo=0, covered=10, hi=10, pruned=6, rows=window.rows[6:]
    )
    streams_hub = hub()
    for each, cursor in ((behind, 2), (pruned, 3)):
        stream = _Stream(principal=Any, event_filter=ApiEventFilter(), cursor=cursor)  # type: ignore[arg-type]
        assert asyncio.run(streams_hub.frames_after(stream, each)) is None
    workspace = _Stream(principal=Any, event_filter=ApiEventFilter(workspace_id="w"), cursor=6)  # type: ignore[arg-type]
    assert asyncio.run(streams_hub.frames_after(workspace, window)) is None


def test_streams_asking_at_once_share_one_write_counted_once() -> None:
    """Streams at one cursor that ask while the first one's frames are redacted off the loop
    (a reconnect storm of events that may hold secrets) get one write, counted once."""
    streams_hub = _Hub(store=Any, settings=WebSettings(tokens={ADMIN: None}))  # type: ignore[arg-type]
    window = window_of(10, "password=hunter2 " * 10)
    streams = [
        _Stream(principal=Any, event_filter=ApiEventFilter(), cursor=0)  # type: ignore[arg-type]
        for _ in range(5)
    ]

    async def all_at_once() -> list[Any]:
        return await asyncio.gather(*(streams_hub.frames_after(s, window) for s in streams))

    taken = asyncio.run(all_at_once())
    writes = [frames[0] for frames, _, _ in taken]
    assert all(write is writes[0] for write in writes)
    assert b"hunter2" not in writes[0] and b"[REDACTED]" in writes[0]
    assert streams_hub.joined_bytes() == len(writes[0])


def test_the_commit_to_frame_delay_is_observed_once_per_event_delivered_live() -> None:
    made = hub()
    recorded = int(time.time() * 1000) - 1500  # recorded 1.5 s ago
    history = window_of(4, "x", at_ms=recorded - 3_600_000)  # an hour before
    behind = _Stream(principal=Any, event_filter=ApiEventFilter(), cursor=0)  # type: ignore[arg-type]
    drain(made, history, behind)  # a stream catching up: its frames' delays are not delivery's
    assert made.frames.delays().count == 0
    made.frames._frames.clear()
    window = window_of(4, "x", at_ms=recorded)
    stream = _Stream(principal=Any, event_filter=ApiEventFilter(), cursor=0)  # type: ignore[arg-type]
    assert [seq for turn in drain(made, window, stream, live=True) for seq in turn] == [1, 2, 3, 4]
    delays = made.frames.delays()
    assert (delays.count, delays.cumulative()[-1]) == (4, 4)
    assert 1.5 <= delays.sum_s / 4 < 60
    again = _Stream(principal=Any, event_filter=ApiEventFilter(), cursor=0)  # type: ignore[arg-type]
    drain(made, window, again, live=True)  # the frames are held: nothing made, nothing observed
    made.frames._frames.clear()  # dropped (the bound): made again
    late = _Stream(principal=Any, event_filter=ApiEventFilter(), cursor=0)  # type: ignore[arg-type]
    drain(made, window, late, live=True)
    assert made.frames.delays().count == 4  # once per event, however often made
