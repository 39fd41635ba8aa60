"""The parent's side of the reliability scenarios: rounds, seeds, child processes, checks.

`make test` runs each scenario for a few rounds; `make reliability` sets
`SESSION_JOURNAL_RELIABILITY_ROUNDS` (and the larger Hypothesis profile) for longer loops.
`SESSION_JOURNAL_RELIABILITY_SEED` replays the random choices of a failed run (its seed is
printed with the failure).

Children come from a `forkserver` context whose server preloads `tests.reliability.children`:
the server is a fresh interpreter that never opened a connection, so a child forked from it
inherits no database handle (forking the test process would share its pool's sockets and SQLite
locks), and it starts in milliseconds instead of re-importing SQLAlchemy, Alembic and pydantic
as a `spawn` child does. Every child is a daemon and is killed and joined when its `Workers`
block ends, whether the test passed or not.
"""

from __future__ import annotations

import multiprocessing
import os
import random
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from multiprocessing.context import ForkServerContext, ForkServerProcess
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from tests.backends import database_url
from tests.reliability import children

ROUNDS_ENV = "SESSION_JOURNAL_RELIABILITY_ROUNDS"
SEED_ENV = "SESSION_JOURNAL_RELIABILITY_SEED"
# Generous bounds that only keep a broken run from hanging; a healthy call takes milliseconds.
CALL_TIMEOUT_S = 120.0
JOIN_TIMEOUT_S = 10.0

CONTEXT: ForkServerContext = multiprocessing.get_context("forkserver")
CONTEXT.set_forkserver_preload(["tests.reliability.children"])


def rounds(short: int) -> int:
    """How many rounds a loop runs: `short` under `make test`, the variable's value if set."""
    value = os.environ.get(ROUNDS_ENV)
    return max(int(value), 1) if value else short


def long_run() -> bool:
    return bool(os.environ.get(ROUNDS_ENV))


