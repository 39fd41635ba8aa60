"""The writer killed with SIGKILL mid-stream, and the torn-tail repair on the next open.

The crash rounds fork their writer processes from one "zygote" process that imported
`session_journal` once (a fresh interpreter per round would spend most of the time importing).
Each round's child writes ~20 KB events with increasing seqs in a loop until it is killed after
a random delay; then a writer opened in this process repairs a torn tail, and the file must be
whole JSON lines with seqs 0, 1, 2, ... and stats that match it.

These fail if a torn tail is not cut off (a line that is not JSON, or no final newline, or stats
of a size the file does not have), or if the repair cuts too much or too little (the direct test
checks the exact lines and the `.torn` content).
"""

from __future__ import annotations

import json
import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from session_journal.journal import JournalWriter, SessionStats
from tests.journal._disk import REPO_ROOT, expected_json, make_envelope, read_events

ROUNDS = 20
EVENT_TEXT = 20_000

# Reads "go <session dir> <first seq> <text size> <tear after>" lines on stdin; for each, forks
# a child that writes events from that seq on (printing "ready <pid>" once its writer is open)
# and prints "exit <wait status>" when the child is gone. With <tear after> > 0 the child's
# write of that many-th line puts only a random part of it in the file and then hangs, so the
# SIGKILL surely lands mid-line (a real kill lands inside write() only now and then); it says
# "torn" once that part is written, and the parent waits for it before the kill. Output
# goes through os.write: nothing buffered is duplicated by fork.
ZYGOTE = r"""
import os, random, sys, time
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from session_journal.journal import JournalWriter
from tests.journal._disk import make_envelope

def tear_at(path, count):
    real_write, target, writes = os.write, os.stat(path), [0]
    def write(fd, data):
        stat = os.fstat(fd)
        if (stat.st_dev, stat.st_ino) != (target.st_dev, target.st_ino):
            return real_write(fd, data)
        writes[0] += 1
        if writes[0] < count:
            return real_write(fd, data)
        real_write(fd, bytes(data)[: random.randrange(1, len(data))])
        real_write(1, b"torn\n")  # tell the parent: the kill may come now
        time.sleep(60)  # "crashed" mid-line: wait for the SIGKILL
    os.write = write

def child(session, seq, size, tear_after):
    writer = JournalWriter(session, recovery_interval=60)
    os.write(1, f"ready {os.getpid()}\n".encode())
    if tear_after:
        tear_at(writer.events_path, tear_after)
    deadline = time.monotonic() + 30  # never outlive a test that went wrong
    while time.monotonic() < deadline:
        for _ in range(2):
            writer.send(make_envelope(seq, size))
            seq += 1
        writer.flush()
        time.sleep(0.002)  # bounds the file's growth (each round re-reads all of it)

os.write(1, b"zygote\n")
for command in sys.stdin:
    _, session, seq, size, tear_after = command.split()
    pid = os.fork()
    if pid == 0:
        try:
            child(Path(session), int(seq), int(size), int(tear_after))
        finally:
            os._exit(3)
    _, status = os.waitpid(pid, 0)
    os.write(1, f"exit {status}\n".encode())
"""


