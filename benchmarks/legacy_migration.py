"""Time and peak memory of the in-place legacy body migration (0004_outcome_bodies).

For SQLite and PostgreSQL: a database at 0001_initial (the legacy era) is filled through raw SQL
with N legacy events (alternating legacy `turn_ended` and `error` bodies of about 300 bytes), then
a fresh child process runs `session-journal db upgrade` to head (every revision, the body rewrite
included). The child's peak RSS (from `wait4`) is reported for N = 20,000 and N = 200,000 and for
an empty log: memory is bounded when the peak does not grow with N. Seconds include the child's
start (about half a second). Usage: `legacy_migration.py [--quick] [--only sqlite|postgresql]`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import sqlalchemy as sa
from _databases import database

from session_journal import migrations

TURN = {
    "type": "turn_ended",
    "data": {
        "turn": {
            "command_id": "prompt-1",
            "accepted_ordinal": 1,
            "stop_reason": "end_turn",
            "error": None,
        }
    },
}
ERROR = {"type": "error", "data": {"command_id": "c-1", "message": "old diagnostic " + "x" * 220}}


def seed(url: str, events: int) -> None:
    migrations.upgrade(url, "0001_initial")
    engine = sa.create_engine(url)
    insert = sa.text(
        "INSERT INTO api_events (seq, session_id, recorded_at_ms, body) VALUES (:seq, 's', 1, :b)"
    )
    bodies = [json.dumps(TURN), json.dumps(ERROR)]
    with engine.begin() as connection:
        connection.execute(
            sa.text(
                "INSERT INTO sessions (session_id, project_id, state) VALUES ('s', 'p', 'running')"
            )
        )
        for first in range(1, events + 1, 10_000):
            rows = [
                {"seq": seq, "b": bodies[seq % 2]}
                for seq in range(first, min(first + 10_000, events + 1))
            ]
            connection.execute(insert, rows)
        connection.execute(sa.text("UPDATE event_sequences SET last_seq = :n"), {"n": events})
    engine.dispose()


def upgrade_in_child(url: str) -> tuple[float, float]:
    """Seconds and peak RSS (MiB) of a child process migrating `url` to head."""
    started = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-m", "session_journal", "--url", url, "db", "upgrade"],
        stdout=subprocess.DEVNULL,
    )
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"upgrade failed on {url}")
    return seconds, usage.ru_maxrss / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2,000 and 20,000 events")
    parser.add_argument("--only", choices=("sqlite", "postgresql"))
    args, _ = parser.parse_known_args()  # make bench passes every script the same BENCH_ARGS
    sizes = [0, 2_000, 20_000] if args.quick else [0, 20_000, 200_000]
    print(f"{'backend':<11}{'events':>9}{'seconds':>9}{'events/s':>11}{'peak RSS MiB':>14}")
    for backend in ("sqlite", "postgresql"):
        if args.only not in (None, backend):
            continue
        for size in sizes:
            with database(backend, "legacy") as url:
                seed(url, size)
                seconds, peak = upgrade_in_child(url)
            rate = f"{size / seconds:,.0f}" if size else "-"
            print(f"{backend:<11}{size:>9,}{seconds:>9.1f}{rate:>11}{peak:>14.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
