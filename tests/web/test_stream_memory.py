"""What following the log holds for the streams, counted in bytes as encoded: the store's
window holds at most `follow_window_bytes` of its events' JSON in UTF-8, and the app at most
`FRAME_BYTES` of frames as sent (a frame escapes non-ASCII text: six bytes for 漢, twelve for
😀) and `JOINED_BYTES` of the writes streams share, 16 MiB in all by default, whatever the
text; the counts are exact."""

from __future__ import annotations

import json
import time

import pytest

from session_journal import Store, StoreOptions
from session_journal.web import WebSettings, create_app
from session_journal.web._streams import FRAME_BYTES, JOINED_BYTES
from tests.factories import SessionFactory
from tests.web.client import TOKENS, ThreadServer
from tests.web.test_stream_settings import Reader

pytestmark = pytest.mark.slow

MIB = 1024 * 1024
TEXTS = ("x", "漢", "😀")


def body_of(message: str) -> str:
    """A stored `session_fault` body, its text as UTF-8 (not escaped)."""
    data = {"reason": "startup_failed", "message": message, "command_id": None}
    return json.dumps({"type": "session_fault", "data": data}, ensure_ascii=False)


def test_the_window_and_the_frames_hold_at_most_16_mib_as_encoded(migrated_url: str) -> None:
    with Store.open(migrated_url) as store:
        assert StoreOptions().follow_window_bytes + FRAME_BYTES + JOINED_BYTES == 16 * MIB
        store.sessions.save(SessionFactory.build(id="s-1"))
        # 300 events of each kind, in turn, of 10,000 characters: 3 MB of ASCII, 9 MB of CJK
        # and 12 MB of emoji as UTF-8; as frames, ASCII the same, CJK and emoji twice and three
        # times as much.
        bodies = [body_of(text * 10_000) for text in TEXTS]
        for _ in range(30):
            with store.unit_of_work() as uow:
                for _ in range(10):
                    for body in bodies:
                        uow.events.append("s-1", 1, body)
                uow.commit()
        latest = store.events.latest_seq()
        app = create_app(store, WebSettings(tokens=TOKENS, redact=False))
        with ThreadServer(app) as live:
            # A stream from the oldest event: the database first, then every event the window
            # holds, each made into a frame.
            reader = Reader(live.base, "/api/events/stream?after_seq=0")
            deadline = time.monotonic() + 120
            while not reader.events() or int(reader.events()[-1].fields["id"]) < latest:
                assert time.monotonic() < deadline, len(reader.events())
                time.sleep(0.05)
            window = store.following.window.snapshot()
            frames = app.state.session_journal_hub.frames
            held = frames.held()
            joined = app.state.session_journal_hub.joined_bytes()
        # The counts are the bytes as encoded, exactly.
        assert window.size == sum(len(row[2].encode()) for row in window.rows)
        assert frames.size == sum(map(len, held))
        # Both bounds were reached and held: the newest events of each kind, the oldest gone.
        assert 7 * MIB < window.size <= StoreOptions().follow_window_bytes
        assert 6 * MIB < frames.size <= FRAME_BYTES
        assert 0 < joined <= JOINED_BYTES  # the writes the stream made were shared
        assert {text for row in window.rows for text in TEXTS if text * 10 in row[2]} == set(TEXTS)
        assert max(map(len, held)) > 12 * 10_000  # an emoji frame, counted escaped
        assert window.size + frames.size + joined <= 16 * MIB
