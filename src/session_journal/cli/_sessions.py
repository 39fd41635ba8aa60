"""`session-journal sessions list` and `session-journal sessions remove-ended`."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from datetime import UTC, datetime

from .._clock import now_ms
from ..errors import SessionJournalError
from ..records import SessionState, SessionSummary
from ..services.sessions import MAX_REMOVED, MAX_SESSION_PAGE, check_ended
from ..storage.engines import require_database
from ..store import Store
from ._types import Commands, bounded_int, duration


def add_sessions_commands(commands: Commands) -> None:
    """`sessions list` and `sessions remove-ended`."""
    sessions = commands.add_parser("sessions", help="sessions").add_subparsers(
        dest="sessions_command", required=True
    )
    _add_list(sessions)
    _add_remove_ended(sessions)


def _add_remove_ended(sessions: Commands) -> None:
    remove = sessions.add_parser(
        "remove-ended",
        help="remove ended sessions (closed, error) with their events and everything else",
    )
    remove.add_argument("ids", nargs="*", metavar="ID", help="the sessions to remove")
    remove.add_argument(
        "--ended-before",
        type=duration,
        metavar="DURATION",
        help="instead of IDs: every ended session last saved more than DURATION ago (30d, 12h)",
    )
    remove.add_argument(
        "--sessions-dir",
        metavar="DIR",
        help="also delete DIR/<id>, each removed session's directory, after the commit",
    )
    remove.add_argument(
        "--dry-run", action="store_true", help="print the sessions that would go; remove nothing"
    )

    def one_target(args: argparse.Namespace) -> None:
        if bool(args.ids) == (args.ended_before is not None):
            remove.error("give session IDs or --ended-before, one of the two")

    remove.set_defaults(handler=remove_ended_command, check=one_target)


def remove_ended_command(url: str, args: argparse.Namespace) -> int:
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
                    for session_id in _would_remove(store, page):
                        print(f"would remove {session_id}")
                        count += 1
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


def _would_remove(store: Store, ids: list[str]) -> list[str]:
    """Which of `ids` `remove_ended` would remove now, read without writing; the same
    `LifecycleConflict` if one of them has not ended."""
    found = [record for record in map(store.sessions.get, ids) if record is not None]
    check_ended({record.id: record.state for record in found})
    return [record.id for record in found]


LIST_COLUMNS = ("ID", "WORKSPACE", "PROJECT", "STATE", "CREATED", "UPDATED")
"""The columns of `sessions list`'s table."""


def _add_list(sessions: Commands) -> None:
    listed = sessions.add_parser(
        "list", help="list sessions, newest first (a table, or JSON lines with --json)"
    )
    listed.add_argument("--workspace", help="only sessions of this workspace")
    listed.add_argument(
        "--state",
        choices=[state.value for state in SessionState],
        metavar="STATE",
        help=f"only sessions in this state: {', '.join(SessionState)}",
    )
    listed.add_argument(
        "--before",
        metavar="CURSOR",
        help="the sessions after the previous page (the cursor it printed last)",
    )
    listed.add_argument(
        "--limit",
        type=bounded_int(MAX_SESSION_PAGE),
        default=50,
        metavar="N",
        help=f"at most N sessions, 1 to {MAX_SESSION_PAGE} (default 50)",
    )
    listed.add_argument(
        "--json", action="store_true", help="one JSON object per session instead of a table"
    )
    listed.set_defaults(handler=list_command)


def list_command(url: str, args: argparse.Namespace) -> int:
    """`sessions list`: one page of `store.sessions.page` (newest first), as a table or, with
    `--json`, one JSON object per session; then the cursor of the next page, if any."""
    require_database(url)
    with Store.open(url) as store:
        page = store.sessions.page(
            workspace_id=args.workspace,
            state=None if args.state is None else SessionState(args.state),
            before=args.before,
            limit=args.limit,
        )
    if args.json:
        for summary in page.sessions:
            print(summary.model_dump_json())
        if page.next_before is not None:
            print(json.dumps({"next_before": page.next_before}))
        return 0
    rows = [LIST_COLUMNS, *map(_row, page.sessions)]
    widths = [max(len(row[column]) for row in rows) for column in range(len(LIST_COLUMNS))]
    for row in rows:
        print(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )
    if page.next_before is not None:
        print(f"next page: --before {page.next_before}")
    return 0


def _row(summary: SessionSummary) -> tuple[str, ...]:
    record = summary.session
    return (
        record.id,
        record.workspace_id,
        record.project_id,
        record.state.value,
        _utc(summary.created_at),
        _utc(summary.updated_at),
    )


def _utc(moment: datetime) -> str:
    """A time as `2026-01-31T12:00:00Z` (UTC, to the second)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
