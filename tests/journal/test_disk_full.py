"""The writer against real disk failures, in child processes: a file size limit
(RLIMIT_FSIZE: short writes, then EFBIG) and a full 64 KiB tmpfs in a private mount namespace
(short writes, then ENOSPC). Each child prints one JSON result that the test asserts on.

These fail if the writer does not degrade (the child dies with a traceback or reports
`persisted` after the failure), leaves a half line (`valid` false), or loses or doubles a line
on recovery (`seqs` differ).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from session_journal.journal import JournalEnvelope
from tests.journal._disk import REPO_ROOT, make_envelope


def line_bytes(envelope: JournalEnvelope) -> bytes:
    """The line the writer writes for an envelope (compact JSON, no redactor)."""
    text = json.dumps(envelope.model_dump(mode="json"), ensure_ascii=False, separators=(",", ":"))
    return (text + "\n").encode()


# argv: repo root, session dir, number of events. Events 0-1 are written with no limit; then
# the soft limit is set 4 KiB above the file size, so the ~1.7 KB lines 2-3 fit, line 4 is cut
# short and fails with EFBIG, and 4..N-1 wait in the buffer until the limit is raised again.
RLIMIT_CHILD = r"""
import errno, json, resource, signal, sys
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from session_journal.journal import JournalWriter
from tests.journal._disk import make_envelope, report as describe

session, count = Path(sys.argv[2]), int(sys.argv[3])
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # get EFBIG rather than being killed
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
report = {}
writer = JournalWriter(session, recovery_interval=60)
for seq in range(2):
    writer.send(make_envelope(seq, 100))
report["before"] = writer.flush().persisted
limit = writer.events_path.stat().st_size + 4096
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
for seq in range(2, count):
    writer.send(make_envelope(seq, 1500))
full = writer.flush()
report["full"] = describe(full, writer.events_path) | {"limit": limit}
resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))
recovered = writer.flush()
writer.close()
report["recovered"] = describe(recovered, writer.events_path)
report["efbig"] = errno.EFBIG
print(json.dumps(report))
"""

# argv: repo root, the tmpfs mount point, number of events. Runs inside `unshare -Urm` after
# the 64 KiB tmpfs is mounted: two small events, then a junk file fills the tmpfs, then the
# ~6 KB events fail (a short write into the last page, then ENOSPC); the junk is deleted and a
# flush persists them.
TMPFS_CHILD = r"""
import errno, json, os, sys
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from session_journal.journal import JournalWriter
from tests.journal._disk import make_envelope, report as describe

mount, count = Path(sys.argv[2]), int(sys.argv[3])
report = {"mounted": os.path.ismount(mount)}
writer = JournalWriter(mount / "session", recovery_interval=60)
for seq in range(2):
    writer.send(make_envelope(seq, 100))
report["before"] = writer.flush().persisted
junk = mount / "junk"
fd = os.open(junk, os.O_WRONLY | os.O_CREAT, 0o644)
filled, block = 0, b"\0" * 4096
while True:
    try:
        written = os.write(fd, block)
    except OSError as error:
        report["junk_error"] = error.errno
        break
    filled += written
    if written == 0:
        break
os.close(fd)
report["junk_bytes"] = filled
for seq in range(2, count):
    writer.send(make_envelope(seq, 6000))
full = writer.flush()
report["full"] = describe(full, writer.events_path)
junk.unlink()
recovered = writer.flush()
writer.close()
report["recovered"] = describe(recovered, writer.events_path)
report["enospc"] = errno.ENOSPC
print(json.dumps(report))
"""


def run_child(command: list[str]) -> dict[str, Any]:
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"child failed ({done.returncode}):\n{done.stderr}"
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def check_report(report: dict[str, Any], count: int, errno_: int) -> None:
    assert report["before"] is True
    full = report["full"]
    # Nothing half-written while the disk refuses: whole lines, a prefix of what was sent.
    assert full["valid"] and full["ends_with_newline"], full
    kept = len(full["seqs"])
    assert full["seqs"] == list(range(kept)), full
    assert 2 <= kept < count, full
    assert full["persisted"] is False and full["degraded"] is True, full
    assert full["buffered"] == count - kept and full["dropped"] == 0, full
    assert f"errno {errno_}" in full["last_error"], full
    recovered = report["recovered"]
    assert recovered["persisted"] is True and recovered["degraded"] is False, recovered
    assert recovered["buffered"] == 0 and recovered["dropped"] == 0, recovered
    assert recovered["valid"] and recovered["ends_with_newline"], recovered
    assert recovered["seqs"] == list(range(count)), recovered  # in order, no duplicates


def test_writes_beyond_the_file_size_limit_degrade_and_recover(tmp_path: Path) -> None:
    count = 10
    report = run_child(
        [
            sys.executable,
            "-c",
            RLIMIT_CHILD,
            str(REPO_ROOT),
            str(tmp_path / "session"),
            str(count),
        ]
    )
    check_report(report, count, report["efbig"])
    # Exactly the lines that fit under the limit were kept: the next one would have crossed it.
    full = report["full"]
    sizes = [len(line_bytes(make_envelope(seq, 100 if seq < 2 else 1500))) for seq in range(count)]
    assert full["size"] == sum(sizes[: len(full["seqs"])]) <= full["limit"]
    assert full["size"] + sizes[len(full["seqs"])] > full["limit"]


def _tmpfs_problem(mount: Path) -> str | None:
    """Why a private tmpfs cannot be mounted here, found by trying; None when it can."""
    if shutil.which("unshare") is None:
        return "the `unshare` command is missing"
    try:
        probe = subprocess.run(
            ["unshare", "-Urm", "sh", "-c", 'mount -t tmpfs -o size=64k tmpfs "$1"', "sh", mount],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"`unshare -Urm` cannot run: {error}"
    if probe.returncode != 0:
        return f"cannot mount a tmpfs in a private user+mount namespace: {probe.stderr.strip()}"
    return None


def test_a_full_tmpfs_degrades_and_recovers_when_space_is_freed(tmp_path: Path) -> None:
    mount = tmp_path / "tmpfs"
    mount.mkdir()
    problem = _tmpfs_problem(mount)
    if problem is not None:
        pytest.skip(problem)
    count = 7
    script = 'mount -t tmpfs -o size=64k tmpfs "$1" && exec "$2" -c "$3" "$4" "$1" "$5"'
    report = run_child(
        [
            "unshare",
            "-Urm",
            "sh",
            "-c",
            script,
            "sh",
            str(mount),
            sys.executable,
            TMPFS_CHILD,
            str(REPO_ROOT),
            str(count),
        ]
    )
    assert report["mounted"] is True
    assert report["junk_error"] == report["enospc"]
    assert report["junk_bytes"] > 32 * 1024  # the tmpfs really was nearly empty, then full
    check_report(report, count, report["enospc"])
    assert report["full"]["seqs"] == [0, 1]
    assert not os.listdir(mount)  # the tmpfs lived only in the child's namespace
