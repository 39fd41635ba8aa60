"""Following the log: exactly once, in order, woken on commit.

One `Following` per store (`store.following`, made when the store opens) owns what following
takes: the commit signal (`wakeups.CommitSignal`) and its wake-up source of other processes'
commits (SQLite's `data_version` watcher, PostgreSQL's `LISTEN`), and the one window of recent
events (`window.SharedTail`) that every follower of the process reads, which honours other
processes' deletes and prunes. On it: the cursor rules (`cursors`), the thread-side `Follower`
(`store.events.follow`), and on an event loop `AsyncFollower` (`async_store.events.follow`) and
`Fanout`, the followers and streams of one loop as cursors that hold no thread while they wait
(`async_store.following.fanout()`; the web layer's streams wait there).
"""

from __future__ import annotations

from .async_follower import AsyncFollower, AsyncFollowing
from .fanout import Fanout, Waiter
from .follower import Follower
from .following import Following
from .window import Row, Window, encoded_size, needs_check

__all__ = [
    "AsyncFollower",
    "AsyncFollowing",
    "Fanout",
    "Follower",
    "Following",
    "Row",
    "Waiter",
    "Window",
    "encoded_size",
    "needs_check",
]
