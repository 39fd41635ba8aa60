"""The write path: the one owner of every write transaction of a store, with group commit.

Nothing else begins, commits or rolls back a write transaction, or keeps the write connection.
Services hand it a function of a `UnitOfWork` (`submit`); `store.unit_of_work()` borrows the
transaction for a block of the caller's own code (`exclusive`).

**Group commit.** Calls from concurrent threads queue; whichever caller finds the write path free
becomes the *leader* and runs, in its own thread, whatever is queued at that moment as one batch:
one transaction, each call in its own SAVEPOINT (on PostgreSQL but the first, which needs none:
undoing it undoes the whole transaction), one commit (one fsync) for all. A lone caller leads
its own batch of one, with no savepoint, no timer and no thread hand-off, so it waits for
nothing. A leader keeps leading until its own call is done, then hands over to a waiting
caller.

**Lone writes** (`submit_lone`, `lone.py`): a call whose statements and arguments are fixed
before its transaction comes as data. A caller that finds nobody leading and nothing queued
takes the write path and runs it by itself on the short path: its statements, compiled once, on
the kept connection's `driver.LoneCursor` (on PostgreSQL one statement in autocommit), with no
unit of work, savepoint or `Call`. Otherwise it joins the next batch as `submit(write.run)`.
The rules below hold for it either way.

The rules a caller can rely on:
- a call returns (or raises) only after the commit that contains its work is durable;
- a call that fails rolls back to its savepoint and raises in its own caller only; the rest of
  the batch commits. Its outcome (a refusal, a `False`) is released after the commit too: it may
  have been computed against earlier members' work, which must be durable first;
- if the commit itself fails, every call of the batch raises `StorageError` and nothing of
  theirs is committed; the connection is discarded and the next batch starts on a new one.
  The error's subclass says whether to retry, but for a constraint violation found then in a
  batch of several calls: it is no one call's own, so each gets a plain `StorageError`;
- seqs are taken once per batch, just before the commit (`EventRepository.flush`), so the
  `event_sequences` row lock is held only from there to the end of the commit, and seqs stay
  gap-free in commit order;
- the queue is FIFO and batches are bounded (calls and events), so no caller starves; a full
  queue makes a caller wait up to the busy timeout, then raise a `TransientStorageError`.

The transaction is begun and ended on the driver, through the one seam below SQLAlchemy
(`driver.begin_write`, `driver.commit`, `driver.rollback`): SQLite's `BEGIN IMMEDIATE` takes the
write lock up front; so are the savepoints of the calls of a batch.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from ..config import StoreOptions
from ..errors import (
    BoundTransactionOpen,
    CallWithdrawn,
    SessionJournalError,
    StorageError,
    StoreClosed,
    TransientStorageError,
    WriteInsideUnitOfWork,
)
from . import bound, driver
from .calls import WITHDRAWAL, Call, settle_all, wake
from .counters import StoreCounters
from .engines import is_conflict, is_database_error, storage_error, translate_errors
from .lone import LoneStatements
from .protocols import LoneWrite
from .unit_of_work import UnitOfWork, WorkMark, run_after_commit

T = TypeVar("T")

MAX_BATCH_CALLS = 64
"""The most calls one batch runs."""
MAX_BATCH_EVENTS = 2_000
"""A batch stops taking calls once it holds this many events (a call is never split)."""
MAX_QUEUED_CALLS = 4_096
"""Calls waiting beyond this make a caller wait for room (up to the busy timeout)."""
MAX_DEADLOCK_RETRIES = 3
"""How often a call chosen as a deadlock victim is queued again before its caller gets the
error (see `is_deadlock`)."""


class WritePath:
    """The write transactions of one store (see the module docstring)."""

    def __init__(
        self, engine: Engine, options: StoreOptions, counters: StoreCounters | None = None
    ) -> None:
        self._engine = engine
        self.counters = counters or StoreCounters()  # the store's (`store.metrics()`)
        self._engine_options = engine.get_execution_options()
        self._options = options
        self.after_commit: Callable[[], None] | None = None  # told after each commit
        self.owner: object = None  # the store's `Database`, named by the units of work it makes
        self._fresh_state()
        # A statement sent through SQLAlchemy after a unit-of-work block committed by itself
        # (`uow.connection.commit()`) makes SQLAlchemy begin: that too must be a write
        # transaction, never pysqlite's autocommit.
        sa.event.listen(engine, "begin", driver.begin_write)

    def _fresh_state(self) -> None:
        self._mutex = threading.Lock()
        self._idle = threading.Condition(self._mutex)  # room in the queue, or nobody leads
        self._queue: deque[Call[Any]] = deque()
        self._leading = False  # some caller's thread holds the write path
        self._waiting_for_room = 0  # callers waiting for the queue to shrink
        self._closed = False
        self._exclusive_thread: int | None = None  # the thread in a unit-of-work block
        self._running_thread: int | None = None  # the leader, while it runs a batch
        self._connection: sa.Connection | None = None  # kept between batches
        self._lone_statements: LoneStatements | None = None  # compiled by the first lone write
        self._lone_cursor: driver.LoneCursor | None = None  # of the kept connection, if made
        self._commit_marked = False  # the running call asked to commit (leader thread only)
        self.batches = 0  # transactions run (committed or not), for tests and benchmarks
        self.calls = 0  # calls run in them
        self.retried = 0  # deadlock victims queued again (or, on the short path, run again)
        self.alone = 0  # lone writes run by themselves on the short path
        self.together = 0  # lone writes run with the others of their type in a batch
        self.together_failed = 0  # groups undone and run call by call

    # --- callers ----------------------------------------------------------------------------

    def submit(
        self, fn: Callable[[UnitOfWork], T], action: str = "write", *, solo: bool = False
    ) -> T:
        """Run `fn` on a unit of work in the next batch; its result once the batch committed.
        An exception of `fn` (with its savepoint rolled back) is raised here, also after the
        commit. What `fn` left to run after the commit (`uow.after_commit`) runs here, in the
        caller's thread (never in the leader's, which other calls wait for), once the batch
        committed. `solo`: in a batch of its own (for work that locks the log's row before
        other rows: see `Call.solo`)."""
        started = time.perf_counter()
        try:
            return self._settled(Call(fn, action, solo=solo))
        finally:
            self.counters.write_call(time.perf_counter() - started)

    def _settled(self, call: Call[T]) -> T:
        """Queue `call`, lead batches until it is done, and give its result."""
        self._lead_until(call)  # a function call always comes back done
        result = call.result()  # raises if its work was undone or the commit failed
        run_after_commit(call.after_commit)
        return result

    def submit_lone(self, write: LoneWrite[T], action: str = "write") -> T:
        """Run a lone write (`lone.py`); its result once committed. When nobody leads and no
        call is queued, this caller takes the write path and runs the write by itself on the
        short path (`_run_alone`); otherwise it is `submit(write.run, action)`: it joins the
        next batch, so group commit is what it was for concurrent callers, and runs there with
        the batch's other lone writes of its type (`_run_together`). The rules of `submit` hold
        either way."""
        started = time.perf_counter()
        try:
            return self._lone(write, action)
        finally:
            self.counters.write_call(time.perf_counter() - started)

    def _lone(self, write: LoneWrite[T], action: str) -> T:
        """`submit_lone`, its latency left out."""
        self._refuse_waiting_for_itself(action)
        me, took = threading.get_ident(), False
        try:
            with self._mutex:
                if self._leading or self._queue or self._closed:
                    if self._closed:
                        raise StoreClosed(f"{action}: the store is closed")
                else:
                    withdrawal = WITHDRAWAL.get()
                    if withdrawal is not None and not withdrawal.attach(_running):
                        raise CallWithdrawn(f"{action}: withdrawn before it was queued")
                    # Taken: no call between these stores, so no interrupt (a signal's
                    # exception lands only at a call or a jump) comes between them.
                    took = True
                    self._leading = True
                    self._running_thread = me
            if took:  # nobody else writes: this thread runs it now, by itself
                return self._run_alone(write, action)
        finally:
            if took:
                with self._mutex:
                    self._running_thread = None
                    self._hand_over()
        return self._settled(Call(write.run, action, write))  # others write: the next batch

    @contextmanager
    def exclusive(self, action: str = "unit of work") -> Iterator[UnitOfWork]:
        """A transaction of its own for a block of the caller's code (`store.unit_of_work()`):
        it waits for its turn in the queue, then holds the write path until the block ends.
        The block commits with `uow.commit()`; leaving it otherwise rolls back."""
        call: Call[None] = Call(None, action)
        holds = False
        uow: UnitOfWork | None = None
        try:
            holds = self._lead_until(call)
            if not holds:  # failed in the queue: the store was closed
                call.result()
                raise AssertionError("an exclusive call came back without its turn")
            with translate_errors(action):
                connection = self._checkout()
                sound = False
                self._exclusive_thread = threading.get_ident()
                try:
                    driver.begin_write(connection)
                    self.batches += 1
                    self.calls += 1
                    uow = UnitOfWork(
                        connection, self._options, self._committer(connection), owner=self.owner
                    )
                    yield uow
                    sound = True
                except SessionJournalError as error:  # a refusal leaves the connection sound
                    sound = not isinstance(error, StorageError)
                    raise
                finally:
                    self._exclusive_thread = None
                    if uow is not None:
                        uow.end("its unit_of_work() block is over")
                    self._release(connection, sound)
        finally:
            if holds:
                call.settle(None)
                with self._mutex:
                    self._hand_over()

    @property
    def idle(self) -> bool:
        """Whether nothing writes now: no batch running or queued, no unit-of-work block, and
        the store open (read without the lock: a hint for `loop_writes`, which may then write
        beside a batch that began meanwhile, as another process's writer would)."""
        return not (self._leading or self._queue or self._closed)

    def queued(self) -> int:
        """How many calls wait for a batch."""
        with self._mutex:
            return len(self._queue)

    def writing_in_this_thread(self) -> bool:
        """Whether this thread is inside a write transaction of the store: in a unit-of-work
        block, running the functions of a batch, or holding a transaction of its own bound to
        the store (`store.bind`); a write (or a wait for one, such as the journal index's)
        started there would wait for that transaction."""
        me = threading.get_ident()
        return (
            self._exclusive_thread == me
            or self._running_thread == me
            or bound.holds_binding(self.owner)
        )

    def close(self) -> None:
        """Refuse new calls (`StoreClosed`), fail the queued ones that no batch took yet, wait
        for the batch or unit of work in progress (unless this thread holds it), and close the
        kept connection."""
        with self._idle:
            self._closed = True
            never_ran, self._queue = list(self._queue), deque()  # no batch took these
            settle_all(
                [
                    (call, StoreClosed(f"{call.action}: the store was closed"), True)
                    for call in never_ran
                ]
            )
            self._idle.notify_all()
            if not self.writing_in_this_thread():
                while self._leading:
                    self._idle.wait()
            connection, self._connection = self._connection, None
            self._forget_lone_cursor()
        if connection is not None:
            connection.close()

    # --- queue and leadership ---------------------------------------------------------------

    def _refuse_waiting_for_itself(self, action: str) -> None:
        """Refuse a write that this thread would wait for forever (it holds a transaction)."""
        if bound.holds_binding(self.owner):
            # This thread holds a transaction of the caller bound to the store: on SQLite it
            # holds the write lock, on PostgreSQL maybe the rows the call needs.
            raise BoundTransactionOpen(
                f"{action}: this thread holds a transaction bound to this store "
                "(store.bind) that has not ended; pass uow=<its unit of work> to make the call "
                "inside it, or commit or roll back that transaction first (else the call would "
                "wait for it)"
            )
        me = threading.get_ident()
        if self._exclusive_thread == me or self._running_thread == me:
            # This thread holds the write path: waiting for its turn would wait for itself.
            raise WriteInsideUnitOfWork(
                f"{action}: a write was started inside a unit of work of the same store "
                "(a `unit_of_work()` block or a function the write path runs); use the unit of "
                "work's repositories instead"
            )

    def _enqueue(self, call: Call[Any]) -> None:
        """Queue the call; with nobody leading, its own thread leads at once."""
        self._refuse_waiting_for_itself(call.action)
        with self._idle:
            if self._closed:
                raise StoreClosed(f"{call.action}: the store is closed")
            if len(self._queue) >= MAX_QUEUED_CALLS or self._waiting_for_room:
                # Behind the callers already waiting for room: a newcomer never overtakes them.
                self._waiting_for_room += 1
                try:
                    room = self._idle.wait_for(
                        lambda: len(self._queue) < MAX_QUEUED_CALLS or self._closed,
                        self._options.busy_timeout_s,
                    )
                finally:
                    self._waiting_for_room -= 1
            else:
                room = True
            if not room:
                raise TransientStorageError(
                    f"{call.action}: the write queue stayed full ({MAX_QUEUED_CALLS} calls) "
                    f"for the busy timeout ({self._options.busy_timeout_s:g} s); retry later"
                )
            if self._closed:
                raise StoreClosed(f"{call.action}: the store is closed")
            withdrawal = call.withdrawal
            if withdrawal is not None and not withdrawal.attach(
                functools.partial(self._withdraw, call)
            ):
                raise CallWithdrawn(f"{call.action}: withdrawn before it was queued")
            self._queue.append(call)
            if not self._leading:
                self._leading = call.leads = True

    def _lead_until(self, call: Call[Any]) -> bool:
        """Wait until `call` is done, leading batches while this thread holds the write path.
        Returns `True` when `call` is exclusive and its turn has come: the caller then holds
        the write path for its block.

        Leadership passes from thread to thread, never to two at once: a leader leads until its
        own call is done, then hands the write path to the thread of the call at the head of
        the queue (`_hand_over`), waking that thread alone.

        A caller interrupted while it waits or leads (`KeyboardInterrupt`, say) withdraws its
        call if no batch took it yet (it is never written); one already in a batch may still
        commit."""
        try:
            self._enqueue(call)
            while True:
                while not call.leads and not call.done:
                    call.wait()
                with self._idle:
                    if call.done:
                        if call.leads:
                            call.leads = False
                            self._hand_over()
                        return False
                    head = self._queue[0]  # this call is queued until done: never empty
                    if head is call and call.exclusive:
                        self._queue.popleft()
                        return True  # this thread holds the write path for its block
                    if head.exclusive:  # the write path goes to that block's thread
                        call.leads, head.leads = False, True
                        wake(head)
                        continue
                self._run()
        except BaseException:
            with self._mutex:
                if call in self._queue:  # no batch has it: withdrawn, never written
                    self._queue.remove(call)
                if call.leads:
                    call.leads = False
                    self._hand_over()
            raise

    def _withdraw(self, call: Call[Any]) -> bool:
        """Take `call` out of the queue if no batch took it and its thread does not lead (it
        is then never written; its caller raises `CallWithdrawn`); whether it was, or had
        failed or been withdrawn already."""
        with self._idle:
            if call.done and call.failed:
                return True
            if call.leads or call not in self._queue:
                return False  # in a batch (or about to run one): it may commit
            self._queue.remove(call)
            self._idle.notify_all()  # room in the queue
            call.settle(CallWithdrawn(f"{call.action}: withdrawn, never written"), failed=True)
        return True

    def _hand_over(self) -> None:
        """With the mutex held, by the thread that holds the write path and gives it up: to the
        thread of the call at the head of the queue, or to nobody."""
        if self._queue:
            head = self._queue[0]
            head.leads = True
            wake(head)
        else:
            self._leading = False
            if self._closed or self._waiting_for_room:  # the only waiters on `_idle`
                self._idle.notify_all()

    def _take_batch(self, batch: list[Call[Any]]) -> None:
        """Move the calls at the head of the queue, up to an exclusive one, into `batch`; a solo
        call only by itself."""
        with self._idle:
            while self._queue and len(batch) < MAX_BATCH_CALLS and not self._queue[0].exclusive:
                if self._queue[0].solo and batch:  # it runs in the next batch, alone
                    break
                batch.append(self._queue.popleft())
                if batch[0].solo:
                    break
            if self._waiting_for_room:
                self._idle.notify_all()

    # --- one batch ---------------------------------------------------------------------------

    def _run(self) -> None:
        """Take the calls at the head of the queue and run them in one transaction; settle
        every call taken, whatever happens (a caller must never wait for a call nobody runs)."""
        batch: list[Call[Any]] = []
        outcomes: list[tuple[Call[Any], str, Any]] = []
        connection: sa.Connection | None = None
        uow: UnitOfWork | None = None
        committed = False
        try:
            self._take_batch(batch)
            connection = self._checkout()
            uow = UnitOfWork(connection, self._options, self._mark_commit, owner=self.owner)
            driver.begin_write(connection)
            sqlite = connection.dialect.name == "sqlite"
            self._running_thread = threading.get_ident()
            ran: set[int] = set()  # ids of the calls run with an earlier lone write
            for index, call in enumerate(batch):
                if id(call) in ran:
                    continue
                if uow.events.pending_count() >= MAX_BATCH_EVENTS:
                    rest = [later for later in batch[index:] if id(later) not in ran]
                    batch = [done for done, *_ in outcomes]
                    self._give_back(rest)  # back at the head of the queue, in order
                    break
                # Without a savepoint: a lone call, or on PostgreSQL the first call of a batch
                # (its undo rolls back a transaction holding only its work). On SQLite that
                # rollback would let another process take the write lock mid-batch.
                bare = index == 0 and (len(batch) == 1 or not sqlite)
                group = _together(call, batch[index:])
                if len(group) > 1:
                    ran.update(id(member) for member in group)
                    outcomes += self._run_together(group, uow, connection, bare=bare)
                    continue
                outcome = self._run_call(call, uow, connection, bare=bare)
                outcomes.append((call, *outcome))
            self.batches += 1
            self.calls += len(outcomes)
            uow.events.flush()
            driver.commit(connection)
            committed = True
            self.counters.committed(uow.events.take_inserted())
            self._keep(connection)
            self._give_back([call for call, kind, _ in outcomes if kind == _RETRY])
        except BaseException as error:
            if not committed:
                if connection is not None:
                    _discard_connection(connection)
                shared = len(batch) > 1  # a violation found now is no one call's own
                settle_all(
                    [
                        (call, storage_error(call.action, error, shared=shared), True)
                        for call in batch
                    ]
                )
            if not isinstance(error, Exception):
                raise
        finally:
            self._running_thread = None
            if uow is not None:
                uow.end("its batch is over")
            if committed:  # settled only now: after the commit, whatever came after it
                settle_all(
                    [
                        (call, value, kind == _ERROR)
                        for call, kind, value in outcomes
                        if kind != _RETRY
                    ]
                )
                self._committed()

    def _run_together(
        self, group: list[Call[Any]], uow: UnitOfWork, connection: sa.Connection, *, bare: bool
    ) -> list[tuple[Call[Any], str, Any]]:
        """Run the lone writes of one type of a batch at once (`LoneWrite.run_together`), under
        one savepoint (none when `bare`, as for `_run_call`). If that fails, its work is undone
        and each call runs by itself (`_run_call`), so that an error is its own call's and a
        deadlock victim is queued again, as always. An interrupt (`KeyboardInterrupt`,
        `SystemExit`) that lands meanwhile is the first call's, as `_run_call` gives it to the
        call that was running; the others then run by themselves and the batch goes on."""
        mark = uow.mark()
        if not bare:
            driver.savepoint(connection)
        try:
            results = group[0].lone.run_together([call.lone for call in group], uow)
            driver.check_transaction(connection)
        except BaseException as raised:  # undone, then run call by call
            _undo(uow, mark, connection, bare=bare)
            self.together_failed += 1
            # An exception is the statement's: each call runs again by itself. An interrupt is
            # the first call's. A bare group's undo left an empty transaction, so the first to
            # run again is bare too; otherwise each runs under a savepoint of its own.
            first, rest = ([], group) if isinstance(raised, Exception) else (group[:1], group[1:])
            return [(call, _ERROR, raised) for call in first] + [
                (call, *self._run_call(call, uow, connection, bare=bare and index == 0))
                for index, call in enumerate(rest)
            ]
        self.together += len(group)
        return [(call, _OK, result) for call, result in zip(group, results, strict=True)]

    def _run_call(
        self, call: Call[Any], uow: UnitOfWork, connection: sa.Connection, *, bare: bool
    ) -> tuple[str, Any]:
        """Run one call: `(_OK, result)`, `(_ERROR, exception)` or `(_RETRY, exception)`. A call
        that fails, or returns without `uow.commit()`, is undone: to its savepoint, or, for a
        `bare` call (run without one: the first of its transaction, see `_run`), by rolling back
        the transaction, which holds only its own work. Errors of the undo itself end the batch.

        Whatever the function raises is its own caller's, `SystemExit` and `KeyboardInterrupt`
        included: it is raised there, never in the leader's thread, and the batch goes on."""
        mark = uow.mark()
        if not bare:
            driver.savepoint(connection)
        self._commit_marked = False
        outcome: tuple[str, Any]
        assert call.fn is not None
        try:
            outcome = (_OK, call.fn(uow))
        except BaseException as raised:  # handed to its caller; the batch goes on
            error = _translated(call, raised) if isinstance(raised, Exception) else raised
            if is_deadlock(error) and call.retries < MAX_DEADLOCK_RETRIES:
                call.retries += 1
                self.retried += 1
                outcome = (_RETRY, error)
            else:
                outcome = (_ERROR, error)
        refusal = uow.take_refusal()  # the call's own: the batch's later calls commit
        if refusal is not None and outcome[0] == _OK:  # it caught the refusal: undone anyway
            outcome = (_ERROR, refusal)
        if outcome[0] == _OK and self._commit_marked:
            try:
                # Its savepoint is kept, not released: the savepoints of a batch nest (at most
                # MAX_BATCH_CALLS, within PostgreSQL's per-backend cache of 64 subtransactions),
                # a later call's rollback undoes only its own, and the commit keeps them all; a
                # RELEASE would cost a round trip per call on PostgreSQL.
                driver.check_transaction(connection)
                call.after_commit = uow.take_after_commit()  # the call's own: run by its caller
                return outcome
            except Exception as raised:  # PostgreSQL: the function swallowed an error of its
                # own, which aborted the transaction; undo it below, as a failed call
                outcome = (_ERROR, _translated(call, raised))
        _undo(uow, mark, connection, bare=bare)
        return outcome

    def _run_alone(self, write: LoneWrite[T], action: str) -> T:
        """Run a lone write on the short path, in a transaction of its own on the kept
        connection, through its `driver.LoneCursor`. If it fails, the connection is discarded
        (the next transaction starts on a new one) and the caller gets the error as a batch's
        caller would; a deadlock victim (PostgreSQL) runs again, as a batch's does. Once it
        committed, the connection is kept and followers are told, whatever comes after."""
        retries = 0
        while True:
            connection: sa.Connection | None = None
            committed = False
            try:
                connection = self._checkout_alone()
                cursor = self._lone_cursor
                if cursor is None:  # a new connection: its cursor, and the statements once
                    cursor = self._lone_cursor = driver.lone_cursor(connection)
                    if self._lone_statements is None:
                        self._lone_statements = LoneStatements(connection.dialect)
                cursor.begin()
                result = write.run_alone(self._lone_statements, cursor)
                cursor.commit()
                committed = True
                self.counters.committed(1 if write.appends and result else 0)
            except BaseException as error:
                if not committed:
                    self._forget_lone_cursor()
                    if connection is not None:
                        _discard_connection(connection)
                retry_or_raise(action, error, retries)
                retries += 1
                self.retried += 1
                continue
            finally:
                if committed:
                    assert connection is not None
                    self.batches += 1
                    self.calls += 1
                    self.alone += 1
                    if self._closed:  # closing: `close` waits for this call to end
                        self._keep(connection)
                    else:  # kept as it is (a lone write changes no option of it)
                        self._connection = connection
                    self._committed()
            return result

    def _committed(self) -> None:
        """Tell `after_commit` (the followers' signal) that a transaction committed."""
        if self.after_commit is not None:
            self.after_commit()

    def _mark_commit(self, uow: UnitOfWork) -> None:
        """`uow.commit()` inside a batch: the call's work is kept (its savepoint is not rolled
        back) and commits with the batch."""
        self._commit_marked = True

    def _give_back(self, calls: list[Call[Any]]) -> None:
        with self._mutex:
            for call in reversed(calls):
                self._queue.appendleft(call)

    # --- the connection ------------------------------------------------------------------------

    def _checkout(self) -> sa.Connection:
        """The kept connection, or a new one, for a batch or a unit-of-work block (which may
        close or discard it: the lone writes' cursor on it is closed first)."""
        self._forget_lone_cursor()
        return self._checkout_alone()

    def _checkout_alone(self) -> sa.Connection:
        """The kept connection with its lone writes' cursor, or a new one, for a lone write."""
        connection, self._connection = self._connection, None
        if connection is None:
            self._forget_lone_cursor()  # it was the last kept connection's
            return self._engine.connect()
        return connection

    def _forget_lone_cursor(self) -> None:
        """Close the lone writes' cursor of the kept connection, which is about to be closed or
        discarded (a new connection gets a cursor of its own)."""
        cursor, self._lone_cursor = self._lone_cursor, None
        if cursor is not None:
            with contextlib.suppress(Exception):  # a broken connection: discarded anyway
                cursor.close()

    def _committer(self, connection: sa.Connection) -> Callable[[UnitOfWork], None]:
        def commit(uow: UnitOfWork) -> None:
            with translate_errors("commit a unit of work"):
                # PostgreSQL would answer the COMMIT of an aborted transaction with a rollback.
                driver.check_transaction(connection)
                uow.events.flush()
                driver.commit(connection)
            self.counters.committed(uow.events.take_inserted())
            self._committed()
            run_after_commit(uow.take_after_commit())
            driver.begin_write(connection)  # the block may go on writing: that is a new transaction

        return commit

    def _keep(self, connection: sa.Connection) -> None:
        """After a commit (nothing is open): keep the connection for the next transaction,
        unless a call changed its options or the store is closing.

        A connection that comes back after the store closed (a function the write path ran
        closed it) is closed for good, not handed back to a pool: the store's close disposed
        the engine, so no one would ever close what that pool still held."""
        if self._closed:
            self._forget_lone_cursor()
            connection.invalidate()
            connection.close()
        elif connection.get_execution_options() != self._engine_options:
            self._forget_lone_cursor()
            connection.close()
        else:
            self._connection = connection

    def _release(self, connection: sa.Connection, sound: bool) -> None:
        """After a transaction: keep its connection for the next one if it is as the pool gave
        it; else hand it back to the pool, which resets it, or discard it if it may be broken."""
        if not sound or connection.invalidated:
            _discard_connection(connection)
            return
        if connection.closed:  # closed by a unit-of-work block
            return
        try:
            driver.rollback(connection)
        except BaseException:
            _discard_connection(connection)
            raise
        self._keep(connection)

    def after_fork(self) -> None:
        """In a child process after `fork` (`Database` notices): forget the parent's queue,
        locks and connection without closing it (closing would end the parent's session on
        PostgreSQL)."""
        _INHERITED.append((self._connection, self._lone_cursor))  # never collected nor closed
        self._engine.dispose(close=False)  # the pool's inherited connections too
        self._fresh_state()


_INHERITED: list[object] = []


_OK, _ERROR, _RETRY = "ok", "error", "retry"


def _undo(uow: UnitOfWork, mark: WorkMark, connection: sa.Connection, *, bare: bool) -> None:
    """Undo the work done since `mark`: to its savepoint, or for `bare` work (the first of its
    transaction, run without one) by rolling the transaction back and beginning another."""
    uow.restore(mark)
    if bare:
        driver.rollback(connection)
        driver.begin_write(connection)
    else:
        driver.rollback_to_savepoint(connection)


def _together(first: Call[Any], calls: list[Call[Any]]) -> list[Call[Any]]:
    """`first` and the later lone writes of its type in `calls` (which starts with it), in
    order: the calls a batch runs at once (`WritePath._run_together`); `[first]` if it is not
    a lone write."""
    if first.lone is None:
        return [first]
    kind = type(first.lone)
    return [call for call in calls if call.lone is not None and type(call.lone) is kind]


def is_deadlock(error: BaseException) -> bool:
    """Whether PostgreSQL chose this call as the victim of a deadlock (or a serialization
    failure). Batches of two processes may lock the same sessions in different orders (each
    call locks in one order, but a batch holds the locks of all its calls); the victim's
    savepoint is rolled back, which frees its locks, so the other batch commits. The victim is
    queued again for the next batch instead of failing its caller: it did nothing wrong."""
    cause = error.__cause__
    return cause is not None and is_conflict(cause)


def retry_or_raise(action: str, error: BaseException, retries: int) -> None:
    """After a lone write of `action` failed with `error` (its connection discarded): return
    when it runs again, a deadlock victim (`is_deadlock`) retried fewer than
    `MAX_DEADLOCK_RETRIES` times so far; else raise what its caller gets (`translated_error`;
    anything but an `Exception`, a cancellation say, as it is)."""
    if not isinstance(error, Exception):
        raise error
    translated = translated_error(action, error)
    if is_deadlock(translated) and retries < MAX_DEADLOCK_RETRIES:
        return
    raise translated  # (`storage_error` chains it to the driver error)


def _translated(call: Call[Any], error: Exception) -> Exception:
    """A call's own error as its caller gets it: a driver error becomes a `StorageError` naming
    the call (as `translate_errors` does), anything else is passed on."""
    return translated_error(call.action, error)


def translated_error(action: str, error: Exception) -> Exception:
    """An error of the work of `action` as its caller gets it (see `_translated`)."""
    if isinstance(error, SessionJournalError) or not is_database_error(error):
        return error
    return storage_error(action, error)


def _running() -> bool:
    """The withdrawal of a lone write that runs: too late, it may commit."""
    return False


def _discard_connection(connection: sa.Connection) -> None:
    """Close a connection that may be broken. On SQLite roll back first, on the driver: a
    connection closed while one of its statements is still referenced (say, by a traceback)
    lives on as a zombie that keeps its transaction, and with it the database's write lock,
    until the garbage collector frees the statement. A PostgreSQL connection is closed without
    talking to the server (the server ends its transaction)."""
    driver.rollback_quietly(connection)
    connection.invalidate()
    connection.close()
