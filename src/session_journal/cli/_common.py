"""What the sub-commands share: the URL as shown to a user, the schema status read, and
the flag a signal handler sets while a command follows or prunes."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

import sqlalchemy as sa

from .. import migrations
from ..config import StoreOptions
from ..storage.engines import require_database

WAKE_S = 0.1  # how often a waiting follower looks whether Ctrl-C was pressed


def shown_url(url: str) -> str:
    """The URL as the CLI prints it: the password masked."""
    return sa.make_url(url).render_as_string(hide_password=True)


def schema_status(url: str) -> migrations.SchemaStatus:
    """The schema status of the database at `url`, read without creating it."""
    options = StoreOptions.from_env()  # bad settings are named before the URL is looked at
    require_database(url)  # a read-only command never creates a database
    return migrations.status_at(url, options, role="reader")


class Interrupt:
    """Ctrl-C (SIGINT) or SIGTERM (a service manager stopping it) while following: the
    handler only records it.

    Python runs a handler in the main thread between two bytecodes, wherever that thread is,
    possibly holding a lock (`threading.Event.wait` holds its condition's lock on the way in
    and out): a handler that took a lock could wait forever for its own thread. So it sets an
    attribute and nothing else, and the loop looks at it between polls, never in the middle of
    a query or a line.
    """

    def __init__(self) -> None:
        self.requested = False

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.requested = True


@contextmanager
def interrupt_flag(follow: bool) -> Iterator[Interrupt]:
    """The flag SIGINT and SIGTERM set while the block runs (`follow`: in the main thread, the
    process's handlers are replaced for the block and put back after it)."""
    interrupt = Interrupt()
    # Only the main thread may set handlers, and only it receives the signals anyway.
    if not follow or threading.current_thread() is not threading.main_thread():
        yield interrupt
        return
    previous = {number: signal.signal(number, interrupt) for number in STOPPING}
    try:
        yield interrupt
    finally:
        for number, handler in previous.items():
            # None: the previous handler was not installed from Python and cannot be put back.
            signal.signal(number, signal.SIG_DFL if handler is None else handler)


STOPPING = (signal.SIGINT, signal.SIGTERM)  # a follower stops as cleanly for either
