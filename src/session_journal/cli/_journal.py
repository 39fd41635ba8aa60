"""`session-journal journal stats|verify` and `session-journal search`."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

from ..errors import InvalidRecord, JournalDamaged
from ..journal.stats import EVENTS_FILE, SessionStats
from ..journal.verify import events_file, verify
from ..store import Store


def journal_command(command: str, path: str) -> int:
    """`session-journal journal stats|verify PATH`; the exit code."""
    if Path(path).is_dir() and not events_file(path).is_file():
        raise InvalidRecord(
            f"directory {path} has no {EVENTS_FILE} (looked for {events_file(path).absolute()})"
        )
    try:
        if command == "stats":
            print(_stats(path).model_dump_json())
            return 0
        lines, problems = verify(path)
    except OSError as error:
        raise InvalidRecord(f"cannot read {path}: {error.strerror or error}") from error
    for problem in problems:
        print(f"offset {problem.offset}: {problem.reason} ({problem.length} bytes)")
    print(f"{lines} lines, {len(problems)} bad")
    return 1 if problems else 0


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
