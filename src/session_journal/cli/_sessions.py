"""`session-journal sessions remove-ended`."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from datetime import UTC, datetime

from .._clock import now_ms
from ..errors import SessionJournalError
from ..services.sessions import MAX_REMOVED, check_ended
from ..storage.engines import require_database
from ..store import Store


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
