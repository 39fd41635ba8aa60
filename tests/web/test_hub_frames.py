"""What a stream takes of the hub's frames at each turn (`_Hub.frames_after`): every frame after
its cursor that its filter admits, once and in order, at most about one write (`WRITE_BYTES`)
at a time however far behind it is, and nothing at all once it is at the hub's frontier (a
stream at the frontier must not be handed an empty write to send again and again)."""

from __future__ import annotations

from typing import Any

import pytest

from session_journal import ApiEventFilter
from session_journal.web import WebSettings
from session_journal.web._streams import WRITE_BYTES, _Hub, _Stream, event_frame
from tests.web.client import ADMIN


def hub_of(count: int, size: int) -> _Hub:
    """A hub holding `count` frames of events 1..count of about `size` bytes each, of sessions
    a and b in turn (b's are `turn_ended`)."""
    hub = _Hub(store=Any, settings=WebSettings(tokens={ADMIN: None}))  # type: ignore[arg-type]
    for seq in range(1, count + 1):
        session = "a" if seq % 2 else "b"
        hub.seqs.append(seq)
        hub.sessions.append(session)
        hub.types.append("session_fault" if session == "a" else "turn_ended")
        hub.frames.append(event_frame(seq, b'{"seq":%d,"m":"%s"}' % (seq, b"x" * size)))
    hub.hi, hub.running = count, True
    return hub


def drain(hub: _Hub, stream: _Stream) -> list[list[int]]:
    """The seqs of the frames `stream` takes at each turn until it takes nothing."""
    turns = []
    while True:
        frames, stream.cursor = hub.frames_after(stream)
        seqs = [
            int(line[4:]) for frame in frames for line in frame.split(b"\n") if line[:4] == b"id: "
        ]
        if not frames:
            return turns
        assert sum(len(frame) for frame in frames) <= WRITE_BYTES + 1200
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
def test_a_stream_far_behind_takes_the_frames_one_write_at_a_time(
    event_filter: ApiEventFilter, expected: list[int]
) -> None:
    hub = hub_of(300, 1000)  # about 300 KB of frames
    stream = _Stream(principal=Any, event_filter=event_filter, cursor=0)  # type: ignore[arg-type]
    turns = drain(hub, stream)
    assert [seq for turn in turns for seq in turn] == expected
    held = sum(len(hub.frames[seq - 1]) for seq in expected)
    assert -(-held // WRITE_BYTES) <= len(turns) <= held // (WRITE_BYTES - 1200) + 1
    assert stream.cursor == 300


def test_streams_at_the_frontier_take_nothing_and_streams_at_one_cursor_share_a_write() -> None:
    hub = hub_of(10, 100)
    first, second = (
        _Stream(principal=Any, event_filter=ApiEventFilter(), cursor=4)  # type: ignore[arg-type]
        for _ in range(2)
    )
    taken, after = hub.frames_after(first)
    assert after == 10 and hub.frames_after(second) == (taken, 10)
    assert taken[0] is hub.frames_after(second)[0][0]  # one joined write, shared
    first.cursor = second.cursor = 10
    assert hub.frames_after(first) == ([], 10)
    assert hub.frames_after(second) == ([], 10)  # from the shared cache too: no empty write
