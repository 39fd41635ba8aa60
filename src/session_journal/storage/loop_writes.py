"""Lone writes made on an asyncio event loop (PostgreSQL): an async store's lone append runs as
its one statement on a connection of the loop's own, with no worker thread between the task and
the database.

A call of an `AsyncStore` otherwise runs on a worker thread: two thread hand-offs (to the worker
and back to the loop), about 150 µs, a third of a lone append on PostgreSQL. A lone write whose
statements fit in one statement in autocommit (`AppendIfSessionExists`, the function call of
`lone.py`) needs no transaction held across awaits, so it can run on the loop: `LoopWrites`
holds one `driver.LoopConnection` per store and runs a lone write there when nobody else
writes in this process. The async twin asks it to `start` the write, which it does when the
write path is idle (no batch running or queued, no unit of work) and no other task's lone write
is on the loop connection: a task of the loop, which the caller awaits shielded. Otherwise the
call goes to a worker as before, and joins the write path's next batch, so concurrent callers
keep group commit.

What holds either way, as on the write path's short path:
- the call returns once its statement committed; the followers' signal is told then (the
  write path's `after_commit`), and other processes hear the statement's `NOTIFY`;
- the statement keeps every writer's lock order (the session row first, the seq row last, see
  `lone.py`): to the write path's connection the loop connection is one more writer, as another
  process's is, so neither can deadlock nor stall the other; a deadlock victim runs again, as
  the write path's do (`MAX_DEADLOCK_RETRIES`);
- a failure discards the connection (the next call connects anew) and raises the error a batch's
  caller gets (`StorageError`, naming the call); a caller cancelled while its statement runs
  returns at once and the statement runs to its end (its task is shielded), as a call running
  on a worker does: its outcome is settled, the connection kept, the followers told;
- a closed store refuses the call (`StoreClosed`); closing waits for the write in progress
  (`AsyncStore.close` through `settled`, the store's own close here, unless the write's loop
  runs in the closing thread, is stopped, or has not begun the write, which the store then
  refuses) and closes the connection; if the event loop itself ends (`asyncio.run` returning
  cancels what is left) while a write whose caller was cancelled runs, the write is cancelled
  with it: it may or may not have committed, as its caller was told; in a child process after
  `fork` the parent's connection is never used nor closed: the calls go to the workers.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy.engine import Engine

from ..config import StoreOptions
from . import driver
from .engines import postgresql_connect_args
from .lone import LoneStatements
from .protocols import LoopWrite
from .write_path import WritePath, retry_or_raise

T = TypeVar("T")


class LoopWrites:
    """The lone writes of one PostgreSQL store made on an event loop (see the module
    docstring). `take` and `run` are called on the loop; `close` from any thread."""

    def __init__(
        self,
        engine: Engine,
        options: StoreOptions,
        write_path: WritePath,
        check_open: Callable[[str], None],
    ) -> None:
        self._engine = engine
        self._connect_args = postgresql_connect_args(engine.url, options, "writer")
        self._write_path = write_path
        self._check_open = check_open
        self._lock = threading.Lock()  # `_running` and `_closed`, against another thread's close
        self._idle = threading.Condition(self._lock)  # told when the write in progress ends
        # The loop of the write in progress, and the thread it runs in.
        self._running: tuple[asyncio.AbstractEventLoop, int] | None = None
        self._sent = False  # the write in progress began (past the store's open check)
        self._closed = False
        self._pid = os.getpid()
        self._connection: driver.LoopConnection | None = None
        self._statements = LoneStatements(engine.dialect)  # compiled once, for the loop's calls
        self.alone = 0  # lone writes committed on the loop, for tests and benchmarks
        self.retried = 0  # deadlock victims run again

    def start(self, write: LoopWrite[T], action: str) -> asyncio.Task[T] | None:
        """Start `write` on the loop's connection if nothing else writes in this process and
        no other task's write is on it: a task of the running loop whose result is the
        write's (await it shielded: a caller cancelled leaves it to run to its end, as a call
        running on a worker does). `None`: go to a worker."""
        if not self._write_path.idle or os.getpid() != self._pid:
            return None
        with self._lock:
            if self._running is not None or self._closed:
                return None
            loop = asyncio.get_running_loop()
            self._running = (loop, threading.get_ident())
        try:
            task = loop.create_task(self._run(write, action))
            task.add_done_callback(self._ended)
        except BaseException:
            self._ended(None)
            raise
        return task

    async def _run(self, write: LoopWrite[T], action: str) -> T:
        """The write on the loop's connection; its result once committed, or the error its
        caller gets (see the module docstring); its latency counted (`store.metrics()`)."""
        counters, started = self._write_path.counters, time.perf_counter()
        try:
            return await self._run_once(write, action)
        finally:
            counters.write_call(time.perf_counter() - started)

    async def _run_once(self, write: LoopWrite[T], action: str) -> T:
        """`_run`, its latency left out."""
        retries = 0
        while True:
            self._check_open(action)  # also before a retry, which may connect anew
            self._sent = True  # `close` waits for it from now on
            try:
                connection = self._connection
                if connection is None:
                    connection = await driver.LoopConnection.connect(
                        self._engine, self._connect_args
                    )
                    self._connection = connection
                result = await write.run_on_loop(self._statements, connection)
            except BaseException as error:  # (cancelled: the loop is ending, it may commit)
                self._discard()
                retry_or_raise(action, error, retries)
                retries += 1
                self.retried += 1
                continue
            self.alone += 1
            self._write_path.counters.committed(1 if write.appends and result else 0)
            committed = self._write_path.after_commit
            if committed is not None:
                committed()
            return result

    def _ended(self, task: asyncio.Task[Any] | None) -> None:
        """The write is over: the connection is free (or, the store closed, closed)."""
        if task is not None and not task.cancelled():
            task.exception()  # retrieved: a caller cancelled meanwhile no longer awaits it
        with self._lock:
            self._running, self._sent = None, False
            self._idle.notify_all()
            closed = self._closed
        if closed:
            self._discard()

    def close(self) -> None:
        """Refuse later writes (`start` gives `None`, and the store's own check raises
        `StoreClosed`), wait for the one in progress (unless its loop runs in this thread, or
        stopped), and close the connection. In a child after `fork` the parent's connection is
        left alone."""
        with self._lock:
            self._closed = True
            while (running := self._running) is not None and running[0].is_running():
                if running[1] == threading.get_ident() or not self._sent:
                    # Its loop is this thread's, or its statement is not sent yet (refused
                    # then): it closes the connection as it ends.
                    break
                self._idle.wait(0.1)  # (a loop that stops meanwhile is not waited for)
            running = self._running
            busy = running is not None and running[0].is_running()
        if not busy:  # (a stopped loop runs nothing: its write, if it ever resumes, fails)
            self._discard()

    def _discard(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None and os.getpid() == self._pid:
            connection.discard()
