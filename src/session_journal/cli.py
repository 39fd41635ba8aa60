"""`session-journal`: a thin command line over the library.

Exit codes: 0 ok, 1 failure (one line on stderr, no traceback), 2 usage.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.metadata
import json
import math
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType

import sqlalchemy as sa

from . import maintenance, migrations
from .api_events import EVENT_TYPES, ApiEventFilter
from .clock import now_ms
from .config import StoreOptions, resolve_url
from .db import check_url, require_database
from .demo import DEMO_SESSIONS, run_demo
from .errors import DemoRefused, InvalidRecord, JournalDamaged, PruneRefused, SessionJournalError
from .journal.search import MAX_SEARCH_LIMIT
from .journal.stats import EVENTS_FILE, SessionStats
from .journal.verify import events_file, verify
from .repositories.events import PRUNED_LEVEL
from .services.events import MAX_PAGE
from .services.sessions import MAX_REMOVED, check_ended
from .store import Store

MIN_INTERVAL_S = 0.01
"""The shortest `events --follow --interval`: 10 ms (shorter is a busy loop on the database)."""

MAX_INTERVAL_S = 3600.0
"""The longest `events --follow --interval`: one hour."""

MAX_EVENTS_LIMIT = 1_000_000_000
"""The largest `events --limit` (the events are read in pages of `MAX_PAGE`)."""

_WAKE_S = 0.1  # how often a waiting follower looks whether Ctrl-C was pressed


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="session-journal", description="Durable sessions and their ordered event log."
    )
    parser.add_argument(
        "--url",
        help="database URL (default: $SESSION_JOURNAL_DATABASE_URL, else "
        "sqlite:///session-journal.db)",
    )
    parser.add_argument(
        "--version", action="version", version=f"session-journal {_installed_version()}"
    )
    commands = parser.add_subparsers(dest="command", required=True)

    db = commands.add_parser("db", help="schema migrations").add_subparsers(
        dest="db_command", required=True
    )
    upgrade = db.add_parser("upgrade", help="migrate to REV (default head)")
    upgrade.add_argument("revision", nargs="?", default="head", metavar="[FROM:]REV")
    upgrade.add_argument(
        "--sql",
        action="store_true",
        help="print the SQL that migrates from FROM (default: the database's revision) to REV, "
        "as one transaction, instead of running it; the database is not changed",
    )
    downgrade = db.add_parser(
        "downgrade", help="migrate down to REV (a revision, -N steps back, or base)"
    )
    downgrade.add_argument("revision", metavar="REV")
    downgrade.add_argument(
        "--allow-data-loss",
        action="store_true",
        help="downgrade even if it loses data the database holds (refused otherwise)",
    )
    db.add_parser("history", help="list the revisions, oldest first, the database's marked *")
    db.add_parser("current", help="print the database's revision")
    db.add_parser("check", help="print revision, levels and whether this code may use it")
    prune = db.add_parser(
        "prune", help="delete a prefix of the event log (see the README, Retention)"
    )
    target = prune.add_mutually_exclusive_group(required=True)
    target.add_argument(
        "--through-seq",
        type=_bounded_int(2**63 - 1, minimum=0),
        metavar="N",
        help="delete the events with seq <= N (at most the frontier)",
    )
    target.add_argument(
        "--older-than",
        type=_duration,
        metavar="DURATION",
        help="delete the longest prefix of events all recorded more than DURATION ago "
        "(500ms, 30s, 15m, 12h, 30d, 2w)",
    )
    prune.add_argument(
        "--dry-run",
        action="store_true",
        help="print what would go and any level change; delete nothing (needs no --allow-*)",
    )
    prune.add_argument(
        "--allow-level-change",
        action="store_true",
        help="prune even if it raises minimum_compatible_level (the first prune raises it to "
        f"{PRUNED_LEVEL}: older controllers then refuse the database)",
    )
    prune.add_argument(
        "--allow-empty-log",
        action="store_true",
        help="prune even if it deletes every retained event",
    )
    db.add_parser(
        "stats", help="print sessions, events, pruned_through, the frontier and the size on disk"
    )
    db.add_parser(
        "vacuum",
        help="give back the space of deleted rows (SQLite: VACUUM; PostgreSQL: VACUUM ANALYZE)",
    )

    events = commands.add_parser("events", help="print events, one JSON object per line")
    events.add_argument(
        "--after",
        type=int,
        help="cursor: print events with seq > N (default 0; with --follow, the current frontier)",
    )
    events.add_argument("--session", help="only this session")
    events.add_argument("--workspace", help="only sessions of this workspace")
    events.add_argument(
        "--type",
        action="append",
        dest="types",
        metavar="TYPE",
        help=f"only events of this body type (repeatable: any of them): {', '.join(EVENT_TYPES)}",
    )
    events.add_argument(
        "--limit",
        type=_bounded_int(MAX_EVENTS_LIMIT),
        help=f"print at most N events, 1 to {MAX_EVENTS_LIMIT} (default all)",
    )
    events.add_argument(
        "--follow",
        action="store_true",
        help="keep printing events as they commit until interrupted (Ctrl-C exits 0)",
    )
    events.add_argument(
        "--interval",
        type=_interval,
        default=0.5,
        help="with --follow: the longest time between two reads of the log when no commit "
        f"woke the follower (a safety net), {MIN_INTERVAL_S:g} to {MAX_INTERVAL_S:g} seconds "
        "(default 0.5); events are printed as soon as they commit",
    )

    demo = commands.add_parser("demo", help="run a short scenario and print what a follower sees")
    demo.add_argument(
        "--into-existing",
        action="store_true",
        help="run it even if the database holds sessions the demo did not create",
    )

    journal = commands.add_parser("journal", help="session event files").add_subparsers(
        dest="journal_command", required=True
    )
    verify = journal.add_parser("verify", help="report torn or undecodable lines (exit 1 if any)")
    verify.add_argument("path", help="a session directory or its events.jsonl")
    stats = journal.add_parser("stats", help="print the session's stats (rebuilt if stale)")
    stats.add_argument("path", help="a session directory")

    sessions = commands.add_parser("sessions", help="sessions").add_subparsers(
        dest="sessions_command", required=True
    )
    remove = sessions.add_parser(
        "remove-ended",
        help="remove ended sessions (closed, error) with their events and everything else",
    )
    remove.add_argument("ids", nargs="*", metavar="ID", help="the sessions to remove")
    remove.add_argument(
        "--ended-before",
        type=_duration,
        metavar="DURATION",
        help="instead of IDs: every ended session last saved more than DURATION ago (30d, 12h)",
    )
    remove.add_argument(
        "--sessions-dir",
        metavar="DIR",
        help="also delete DIR/<id>, each removed session's directory, after the commit",
    )
    remove.add_argument(
        "--dry-run", action="store_true", help="print how many would go; remove nothing"
    )

    search = commands.add_parser("search", help="full-text search of indexed journal events")
    search.add_argument("query")
    search.add_argument("--session", help="only this session")
    search.add_argument(
        "--limit",
        type=_bounded_int(MAX_SEARCH_LIMIT),
        default=20,
        help=f"at most N hits, 1 to {MAX_SEARCH_LIMIT} (default 20)",
    )
    return parser


def _interval(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    # `not a <= x <= b` is also true for NaN, which compares false to everything.
    if not MIN_INTERVAL_S <= seconds <= MAX_INTERVAL_S:
        raise argparse.ArgumentTypeError(
            f"must be a number of seconds from {MIN_INTERVAL_S:g} to {MAX_INTERVAL_S:g}, "
            f"got {text!r}"
        )
    return seconds


def _duration(text: str) -> int:
    """`--older-than`: a duration in milliseconds (`30d`, `12h`, ...)."""
    try:
        return maintenance.parse_duration_ms(text)
    except SessionJournalError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _bounded_int(maximum: int, *, minimum: int = 1) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = minimum - 1
        if not minimum <= value <= maximum:
            raise argparse.ArgumentTypeError(
                f"must be an integer from {minimum} to {maximum}, got {text!r}"
            )
        return value

    return parse


def _installed_version() -> str:
    try:
        return importlib.metadata.version("session-journal")
    except importlib.metadata.PackageNotFoundError:  # run from a checkout not installed
        return "(not installed)"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "sessions" and bool(args.ids) == (args.ended_before is not None):
        parser.error("sessions remove-ended: give session IDs or --ended-before, one of the two")
    try:
        url = check_url(resolve_url(args.url))
        if args.command == "db":
            return _db(url, args)
        if args.command == "events":
            return _events(url, args)
        if args.command == "journal":
            return _journal(args.journal_command, args.path)
        if args.command == "search":
            return _search(url, args)
        if args.command == "sessions":
            return _remove_ended(url, args)
        return _demo(url, into_existing=args.into_existing)
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


def _db(url: str, args: argparse.Namespace) -> int:
    command = args.db_command
    if command == "upgrade" and args.sql:
        # Rendered whole before anything is printed: a refusal prints nothing on stdout. Only
        # SQL goes there (the database is named in a comment), so it can be piped to psql.
        sql = migrations.upgrade_sql(url, args.revision)
        sys.stdout.write(f"-- session-journal db upgrade --sql for {shown_url(url)}\n{sql}")
        return 0
    if command == "upgrade":
        migrations.upgrade(url, args.revision)
        print(f"database {shown_url(url)} at {_status(url).revision}")
        return 0
    if command == "downgrade":
        lost = migrations.downgrade(url, args.revision, allow_data_loss=args.allow_data_loss)
        for loss in lost:
            print(f"lost {loss}")
        print(f"database {shown_url(url)} at {_status(url).revision or 'base (no schema)'}")
        return 0
    if command == "prune":
        return _prune(url, args)
    if command == "stats":
        _print_stats(maintenance.stats(url))
        return 0
    if command == "vacuum":
        done = maintenance.vacuum(url)
        print(
            f"vacuumed {shown_url(url)}: {done.before_bytes} bytes before, {done.after_bytes} "
            f"after, {done.freed_bytes} freed"
        )
        return 0
    found = _status(url)
    if command == "history":
        _history(found.revision)
        return 0
    if command == "current":
        print(found.revision or "none (empty database)")
        return 0
    print(f"revision: {found.revision or 'none'}")
    print(f"version_table: {found.version_table}")
    print(f"schema_level: {found.schema_level}")
    print(f"minimum_compatible_level: {found.minimum_compatible_level}")
    print(f"code_schema_level: {migrations.SCHEMA_LEVEL}")
    print(f"verdict: {found.verdict}")
    return 0 if found.usable else 1


def _prune(url: str, args: argparse.Namespace) -> int:
    """`db prune`: what would go (`--dry-run`), or prune and say what went."""
    if args.older_than is not None:
        target = {"older_than_ms": max(0, now_ms() - args.older_than)}
    else:
        target = {"through_seq": args.through_seq}
    require_database(url)
    with Store.open(url) as store:
        plan = store.events.plan_prune(**target)
        minimum = store.schema.minimum_compatible_level or 0
        # The floor moves, and with it the level (`EventRepository.raise_floor`).
        level_change = None
        if plan.through_seq > plan.pruned_through and minimum < PRUNED_LEVEL:
            level_change = (
                f"minimum_compatible_level {minimum} -> {PRUNED_LEVEL}: controllers older than "
                f"level {PRUNED_LEVEL} will refuse this database"
            )
        retained = store.events.plan_prune(through_seq=plan.latest_seq).events
        empties = 0 < retained == plan.events
        if args.dry_run:
            print(
                f"would prune {plan.events} event(s) through seq {plan.through_seq} "
                f"(pruned_through {plan.pruned_through}, frontier {plan.latest_seq}); nothing "
                "was deleted"
            )
            if level_change:
                print(f"would raise {level_change}")
            if empties:
                print(f"would delete every retained event ({retained}): the log would be empty")
            return 0
        if level_change and not args.allow_level_change:
            raise PruneRefused(
                f"db prune would raise {level_change}; give --allow-level-change to prune "
                "anyway (--dry-run shows what would go); nothing was deleted"
            )
        if empties and not args.allow_empty_log:
            raise PruneRefused(
                f"db prune would delete every retained event ({retained}), leaving the log "
                "empty; give --allow-empty-log to prune anyway; nothing was deleted"
            )
        deleted = store.events.prune(**target)
        print(
            f"pruned {deleted} event(s); pruned_through {store.events.pruned_through()}, "
            f"frontier {store.events.latest_seq()}"
        )
        if level_change:
            print(f"raised {level_change}")
    return 0


def _remove_ended(url: str, args: argparse.Namespace) -> int:
    """`sessions remove-ended`: in calls of at most `MAX_REMOVED` sessions (one transaction
    each), the IDs given or every ended session last saved before `--ended-before` ago (paged
    by id: a page removed does not move the next one)."""
    require_database(url)
    count = 0
    with Store.open(url) as store:
        pages: Iterator[list[str]]
        if args.ended_before is None:
            ids = sorted(set(args.ids))
            if not args.dry_run:  # all or none of the IDs, unless one changes meanwhile
                for page in _id_pages(ids):
                    _would_remove(store, page)
            pages = _id_pages(ids)
        else:
            # As `db prune --older-than`: an age beyond the epoch is the epoch (nothing older).
            cutoff = datetime.fromtimestamp(max(0, now_ms() - args.ended_before) / 1000, UTC)
            pages = _ended_pages(store, cutoff)
        try:
            for page in pages:
                if args.dry_run:
                    count += _would_remove(store, page)
                else:
                    count += len(store.sessions.remove_ended(page, sessions_dir=args.sessions_dir))
        except SessionJournalError:
            if count and not args.dry_run:  # earlier calls committed: say what they removed
                print(f"removed {count} session(s) before the call that failed")
            raise
    print(f"{'would remove' if args.dry_run else 'removed'} {count} session(s)")
    return 0


def _id_pages(ids: list[str]) -> Iterator[list[str]]:
    """The IDs in calls of at most `MAX_REMOVED`."""
    return (ids[at : at + MAX_REMOVED] for at in range(0, len(ids), MAX_REMOVED))


def _ended_pages(store: Store, cutoff: datetime) -> Iterator[list[str]]:
    after = None
    while page := store.sessions.list_ended(updated_before=cutoff, after_id=after):
        yield page
        after = page[-1]


def _would_remove(store: Store, ids: list[str]) -> int:
    """How many of `ids` `remove_ended` would remove now, read without writing; the same
    `LifecycleConflict` if one of them has not ended."""
    found = [record for record in map(store.sessions.get, ids) if record is not None]
    check_ended({record.id: record.state for record in found})
    return len(found)


def _print_stats(found: maintenance.DatabaseStats) -> None:
    print(f"sessions: {found.sessions}")
    print(f"events: {found.events}")
    print(f"pruned_through: {found.pruned_through}")
    print(f"frontier: {found.latest_seq}")
    print(f"size_on_disk: {found.size_bytes} bytes")
    if found.free_bytes is not None:
        print(f"free: {found.free_bytes} bytes (db vacuum gives them back)")


def _history(current: str | None) -> None:
    """One line per revision, oldest first: `* ` marks the database's, `  ` the others."""
    known = migrations.revisions()
    for revision in known:
        mark = "* " if revision.revision == current else "  "
        note = " (current)" if revision.revision == current else ""
        print(f"{mark}{revision.revision}{note}: {revision.summary}")
    if current is None:
        print("  (the database has no revision: no schema)")
    elif current not in {revision.revision for revision in known}:
        print(f"* {current} (current): a revision of newer code")