class Zygote:
    """The zygote process and a thread that queues its output lines."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", ZYGOTE, str(REPO_ROOT)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        assert self.next_line() == "zygote"

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.strip())
        self.lines.put("eof")

    def next_line(self) -> str:
        try:
            return self.lines.get(timeout=30)
        except queue.Empty:
            raise AssertionError("the zygote or its child did not answer in 30 s") from None

    def start(self, session: Path, seq: int, tear_after: int) -> int:
        assert self.process.stdin is not None
        self.process.stdin.write(f"go {session} {seq} {EVENT_TEXT} {tear_after}\n")
        self.process.stdin.flush()
        word, _, pid = self.next_line().partition(" ")
        assert word == "ready", f"the child did not start: {word} {pid}"
        return int(pid)

    def wait_status(self) -> int:
        word, _, status = self.next_line().partition(" ")
        assert word == "exit", word
        return int(status)

    def stop(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.reader.join(10)  # it reads to the end of the pipe, which the exit closed
        if self.process.stdout is not None:
            self.process.stdout.close()


def check_session(session: Path) -> list[int]:
    """Whole JSON lines, seqs 0..n-1, a final newline, stats that match; the seqs."""
    events = session / "events.jsonl"
    seqs = [value["seq"] for value in read_events(events)]
    assert seqs == list(range(len(seqs)))
    stats = SessionStats.load_or_rebuild(session)
    assert stats == SessionStats.scan(events)
    assert stats.event_bytes == events.stat().st_size
    assert stats.event_count == len(seqs)
    return seqs


@pytest.mark.slow
def test_sigkill_mid_stream_leaves_whole_lines_after_the_next_open(tmp_path: Path) -> None:
    session = tmp_path / "session"
    rng = random.Random()
    zygote = Zygote()
    added: list[int] = []
    try:
        next_seq = 0
        for round_ in range(ROUNDS):
            tear_after = rng.randint(1, 4) if round_ % 2 else 0
            pid = zygote.start(session, next_seq, tear_after)
            if tear_after:  # however slow the machine, the kill lands after the torn write
                assert zygote.next_line() == "torn"
            time.sleep(rng.uniform(0.05, 0.4))
            os.kill(pid, signal.SIGKILL)
            status = zygote.wait_status()
            assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, status

            JournalWriter(session).close()  # repairs a torn tail
            seqs = check_session(session)
            added.append(len(seqs) - next_seq)
            next_seq = len(seqs)
    finally:
        zygote.stop()
    # The rounds really wrote (the kill did not always land before the first line).
    assert sum(1 for count in added if count > 0) >= ROUNDS // 2, added
    # One fragment per tearing round at least (and any a plain kill happened to tear), each the
    # cut-off beginning of an event line.
    fragments = (session / "events.jsonl.torn").read_bytes().splitlines()
    assert len(fragments) >= ROUNDS // 2
    head = b'{"seq":'
    for fragment in fragments:
        assert fragment[: len(head)] == head[: len(fragment)], fragment[:80]


def test_a_torn_tail_is_moved_aside_and_not_glued_to_the_next_line(tmp_path: Path) -> None:
    session = tmp_path / "session"
    session.mkdir()
    envelopes = [make_envelope(seq, 200) for seq in range(3)]
    good = b"".join(
        (json.dumps(value, separators=(",", ":")) + "\n").encode()
        for value in expected_json(envelopes[:2])
    )
    fragment = b'{"seq":2,"ts":"2026-11-29T12:00:00.002Z","type":"user_msg","turn_id":"tu'
    (session / "events.jsonl").write_bytes(good + fragment)
    (session / "stats.json").write_text("{}")  # stale stats must not be trusted

    with JournalWriter(session) as writer:
        writer.send(envelopes[2])

    assert read_events(session / "events.jsonl") == expected_json(envelopes)
    assert (session / "events.jsonl").read_bytes().startswith(good)
    assert (session / "events.jsonl.torn").read_bytes() == fragment + b"\n"
    assert check_session(session) == [0, 1, 2]


def test_a_file_that_is_only_a_fragment_is_emptied(tmp_path: Path) -> None:
    session = tmp_path / "session"
    session.mkdir()
    fragment = b'{"seq":0,"ts":"2026-11-29T12:00:00Z","type":"flow_st'
    (session / "events.jsonl").write_bytes(fragment)
    envelope = make_envelope(0, 10)

    with JournalWriter(session) as writer:
        writer.send(envelope)

    assert read_events(session / "events.jsonl") == expected_json([envelope])
    assert (session / "events.jsonl.torn").read_bytes() == fragment + b"\n"
    assert check_session(session) == [0]
