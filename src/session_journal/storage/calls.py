"""A call on the write path (`write_path.py`): its function, its pending result and how its
caller waits for it (`Call`), and how another thread withdraws it before a batch takes it
(`Withdrawal`, through the `WITHDRAWAL` context variable: `aio` cancels a task this way).
Settling a batch's calls wakes every caller, even when an exception lands meanwhile
(`settle_all`, `wake`)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from typing import Any, Generic, TypeVar

from .unit_of_work import UnitOfWork

T = TypeVar("T")


class Call(Generic[T]):
    """One queued call: its function, its name for errors, and its pending result."""

    __slots__ = (
        "action",
        "after_commit",
        "done",
        "exclusive",
        "failed",
        "fn",
        "leads",
        "lone",
        "retries",
        "solo",
        "value",
        "wake",
        "withdrawal",
    )

    def __init__(
        self,
        fn: Callable[[UnitOfWork], T] | None,
        action: str,
        lone: Any = None,
        *,
        solo: bool = False,
    ) -> None:
        self.fn = fn
        # Run in a batch of its own: its work takes the log's row before other rows, which
        # later calls of a shared batch would take after it, against every writer's order.
        self.solo = solo
        self.lone = lone  # the lone write whose `run` `fn` is: a batch may run it with others
        # What its work left to run after the commit, once kept (`_run_call`).
        self.after_commit: Sequence[Callable[[], None]] = ()
        self.withdrawal = WITHDRAWAL.get()  # set by a caller whose call may be withdrawn
        self.action = action
        self.exclusive = fn is None  # a unit-of-work block of the caller's own code
        self.leads = False  # its thread holds the write path (to lead batches, or its block)
        self.retries = 0  # times it was rolled back as a deadlock victim and queued again
        # The pending result (a future of our own: settled once, by the leader, after the
        # commit): `value` is the result, or the exception when `failed`.
        self.done = False
        self.failed = False
        self.value: Any = None
        # Made only when the caller's thread must wait (a lone caller that leads never does);
        # signalled after `leads` or `done` changed, so that thread alone wakes. A lock used as
        # a binary semaphore (held: no signal pending): far cheaper than a `threading.Event`,
        # whose condition variable allocates a lock per wait.
        self.wake: threading.Lock | None = None

    def settle(self, value: Any, *, failed: bool = False) -> None:
        """Record the outcome and wake the caller's thread."""
        self.value, self.failed, self.done = value, failed, True
        self.signal()

    def signal(self) -> None:
        """Wake the caller's thread if it waits (or is about to: it re-checks before waiting)."""
        wake = self.wake
        if wake is not None:
            try:  # noqa: SIM105 (a hot path: contextlib.suppress would build an object per call)
                wake.release()
            except RuntimeError:  # signalled already, and the caller has not woken since
                pass

    def wait(self) -> None:
        """In the caller's thread: block until `leads` or `done` may have changed."""
        if self.wake is None:
            wake = threading.Lock()
            wake.acquire()
            self.wake = wake
            return  # the caller re-checks its state before it waits on the new lock
        self.wake.acquire()  # until a signal releases it; held again afterwards

    def result(self) -> T:
        """The call's result, or its exception raised (once: the call lets go of it, so that
        no reference cycle through the traceback keeps the batch's objects alive)."""
        if self.failed:
            error, self.value = self.value, None
            raise error
        return self.value  # type: ignore[no-any-return]


class Withdrawal:
    """A handle with which another thread withdraws the call its caller is about to make (the
    `WITHDRAWAL` context variable of that caller's thread holds it): `aio` cancels a task this
    way. A call withdrawn before a batch took it is never written and its caller raises
    `CallWithdrawn`; one already in a batch, or leading one, may still commit."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.cancelled = False
        self._withdraw: Callable[[], bool] | None = None

    def attach(self, withdraw: Callable[[], bool]) -> bool:
        """How to withdraw the caller's call as it is queued (by `WritePath._enqueue`, with its
        mutex held): a function saying whether the call is now sure never to be written. `False`
        if it was cancelled already: the caller must not queue it. Checked and set under one
        lock, so a `cancel` lands either before (refused here) or after (it withdraws)."""
        with self._lock:
            if self.cancelled:
                return False
            self._withdraw = withdraw
            return True

    def cancel(self) -> bool:
        """Withdraw the call if no batch took it yet (or refuse it if it is not queued yet);
        whether it is now sure never to be written."""
        with self._lock:
            self.cancelled = True
            withdraw = self._withdraw
        if withdraw is None:
            return True  # `_enqueue` sees `cancelled` under the write path's mutex
        return withdraw()


WITHDRAWAL: ContextVar[Withdrawal | None] = ContextVar("session_journal_withdrawal", default=None)
"""The `Withdrawal` of the calls this context makes, if they may be withdrawn."""


def settle_all(settlements: list[tuple[Call[Any], Any, bool]]) -> None:
    """Record the outcome of every call `(call, value, failed)`, then wake every caller. An
    exception raised meanwhile in this thread (a `KeyboardInterrupt` landing in the middle) is
    raised only once every caller is woken: a caller whose call is settled but never woken
    would wait forever."""
    for call, value, failed in settlements:
        call.value, call.failed, call.done = value, failed, True
    wake(*(call for call, _, _ in settlements))


def wake(*calls: Call[Any]) -> None:
    """Signal each call's thread, all of them even if an exception interrupts this one (a
    signal given twice is harmless); the first such exception is raised at the end."""
    pending = list(calls)
    interrupted: BaseException | None = None
    while pending:
        try:
            while pending:
                pending[-1].signal()
                pending.pop()
        except BaseException as error:
            interrupted = interrupted or error
    if interrupted is not None:
        raise interrupted