def shown_url(url: str) -> str:
    """The URL as the CLI prints it: the password masked."""
    return sa.make_url(url).render_as_string(hide_password=True)


def _status(url: str) -> migrations.SchemaStatus:
    options = StoreOptions.from_env()  # bad settings are named before the URL is looked at
    require_database(url)  # a read-only command never creates a database
    return migrations.status_at(url, options, role="reader")


def _events(url: str, args: argparse.Namespace) -> int:
    # Checked by the store (InvalidRecord, one line); repeated types are merged here.
    types = None if args.types is None else tuple(sorted(set(args.types)))
    event_filter = ApiEventFilter.model_construct(
        session_id=args.session, workspace_id=args.workspace, types=types
    )
    remaining = args.limit
    with _interrupt_flag(args.follow) as interrupt, Store.open(url) as store:
        if args.follow:
            _follow(store, event_filter, args, interrupt)
            return 0
        cursor = 0 if args.after is None else args.after
        while remaining is None or remaining > 0:
            # The JSON path: each event's JSON from the stored text, nothing decoded for a
            # canonical body (the same bytes as `model_dump_json()` of the typed event).
            texts, cursor, _, _ = store.events.load_json_events(
                event_filter, after_seq=cursor, limit=min(remaining or MAX_PAGE, MAX_PAGE)
            )
            if not texts:
                break
            print("\n".join(texts))
            if remaining is not None:
                remaining -= len(texts)
    return 0