settings.register_profile(
    "reliability-short",
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
settings.register_profile(
    "reliability-long",
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
HYPOTHESIS = settings.get_profile("reliability-long" if long_run() else "reliability-short")

# Hostile text for Hypothesis: any character, lone surrogates (category Cs) and NUL included.
any_text = st.text(st.characters(codec=None, categories=None), max_size=40)


def seeded_random(name: str) -> random.Random:
    """A random source for one test; its seed is printed (shown when the test fails)."""
    seed = int(os.environ.get(SEED_ENV) or random.SystemRandom().randrange(2**32))
    print(f"{SEED_ENV}={seed}")
    return random.Random(f"{seed}:{name}")


class ChildFailed(AssertionError):
    """A child raised, died or stopped answering."""


class Worker:
    """One child process serving calls (`children.serve`)."""

    def __init__(self, name: str, url: str, barrier: Barrier | None) -> None:
        self.name = name
        self._connection, child_end = CONTEXT.Pipe()
        self.process: ForkServerProcess = CONTEXT.Process(
            target=children.serve, args=(url, child_end, barrier), name=name, daemon=True
        )
        self.process.start()
        child_end.close()

    def send(self, function: Callable[..., Any], *args: Any) -> None:
        """Start `function(child, *args)` in the child; `receive()` gets its result."""
        self._connection.send((function, args))

    def receive(self, timeout: float = CALL_TIMEOUT_S) -> Any:
        deadline = time.monotonic() + timeout
        while not self._connection.poll(0.05):
            if not self.process.is_alive() and not self._connection.poll(0):
                raise ChildFailed(f"{self.name} died (exit code {self.process.exitcode})")
            if time.monotonic() > deadline:
                raise ChildFailed(f"{self.name} did not answer within {timeout:.0f} s")
        try:
            status, value = self._connection.recv()
        except EOFError:
            raise ChildFailed(f"{self.name} died (exit code {self.process.exitcode})") from None
        if status == "error":
            raise ChildFailed(f"{self.name} raised:\n{value}")
        return value

    def answered(self) -> bool:
        """Whether the call it was sent has ended (its result or error waits to be received)."""
        return self._connection.poll(0)

    def call(self, function: Callable[..., Any], *args: Any) -> Any:
        self.send(function, *args)
        return self.receive()

    def kill(self) -> None:
        """SIGKILL: no cleanup, no rollback, no close; the kernel drops its files and sockets.
        `ChildFailed` if the call it was running had already failed."""
        self.process.kill()
        self.process.join(JOIN_TIMEOUT_S)
        assert self.process.exitcode == -9, f"{self.name} exit code {self.process.exitcode}"
        try:
            if self._connection.poll(0):
                status, value = self._connection.recv()
                if status == "error":
                    raise ChildFailed(f"{self.name} raised before it was killed:\n{value}")
        except (EOFError, ConnectionResetError):
            pass  # the pipe ended, or was reset, with the killed child: it sent nothing more
        finally:
            self._connection.close()

    def stop(self) -> None:
        """End the child's loop (its store closes) and wait for it."""
        if self.process.is_alive():
            with suppress(OSError):  # it may have ended already
                self._connection.send(None)
            self.process.join(JOIN_TIMEOUT_S)
        assert self.process.exitcode == 0, f"{self.name} exit code {self.process.exitcode}"
        self._connection.close()


class Workers:
    """Starts children and guarantees that none outlives the test."""

    def __init__(self) -> None:
        self._started: list[Worker] = []

    def start(self, name: str, url: str, barrier: Barrier | None = None) -> Worker:
        worker = Worker(name, url, barrier)
        self._started.append(worker)
        return worker

    def barrier(self, parties: int) -> Barrier:
        return CONTEXT.Barrier(parties)

    def close(self) -> None:
        for worker in self._started:
            if worker.process.is_alive():
                worker.process.kill()
        for worker in self._started:
            worker.process.join(JOIN_TIMEOUT_S)


def read_acks(path: Path) -> list[tuple[int, str]]:
    """The acknowledged `(seq, message)` pairs a writer wrote to its ack file, in order."""
    if not path.exists():
        return []
    acks = []
    for line in path.read_text().splitlines(keepends=True):
        assert line.endswith("\n"), f"torn ack line {line!r}: acks are written whole"
        seq, message = line.rstrip("\n").split(" ", 1)
        acks.append((int(seq), message))
    return acks


def wait_for(condition: Callable[[], bool], what: str, timeout: float = CALL_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.005)


def sqlite_checks(url: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    """`PRAGMA integrity_check` rows and `PRAGMA foreign_key_check` violations of a SQLite file
    (read with the plain driver, as another program would)."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as connection:
            integrity = [row[0] for row in connection.exec_driver_sql("PRAGMA integrity_check")]
            broken = [tuple(row) for row in connection.exec_driver_sql("PRAGMA foreign_key_check")]
    finally:
        engine.dispose()
    return integrity, broken


def assert_sound(backend: str, url: str) -> None:
    """On SQLite: the file passes `integrity_check` and `foreign_key_check`."""
    if backend == "sqlite":
        assert sqlite_checks(url) == (["ok"], [])


@contextmanager
def fresh_database(backend: str, directory: Path) -> Iterator[str]:
    """Another empty database on `backend`: a file in `directory`, or a new schema."""
    directory.mkdir(parents=True, exist_ok=True)
    with database_url(backend, directory) as url:
        yield url


def named_url(url: str, label: str) -> tuple[str, str]:
    """`url` for a child that will be killed, and the name its PostgreSQL connections carry
    (`application_name`), so that `wait_disconnected` can tell when the server has ended them."""
    name = f"sj-{uuid.uuid4().hex[:8]}-{label}"[:60]
    parsed = sa.make_url(url)
    if parsed.get_backend_name() != "postgresql":
        return url, name
    named = parsed.update_query_dict({"application_name": name})
    return named.render_as_string(hide_password=False), name


def wait_disconnected(url: str, name: str) -> None:
    """On PostgreSQL, wait until no server process serves a connection named `name`: a killed
    client's transaction is over (rolled back, or committed if its COMMIT was already sent)."""
    if sa.make_url(url).get_backend_name() != "postgresql":
        return
    engine = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    query = sa.text("SELECT count(*) FROM pg_stat_activity WHERE application_name = :name")
    try:
        with engine.connect() as connection:
            wait_for(
                lambda: connection.execute(query, {"name": name}).scalar_one() == 0,
                f"the server to end the connections of {name}",
            )
    finally:
        engine.dispose()
