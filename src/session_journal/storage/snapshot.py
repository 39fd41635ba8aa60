"""`SnapshotTransactions`: the `Transactions` of `store.snapshot()`, one read transaction that
every read of the services built on it shares; writes and waits are refused."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import NoReturn, TypeVar

from ..config import StoreOptions
from ..errors import InvalidRecord, ReadOnlySnapshot, SnapshotEnded
from .counters import StoreCounters
from .engines import translate_errors
from .protocols import LoneWrite, WriteContext
from .unit_of_work import ReadUnitOfWork

T = TypeVar("T")


class SnapshotTransactions:
    """One read transaction (`Database.snapshot`) as the services' `Transactions`: `reading`
    and `reading_one_statement` give the same read context, so every query sees the state of
    the snapshot's first read. Its connection is used by one call at a time (a lock: calls
    from several threads take turns). Once the snapshot's block is over every call raises
    `SnapshotEnded`."""

    def __init__(
        self,
        read: ReadUnitOfWork,
        options: StoreOptions,
        check_open: Callable[[str], None],
        counters: StoreCounters,
    ) -> None:
        """`check_open(action)`: the store's check (`StoreClosed` once it is closed);
        `counters`: the store's (a snapshot's reads count as the store's do)."""
        self.options = options
        self.counters = counters
        self._read = read
        self._check_open = check_open
        self._lock = threading.Lock()
        self._ended = False
        self.pid = os.getpid()
        self.loop_writes = None  # a snapshot writes nothing
        """The process that took the snapshot: its connection is that process's."""

    def submit(
        self,
        fn: Callable[[WriteContext], T],
        action: str = "write",
        uow: object = None,
        *,
        solo: bool = False,
    ) -> T:
        """Refused: a snapshot only reads (`ReadOnlySnapshot`)."""
        self._refuse(action)

    def submit_lone(self, write: LoneWrite[T], action: str = "write", uow: object = None) -> T:
        """Refused: a snapshot only reads (`ReadOnlySnapshot`)."""
        self._refuse(action)

    def _refuse(self, action: str) -> NoReturn:
        self._check_live(action)
        raise ReadOnlySnapshot(
            f"{action}: a snapshot only reads; make the call on the store, outside the snapshot"
        )

    @contextmanager
    def reading(self, action: str = "read", uow: object = None) -> Iterator[ReadUnitOfWork]:
        """The snapshot's read context, for one call at a time."""
        if uow is not None:
            raise InvalidRecord(f"{action}: a snapshot's reads take no uow (they share its own)")
        with self._lock:
            self._check_live(action)
            with translate_errors(action):
                yield self._read

    def reading_one_statement(
        self, action: str = "read", uow: object = None
    ) -> AbstractContextManager[ReadUnitOfWork]:
        """As `reading`: in a snapshot every read is in its one transaction."""
        return self.reading(action, uow)

    def check_followable(self, action: str) -> NoReturn:
        """Refused: a snapshot sees one moment, nothing commits into it (`ReadOnlySnapshot`:
        wait and follow on the store)."""
        self._refuse(action)

    def writing_in_this_thread(self) -> bool:
        """Never: a snapshot holds no write transaction."""
        return False

    def end(self) -> None:
        """The snapshot's block is over: every later call raises `SnapshotEnded`."""
        with self._lock:
            self._ended = True

    def _check_live(self, action: str) -> None:
        if self._ended:
            raise SnapshotEnded(
                f"{action}: this snapshot has ended (its block is over); take a new one with "
                "store.snapshot()"
            )
        if os.getpid() != self.pid:  # a child after fork: the connection is the parent's
            raise SnapshotEnded(
                f"{action}: this snapshot was taken by the parent process; take one in this "
                "process with store.snapshot()"
            )
        self._check_open(action)