def _follow(
    store: Store, event_filter: ApiEventFilter, args: argparse.Namespace, interrupt: _Interrupt
) -> None:
    """Print events as they commit until Ctrl-C (or `--limit` events). The follower wakes on
    each commit; it looks at the Ctrl-C flag every `_WAKE_S` without reading the log, and reads
    the log again at least every `--interval` seconds even if nothing woke it."""
    remaining = args.limit
    limit = min(remaining or MAX_PAGE, MAX_PAGE)
    with store.events.follow(event_filter, after_seq=args.after, limit=limit) as follower:
        follower.reread_s = args.interval
        while (remaining is None or remaining > 0) and not interrupt.requested:
            page = follower.next_page(timeout=_WAKE_S)
            if page is None:  # nothing yet: look at the Ctrl-C flag again
                continue
            for event in page.events[:remaining]:
                print(event.model_dump_json(), flush=True)
            if remaining is not None:
                remaining -= min(remaining, len(page.events))


class _Interrupt:
    """Ctrl-C (SIGINT) or SIGTERM (a service manager stopping it) while following: the
    handler only records it.

    Python runs a handler in the main thread between two bytecodes, wherever that thread is,
    possibly holding a lock (`threading.Event.wait` holds its condition's lock on the way in
    and out): a handler that took a lock could wait forever for its own thread. So it sets an
    attribute and nothing else, and the loop looks at it between polls, never in the middle of
    a query or a line.
    """

    def __init__(self) -> None:
        self.requested = False

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.requested = True


