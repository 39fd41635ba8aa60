"""`session-journal journal stats|verify` and `session-journal search`."""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from ..errors import InvalidRecord, JournalDamaged
from ..journal.search import MAX_SEARCH_LIMIT
from ..journal.stats import EVENTS_FILE, SessionStats
from ..journal.verify import events_file, verify
from ..store import Store
from ._types import Commands, bounded_int

T = TypeVar("T")


def add_journal_commands(commands: Commands) -> None:
    """`journal verify` and `journal stats`."""
    journal = commands.add_parser("journal", help="session event files").add_subparsers(
        dest="journal_command", required=True
    )
    verify_command = journal.add_parser(
        "verify", help="report torn or undecodable lines (exit 1 if any)"
    )
    verify_command.add_argument("path", help="a session directory or its events.jsonl")
    verify_command.set_defaults(handler=_verify)
    stats = journal.add_parser("stats", help="print the session's stats (rebuilt if stale)")
    stats.add_argument("path", help="a session directory")
    stats.set_defaults(handler=_print_stats)


def _verify(url: str, args: argparse.Namespace) -> int:
    """`session-journal journal verify PATH`: 1 if any line is bad."""
    lines, problems = _read(args.path, verify)
    for problem in problems:
        print(f"offset {problem.offset}: {problem.reason} ({problem.length} bytes)")
    print(f"{lines} lines, {len(problems)} bad")
    return 1 if problems else 0


def _print_stats(url: str, args: argparse.Namespace) -> int:
    """`session-journal journal stats PATH`."""
    print(_read(args.path, _stats).model_dump_json())
    return 0


def _read(path: str, read: Callable[[str], T]) -> T:
    """`read(path)`, its `OSError` an `InvalidRecord`; a directory without an events file is
    refused, naming the file looked for."""
    if Path(path).is_dir() and not events_file(path).is_file():
        raise InvalidRecord(
            f"directory {path} has no {EVENTS_FILE} (looked for {events_file(path).absolute()})"
        )
    try:
        return read(path)
    except OSError as error:
        raise InvalidRecord(f"cannot read {path}: {error.strerror or error}") from error


def _stats(path: str) -> SessionStats:
    """The stats of the events file at `path` (the file, or a directory's `events.jsonl`), if
    every line of it decodes: a session's `events.jsonl` from its `stats.json` when current
    (else rebuilt and stored), a file of another name scanned, nothing stored."""
    if not Path(path).exists():
        raise InvalidRecord(f"no such file or directory: {path}")
    events = events_file(path)
    if not events.is_file():
        raise InvalidRecord(f"no events file at {events}")
    lines, problems = verify(events)
    if problems:
        raise JournalDamaged(
            f"{events}: {len(problems)} of {lines} lines are torn or undecodable, so no stats "
            f"(nothing stored); `session-journal journal verify {path}` lists them"
        )
    if events.name == EVENTS_FILE:
        return SessionStats.load_or_rebuild(events.parent)
    return SessionStats.scan(events)


def add_search_command(commands: Commands) -> None:
    """`search`."""
    search = commands.add_parser("search", help="full-text search of indexed journal events")
    search.add_argument("query")
    search.add_argument("--session", help="only this session")
    search.add_argument(
        "--limit",
        type=bounded_int(MAX_SEARCH_LIMIT),
        default=20,
        help=f"at most N hits, 1 to {MAX_SEARCH_LIMIT} (default 20)",
    )
    search.set_defaults(handler=search_command)


def search_command(url: str, args: argparse.Namespace) -> int:
    # Python decodes argv bytes that are not UTF-8 to lone surrogates (U+DC80-U+DCFF), which
    # the index refuses; name the byte the user typed rather than the surrogate.
    """`session-journal search`: print the project index's hits; the exit code."""
    for position, char in enumerate(args.query):
        if "\udc80" <= char <= "\udcff":
            raise InvalidRecord(
                f"search query is not valid UTF-8: byte 0x{ord(char) - 0xDC00:02x} at "
                f"position {position}"
            )
    with Store.open(url) as store:
        for hit in store.index.search(args.query, session_id=args.session, limit=args.limit):
            print(json.dumps(dataclasses.asdict(hit), ensure_ascii=False))
    return 0
