"""`session-journal`: a thin command line over the library.

Exit codes: 0 ok, 1 failure (one line on stderr, no traceback), 2 usage.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import sys
import threading
from collections.abc import Sequence

from . import migrations
from .config import StoreOptions, resolve_url
from .db import create_engine
from .demo import run_demo
from .errors import SessionJournalError
from .events import ApiEventFilter
from .journal.stats import SessionStats
from .journal.verify import events_file, verify
from .store import Store


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="session-journal", description="Durable sessions and their ordered event log."
    )
    parser.add_argument(
        "--url",
        help="database URL (default: $SESSION_JOURNAL_DATABASE_URL, else "
        "sqlite:///session-journal.db)",
    )
    commands = parser.add_subparsers(dest="command", required=True)

    db = commands.add_parser("db", help="schema migrations").add_subparsers(
        dest="db_command", required=True
    )
    upgrade = db.add_parser("upgrade", help="migrate to REV (default head)")
    upgrade.add_argument("revision", nargs="?", default="head")
    db.add_parser("current", help="print the database's revision")
    db.add_parser("check", help="print revision, levels and whether this code may use it")

    events = commands.add_parser("events", help="print events, one JSON object per line")
    events.add_argument(
        "--after",
        type=int,
        help="cursor: print events with seq > N (default 0; with --follow, the current frontier)",
    )
    events.add_argument("--session", help="only this session")
    events.add_argument("--workspace", help="only sessions of this workspace")
    events.add_argument("--limit", type=int, help="print at most N events (default all)")
    events.add_argument(
        "--follow", action="store_true", help="keep polling for new events until interrupted"
    )
    events.add_argument(
        "--interval",
        type=float,
        default=0.5,
        help="seconds between polls with --follow (default 0.5)",
    )

    commands.add_parser("demo", help="run a short scenario and print what a follower sees")

    journal = commands.add_parser("journal", help="session event files").add_subparsers(
        dest="journal_command", required=True
    )
    verify = journal.add_parser("verify", help="report torn or undecodable lines (exit 1 if any)")
    verify.add_argument("path", help="a session directory or its events.jsonl")
    stats = journal.add_parser("stats", help="print the session's stats (rebuilt if stale)")
    stats.add_argument("path", help="a session directory")

    search = commands.add_parser("search", help="full-text search of indexed journal events")
    search.add_argument("query")
    search.add_argument("--session", help="only this session")
    search.add_argument("--limit", type=int, default=20, help="at most N hits (default 20)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    args = _parser().parse_args(argv)
    url = resolve_url(args.url)
    try:
        if args.command == "db":
            return _db(url, args.db_command, getattr(args, "revision", "head"))
        if args.command == "events":
            return _events(url, args)
        if args.command == "journal":
            return _journal(args.journal_command, args.path)
        if args.command == "search":
            return _search(url, args)
        return _demo(url)
    except SessionJournalError as error:
        print(f"session-journal: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    except BrokenPipeError:
        # The reader went away (`events | head`): stop quietly, and keep Python from
        # complaining again when it flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _db(url: str, command: str, revision: str) -> int:
    if command == "upgrade":
        migrations.upgrade(url, revision)
        print(f"database at {_status(url).revision}")
        return 0
    found = _status(url)
    if command == "current":
        print(found.revision or "none (empty database)")
        return 0
    print(f"revision: {found.revision or 'none'}")
    print(f"schema_level: {found.schema_level}")
    print(f"minimum_compatible_level: {found.minimum_compatible_level}")
    print(f"code_schema_level: {migrations.SCHEMA_LEVEL}")
    print(f"verdict: {found.verdict}")
    return 0 if found.usable else 1


def _status(url: str) -> migrations.SchemaStatus:
    engine = create_engine(url, StoreOptions.from_env(), role="reader")
    try:
        return migrations.status(engine)
    finally:
        engine.dispose()


def _events(url: str, args: argparse.Namespace) -> int:
    event_filter = ApiEventFilter.model_construct(
        session_id=args.session, workspace_id=args.workspace
    )
    remaining = args.limit
    stop = threading.Event()
    if args.follow:
        # Ctrl-C ends the loop between polls, never in the middle of a query or a line.
        signal.signal(signal.SIGINT, lambda *_: stop.set())
    with Store.open(url) as store:
        cursor = args.after if args.after is not None or args.follow else 0
        while (remaining is None or remaining > 0) and not stop.is_set():
            page = store.events.load(
                event_filter, after_seq=cursor, limit=min(remaining or 1000, 1000)
            )
            for event in page.events:
                print(event.model_dump_json(), flush=args.follow)
            cursor = page.next_after_seq
            if remaining is not None:
                remaining -= len(page.events)
            if not page.events:
                if not args.follow:
                    break
                stop.wait(args.interval)
    return 0


def _journal(command: str, path: str) -> int:
    try:
        if command == "stats":
            events = events_file(path)
            if not events.is_file():
                raise SessionJournalError(f"no events file at {events}")
            print(SessionStats.load_or_rebuild(events.parent).model_dump_json())
            return 0
        lines, problems = verify(path)
    except OSError as error:
        raise SessionJournalError(f"cannot read {path}: {error.strerror or error}") from error
    for problem in problems:
        print(f"offset {problem.offset}: {problem.reason} ({problem.length} bytes)")
    print(f"{lines} lines, {len(problems)} bad")
    return 1 if problems else 0


def _search(url: str, args: argparse.Namespace) -> int:
    with Store.open(url) as store:
        for hit in store.index.search(args.query, session_id=args.session, limit=args.limit):
            print(json.dumps(dataclasses.asdict(hit), ensure_ascii=False))
    return 0


def _demo(url: str) -> int:
    with Store.open(url, upgrade=True) as store:
        events = run_demo(store, lambda line: print(f"# {line}"))
    print(f"# a client following the feed sees {len(events)} new events:")
    for event in events:
        print(event.model_dump_json())
    return 0