@contextmanager
def _interrupt_flag(follow: bool) -> Iterator[_Interrupt]:
    interrupt = _Interrupt()
    # Only the main thread may set handlers, and only it receives the signals anyway.
    if not follow or threading.current_thread() is not threading.main_thread():
        yield interrupt
        return
    previous = {number: signal.signal(number, interrupt) for number in _STOPPING}
    try:
        yield interrupt
    finally:
        for number, handler in previous.items():
            # None: the previous handler was not installed from Python and cannot be put back.
            signal.signal(number, signal.SIG_DFL if handler is None else handler)


_STOPPING = (signal.SIGINT, signal.SIGTERM)  # a follower stops as cleanly for either


def _journal(command: str, path: str) -> int:
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


def _search(url: str, args: argparse.Namespace) -> int:
    # Python decodes argv bytes that are not UTF-8 to lone surrogates (U+DC80-U+DCFF), which
    # the index refuses; name the byte the user typed rather than the surrogate.
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


def _demo(url: str, *, into_existing: bool) -> int:
    print(f"# database: {shown_url(url)}")
    with Store.open(url, upgrade=True) as store:
        foreign = [s.id for s in store.sessions.list() if s.id not in DEMO_SESSIONS]
        if foreign and not into_existing:
            raise DemoRefused(
                f"the database {shown_url(url)} holds {len(foreign)} session(s) the demo did not "
                "create; run the demo on another database, or pass --into-existing"
            )
        events = run_demo(store, lambda line: print(f"# {line}"))
    print(f"# a client following the feed sees {len(events)} new events:")
    for event in events:
        print(event.model_dump_json())
    return 0
